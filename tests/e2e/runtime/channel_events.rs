//! Channel events: conversations created by channels, and events applied once.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{assert_gapless, ids_of, list_events, messages_by, path, snapshot, types};
use crate::util::{Daemon, Reply};

// ---------------------------------------------------------------------------------------
// 6. Channel events.
// ---------------------------------------------------------------------------------------

async fn channel_event(daemon: &Daemon, body: Value) -> Reply {
    daemon.post(&path("/channel-events"), body).await
}

#[tokio::test]
async fn channel_events_create_conversations_and_are_applied_once() {
    let daemon = Daemon::start();

    // The first message creates the conversation.
    let first = channel_event(
        &daemon,
        json!({
            "conversationId": "sms-thread-1",
            "channel": {"type": "sms", "provider": "twilio", "id": "+15550001"},
            "text": "hello",
            "idempotencyKey": "delivery-1"
        }),
    )
    .await;
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(first.body["created"], true);
    assert_eq!(first.body["duplicate"], false);
    assert_eq!(first.body["conversation"]["id"], "sms-thread-1");
    assert_eq!(first.body["conversation"]["channel"]["type"], "sms");
    assert!(first.body["text"].as_str().is_some_and(|text| !text.is_empty()), "{first:?}");
    let id = "sms-thread-1";
    let first_events = first.body["events"].as_array().unwrap().clone();
    assert_eq!(messages_by(&first_events, "user")[0]["data"]["text"], "hello");
    assert_eq!(messages_by(&first_events, "user")[0]["data"]["nature"], "message");
    let reply_event = messages_by(&first_events, "assistant")[0].clone();
    let count = list_events(&daemon, id).await.len();

    // A redelivery: the first result again, nothing appended.
    let again = channel_event(
        &daemon,
        json!({
            "conversationId": id,
            "channel": {"type": "sms", "provider": "twilio", "id": "+15550001"},
            "text": "hello",
            "idempotencyKey": "delivery-1"
        }),
    )
    .await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.body["duplicate"], true);
    assert_eq!(again.body["created"], false);
    assert_eq!(again.body["events"], json!(first_events), "the same events");
    assert_eq!(again.body["text"], first.body["text"]);
    assert_eq!(list_events(&daemon, id).await.len(), count, "the log did not grow");

    // Deduplicated by provider + eventId.
    let by_provider = json!({
        "conversationId": id, "channel": "sms", "provider": "twilio", "eventId": "SM-77",
        "text": "what are your opening hours"
    });
    let original = channel_event(&daemon, by_provider.clone()).await;
    assert_eq!(original.status, 200, "{original:?}");
    assert_eq!(original.body["duplicate"], false);
    assert_eq!(original.body["created"], false);
    let count = list_events(&daemon, id).await.len();
    let repeat = channel_event(&daemon, by_provider.clone()).await;
    assert_eq!(repeat.body["duplicate"], true, "{repeat:?}");
    assert_eq!(repeat.body["events"], original.body["events"]);
    // The same provider event with another body is not a redelivery: refused, nothing kept.
    let mut changed = by_provider.clone();
    changed["text"] = json!("a different text, same provider event");
    channel_event(&daemon, changed).await.assert_error(409, "CONFLICT");
    assert_eq!(list_events(&daemon, id).await.len(), count, "the log did not grow");
    let other_provider = json!({
        "conversationId": id, "channel": "sms", "provider": "vonage", "eventId": "SM-77",
        "text": "thanks"
    });
    let other = channel_event(&daemon, other_provider).await;
    assert_eq!(other.body["duplicate"], false, "another provider's event is another event");

    // The envelope is merged over the top level; its text wins.
    let enveloped = channel_event(
        &daemon,
        json!({
            "conversationId": id, "channel": "sms", "text": "top-level text",
            "metadata": {"a": 1, "b": 1},
            "event": {"text": "envelope text", "metadata": {"b": 2}}
        }),
    )
    .await;
    assert_eq!(enveloped.status, 200, "{enveloped:?}");
    let user = messages_by(enveloped.body["events"].as_array().unwrap(), "user")[0].clone();
    assert_eq!(user["data"]["text"], "envelope text");
    assert_eq!(user["data"]["metadata"], json!({"a": 1, "b": 2}));
    channel_event(
        &daemon,
        json!({"conversationId": id, "channel": "sms", "event": {"verified": true, "text": "x"}}),
    )
    .await
    .assert_error(422, "VALIDATION_ERROR");

    // Every other variant appends its event.
    let variants = [
        (
            "provider-object",
            json!({"providerObject": {"status": "queued"}}),
            "channel.provider_update",
        ),
        (
            "outbound-contact",
            json!({"subject": "Your demo", "summary": "follow up"}),
            "channel.outbound_contact",
        ),
        ("scheduled", json!({"payload": {"reminder": "demo tomorrow"}}), "channel.scheduled"),
        ("output-resolution", json!({"status": "delivered"}), "channel.output_resolved"),
        ("handoff-review", json!({"summary": "check the refund"}), "channel.handoff_review"),
    ];
    for (kind, extra, event_type) in variants {
        let mut body = json!({"conversationId": id, "channel": "sms", "kind": kind});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let before = list_events(&daemon, id).await;
        let reply = channel_event(&daemon, body).await;
        assert_eq!(reply.status, 200, "{kind}: {reply:?}");
        let events = reply.body["events"].as_array().unwrap();
        assert_eq!(types(events), [event_type], "{kind}: {reply:?}");
        assert_eq!(events[0]["data"]["nature"], kind);
        let after = list_events(&daemon, id).await;
        assert_eq!(after.len(), before.len() + 1, "{kind}");
        assert_eq!(after.last().unwrap(), &events[0]);
    }

    // A voice turn: the transcript is the user's message, no channel needed.
    let voice = channel_event(
        &daemon,
        json!({"conversationId": id, "kind": "voice-turn", "transcript": "hello from the phone"}),
    )
    .await;
    assert_eq!(voice.status, 200, "{voice:?}");
    let events = voice.body["events"].as_array().unwrap();
    assert_eq!(messages_by(events, "user")[0]["data"]["text"], "hello from the phone");
    assert_eq!(messages_by(events, "user")[0]["data"]["nature"], "voice-turn");
    assert_eq!(messages_by(events, "assistant").len(), 1, "{events:#?}");

    // A channel handoff: the lifecycle follows; later messages get no reply.
    let handoff = channel_event(
        &daemon,
        json!({"conversationId": id, "channel": "sms", "kind": "handoff", "reason": "asked for a person", "reasonCode": "user_request"}),
    )
    .await;
    assert_eq!(handoff.status, 200, "{handoff:?}");
    assert_eq!(handoff.body["conversation"]["lifecycle"], "handoff");
    assert_eq!(types(handoff.body["events"].as_array().unwrap()), ["conversation.handoff"]);
    assert_eq!(handoff.body["events"][0]["data"]["reasonCode"], "user_request");
    assert_eq!(snapshot(&daemon, id).await["lifecycle"], "handoff");
    let quiet =
        channel_event(&daemon, json!({"conversationId": id, "channel": "sms", "text": "hello?"}))
            .await;
    assert_eq!(quiet.status, 200);
    assert!(
        messages_by(quiet.body["events"].as_array().unwrap(), "assistant").is_empty(),
        "{quiet:?}"
    );
    assert!(quiet.body.get("text").is_none(), "{quiet:?}");

    // Refused: no channel, an unknown kind, no text.
    let count = list_events(&daemon, id).await.len();
    channel_event(&daemon, json!({"conversationId": id, "text": "hi"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    channel_event(
        &daemon,
        json!({"conversationId": id, "channel": "sms", "kind": "telepathy", "text": "hi"}),
    )
    .await
    .assert_error(422, "VALIDATION_ERROR");
    channel_event(&daemon, json!({"conversationId": id, "channel": "sms", "kind": "message"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    assert_eq!(list_events(&daemon, id).await.len(), count);

    // A first event without a conversation id creates a new conversation.
    let fresh =
        channel_event(&daemon, json!({"channel": "web", "text": "hello", "dedupeKey": "web-1"}))
            .await;
    assert_eq!(fresh.status, 201, "{fresh:?}");
    assert_eq!(fresh.body["created"], true);
    let fresh_id = fresh.body["conversation"]["id"].as_str().unwrap();
    assert_ne!(fresh_id, id);
    let fresh_again =
        channel_event(&daemon, json!({"channel": "web", "text": "hello", "dedupeKey": "web-1"}))
            .await;
    assert_eq!(fresh_again.body["duplicate"], true, "{fresh_again:?}");
    assert_eq!(fresh_again.body["conversation"]["id"], fresh_id, "no second conversation");

    // resolveChannelOutput: what became of an assistant message sent on the channel.
    let resolved = daemon
        .post(
            &path("/channel-outputs/resolve"),
            json!({"conversationId": id, "eventId": reply_event["id"], "status": "delivered", "provider": "twilio"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{resolved:?}");
    let event = &resolved.body["event"];
    assert_eq!(event["type"], "channel.output_resolved");
    assert_eq!(event["data"]["status"], "delivered");
    assert_eq!(event["data"]["eventId"], reply_event["id"]);
    assert_eq!(event["data"]["outputOffset"], reply_event["offset"]);
    assert_eq!(list_events(&daemon, id).await.last().unwrap(), event);
    daemon
        .post(
            &path("/channel-outputs/resolve"),
            json!({"conversationId": id, "eventId": "evt_nope", "status": "delivered"}),
        )
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(
            &path("/channel-outputs/resolve"),
            json!({"conversationId": "conv_nope", "eventId": "evt_nope", "status": "read"}),
        )
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
    daemon
        .post(
            &path("/channel-outputs/resolve"),
            json!({"conversationId": id, "eventId": reply_event["id"]}),
        )
        .await
        .assert_error(422, "VALIDATION_ERROR");

    assert_gapless(&list_events(&daemon, id).await, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_redeliveries_of_a_first_channel_message_make_one_conversation() {
    // Providers retry webhooks that time out, so the same first message can arrive several
    // times at once. It must be applied once, in one conversation.
    let daemon = Arc::new(Daemon::start());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let daemon = daemon.clone();
        tasks.spawn(async move {
            let body = json!({
                "channel": "sms", "provider": "twilio", "eventId": "SM-first", "text": "hello"
            });
            channel_event(&daemon, body).await
        });
    }
    let mut results = Vec::new();
    while let Some(reply) = tasks.join_next().await {
        let reply = reply.unwrap();
        assert!(reply.status == 200 || reply.status == 201, "{reply:?}");
        results.push(reply.body);
    }
    let applied: Vec<&Value> = results.iter().filter(|r| r["duplicate"] == false).collect();
    assert_eq!(applied.len(), 1, "applied once: {results:#?}");
    let id = applied[0]["conversation"]["id"].as_str().unwrap();
    for result in &results {
        assert_eq!(result["conversation"]["id"], id, "one conversation: {results:#?}");
        assert_eq!(result["events"], applied[0]["events"]);
    }
    let listed = ids_of(&daemon.get(&path("/conversations")).await.body["conversations"]);
    assert_eq!(
        listed.len(),
        1,
        "one conversation, not {} (the others are left behind empty): {listed:?}",
        listed.len()
    );
    assert_eq!(listed, [id]);
    assert_eq!(messages_by(&list_events(&daemon, id).await, "user").len(), 1);
}

/// The reply text and events of a channel event that must succeed.
async fn said(daemon: &Daemon, body: Value) -> (String, Vec<Value>) {
    let reply = channel_event(daemon, body).await;
    assert!(reply.status == 200 || reply.status == 201, "{reply:?}");
    let text = reply.body["text"].as_str().unwrap_or_default().to_owned();
    (text, reply.body["events"].as_array().unwrap().clone())
}

#[tokio::test]
async fn over_sms_the_concierge_asks_in_words_and_reads_the_answer() {
    let daemon = Daemon::start();
    let sms = |text: &str| {
        json!({
            "conversationId": "sms-booking",
            "channel": {"type": "sms", "provider": "twilio", "id": "+15550002"},
            "text": text,
        })
    };
    let (text, events) = said(&daemon, sms("I'd like to book a demo")).await;
    assert!(text.contains("Where can we reach you?"), "{text}");
    assert!(text.contains("e-mail address or phone number"), "asked in words: {text}");
    assert!(!types(&events).contains(&"prompt.opened"), "no form on SMS: {events:#?}");

    // Not an address: asked again, nothing booked.
    let (text, _) = said(&daemon, sms("tomorrow afternoon works")).await;
    assert!(text.starts_with("Sorry, I didn't get an e-mail address or a phone number."), "{text}");

    // The answer in words completes the journey as the form would.
    let (text, events) =
        said(&daemon, sms("Sure, my name is Ada and my email is ada@example.com")).await;
    assert!(text.contains("Thanks Ada, we will write to ada@example.com"), "{text}");
    let submitted = events.iter().find(|event| event["type"] == "journey.transition").unwrap();
    assert_eq!(submitted["data"]["trigger"], "widget:form", "{events:#?}");
    let snapshot = snapshot(&daemon, "sms-booking").await;
    assert_eq!(snapshot["journeyContext"]["form"]["email"], "ada@example.com", "{snapshot}");

    // On the web the same journey opens its form.
    let (_, events) = said(
        &daemon,
        json!({"channel": "web", "text": "I'd like to book a demo", "dedupeKey": "web-booking"}),
    )
    .await;
    assert!(types(&events).contains(&"prompt.opened"), "{events:#?}");
}

#[tokio::test]
async fn the_concierge_answers_only_what_it_knows() {
    let daemon = Daemon::start();
    daemon
        .remember(json!({
            "content": "Refund policy: contact support within 30 days of purchase for a full refund.",
            "scope": "global",
            "tags": ["concierge"],
            "metadata": {"title": "Refunds", "url": "https://help.example.com/refunds"}
        }))
        .await;
    let web =
        |text: &str| json!({"conversationId": "web-questions", "channel": "web", "text": text});

    // The refund policy shares a word with the question but does not answer it.
    let (text, events) = said(&daemon, web("What are your support hours?")).await;
    assert!(text.starts_with("I don't know the answer to that."), "{text}");
    assert!(text.contains("person"), "a person is offered: {text}");
    let reply = messages_by(&events, "assistant")[0];
    assert!(reply["data"].get("supportReferences").is_none(), "{reply}");

    daemon
        .remember(json!({
            "content": "Support hours are 9:00 to 17:00 CET, Monday to Friday.",
            "scope": "global",
            "tags": ["concierge"],
        }))
        .await;
    let (text, _) = said(&daemon, web("What are your support hours?")).await;
    assert!(text.contains("9:00 to 17:00"), "{text}");
    assert!(!text.contains("refund"), "only what answers it: {text}");
    let (text, _) = said(&daemon, web("What is your refund policy?")).await;
    assert!(
        text.contains("30 days") && text.contains("https://help.example.com/refunds"),
        "{text}"
    );

    // Asking for a person hands over.
    let handoff = channel_event(&daemon, web("A person please")).await;
    assert_eq!(handoff.body["conversation"]["lifecycle"], "handoff", "{handoff:?}");
}
