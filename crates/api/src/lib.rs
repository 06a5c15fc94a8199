//! Cairn's memory HTTP API as a plain handler: `http::Request<B>` in, `http::Response` out.
//!
//! Any server can mount [`MemoryApi::handle`]: the daemon's hyper transport does, and so can
//! an axum or hyper application of the user's. The handler reads the body itself (within a
//! size limit), routes by the table in [`routes`], and answers every failure in the error
//! envelope `{"error": {"code", "message", "status"}}`.

mod error;
mod handlers;
pub mod http_util;
mod openapi;
pub mod routes;

use std::sync::Arc;
use std::time::Instant;

use cairn_memory::Engine;
use http::{Request, Response};

pub use crate::error::ApiError;
pub use crate::http_util::ResponseBody;
pub use crate::openapi::openapi_json;

/// The largest request body accepted, in bytes: a 64 KiB memory plus metadata and slack.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Options of the memory API handler.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub max_body_bytes: usize,
}

impl Default for ApiConfig {
    fn default() -> ApiConfig {
        ApiConfig { max_body_bytes: DEFAULT_MAX_BODY_BYTES }
    }
}

/// The memory API handler. Cheap to clone; clones share the engine.
#[derive(Clone)]
pub struct MemoryApi {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    config: ApiConfig,
    started: Instant,
}

impl MemoryApi {
    pub fn new(engine: Engine, config: ApiConfig) -> MemoryApi {
        MemoryApi { inner: Arc::new(Inner { engine, config, started: Instant::now() }) }
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Answers one request. Never fails: errors become responses in the error envelope.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let resolved = routes::resolve(request.method(), request.uri().path())
            .map(|(operation, id)| (operation, id.map(str::to_owned)));
        let reply = match resolved {
            Ok((operation, id)) => {
                handlers::dispatch(&self.inner, operation, id.as_deref(), request).await
            }
            Err(error) => Err(error),
        };
        reply.unwrap_or_else(ApiError::into_response)
    }
}
