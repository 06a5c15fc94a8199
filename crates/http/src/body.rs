//! Reading requests and writing responses: bodies within a limit, JSON with field-naming
//! errors, query strings, and the response body type every Cairn handler returns.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use serde::Serialize;
use serde::de::DeserializeOwned;

use cairn_types::ErrorCode;

use crate::ApiError;

/// What a transport's body yields when the body did not all arrive in time; [`read_body`]
/// answers it with 408 `REQUEST_TIMEOUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout(pub std::time::Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body did not arrive within {} s", self.0.as_secs_f64())
    }
}

impl std::error::Error for BodyTimeout {}

/// What a transport's body yields when the daemon's budget of body bytes being read at once
/// is spent; [`read_body`] answers it with 503 `SERVER_BUSY` and `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyBusy;

impl std::fmt::Display for BodyBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the daemon is reading as many request bodies as it may at once; retry shortly")
    }
}

impl std::error::Error for BodyBusy {}

/// The body type of every response: any `http_body::Body` of bytes, boxed.
pub type ResponseBody = BoxBody<Bytes, Infallible>;

/// A response with a JSON body.
pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response<ResponseBody> {
    let body = serde_json::to_vec(value).expect("response types always serialize");
    bytes_response(status, "application/json", Bytes::from(body))
}

/// A response with a body already in bytes.
pub fn bytes_response(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Oversized bodies up to this size, or up to twice the limit when that is more (the 16 MiB
/// of a memory batch), are read and dropped before the 413 is sent.
const DRAIN_LIMIT: u64 = 16 * 1024 * 1024;

/// Reads a whole body, refusing more than `limit` bytes with 413 `PAYLOAD_TOO_LARGE`.
pub async fn read_body<B>(
    headers: &http::HeaderMap,
    body: B,
    limit: usize,
) -> Result<Bytes, ApiError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || {
        ApiError::payload_too_large(format!("the request body is over the limit of {limit} bytes"))
    };
    let declared =
        headers.get(CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if let Some(length) = declared.filter(|length| *length > limit as u64) {
        // Read and drop a moderately oversized body before answering, so the client, still
        // sending, gets to read the 413 instead of a reset connection.
        if length <= DRAIN_LIMIT.max(2 * limit as u64) {
            let mut body = std::pin::pin!(body);
            while let Some(Ok(_)) = body.frame().await {}
        }
        return Err(too_large());
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(too_large()),
        Err(error) if error.is::<BodyTimeout>() => {
            Err(ApiError::new(ErrorCode::RequestTimeout, error.to_string()))
        }
        Err(error) if error.is::<BodyBusy>() => {
            Err(ApiError::new(ErrorCode::ServerBusy, error.to_string())
                .with_header(http::header::RETRY_AFTER, HeaderValue::from_static("1")))
        }
        Err(error) => {
            Err(ApiError::validation(format!("the request body could not be read: {error}")))
        }
    }
}

/// Parses a JSON object body into `T`; errors name the field at fault, as `field: problem`.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    match body.iter().find(|byte| !byte.is_ascii_whitespace()) {
        None => {
            return Err(ApiError::validation(
                "the request body is empty; a JSON object is expected",
            ));
        }
        Some(b'{') => {}
        // Structs would also accept arrays of their fields in order; nobody means that.
        Some(_) => return Err(ApiError::validation("body: a JSON object is expected")),
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::validation(format!("the request body is not valid JSON: {inner}"))
        } else if path == "." {
            ApiError::validation(format!("body: {}", plain(&inner.to_string())))
        } else {
            ApiError::validation(format!("{path}: {}", plain(&inner.to_string())))
        }
    })?;
    deserializer.end().map_err(|error| {
        ApiError::validation(format!("the request body is not valid JSON: {error}"))
    })?;
    Ok(value)
}

/// Parses a query string into `T`; errors name the parameter at fault.
pub fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    let pairs = form_urlencoded::parse(query.unwrap_or_default().as_bytes());
    let deserializer = serde_urlencoded::Deserializer::new(pairs);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            ApiError::validation(format!("query: {}", plain(&inner.to_string())))
        } else {
            ApiError::validation(format!("query parameter `{path}`: {}", plain(&inner.to_string())))
        }
    })
}

/// A deserializer's message in the caller's terms: JSON kinds, not Rust types.
fn plain(message: &str) -> String {
    const RUST_TYPES: &[(&str, &str)] = &[
        ("expected u8", "expected a whole number of 0 or more"),
        ("expected u16", "expected a whole number of 0 or more"),
        ("expected u32", "expected a whole number of 0 or more"),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a JSON array"),
        ("expected a map", "expected a JSON object"),
    ];
    if let Some(rest) = message.strip_prefix("data did not match any variant of untagged enum ") {
        return match rest.split_whitespace().next().unwrap_or_default() {
            "ChannelInput" => {
                "expected a channel: a name such as \"web\", or an object {\"type\": \"sms\", \"id\": …}"
                    .to_owned()
            }
            _ => "not one of the accepted shapes".to_owned(),
        };
    }
    let mut plain = message.to_owned();
    for (rust, json) in RUST_TYPES {
        if let Some(at) = plain.find(rust)
            && !plain[at + rust.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
        {
            plain.replace_range(at..at + rust.len(), json);
        }
    }
    if let Some(at) = plain.find(", expected struct ") {
        plain.replace_range(at.., ", expected a JSON object");
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Sample {
        limit: Option<u32>,
        nested: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        name: String,
    }

    #[test]
    fn errors_name_the_field_in_the_callers_terms() {
        let error = parse_json::<Sample>(br#"{"limit": "ten"}"#).unwrap_err();
        assert_eq!(
            error.message(),
            "limit: invalid type: string \"ten\", expected a whole number of 0 or more at line 1 column 15"
        );
        let error = parse_json::<Sample>(br#"{"nested": 3}"#).unwrap_err();
        assert!(
            error
                .message()
                .starts_with("nested: invalid type: integer `3`, expected a JSON object"),
            "{}",
            error.message()
        );
        let error = parse_query::<Sample>(Some("limit=-1")).unwrap_err();
        assert!(!error.message().contains("u32"), "{}", error.message());
        assert_eq!(
            parse_json::<Sample>(b"[]").unwrap_err().message(),
            "body: a JSON object is expected"
        );
    }

    use cairn_types::runtime::{ChannelEventInput, CreateConversationInput, SendMessageBody};
    use cairn_types::{
        ContextRequest, ErrorCode, GuardRequest, MemoryListQuery, NewMemory, SearchQuery,
    };
    use proptest::prelude::*;

    /// Any JSON, a few levels deep, with the field names the bodies use.
    fn json() -> impl Strategy<Value = serde_json::Value> {
        let names = prop::sample::select(vec![
            "content",
            "scope",
            "repo",
            "tags",
            "task",
            "tokenBudget",
            "action",
            "message",
            "channel",
            "kind",
            "text",
            "event",
            "metadata",
            "id",
            "limit",
            "x",
        ]);
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(names.clone(), inner, 0..6).prop_map(|map| {
                    serde_json::Value::Object(
                        map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                    )
                }),
            ]
        })
    }

    /// Parses a body into every kind of request; a failure is always a 422.
    fn parse_every_body(bytes: &[u8]) {
        fn check<T: serde::de::DeserializeOwned>(bytes: &[u8]) {
            if let Err(error) = parse_json::<T>(bytes) {
                assert_eq!(error.code(), ErrorCode::ValidationError, "{}", error.message());
            }
        }
        check::<NewMemory>(bytes);
        check::<ContextRequest>(bytes);
        check::<GuardRequest>(bytes);
        check::<ChannelEventInput>(bytes);
        check::<CreateConversationInput>(bytes);
        check::<SendMessageBody>(bytes);
    }

    proptest! {
        #[test]
        fn fuzz_json_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            parse_every_body(&bytes);
        }

        #[test]
        fn fuzz_structured_bodies_are_parsed_or_refused_with_422(value in json()) {
            parse_every_body(value.to_string().as_bytes());
        }

        #[test]
        fn fuzz_query_strings_never_panic(query in "[a-zA-Z=&%0-9._+-]{0,64}") {
            let errors = [
                parse_query::<MemoryListQuery>(Some(&query)).err(),
                parse_query::<SearchQuery>(Some(&query)).err(),
            ];
            for error in errors.into_iter().flatten() {
                prop_assert_eq!(error.code(), ErrorCode::ValidationError);
            }
        }
    }
}
