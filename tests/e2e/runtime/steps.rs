//! Steps of a conversation: messages and answers from memory, a journey with a widget, and
//! custom and journey events.

use hyper::Method;
use serde_json::{Value, json};

use super::{
    activity_kinds, assert_activities, assert_gapless, conversation_path, create_id, list_events,
    messages_by, of_type, path, replay, send, snapshot, types,
};
use crate::util::{Body, Daemon};

// ---------------------------------------------------------------------------------------
// 2. Messages, answers from memory, the event log.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn messages_get_replies_and_questions_are_answered_from_memory() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;

    let hello = send(&daemon, &id, "hello").await;
    let text = hello["text"].as_str().unwrap();
    assert!(!text.is_empty(), "{hello}");
    let events = hello["events"].as_array().unwrap();
    let users = messages_by(events, "user");
    assert_eq!(users.len(), 1, "{events:#?}");
    assert_eq!(users[0]["data"]["text"], "hello");
    let assistants = messages_by(events, "assistant");
    assert_eq!(assistants.len(), 1, "{events:#?}");
    assert_eq!(assistants[0]["data"]["text"], text, "the reply is the assistant's message");
    assert!(
        users[0]["offset"].as_u64() < assistants[0]["offset"].as_u64(),
        "the user's message comes first"
    );
    assert_activities(events);
    let intent = of_type(events, "activity")
        .into_iter()
        .find(|activity| activity["data"]["kind"] == "intent")
        .unwrap_or_else(|| panic!("an intent activity: {events:#?}"));
    assert_eq!(intent["data"]["name"], "greeting");
    let statuses: Vec<&Value> = of_type(events, "activity")
        .iter()
        .filter(|activity| activity["data"]["activityId"] == intent["data"]["activityId"])
        .map(|activity| &activity["data"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("running"), &json!("done")]);

    // Options of sendMessage are kept on the user's message.
    let with_options = daemon
        .post(
            &conversation_path(&id, "/messages"),
            json!({"message": "hello", "channel": "web", "turn": {"id": "turn-7"}, "app": {"page": "/"}}),
        )
        .await;
    assert_eq!(with_options.status, 200, "{with_options:?}");
    let user = messages_by(with_options.body["events"].as_array().unwrap(), "user")[0].clone();
    assert_eq!(user["data"]["channel"]["type"], "web");
    assert_eq!(user["data"]["turn"], json!({"id": "turn-7"}));

    // A question answered from memory, with its sources.
    let memory = daemon
        .remember(json!({
            "content": "The office wifi password is purple-otter-42; the network is called Cairn-Guest.",
            "scope": "global",
            "tags": ["concierge"],
            "metadata": {"title": "Office handbook", "url": "https://intranet.example.com/handbook"}
        }))
        .await;
    let answer = send(&daemon, &id, "What is the office wifi password?").await;
    let text = answer["text"].as_str().unwrap();
    assert!(text.contains("purple-otter-42"), "the answer holds the memory: {text}");
    assert!(text.contains("https://intranet.example.com/handbook"), "and its source: {text}");
    let events = answer["events"].as_array().unwrap();
    let reply = messages_by(events, "assistant")[0];
    let references = reply["data"]["supportReferences"].as_array().unwrap();
    assert_eq!(references[0]["id"], memory.as_str(), "{reply}");
    assert_eq!(references[0]["label"], "Office handbook");
    assert_eq!(references[0]["url"], "https://intranet.example.com/handbook");
    assert!(references[0]["excerpt"].as_str().unwrap().contains("purple-otter-42"));
    assert_eq!(
        reply["data"]["supportSourceLinks"],
        json!([{"id": memory, "label": "Office handbook", "url": "https://intranet.example.com/handbook"}])
    );
    assert!(activity_kinds(events).contains("knowledge"), "{events:#?}");
    assert_activities(events);
    assert_eq!(answer.get("activeJourneyId"), None, "a question starts no journey");

    // The log: gapless from 0, the same events the replies returned, afterOffset.
    let log = list_events(&daemon, &id).await;
    assert_gapless(&log, &id);
    assert_eq!(log[0]["type"], "conversation.created");
    let returned: Vec<Value> = [&hello, &with_options.body, &answer]
        .iter()
        .flat_map(|result| result["events"].as_array().unwrap().clone())
        .collect();
    assert_eq!(&log[1..], &returned[..], "the log holds exactly what the turns returned");
    let after = daemon.get(&conversation_path(&id, "/events?afterOffset=3")).await;
    assert_eq!(after.status, 200);
    assert_eq!(after.body["events"].as_array().unwrap(), &log[4..]);
    let last = log.len() - 1;
    let none = daemon.get(&conversation_path(&id, &format!("/events?afterOffset={last}"))).await;
    assert_eq!(none.body["events"], json!([]));
    daemon
        .get(&conversation_path(&id, "/events?afterOffset=soon"))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .get(&conversation_path(&id, "/events?from=2"))
        .await
        .assert_error(422, "VALIDATION_ERROR");

    // Errors.
    let missing = "conv_does_not_exist";
    daemon
        .post(&conversation_path(missing, "/messages"), json!({"message": "hi"}))
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
    daemon
        .get(&conversation_path(missing, "/events"))
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
    daemon
        .get(&conversation_path(missing, "/snapshot"))
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
    daemon
        .get(&conversation_path(missing, "/replay"))
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
    for empty in
        [json!({"message": ""}), json!({"message": "   "}), json!({}), json!({"message": 7})]
    {
        daemon
            .post(&conversation_path(&id, "/messages"), empty)
            .await
            .assert_error(422, "VALIDATION_ERROR");
    }
    daemon
        .request(Method::POST, &conversation_path(&id, "/messages"), Body::Raw(b"{not json"))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    assert_eq!(list_events(&daemon, &id).await.len(), log.len(), "refused messages add nothing");

    let closed = daemon.post(&conversation_path(&id, "/close"), json!({})).await;
    assert_eq!(closed.body["conversation"]["lifecycle"], "closed");
    daemon
        .post(&conversation_path(&id, "/messages"), json!({"message": "are you there?"}))
        .await
        .assert_error(409, "CONVERSATION_CLOSED");
    daemon
        .post(
            &conversation_path(&id, "/custom-events"),
            json!({"eventName": "page.viewed", "payload": {"url": "/"}}),
        )
        .await
        .assert_error(409, "CONVERSATION_CLOSED");

    // Routes the runtime does not serve.
    daemon.get(&path("/nowhere")).await.assert_error(404, "NOT_FOUND");
    let wrong_method = daemon.get(&conversation_path(&id, "/messages")).await;
    assert_eq!(wrong_method.status, 405, "{wrong_method:?}");
    // A closed conversation takes no voice segment; an unknown one is not found.
    daemon
        .post(&conversation_path(&id, "/voice-segments"), json!({}))
        .await
        .assert_error(409, "CONVERSATION_CLOSED");
    daemon
        .post(&conversation_path("conv_nope", "/voice-segments"), json!({}))
        .await
        .assert_error(404, "CONVERSATION_NOT_FOUND");
}

// ---------------------------------------------------------------------------------------
// 3. A journey with a widget, start to end.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_journey_opens_a_form_and_completes_when_it_is_submitted() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;

    let started = send(&daemon, &id, "I'd like to book a demo").await;
    assert_eq!(started["activeJourneyId"], "book_demo", "{started}");
    assert!(started["text"].as_str().unwrap().contains("Where can we reach you?"), "{started}");
    let events = started["events"].as_array().unwrap();
    let kinds = types(events);
    assert!(kinds.contains(&"journey.started"), "{kinds:?}");
    let opened = of_type(events, "prompt.opened");
    assert_eq!(opened.len(), 1, "{events:#?}");
    let opened = opened[0];
    assert_eq!(opened["data"]["widgetKind"], "form");
    assert_eq!(opened["data"]["input"], json!({"fields": ["name", "email"]}));
    let prompt_id = opened["data"]["promptId"].as_str().unwrap().to_owned();
    assert!(activity_kinds(events).contains("widget"), "{events:#?}");
    assert_activities(events);

    let during = snapshot(&daemon, &id).await;
    assert_eq!(during["activeJourneyId"], "book_demo");
    assert_eq!(during["activeStateIds"], json!(["ask_details"]));
    let replayed = replay(&daemon, &id, "").await;
    let open = replayed["openPrompts"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{replayed}");
    assert_eq!(open[0]["promptId"], prompt_id.as_str());
    assert_eq!(open[0]["widgetKind"], "form");
    assert_eq!(open[0]["offset"], opened["offset"], "the prompt carries its event's offset");

    let widgets = conversation_path(&id, "/widgets");
    let output = json!({"name": "Ada Lovelace", "email": "ada@example.com"});
    daemon
        .post(&widgets, json!({"promptId": "prm_nope", "widgetKind": "form", "output": output}))
        .await
        .assert_error(404, "PROMPT_NOT_FOUND");
    daemon
        .post(
            &widgets,
            json!({"promptId": prompt_id, "widgetKind": "rating", "output": {"value": 5}}),
        )
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&widgets, json!({"widgetKind": "form", "output": output}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    let before = list_events(&daemon, &id).await.len();
    assert_eq!(replay(&daemon, &id, "").await["openPrompts"].as_array().unwrap().len(), 1);

    let submitted = daemon
        .post(&widgets, json!({"promptId": prompt_id, "widgetKind": "form", "output": output}))
        .await;
    assert_eq!(submitted.status, 200, "{submitted:?}");
    let event = &submitted.body["event"];
    assert_eq!(event["type"], "prompt.submitted", "{submitted:?}");
    assert_eq!(event["data"]["promptId"], prompt_id.as_str());
    assert_eq!(event["data"]["output"], output);
    assert_eq!(event["offset"].as_u64().unwrap() as usize, before, "appended at the end");

    let log = list_events(&daemon, &id).await;
    assert_gapless(&log, &id);
    let after: &[Value] = &log[before..];
    let tool = of_type(after, "tool.called");
    assert_eq!(tool.len(), 1, "{after:#?}");
    assert_eq!(tool[0]["data"]["name"], "memory.store");
    assert!(tool[0]["data"].get("error").is_none(), "the tool worked: {}", tool[0]);
    let stored_id = tool[0]["data"]["output"]["memoryId"].as_str().unwrap().to_owned();
    let completed = of_type(after, "journey.completed");
    assert_eq!(completed.len(), 1, "{after:#?}");
    assert_eq!(completed[0]["data"]["journeyId"], "book_demo");
    let thanks = messages_by(after, "assistant");
    assert!(
        thanks.iter().any(|m| m["data"]["text"].as_str().unwrap().contains("ada@example.com")),
        "the confirmation uses the form: {after:#?}"
    );
    assert!(activity_kinds(after).contains("tool"), "{after:#?}");

    let done = snapshot(&daemon, &id).await;
    assert!(done.get("activeJourneyId").is_none(), "no journey is active: {done}");
    assert_eq!(done["activeStateIds"], json!([]));
    let hash = done["definitionHash"].as_str().unwrap();
    assert_eq!(hash.len(), 64, "{done}");
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(replay(&daemon, &id, "").await["openPrompts"], json!([]));
    daemon
        .post(&widgets, json!({"promptId": prompt_id, "widgetKind": "form", "output": output}))
        .await
        .assert_error(409, "CONFLICT");
    assert_eq!(list_events(&daemon, &id).await.len(), log.len(), "the repeat added nothing");

    // The memory the tool stored is the conversation's own: the operators' API reads it,
    // retrieval for anyone else leaves it out.
    let stored = daemon.get(&format!("/api/memories/{stored_id}")).await;
    assert_eq!(stored.status, 200, "{stored:?}");
    assert_eq!(stored.body["content"], "Demo requested by Ada Lovelace <ada@example.com>");
    let tags = stored.body["tags"].as_array().unwrap();
    assert!(tags.contains(&json!(format!("conversation:{id}"))), "{tags:?}");
    assert_eq!(stored.body["scope"], "task");
    let found = daemon.get("/api/search?q=Lovelace").await;
    assert_eq!(found.body["hits"], json!([]), "private to the conversation: {found:?}");
}

// ---------------------------------------------------------------------------------------
// 4. Custom and journey events.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn custom_and_journey_events_are_checked_against_their_schemas() {
    let daemon = Daemon::start();
    let id = create_id(&daemon).await;
    let custom = conversation_path(&id, "/custom-events");

    let viewed = daemon
        .post(
            &custom,
            json!({"eventName": "page.viewed", "payload": {"url": "https://example.com/pricing"}}),
        )
        .await;
    assert_eq!(viewed.status, 201, "{viewed:?}");
    let event = &viewed.body["event"];
    assert_eq!(event["type"], "custom");
    assert_eq!(event["data"]["name"], "page.viewed");
    assert_eq!(event["data"]["payload"], json!({"url": "https://example.com/pricing"}));
    assert_eq!(event["conversationId"], id.as_str());

    let count = list_events(&daemon, &id).await.len();
    let undefined = daemon.post(&custom, json!({"eventName": "page.liked", "payload": {}})).await;
    assert!(
        undefined.assert_error(422, "VALIDATION_ERROR").contains("page.viewed"),
        "names the defined ones"
    );
    for payload in [json!({}), json!({"url": 42}), json!({"url": "/", "extra": true}), json!("x")] {
        let refused =
            daemon.post(&custom, json!({"eventName": "page.viewed", "payload": payload})).await;
        refused.assert_error(422, "VALIDATION_ERROR");
    }
    assert_eq!(list_events(&daemon, &id).await.len(), count, "refused events are not appended");

    // Journey events: routing `none` records the event and moves nothing.
    let journey = conversation_path(&id, "/journey-events");
    let recorded = daemon
        .post(&journey, json!({"eventName": "feedback.requested", "payload": {"caseId": "c-1"}, "routing": "none"}))
        .await;
    assert_eq!(recorded.status, 201, "{recorded:?}");
    assert_eq!(recorded.body["event"]["type"], "journey.event");
    assert_eq!(recorded.body["event"]["data"]["name"], "feedback.requested");
    assert_eq!(types(recorded.body["events"].as_array().unwrap()), ["journey.event"]);
    assert!(recorded.body["snapshot"].get("activeJourneyId").is_none(), "{recorded:?}");

    // The default routing starts the journey that listens for it.
    let started = daemon
        .post(&journey, json!({"eventName": "feedback.requested", "payload": {"caseId": "c-1"}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let body = &started.body;
    assert_eq!(body["event"]["type"], "journey.event");
    assert_eq!(body["events"][0], body["event"], "`event` is the first of `events`");
    assert_eq!(body["snapshot"]["activeJourneyId"], "feedback", "{body}");
    assert_eq!(body["snapshot"]["activeStateIds"], json!(["ask_rating"]));
    let events = body["events"].as_array().unwrap();
    assert!(types(events).contains(&"journey.started"), "{events:#?}");
    assert_eq!(of_type(events, "prompt.opened")[0]["data"]["widgetKind"], "rating");
    assert_eq!(snapshot(&daemon, &id).await["activeJourneyId"], "feedback");

    // Routing `none` again: recorded, the journey stays where it was.
    let ignored = daemon
        .post(&journey, json!({"eventName": "demo.requested", "payload": {}, "routing": "none"}))
        .await;
    assert_eq!(ignored.status, 201);
    assert_eq!(ignored.body["snapshot"]["activeJourneyId"], "feedback");
    assert_eq!(ignored.body["snapshot"]["activeStateIds"], json!(["ask_rating"]));

    // Targeted: to a named state of a named journey.
    let targeted = daemon
        .post(
            &journey,
            json!({
                "eventName": "feedback.requested",
                "payload": {},
                "routing": "targeted",
                "target": {"journeyId": "feedback", "stateId": "ask_comment"}
            }),
        )
        .await;
    assert_eq!(targeted.status, 201, "{targeted:?}");
    assert_eq!(targeted.body["snapshot"]["activeJourneyId"], "feedback");
    assert_eq!(targeted.body["snapshot"]["activeStateIds"], json!(["ask_comment"]));
    assert_eq!(targeted.body["event"]["data"]["target"]["stateId"], "ask_comment");
    let entered = of_type(targeted.body["events"].as_array().unwrap(), "journey.state_entered");
    assert_eq!(entered[0]["data"]["stateId"], "ask_comment", "{targeted:?}");

    // A target the agent does not have is refused, and nothing is appended.
    let before = list_events(&daemon, &id).await.len();
    let body = json!({
        "eventName": "feedback.requested",
        "payload": {},
        "routing": "targeted",
        "target": {"journeyId": "no_such_journey"}
    });
    let message =
        daemon.post(&journey, body).await.assert_error(422, "VALIDATION_ERROR").to_owned();
    assert!(message.contains("no_such_journey"), "{message}");
    assert_eq!(list_events(&daemon, &id).await.len(), before);

    let count = list_events(&daemon, &id).await.len();
    daemon
        .post(&journey, json!({"eventName": "order.shipped", "payload": {}}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&journey, json!({"eventName": "feedback.requested", "payload": {"caseId": 7}}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&journey, json!({"eventName": "feedback.requested", "routing": "everywhere"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    assert_eq!(list_events(&daemon, &id).await.len(), count, "refused events are not appended");
    assert_gapless(&list_events(&daemon, &id).await, &id);
}
