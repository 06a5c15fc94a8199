//! What an attacker's connections and a careful reviewer's races do to the real daemon:
//! stalled connections from several loopback addresses, a flood of large batches, rate
//! refusals that say when to retry, argv commands through the hook, widget outputs and
//! journey events checked against what they answer, streams that end with their token, and
//! erased text that is gone from the database's files.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::util::{Body, Daemon, create_key, opened_prompt, run_with_input};

/// A connection to `to` from the loopback address `127.0.0.<last>`.
async fn connect_from(last: u8, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, last)), 0)).unwrap();
    socket.connect(to).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_leave_health_answering_and_are_all_closed_within_the_timeout() {
    let daemon = Daemon::start_with(&["--header-timeout", "2s"], &[]);
    let address = daemon.address();
    // 1,024 connections from four addresses (256 each, the per-address cap), each having
    // sent the first byte of HTTP/2's preface and nothing more.
    let mut stalled = Vec::new();
    for n in 0..1024u32 {
        let mut stream = connect_from(2 + (n % 4) as u8, address).await;
        stream.write_all(b"P").await.unwrap();
        stalled.push(stream);
    }
    let opened = Instant::now();
    for _ in 0..5 {
        let asked = Instant::now();
        let health = daemon.get("/api/health").await;
        assert_eq!(health.status, 200, "the owner's probe is answered: {health:?}");
        assert!(asked.elapsed() < Duration::from_secs(2), "answered in {:?}", asked.elapsed());
    }
    // Closed by the daemon within the header timeout and the reaper's slack (1.5 ×).
    let deadline = opened + Duration::from_secs(6);
    for (n, mut stream) in stalled.into_iter().enumerate() {
        let mut buffer = [0u8; 256];
        let read = tokio::time::timeout_at(deadline.into(), stream.read(&mut buffer)).await;
        let read = read.unwrap_or_else(|_| panic!("connection {n} is still open after 6 s"));
        assert!(matches!(read, Ok(0) | Err(_)), "connection {n} got an answer: {read:?}");
    }
    let health = daemon.get("/api/health").await;
    assert_eq!(health.status, 200);
}

/// Sends one HTTP/1.1 request from `127.0.0.<last>` and reads the whole answer (the
/// request's body is written while the answer is read, as a client that streams does).
async fn exchange_from(last: u8, to: SocketAddr, head: String, body: Vec<u8>) -> (u16, String) {
    let stream = connect_from(last, to).await;
    let (mut reading, mut writing) = stream.into_split();
    let writer = tokio::spawn(async move {
        let _ = writing.write_all(head.as_bytes()).await;
        let _ = writing.write_all(&body).await;
        writing
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(120), reading.read_to_end(&mut answer))
        .await
        .expect("an answer within two minutes");
    drop(writer.await);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, answer)
}

/// A batch body of 1,000 memories just under the 16 MiB limit.
fn large_batch(seed: usize) -> Vec<u8> {
    let memories: Vec<Value> = (0..1000)
        .map(|n| {
            let words: String = (0..2_000)
                .map(|w| format!("w{}x{} ", (seed * 7 + n * 13 + w) % 9973, w % 7))
                .collect();
            json!({"content": words.chars().take(16_200).collect::<String>(), "scope": "user"})
        })
        .collect();
    let body = serde_json::to_vec(&json!({"memories": memories})).unwrap();
    assert!(body.len() <= 16 * 1024 * 1024, "{} bytes", body.len());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_large_batches_at_once_keep_the_daemon_under_400_mb() {
    let daemon = Daemon::start();
    let address = daemon.address();
    let mut sending = Vec::new();
    for n in 0..16 {
        let body = large_batch(n);
        let head = format!(
            "POST /api/memories/batch HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        sending.push(tokio::spawn(exchange_from(2 + (n % 4) as u8, address, head, body)));
    }
    let mut created = 0;
    for sent in sending {
        let (status, answer) = sent.await.unwrap();
        match status {
            201 => created += 1,
            503 => {
                let lower = answer.to_ascii_lowercase();
                assert!(lower.contains("retry-after: "), "{}", &answer[..answer.len().min(600)]);
                assert!(answer.contains("\"SERVER_BUSY\""), "{}", &answer[..answer.len().min(600)]);
            }
            _ => panic!("a batch got {status}: {}", &answer[..answer.len().min(600)]),
        }
    }
    assert!(created >= 1, "some batches went through");
    let peak = daemon.peak_rss();
    println!(
        "peak RSS under 16 concurrent 16 MiB batches: {:.1} MB ({created} stored)",
        peak as f64 / 1e6
    );
    assert!(peak < 400_000_000, "the daemon peaked at {peak} bytes");
    let health = daemon.get("/api/health").await;
    assert_eq!(health.body["memoryCount"], created * 1000, "{health:?}");
}

#[tokio::test]
async fn a_batch_over_the_rate_is_refused_before_its_body_and_says_when_to_retry() {
    let daemon = Daemon::start_with(&["--rate-limit-bulk", "5"], &[]);
    // 1,000 memories spend 10 bulk units, twice the limit: a 429 that says when.
    let memories: Vec<Value> =
        (0..1000).map(|n| json!({"content": format!("note {n}"), "scope": "user"})).collect();
    let refused = daemon.post("/api/memories/batch", json!({"memories": memories})).await;
    refused.assert_error(429, "RATE_LIMITED");
    let retry: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1, "{refused:?}");
    assert_eq!(daemon.get("/api/health").await.body["memoryCount"], 0, "nothing stored");

    // A body that declares 16 MiB is refused on its size, before a byte of it is sent.
    let mut stream = TcpStream::connect(daemon.address()).await.unwrap();
    let head = "POST /api/memories/batch HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                content-length: 16777000\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 429"), "{answer}");
    assert!(answer.contains("retry-after: "), "{answer}");
}

fn hook(url: &str, payload: &Value) -> std::process::Output {
    run_with_input(
        Command::new(crate::util::cairn_bin()).args(["hook", "pre-tool-use"]).env("CAIRN_URL", url),
        &payload.to_string(),
    )
}

#[tokio::test]
async fn an_argv_command_is_guarded_as_the_whole_line() {
    let daemon = Daemon::start();
    for tool_input in [
        json!({"command": ["rm", "-rf", "/"]}),
        json!({"command": ["bash", "-lc", "rm -rf /"]}),
        json!({"cmd": "rm -rf /"}),
        json!({"cmd": ["rm", "-rf", "/"]}),
    ] {
        let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "local_shell", "tool_input": tool_input});
        let output = hook(daemon.base_url(), &payload);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{tool_input}: {stderr}");
        assert!(stderr.starts_with("Cairn blocked this command: "), "{stderr}");
    }
    let harmless = json!({"hook_event_name": "PreToolUse", "tool_name": "local_shell", "tool_input": {"command": ["ls", "-la"]}});
    assert_eq!(hook(daemon.base_url(), &harmless).status.code(), Some(0));
}

const RUNTIME: &str = "/api/runtime";

async fn new_conversation(daemon: &Daemon) -> String {
    let created = daemon.post(&format!("{RUNTIME}/conversations"), json!({})).await;
    assert_eq!(created.status, 201, "{created:?}");
    created.body["conversation"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn widget_outputs_are_checked_against_their_prompt_and_payloads_default_to_empty() {
    let daemon = Daemon::start();
    let id = new_conversation(&daemon).await;
    let sent = daemon
        .post(
            &format!("{RUNTIME}/conversations/{id}/messages"),
            json!({"message": "I'd like to book a demo"}),
        )
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let prompt_id = opened_prompt(&sent.body).expect("a form is opened");
    let widgets = format!("{RUNTIME}/conversations/{id}/widgets");
    let before = daemon.get(&format!("{RUNTIME}/conversations/{id}/events")).await.body["events"]
        .as_array()
        .unwrap()
        .len();
    for (output, field) in [
        (json!({"name": "Ada"}), "output.email"),
        (json!({"name": "Ada", "email": "not an address"}), "output.email"),
        (json!({"email": "ada@example.com"}), "output.name"),
    ] {
        let refused = daemon
            .post(&widgets, json!({"promptId": prompt_id, "widgetKind": "form", "output": output}))
            .await;
        let message = refused.assert_error(422, "VALIDATION_ERROR");
        assert!(message.contains(field), "{message}");
    }
    let events = daemon.get(&format!("{RUNTIME}/conversations/{id}/events")).await;
    assert_eq!(events.body["events"].as_array().unwrap().len(), before, "nothing appended");
    let replay = daemon.get(&format!("{RUNTIME}/conversations/{id}/replay")).await;
    assert_eq!(replay.body["openPrompts"].as_array().unwrap().len(), 1, "the prompt stays open");
    let output = json!({"name": "Ada", "email": "ada@example.com"});
    let submitted = daemon
        .post(&widgets, json!({"promptId": prompt_id, "widgetKind": "form", "output": output}))
        .await;
    assert_eq!(submitted.status, 200, "{submitted:?}");

    // A rating outside its scale is refused too.
    let other = new_conversation(&daemon).await;
    let journey = format!("{RUNTIME}/conversations/{other}/journey-events");
    // No payload: an empty object, which the event's schema (no required field) takes.
    let started = daemon.post(&journey, json!({"eventName": "feedback.requested"})).await;
    assert_eq!(started.status, 201, "{started:?}");
    let rating_id = opened_prompt(&started.body).expect("a rating is opened");
    let widgets = format!("{RUNTIME}/conversations/{other}/widgets");
    let refused = daemon
        .post(
            &widgets,
            json!({"promptId": rating_id, "widgetKind": "rating", "output": {"value": 9}}),
        )
        .await;
    assert!(refused.assert_error(422, "VALIDATION_ERROR").contains("output.value"));
    let rated = daemon
        .post(
            &widgets,
            json!({"promptId": rating_id, "widgetKind": "rating", "output": {"value": 4}}),
        )
        .await;
    assert_eq!(rated.status, 200, "{rated:?}");
}

/// The server side of a chat widget on a production daemon: a `runtime` key, and one
/// conversation it created, for which it mints browsers' tokens.
struct WidgetServer {
    _directory: tempfile::TempDir,
    daemon: Daemon,
    key: String,
    conversation: String,
}

impl WidgetServer {
    async fn start() -> WidgetServer {
        let directory = tempfile::tempdir().unwrap();
        let key = create_key(directory.path(), "runtime");
        let daemon = Daemon::start_in_with(directory.path(), &["--profile", "production"], &[]);
        let created = daemon
            .request_with(
                Method::POST,
                &format!("{RUNTIME}/conversations"),
                Body::Json(json!({})),
                &[("x-api-key", key.as_str())],
            )
            .await;
        assert_eq!(created.status, 201, "{created:?}");
        let conversation = created.body["conversation"]["id"].as_str().unwrap().to_owned();
        WidgetServer { _directory: directory, daemon, key, conversation }
    }

    fn as_server(&self) -> [(&str, &str); 1] {
        [("x-api-key", self.key.as_str())]
    }

    /// A conversation token for the conversation, good for `ttl` seconds.
    async fn mint(&self, ttl: u64) -> Value {
        let body = json!({"conversationId": self.conversation, "ttlSeconds": ttl});
        let minted = self
            .daemon
            .request_with(
                Method::POST,
                "/api/conversation-tokens",
                Body::Json(body),
                &self.as_server(),
            )
            .await;
        assert_eq!(minted.status, 201, "{minted:?}");
        minted.body
    }
}

#[tokio::test]
async fn an_event_stream_ends_within_a_second_of_its_token_being_revoked_or_expiring() {
    let widget = WidgetServer::start().await;
    let (daemon, as_server, id) = (&widget.daemon, widget.as_server(), &widget.conversation);
    let mint = async |ttl: u64| widget.mint(ttl).await;

    // Revoked: the stream ends with an error event, and carries nothing sent after.
    let token = mint(600).await;
    let secret = token["token"].as_str().unwrap();
    let path = format!("{RUNTIME}/conversations/{id}/events/stream?token={secret}");
    let mut stream = daemon.stream(Method::GET, &path, Body::None, &[]).await;
    assert_eq!(stream.status, 200);
    let token_id = token["tokenId"].as_str().unwrap();
    let revoked = daemon
        .request_with(
            Method::DELETE,
            &format!("/api/conversation-tokens/{token_id}"),
            Body::None,
            &as_server,
        )
        .await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let revoked_at = Instant::now();
    let ended = tokio::time::timeout(Duration::from_millis(1_500), async {
        while let Some(message) = stream.next().await {
            if message.event.as_deref() == Some("error") {
                assert_eq!(message.json()["error"]["code"], "UNAUTHORIZED");
                return stream.next().await;
            }
            assert_ne!(message.event.as_deref(), Some("message"), "no event after revocation");
        }
        None
    })
    .await
    .expect("the stream ended within 1.5 s of the revocation");
    assert!(ended.is_none(), "nothing after the error: {ended:?}");
    assert!(revoked_at.elapsed() < Duration::from_millis(1_500));

    // Expired: the same, within a second of its expiry.
    let token = mint(2).await;
    let secret = token["token"].as_str().unwrap();
    let path = format!("{RUNTIME}/conversations/{id}/events/stream?token={secret}");
    let mut stream = daemon.stream(Method::GET, &path, Body::None, &[]).await;
    assert_eq!(stream.status, 200);
    let opened = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(4), async {
        while let Some(message) = stream.next().await {
            if message.event.as_deref() == Some("error") {
                return;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived its token");
    assert!(opened.elapsed() < Duration::from_millis(3_500), "{:?}", opened.elapsed());
}

/// Whether `needle` appears anywhere in the bytes of the file at `path` (absent: no).
fn file_holds(path: &std::path::Path, needle: &[u8]) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    bytes.windows(needle.len()).any(|window| window == needle)
}

#[tokio::test]
async fn erased_text_is_gone_from_the_database_files_and_subjects_fold_unicode() {
    let directory = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_in(directory.path());
    let secret = "Zebulonia Quixotic lives at 41 Marrowby Lane";
    let kept = "The build uses cargo nextest for the tests";
    daemon.remember(json!({"content": secret, "scope": "user"})).await;
    daemon.remember(json!({"content": kept, "scope": "user"})).await;
    daemon.remember(json!({"content": "Call JÖRG SCHMIDT about Marrowby", "scope": "user"})).await;
    // Earlier versions count too: the text before an edit, and a memory archived before.
    let edited = daemon
        .remember(json!({"content": "Zebulonia Quixotic keeps a zorbflux", "scope": "user"}))
        .await;
    let archived = daemon
        .remember(json!({"content": "Zebulonia Quixotic owes a glimmerquad", "scope": "user"}))
        .await;
    let id = new_conversation(&daemon).await;
    let said = daemon
        .post(
            &format!("{RUNTIME}/conversations/{id}/messages"),
            json!({"message": "Please write to ÖZLEM ÜNAL today"}),
        )
        .await;
    assert_eq!(said.status, 200, "{said:?}");
    // A few searches, so the full-text index is read and written.
    for query in ["zebulonia", "marrowby", "cargo"] {
        assert_eq!(daemon.get(&format!("/api/search?q={query}")).await.status, 200);
    }
    let changed = json!({"content": "Zebulonia Quixotic keeps nothing"});
    assert_eq!(daemon.patch(&format!("/api/memories/{edited}"), changed).await.status, 200);
    assert_eq!(daemon.delete(&format!("/api/memories/{archived}")).await.status, 200);

    for subject in ["Zebulonia Quixotic", "Jörg Schmidt", "Özlem Ünal"] {
        let erased = daemon.post("/api/erase", json!({"subject": subject})).await;
        assert_eq!(erased.status, 200, "{erased:?}");
        let found = erased.body["memories"].as_array().unwrap().len()
            + erased.body["conversations"].as_array().unwrap().len();
        let expected = if subject.starts_with("Zebulonia") { 3 } else { 1 };
        assert_eq!(found, expected, "{subject}: {erased:?}");
    }
    let files = ["cairn.db", "cairn.db-wal"].map(|name| directory.path().join(name));
    let check = |when: &str| {
        for file in &files {
            for needle in [
                "Zebulonia",
                "zebulonia",
                "Marrowby Lane",
                "ÖZLEM",
                "JÖRG",
                "jorg",
                "schmidt",
                "zorbflux",
                "glimmerquad",
            ] {
                assert!(
                    !file_holds(file, needle.as_bytes()),
                    "{when}: {} still holds {needle:?}",
                    file.display()
                );
            }
        }
        assert!(
            file_holds(&files[0], b"nextest") || file_holds(&files[1], b"nextest"),
            "what was kept is there"
        );
    };
    check("after the erasure");
    assert!(daemon.terminate().success());
    check("after a graceful stop");
}

#[tokio::test]
async fn a_voice_socket_closes_within_a_second_of_the_token_that_started_it_being_revoked() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let widget = WidgetServer::start().await;
    let (daemon, as_server, id) = (&widget.daemon, widget.as_server(), &widget.conversation);
    let minted = widget.mint(600).await;
    let bearer = format!("Bearer {}", minted["token"].as_str().unwrap());
    let started = daemon
        .request_with(
            Method::POST,
            &format!("{RUNTIME}/conversations/{id}/voice-segments"),
            Body::Json(json!({})),
            &[("authorization", bearer.as_str())],
        )
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let mut request =
        started.body["socket"]["url"].as_str().unwrap().into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "service.voice.v1".parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let first = socket.next().await.unwrap().unwrap();
    assert!(first.to_text().unwrap().contains("session.created"), "{first:?}");

    let token_id = minted["tokenId"].as_str().unwrap();
    let revoked = daemon
        .request_with(
            Method::DELETE,
            &format!("/api/conversation-tokens/{token_id}"),
            Body::None,
            &as_server,
        )
        .await;
    assert_eq!(revoked.status, 200, "{revoked:?}");
    let closed = tokio::time::timeout(Duration::from_millis(1_500), async {
        while let Some(Ok(message)) = socket.next().await {
            if let Message::Close(frame) = message {
                return frame;
            }
        }
        None
    })
    .await
    .expect("the socket closed within 1.5 s of the revocation");
    let frame = closed.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1008, "{frame:?}");
}
