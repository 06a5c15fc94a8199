//! The default runtime embeds: the example application serves its own routes and the
//! runtime's side by side over real HTTP, with its own `authorize` rule; idle event streams
//! get heartbeats.

#[path = "../examples/embed.rs"]
mod example;

use std::sync::Arc;

use bytes::Bytes;
use cairn_runtime::HandlerOptions;
use cairn_test_support::{column, loopback};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

struct Reply {
    status: u16,
    text: String,
    json: Value,
}

async fn call(base: &str, method: &str, path: &str, user: Option<&str>, body: Value) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", "application/json");
    if let Some(user) = user {
        request = request.header("x-app-user", user);
    }
    let body = if body.is_null() { Bytes::new() } else { Bytes::from(body.to_string()) };
    let response = client.request(request.body(Full::new(body)).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Reply { status, json: serde_json::from_str(&text).unwrap_or(Value::Null), text }
}

async fn start(handler: cairn_runtime::RuntimeHandler) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(example::serve(listener, handler));
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_serves_beside_the_applications_routes() {
    let dir = tempfile::tempdir().unwrap();
    let base = start(example::chat_handler(&dir.path().join("chat.db"))).await;

    let own = call(&base, "GET", "/", None, Value::Null).await;
    assert_eq!((own.status, own.text.as_str()), (200, "my application"));

    let created = call(&base, "POST", "/chat/conversations", Some("ada"), json!({})).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/chat/conversations/{id}/messages");
    let sent = call(&base, "POST", &path, Some("ada"), json!({"message": "hello"})).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert!(!sent.json["text"].as_str().unwrap().is_empty());
    let path = format!("/chat/conversations/{id}/events");
    let events = call(&base, "GET", &path, Some("ada"), Value::Null).await;
    let offsets: Vec<u64> = column(&events.json["events"], "offset", Value::as_u64);
    assert!(offsets.len() >= 3, "{}", events.text);
    assert_eq!(offsets, (0..offsets.len() as u64).collect::<Vec<_>>());

    // The authorize hook: no user is denied (401 in the envelope), a banned one gets the
    // application's own response.
    let denied = call(&base, "POST", "/chat/conversations", None, json!({})).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.json["error"]["code"], "UNAUTHORIZED");
    let custom = call(&base, "POST", "/chat/conversations", Some("banned"), json!({})).await;
    assert_eq!((custom.status, custom.text.as_str()), (403, "this account is suspended"));

    // Outside the base path the runtime is not asked at all.
    let other = call(&base, "GET", "/chatter", Some("ada"), Value::Null).await;
    assert_eq!((other.status, other.text.as_str()), (404, "not here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_event_streams_get_comment_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(cairn_store_sqlite::SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let runtime = cairn_agents::DefaultRuntime::new(store, None, Default::default());
    let handler = HandlerOptions::new(Arc::new(runtime))
        .sse_heartbeat(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    let base = start_plain(handler).await;
    let created = call(&base, "POST", "/conversations", None, json!({})).await;
    let id = created.json["conversation"]["id"].as_str().unwrap().to_owned();

    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let uri = format!("{base}/conversations/{id}/events/stream");
    let request = http::Request::get(uri).body(Full::new(Bytes::new())).unwrap();
    let mut body = client.request(request).await.unwrap().into_body();
    let mut seen = String::new();
    // The first event, then silence: the stream must say `: heartbeat` on its own.
    while !seen.contains(": heartbeat\n\n") {
        let frame = body.frame().await.expect("the stream stays open").unwrap();
        seen.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
    }
    assert!(seen.starts_with("retry: 1000\n\nid: 0\ndata: "), "{seen}");
}

/// Serves a handler alone (no application routes, no base path).
async fn start_plain(handler: cairn_runtime::RuntimeHandler) -> String {
    let server = loopback::serve(move |request| {
        let handler = handler.clone();
        async move { handler.handle(request).await }
    })
    .await;
    server.url()
}
