//! The voice socket over real HTTP and a real WebSocket client: the start routes hand out a
//! `socket.url` a client connects to as it is, the handshake and the token are checked
//! before the upgrade, bad frames get `error` events on a socket that stays usable, and the
//! socket closes when the client, the session or the handler ends it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use cairn_runtime::{
    Authorization, Authorize, ChannelSegment, Conversation, CreateConversationInput,
    HandlerOptions, Lifecycle, Runtime, RuntimeError, RuntimeEvent, RuntimeHandler,
    StartVoiceConversationInput, StartVoiceSegmentInput, Timestamp, VOICE_PROTOCOL,
    VoiceClientEvent, VoiceConnection, VoiceConnectionStatus, VoiceHandshake, VoiceSession,
    VoiceSocket, VoiceSocketIo, VoiceSocketOptions, VoiceStartResult, VoiceUpgrade, server_event,
};
use cairn_test_support::loopback;
use futures_util::{SinkExt, StreamExt};
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Connected = Result<(Socket, http::Response<Option<Vec<u8>>>), WsError>;

/// What the test sees of sessions: each one's start and end.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Started,
    Ended,
}

/// A voice booth: conversation `c1` (active) and `gone` (closed); every start issues a new
/// single-use token, and its session echoes.
struct Booth {
    tokens: Mutex<HashSet<String>>,
    issued: AtomicUsize,
    seen: mpsc::UnboundedSender<Seen>,
}

impl Booth {
    fn new() -> (Arc<Booth>, mpsc::UnboundedReceiver<Seen>) {
        let (seen, receiver) = mpsc::unbounded_channel();
        let booth = Booth { tokens: Mutex::default(), issued: AtomicUsize::new(0), seen };
        (Arc::new(booth), receiver)
    }

    fn conversation(id: &str, lifecycle: Lifecycle) -> Conversation {
        let now = Timestamp::now();
        Conversation {
            id: id.to_owned(),
            agent_id: "a".to_owned(),
            channel: None,
            context: Value::Null,
            lifecycle,
            created_at: now,
            updated_at: now,
        }
    }

    /// A start: a token with characters a URL must escape, so the test sees it encoded.
    fn start(&self, conversation: Conversation) -> VoiceStartResult {
        let n = self.issued.fetch_add(1, Ordering::SeqCst);
        let token = format!("vst_{n}+a/b=");
        self.tokens.lock().unwrap().insert(token.clone());
        let now = Timestamp::now();
        let expires_at = Timestamp::from_millis(now.as_millis() + 300_000);
        VoiceStartResult {
            channel_segment: ChannelSegment {
                id: format!("seg_{n}"),
                conversation_id: conversation.id.clone(),
                channel: "voice".to_owned(),
                started_at: now,
                ended_at: None,
            },
            connection: VoiceConnection {
                id: format!("vc_{n}"),
                channel_segment_id: format!("seg_{n}"),
                adapter: "websocket".to_owned(),
                status: VoiceConnectionStatus::Pending,
                provider: None,
                provider_session_id: None,
                expires_at: Some(expires_at),
            },
            socket: VoiceSocket {
                url: String::new(),
                token,
                protocol: VOICE_PROTOCOL.to_owned(),
                expires_at,
            },
            conversation,
            events: Vec::new(),
            events_url: None,
        }
    }
}

#[async_trait]
impl Runtime for Booth {
    async fn create_conversation(
        &self,
        _input: CreateConversationInput,
    ) -> Result<Conversation, RuntimeError> {
        Ok(Booth::conversation("c1", Lifecycle::Active))
    }

    async fn list_events(
        &self,
        _conversation_id: &str,
        _after_offset: Option<u64>,
        _limit: u32,
    ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
        Ok(Vec::new())
    }

    async fn start_voice_conversation(
        &self,
        input: StartVoiceConversationInput,
    ) -> Result<VoiceStartResult, RuntimeError> {
        let id = input.id.unwrap_or_else(|| "c1".to_owned());
        Ok(self.start(Booth::conversation(&id, Lifecycle::Active)))
    }

    async fn start_voice_segment(
        &self,
        conversation_id: &str,
        _input: StartVoiceSegmentInput,
    ) -> Result<VoiceStartResult, RuntimeError> {
        match conversation_id {
            "c1" => Ok(self.start(Booth::conversation("c1", Lifecycle::Active))),
            "gone" => Err(RuntimeError::ConversationClosed("gone".to_owned())),
            other => Err(RuntimeError::ConversationNotFound(other.to_owned())),
        }
    }

    async fn open_voice_socket(&self, token: &str) -> Result<Box<dyn VoiceSession>, RuntimeError> {
        if !self.tokens.lock().unwrap().remove(token) {
            return Err(RuntimeError::Unauthorized(
                "the voice socket token is missing, wrong, used or expired".to_owned(),
            ));
        }
        Ok(Box::new(Echo { seen: self.seen.clone() }))
    }
}

/// Greets, answers `commit` with `committed`, says goodbye and returns on a `response.cancel`
/// whose reason is `hang up`.
struct Echo {
    seen: mpsc::UnboundedSender<Seen>,
}

#[async_trait]
impl VoiceSession for Echo {
    async fn run(self: Box<Self>, mut io: VoiceSocketIo) {
        let _ = self.seen.send(Seen::Started);
        let _ = io.send.send(server_event("session.created", json!({ "session": {} }))).await;
        while let Some(event) = io.events.recv().await {
            match event {
                VoiceClientEvent::InputAudioBufferCommit { event_id } => {
                    // No `event_id`: the socket adds one.
                    let committed =
                        json!({ "type": "input_audio_buffer.committed", "client": event_id });
                    let _ = io.send.send(committed).await;
                }
                VoiceClientEvent::ResponseCancel { reason: Some(reason), .. }
                    if reason == "hang up" =>
                {
                    let _ = io.send.send(json!({ "type": "goodbye" })).await;
                    break;
                }
                _ => {}
            }
        }
        let _ = self.seen.send(Seen::Ended);
    }
}

/// Serves `handler` at `/api/runtime` on a free loopback port as the module docs of
/// `cairn_runtime::voice` tell embedders to; returns the server's `http://` base.
async fn serve(handler: RuntimeHandler) -> String {
    let server = loopback::serve(move |mut request: http::Request<Incoming>| {
        let handler = handler.clone();
        async move {
            let pending = hyper::upgrade::on(&mut request);
            let mut response = handler.handle(request).await;
            if response.status() == StatusCode::SWITCHING_PROTOCOLS
                && let Some(upgrade) = response.extensions_mut().remove::<VoiceUpgrade>()
            {
                tokio::spawn(async move {
                    if let Ok(upgraded) = pending.await {
                        upgrade.serve(TokioIo::new(upgraded)).await;
                    }
                });
            }
            response
        }
    })
    .await;
    server.url()
}

fn options(runtime: Arc<Booth>) -> HandlerOptions {
    HandlerOptions::new(runtime).base_path("/api/runtime")
}

async fn request(
    method: http::Method,
    url: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Starts a voice conversation; returns the result.
async fn start(base: &str) -> Value {
    let (status, result) =
        request(http::Method::POST, &format!("{base}/api/runtime/voice/conversations"), "", &[])
            .await;
    assert_eq!(status, 201, "{result}");
    result
}

/// Opens `url` as a browser would: `new WebSocket(url, "service.voice.v1")`.
async fn connect(url: &str) -> Connected {
    connect_with(url, &[("sec-websocket-protocol", VOICE_PROTOCOL)]).await
}

async fn connect_with(url: &str, headers: &[(&str, &str)]) -> Connected {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request).await
}

/// The HTTP answer that refused a handshake: its status and JSON body.
fn refusal(result: Connected) -> (u16, Value) {
    match result {
        Err(WsError::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            (response.status().as_u16(), serde_json::from_slice(&body).unwrap_or(Value::Null))
        }
        Err(other) => panic!("expected an HTTP refusal, got {other}"),
        Ok(_) => panic!("expected an HTTP refusal, the socket opened"),
    }
}

/// The next server event; pings are skipped.
async fn next_event(socket: &mut Socket) -> Value {
    cairn_test_support::ws::next_json(socket, Duration::from_secs(10)).await
}

/// The events still in flight and the close frame's code the server ends with: `None` when
/// the connection ended without a close frame, `Some(None)` for a frame without a code.
async fn close_code(socket: &mut Socket) -> (Vec<Value>, Option<Option<CloseCode>>) {
    let mut events = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("the socket closes in time");
        match message {
            Some(Ok(Message::Text(text))) => {
                events.push(serde_json::from_str(text.as_str()).unwrap())
            }
            Some(Ok(Message::Close(frame))) => {
                return (events, Some(frame.map(|frame| frame.code)));
            }
            Some(Ok(_)) => continue,
            None | Some(Err(_)) => return (events, None),
        }
    }
}

async fn send(socket: &mut Socket, event: Value) {
    socket.send(Message::text(event.to_string())).await.unwrap();
}

async fn expect_seen(seen: &mut mpsc::UnboundedReceiver<Seen>, expected: Seen) {
    let got = tokio::time::timeout(Duration::from_secs(10), seen.recv()).await.expect("in time");
    assert_eq!(got, Some(expected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_url_of_a_start_connects_as_it_is() {
    let (booth, mut seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let result = start(&base).await;
    let host = base.trim_start_matches("http://");
    assert_eq!(result["socket"]["token"], "vst_0+a/b=");
    assert_eq!(
        result["socket"]["url"],
        format!("ws://{host}/api/runtime/voice/socket?token=vst_0%2Ba%2Fb%3D")
    );
    assert_eq!(result["socket"]["protocol"], VOICE_PROTOCOL);
    assert_eq!(result["eventsUrl"], format!("{base}/api/runtime/conversations/c1/events/stream"));

    let (mut socket, response) = connect(result["socket"]["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(response.status(), 101);
    assert_eq!(response.headers()["sec-websocket-protocol"], VOICE_PROTOCOL);
    expect_seen(&mut seen, Seen::Started).await;
    let created = next_event(&mut socket).await;
    assert_eq!(created["type"], "session.created");
    assert!(created["event_id"].as_str().unwrap().starts_with("event_"));

    send(&mut socket, json!({ "type": "input_audio_buffer.commit", "event_id": "c-1" })).await;
    let committed = next_event(&mut socket).await;
    assert_eq!(committed["type"], "input_audio_buffer.committed");
    assert_eq!(committed["client"], "c-1");
    assert!(committed["event_id"].as_str().unwrap().starts_with("event_"));
    assert_ne!(committed["event_id"], created["event_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_and_used_once_before_the_upgrade() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let socket_base = format!("{}/api/runtime/voice/socket", base.replace("http://", "ws://"));
    let result = start(&base).await;
    let url = result["socket"]["url"].as_str().unwrap().to_owned();

    let (status, body) = refusal(connect(&format!("{socket_base}?token=vst_wrong")).await);
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{body}");
    let (status, body) = refusal(connect(&socket_base).await);
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{body}");

    let (socket, _) = connect(&url).await.expect("the first use opens");
    let (status, body) = refusal(connect(&url).await);
    assert_eq!(
        (status, body["error"]["status"].as_u64()),
        (401, Some(401)),
        "a used token: {body}"
    );
    drop(socket);

    // Clients that can set headers may send the token as a bearer token.
    let token = start(&base).await["socket"]["token"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {token}");
    let headers = [("sec-websocket-protocol", VOICE_PROTOCOL), ("authorization", bearer.as_str())];
    assert!(connect_with(&socket_base, &headers).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_handshake_is_a_400_and_leaves_the_token_unused() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let result = start(&base).await;
    let url = result["socket"]["url"].as_str().unwrap().to_owned();

    let (status, body) = refusal(connect_with(&url, &[]).await);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("BAD_REQUEST")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(VOICE_PROTOCOL), "{body}");
    let other = [("sec-websocket-protocol", "chat.v2")];
    assert_eq!(refusal(connect_with(&url, &other).await).0, 400);

    let http_url = url.replace("ws://", "http://");
    let (status, body) = request(http::Method::GET, &http_url, "", &[]).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("BAD_REQUEST")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("WebSocket"), "{body}");
    let (status, _) = request(http::Method::POST, &http_url, "", &[]).await;
    assert_eq!(status, 405);

    assert!(connect(&url).await.is_ok(), "the refused handshakes did not use the token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_error_events_and_the_socket_keeps_working() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");

    let frames: [(Message, &str, Option<&str>); 5] = [
        (Message::text("hello"), "invalid_json", None),
        (
            Message::text(r#"{"type": "speak.now", "event_id": "e1"}"#),
            "unknown_event_type",
            Some("e1"),
        ),
        (
            Message::text(r#"{"type": "input_audio_buffer.append", "event_id": "e2"}"#),
            "invalid_event",
            Some("e2"),
        ),
        (
            Message::text(r#"{"type": "input_audio_buffer.commit", "event_id": 7}"#),
            "invalid_event",
            None,
        ),
        (Message::binary(vec![0u8, 1, 2, 3]), "binary_not_supported", None),
    ];
    for (frame, code, client_event) in frames {
        socket.send(frame).await.unwrap();
        let error = next_event(&mut socket).await;
        assert_eq!(error["type"], "error", "{error}");
        assert!(error["event_id"].as_str().unwrap().starts_with("event_"));
        assert_eq!(error["error"]["type"], "invalid_request_error");
        assert_eq!(error["error"]["code"], code, "{error}");
        assert_eq!(error["error"]["event_id"].as_str(), client_event, "{error}");
        assert!(!error["error"]["message"].as_str().unwrap().is_empty());

        send(&mut socket, json!({ "type": "input_audio_buffer.commit" })).await;
        assert_eq!(next_event(&mut socket).await["type"], "input_audio_buffer.committed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_events_are_refused_and_oversized_messages_close_with_1009() {
    let (booth, _seen) = Booth::new();
    let limits = VoiceSocketOptions {
        max_event_bytes: 4 * 1024,
        max_message_bytes: 16 * 1024,
        ..VoiceSocketOptions::default()
    };
    let handler = options(booth).voice(VoiceHandshake::new().socket(limits)).build().unwrap();
    let base = serve(handler).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");

    let audio = "A".repeat(8 * 1024);
    send(&mut socket, json!({ "type": "input_audio_buffer.append", "audio": audio })).await;
    assert_eq!(next_event(&mut socket).await["error"]["code"], "event_too_large");
    send(&mut socket, json!({ "type": "input_audio_buffer.commit" })).await;
    assert_eq!(next_event(&mut socket).await["type"], "input_audio_buffer.committed");

    let audio = "A".repeat(32 * 1024);
    send(&mut socket, json!({ "type": "input_audio_buffer.append", "audio": audio })).await;
    let (events, code) = close_code(&mut socket).await;
    assert_eq!(
        events.last().map(|event| &event["error"]["code"]),
        Some(&json!("message_too_large"))
    );
    assert_eq!(code, Some(Some(CloseCode::Size)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_close_ends_the_session() {
    let (booth, mut seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    expect_seen(&mut seen, Seen::Started).await;
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    let goodbye = CloseFrame { code: CloseCode::Normal, reason: "bye".into() };
    socket.close(Some(goodbye)).await.unwrap();
    expect_seen(&mut seen, Seen::Ended).await;
    // The server answered the close handshake, echoing the code.
    let (_, code) = close_code(&mut socket).await;
    assert_eq!(code, Some(Some(CloseCode::Normal)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_ending_closes_the_socket_after_its_last_events() {
    let (booth, mut seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    send(&mut socket, json!({ "type": "response.cancel", "reason": "hang up" })).await;
    let (events, code) = close_code(&mut socket).await;
    assert_eq!(events.iter().map(|event| &event["type"]).collect::<Vec<_>>(), [&json!("goodbye")]);
    assert_eq!(code, Some(Some(CloseCode::Normal)));
    expect_seen(&mut seen, Seen::Started).await;
    expect_seen(&mut seen, Seen::Ended).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_shutdown_closes_sockets_with_1001() {
    let (booth, mut seen) = Booth::new();
    let handler = options(booth).build().unwrap();
    let base = serve(handler.clone()).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    handler.shutdown();
    let (_, code) = close_code(&mut socket).await;
    assert_eq!(code, Some(Some(CloseCode::Away)));
    expect_seen(&mut seen, Seen::Started).await;
    expect_seen(&mut seen, Seen::Ended).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_closed_after_the_idle_timeout() {
    let (booth, mut seen) = Booth::new();
    let limits = VoiceSocketOptions {
        idle_timeout: Duration::from_millis(300),
        ping_interval: Duration::from_secs(60),
        ..VoiceSocketOptions::default()
    };
    let handler = options(booth).voice(VoiceHandshake::new().socket(limits)).build().unwrap();
    let base = serve(handler).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    let (events, code) = close_code(&mut socket).await;
    assert_eq!(events[0]["type"], "session.created");
    assert_eq!(code, Some(Some(CloseCode::Away)));
    expect_seen(&mut seen, Seen::Started).await;
    expect_seen(&mut seen, Seen::Ended).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_quiet_client_that_answers_them() {
    let (booth, _seen) = Booth::new();
    let limits = VoiceSocketOptions {
        idle_timeout: Duration::from_millis(400),
        ping_interval: Duration::from_millis(100),
        ..VoiceSocketOptions::default()
    };
    let handler = options(booth).voice(VoiceHandshake::new().socket(limits)).build().unwrap();
    let base = serve(handler).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    let (mut socket, _) = connect(&url).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    // Reading answers the server's pings; a second of that is well past the idle timeout.
    let mut pings = 0;
    let quiet = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Ping(_))) => pings += 1,
                other => return other,
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "nothing but pings arrived: {quiet:?}");
    assert!(pings >= 5, "{pings} pings in a second");
    send(&mut socket, json!({ "type": "input_audio_buffer.commit" })).await;
    assert_eq!(next_event(&mut socket).await["type"], "input_audio_buffer.committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_routes_check_their_bodies_and_conversations() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth).build().unwrap()).await;
    let segments = |id: &str| format!("{base}/api/runtime/conversations/{id}/voice-segments");
    let post = http::Method::POST;

    let (status, result) =
        request(post.clone(), &segments("c1"), r#"{"client": {"name": "t"}}"#, &[]).await;
    assert_eq!(status, 201, "{result}");
    assert!(result["socket"]["url"].as_str().unwrap().starts_with("ws://"));
    assert_eq!(result["channelSegment"]["channel"], "voice");
    let (status, body) = request(post.clone(), &segments("nobody"), "", &[]).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("CONVERSATION_NOT_FOUND")));
    let (status, body) = request(post.clone(), &segments("gone"), "", &[]).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("CONVERSATION_CLOSED")));
    let (status, body) = request(post.clone(), &segments("c1"), r#"{"colour": "red"}"#, &[]).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("VALIDATION_ERROR")));
    assert!(body["error"]["message"].as_str().unwrap().contains("colour"), "{body}");

    let starts = format!("{base}/api/runtime/voice/conversations");
    let (status, body) = request(post.clone(), &starts, r#"{"agent": "x"}"#, &[]).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("VALIDATION_ERROR")));
    let (status, result) = request(post, &starts, r#"{"id": "conv 2/b"}"#, &[]).await;
    assert_eq!(status, 201, "{result}");
    assert_eq!(
        result["eventsUrl"],
        format!("{base}/api/runtime/conversations/conv%202%2Fb/events/stream")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_follow_the_proxy_or_the_public_url() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth.clone()).build().unwrap()).await;
    let starts = format!("{base}/api/runtime/voice/conversations");
    let headers = [("host", "voice.example.com"), ("x-forwarded-proto", "https")];
    let (status, result) = request(http::Method::POST, &starts, "", &headers).await;
    assert_eq!(status, 201);
    assert!(
        result["socket"]["url"]
            .as_str()
            .unwrap()
            .starts_with("wss://voice.example.com/api/runtime/voice/socket?token=")
    );
    assert_eq!(
        result["eventsUrl"],
        "https://voice.example.com/api/runtime/conversations/c1/events/stream"
    );

    let public = VoiceHandshake::new().public_url("wss://talk.example.com/edge/runtime/");
    let base = serve(options(booth).voice(public).build().unwrap()).await;
    let starts = format!("{base}/api/runtime/voice/conversations");
    let (_, result) = request(http::Method::POST, &starts, "", &[]).await;
    assert!(
        result["socket"]["url"]
            .as_str()
            .unwrap()
            .starts_with("wss://talk.example.com/edge/runtime/voice/socket?token=vst_")
    );
    assert_eq!(
        result["eventsUrl"],
        "https://talk.example.com/edge/runtime/conversations/c1/events/stream"
    );

    let (booth, _seen) = Booth::new();
    let invalid = options(booth).voice(VoiceHandshake::new().public_url("talk.example.com"));
    assert!(invalid.build().is_err());
}

/// Lets through only requests with `x-key: k`.
struct KeyGate;

#[async_trait]
impl Authorize for KeyGate {
    async fn authorize(&self, _path: &str, request: &http::request::Parts) -> Authorization {
        match request.headers.get("x-key") {
            Some(key) if key == "k" => Authorization::Allow,
            _ => Authorization::Deny,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_are_authorized_and_the_socket_by_its_token_alone() {
    let (booth, _seen) = Booth::new();
    let base = serve(options(booth).authorize(KeyGate).build().unwrap()).await;
    let starts = format!("{base}/api/runtime/voice/conversations");
    let (status, _) = request(http::Method::POST, &starts, "", &[]).await;
    assert_eq!(status, 401);
    let (status, result) = request(http::Method::POST, &starts, "", &[("x-key", "k")]).await;
    assert_eq!(status, 201);
    let url = result["socket"]["url"].as_str().unwrap();
    assert!(connect(url).await.is_ok(), "no key needed on the socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimes_without_voice_answer_501() {
    struct Mute;
    #[async_trait]
    impl Runtime for Mute {
        async fn create_conversation(
            &self,
            _input: CreateConversationInput,
        ) -> Result<Conversation, RuntimeError> {
            Ok(Booth::conversation("c1", Lifecycle::Active))
        }
        async fn list_events(
            &self,
            _conversation_id: &str,
            _after_offset: Option<u64>,
            _limit: u32,
        ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
            Ok(Vec::new())
        }
    }
    let base = serve(HandlerOptions::new(Arc::new(Mute)).build().unwrap()).await;
    let (status, _) =
        request(http::Method::POST, &format!("{base}/voice/conversations"), "", &[]).await;
    assert_eq!(status, 501);
    let url = format!("{}/voice/socket?token=vst_x", base.replace("http://", "ws://"));
    assert_eq!(refusal(connect(&url).await).0, 501);
}

/// A session that writes as fast as it can, and reports when writing fails.
struct Flood {
    failed: mpsc::UnboundedSender<usize>,
}

#[async_trait]
impl VoiceSession for Flood {
    async fn run(self: Box<Self>, io: VoiceSocketIo) {
        let chunk = "A".repeat(4096);
        for sent in 0.. {
            let delta = json!({ "type": "response.audio.delta", "delta": chunk });
            if io.send.send(delta).await.is_err() {
                let _ = self.failed.send(sent);
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_dropped_and_memory_stays_bounded() {
    // The client's end of a small in-memory pipe is never read.
    let (server, _client) = tokio::io::duplex(16 * 1024);
    let (failed, mut failures) = mpsc::unbounded_channel();
    let options = VoiceSocketOptions {
        send_timeout: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(60),
        ..VoiceSocketOptions::default()
    };
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let served = tokio::spawn(cairn_runtime::serve_voice_socket_with(
        server,
        Box::new(Flood { failed }),
        shutdown,
        options,
    ));
    let sent = tokio::time::timeout(Duration::from_secs(10), failures.recv())
        .await
        .expect("the socket is dropped in time")
        .unwrap();
    // The pipe, the socket's queue and one message in flight: nothing grows past them.
    assert!(sent < 100, "{sent} events were taken before the socket was dropped");
    tokio::time::timeout(Duration::from_secs(10), served).await.expect("serving ends").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_handler_closes_new_sockets_at_once() {
    let (booth, mut seen) = Booth::new();
    let handler = options(booth).build().unwrap();
    let base = serve(handler.clone()).await;
    let url = start(&base).await["socket"]["url"].as_str().unwrap().to_owned();
    handler.shutdown();
    let (mut socket, _) = connect(&url).await.unwrap();
    let (_, code) = close_code(&mut socket).await;
    assert_eq!(code, Some(Some(CloseCode::Away)));
    expect_seen(&mut seen, Seen::Started).await;
    expect_seen(&mut seen, Seen::Ended).await;
}
