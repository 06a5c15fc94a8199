//! Server-Sent Events: event streams and streamed send-message results.

use hyper::Method;
use serde_json::{Value, json};

use super::{conversation_path, create_id, list_events, messages_by, send};
use crate::util::{Body, Daemon};

// ---------------------------------------------------------------------------------------
// 7. Server-Sent Events.
// ---------------------------------------------------------------------------------------

/// Reads stream messages until one carries `offset`; checks each is an event in order.
async fn read_until(
    stream: &mut crate::util::EventStream,
    offset: u64,
    expected_next: &mut u64,
) -> Vec<Value> {
    let mut received = Vec::new();
    while *expected_next <= offset {
        let message = stream.next().await.expect("the stream stays open");
        assert_eq!(message.event, None, "events are plain messages: {message:?}");
        let event = message.json();
        assert_eq!(
            message.id.as_deref(),
            Some(event["offset"].to_string().as_str()),
            "id: <offset>"
        );
        assert_eq!(event["offset"], *expected_next, "in order, none missing or repeated");
        *expected_next += 1;
        received.push(event);
    }
    received
}

#[tokio::test]
async fn event_streams_push_new_events_and_resume_after_last_event_id() {
    // Polling is pushed far out, so an event that arrives was pushed.
    let daemon = Daemon::start_with(&["--sse-poll-interval-ms", "600000"], &[]);
    let id = create_id(&daemon).await;
    send(&daemon, &id, "hello").await;
    let log = list_events(&daemon, &id).await;
    let stream_path = conversation_path(&id, "/events/stream");

    let mut stream = daemon.stream(Method::GET, &stream_path, Body::None, &[]).await;
    assert_eq!(stream.status, 200);
    assert!(stream.content_type().starts_with("text/event-stream"), "{:?}", stream.headers);
    let mut next = 0;
    let received = read_until(&mut stream, log.len() as u64 - 1, &mut next).await;
    assert_eq!(received, log, "the stream starts with the whole log");

    // Appended while connected: pushed.
    let turn = send(&daemon, &id, "thanks").await;
    let last = turn["events"].as_array().unwrap().last().unwrap()["offset"].as_u64().unwrap();
    let pushed = read_until(&mut stream, last, &mut next).await;
    assert_eq!(&pushed[..], turn["events"].as_array().unwrap());
    let custom = daemon
        .post(
            &conversation_path(&id, "/custom-events"),
            json!({"eventName": "page.viewed", "payload": {"url": "/a"}}),
        )
        .await;
    let pushed =
        read_until(&mut stream, custom.body["event"]["offset"].as_u64().unwrap(), &mut next).await;
    assert_eq!(pushed, [custom.body["event"].clone()]);
    let seen = next - 1;
    drop(stream);

    // Missed while disconnected: replayed after Last-Event-ID, exactly once.
    send(&daemon, &id, "I'd like to book a demo").await;
    daemon
        .post(
            &conversation_path(&id, "/custom-events"),
            json!({"eventName": "page.viewed", "payload": {"url": "/b"}}),
        )
        .await;
    let missed = daemon
        .get(&conversation_path(&id, &format!("/events?afterOffset={seen}")))
        .await
        .body["events"]
        .as_array()
        .unwrap()
        .clone();
    assert!(missed.len() > 2, "{missed:#?}");
    let seen_text = seen.to_string();
    let mut resumed = daemon
        .stream(Method::GET, &stream_path, Body::None, &[("last-event-id", &seen_text)])
        .await;
    assert_eq!(resumed.status, 200);
    let mut next = seen + 1;
    let last_missed = missed.last().unwrap()["offset"].as_u64().unwrap();
    let replayed = read_until(&mut resumed, last_missed, &mut next).await;
    assert_eq!(replayed, missed, "exactly the missed events");
    // The next thing on the stream is the next new event: nothing was repeated in between.
    let newest = daemon
        .post(
            &conversation_path(&id, "/custom-events"),
            json!({"eventName": "page.viewed", "payload": {"url": "/c"}}),
        )
        .await;
    let after = read_until(&mut resumed, last_missed + 1, &mut next).await;
    assert_eq!(after, [newest.body["event"].clone()]);
    drop(resumed);

    // afterOffset in the query does the same.
    let from_query = format!("{stream_path}?afterOffset={}", last_missed);
    let mut queried = daemon.stream(Method::GET, &from_query, Body::None, &[]).await;
    let mut next = last_missed + 1;
    let tail = read_until(&mut queried, last_missed + 1, &mut next).await;
    assert_eq!(tail, [newest.body["event"].clone()]);
    drop(queried);

    // Errors come as JSON before any streaming.
    let missing = daemon
        .stream(Method::GET, &conversation_path("conv_missing", "/events/stream"), Body::None, &[])
        .await;
    assert_eq!(missing.status, 404);
    assert!(missing.content_type().starts_with("application/json"), "{:?}", missing.headers);
    assert_eq!(missing.json().await["error"]["code"], "CONVERSATION_NOT_FOUND");
    let bad = daemon
        .stream(Method::GET, &stream_path, Body::None, &[("last-event-id", "yesterday")])
        .await;
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json().await["error"]["code"], "VALIDATION_ERROR");
}

#[tokio::test]
async fn send_message_streams_deltas_then_the_result() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    let mut stream = daemon
        .stream(
            Method::POST,
            &conversation_path(&id, "/messages"),
            Body::Json(json!({"message": "hello"})),
            &[],
        )
        .await;
    assert_eq!(stream.status, 200);
    assert!(stream.content_type().starts_with("text/event-stream"), "{:?}", stream.headers);
    let mut deltas = String::new();
    let mut delta_count = 0;
    let result = loop {
        let message = stream.next().await.expect("a result before the end");
        match message.event.as_deref() {
            Some("delta") => {
                deltas.push_str(message.json()["text"].as_str().unwrap());
                delta_count += 1;
            }
            Some("result") => break message.json(),
            other => panic!("unexpected message {other:?}: {message:?}"),
        }
    };
    assert!(delta_count >= 1, "at least one delta before the result");
    assert!(stream.next().await.is_none(), "the stream ends after the result");
    assert_eq!(result["text"], deltas.as_str(), "the deltas make up the reply");
    let events = result["events"].as_array().unwrap();
    assert_eq!(messages_by(events, "user")[0]["data"]["text"], "hello");
    assert_eq!(list_events(&daemon, &id).await[1..], events[..], "the turn was committed");

    // Errors found before any delta are ordinary JSON errors with their status. The check
    // is repeated: a race between the turn ending and its delta channel closing decides it.
    let closed = create_id(&daemon).await;
    daemon.post(&conversation_path(&closed, "/close"), json!({})).await;
    for attempt in 0..20 {
        for (id, status, code) in [
            ("conv_missing", 404, "CONVERSATION_NOT_FOUND"),
            (closed.as_str(), 409, "CONVERSATION_CLOSED"),
        ] {
            let reply = daemon
                .stream(
                    Method::POST,
                    &conversation_path(id, "/messages"),
                    Body::Json(json!({"message": "hi"})),
                    &[],
                )
                .await;
            let got = reply.status;
            let content_type = reply.content_type().to_owned();
            let body = reply.text().await;
            assert_eq!(
                (got, content_type.as_str()),
                (status, "application/json"),
                "attempt {attempt}: a {code} before any delta is a JSON error; got {body:?}"
            );
            let body: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(body["error"]["code"], code);
        }
    }
}
