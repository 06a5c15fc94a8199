//! Event streams over real HTTP, against a runtime that counts its reads of the log: a
//! stream with a subscription reads only when the log grows, one without polls, pages of
//! listEvents, and the cap on the streams one caller may hold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use cairn_runtime::{
    Authorization, Authorize, Conversation, CreateConversationInput, HandlerOptions, Lifecycle,
    Runtime, RuntimeError, RuntimeEvent, RuntimeHandler, Timestamp,
};
use cairn_test_support::loopback;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::sync::watch;

/// One conversation, `c1`, whose log grows when the test says, and which counts every
/// read of its log.
struct CountingLog {
    events: Mutex<Vec<RuntimeEvent>>,
    appended: watch::Sender<u64>,
    subscribable: bool,
    reads: AtomicUsize,
}

impl CountingLog {
    fn new(subscribable: bool, events: u64) -> Arc<CountingLog> {
        let log = Arc::new(CountingLog {
            events: Mutex::new(Vec::new()),
            appended: watch::channel(0).0,
            subscribable,
            reads: AtomicUsize::new(0),
        });
        for _ in 0..events {
            log.append();
        }
        log
    }

    fn append(&self) {
        let mut events = self.events.lock().unwrap();
        let offset = events.len() as u64;
        events.push(RuntimeEvent {
            id: format!("evt_{offset}"),
            conversation_id: "c1".to_owned(),
            offset,
            kind: "custom".to_owned(),
            created_at: Timestamp::now(),
            data: json!({ "n": offset }),
        });
        self.appended.send_replace(offset + 1);
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Runtime for CountingLog {
    async fn create_conversation(
        &self,
        _input: CreateConversationInput,
    ) -> Result<Conversation, RuntimeError> {
        let now = Timestamp::now();
        Ok(Conversation {
            id: "c1".to_owned(),
            agent_id: "a".to_owned(),
            channel: None,
            context: Value::Null,
            lifecycle: Lifecycle::Active,
            created_at: now,
            updated_at: now,
        })
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
        if conversation_id != "c1" {
            return Err(RuntimeError::ConversationNotFound(conversation_id.to_owned()));
        }
        self.reads.fetch_add(1, Ordering::SeqCst);
        let first = after_offset.map_or(0, |offset| offset as usize + 1);
        let events = self.events.lock().unwrap();
        Ok(events.iter().skip(first).take(limit as usize).cloned().collect())
    }

    fn subscribe(&self, _conversation_id: &str) -> Option<watch::Receiver<u64>> {
        self.subscribable.then(|| self.appended.subscribe())
    }
}

/// Serves `handler` on a free loopback port; returns its base URL.
async fn serve(handler: RuntimeHandler) -> String {
    let server = loopback::serve(move |request| {
        let handler = handler.clone();
        async move { handler.handle(request).await }
    })
    .await;
    server.url()
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn get(url: String, headers: &[(&str, &str)]) -> http::Response<Incoming> {
    let mut request = http::Request::get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    client().request(request.body(Full::new(Bytes::new())).unwrap()).await.unwrap()
}

async fn get_json(url: String) -> (u16, Value) {
    let response = get(url, &[]).await;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// What a stream sent, frame by frame.
#[derive(Debug, PartialEq)]
enum Frame {
    Event(u64),
    Heartbeat,
}

/// Reads the stream until `count` event or heartbeat frames have arrived.
async fn read_frames(body: &mut Incoming, count: usize) -> Vec<Frame> {
    let mut text = String::new();
    let mut frames = Vec::new();
    while frames.len() < count {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("a frame arrives")
            .expect("the stream stays open")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            if block.starts_with(": heartbeat") {
                frames.push(Frame::Heartbeat);
            } else if let Some(id) = block.lines().find_map(|line| line.strip_prefix("id: ")) {
                frames.push(Frame::Event(id.parse().unwrap()));
            }
        }
    }
    frames
}

/// A handler that would poll every 5 ms, with a heartbeat every 25 ms: heartbeats are the
/// test's clock, each one five poll intervals.
fn eager_handler(runtime: Arc<CountingLog>) -> HandlerOptions {
    HandlerOptions::new(runtime)
        .sse_poll_interval(Duration::from_millis(5))
        .sse_heartbeat(Duration::from_millis(25))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_stream_reads_the_log_only_when_it_grows() {
    let log = CountingLog::new(true, 1);
    let base = serve(eager_handler(log.clone()).build().unwrap()).await;
    let stream = get(format!("{base}/conversations/c1/events/stream"), &[]).await;
    assert_eq!(stream.status(), 200);
    let mut body = stream.into_body();

    assert_eq!(read_frames(&mut body, 1).await, [Frame::Event(0)]);
    // Four heartbeats: twenty poll intervals without a read.
    let idle = read_frames(&mut body, 4).await;
    assert!(idle.iter().all(|frame| *frame == Frame::Heartbeat), "{idle:?}");
    assert_eq!(log.reads(), 1, "an idle subscribed stream never reads the log");

    log.append();
    log.append();
    let mut pushed = Vec::new();
    while pushed.len() < 2 {
        pushed
            .extend(read_frames(&mut body, 1).await.into_iter().filter(|f| *f != Frame::Heartbeat));
    }
    assert_eq!(pushed, [Frame::Event(1), Frame::Event(2)]);
    let after_append = log.reads();
    assert!((2..=3).contains(&after_append), "an append costs a read or two: {after_append}");
    read_frames(&mut body, 4).await;
    assert_eq!(log.reads(), after_append, "and idle again, nothing more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_subscription_a_stream_polls() {
    let log = CountingLog::new(false, 1);
    let base = serve(eager_handler(log.clone()).build().unwrap()).await;
    let stream = get(format!("{base}/conversations/c1/events/stream"), &[]).await;
    let mut body = stream.into_body();
    assert_eq!(read_frames(&mut body, 1).await, [Frame::Event(0)]);
    read_frames(&mut body, 4).await;
    // Between two heartbeats the stream polls at least four times.
    assert!(log.reads() > 8, "the stream polled only {} times", log.reads());

    log.append();
    let polled = read_frames(&mut body, 1).await;
    assert!(polled == [Frame::Event(1)] || polled == [Frame::Heartbeat], "{polled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_far_behind_catches_up_a_page_at_a_time() {
    let log = CountingLog::new(true, 2_500);
    let base = serve(eager_handler(log.clone()).build().unwrap()).await;
    let stream = get(format!("{base}/conversations/c1/events/stream?afterOffset=9"), &[]).await;
    let mut body = stream.into_body();
    let frames = read_frames(&mut body, 2_490).await;
    let offsets: Vec<u64> = frames
        .iter()
        .filter_map(|frame| match frame {
            Frame::Event(offset) => Some(*offset),
            Frame::Heartbeat => None,
        })
        .collect();
    assert_eq!(offsets, (10..2_500).collect::<Vec<_>>(), "every event once, in order");
    assert_eq!(log.reads(), 3, "2,490 events in pages of 1,000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_events_answers_a_page_and_where_the_next_starts() {
    let log = CountingLog::new(true, 2_500);
    let base = serve(HandlerOptions::new(log.clone()).build().unwrap()).await;
    let events = format!("{base}/conversations/c1/events");

    let (status, first) = get_json(events.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(first["events"].as_array().unwrap().len(), 1_000, "1,000 by default");
    assert_eq!(first["nextAfterOffset"], 999);
    let (_, second) = get_json(format!("{events}?afterOffset=999&limit=1000")).await;
    assert_eq!(second["events"][0]["offset"], 1_000);
    let (_, small) = get_json(format!("{events}?afterOffset=2495&limit=3")).await;
    let offsets: Vec<&Value> =
        small["events"].as_array().unwrap().iter().map(|e| &e["offset"]).collect();
    assert_eq!(offsets, [2_496, 2_497, 2_498]);
    assert_eq!(small["nextAfterOffset"], 2_498);
    let (_, last) = get_json(format!("{events}?afterOffset=2495&limit=4")).await;
    assert_eq!(last["events"].as_array().unwrap().len(), 4);
    assert!(last.get("nextAfterOffset").is_none(), "the last page says no more: {last}");

    for limit in ["0", "1001", "-1", "many"] {
        let (status, refused) = get_json(format!("{events}?limit={limit}")).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (422, Some("VALIDATION_ERROR")));
        assert!(refused["error"]["message"].as_str().unwrap().contains("limit"), "{refused}");
    }
}

/// Lets everyone in as the principal named by the `x-user` header.
struct ByUser;

#[async_trait]
impl Authorize for ByUser {
    async fn authorize(&self, _path: &str, request: &http::request::Parts) -> Authorization {
        let user = request.headers.get("x-user").and_then(|value| value.to_str().ok());
        Authorization::AllowAs(user.unwrap_or("nobody").to_owned())
    }
}

/// Opens a stream of `c1` with `headers`; the status and, for a refusal, the body.
async fn open(base: &str, headers: &[(&str, &str)]) -> (u16, Option<Incoming>, Value) {
    let response = get(format!("{base}/conversations/c1/events/stream"), headers).await;
    let status = response.status().as_u16();
    if status == 200 {
        return (status, Some(response.into_body()), Value::Null);
    }
    let retry_after = response.headers().get("retry-after").cloned();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let mut body: Value = serde_json::from_slice(&bytes).unwrap();
    body["retryAfter"] = json!(retry_after.map(|value| value.to_str().unwrap().to_owned()));
    (status, None, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_holds_at_most_its_share_of_streams() {
    let log = CountingLog::new(true, 1);
    let base = serve(eager_handler(log).max_streams_per_principal(2).build().unwrap()).await;
    let alice = [("x-api-key", "key-alice")];
    let bob = [("authorization", "Bearer token-bob")];

    let (first, mut kept, _) = open(&base, &alice).await;
    let (second, _second_body, _) = open(&base, &alice).await;
    assert_eq!((first, second), (200, 200));
    let (status, none, refused) = open(&base, &alice).await;
    assert_eq!(status, 429, "{refused}");
    assert!(none.is_none());
    assert_eq!(refused["error"]["code"], "RATE_LIMITED");
    assert_eq!(refused["error"]["status"], 429);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("2 event streams open"), "{message}");
    assert!(refused["retryAfter"].is_string(), "{refused}");

    let (others, _bob_body, _) = open(&base, &bob).await;
    assert_eq!(others, 200, "another caller is not held back");
    let (missing, _, _) = {
        let response = get(format!("{base}/conversations/nope/events/stream"), &bob).await;
        (response.status().as_u16(), (), ())
    };
    assert_eq!(missing, 404);
    let (still, _bob_second, _) = open(&base, &bob).await;
    assert_eq!(still, 200, "a refused stream (404) holds no place");

    // A stream that ends gives its place back.
    read_frames(kept.as_mut().unwrap(), 1).await;
    drop(kept.take());
    let reopened = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let (200, Some(body), _) = open(&base, &alice).await {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(reopened.is_ok(), "the closed stream's place was never given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorize_hook_names_the_principal() {
    let log = CountingLog::new(true, 1);
    let options = eager_handler(log).max_streams_per_principal(1).authorize(ByUser);
    let base = serve(options.build().unwrap()).await;

    let (first, _kept, _) = open(&base, &[("x-user", "carol"), ("x-api-key", "one")]).await;
    assert_eq!(first, 200);
    let (second, _, refused) = open(&base, &[("x-user", "carol"), ("x-api-key", "two")]).await;
    assert_eq!(second, 429, "other credentials, same principal: {refused}");
    let (dave, _dave_body, _) = open(&base, &[("x-user", "dave"), ("x-api-key", "one")]).await;
    assert_eq!(dave, 200, "same credentials, another principal");
}
