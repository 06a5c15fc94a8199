//! Cairn's embeddable conversation runtime: the [`Runtime`] trait, and the HTTP handler
//! ([`RuntimeHandler`]) that any hyper or axum server can mount in front of a runtime.
//!
//! A runtime implements the capabilities it offers (most create conversations, answer user
//! messages and list events); every other operation defaults to "not supported", which the
//! handler answers with 501 `CAPABILITY_NOT_SUPPORTED`. The handler brings the routes, body
//! and query parsing, the error envelope, CORS, an `authorize` hook, custom and journey
//! event definitions checked against JSON Schemas, Server-Sent Events, and the voice socket
//! ([`voice`]: the `service.voice.v1` WebSocket, upgraded by the transport).
//!
//! This crate knows `http` types and nothing of Cairn's storage or memory engine: the wire
//! types come from [`cairn_types::runtime`] (re-exported here), and Cairn's own runtime,
//! with journeys and answers from memory, lives in `cairn-agents`. See `docs/embedding.md`.
//!
//! ```no_run
//! # async fn example(runtime: std::sync::Arc<dyn cairn_runtime::Runtime>) {
//! use cairn_runtime::HandlerOptions;
//! let handler = HandlerOptions::new(runtime).base_path("/api/runtime").build().unwrap();
//! // In a hyper service: `handler.handle(request).await`.
//! # }
//! ```
//!
//! Features: `json-schema` (default) checks event payloads against their schemas with the
//! `jsonschema` crate; `openapi` (default) adds [`openapi::document`], the OpenAPI
//! description of the handler's routes.

pub mod channel;
pub mod cors;
pub mod events;
pub mod handler;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod routes;
mod runtime;
mod sse;
pub mod voice;

pub use cairn_http::{ApiError, ResponseBody};
pub use cairn_types::runtime::*;
pub use cairn_types::{ErrorEnvelope, Timestamp};

pub use crate::cors::{Cors, CorsOptions};
pub use crate::events::{EventDefinition, EventDefinitions};
pub use crate::handler::{
    Authorization, Authorize, CredentialEnds, HandlerOptions, Operation, RuntimeHandler,
};
pub use crate::runtime::*;
pub use crate::voice::{
    VoiceHandshake, VoiceSession, VoiceSocketIo, VoiceSocketOptions, VoiceUpgrade, error_event,
    serve_voice_socket, serve_voice_socket_with, server_event,
};

/// Counts itself in a gauge (open event streams, voice sockets) while it lives.
pub(crate) struct OpenGauge(&'static str);

impl OpenGauge {
    pub(crate) fn new(name: &'static str) -> OpenGauge {
        metrics::gauge!(name).increment(1.0);
        OpenGauge(name)
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}
