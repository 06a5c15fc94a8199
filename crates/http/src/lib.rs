//! What Cairn's HTTP handlers share, so the memory API and the conversation runtime answer
//! alike: [`ApiError`], the error envelope `{"error": {"code", "message", "status"}}` as a
//! response; [`read_body`], a request body within a size limit; [`parse_json`] and
//! [`parse_query`], whose errors name the field at fault; [`match_path`], a path against a
//! route pattern; and [`ResponseBody`], the body type every handler returns.
//!
//! It knows `http` and `http-body`, nothing of sockets, servers or either API.

mod body;
mod error;

pub use crate::body::{
    BodyBusy, BodyTimeout, ResponseBody, bytes_response, json_response, parse_json, parse_query,
    read_body,
};
pub use crate::error::{ApiError, REQUEST_ID, with_request_id};

/// Who a request was let through as (a principal's id: `key:…`, `jwt:<sub>`, `token:…`,
/// `local:…`; never a secret): a handler puts it in its response's extensions for the
/// server's access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

/// Completes when the credential a request was let through with stops being valid (revoked,
/// expired): what the memory API's authentication hands the runtime, so the streams and
/// sockets opened with the credential end with it.
pub type CredentialEnds = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// `Some(id)` when `path` fits the route pattern `pattern` (`{id}` stands for one non-empty
/// segment); the inner option is the `{id}` segment, if any. Both APIs route with it.
/// Compares the literal parts in place (no splitting: this runs for every route on every
/// request, `GET /api/health` included).
pub fn match_path<'p>(pattern: &str, path: &'p str) -> Option<Option<&'p str>> {
    let (mut pattern, mut path, mut id) = (pattern, path, None);
    loop {
        // A byte search: `{` appears in patterns only as `{id}`.
        let Some(at) = pattern.find('{') else {
            return (pattern == path).then_some(id);
        };
        // `{id}` is a whole segment: what comes before it ends with `/`.
        let rest = path.strip_prefix(&pattern[..at])?;
        let end = rest.find('/').unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        id = Some(&rest[..end]);
        (pattern, path) = (&pattern[at + "{id}".len()..], &rest[end..]);
    }
}
