//! Intermediate messages, preambles, compaction, lifecycle, snapshot and replay.

use hyper::Method;
use serde_json::json;

use super::{
    assert_gapless, conversation_path, create_id, list_events, messages_by, of_type, path, replay,
    send, snapshot, types,
};
use crate::util::{Body, Daemon};

// ---------------------------------------------------------------------------------------
// 5. Intermediate messages, preambles, compaction, lifecycle, snapshot, replay.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn intermediate_messages_preambles_compaction_and_lifecycle() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    send(&daemon, &id, "hello").await;

    let intermediate = daemon
        .post(
            &conversation_path(&id, "/intermediate-messages"),
            json!({"text": "Checking the calendar…", "visibleToModel": false}),
        )
        .await;
    assert_eq!(intermediate.status, 201, "{intermediate:?}");
    let events = intermediate.body["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    let data = &events[0]["data"];
    assert_eq!(events[0]["type"], "message");
    assert_eq!(data["role"], "assistant");
    assert_eq!(data["text"], "Checking the calendar…");
    assert_eq!(data["intermediate"], true);
    assert_eq!(data["visibleToModel"], false);
    let visible = daemon
        .post(&conversation_path(&id, "/intermediate-messages"), json!({"text": "Still on it."}))
        .await;
    assert_eq!(visible.body["events"][0]["data"]["visibleToModel"], true, "visible by default");
    daemon
        .post(&conversation_path(&id, "/intermediate-messages"), json!({"text": " "}))
        .await
        .assert_error(422, "VALIDATION_ERROR");

    let preamble = daemon
        .post(
            &conversation_path(&id, "/preambles"),
            json!({"maxWords": 3, "purpose": "check the calendar"}),
        )
        .await;
    assert_eq!(preamble.status, 201, "{preamble:?}");
    let text = preamble.body["text"].as_str().unwrap();
    assert!(!text.is_empty() && text.split_whitespace().count() <= 3, "maxWords: {text:?}");
    // Fewer, whole words: never a phrase cut off ("One moment while I…").
    assert!(!text.contains('…') && text.ends_with('.'), "cut mid-phrase: {text:?}");
    let event = &preamble.body["events"][0];
    assert_eq!(event["data"]["text"], text);
    assert_eq!(event["data"]["purpose"], "check the calendar");
    assert_eq!(event["data"]["intermediate"], true);
    let full = daemon
        .post(&conversation_path(&id, "/preambles"), json!({"purpose": "check the calendar"}))
        .await;
    assert!(full.body["text"].as_str().unwrap().contains("check the calendar"), "{full:?}");
    let default =
        daemon.request(Method::POST, &conversation_path(&id, "/preambles"), Body::None).await;
    assert_eq!(default.status, 201, "{default:?}");
    assert!(!default.body["text"].as_str().unwrap().is_empty());
    daemon
        .post(&conversation_path(&id, "/preambles"), json!({"maxWords": 0}))
        .await
        .assert_error(422, "VALIDATION_ERROR");

    // Replay: messages with offsets and flags; afterOffset.
    let replayed = replay(&daemon, &id, "").await;
    assert_eq!(replayed["conversation"]["id"], id.as_str());
    let log = list_events(&daemon, &id).await;
    assert_eq!(replayed["events"].as_array().unwrap(), &log);
    let messages = replayed["messages"].as_array().unwrap();
    let message_events = of_type(&log, "message");
    assert_eq!(messages.len(), message_events.len());
    for (message, event) in messages.iter().zip(&message_events) {
        assert_eq!(message["offset"], event["offset"]);
        assert_eq!(message["role"], event["data"]["role"]);
        assert_eq!(message["text"], event["data"]["text"]);
        assert_eq!(message["aborted"], false);
    }
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["intermediate"], false);
    let flagged = messages.iter().find(|m| m["text"] == "Checking the calendar…").unwrap();
    assert_eq!(flagged["intermediate"], true);
    assert_eq!(flagged["reason"], "intermediate");
    assert_eq!(messages.last().unwrap()["reason"], "preamble");
    let cut = flagged["offset"].as_u64().unwrap();
    let tail = replay(&daemon, &id, &format!("?afterOffset={cut}")).await;
    assert!(tail["events"].as_array().unwrap().iter().all(|e| e["offset"].as_u64().unwrap() > cut));
    assert!(
        tail["messages"].as_array().unwrap().iter().all(|m| m["offset"].as_u64().unwrap() > cut)
    );
    assert_eq!(
        tail["messages"].as_array().unwrap().len(),
        messages.iter().filter(|m| m["offset"].as_u64().unwrap() > cut).count()
    );

    // Compaction.
    let last = log.last().unwrap()["offset"].as_u64().unwrap();
    let compacted = daemon.post(&conversation_path(&id, "/compact"), json!({})).await;
    assert_eq!(compacted.status, 200, "{compacted:?}");
    let body = &compacted.body;
    assert_eq!(body["events"][0]["type"], "conversation.compacted");
    assert_eq!(body["summary"]["schemaVersion"], "1");
    assert_eq!(body["summary"]["toOffset"], last);
    assert_eq!(body["snapshot"]["compactionSummary"], body["summary"]);
    assert!(body["summary"]["text"].as_str().unwrap().contains("hello"), "{body}");
    assert_eq!(snapshot(&daemon, &id).await["compactionSummary"]["schemaVersion"], "1");
    let versioned = daemon
        .post(
            &conversation_path(&id, "/compact"),
            json!({"fromOffset": 1, "toOffset": 2, "schemaVersion": "2"}),
        )
        .await;
    assert_eq!(versioned.body["summary"]["schemaVersion"], "2", "{versioned:?}");
    assert_eq!(versioned.body["snapshot"]["compactionSummary"]["schemaVersion"], "2");
    let beyond = list_events(&daemon, &id).await.len() + 5;
    let count = list_events(&daemon, &id).await.len();
    daemon
        .post(&conversation_path(&id, "/compact"), json!({"toOffset": beyond}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&conversation_path(&id, "/compact"), json!({"fromOffset": 3, "toOffset": 1}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    assert_eq!(list_events(&daemon, &id).await.len(), count);

    // Handoff: a person takes over; the assistant stays quiet.
    let handoff = daemon
        .post(
            &conversation_path(&id, "/handoff"),
            json!({"reason": "billing question", "summary": "wants a refund"}),
        )
        .await;
    assert_eq!(handoff.status, 200, "{handoff:?}");
    assert_eq!(handoff.body["conversation"]["lifecycle"], "handoff");
    assert_eq!(handoff.body["event"]["type"], "conversation.handoff");
    assert_eq!(handoff.body["event"]["data"]["reason"], "billing question");
    assert_eq!(snapshot(&daemon, &id).await["lifecycle"], "handoff");
    daemon
        .post(&conversation_path(&id, "/handoff"), json!({"reason": ""}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    let quiet = send(&daemon, &id, "hello? anyone?").await;
    assert_eq!(quiet["text"], "", "{quiet}");
    let events = quiet["events"].as_array().unwrap();
    assert_eq!(messages_by(events, "user").len(), 1, "{events:#?}");
    assert!(messages_by(events, "assistant").is_empty(), "no assistant reply: {events:#?}");

    let resumed = daemon.post(&conversation_path(&id, "/resume"), json!({"reason": "done"})).await;
    assert_eq!(resumed.status, 200, "{resumed:?}");
    assert_eq!(resumed.body["conversation"]["lifecycle"], "active");
    assert_eq!(resumed.body["event"]["type"], "conversation.resumed");
    let replied = send(&daemon, &id, "hello again").await;
    assert!(!messages_by(replied["events"].as_array().unwrap(), "assistant").is_empty());

    // Close, and resume reopens.
    let closed = daemon.post(&conversation_path(&id, "/close"), json!({"reason": "solved"})).await;
    assert_eq!(closed.status, 200, "{closed:?}");
    assert_eq!(closed.body["conversation"]["lifecycle"], "closed");
    assert_eq!(closed.body["conversation"]["id"], id.as_str());
    assert_eq!(snapshot(&daemon, &id).await["lifecycle"], "closed");
    let listed = daemon.get(&path("/conversations")).await;
    assert_eq!(listed.body["conversations"][0]["lifecycle"], "closed");
    daemon
        .post(&conversation_path(&id, "/handoff"), json!({"reason": "too late"}))
        .await
        .assert_error(409, "CONVERSATION_CLOSED");
    let reopened =
        daemon.request(Method::POST, &conversation_path(&id, "/resume"), Body::None).await;
    assert_eq!(reopened.status, 200, "{reopened:?}");
    assert_eq!(reopened.body["conversation"]["lifecycle"], "active");
    assert_eq!(reopened.body["event"]["data"]["from"], "closed");
    send(&daemon, &id, "hello once more").await;

    let log = list_events(&daemon, &id).await;
    assert_gapless(&log, &id);
    let lifecycle: Vec<&str> = types(&log)
        .into_iter()
        .filter(|kind| kind.starts_with("conversation.") && *kind != "conversation.compacted")
        .collect();
    assert_eq!(
        lifecycle,
        [
            "conversation.created",
            "conversation.handoff",
            "conversation.resumed",
            "conversation.closed",
            "conversation.resumed"
        ]
    );
    for missing in ["/close", "/resume", "/compact", "/preambles"] {
        daemon
            .post(&conversation_path("conv_missing", missing), json!({}))
            .await
            .assert_error(404, "CONVERSATION_NOT_FOUND");
    }
}
