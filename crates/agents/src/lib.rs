//! Cairn's agents: the daemon's default conversation runtime ([`DefaultRuntime`]), an
//! implementation of `cairn_runtime::Runtime` over Cairn's storage and memory engine.
//!
//! Agents and their journeys come from definition files ([`journey`]): journey states say
//! text, open widget prompts and move on intents, events and widget outputs. Questions are
//! answered from the memory engine with support references ([`support`]), and an optional
//! OpenAI-compatible chat-completions endpoint ([`llm`]) writes the replies. Conversations,
//! their event log, snapshots and prompts persist through `cairn_store::ConversationStore`.
//!
//! ```no_run
//! # fn example(store: std::sync::Arc<dyn cairn_store::ConversationStore>, engine: cairn_memory::Engine) {
//! use std::sync::Arc;
//! use cairn_agents::{DefaultRuntime, RuntimeConfig};
//! let runtime = DefaultRuntime::new(store, Some(engine), RuntimeConfig::default());
//! let handler = cairn_runtime::HandlerOptions::new(Arc::new(runtime)).build().unwrap();
//! # }
//! ```

pub mod events;
pub mod journey;
pub mod llm;
mod runtime;
pub mod support;
pub mod voice;
pub mod widget;

pub use crate::events::{bundled_events, journey_events_for};
pub use crate::runtime::{DefaultRuntime, RuntimeConfig};
