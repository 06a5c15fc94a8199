//! End-to-end tests: each starts the real `cairn` binary on a free port with a temporary
//! data directory and talks to it over HTTP, as a user's agent would.

mod auth;
mod backup;
mod batch;
mod cli;
mod client;
mod connectors;
mod dream;
mod governance;
mod guards;
mod hardening;
mod hooks;
mod memories;
mod operations;
mod retrieval;
mod retrieval_semantic;
mod runtime;
mod scale_out;
mod system;
mod trust;
mod util;
mod voice;
