//! The runtime crate embeds on its own: the FAQ bot example (a runtime written from
//! scratch, in memory) served by a plain hyper server beside the application's routes, over
//! real HTTP: create, send, list events, CORS, a pushed event stream resumed with
//! `Last-Event-ID`, and 501 for the capabilities the bot lacks.

#[path = "../examples/faq.rs"]
mod example;

use bytes::Bytes;
use cairn_test_support::column;
use cairn_test_support::daemon::EventStream;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const ORIGIN: &str = "https://shop.example";

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    text: String,
    json: Value,
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn send(request: http::request::Builder, body: Value) -> http::Response<Incoming> {
    let body = if body.is_null() { Bytes::new() } else { Bytes::from(body.to_string()) };
    client().request(request.body(Full::new(body)).unwrap()).await.unwrap()
}

async fn call(request: http::request::Builder, body: Value) -> Reply {
    let response = send(request, body).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Reply { status, headers, json: serde_json::from_str(&text).unwrap_or(Value::Null), text }
}

fn request(method: &str, uri: String) -> http::request::Builder {
    http::Request::builder().method(method).uri(uri)
}

async fn start() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(example::serve(listener, example::faq_handler(ORIGIN)));
    base
}

/// Reads the stream until `count` events (messages with an `id:`) have arrived.
async fn read_events(stream: &mut EventStream, count: usize) -> Vec<(u64, Value)> {
    let mut events = Vec::new();
    while events.len() < count {
        let message = stream.next().await.expect("the stream stays open");
        if let Some(id) = &message.id {
            events.push((id.parse().unwrap(), message.json()));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_of_ones_own_serves_beside_the_applications_routes() {
    let base = start().await;

    let home = call(request("GET", format!("{base}/")), Value::Null).await;
    assert_eq!((home.status, home.text.as_str()), (200, "the shop's home page"));
    let elsewhere = call(request("GET", format!("{base}/faqs")), Value::Null).await;
    assert_eq!((elsewhere.status, elsewhere.text.as_str()), (404, "not here"));

    let created = call(request("POST", format!("{base}/faq/conversations")), Value::Null).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json["conversation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json["conversation"]["lifecycle"], "active");

    let asked = call(
        request("POST", format!("{base}/faq/conversations/{id}/messages")),
        json!({"message": "When are you open?"}),
    )
    .await;
    assert_eq!(asked.status, 200, "{}", asked.text);
    assert_eq!(asked.json["text"], "We are open from 9 to 17, Monday to Friday.");

    let events =
        call(request("GET", format!("{base}/faq/conversations/{id}/events")), Value::Null).await;
    let kinds: Vec<&str> = column(&events.json["events"], "type", Value::as_str);
    assert_eq!(kinds, ["conversation.created", "message", "message"]);
    let after = call(
        request("GET", format!("{base}/faq/conversations/{id}/events?afterOffset=1")),
        Value::Null,
    )
    .await;
    assert_eq!(after.json["events"][0]["data"]["role"], "assistant");

    // The handler's own checks come before the runtime is asked.
    let empty = call(
        request("POST", format!("{base}/faq/conversations/{id}/messages")),
        json!({"message": "  "}),
    )
    .await;
    assert_eq!(
        (empty.status, empty.json["error"]["code"].as_str()),
        (422, Some("VALIDATION_ERROR"))
    );
    let unknown =
        call(request("GET", format!("{base}/faq/conversations/nope/events")), Value::Null).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json["error"]["code"], "CONVERSATION_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_the_bot_lacks_answer_501() {
    let base = start().await;
    call(request("POST", format!("{base}/faq/conversations")), json!({"id": "c1"})).await;
    for (method, path, body) in [
        ("GET", "/faq/conversations", Value::Null),
        ("POST", "/faq/conversations/c1/close", Value::Null),
        ("GET", "/faq/conversations/c1/snapshot", Value::Null),
        ("GET", "/faq/conversations/c1/replay", Value::Null),
        ("POST", "/faq/channel-events", json!({"channel": "web", "text": "hi"})),
        ("POST", "/faq/voice/conversations", Value::Null),
    ] {
        let reply = call(request(method, format!("{base}{path}")), body).await;
        assert_eq!(reply.status, 501, "{method} {path}: {}", reply.text);
        assert_eq!(reply.json["error"]["code"], "CAPABILITY_NOT_SUPPORTED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_lets_the_shops_pages_in_and_no_one_else() {
    let base = start().await;
    let preflight = call(
        request("OPTIONS", format!("{base}/faq/conversations"))
            .header("origin", ORIGIN)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type"),
        Value::Null,
    )
    .await;
    assert!(preflight.status < 300, "{}", preflight.status);
    assert_eq!(preflight.headers["access-control-allow-origin"], ORIGIN);
    let methods = preflight.headers["access-control-allow-methods"].to_str().unwrap();
    assert!(methods.contains("POST"), "{methods}");

    let created = call(
        request("POST", format!("{base}/faq/conversations")).header("origin", ORIGIN),
        Value::Null,
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.headers["access-control-allow-origin"], ORIGIN);

    let stranger = call(
        request("POST", format!("{base}/faq/conversations"))
            .header("origin", "https://evil.example"),
        Value::Null,
    )
    .await;
    assert!(!stranger.headers.contains_key("access-control-allow-origin"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_pushed_and_resume_after_the_last_event_id() {
    let base = start().await;
    call(request("POST", format!("{base}/faq/conversations")), json!({"id": "c1"})).await;
    let stream = format!("{base}/faq/conversations/c1/events/stream");
    let messages = format!("{base}/faq/conversations/c1/messages");

    let response = send(request("GET", stream.clone()), Value::Null).await;
    let mut body = EventStream::from_response(response, "the event stream");
    assert_eq!(body.status, 200);
    assert_eq!(body.content_type(), "text/event-stream");
    let first = read_events(&mut body, 1).await;
    assert_eq!(first[0].0, 0);
    assert_eq!(first[0].1["type"], "conversation.created");

    // The handler polls once a second by default; these arrive at once, so they were pushed.
    call(request("POST", messages.clone()), json!({"message": "prices?"})).await;
    let pushed = read_events(&mut body, 2).await;
    assert_eq!(pushed.iter().map(|(offset, _)| *offset).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(pushed[1].1["data"]["text"], "Plans start at 10 euros a month.");
    drop(body);

    // Two more while no one listens; a reconnect after offset 2 gets exactly those.
    call(request("POST", messages), json!({"message": "refund?"})).await;
    let resumed = send(request("GET", stream).header("last-event-id", "2"), Value::Null).await;
    let mut body = EventStream::from_response(resumed, "the resumed event stream");
    let missed = read_events(&mut body, 2).await;
    assert_eq!(missed.iter().map(|(offset, _)| *offset).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(missed[0].1["data"]["text"], "refund?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_arrives_as_deltas_then_the_result() {
    let base = start().await;
    call(request("POST", format!("{base}/faq/conversations")), json!({"id": "c1"})).await;
    let reply = call(
        request("POST", format!("{base}/faq/conversations/c1/messages"))
            .header("accept", "text/event-stream"),
        json!({"message": "refund?"}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.text.starts_with("event: delta\ndata: {\"text\":\"Refunds \"}"),
        "{}",
        reply.text
    );
    let result = reply.text.split("event: result\ndata: ").nth(1).expect("a result frame");
    let result: Value = serde_json::from_str(result.trim()).unwrap();
    assert_eq!(result["text"], "Refunds are possible within 30 days of purchase.");
}
