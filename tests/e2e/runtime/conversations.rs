//! Conversations: creating and listing them, concurrent senders, and bounded reads (pages
//! of the log, and the streams one caller may hold).

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_test_support::column;
use hyper::Method;
use serde_json::{Value, json};

use super::{
    assert_gapless, conversation_path, create, create_id, ids_of, list_events, messages_by,
    offsets, path, replay, send,
};
use crate::util::{Body, Daemon};

// ---------------------------------------------------------------------------------------
// 1. Conversations: create and list.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn conversations_are_created_and_listed_with_lossless_cursors() {
    // A second agent, so the agentId filter has something to tell apart.
    let agents = tempfile::tempdir().unwrap();
    std::fs::write(
        agents.path().join("concierge.json"),
        include_str!("../../../crates/agents/agents/concierge.json"),
    )
    .unwrap();
    std::fs::write(
        agents.path().join("zeta.json"),
        r#"{"id": "zeta", "name": "Zeta", "fallback": "Zeta here."}"#,
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--agents-dir", agents.path().to_str().unwrap()], &[]);

    // An empty body takes every default: the default agent, active.
    let reply = daemon.request(Method::POST, &path("/conversations"), Body::None).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let first = &reply.body["conversation"];
    assert!(first["id"].as_str().is_some_and(|id| !id.is_empty()), "{first}");
    assert_eq!(first["agentId"], "concierge");
    assert_eq!(first["lifecycle"], "active");
    assert!(first["createdAt"].is_string() && first["updatedAt"].is_string(), "{first}");

    let with_channel =
        create(&daemon, json!({"channel": "web", "context": {"page": "/pricing"}})).await;
    assert_eq!(with_channel["channel"]["type"], "web");
    assert_eq!(with_channel["context"], json!({"page": "/pricing"}));

    let explicit = create(&daemon, json!({"id": "conv-explicit-1", "agentId": "concierge"})).await;
    assert_eq!(explicit["id"], "conv-explicit-1");
    let again = daemon
        .post(&path("/conversations"), json!({"id": "conv-explicit-1", "agentId": "concierge"}))
        .await;
    again.assert_error(409, "CONFLICT");
    let unknown_agent = daemon.post(&path("/conversations"), json!({"agentId": "nobody"})).await;
    assert!(unknown_agent.assert_error(422, "VALIDATION_ERROR").contains("nobody"));
    daemon
        .post(&path("/conversations"), json!({"id": "no spaces allowed"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&path("/conversations"), json!({"colour": "blue"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");

    let mut all: BTreeSet<String> = BTreeSet::new();
    for value in [first, &with_channel, &explicit] {
        all.insert(value["id"].as_str().unwrap().to_owned());
    }
    let mut zetas = BTreeSet::new();
    for _ in 0..3 {
        let zeta = create(&daemon, json!({"agentId": "zeta"})).await;
        assert_eq!(zeta["agentId"], "zeta");
        zetas.insert(zeta["id"].as_str().unwrap().to_owned());
        all.insert(create_id(&daemon).await);
    }
    all.extend(zetas.iter().cloned());
    all.insert(create_id(&daemon).await);
    assert_eq!(all.len(), 10);

    // Forward: nextCursor → after, until there is no next page.
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(after) => format!("?limit=3&after={after}"),
            None => "?limit=3".to_owned(),
        };
        let reply = daemon.get(&path(&format!("/conversations{query}"))).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let page = ids_of(&reply.body["conversations"]);
        assert!(!page.is_empty() && page.len() <= 3, "{reply:?}");
        if pages.is_empty() {
            assert!(reply.body.get("prevCursor").is_none(), "the first page has no prevCursor");
        } else {
            assert!(reply.body["prevCursor"].is_string(), "later pages have a prevCursor");
        }
        pages.push(page);
        match reply.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages.len() <= 10, "the walk never ends: {pages:?}");
    }
    let walked: Vec<String> = pages.iter().flatten().cloned().collect();
    assert_eq!(walked.len(), all.len(), "each conversation exactly once: {pages:?}");
    assert_eq!(walked.iter().cloned().collect::<BTreeSet<_>>(), all);
    let whole = daemon.get(&path("/conversations?limit=200")).await;
    assert_eq!(walked, ids_of(&whole.body["conversations"]), "one order across pages");
    let created: Vec<&str> = column(&whole.body["conversations"], "createdAt", Value::as_str);
    assert!(created.windows(2).all(|pair| pair[0] >= pair[1]), "newest first: {created:?}");
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 3, 1]);

    // Backward: prevCursor → before, from the last page to the first, the same pages.
    let last =
        daemon.get(&path(&format!("/conversations?limit=3&after={}", cursor.unwrap()))).await;
    assert_eq!(ids_of(&last.body["conversations"]), pages[3]);
    assert!(last.body.get("nextCursor").is_none(), "the last page has no nextCursor");
    let mut cursor = last.body["prevCursor"].as_str().unwrap().to_owned();
    let mut back: Vec<Vec<String>> = Vec::new();
    loop {
        let reply = daemon.get(&path(&format!("/conversations?limit=3&before={cursor}"))).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        back.push(ids_of(&reply.body["conversations"]));
        assert!(reply.body["nextCursor"].is_string(), "a page before a cursor has a next page");
        match reply.body["prevCursor"].as_str() {
            Some(prev) => cursor = prev.to_owned(),
            None => break,
        }
        assert!(back.len() <= 10, "the walk never ends: {back:?}");
    }
    back.reverse();
    assert_eq!(back, pages[..3].to_vec(), "walking back gives the same pages");

    // agentId filter.
    let filtered = daemon.get(&path("/conversations?agentId=zeta")).await;
    assert_eq!(filtered.status, 200);
    assert_eq!(ids_of(&filtered.body["conversations"]).into_iter().collect::<BTreeSet<_>>(), zetas);
    let filtered = daemon.get(&path("/conversations?agentId=zeta&limit=2")).await;
    assert_eq!(ids_of(&filtered.body["conversations"]).len(), 2);
    let next = filtered.body["nextCursor"].as_str().unwrap();
    let rest =
        daemon.get(&path(&format!("/conversations?agentId=zeta&limit=2&after={next}"))).await;
    assert_eq!(ids_of(&rest.body["conversations"]).len(), 1);
    let none = daemon.get(&path("/conversations?agentId=nobody")).await;
    assert_eq!(none.body["conversations"], json!([]));

    // afterUpdatedAt / beforeUpdatedAt: make one conversation strictly the latest updated.
    let everything =
        daemon.get(&path("/conversations?limit=200")).await.body["conversations"].clone();
    let latest_before = everything
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["updatedAt"].as_str().unwrap().to_owned())
        .max()
        .unwrap();
    let touched = explicit["id"].as_str().unwrap();
    let mut touched_at = String::new();
    for _ in 0..500 {
        send(&daemon, touched, "hello").await;
        let listed = daemon.get(&path("/conversations?limit=200")).await;
        let found = listed.body["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == touched)
            .unwrap()["updatedAt"]
            .as_str()
            .unwrap()
            .to_owned();
        if found > latest_before {
            touched_at = found;
            break;
        }
    }
    assert!(!touched_at.is_empty(), "a message updates the conversation's updatedAt");
    // Each listed conversation's newest message comes with the page; none for one without.
    let listed = daemon.get(&path("/conversations?limit=200")).await;
    let last = &listed.body["lastMessages"][touched];
    assert_eq!(last["role"], "assistant", "{last}");
    let log = list_events(&daemon, touched).await;
    let newest = log.iter().rev().find(|event| event["type"] == "message").unwrap();
    assert_eq!(last["text"], newest["data"]["text"]);
    assert_eq!(last["offset"], newest["offset"]);
    assert_eq!(last["createdAt"], newest["createdAt"]);
    let quiet: Vec<&str> = all.iter().map(String::as_str).filter(|id| *id != touched).collect();
    assert!(
        quiet.iter().all(|id| listed.body["lastMessages"].get(*id).is_none()),
        "conversations without messages have no last message: {}",
        listed.body["lastMessages"]
    );
    let after = daemon.get(&path(&format!("/conversations?afterUpdatedAt={latest_before}"))).await;
    assert_eq!(after.status, 200, "{after:?}");
    assert_eq!(ids_of(&after.body["conversations"]), [touched]);
    let before = daemon.get(&path(&format!("/conversations?beforeUpdatedAt={touched_at}"))).await;
    let mut others = all.clone();
    others.remove(touched);
    assert_eq!(ids_of(&before.body["conversations"]).into_iter().collect::<BTreeSet<_>>(), others);
    let window = daemon
        .get(&path(&format!(
            "/conversations?afterUpdatedAt=2000-01-01T00:00:00Z&beforeUpdatedAt={touched_at}&agentId=zeta"
        )))
        .await;
    assert_eq!(ids_of(&window.body["conversations"]).into_iter().collect::<BTreeSet<_>>(), zetas);
    let future = daemon.get(&path("/conversations?afterUpdatedAt=2999-01-01T00:00:00Z")).await;
    assert_eq!(future.body["conversations"], json!([]));

    for bad in [
        "limit=0",
        "limit=201",
        "limit=ten",
        "limit=-1",
        "sort=newest",
        "afterUpdatedAt=yesterday",
        "after=a&before=b",
    ] {
        daemon
            .get(&path(&format!("/conversations?{bad}")))
            .await
            .assert_error(422, "VALIDATION_ERROR");
    }
}

// ---------------------------------------------------------------------------------------
// 8. Concurrent senders.
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_senders_keep_the_log_gapless() {
    let daemon = Arc::new(Daemon::start());
    let id = create_id(&daemon).await;
    let mut tasks = tokio::task::JoinSet::new();
    for sender in 0..8 {
        let daemon = daemon.clone();
        let id = id.clone();
        tasks.spawn(async move {
            let mut results = Vec::new();
            for message in 0..5 {
                let text = format!("note {sender}-{message}");
                results.push((text.clone(), send(&daemon, &id, &text).await));
            }
            results
        });
    }
    let mut returned_offsets = BTreeSet::new();
    let mut texts = BTreeSet::new();
    while let Some(results) = tasks.join_next().await {
        for (text, result) in results.unwrap() {
            let events = result["events"].as_array().unwrap();
            let offsets = offsets(events);
            let first = offsets[0];
            assert_eq!(
                offsets,
                (first..first + offsets.len() as u64).collect::<Vec<_>>(),
                "one turn is contiguous"
            );
            for offset in offsets {
                assert!(returned_offsets.insert(offset), "offset {offset} returned twice");
            }
            assert_eq!(messages_by(events, "user")[0]["data"]["text"], text.as_str());
            texts.insert(text);
        }
    }
    assert_eq!(texts.len(), 40);
    let log = list_events(&daemon, &id).await;
    assert_gapless(&log, &id);
    assert_eq!(
        returned_offsets,
        (1..log.len() as u64).collect::<BTreeSet<_>>(),
        "every event after creation belongs to one turn"
    );
    let users: BTreeSet<String> = messages_by(&log, "user")
        .iter()
        .map(|event| event["data"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, texts);
    assert_eq!(messages_by(&log, "user").len(), 40);
    assert_eq!(messages_by(&log, "assistant").len(), 40);
}

// ---------------------------------------------------------------------------------------
// 13. Bounded reads: pages of the log, and the streams one caller may hold.
// ---------------------------------------------------------------------------------------

/// Follows `nextAfterOffset` through every page of `endpoint` (`/events` or `/replay`),
/// `limit` at a time; returns the pages.
async fn pages(daemon: &Daemon, id: &str, endpoint: &str, limit: u32) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut after = String::new();
    loop {
        let query = format!("{endpoint}?limit={limit}{after}");
        let reply = daemon.get(&conversation_path(id, &query)).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let next = reply.body.get("nextAfterOffset").cloned();
        assert!(reply.body["events"].as_array().unwrap().len() <= limit as usize);
        pages.push(reply.body);
        match next {
            Some(next) => after = format!("&afterOffset={next}"),
            None => return pages,
        }
    }
}

fn joined(pages: &[Value], field: &str) -> Vec<Value> {
    pages.iter().flat_map(|page| page[field].as_array().unwrap().clone()).collect()
}

#[tokio::test]
async fn events_and_replays_come_a_page_at_a_time() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    for message in ["hello", "what can you do", "thanks", "I'd like to book a demo"] {
        send(&daemon, &id, message).await;
    }
    let log = list_events(&daemon, &id).await;
    assert!(log.len() > 12, "{}", log.len());
    let whole = replay(&daemon, &id, "").await;
    assert!(whole.get("nextAfterOffset").is_none(), "one page holds a short log");

    let event_pages = pages(&daemon, &id, "/events", 5).await;
    assert_eq!(event_pages.len(), log.len().div_ceil(5), "full pages, then the rest");
    assert_eq!(joined(&event_pages, "events"), log, "the pages join into the log");

    let replay_pages = pages(&daemon, &id, "/replay", 5).await;
    assert_eq!(joined(&replay_pages, "events"), log);
    assert_eq!(joined(&replay_pages, "messages"), whole["messages"].as_array().unwrap()[..]);
    // Open prompts are the conversation's state: the first page of one event has them.
    let small = replay(&daemon, &id, "?limit=1").await;
    assert_eq!(small["events"].as_array().unwrap().len(), 1);
    assert_eq!(small["nextAfterOffset"], 0);
    assert_eq!(small["openPrompts"], whole["openPrompts"]);
    assert_eq!(whole["openPrompts"].as_array().unwrap().len(), 1, "{whole}");
    // Prompts close with their conversation: a closed one's replay lists none.
    let closed = daemon.post(&conversation_path(&id, "/close"), json!({})).await;
    assert_eq!(closed.status, 200, "{closed:?}");
    assert_eq!(replay(&daemon, &id, "").await["openPrompts"], json!([]));

    for endpoint in ["/events", "/replay"] {
        for limit in ["0", "1001", "x"] {
            let reply =
                daemon.get(&conversation_path(&id, &format!("{endpoint}?limit={limit}"))).await;
            let message = reply.assert_error(422, "VALIDATION_ERROR");
            assert!(message.contains("limit"), "{endpoint}?limit={limit}: {message}");
        }
    }
}

#[tokio::test]
async fn one_caller_cannot_hold_every_event_stream() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    let stream_path = conversation_path(&id, "/events/stream");
    let mut streams = Vec::new();
    for _ in 0..64 {
        let mut stream = daemon.stream(Method::GET, &stream_path, Body::None, &[]).await;
        assert_eq!(stream.status, 200);
        assert!(stream.next().await.is_some(), "the stream sends the log");
        streams.push(stream);
    }

    let refused = daemon.get(&stream_path).await;
    let message = refused.assert_error(429, "RATE_LIMITED");
    assert!(message.contains("64 event streams"), "{message}");
    assert!(refused.headers.contains_key("retry-after"), "{refused:?}");
    let events = daemon.get(&conversation_path(&id, "/events")).await;
    assert_eq!(events.status, 200, "other requests go on");

    // A stream that ends gives its place back.
    streams.pop();
    let reopened = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let stream = daemon.stream(Method::GET, &stream_path, Body::None, &[]).await;
            if stream.status == 200 {
                return stream;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(reopened.is_ok(), "the place of the closed stream was never given back");
}
