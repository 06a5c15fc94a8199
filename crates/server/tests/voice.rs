//! The voice socket through the daemon's transport: the upgrade is served, the socket needs
//! its token and no API key even where every other request needs one, it keeps its
//! connection's slot until it closes, and shutdown closes it with 1001 before `serve`
//! returns.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_api::{ApiConfig, AuthConfig, Profile};
use cairn_runtime::{
    Runtime, RuntimeError, RuntimeEvent, VOICE_PROTOCOL, VoiceClientEvent, VoiceSession,
    VoiceSocketIo, server_event,
};
use cairn_server::{RUNTIME_BASE_PATH, ServerConfig};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A runtime whose socket tokens are the ones the test hands it, each good once.
struct Tokens(Mutex<Vec<String>>);

#[async_trait]
impl Runtime for Tokens {
    async fn list_events(
        &self,
        _conversation_id: &str,
        _after_offset: Option<u64>,
        _limit: u32,
    ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
        Ok(Vec::new())
    }

    async fn open_voice_socket(&self, token: &str) -> Result<Box<dyn VoiceSession>, RuntimeError> {
        let mut tokens = self.0.lock().unwrap();
        let Some(index) = tokens.iter().position(|known| known == token) else {
            return Err(RuntimeError::Unauthorized("unknown voice socket token".to_owned()));
        };
        tokens.remove(index);
        Ok(Box::new(Echo))
    }
}

/// Greets, and answers `commit` with `committed`.
struct Echo;

#[async_trait]
impl VoiceSession for Echo {
    async fn run(self: Box<Self>, mut io: VoiceSocketIo) {
        let _ = io.send.send(server_event("session.created", json!({}))).await;
        while let Some(event) = io.events.recv().await {
            if let VoiceClientEvent::InputAudioBufferCommit { .. } = event {
                let _ = io.send.send(json!({ "type": "input_audio_buffer.committed" })).await;
            }
        }
    }
}

mod support;

/// A daemon in the production profile (every request needs credentials, and none exist)
/// whose runtime takes `tokens`.
async fn daemon(tokens: &[&str], config: ServerConfig) -> support::Daemon {
    let auth = AuthConfig { profile: Profile::Production, jwt: None };
    let runtime = Tokens(Mutex::new(tokens.iter().map(|token| token.to_string()).collect()));
    support::start(ApiConfig { auth, ..ApiConfig::default() }, Some(Arc::new(runtime)), config)
        .await
}

async fn connect(address: SocketAddr, token: &str) -> Result<Socket, WsError> {
    let url = format!("ws://{address}{RUNTIME_BASE_PATH}/voice/socket?token={token}");
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", VOICE_PROTOCOL.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.map(|(socket, _)| socket)
}

async fn next_event(socket: &mut Socket) -> Value {
    cairn_test_support::ws::next_json(socket, Duration::from_secs(10)).await
}

/// A plain HTTP GET on a new connection; its status.
async fn status_of(address: SocketAddr, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    answer.split(' ').nth(1).and_then(|status| status.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_needs_its_token_and_no_api_key() {
    let running = daemon(&["vst_a"], ServerConfig::default()).await;
    let address = running.address;
    // Everything else needs credentials in this profile.
    assert_eq!(status_of(address, &format!("{RUNTIME_BASE_PATH}/conversations")).await, 401);

    match connect(address, "vst_wrong").await {
        Err(WsError::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("a wrong token is refused with 401, got {:?}", other.map(|_| ())),
    }
    let mut socket = connect(address, "vst_a").await.expect("the token opens the socket");
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    socket.send(Message::text(r#"{"type": "input_audio_buffer.commit"}"#)).await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "input_audio_buffer.committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_socket_holds_its_connection_slot() {
    let config = ServerConfig { max_connections_per_address: 1, ..ServerConfig::default() };
    let running = daemon(&["vst_a", "vst_b"], config).await;
    let address = running.address;
    let mut socket = connect(address, "vst_a").await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    // The socket's HTTP connection is over, but the socket still counts as a connection.
    assert_eq!(status_of(address, "/api/health").await, 429);

    socket.close(None).await.unwrap();
    while socket.next().await.is_some() {}
    let mut freed = false;
    for _ in 0..50 {
        if connect(address, "vst_b").await.is_ok() {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(freed, "a closed socket gives its slot back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_sockets_with_1001_and_waits_for_them() {
    let mut daemon = daemon(&["vst_a"], ServerConfig::default()).await;
    let mut socket = connect(daemon.address, "vst_a").await.unwrap();
    assert_eq!(next_event(&mut socket).await["type"], "session.created");
    daemon.stop.take().unwrap().send(()).unwrap();
    let mut close = None;
    // Reading on answers the close frame, as any client does.
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_secs(10), socket.next()).await
    {
        match message {
            Ok(Message::Close(frame)) => close = frame.map(|frame| frame.code),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert_eq!(close, Some(CloseCode::Away));
    let served = tokio::time::timeout(Duration::from_secs(5), daemon.served).await;
    assert!(served.expect("serve returns once the socket closed").unwrap().is_ok());
}
