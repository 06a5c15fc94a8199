//! Cairn's conversation runtime: the [`Runtime`] trait, the default runtime
//! ([`DefaultRuntime`], persistent in Cairn's storage and answering from its memory engine),
//! and the HTTP handler ([`RuntimeHandler`]) that any hyper or axum server can mount.
//!
//! ```no_run
//! # async fn example(runtime: std::sync::Arc<dyn cairn_runtime::Runtime>) {
//! use cairn_runtime::HandlerOptions;
//! let handler = HandlerOptions::new(runtime).base_path("/api/runtime").build().unwrap();
//! // In a hyper service: `handler.handle(request).await`.
//! # }
//! ```

pub mod channel;
pub mod cors;
mod default;
pub mod events;
pub mod handler;
pub mod journey;
pub mod llm;
mod runtime;
mod sse;
pub mod support;

pub use crate::cors::{Cors, CorsOptions};
pub use crate::default::{DefaultRuntime, RuntimeConfig};
pub use crate::events::{EventDefinition, EventDefinitions};
pub use crate::handler::{Authorization, Authorize, HandlerOptions, Operation, RuntimeHandler};
pub use crate::runtime::*;
