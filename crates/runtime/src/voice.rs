//! The voice socket: the `service.voice.v1` WebSocket a voice client talks on, between the
//! transport that upgrades the HTTP connection and the runtime's [`VoiceSession`].
//!
//! A voice conversation starts over HTTP (`POST /voice/conversations` or
//! `POST /conversations/:id/voice-segments`), whose answer carries `socket.url`: the socket's
//! full URL with a single-use token. `GET /voice/socket` checks the WebSocket handshake and
//! the `service.voice.v1` subprotocol, claims the token with [`Runtime::open_voice_socket`],
//! and answers `101 Switching Protocols` with a [`VoiceUpgrade`] in the response's extensions.
//! The handler knows nothing of sockets or hyper: the transport takes the connection over and
//! hands it to [`VoiceUpgrade::serve`], which runs [`serve_voice_socket`]:
//!
//! - text frames are parsed as [`VoiceClientEvent`]s and passed to the session in order;
//!   a frame that is not JSON, has an unknown `type` or ill-typed fields, a binary frame, or
//!   a message over [`VoiceSocketOptions::max_event_bytes`] is answered with an `error`
//!   server event (see [`error_event`]) and the socket stays open;
//! - the session's server events (JSON objects with a string `type`) are written as text
//!   frames in order, each given an `event_id` when it has none;
//! - the socket pings the client, and closes when the session returns (1000), when the
//!   client closes it, when the client sends nothing for
//!   [`VoiceSocketOptions::idle_timeout`] (1001), when a message is over
//!   [`VoiceSocketOptions::max_message_bytes`] (1009), or when the handler shuts down (1001).
//!   A client that stops reading is dropped once one write has waited
//!   [`VoiceSocketOptions::send_timeout`], so it never holds more than the bounded queues.
//!
//! # Mounting the socket in your server
//!
//! The upgrade needs the connection, which only the transport has. With hyper (axum's
//! `Request` is hyper's), serve HTTP/1 connections with upgrades enabled
//! (`serve_connection_with_upgrades` or `.with_upgrades()`), take the pending upgrade before
//! the request goes to the handler, and when the answer is 101 with a [`VoiceUpgrade`],
//! spawn it:
//!
//! ```ignore
//! let service = service_fn(move |mut request: Request<Incoming>| {
//!     let chat = chat.clone();
//!     async move {
//!         let pending = hyper::upgrade::on(&mut request);
//!         let mut response = chat.handle(request).await;
//!         if response.status() == StatusCode::SWITCHING_PROTOCOLS
//!             && let Some(upgrade) = response.extensions_mut().remove::<VoiceUpgrade>()
//!         {
//!             tokio::spawn(async move {
//!                 if let Ok(upgraded) = pending.await {
//!                     upgrade.serve(hyper_util::rt::TokioIo::new(upgraded)).await;
//!                 }
//!             });
//!         }
//!         Ok::<_, Infallible>(response)
//!     }
//! });
//! ```
//!
//! A server that does not do this still answers the handshake, but the socket closes at
//! once after the 101. WebSockets over HTTP/2 (RFC 8441) are not served: browsers open
//! them over HTTP/1.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_http::{ApiError, ResponseBody, parse_query};
use cairn_types::ErrorCode;
use cairn_types::runtime::{VOICE_PROTOCOL, VoiceClientEvent, VoiceStartResult};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// What a session sees of its open socket.
pub struct VoiceSocketIo {
    /// The client's events, parsed, in order. Ends (`recv` returns `None`) when the socket
    /// closes, whoever closed it. The queue is bounded: while it is full the socket reads
    /// nothing more from the client, so keep reading while a reply plays (barge-in).
    pub events: mpsc::Receiver<VoiceClientEvent>,
    /// Server events to write: JSON objects with a string `type` (anything else is logged
    /// and dropped), written in order; an event without an `event_id` gets one. The queue is
    /// bounded, so `send` waits while the client reads slowly, and fails once the socket is
    /// closed.
    pub send: mpsc::Sender<Value>,
}

/// One voice connection, from the moment its token is claimed
/// ([`Runtime::open_voice_socket`](crate::Runtime::open_voice_socket)) until its socket
/// closes.
///
/// `run` is called once the WebSocket is open; the socket closes when it returns, so it
/// should return soon after `io.events` ends. A session dropped without `run` being called
/// never had a socket: the upgrade failed (the client went away after the 101, or the
/// server does not serve upgrades); clean up in `Drop` if that matters.
#[async_trait]
pub trait VoiceSession: Send + 'static {
    async fn run(self: Box<Self>, io: VoiceSocketIo);
}

/// How much a socket accepts and how long it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VoiceSocketOptions {
    /// The largest client event parsed; a larger message gets an `error`
    /// (`event_too_large`) and the socket stays open. Default 256 KiB: 100 ms of 24 kHz
    /// pcm16 is 6.4 KB of base64, so this is over 4 s of audio in one event.
    pub max_event_bytes: usize,
    /// The largest message (or frame) read at all; a larger one closes the socket with 1009,
    /// since its bytes are not read. Default 1 MiB.
    pub max_message_bytes: usize,
    /// How often the socket pings the client (default 20 s).
    pub ping_interval: Duration,
    /// How long the client may send nothing (not even a pong) before the socket is closed
    /// with 1001 (default 60 s: three pings unanswered).
    pub idle_timeout: Duration,
    /// How long one write to the client may wait. A client that does not read fills the
    /// connection's buffers and the bounded queue behind them; past this wait the socket is
    /// dropped (there is no point in a close frame it will not read), so it never holds more
    /// memory than the queue (default 10 s).
    pub send_timeout: Duration,
}

impl Default for VoiceSocketOptions {
    fn default() -> VoiceSocketOptions {
        VoiceSocketOptions {
            max_event_bytes: 256 * 1024,
            max_message_bytes: 1024 * 1024,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(10),
        }
    }
}

/// The handler's voice option: where clients reach the socket, and the socket's limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VoiceHandshake {
    /// The handler's public base URL, base path included, when clients reach it by another
    /// address than the request's `Host`: `wss://voice.example.com/api/runtime` behind a TLS
    /// proxy that strips or moves paths. `ws`, `wss`, `http` and `https` are accepted; the
    /// socket URL uses `ws`/`wss` and the events URL `http`/`https`.
    ///
    /// Without it the URLs are built from the request: its `Host` (or the URI's authority),
    /// the handler's base path, and `wss`/`https` when the request came over TLS as a proxy
    /// says with `X-Forwarded-Proto: https` (or `Forwarded: proto=https`), `ws`/`http`
    /// otherwise. Trusting these headers is safe: they change only the URL returned to the
    /// caller that sent them.
    pub public_url: Option<String>,
    pub socket: VoiceSocketOptions,
}

impl VoiceHandshake {
    pub fn new() -> VoiceHandshake {
        VoiceHandshake::default()
    }

    /// See [`VoiceHandshake::public_url`].
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    pub fn socket(mut self, options: VoiceSocketOptions) -> Self {
        self.socket = options;
        self
    }

    /// The public URL split into its WebSocket and HTTP forms; fails when it is not an
    /// absolute `ws`, `wss`, `http` or `https` URL without query or fragment.
    pub(crate) fn public_bases(&self) -> Result<Option<Bases>, String> {
        let Some(url) = &self.public_url else { return Ok(None) };
        let invalid = || {
            format!(
                "voice public_url `{url}`: expected an absolute ws://, wss://, http:// or \
                 https:// URL without query, such as wss://voice.example.com/api/runtime"
            )
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
        let secure = match scheme.to_ascii_lowercase().as_str() {
            "wss" | "https" => true,
            "ws" | "http" => false,
            _ => return Err(invalid()),
        };
        let rest = rest.trim_end_matches('/');
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.parse::<http::uri::Authority>().is_err() || rest.contains(['?', '#']) {
            return Err(invalid());
        }
        Ok(Some(Bases::new(secure, rest)))
    }
}

/// The socket's and the HTTP routes' base URLs, base path included, without a final `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bases {
    pub socket: String,
    pub http: String,
}

impl Bases {
    /// From `host/base-path` and whether clients come over TLS.
    pub(crate) fn new(secure: bool, host_and_path: &str) -> Bases {
        let (ws, http) = if secure { ("wss", "https") } else { ("ws", "http") };
        Bases {
            socket: format!("{ws}://{host_and_path}"),
            http: format!("{http}://{host_and_path}"),
        }
    }
}

/// The base URLs of a request when no public URL is configured: `Host` (or the URI's
/// authority, as HTTP/2 sends it), the base path, and the scheme a TLS proxy names.
pub(crate) fn request_bases(parts: &Parts, base_path: &str) -> Result<Bases, ApiError> {
    let host = match parts.headers.get(header::HOST) {
        Some(host) => host.to_str().ok().map(str::to_owned),
        None => parts.uri.authority().map(|authority| authority.as_str().to_owned()),
    };
    let host = host
        .filter(|host| !host.contains('@') && host.parse::<http::uri::Authority>().is_ok())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                "the request has no valid Host header to build the voice socket's URL from; \
                 send one, or set the handler's voice public_url",
            )
        })?;
    Ok(Bases::new(forwarded_https(&parts.headers), &format!("{host}{base_path}")))
}

/// Whether a proxy says the request came over TLS: `X-Forwarded-Proto: https` (its first
/// value) or `Forwarded: proto=https`.
fn forwarded_https(headers: &HeaderMap) -> bool {
    let first_value = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(',').next())
    };
    if let Some(proto) = first_value("x-forwarded-proto") {
        return proto.trim().eq_ignore_ascii_case("https");
    }
    first_value("forwarded").is_some_and(|forwarded| {
        forwarded.split(';').any(|pair| {
            pair.trim().split_once('=').is_some_and(|(name, value)| {
                name.trim().eq_ignore_ascii_case("proto")
                    && value.trim().trim_matches('"').eq_ignore_ascii_case("https")
            })
        })
    })
}

/// Fills what a start result leaves to the handler: `socket.url` (the socket with its token)
/// and `eventsUrl` (the conversation's event stream). Values the runtime set are kept.
pub(crate) fn fill_urls(result: &mut VoiceStartResult, bases: &Bases) {
    if result.socket.url.is_empty() {
        result.socket.url =
            format!("{}/voice/socket?token={}", bases.socket, percent_encode(&result.socket.token));
    }
    if result.events_url.is_none() {
        let id = percent_encode(&result.conversation.id);
        result.events_url = Some(format!("{}/conversations/{id}/events/stream", bases.http));
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so the text is safe in
/// a path segment and in a query value.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The WebSocket handshake of `GET /voice/socket`, checked before the token is claimed:
/// answers the `Sec-WebSocket-Accept` value, or a 400 saying what is missing.
pub(crate) fn check_handshake(parts: &Parts) -> Result<String, ApiError> {
    let bad = |message: String| ApiError::new(ErrorCode::BadRequest, message);
    if !has_token(&parts.headers, header::UPGRADE, "websocket")
        || !has_token(&parts.headers, header::CONNECTION, "upgrade")
    {
        return Err(bad(format!(
            "this is the {VOICE_PROTOCOL} WebSocket: open it as a WebSocket (HTTP/1.1 GET with \
             `Upgrade: websocket` and `Connection: Upgrade`), with the URL the voice start \
             returned as `socket.url`"
        )));
    }
    let version = parts.headers.get(header::SEC_WEBSOCKET_VERSION);
    if version.is_none_or(|version| version.as_bytes().trim_ascii() != b"13") {
        return Err(bad("the WebSocket version must be 13 (`Sec-WebSocket-Version: 13`)".into())
            .with_header(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13")));
    }
    let key = parts.headers.get(header::SEC_WEBSOCKET_KEY).map(|key| key.as_bytes().trim_ascii());
    let Some(key) = key.filter(|key| is_handshake_key(key)) else {
        return Err(bad(
            "the WebSocket handshake needs a `Sec-WebSocket-Key`: 16 random bytes in base64".into(),
        ));
    };
    if !has_token(&parts.headers, header::SEC_WEBSOCKET_PROTOCOL, VOICE_PROTOCOL) {
        return Err(bad(format!(
            "the socket speaks only the `{VOICE_PROTOCOL}` subprotocol: ask for it in \
             `Sec-WebSocket-Protocol` (a browser: `new WebSocket(url, \"{VOICE_PROTOCOL}\")`)"
        )));
    }
    Ok(derive_accept_key(key))
}

/// Whether a comma-separated header (any of its lines) lists `token`, case-insensitively.
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|item| item.trim().eq_ignore_ascii_case(token)))
}

/// A `Sec-WebSocket-Key`: base64 of 16 bytes, which is 22 characters and `==`.
fn is_handshake_key(key: &[u8]) -> bool {
    key.len() == 24
        && key.ends_with(b"==")
        && key[..22].iter().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/'))
}

/// The socket token of a `GET /voice/socket`: the `token` query parameter (browsers cannot
/// set headers on a WebSocket), else `Authorization: Bearer`; empty when there is none.
pub(crate) fn socket_token(parts: &Parts) -> Result<String, ApiError> {
    #[derive(serde::Deserialize)]
    struct SocketQuery {
        token: Option<String>,
    }
    let query: SocketQuery = parse_query(parts.uri.query())?;
    if let Some(token) = query.token.filter(|token| !token.is_empty()) {
        return Ok(token);
    }
    let bearer = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    Ok(bearer.unwrap_or_default())
}

/// The `101 Switching Protocols` answer of an accepted handshake, carrying the socket.
pub(crate) fn switching_protocols(accept: &str, upgrade: VoiceUpgrade) -> Response<ResponseBody> {
    let mut response = Response::new(Empty::new().boxed());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(accept) = HeaderValue::from_str(accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(VOICE_PROTOCOL));
    response.extensions_mut().insert(upgrade);
    response
}

/// A socket the handler accepted, waiting for its connection: the value a 101 answer of
/// `GET /voice/socket` carries in its extensions. The transport removes it and calls
/// [`VoiceUpgrade::serve`] with the upgraded connection (see the module docs).
///
/// Clones share the session: only the first `serve` runs it.
#[derive(Clone)]
pub struct VoiceUpgrade {
    session: Arc<Mutex<Option<Box<dyn VoiceSession>>>>,
    shutdown: watch::Receiver<bool>,
    options: VoiceSocketOptions,
    /// The end of the credential the voice start was authorized with, if it can end.
    credential: Arc<Mutex<Option<crate::handler::CredentialEnds>>>,
}

impl VoiceUpgrade {
    pub(crate) fn new(
        session: Box<dyn VoiceSession>,
        shutdown: watch::Receiver<bool>,
        options: VoiceSocketOptions,
    ) -> VoiceUpgrade {
        VoiceUpgrade {
            session: Arc::new(Mutex::new(Some(session))),
            shutdown,
            options,
            credential: Arc::default(),
        }
    }

    /// Closes the socket (1008) once `credential` ends: the start was authorized with a key
    /// or token that can be revoked or expire.
    pub(crate) fn until(self, credential: Option<crate::handler::CredentialEnds>) -> VoiceUpgrade {
        *self.credential.lock().expect("never poisoned") = credential;
        self
    }

    /// Serves the socket on the upgraded connection until it closes (see
    /// [`serve_voice_socket`]); closes it with 1001 when the handler shuts down.
    pub async fn serve<S>(self, io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let session = self.session.lock().ok().and_then(|mut session| session.take());
        let credential = self.credential.lock().ok().and_then(|mut credential| credential.take());
        match session {
            Some(session) => {
                serve_socket(io, session, self.shutdown, self.options, credential).await
            }
            None => tracing::warn!("a voice upgrade was served twice; the second is dropped"),
        }
    }
}

/// Serves one voice socket on an upgraded connection, with the default
/// [`VoiceSocketOptions`], until it closes; see [`serve_voice_socket_with`].
pub async fn serve_voice_socket<S>(
    io: S,
    session: Box<dyn VoiceSession>,
    shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve_voice_socket_with(io, session, shutdown, VoiceSocketOptions::default()).await
}

/// How many client events wait for the session before the socket stops reading.
const CLIENT_EVENT_QUEUE: usize = 32;
/// How many server events wait for the client before the session's `send` waits: with
/// 100 ms audio deltas, a few seconds of speech.
const SERVER_EVENT_QUEUE: usize = 64;
/// How long a closing socket waits for the client's close frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves one voice socket on `io`, a connection whose WebSocket handshake was answered
/// (the HTTP upgrade is the transport's): runs `session` and pumps frames both ways, as the
/// module docs say. Returns once the socket is closed and the session has returned.
pub async fn serve_voice_socket_with<S>(
    io: S,
    session: Box<dyn VoiceSession>,
    shutdown: watch::Receiver<bool>,
    options: VoiceSocketOptions,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve_socket(io, session, shutdown, options, None).await
}

/// [`serve_voice_socket_with`], closing the socket with 1008 once `credential` ends.
async fn serve_socket<S>(
    io: S,
    session: Box<dyn VoiceSession>,
    mut shutdown: watch::Receiver<bool>,
    options: VoiceSocketOptions,
    mut credential: Option<crate::handler::CredentialEnds>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _open = crate::OpenGauge::new("cairn_voice_sockets_open");
    // A small read buffer keeps many idle sockets cheap; every message is written and
    // flushed on its own (the queue before it is what is bounded).
    let max_message = options.max_message_bytes.max(1024);
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (sink, mut stream) = socket.split();
    let (client_events, session_events) = mpsc::channel(CLIENT_EVENT_QUEUE);
    let (server_events, outgoing) = mpsc::channel(SERVER_EVENT_QUEUE);
    let (close, close_requested) = oneshot::channel();

    let io = VoiceSocketIo { events: session_events, send: server_events.clone() };
    let mut session = tokio::spawn(session.run(io));
    let mut writer = tokio::spawn(write_loop(sink, outgoing, close_requested, options));
    let mut reader = Box::pin(read_loop(&mut stream, client_events, server_events, options));

    let (mut reader_done, mut session_done, mut writer_done) = (false, false, false);
    let mut unread_input = false;
    let closing = tokio::select! {
        end = &mut reader => {
            reader_done = true;
            unread_input = matches!(end, ReadEnd::TooLarge);
            end.closing()
        }
        joined = &mut session => {
            session_done = true;
            let frame = match joined {
                Ok(()) => close_frame(CloseCode::Normal, "the session ended"),
                Err(error) => {
                    tracing::error!(%error, "a voice session failed");
                    close_frame(CloseCode::Error, "the session failed")
                }
            };
            Some(Closing { frame, drain: true })
        }
        () = shut_down(&mut shutdown) => {
            let frame = close_frame(CloseCode::Away, "the server is shutting down");
            Some(Closing { frame, drain: true })
        }
        () = crate::handler::credential_ended(&mut credential) => {
            let reason = "the credential this voice socket was started with was revoked or has expired";
            Some(Closing { frame: close_frame(CloseCode::Policy, reason), drain: false })
        }
        _ = &mut writer => {
            writer_done = true;
            None
        }
    };
    match closing {
        Some(closing) => {
            let _ = close.send(closing);
        }
        None => drop(close),
    }
    // The reader holds the session's events: dropping it tells the session the socket is
    // closed, at once, whoever closed it.
    drop(reader);
    // Wait for the client's answer to our close frame (what it sends meanwhile is dropped),
    // unless it can no longer be written to.
    if !reader_done && !writer_done {
        let answered = async { while let Some(Ok(_)) = stream.next().await {} };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, answered).await;
    }
    if !session_done && let Err(error) = session.await {
        tracing::error!(%error, "a voice session failed");
    }
    if writer_done {
        return;
    }
    let sink = match tokio::time::timeout(CLOSE_TIMEOUT, &mut writer).await {
        Ok(Ok(sink)) => sink,
        Ok(Err(_)) => return,
        Err(_) => {
            writer.abort();
            return;
        }
    };
    // The rest of an oversized message was never read: read it away before the connection
    // closes, or the client's system answers with a reset that can destroy the close frame
    // before the client reads it.
    if unread_input && let Ok(mut socket) = stream.reunite(sink) {
        linger(socket.get_mut()).await;
    }
}

/// Reads and drops what the client still sends, until it has been quiet for a moment or
/// [`CLOSE_TIMEOUT`] has passed.
async fn linger<S: AsyncRead + Unpin>(io: &mut S) {
    let mut buffer = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + CLOSE_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(200), io.read(&mut buffer)).await {
            Ok(Ok(read)) if read > 0 => {}
            _ => return,
        }
    }
}

/// How the writer ends the socket: with this close frame, after writing the server events
/// already queued when `drain` is set (not when the client closed first: it reads no more).
#[derive(Debug)]
struct Closing {
    frame: CloseFrame,
    drain: bool,
}

/// Resolves when the handler shuts down; never when it cannot any more.
async fn shut_down(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|stopping| *stopping).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn close_frame(code: CloseCode, reason: &'static str) -> CloseFrame {
    CloseFrame { code, reason: reason.into() }
}

/// Why the reading side stopped.
#[derive(Debug)]
enum ReadEnd {
    /// The client closed the socket (its close frame was answered) or the connection ended.
    Closed,
    /// The client sent nothing for the idle timeout.
    Idle,
    /// A message over the hard limit: its bytes were not read, so nothing more can be.
    TooLarge,
    /// A frame broke the protocol (bad UTF-8 in a text frame, bad framing).
    Broken(WsError),
}

impl ReadEnd {
    /// How the server closes after the reader stopped; `None` when nothing can be written.
    fn closing(&self) -> Option<Closing> {
        let (frame, drain) = match self {
            // Writing a close after the client's flushes tungstenite's queued answer to it.
            ReadEnd::Closed => (close_frame(CloseCode::Normal, "closed by the client"), false),
            ReadEnd::Idle => {
                (close_frame(CloseCode::Away, "the client sent nothing for too long"), true)
            }
            ReadEnd::TooLarge => {
                (close_frame(CloseCode::Size, "a message was over the size limit"), true)
            }
            ReadEnd::Broken(WsError::Utf8(_)) => {
                (close_frame(CloseCode::Invalid, "a text frame was not UTF-8"), false)
            }
            ReadEnd::Broken(WsError::Protocol(_)) => {
                (close_frame(CloseCode::Protocol, "a frame broke the WebSocket protocol"), false)
            }
            ReadEnd::Broken(_) => return None,
        };
        Some(Closing { frame, drain })
    }
}

/// Reads the client's frames: events go to the session, mistakes are answered with `error`
/// events, control frames are answered by tungstenite itself.
async fn read_loop<S>(
    stream: &mut SplitStream<WebSocketStream<S>>,
    session: mpsc::Sender<VoiceClientEvent>,
    errors: mpsc::Sender<Value>,
    options: VoiceSocketOptions,
) -> ReadEnd
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let message = match tokio::time::timeout(options.idle_timeout, stream.next()).await {
            Err(_) => return ReadEnd::Idle,
            Ok(None) => return ReadEnd::Closed,
            Ok(Some(Ok(message))) => message,
            Ok(Some(Err(WsError::Capacity(error)))) => {
                let message = format!(
                    "{error}; a message may be at most {} bytes",
                    options.max_message_bytes.max(1024)
                );
                let _ = errors.send(error_event("message_too_large", message, None)).await;
                return ReadEnd::TooLarge;
            }
            Ok(Some(Err(error))) => {
                tracing::debug!(%error, "a voice socket broke");
                return ReadEnd::Broken(error);
            }
        };
        let parsed = match message {
            Message::Text(text) => parse_client_event(text.as_str(), options.max_event_bytes),
            Message::Binary(_) => Err(error_event(
                "binary_not_supported",
                "binary frames are not part of service.voice.v1: send JSON events in text \
                 frames, audio as base64 in input_audio_buffer.append",
                None,
            )),
            Message::Close(_) => return ReadEnd::Closed,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        match parsed {
            // A session that has returned takes no more events; the socket is closing.
            Ok(event) => {
                let _ = session.send(event).await;
            }
            Err(error) => {
                if errors.send(error).await.is_err() {
                    return ReadEnd::Closed;
                }
            }
        }
    }
}

/// The event types of [`VoiceClientEvent`], to tell an unknown type from a bad field.
pub const CLIENT_EVENT_TYPES: [&str; 6] = [
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "response.cancel",
    "conversation.item.truncate",
];

/// One text frame as a client event, or the `error` event that answers it.
pub fn parse_client_event(text: &str, max_bytes: usize) -> Result<VoiceClientEvent, Value> {
    if text.len() > max_bytes {
        let message = format!(
            "the event is {} bytes, over the limit of {max_bytes}; send audio in smaller chunks",
            text.len()
        );
        return Err(error_event("event_too_large", message, None));
    }
    let value: Value = serde_json::from_str(text).map_err(|error| {
        error_event("invalid_json", format!("the frame is not valid JSON: {error}"), None)
    })?;
    let Value::Object(object) = value else {
        return Err(error_event("invalid_json", "an event must be a JSON object", None));
    };
    let event_id = object.get("event_id").and_then(Value::as_str).map(str::to_owned);
    let event_id = event_id.as_deref();
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(_) => return Err(error_event("invalid_event", "`type` must be a string", event_id)),
        None => return Err(error_event("invalid_event", "the event has no `type`", event_id)),
    };
    if !CLIENT_EVENT_TYPES.contains(&kind.as_str()) {
        let message = format!(
            "unknown event type `{kind}`; service.voice.v1 takes {}",
            CLIENT_EVENT_TYPES.join(", ")
        );
        return Err(error_event("unknown_event_type", message, event_id));
    }
    serde_json::from_value(Value::Object(object))
        .map_err(|error| error_event("invalid_event", format!("{kind}: {error}"), event_id))
}

/// Writes server events and pings until told to close, or until the client stops reading;
/// gives the sink back.
async fn write_loop<S>(
    mut sink: SplitSink<WebSocketStream<S>, Message>,
    mut events: mpsc::Receiver<Value>,
    mut close: oneshot::Receiver<Closing>,
    options: VoiceSocketOptions,
) -> SplitSink<WebSocketStream<S>, Message>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let start = tokio::time::Instant::now() + options.ping_interval;
    let mut ping = tokio::time::interval_at(start, options.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut events_open = true;
    loop {
        let message = tokio::select! {
            closing = &mut close => {
                let Ok(Closing { frame, drain }) = closing else { return sink };
                // What was queued before the close goes out first, e.g. the session's last
                // events or the error that explains the close.
                while let Some(event) = events.try_recv().ok().filter(|_| drain) {
                    if let Some(message) = outgoing(event)
                        && write(&mut sink, message, options.send_timeout).await.is_err()
                    {
                        break;
                    }
                }
                let closed = write(&mut sink, Message::Close(Some(frame)), options.send_timeout);
                if let Err(Stop::Refused) = closed.await {
                    // The client closed first: tungstenite refuses a close of ours, but
                    // closing the sink sends its queued answer to the client's.
                    let _ = tokio::time::timeout(options.send_timeout, sink.close()).await;
                }
                return sink;
            }
            event = events.recv(), if events_open => match event {
                Some(event) => match outgoing(event) {
                    Some(message) => message,
                    None => continue,
                },
                None => {
                    events_open = false;
                    continue;
                }
            },
            _ = ping.tick() => Message::Ping(Default::default()),
        };
        if write(&mut sink, message, options.send_timeout).await.is_err() {
            return sink;
        }
    }
}

/// Why a write did not happen.
#[derive(Debug)]
enum Stop {
    /// The socket refused it: closing, closed or broken.
    Refused,
    /// The client read nothing for the send timeout.
    Slow,
}

/// Writes one message.
async fn write<S>(
    sink: &mut SplitSink<WebSocketStream<S>, Message>,
    message: Message,
    timeout: Duration,
) -> Result<(), Stop>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(timeout, sink.send(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            tracing::debug!(%error, "a voice socket could not be written to");
            Err(Stop::Refused)
        }
        Err(_) => {
            tracing::warn!(
                timeout_s = timeout.as_secs_f64(),
                "dropped a voice socket: its client read nothing for the send timeout while \
                 server events waited"
            );
            Err(Stop::Slow)
        }
    }
}

/// A server event as a text frame, with an `event_id`; `None` (logged) when it is not a JSON
/// object with a string `type`.
fn outgoing(event: Value) -> Option<Message> {
    let Value::Object(mut object) = event else {
        tracing::error!("a voice session sent a server event that is not a JSON object");
        return None;
    };
    if !object.get("type").is_some_and(Value::is_string) {
        tracing::error!("a voice session sent a server event without a string `type`");
        return None;
    }
    if !object.get("event_id").is_some_and(Value::is_string) {
        object.insert("event_id".to_owned(), Value::String(new_event_id()));
    }
    let text = serde_json::to_string(&Value::Object(object)).expect("JSON values serialize");
    Some(Message::text(text))
}

/// A new server event id: `event_` and a lower-case ULID.
pub fn new_event_id() -> String {
    format!("event_{}", ulid::Ulid::new().to_string().to_ascii_lowercase())
}

/// A server event: `{"type": kind, "event_id": "event_…", …fields}`. `fields` is a JSON
/// object (anything else adds nothing); its own `type` or `event_id` are replaced.
pub fn server_event(kind: &str, fields: Value) -> Value {
    let mut object = match fields {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    object.insert("type".to_owned(), Value::String(kind.to_owned()));
    object.insert("event_id".to_owned(), Value::String(new_event_id()));
    Value::Object(object)
}

/// An `error` server event in the OpenAI Realtime style:
/// `{"type": "error", "event_id", "error": {"type": "invalid_request_error", "code",
/// "message", "event_id"}}`, where `error.event_id` is the client event's id, when known.
pub fn error_event(code: &str, message: impl Into<String>, client_event_id: Option<&str>) -> Value {
    let mut error = json!({
        "type": "invalid_request_error",
        "code": code,
        "message": message.into(),
    });
    if let Some(id) = client_event_id {
        error["event_id"] = Value::String(id.to_owned());
    }
    server_event("error", json!({ "error": error }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<VoiceClientEvent, Value>) -> (String, Option<String>) {
        let error = result.expect_err("an error event");
        assert_eq!(error["type"], "error");
        assert!(error["event_id"].as_str().is_some_and(|id| id.starts_with("event_")));
        assert_eq!(error["error"]["type"], "invalid_request_error");
        let id = error["error"]["event_id"].as_str().map(str::to_owned);
        (error["error"]["code"].as_str().unwrap().to_owned(), id)
    }

    #[test]
    fn every_listed_type_is_a_client_event() {
        for kind in CLIENT_EVENT_TYPES {
            let mut event = json!({ "type": kind });
            if kind == "input_audio_buffer.append" {
                event["audio"] = json!("AAAA");
            }
            assert!(parse_client_event(&event.to_string(), 1024).is_ok(), "{kind}");
        }
    }

    #[test]
    fn bad_frames_get_errors_naming_the_client_event() {
        let parse = |text: &str| parse_client_event(text, 1024);
        assert_eq!(code(parse("not json")), ("invalid_json".into(), None));
        assert_eq!(code(parse("[1]")), ("invalid_json".into(), None));
        assert_eq!(
            code(parse(r#"{"event_id": "e1"}"#)),
            ("invalid_event".into(), Some("e1".into()))
        );
        assert_eq!(
            code(parse(r#"{"type": "nope", "event_id": "e2"}"#)),
            ("unknown_event_type".into(), Some("e2".into()))
        );
        let (kind, id) = code(parse(r#"{"type": "input_audio_buffer.append", "event_id": "e3"}"#));
        assert_eq!((kind.as_str(), id.as_deref()), ("invalid_event", Some("e3")));
        let long =
            format!(r#"{{"type": "input_audio_buffer.append", "audio": "{}"}}"#, "A".repeat(2000));
        assert_eq!(code(parse(&long)).0, "event_too_large");
    }

    #[test]
    fn server_events_get_an_id_and_keep_theirs() {
        let Message::Text(text) = outgoing(json!({"type": "session.created"})).unwrap() else {
            panic!("a text frame")
        };
        let event: Value = serde_json::from_str(text.as_str()).unwrap();
        assert!(event["event_id"].as_str().unwrap().starts_with("event_"));
        let Message::Text(text) = outgoing(json!({"type": "x", "event_id": "mine"})).unwrap()
        else {
            panic!("a text frame")
        };
        assert!(text.as_str().contains("\"mine\""));
        assert!(outgoing(json!({"no": "type"})).is_none());
        assert!(outgoing(json!("text")).is_none());
    }

    #[test]
    fn public_urls_become_socket_and_http_bases() {
        let bases = |url: &str| VoiceHandshake::new().public_url(url).public_bases();
        let secure = bases("wss://voice.example.com/api/runtime/").unwrap().unwrap();
        assert_eq!(secure.socket, "wss://voice.example.com/api/runtime");
        assert_eq!(secure.http, "https://voice.example.com/api/runtime");
        let plain = bases("http://10.0.0.2:8080").unwrap().unwrap();
        assert_eq!(plain.socket, "ws://10.0.0.2:8080");
        assert!(bases("voice.example.com").is_err());
        assert!(bases("ftp://voice.example.com").is_err());
        assert!(bases("wss://voice.example.com/x?y=1").is_err());
        assert!(bases("wss:///path").is_err());
        assert_eq!(VoiceHandshake::new().public_bases(), Ok(None));
    }
}
