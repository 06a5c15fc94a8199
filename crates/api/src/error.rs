//! The one place where engine errors become HTTP statuses and codes.

use cairn_http::ApiError;
use cairn_types::ErrorCode;

/// What a handler fails with: an [`ApiError`] of its own, or an engine error mapped to one,
/// so `?` works on both.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) ApiError);

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Failure {
        Failure(error)
    }
}

impl From<cairn_memory::Error> for Failure {
    fn from(error: cairn_memory::Error) -> Failure {
        Failure(engine_error(error))
    }
}

fn engine_error(error: cairn_memory::Error) -> ApiError {
    match error {
        cairn_memory::Error::Invalid { .. } | cairn_memory::Error::InvalidItem { .. } => {
            ApiError::validation(error.to_string())
        }
        cairn_memory::Error::MemoryNotFound(_) => {
            ApiError::new(ErrorCode::MemoryNotFound, error.to_string())
        }
        cairn_memory::Error::EvidenceNotFound(_) => {
            ApiError::new(ErrorCode::EvidenceNotFound, error.to_string())
        }
        cairn_memory::Error::ConnectorNotFound(_) => {
            ApiError::new(ErrorCode::ConnectorNotFound, error.to_string())
        }
        cairn_memory::Error::ConflictNotFound(_) => {
            ApiError::new(ErrorCode::ConflictNotFound, error.to_string())
        }
        // The embedder's own words (a model error, an endpoint's URL and answer) are for the
        // daemon's log, not for clients.
        cairn_memory::Error::Embedding(detail) => {
            tracing::error!(error = %detail, "the embedder failed");
            ApiError::new(
                ErrorCode::Unavailable,
                "semantic retrieval is unavailable: the embedder failed (the daemon's log says \
                 why); retry later, or ask with `mode=fulltext`",
            )
        }
        // The engine words source errors for clients already (`SourceError::public_message`).
        cairn_memory::Error::Source(_) => ApiError::validation(error.to_string()),
        cairn_memory::Error::SyncRunning(_)
        | cairn_memory::Error::ConflictResolved(_)
        | cairn_memory::Error::NotInReview { .. } => {
            ApiError::new(ErrorCode::Conflict, error.to_string())
        }
        cairn_memory::Error::Store(source) => {
            tracing::error!(error = %source, "storage failed");
            ApiError::new(ErrorCode::InternalError, "internal error")
        }
    }
}
