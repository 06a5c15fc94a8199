//! What Cairn's HTTP handlers share, so the memory API and the conversation runtime answer
//! alike: [`ApiError`], the error envelope `{"error": {"code", "message", "status"}}` as a
//! response; [`read_body`], a request body within a size limit; [`parse_json`] and
//! [`parse_query`], whose errors name the field at fault; and [`ResponseBody`], the body
//! type every handler returns.
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
