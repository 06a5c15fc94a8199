//! Cairn's HTTP transport: hyper 1.x over a TCP listener, serving the handlers above it.
//!
//! This crate knows sockets and connections, nothing about memories: it bounds connections,
//! times out slow request headers, logs each request, performs the WebSocket upgrade of the
//! runtime's voice socket, serves the web console's embedded files at `/`, and shuts down
//! gracefully, giving in-flight requests and open sockets a deadline to finish. Handlers
//! enforce their own body limits.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

mod body;
mod connections;
mod console;
mod forwarded;
mod idempotency;
mod openapi;
mod peer;
mod telemetry;
mod watch;

use cairn_api::{ApiError, ClientAddr, MemoryApi, PeerAccount, RateClass, ResponseBody};
use cairn_mcp::McpHttp;
use futures_util::future::Either;
use http_body::Body as _;
use http_body_util::BodyExt as _;
use tracing::Instrument as _;

use crate::body::GuardedBody;
use crate::watch::{OpenConnections, WatchedIo, serve_watched};
use cairn_runtime::{Authorization, Authorize, RuntimeHandler, VoiceUpgrade};
use cairn_types::{ErrorCode, Role};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Transport limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// How long in-flight requests get to finish after shutdown begins.
    pub shutdown_grace: Duration,
    /// How long a client may take to send a request's body, from its headers on; past it
    /// the request is answered 408 `REQUEST_TIMEOUT`.
    pub body_read_timeout: Duration,
    /// How many requests one address may be sending bodies for at once; more wait up to
    /// [`BODY_BUDGET_WAIT`] for one to be read, then are answered 429, so slow senders
    /// cannot take every connection.
    pub max_body_reads_per_address: usize,
    /// Bytes of request bodies being read and handled at once, daemon-wide (a body holds its
    /// share until its handler has answered). A request whose body does not fit waits up to
    /// [`BODY_BUDGET_WAIT`], then is answered 503 `SERVER_BUSY` with `Retry-After`.
    pub max_body_bytes_in_flight: u64,
    /// How long an HTTP/2 connection may stay open with no request in flight; it is then
    /// asked to close (GOAWAY). Its keep-alive pings go on meanwhile.
    pub http2_idle_timeout: Duration,
    /// How many connections one client address (an IPv6 client's /64) may hold at once, so
    /// one caller cannot take every one of `max_connections`; 0 for no limit (behind a
    /// reverse proxy, every connection comes from its address). Past it, a connection gets
    /// one 429 answer and is closed.
    pub max_connections_per_address: usize,
    /// Look up which local account each connection comes from in the kernel's socket table
    /// (Linux), and tell the handlers ([`cairn_api::PeerAccount`]): the solo profile serves
    /// its owner alone without credentials.
    pub identify_local_accounts: bool,
    /// Reverse proxies whose `Forwarded` / `X-Forwarded-For` name the client: a request
    /// whose connection comes from one of them counts as the client's for the per-address
    /// body slots, the API's rate limits and the logs. (Connections are counted per address
    /// before any header arrives: behind a proxy, lift `max_connections_per_address`.)
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_body_reads_per_address: 16,
            max_body_bytes_in_flight: DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            http2_idle_timeout: Duration::from_secs(60),
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            identify_local_accounts: false,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Connections served at once: room for every address's share many times over, so a few
/// callers holding theirs (stalled, until the header timeout closes them) leave room for
/// everyone else.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// A sixteenth of the default connections: sixteen callers are needed to fill them.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;

/// Twice the largest body the API takes (a 16 MiB memory batch): two such batches are read
/// and parsed at once, and small bodies are never short of room.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: u64 = 32 * 1024 * 1024;

/// How long a request waits for room in the body budget (503 after it), or for its
/// address's body slot (429 after it).
pub const BODY_BUDGET_WAIT: Duration = Duration::from_secs(2);

pub use crate::openapi::{document as openapi_document, openapi_json};
pub use crate::telemetry::Telemetry;

/// Where the daemon mounts the conversation runtime.
pub const RUNTIME_BASE_PATH: &str = "/api/runtime";

/// The handlers the daemon serves: the conversation runtime, when there is one, for the
/// paths under its base path (the daemon's is [`RUNTIME_BASE_PATH`]), the MCP server at
/// [`MCP_PATH`], the memory API for the rest.
#[derive(Clone)]
pub struct Services {
    pub memory: MemoryApi,
    pub runtime: Option<RuntimeHandler>,
    pub mcp: Option<McpHttp>,
    /// The metrics at [`METRICS_PATH`], for the callers the memory API lets read; `None`
    /// when they are not served here (not recorded, or served on an address of their own
    /// by [`serve_metrics`]).
    pub metrics: Option<Telemetry>,
}

/// Where the daemon serves its MCP tools over streamable HTTP.
pub const MCP_PATH: &str = "/mcp";

/// Where the daemon serves its metrics, in Prometheus's text format.
pub const METRICS_PATH: &str = "/metrics";

/// The runtime's `authorize` hook in the daemon: the memory API's own authentication, so
/// one key or token works for both. Reads need the `read` role, everything else `write`;
/// `runtime` keys may do everything here, and conversation tokens what concerns their
/// conversation.
pub struct MemoryAuthorize {
    pub memory: MemoryApi,
    /// Browser origins the runtime's CORS allows; the solo profile lets them through.
    pub trusted_origins: Vec<String>,
}

#[async_trait::async_trait]
impl Authorize for MemoryAuthorize {
    async fn authorize(&self, path: &str, request: &http::request::Parts) -> Authorization {
        let route = cairn_runtime::handler::route(&request.method, path).ok();
        let (role, class) = runtime_access(&request.method, route.map(|(operation, _)| operation));
        let conversation = route.and_then(|(_, conversation)| conversation);
        let authorized = self
            .memory
            .authorize_runtime(request, role, class, &self.trusted_origins, conversation)
            .await;
        match authorized {
            // Streams are capped per principal: per key, token or JWT subject, and per local
            // address in the solo profile.
            // A key or token can be revoked or expire: its event streams end with it.
            // Rate-limited answers say how much of the limit is left.
            Ok((principal, headers)) => Authorization::AllowWithHeaders {
                principal: principal.id,
                until: self.memory.credential_ends(&request.headers),
                headers,
            },
            Err(response) => Authorization::Respond(response),
        }
    }
}

/// A browser's `EventSource` cannot send headers: a runtime request may carry its
/// conversation token as `?token=cvt_…`, which becomes its `Authorization` (unless it has
/// one) and leaves the query, so the runtime never sees it.
fn bearer_from_query<B>(request: &mut Request<B>) {
    let Some(query) = request.uri().query().map(str::to_owned) else { return };
    let mut token = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("token=") {
            Some(value) if value.starts_with(cairn_api::CONVERSATION_TOKEN_PREFIX) => {
                token = Some(value.to_owned());
                false
            }
            _ => true,
        })
        .collect();
    let Some(token) = token else { return };
    if !request.headers().contains_key(http::header::AUTHORIZATION)
        && let Ok(value) = http::HeaderValue::from_str(&format!("Bearer {token}"))
    {
        request.headers_mut().insert(http::header::AUTHORIZATION, value);
    }
    let path = request.uri().path().to_owned();
    let rebuilt = if kept.is_empty() { path } else { format!("{path}?{}", kept.join("&")) };
    if let Ok(uri) = rebuilt.parse() {
        *request.uri_mut() = uri;
    }
}

/// The role and rate-limit class a runtime request needs in the daemon: `read` to read
/// (GET), `write` for everything else; creating a conversation (starting a visitor) spends
/// the `start` class rather than `write`.
pub fn runtime_access(
    method: &http::Method,
    operation: Option<cairn_runtime::handler::Operation>,
) -> (Role, RateClass) {
    if method == http::Method::GET {
        (Role::Read, RateClass::Read)
    } else if operation == Some(cairn_runtime::handler::Operation::CreateConversation) {
        (Role::Write, RateClass::Start)
    } else {
        (Role::Write, RateClass::Write)
    }
}

impl Services {
    /// MCP over HTTP, behind the memory API's authentication: the caller needs the `read`
    /// role to reach the tools, and each tool's API call is authorized with the caller's
    /// credentials like any other.
    async fn handle_mcp(
        &self,
        mcp: &McpHttp,
        request: Request<GuardedBody>,
    ) -> Response<ResponseBody> {
        let (parts, body) = request.into_parts();
        if let Err(response) =
            self.memory.authorize_parts(&parts, Role::Read, RateClass::Read, &[]).await
        {
            return response;
        }
        mcp.handle(Request::from_parts(parts, body)).await
    }

    /// The metrics, for a caller with the `read` role (in the solo profile, any local one).
    async fn handle_metrics(
        &self,
        metrics: &Telemetry,
        request: Request<GuardedBody>,
    ) -> Response<ResponseBody> {
        let (parts, _) = request.into_parts();
        if parts.method != http::Method::GET {
            let error = ApiError::method_not_allowed(&parts.method, METRICS_PATH, "GET");
            return error.into_response();
        }
        match self.memory.authorize_parts(&parts, Role::Read, RateClass::Read, &[]).await {
            Ok(principal) => {
                let mut response = metrics_response(metrics.render(self).await);
                response.extensions_mut().insert(cairn_http::Caller(principal.id));
                response
            }
            Err(response) => response,
        }
    }

    /// The answer to `request` when the memory API can give it at once (see
    /// [`MemoryApi::answer_now`]); `None` for everything [`Services::handle`] answers.
    fn answer_now<B>(
        &self,
        request: &Request<B>,
        peer: SocketAddr,
        account: Option<PeerAccount>,
    ) -> Option<Response<ResponseBody>> {
        let path = request.uri().path();
        if path == MCP_PATH || self.runtime.as_ref().is_some_and(|runtime| runtime.serves(path)) {
            return None;
        }
        self.memory.answer_now(request, Some(peer), account)
    }

    async fn handle(
        &self,
        request: Request<GuardedBody>,
        peer: SocketAddr,
        account: Option<PeerAccount>,
    ) -> Response<ResponseBody> {
        if let Some(response) = console::respond(&request) {
            return response;
        }
        let path = request.uri().path();
        if idempotency::applies(&request) && path != MCP_PATH && path != METRICS_PATH {
            let run = |request| self.dispatch(request, peer, account);
            return Box::pin(idempotency::handle(self, request, run)).await;
        }
        self.dispatch(request, peer, account).await
    }

    /// Hands `request` to the handler whose path it is.
    async fn dispatch(
        &self,
        mut request: Request<GuardedBody>,
        peer: SocketAddr,
        account: Option<PeerAccount>,
    ) -> Response<ResponseBody> {
        let path = request.uri().path();
        let runtime = self.runtime.as_ref().filter(|runtime| runtime.serves(path));
        let mcp = self.mcp.as_ref().filter(|_| path == MCP_PATH);
        let metrics = self.metrics.as_ref().filter(|_| path == METRICS_PATH);
        if runtime.is_some() || mcp.is_some() || metrics.is_some() {
            // The runtime and MCP find the client in the request (the memory API is told).
            request.extensions_mut().insert(ClientAddr(peer));
            if let Some(account) = account {
                request.extensions_mut().insert(account);
            }
        }
        if runtime.is_some() {
            bearer_from_query(&mut request);
        }
        // The runtime's and MCP's futures are large: boxed, so that every request's future
        // (which hyper moves into place for each request) stays the size the API's needs.
        match (runtime, mcp, metrics) {
            (Some(runtime), _, _) => Box::pin(runtime.handle(request)).await,
            (None, Some(mcp), _) => Box::pin(self.handle_mcp(mcp, request)).await,
            (None, None, Some(metrics)) => Box::pin(self.handle_metrics(metrics, request)).await,
            (None, None, None) => self.memory.handle_from(request, Some(peer), account).await,
        }
    }
}

/// Serves `services` on `listener` until `shutdown` completes, then drains connections.
pub async fn serve(
    listener: TcpListener,
    services: Services,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let open = Arc::new(OpenConnections::default());
    let body_slots = Arc::new(body::BodySlots::new(config.max_body_reads_per_address));
    let body_budget = Arc::new(body::BodyBudget::new(config.max_body_bytes_in_flight));
    let connection_slots = Arc::new(Semaphore::new(config.max_connections));
    let per_address = connections::AddressSlots::new(config.max_connections_per_address);
    let refusals = Arc::new(Semaphore::new(connections::MAX_REFUSALS_AT_ONCE));
    // Every connection task and voice socket holds a sender; when all are gone, `recv`
    // answers `None`: what shutdown waits for.
    let (sockets_open, mut sockets_closed) = mpsc::channel::<()>(1);
    let owner = local_accounts_owner(config.identify_local_accounts);
    let trusted: Arc<[ipnet::IpNet]> = config.trusted_proxies.clone().into();
    // HTTP/1 connections (all but HTTP/2 with prior knowledge) are served by hyper's HTTP/1
    // connection directly; a connection whose first bytes may be HTTP/2's preface goes to
    // the auto builder, which reads the preface and serves either. The reaper guards both
    // (see `watch`): the first by their writes, the others by their requests.
    let mut auto = auto::Builder::new(TokioExecutor::new());
    auto.http1().timer(TokioTimer::new()).header_read_timeout(config.header_read_timeout);
    auto.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let builders = Arc::new((http1::Builder::new(), auto));
    let timeouts = watch::Timeouts {
        header: config.header_read_timeout,
        http2_idle: config.http2_idle_timeout,
    };
    let reaper = tokio::spawn(open.clone().reaper(timeouts));
    let mut shutdown = std::pin::pin!(shutdown);

    loop {
        let permit = tokio::select! {
            permit = connection_slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    if !is_connection_error(&error) {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Some(address_slot) = per_address.take(peer.ip()) else {
            // The global slot goes back at once; the refusal has a small budget of its own.
            drop(permit);
            connections::refuse(stream, peer, per_address.limit(), &refusals);
            continue;
        };
        // Registered here, before its task runs, so shutdown cannot miss it.
        let registered = open.register();
        let sockets_open = sockets_open.clone();
        let services = services.clone();
        let (slots, body_timeout) = (body_slots.clone(), config.body_read_timeout);
        let budget = body_budget.clone();
        let trusted = trusted.clone();
        let (builders, first_byte_timeout) = (builders.clone(), config.header_read_timeout);
        tokio::spawn(async move {
            // The protocol is sniffed from the first bytes, before hyper's own header
            // timeout starts: a client that connects and says nothing must not hold a slot.
            let mut first = [0u8; 2];
            let read = match tokio::time::timeout(first_byte_timeout, stream.peek(&mut first)).await
            {
                Ok(Ok(read)) if read > 0 => read,
                _ => return,
            };
            // HTTP/2's preface begins `PR`; no HTTP/1 request does (`POST`, `PUT`, `PATCH`
            // begin with `P` too, so one byte alone does not tell).
            let http2_maybe = first[0] == b'P' && (read < 2 || first[1] == b'R');
            // Looked up when the first request arrives, not before: a connection that never
            // sends one costs no read of the socket table.
            let account = match (owner, stream.local_addr()) {
                (Some(owner), Ok(local)) => LocalAccount::Pending { owner, local },
                _ => LocalAccount::NotAsked,
            };
            // hyper hands an upgraded connection over and ends its own; a voice socket then
            // keeps the connection's slots until it closes, so it still counts against
            // `max_connections` and the address's share.
            let held: Held = Arc::new((permit, address_slot, sockets_open));
            // What every request of the connection shares, cloned once here: a request
            // clones this one `Arc`, which no other connection touches.
            let watched = registered.watched.clone();
            let shared = Arc::new(Connection {
                services,
                peer,
                account,
                account_found: tokio::sync::OnceCell::new(),
                slots,
                budget,
                body_timeout,
                watched,
                trusted,
            });
            let upgrade_held = held.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                shared.watched.begun();
                let client = forwarded::client(shared.peer, request.headers(), &shared.trusted);
                let observed = telemetry::begin(&shared.services, &request, client);
                // What can be answered at once (health) is, without the handler's future.
                if let Some(account) = shared.account_now()
                    && let Some(response) = shared.services.answer_now(&request, client, account)
                {
                    let response = telemetry::end(observed, response);
                    return Either::Left(std::future::ready(Ok::<_, Infallible>(response)));
                }
                let shared = shared.clone();
                let held = request
                    .headers()
                    .contains_key(http::header::UPGRADE)
                    .then(|| upgrade_held.clone());
                // Every line the request's handling logs names the request.
                let span =
                    tracing::info_span!("request", id = observed.id.to_str().unwrap_or_default());
                let respond = shared.respond(request, client, held);
                Either::Right(
                    async move {
                        let response = respond.await?;
                        Ok(telemetry::end(observed, response))
                    }
                    .instrument(span),
                )
            });
            let (http1, auto) = &*builders;
            let watched = &registered.watched;
            let io = TokioIo::new(WatchedIo::new(stream, watched.clone()));
            let ended = if http2_maybe {
                watched.watch_requests();
                let connection = auto.serve_connection_with_upgrades(io, service);
                serve_watched(connection, watched, |connection| connection.graceful_shutdown())
                    .await
            } else {
                let connection = http1.serve_connection(io, service).with_upgrades();
                serve_watched(connection, watched, |connection| connection.graceful_shutdown())
                    .await
                    .map_err(Into::into)
            };
            if let Err(error) = ended {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop((held, registered));
        });
    }

    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    if let Some(runtime) = &services.runtime {
        // Event streams never end by themselves; end them so connections can close. Voice
        // sockets get a close frame (1001).
        runtime.shutdown();
    }
    open.finish_all();
    drop(sockets_open);
    // The reaper goes on closing stalled connections while the others finish.
    tokio::select! {
        _ = sockets_closed.recv() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(config.shutdown_grace) => tracing::warn!("shutdown deadline passed; closing remaining connections"),
    }
    reaper.abort();
    Ok(())
}

/// What the requests of one connection share.
struct Connection {
    services: Services,
    peer: SocketAddr,
    account: LocalAccount,
    /// The account once looked up (see [`LocalAccount::Pending`]).
    account_found: tokio::sync::OnceCell<PeerAccount>,
    slots: Arc<body::BodySlots>,
    budget: Arc<body::BodyBudget>,
    body_timeout: Duration,
    /// What the reaper knows of the connection: a request marks it busy while handled.
    watched: Arc<watch::Watched>,
    /// The reverse proxies whose forwarding headers are believed.
    trusted: Arc<[ipnet::IpNet]>,
}

/// The local account a connection comes from, for the solo profile.
#[derive(Debug, Clone, Copy)]
enum LocalAccount {
    /// Accounts are not told apart.
    NotAsked,
    /// To be looked up in the socket table when the first request arrives.
    Pending { owner: u32, local: SocketAddr },
}

impl Connection {
    /// The connection's account when it is known without waiting: `None` while it is still
    /// to be looked up.
    fn account_now(&self) -> Option<Option<PeerAccount>> {
        match self.account {
            LocalAccount::NotAsked => Some(None),
            LocalAccount::Pending { .. } => self.account_found.get().map(|found| Some(*found)),
        }
    }

    /// The connection's account, looked up once (on a blocking thread: it reads files).
    async fn account(&self) -> Option<PeerAccount> {
        let LocalAccount::Pending { owner, local } = self.account else { return None };
        let peer = self.peer;
        let found = self
            .account_found
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || peer::account_of(peer, local, owner))
                    .await
                    .unwrap_or(PeerAccount::Unknown)
            })
            .await;
        Some(*found)
    }

    /// Answers one request from `peer` (the connection's, or the client a trusted proxy
    /// names); `held` is the connection's slots when it asks for an upgrade.
    fn respond(
        self: Arc<Connection>,
        request: Request<Incoming>,
        peer: SocketAddr,
        held: Option<Held>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> + Send + 'static {
        let has_body = !request.body().is_end_stream();
        let busy = self.watched.busy();
        async move {
            // A body needs a slot of its address's (a burst waits briefly for one; slow
            // senders that keep them all get 429) and room in the daemon's budget, held
            // until the handler has answered.
            let (slot, reservation) = match has_body {
                false => (None, None),
                true => {
                    let Some(slot) = self.slots.take(peer.ip(), BODY_BUDGET_WAIT).await else {
                        return Ok(too_many_bodies(peer));
                    };
                    let declared = request.body().size_hint().exact();
                    match self.budget.reserve(declared, BODY_BUDGET_WAIT).await {
                        Ok(reservation) => (Some(slot), Some(reservation)),
                        Err(refusal) => {
                            // Read and dropped (never held), so the client, still sending,
                            // gets to read the answer instead of a reset connection.
                            let drained = body::drain(request.into_body(), self.body_timeout).await;
                            return Ok(body_refused(refusal, drained));
                        }
                    }
                }
            };
            let body_timeout = self.body_timeout;
            let held_budget = reservation.clone();
            let mut request =
                request.map(|body| GuardedBody::new(body, body_timeout, slot, reservation));
            let response = if request.method() == http::Method::GET {
                // Taken before the handler sees the request: its answer may be a 101.
                let pending = held.map(|held| (hyper::upgrade::on(&mut request), held));
                let account = self.account().await;
                let mut response = self.services.handle(request, peer, account).await;
                drop(held_budget);
                if let Some((pending, held)) = pending {
                    spawn_voice_socket(&mut response, pending, held);
                }
                response
            } else {
                // A handler that may write runs to completion even when its client goes
                // away, so a committed write also finishes what follows it. Reads need not.
                let handled = tokio::spawn(
                    async move {
                        let _budget = held_budget;
                        let account = self.account().await;
                        self.services.handle(request, peer, account).await
                    }
                    .in_current_span(),
                );
                handled.await.unwrap_or_else(|error| {
                    tracing::error!(%error, "request handler failed");
                    ApiError::new(ErrorCode::InternalError, "internal error").into_response()
                })
            };
            Ok(busy_while_streamed(response, busy))
        }
    }
}

/// Keeps the request `busy` while its answer's body is written when that body's size is not
/// known (an event stream, which may be quiet longer than the reaper's timeout); an answer
/// of known size ends the request.
fn busy_while_streamed(
    response: Response<ResponseBody>,
    busy: watch::Busy,
) -> Response<ResponseBody> {
    if response.body().size_hint().exact().is_some() {
        return response;
    }
    response.map(|body| {
        body.map_frame(move |frame| {
            let _busy = &busy;
            frame
        })
        .boxed()
    })
}

/// What a connection holds while it is served, and a voice socket upgraded from it while it
/// is open: its global slot, its address's slot, and a sender that shutdown waits on.
type Held = Arc<(OwnedSemaphorePermit, Option<OwnedSemaphorePermit>, mpsc::Sender<()>)>;

/// Serves the voice socket a `101 Switching Protocols` answer carries, once hyper hands the
/// connection over; the socket holds `held` until it closes. Any other answer is left alone
/// (the pending upgrade is dropped with it).
fn spawn_voice_socket(
    response: &mut Response<ResponseBody>,
    pending: hyper::upgrade::OnUpgrade,
    held: Held,
) {
    if response.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        return;
    }
    let Some(upgrade) = response.extensions_mut().remove::<VoiceUpgrade>() else {
        return;
    };
    tokio::spawn(async move {
        let _held = held;
        match pending.await {
            Ok(upgraded) => upgrade.serve(TokioIo::new(upgraded)).await,
            Err(error) => tracing::debug!(%error, "a voice socket's upgrade failed"),
        }
    });
}

/// The answer to a request whose address is sending too many bodies at once.
fn too_many_bodies(peer: SocketAddr) -> Response<ResponseBody> {
    let message = format!(
        "too many requests are sending their bodies from {} at once; finish those first",
        peer.ip()
    );
    let mut response = ApiError::new(ErrorCode::RateLimited, message)
        .with_header(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"))
        .into_response();
    response
        .headers_mut()
        .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

/// The answer to a request whose body found no room in the daemon's body budget. A body
/// that could not be drained closes the connection after the answer.
fn body_refused(refusal: body::Refusal, drained: bool) -> Response<ResponseBody> {
    let error = match refusal {
        body::Refusal::Busy => ApiError::new(
            ErrorCode::ServerBusy,
            "the daemon is reading as many request bodies as it may at once; retry shortly",
        )
        .with_header(http::header::RETRY_AFTER, http::HeaderValue::from_static("1")),
        body::Refusal::TooLarge(total) => ApiError::payload_too_large(format!(
            "the request body is larger than the {total} bytes the daemon reads at once \
             (--max-body-bytes-in-flight)"
        )),
    };
    let mut response = error.into_response();
    if !drained {
        response
            .headers_mut()
            .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    response
}

/// The daemon's uid when connections' local accounts are to be identified and can be.
fn local_accounts_owner(wanted: bool) -> Option<u32> {
    if !wanted {
        return None;
    }
    if !cfg!(target_os = "linux") {
        tracing::warn!(
            "this system has no socket table to tell local accounts apart: the solo profile \
             serves every local account without credentials"
        );
        return None;
    }
    let owner = peer::effective_uid();
    if owner.is_none() {
        tracing::warn!(
            "cannot read this process's uid from /proc/self/status: the solo profile serves \
             every local account without credentials"
        );
    }
    owner
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The metrics as Prometheus's text exposition format.
fn metrics_response(text: String) -> Response<ResponseBody> {
    cairn_http::bytes_response(
        http::StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        bytes::Bytes::from(text),
    )
}

/// Serves the metrics alone on `listener` (`cairn serve --metrics-addr`), without
/// credentials, for a scraper inside the network, until `shutdown` completes: `GET /metrics`,
/// and 404 for anything else.
pub async fn serve_metrics(
    listener: TcpListener,
    services: Services,
    metrics: Telemetry,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            () = &mut shutdown => return Ok(()),
        };
        let (services, metrics) = (services.clone(), metrics.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let (services, metrics) = (services.clone(), metrics.clone());
                async move {
                    let response = match (request.method(), request.uri().path()) {
                        (&http::Method::GET, METRICS_PATH) => {
                            metrics_response(metrics.render(&services).await)
                        }
                        (_, path) => ApiError::not_found(path).into_response(),
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let io = TokioIo::new(stream);
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(io, service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "a metrics connection ended with an error");
            }
        });
    }
}
