//! What a call can fail with: the service's own answer ([`ServiceApiError`]), or the
//! exchange itself.

use serde_json::Value;

/// An error answered by the service in its envelope `{"error": {"code", "message",
/// "status"}}`: the Rust face of the seed's `ServiceApiError`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} ({status}): {message}")]
pub struct ServiceApiError {
    /// The HTTP status.
    pub status: u16,
    /// The envelope's machine-readable code, e.g. `MEMORY_NOT_FOUND` (`HTTP_<status>` when
    /// the body was not an envelope).
    pub code: String,
    /// The envelope's sentence for people.
    pub message: String,
    /// The whole parsed body (`null` when it was not JSON).
    pub body: Value,
    /// How long the service asked to wait before a retry (`Retry-After`, on 429 and 503).
    pub retry_after: Option<std::time::Duration>,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service answered with an error status.
    #[error(transparent)]
    Api(#[from] ServiceApiError),
    /// The service could not be reached, or the connection broke off.
    #[error("cannot reach the service at {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No answer came within the timeout.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout { url: String, timeout: std::time::Duration },
    /// The answer was not what the API documents.
    #[error("unexpected answer from {url}: {message}")]
    Decode { url: String, message: String },
    /// The client's options are not usable (a bad base URL or header).
    #[error("invalid client options: {0}")]
    Options(String),
}

impl Error {
    /// The service's error, when it answered one.
    pub fn api(&self) -> Option<&ServiceApiError> {
        match self {
            Error::Api(error) => Some(error),
            _ => None,
        }
    }

    /// The envelope's code (`MEMORY_NOT_FOUND`, …), when the service answered one.
    pub fn code(&self) -> Option<&str> {
        self.api().map(|error| error.code.as_str())
    }

    /// The HTTP status, when the service answered.
    pub fn status(&self) -> Option<u16> {
        self.api().map(|error| error.status)
    }
}

impl ServiceApiError {
    /// The request's id the service gave (`error.requestId`): quote it when reporting a
    /// failure, the daemon's log lines of the request carry it.
    pub fn request_id(&self) -> Option<&str> {
        self.body["error"]["requestId"].as_str()
    }

    /// The error a response of `status` with `body` carries.
    pub(crate) fn from_body(status: u16, bytes: &[u8]) -> ServiceApiError {
        let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        let text = |field: &str| body["error"][field].as_str().map(str::to_owned);
        ServiceApiError {
            status,
            code: text("code").unwrap_or_else(|| format!("HTTP_{status}")),
            message: text("message").unwrap_or_else(|| {
                let text = String::from_utf8_lossy(bytes);
                if text.trim().is_empty() { format!("HTTP {status}") } else { text.into_owned() }
            }),
            body,
            retry_after: None,
        }
    }

    /// The error an `event: error` frame of a stream carries (its status is the envelope's).
    pub(crate) fn from_frame(data: &str) -> ServiceApiError {
        let error = ServiceApiError::from_body(500, data.as_bytes());
        let status = error.body["error"]["status"].as_u64().and_then(|s| u16::try_from(s).ok());
        ServiceApiError { status: status.unwrap_or(500), ..error }
    }
}
