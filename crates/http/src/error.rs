//! [`ApiError`]: an error code, a message and extra headers, answered in the error envelope.

use cairn_types::{ErrorCode, ErrorEnvelope};
use http::{HeaderName, HeaderValue, Response, StatusCode};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

use crate::body::{ResponseBody, json_response};

/// An error answered in the envelope. Build with the constructors.
#[derive(Debug, Clone)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into(), headers: Vec::new() }
    }

    pub fn validation(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::ValidationError, message)
    }

    pub fn payload_too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::PayloadTooLarge, message)
    }

    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(ErrorCode::NotFound, format!("no route for `{path}`; see GET /openapi.json"))
    }

    /// 405, with the `Allow` header listing the methods the path takes.
    pub fn method_not_allowed(method: &http::Method, path: &str, allow: &str) -> ApiError {
        let message = format!("{method} is not allowed on `{path}`; allowed: {allow}");
        let error = ApiError::new(ErrorCode::MethodNotAllowed, message);
        match HeaderValue::from_str(allow) {
            Ok(allow) => error.with_header(http::header::ALLOW, allow),
            Err(_) => error,
        }
    }

    /// Adds a header to the error response.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.push((name, value));
        self
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn into_response(self) -> Response<ResponseBody> {
        let status =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let envelope = ErrorEnvelope::new(self.code, self.message);
        let mut response = json_response(status, &envelope);
        // Kept beside the body, so that a server can add the request's id without parsing it
        // (see [`with_request_id`]).
        response.extensions_mut().insert(envelope);
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// `response` with `id` as its `X-Request-Id` header and, when it is an [`ApiError`]'s answer,
/// as the `requestId` of its error envelope.
pub fn with_request_id(
    mut response: Response<ResponseBody>,
    id: &HeaderValue,
) -> Response<ResponseBody> {
    if let Some(mut envelope) = response.extensions_mut().remove::<ErrorEnvelope>() {
        envelope.error.request_id = id.to_str().ok().map(str::to_owned);
        let body = serde_json::to_vec(&envelope).expect("the envelope always serializes");
        *response.body_mut() = Full::new(Bytes::from(body)).boxed();
        response.headers_mut().remove(http::header::CONTENT_LENGTH);
    }
    response.headers_mut().insert(REQUEST_ID, id.clone());
    response
}

/// The header that names a request: the client's when it sent one of sane shape, else the
/// server's own.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
