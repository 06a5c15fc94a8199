//! [`ApiError`]: an error code, a message and extra headers, answered in the error envelope.

use cairn_types::{ErrorCode, ErrorEnvelope};
use http::{HeaderName, HeaderValue, Response, StatusCode};

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
    pub fn method_not_allowed(method: &http::Method, path: &str, allow: &'static str) -> ApiError {
        let message = format!("{method} is not allowed on `{path}`; allowed: {allow}");
        ApiError::new(ErrorCode::MethodNotAllowed, message)
            .with_header(http::header::ALLOW, HeaderValue::from_static(allow))
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
        let mut response = json_response(status, &ErrorEnvelope::new(self.code, self.message));
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}
