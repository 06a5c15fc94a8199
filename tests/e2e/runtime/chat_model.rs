//! An OpenAI-compatible chat model writes the replies.

use std::time::Duration;

use cairn_test_support::standin::{Answer, Request, StandIn, openai};
use hyper::Method;
use serde_json::{Value, json};

use super::{activity_kinds, conversation_path, create_id, list_events, messages_by, send};
use crate::util::{Body, Daemon};

// ---------------------------------------------------------------------------------------
// 12. An OpenAI-compatible chat model writes the replies.
// ---------------------------------------------------------------------------------------

/// A stand-in chat-completions endpoint: answers every `POST /v1/chat/completions` with an
/// SSE stream of `chunks`, and keeps the request bodies.
struct ChatStandIn {
    url: String,
    stand_in: StandIn,
}

const CHUNKS: &[&str] = &["Hello", " from", " the model."];

/// What a refusing stand-in answers: a 401 whose body holds what must never reach a
/// conversation's users.
const REFUSAL: &str =
    r#"{"error": {"message": "Incorrect API key sk-live-SECRET-42 for org-internal"}}"#;

impl ChatStandIn {
    fn start() -> ChatStandIn {
        ChatStandIn::start_answering(false)
    }

    /// A stand-in that refuses every request with [`REFUSAL`].
    fn refusing() -> ChatStandIn {
        ChatStandIn::start_answering(true)
    }

    fn start_answering(refuse: bool) -> ChatStandIn {
        let stand_in = StandIn::start(move |request| {
            if !is_chat(request) {
                Answer::new("404 Not Found", "text/plain", "")
            } else if refuse {
                Answer::new("401 Unauthorized", "application/json", REFUSAL)
            } else {
                openai::chat_stream(CHUNKS, Duration::ZERO)
            }
        });
        ChatStandIn { url: format!("{}/v1", stand_in.url()), stand_in }
    }

    /// The bodies of the chat requests received so far (`null` for one that is not JSON).
    fn requests(&self) -> Vec<Value> {
        let requests = self.stand_in.requests().into_iter().filter(is_chat);
        requests
            .map(|request| serde_json::from_slice(&request.body).unwrap_or(Value::Null))
            .collect()
    }
}

fn is_chat(request: &Request) -> bool {
    request.method == "POST" && request.path == "/v1/chat/completions"
}

fn chat_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_chat_model_writes_the_reply_and_streams_its_deltas() {
    let model = ChatStandIn::start();
    let daemon = Daemon::start_with(&["--chat-url", &model.url, "--chat-model", "stand-in-1"], &[]);
    let id = create_id(&daemon).await;
    let expected: String = CHUNKS.concat();

    let result = send(&daemon, &id, "hello").await;
    assert_eq!(result["text"], expected.as_str(), "{result}");
    let events = result["events"].as_array().unwrap();
    assert_eq!(messages_by(events, "assistant")[0]["data"]["text"], expected.as_str());
    assert!(messages_by(events, "assistant")[0]["data"].get("modelError").is_none(), "{events:#?}");
    assert!(activity_kinds(events).contains("response"), "{events:#?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0]["model"], "stand-in-1");
    assert_eq!(requests[0]["stream"], true);

    let mut stream = daemon
        .stream(
            Method::POST,
            &conversation_path(&id, "/messages"),
            Body::Json(json!({"message": "thanks"})),
            &[],
        )
        .await;
    assert_eq!(stream.status, 200);
    let mut deltas = Vec::new();
    let result = loop {
        let message = stream.next().await.expect("a result before the end");
        match message.event.as_deref() {
            Some("delta") => deltas.push(message.json()["text"].as_str().unwrap().to_owned()),
            Some("result") => break message.json(),
            other => panic!("unexpected message {other:?}: {message:?}"),
        }
    };
    assert_eq!(deltas, CHUNKS, "each model delta is one `delta` frame");
    assert_eq!(result["text"], expected.as_str());
}

#[tokio::test]
async fn the_chat_model_sees_the_users_message_and_only_visible_intermediate_messages() {
    let model = ChatStandIn::start();
    let daemon = Daemon::start_with(&["--chat-url", &model.url], &[]);
    let id = create_id(&daemon).await;
    send(&daemon, &id, "hello").await;
    for (text, visible) in [("VISIBLE-NOTE", true), ("HIDDEN-NOTE", false)] {
        let reply = daemon
            .post(
                &conversation_path(&id, "/intermediate-messages"),
                json!({"text": text, "visibleToModel": visible}),
            )
            .await;
        assert_eq!(reply.status, 201);
    }
    send(&daemon, &id, "what can you do").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");

    // The second request carries the conversation so far.
    let second = chat_messages(&requests[1]);
    let has = |role: &str, content: &str| second.iter().any(|(r, c)| r == role && c == content);
    assert!(has("user", "hello"), "earlier user messages: {second:#?}");
    assert!(has("assistant", &CHUNKS.concat()), "earlier replies: {second:#?}");
    assert!(has("assistant", "VISIBLE-NOTE"), "visible intermediate messages: {second:#?}");
    assert!(
        !second.iter().any(|(_, content)| content.contains("HIDDEN-NOTE")),
        "messages not visible to the model stay out: {second:#?}"
    );
    // Each request carries the message being answered.
    let first = chat_messages(&requests[0]);
    assert!(
        first.iter().any(|(role, content)| role == "user" && content == "hello"),
        "the model is asked about the user's message: {first:#?}"
    );
    assert!(
        has("user", "what can you do"),
        "the model is asked about the user's message: {second:#?}"
    );
}

#[tokio::test]
async fn channel_messages_stream_their_reply_when_asked() {
    let daemon = Daemon::start();
    let body = json!({"channel": "web", "text": "hello", "idempotencyKey": "stream-1"});
    let mut stream =
        daemon.stream(Method::POST, "/api/runtime/channel-events", Body::Json(body), &[]).await;
    assert_eq!(stream.status, 200);
    assert!(stream.content_type().starts_with("text/event-stream"), "{:?}", stream.headers);
    let mut deltas = String::new();
    let result = loop {
        let message = stream.next().await.expect("a result before the end");
        match message.event.as_deref() {
            Some("delta") => deltas.push_str(message.json()["text"].as_str().unwrap()),
            Some("result") => break message.json(),
            other => panic!("unexpected message {other:?}: {message:?}"),
        }
    };
    assert!(!deltas.is_empty());
    assert_eq!(result["text"], deltas.as_str());
    assert_eq!(result["created"], true);
    assert_eq!(result["duplicate"], false);
    // A bad channel event is still a plain 422 before any streaming.
    let bad = json!({"text": "no channel"});
    let reply = daemon
        .request_with(
            Method::POST,
            "/api/runtime/channel-events",
            Body::Json(bad),
            &[("accept", "text/event-stream")],
        )
        .await;
    reply.assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn shutdown_ends_open_event_streams_cleanly() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    let mut stream = daemon
        .stream(Method::GET, &conversation_path(&id, "/events/stream"), Body::None, &[])
        .await;
    assert_eq!(stream.status, 200);
    let created = stream.next().await.expect("the first event");
    assert_eq!(created.id.as_deref(), Some("0"));
    let stopping = tokio::task::spawn_blocking(move || daemon.terminate());
    // The stream ends (rather than hanging until the shutdown deadline or being reset).
    assert!(stream.next().await.is_none(), "the stream ends when the daemon shuts down");
    let status = stopping.await.unwrap();
    assert!(status.success(), "the daemon exits cleanly: {status:?}");
}

#[tokio::test]
async fn a_failing_chat_model_leaves_no_trace_of_itself_with_users() {
    let model = ChatStandIn::refusing();
    let daemon = Daemon::start_with(&["--chat-url", &model.url], &[]);
    let id = create_id(&daemon).await;
    let address = model.url.trim_start_matches("http://").trim_end_matches("/v1").to_owned();

    let result = send(&daemon, &id, "hello").await;
    let preamble = daemon.post(&conversation_path(&id, "/preambles"), json!({})).await;
    assert_eq!(preamble.status, 201, "{preamble:?}");
    assert_eq!(model.requests().len(), 2, "the model was asked, and refused, twice");

    let events = list_events(&daemon, &id).await;
    let answer = messages_by(&events, "assistant")[0].clone();
    assert!(!result["text"].as_str().unwrap().is_empty(), "the runtime answered without it");
    assert_eq!(answer["data"]["modelError"], "the language model refused the request");
    let seen = format!("{result} {} {events:?}", preamble.text);
    for secret in ["sk-live-SECRET-42", "org-internal", address.as_str()] {
        assert!(!seen.contains(secret), "`{secret}` reached the conversation: {seen}");
    }
    let log = std::fs::read_to_string(daemon.data_dir().join("daemon.log")).unwrap();
    assert!(log.contains("sk-live-SECRET-42"), "the operators' log keeps the details");
}
