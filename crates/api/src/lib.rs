//! Cairn's memory HTTP API as a plain handler: `http::Request<B>` in, `http::Response` out.
//!
//! Any server can mount [`MemoryApi::handle`]: the daemon's hyper transport does, and so can
//! an axum or hyper application of the user's. The handler reads the body itself (within a
//! size limit), routes by the table in [`routes`], and answers every failure in the error
//! envelope `{"error": {"code", "message", "status"}}`.

mod auth;
mod error;
mod handlers;
mod limits;
pub mod openapi;
pub mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cairn_memory::Engine;
use cairn_store::KeyStore;
use cairn_types::{ErrorCode, Role};
use http::{Request, Response};

use crate::routes::Operation;

pub use crate::auth::{
    AuthConfig, CONVERSATION_TOKEN_PREFIX, CREDENTIAL_CHECK, CredentialEnds, JwtVerifier,
    PeerAccount, Principal, Profile, hash_key, new_api_key,
};
pub use crate::limits::{RateClass, RateLimits};
pub use crate::openapi::openapi_json;
pub use cairn_http::{ApiError, ResponseBody};

/// The path of the health report, which [`MemoryApi::answer_now`] answers at once.
pub(crate) const HEALTH_PATH: &str = "/api/health";

/// Refuses a caller whose role is below `needed`.
fn has_role(role: Role, needed: Role) -> Result<(), ApiError> {
    if role < needed {
        let message = format!("this operation needs the `{needed}` role; the caller has `{role}`");
        return Err(ApiError::new(ErrorCode::Forbidden, message));
    }
    Ok(())
}

/// A handler's reply as the response to send, with the caller's rate-limit headers.
fn finish(reply: handlers::Reply, rate: Option<limits::RateState>) -> Response<ResponseBody> {
    let mut response = reply.unwrap_or_else(|failure| failure.0.into_response());
    for (name, value) in rate.map(limits::RateState::headers).into_iter().flatten() {
        response.headers_mut().insert(name, value);
    }
    response
}

/// `response`, telling the server's access log who the request was let through as.
fn with_caller(
    mut response: Response<ResponseBody>,
    caller: cairn_http::Caller,
) -> Response<ResponseBody> {
    response.extensions_mut().insert(caller);
    response
}

/// The largest request body accepted, in bytes: a 64 KiB memory plus metadata and slack.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest body of `POST /api/memories/batch`, in bytes, whatever `max_body_bytes` is.
pub const MAX_BATCH_BODY_BYTES: usize = 16 * 1024 * 1024;
/// A batch spends one write request of its caller's rate limit per this many memories
/// (rounded up).
pub const MEMORIES_PER_WRITE_REQUEST: usize = 100;

/// Options of the memory API handler.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub max_body_bytes: usize,
    pub auth: AuthConfig,
    pub rate_limits: RateLimits,
    /// The document served at `GET /openapi.json`: this API's alone by default; a server
    /// that mounts other handlers beside it serves one that describes them too.
    pub openapi: Bytes,
    /// The build, as health's `build` says it: the version and, when the binary knows it,
    /// the git commit (`0.1.0+3f2a1bc`).
    pub build: String,
}

impl Default for ApiConfig {
    fn default() -> ApiConfig {
        ApiConfig {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            auth: AuthConfig::default(),
            rate_limits: RateLimits::default(),
            openapi: openapi_json(),
            build: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// The client's address, put in the request's extensions by the transport; rate limits
/// of unauthenticated (solo) callers are kept per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// The client's address and local account a server put in a request's extensions.
fn peer_of(extensions: &http::Extensions) -> (Option<SocketAddr>, Option<PeerAccount>) {
    (
        extensions.get::<ClientAddr>().map(|client| client.0),
        extensions.get::<PeerAccount>().copied(),
    )
}

/// The memory API handler. Cheap to clone; clones share the engine.
#[derive(Clone)]
pub struct MemoryApi {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    config: ApiConfig,
    authenticator: auth::Authenticator,
    limiter: limits::Limiter,
    started: Instant,
    /// When [`MemoryApi::record_gauges`] last counted memories by status.
    statuses_counted: std::sync::Mutex<Option<Instant>>,
    /// The schema's version as the store last said (0 until it has): health's
    /// `schemaVersion`.
    schema_applied: std::sync::atomic::AtomicU32,
}

impl MemoryApi {
    pub fn new(engine: Engine, config: ApiConfig) -> MemoryApi {
        let keys: Arc<dyn KeyStore> = engine.store().clone();
        let authenticator = auth::Authenticator::new(config.auth.clone(), keys);
        let limiter = limits::Limiter::new(config.rate_limits);
        let inner = Inner {
            engine,
            config,
            authenticator,
            limiter,
            started: Instant::now(),
            statuses_counted: std::sync::Mutex::new(None),
            schema_applied: std::sync::atomic::AtomicU32::new(0),
        };
        MemoryApi { inner: Arc::new(inner) }
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Sets the gauges read when metrics are scraped: memories by status (counted at most
    /// every 30 s, as counting reads the store) and the embedding queue.
    pub async fn record_gauges(&self) {
        let engine = &self.inner.engine;
        metrics::gauge!("cairn_embeddings_pending").set(engine.embeddings_pending() as f64);
        let due = {
            let mut counted = self.inner.statuses_counted.lock().expect("never poisoned");
            let due = counted.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(30));
            if due {
                *counted = Some(Instant::now());
            }
            due
        };
        if !due {
            return;
        }
        for status in cairn_types::Status::ALL {
            let filter = cairn_types::MemoryListQuery {
                status: Some(*status),
                limit: Some(1),
                ..Default::default()
            };
            if let Ok(page) = engine.list_memories(filter).await {
                metrics::gauge!("cairn_memories", "status" => status.as_str())
                    .set(page.total as f64);
            }
        }
    }

    /// Answers one request. Never fails: errors become responses in the error envelope.
    /// The client's address and local account are the request's [`ClientAddr`] and
    /// [`PeerAccount`] extensions, when the server put them there.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (client, account) = peer_of(request.extensions());
        self.handle_from(request, client, account).await
    }

    /// [`handle`](MemoryApi::handle) for a request from `client` (its local `account`, when
    /// known), given here instead of in the request's extensions: a server that knows them
    /// saves building the extensions' map for every request.
    pub async fn handle_from<B>(
        &self,
        request: Request<B>,
        client: Option<SocketAddr>,
        account: Option<PeerAccount>,
    ) -> Response<ResponseBody>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if request.method() == http::Method::GET {
            match request.uri().path() {
                routes::LIVE_PATH => return handlers::probe("live"),
                routes::READY_PATH => return handlers::health_ready(&self.inner).await,
                _ => {}
            }
        }
        let client = client.map(|client| client.ip());
        let principal =
            match self.identify(request.headers(), request.uri(), client, account, &[]).await {
                Ok(principal) => principal,
                Err(error) => return error.into_response(),
            };
        let resolved = routes::resolve(request.method(), request.uri().path())
            .map(|(operation, id)| (operation, id.map(str::to_owned)));
        let (operation, id) = match resolved {
            Ok(resolved) => resolved,
            Err(error) => return error.into_response(),
        };
        // The server side of a chat widget holds a `runtime` key and mints the browser's
        // conversation tokens with it; a conversation token itself mints none.
        let role = if operation.for_widget_servers()
            && principal.role == Role::Runtime
            && principal.conversation.is_none()
        {
            Role::Runtime
        } else {
            operation.role()
        };
        let caller = cairn_http::Caller(principal.id.clone());
        let rate = match self.permit(&principal, role, operation.rate_class()) {
            Ok(rate) => rate,
            Err(error) => return with_caller(error.into_response(), caller),
        };
        let reply = match operation {
            Operation::Health => handlers::dispatch_health(&self.inner, request.uri()).await,
            _ => {
                Box::pin(handlers::dispatch(
                    &self.inner,
                    operation,
                    id.as_deref(),
                    &principal,
                    request,
                ))
                .await
            }
        };
        with_caller(finish(reply, rate), caller)
    }

    /// The answer to `request` when it can be given at once, with nothing to look up or
    /// wait for; `None` when [`handle_from`](MemoryApi::handle_from) must give it. Only
    /// `GET /api/health` is answered here, when the caller is known without a lookup (no
    /// API key or conversation token) and the store has the memory count at hand (SQLite):
    /// probes poll it, and a server that asks here first spares them the full handler's
    /// future. The answer is the one `handle_from` would give.
    pub fn answer_now<B>(
        &self,
        request: &Request<B>,
        client: Option<SocketAddr>,
        account: Option<PeerAccount>,
    ) -> Option<Response<ResponseBody>> {
        let operation = Operation::Health;
        if request.method() != http::Method::GET {
            return None;
        }
        match request.uri().path() {
            HEALTH_PATH => {}
            routes::LIVE_PATH => return Some(handlers::probe("live")),
            _ => return None,
        }
        let memory_count = self.inner.engine.memory_count_now()?;
        // The schema's version comes from the store once, by the full handler.
        if self.inner.schema_applied.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return None;
        }
        let (headers, uri) = (request.headers(), request.uri());
        let authenticator = &self.inner.authenticator;
        // Health spends no rate limit: the caller's role is all `permit` would look at.
        debug_assert!(operation.rate_class().is_none());
        let role = match authenticator.check_local(headers, uri, &[]) {
            Ok(()) => authenticator.role_now(headers, client.map(|c| c.ip()), account)?,
            Err(error) => Err(error),
        };
        Some(match role.and_then(|role| has_role(role, operation.role())) {
            Ok(()) => {
                finish(handlers::dispatch_health_counted(&self.inner, uri, memory_count), None)
            }
            Err(error) => error.into_response(),
        })
    }

    /// Checks a request for a handler mounted beside this API (the conversation runtime)
    /// as this API would: the solo profile's local-only rule (except for
    /// `trusted_origins`), credentials, the `role` the request needs, and the principal's
    /// rate limit of `class`. The error is the response to send.
    /// Completes once the credential of a request with these headers is revoked or expires
    /// (see `auth::CREDENTIAL_CHECK`); `None` for credentials nothing revokes. Event streams
    /// opened with a credential end with it.
    pub fn credential_ends(&self, headers: &http::HeaderMap) -> Option<auth::CredentialEnds> {
        self.inner.authenticator.credential_ends(headers)
    }

    /// Who is calling, as this API's authentication finds it (the solo profile's local-only
    /// rule, then the credentials), without spending a rate limit or checking a role: for a
    /// server that keys something of its own by the caller (idempotency keys). The error is
    /// the response to send.
    pub async fn authenticate(
        &self,
        parts: &http::request::Parts,
    ) -> Result<Principal, Response<ResponseBody>> {
        self.identify_parts(parts, &[]).await.map_err(ApiError::into_response)
    }

    pub async fn authorize_parts(
        &self,
        parts: &http::request::Parts,
        role: Role,
        class: RateClass,
        trusted_origins: &[String],
    ) -> Result<Principal, Response<ResponseBody>> {
        let principal =
            self.identify_parts(parts, trusted_origins).await.map_err(ApiError::into_response)?;
        self.permit(&principal, role, Some(class)).map_err(ApiError::into_response)?;
        Ok(principal)
    }

    /// Checks a request for the conversation runtime mounted beside this API: as
    /// [`authorize_parts`](MemoryApi::authorize_parts), except that the `runtime` role may
    /// do everything there, and a conversation token only what concerns its conversation
    /// (`conversation` is the one the request's path names). With the principal come the
    /// `RateLimit-*` headers for the answer (none when the class is unlimited).
    pub async fn authorize_runtime(
        &self,
        parts: &http::request::Parts,
        role: Role,
        class: RateClass,
        trusted_origins: &[String],
        conversation: Option<&str>,
    ) -> Result<(Principal, http::HeaderMap), Response<ResponseBody>> {
        let principal =
            self.identify_parts(parts, trusted_origins).await.map_err(ApiError::into_response)?;
        let headers = |rate: Option<limits::RateState>| {
            rate.map(|rate| rate.headers().into_iter().collect()).unwrap_or_default()
        };
        if principal.role != Role::Runtime {
            let rate =
                self.permit(&principal, role, Some(class)).map_err(ApiError::into_response)?;
            return Ok((principal, headers(rate)));
        }
        if let Some(own) = &principal.conversation
            && conversation != Some(own.as_str())
        {
            let message = format!(
                "this conversation token opens conversation `{own}` only: its operations and \
                 its event stream"
            );
            return Err(ApiError::new(ErrorCode::Forbidden, message).into_response());
        }
        let rate =
            self.inner.limiter.check(class, &principal.id).map_err(ApiError::into_response)?;
        Ok((principal, headers(rate)))
    }

    /// Who is calling: the solo profile's local-only rule (web pages of `trusted_origins`
    /// excepted), then the credentials.
    async fn identify(
        &self,
        headers: &http::HeaderMap,
        uri: &http::Uri,
        client: Option<std::net::IpAddr>,
        account: Option<PeerAccount>,
        trusted_origins: &[String],
    ) -> Result<Principal, ApiError> {
        let authenticator = &self.inner.authenticator;
        authenticator.check_local(headers, uri, trusted_origins)?;
        authenticator.authenticate(headers, client, account).await
    }

    /// [`identify`](MemoryApi::identify) with the client from the request's extensions.
    async fn identify_parts(
        &self,
        parts: &http::request::Parts,
        trusted_origins: &[String],
    ) -> Result<Principal, ApiError> {
        let (client, account) = peer_of(&parts.extensions);
        let client = client.map(|client| client.ip());
        self.identify(&parts.headers, &parts.uri, client, account, trusted_origins).await
    }

    /// Whether the caller may go on: its role is at least `role`, and its rate limit of
    /// `class`, if the operation has one, has room (the state is for the response's headers).
    fn permit(
        &self,
        principal: &Principal,
        role: Role,
        class: Option<RateClass>,
    ) -> Result<Option<limits::RateState>, ApiError> {
        has_role(principal.role, role)?;
        match class {
            Some(class) => self.inner.limiter.check(class, &principal.id),
            None => Ok(None),
        }
    }
}
