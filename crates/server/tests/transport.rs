//! The transport's guards over real sockets: the slow-loris deadline on request headers (on
//! a new connection and on every later request of a kept-alive one), a client that stops
//! reading its answers, an event stream quieter than that deadline (left open), HTTP/2 with
//! prior knowledge beside HTTP/1 (however the first bytes arrive), and graceful shutdown,
//! which lets a request in flight finish before `serve` returns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cairn_api::ApiConfig;
use cairn_runtime::{Runtime, RuntimeError, RuntimeEvent};
use cairn_server::{RUNTIME_BASE_PATH, ServerConfig};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;

use support::Daemon;

/// A solo-profile daemon (no credentials needed on loopback) on a port of its own.
async fn daemon(config: ServerConfig) -> Daemon {
    daemon_with(config, None).await
}

/// [`daemon`] with a conversation runtime of its own at [`RUNTIME_BASE_PATH`].
async fn daemon_with(config: ServerConfig, runtime: Option<Arc<dyn Runtime>>) -> Daemon {
    support::start(ApiConfig::default(), runtime, config).await
}

/// Reads one HTTP/1.1 response with a `Content-Length` body: its status, headers and body.
async fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(read > 0, "the connection closed before the answer: {received:?}");
        received.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&received).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
        let length = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
            })
            .expect("a content-length");
        if body.len() >= length {
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            return (status, head.to_owned(), body[..length].to_owned());
        }
    }
}

/// Waits until the server closes `stream` (end of file or reset); how long that took.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("the connection was still open after {limit:?}"),
        }
    }
}

const HEALTH: &str = "GET /api/health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_that_stall_close_the_connection_on_every_request_of_it() {
    let timeout = Duration::from_millis(400);
    let daemon =
        daemon(ServerConfig { header_read_timeout: timeout, ..ServerConfig::default() }).await;

    // A first request whose headers never end.
    let mut stream = TcpStream::connect(daemon.address).await.unwrap();
    stream.write_all(b"GET /api/health HTTP/1.1\r\nhost: 127.0.0.1\r\n").await.unwrap();
    let waited = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(waited >= timeout - Duration::from_millis(50), "closed after {waited:?}");

    // Requests that arrive in time keep a connection open well past one deadline: each
    // request's headers get a deadline of their own.
    let mut stream = TcpStream::connect(daemon.address).await.unwrap();
    let started = Instant::now();
    let mut answered = started;
    for _ in 0..6 {
        tokio::time::sleep(timeout / 3).await;
        stream.write_all(HEALTH.as_bytes()).await.unwrap();
        let (status, _, body) = read_response(&mut stream).await;
        assert_eq!(status, 200, "{body}");
        answered = Instant::now();
    }
    assert!(started.elapsed() > timeout * 2);
    // Then headers that stall, on the same connection, close it at their deadline, which
    // runs from the last answer.
    tokio::time::sleep(timeout / 3).await;
    stream.write_all(b"GET /api/health HTTP/1.1\r\nhost: 127.0.0.1\r\n").await.unwrap();
    closed_within(&mut stream, Duration::from_secs(5)).await;
    let waited = answered.elapsed();
    assert!(waited >= timeout - Duration::from_millis(50), "closed after {waited:?}");

    // So does a kept-alive connection that sends nothing more.
    let mut stream = TcpStream::connect(daemon.address).await.unwrap();
    stream.write_all(HEALTH.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut stream).await.0, 200);
    closed_within(&mut stream, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_answers_is_closed() {
    let timeout = Duration::from_millis(400);
    let daemon =
        daemon(ServerConfig { header_read_timeout: timeout, ..ServerConfig::default() }).await;
    // Requests enough for their answers to fill both sides' socket buffers, sent without
    // reading one answer: the server can write no more, and so reads no more.
    let requests = HEALTH.repeat(1_000_000);
    let stream = TcpStream::connect(daemon.address).await.unwrap();
    let (_unread, mut sending) = stream.into_split();
    let sent =
        tokio::time::timeout(Duration::from_secs(30), sending.write_all(requests.as_bytes()))
            .await
            .expect("the server closed the connection rather than wait for the client forever");
    assert!(sent.is_err(), "all the requests were taken: the answers never filled the buffers");
}

/// A runtime with conversations that never have an event.
struct Quiet;

#[async_trait::async_trait]
impl Runtime for Quiet {
    async fn list_events(
        &self,
        _conversation_id: &str,
        _after_offset: Option<u64>,
        _limit: u32,
    ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
        Ok(Vec::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_quieter_than_the_header_deadline_stays_open() {
    let timeout = Duration::from_millis(300);
    let config = ServerConfig { header_read_timeout: timeout, ..ServerConfig::default() };
    let daemon = daemon_with(config, Some(Arc::new(Quiet))).await;
    let mut stream = TcpStream::connect(daemon.address).await.unwrap();
    let request = format!(
        "GET {RUNTIME_BASE_PATH}/conversations/c1/events/stream HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&received).contains("retry: 1000") {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("the stream's first frame in time")
            .unwrap();
        assert!(read > 0, "closed before the first frame: {received:?}");
        received.extend_from_slice(&buffer[..read]);
    }
    assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"), "{received:?}");
    // Nothing is written for five deadlines (the heartbeat comes after 15 s): still open.
    match tokio::time::timeout(timeout * 5, stream.read(&mut buffer)).await {
        Err(_elapsed) => {}
        Ok(read) => panic!("the stream ended or wrote while quiet: {read:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_and_http1_are_both_served() {
    let daemon = daemon(ServerConfig::default()).await;

    let stream = TcpStream::connect(daemon.address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 connection");
    tokio::spawn(connection);
    for _ in 0..3 {
        let request = http::Request::get(format!("http://{}/api/health", daemon.address))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.expect("an HTTP/2 answer");
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let health: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(health["status"], "healthy");
    }

    // HTTP/1 requests beginning with `P`, whole or a byte at first (which could still be
    // HTTP/2's preface), are HTTP/1 all the same.
    for (first, rest) in
        [("PUT /api/health HTTP/1.1\r\n", ""), ("P", "UT /api/health HTTP/1.1\r\n")]
    {
        let mut stream = TcpStream::connect(daemon.address).await.unwrap();
        stream.write_all(first.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        stream.write_all(format!("{rest}host: 127.0.0.1\r\n\r\n").as_bytes()).await.unwrap();
        let (status, head, body) = read_response(&mut stream).await;
        assert_eq!(status, 405, "{head}\n{body}");
        assert!(body.contains("METHOD_NOT_ALLOWED"), "{body}");
        stream.write_all(HEALTH.as_bytes()).await.unwrap();
        assert_eq!(read_response(&mut stream).await.0, 200);
    }
}

/// An HTTP/2 connection that asks for health (answered on the fast path) more often than
/// the header timeout is busy, not stalled: the reaper counts every request it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_answered_on_the_fast_path_stays_open() {
    let timeout = Duration::from_millis(300);
    let config = ServerConfig { header_read_timeout: timeout, ..ServerConfig::default() };
    let daemon = daemon(config).await;
    let stream = TcpStream::connect(daemon.address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 connection");
    tokio::spawn(connection);
    for _ in 0..20 {
        let request = http::Request::get(format!("http://{}/api/health", daemon.address))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.expect("the connection is open");
        assert_eq!(response.status(), 200);
        tokio::time::sleep(timeout / 3).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_request_in_flight_finish_then_closes() {
    let mut daemon = daemon(ServerConfig::default()).await;
    let idle = {
        let mut stream = TcpStream::connect(daemon.address).await.unwrap();
        stream.write_all(HEALTH.as_bytes()).await.unwrap();
        assert_eq!(read_response(&mut stream).await.0, 200);
        stream
    };
    // A create whose body is half sent when shutdown begins.
    let body = br#"{"content": "Shutdown lets this memory be written", "scope": "global"}"#;
    let mut stream = TcpStream::connect(daemon.address).await.unwrap();
    let head = format!(
        "POST /api/memories HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    daemon.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!daemon.served.is_finished(), "serve waits for the request in flight");
    stream.write_all(&body[10..]).await.unwrap();
    let (status, head, answer) = read_response(&mut stream).await;
    assert_eq!(status, 201, "{head}\n{answer}");
    let created: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(created["content"], "Shutdown lets this memory be written");
    // Both connections close, and `serve` returns well before its 10 s of grace.
    closed_within(&mut stream, Duration::from_secs(5)).await;
    let mut idle = idle;
    closed_within(&mut idle, Duration::from_secs(5)).await;
    let served = tokio::time::timeout(Duration::from_secs(5), daemon.served).await;
    assert!(served.expect("serve returns").unwrap().is_ok());
}
