//! The error envelope every API response uses: `{"error": {"code", "message", "status"}}`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Machine-readable error codes, each tied to one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is not one the route can take at the protocol level, e.g. a WebSocket
    /// handshake that is incomplete or asks for another subprotocol.
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MemoryNotFound,
    EvidenceNotFound,
    ConnectorNotFound,
    ConflictNotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    RequestTimeout,
    ValidationError,
    RateLimited,
    InternalError,
    Unavailable,
    /// The daemon is at a bound of its own (bodies being read at once, turns waiting): retry
    /// after `Retry-After`.
    ServerBusy,
    ConversationNotFound,
    PromptNotFound,
    ConversationClosed,
    CapabilityNotSupported,
    /// An `Idempotency-Key` sent again with another request (method, path or body).
    IdempotencyKeyReused,
    /// An `Idempotency-Key` whose first request is still running: retry after `Retry-After`.
    IdempotencyKeyInUse,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::MemoryNotFound => "MEMORY_NOT_FOUND",
            ErrorCode::EvidenceNotFound => "EVIDENCE_NOT_FOUND",
            ErrorCode::ConnectorNotFound => "CONNECTOR_NOT_FOUND",
            ErrorCode::ConflictNotFound => "CONFLICT_NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::RequestTimeout => "REQUEST_TIMEOUT",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::Unavailable => "SERVICE_UNAVAILABLE",
            ErrorCode::ServerBusy => "SERVER_BUSY",
            ErrorCode::ConversationNotFound => "CONVERSATION_NOT_FOUND",
            ErrorCode::PromptNotFound => "PROMPT_NOT_FOUND",
            ErrorCode::ConversationClosed => "CONVERSATION_CLOSED",
            ErrorCode::CapabilityNotSupported => "CAPABILITY_NOT_SUPPORTED",
            ErrorCode::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            ErrorCode::IdempotencyKeyInUse => "IDEMPOTENCY_KEY_IN_USE",
        }
    }

    /// The HTTP status code that goes with this error code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound
            | ErrorCode::MemoryNotFound
            | ErrorCode::EvidenceNotFound
            | ErrorCode::ConnectorNotFound
            | ErrorCode::ConflictNotFound
            | ErrorCode::ConversationNotFound
            | ErrorCode::PromptNotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict
            | ErrorCode::ConversationClosed
            | ErrorCode::IdempotencyKeyReused
            | ErrorCode::IdempotencyKeyInUse => 409,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::ValidationError => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::InternalError => 500,
            ErrorCode::CapabilityNotSupported => 501,
            ErrorCode::Unavailable | ErrorCode::ServerBusy => 503,
        }
    }
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// What went wrong: a machine-readable `code`, a sentence for people, and the HTTP status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// One of `UNAUTHORIZED`, `FORBIDDEN`, `NOT_FOUND`, `MEMORY_NOT_FOUND`, `EVIDENCE_NOT_FOUND`,
    /// `CONNECTOR_NOT_FOUND`, `CONFLICT_NOT_FOUND`,
    /// `METHOD_NOT_ALLOWED`, `REQUEST_TIMEOUT`, `CONFLICT`, `PAYLOAD_TOO_LARGE`, `VALIDATION_ERROR`, `RATE_LIMITED`, `INTERNAL_ERROR`, `SERVICE_UNAVAILABLE`, `SERVER_BUSY`, `IDEMPOTENCY_KEY_REUSED`, `IDEMPOTENCY_KEY_IN_USE`; the runtime adds `CONVERSATION_NOT_FOUND`,
    /// `PROMPT_NOT_FOUND`, `CONVERSATION_CLOSED`, `CAPABILITY_NOT_SUPPORTED` and, for the voice
    /// socket's handshake, `BAD_REQUEST`.
    #[schema(example = "VALIDATION_ERROR")]
    pub code: String,
    #[schema(
        example = "scope: unknown variant `team`, expected one of `repo`, `user`, `global`, `task`"
    )]
    pub message: String,
    /// The same number as the HTTP status code.
    #[schema(example = 422)]
    pub status: u16,
    /// The request's id, as its `X-Request-Id` response header gives it and the daemon's log
    /// lines carry it: quote it when reporting a failure.
    #[serde(rename = "requestId", default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "req_01jd8x6v1f3kq9z2m4n5p6r7s8")]
    pub request_id: Option<String>,
}

impl ErrorEnvelope {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorEnvelope {
        ErrorEnvelope {
            error: ErrorBody {
                code: code.as_str().to_owned(),
                message: message.into(),
                status: code.status(),
                request_id: None,
            },
        }
    }
}
