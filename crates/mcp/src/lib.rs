//! Cairn's Model Context Protocol server (the official Rust SDK, `rmcp`): twenty tools that
//! give an agent Cairn's memory, each one a call of the daemon's HTTP API through
//! `cairn-client`.
//!
//! Two transports serve the same tools: stdio ([`serve_stdio`], `cairn mcp`), and
//! streamable HTTP ([`McpHttp`], mounted by the daemon at `/mcp`). Over HTTP each call
//! carries the caller's own credentials (`X-API-Key` or `Authorization`) to the API, so
//! the daemon's roles and rate limits apply to tools exactly as to the routes they call.
//!
//! Results come as text (what a model reads) and as structured content (the API's JSON).
//! An API error (an unknown id, a bad scope, a missing role) is a tool error carrying the
//! code and message, never a protocol failure.

mod tools;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use cairn_client::Client;
use http_body_util::combinators::BoxBody;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use crate::tools::{CairnTools, TOOL_NAMES};

/// Serves the tools on standard input and output until the client goes away.
pub async fn serve_stdio(client: Client) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let running = CairnTools::new(client).serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// The tools over streamable HTTP, for a server to mount (the daemon's `/mcp`).
///
/// Stateless: every request is served on its own and answered with JSON, so no session
/// outlives a request and none can be borrowed by another caller. The server
/// authenticates the request before handing it over; the credentials it carries go with
/// every API call its tools make. Host and origin checks are the server's too.
#[derive(Clone)]
pub struct McpHttp {
    service: Arc<StreamableHttpService<CairnTools, NeverSessionManager>>,
}

impl std::fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttp").finish_non_exhaustive()
    }
}

impl McpHttp {
    /// Tools that call the API through `client` (the daemon's own address).
    pub fn new(client: Client) -> McpHttp {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .disable_allowed_hosts();
        let service = StreamableHttpService::new(
            move || Ok(CairnTools::new(client.clone())),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        McpHttp { service: Arc::new(service) }
    }

    /// Answers one MCP request.
    pub async fn handle<B>(
        &self,
        request: http::Request<B>,
    ) -> http::Response<BoxBody<Bytes, Infallible>>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Display,
    {
        self.service.handle(request).await
    }
}
