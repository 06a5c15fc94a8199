//! The conversation runtime, mounted by the daemon at `/api/runtime`: conversations and their
//! event log, journeys and widgets, custom and journey events, lifecycle, channel events,
//! Server-Sent Events, CORS, authentication and an optional chat model, over real HTTP.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_test_support::standin::{Answer, Request, StandIn, openai};
use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon, Reply, create_key};

const BASE: &str = "/api/runtime";

/// The activity kinds the seed names.
const ACTIVITY_KINDS: &[&str] =
    &["response", "widget", "intent", "extraction", "action", "tool", "knowledge"];

fn path(rest: &str) -> String {
    format!("{BASE}{rest}")
}

fn conversation_path(id: &str, rest: &str) -> String {
    format!("{BASE}/conversations/{id}{rest}")
}

async fn create(daemon: &Daemon, body: Value) -> Value {
    let reply = daemon.post(&path("/conversations"), body).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["conversation"].clone()
}

async fn create_id(daemon: &Daemon) -> String {
    create(daemon, json!({})).await["id"].as_str().unwrap().to_owned()
}

/// Sends a user message and returns the send-message result.
async fn send(daemon: &Daemon, id: &str, message: &str) -> Value {
    let reply = daemon.post(&conversation_path(id, "/messages"), json!({"message": message})).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

async fn list_events(daemon: &Daemon, id: &str) -> Vec<Value> {
    let reply = daemon.get(&conversation_path(id, "/events")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body["events"].as_array().unwrap().clone()
}

async fn snapshot(daemon: &Daemon, id: &str) -> Value {
    let reply = daemon.get(&conversation_path(id, "/snapshot")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body["snapshot"].clone()
}

async fn replay(daemon: &Daemon, id: &str, query: &str) -> Value {
    let reply = daemon.get(&conversation_path(id, &format!("/replay{query}"))).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

fn offsets(events: &[Value]) -> Vec<u64> {
    events.iter().map(|event| event["offset"].as_u64().unwrap()).collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|event| event["type"] == kind).collect()
}

fn messages_by<'a>(events: &'a [Value], role: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["type"] == "message" && event["data"]["role"] == role)
        .collect()
}

/// The log's offsets are exactly 0, 1, 2, … and every event has the documented fields.
fn assert_gapless(events: &[Value], conversation_id: &str) {
    let expected: Vec<u64> = (0..events.len() as u64).collect();
    assert_eq!(offsets(events), expected, "offsets are gapless from 0: {events:#?}");
    for event in events {
        assert!(event["id"].as_str().is_some_and(|id| !id.is_empty()), "{event}");
        assert_eq!(event["conversationId"], conversation_id, "{event}");
        assert!(event["type"].is_string() && event["createdAt"].is_string(), "{event}");
        assert!(event.get("data").is_some(), "{event}");
    }
}

/// Every activity event names one of the seed's kinds, a label and a status.
fn assert_activities(events: &[Value]) {
    for activity in of_type(events, "activity") {
        let data = &activity["data"];
        let kind = data["kind"].as_str().unwrap_or_default();
        assert!(ACTIVITY_KINDS.contains(&kind), "unknown activity kind: {activity}");
        assert!(data["label"].as_str().is_some_and(|label| !label.is_empty()), "{activity}");
        assert!(data["status"] == "running" || data["status"] == "done", "{activity}");
    }
}

fn activity_kinds(events: &[Value]) -> BTreeSet<String> {
    of_type(events, "activity")
        .iter()
        .map(|activity| activity["data"]["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn ids_of(conversations: &Value) -> Vec<String> {
    conversations
        .as_array()
        .unwrap()
        .iter()
        .map(|conversation| conversation["id"].as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1. Conversations: create and list.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn conversations_are_created_and_listed_with_lossless_cursors() {
    // A second agent, so the agentId filter has something to tell apart.
    let agents = tempfile::tempdir().unwrap();
    std::fs::write(
        agents.path().join("concierge.json"),
        include_str!("../../crates/agents/agents/concierge.json"),
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
    let created: Vec<&str> = whole.body["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|conversation| conversation["createdAt"].as_str().unwrap())
        .collect();
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
// 9. CORS with explicit origins.
// ---------------------------------------------------------------------------------------

const APP: &str = "https://app.example.com";
const EVIL: &str = "https://evil.example.com";

fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply.headers.get(name).map(|value| value.to_str().unwrap())
}

async fn preflight(daemon: &Daemon, origin: &str) -> Reply {
    daemon
        .request_with(
            Method::OPTIONS,
            &path("/conversations"),
            Body::None,
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "content-type"),
            ],
        )
        .await
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let daemon = Daemon::start_with(&["--cors-origin", APP], &[]);

    let allowed = preflight(&daemon, APP).await;
    assert_eq!(allowed.status, 204, "{allowed:?}");
    assert_eq!(header(&allowed, "access-control-allow-origin"), Some(APP));
    let methods = header(&allowed, "access-control-allow-methods").unwrap();
    assert!(methods.contains("POST") && methods.contains("GET"), "{methods}");
    let headers = header(&allowed, "access-control-allow-headers").unwrap().to_lowercase();
    assert!(headers.contains("content-type") && headers.contains("authorization"), "{headers}");

    let refused = preflight(&daemon, EVIL).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(header(&refused, "access-control-allow-origin"), None);

    let created = daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("origin", APP)],
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(header(&created, "access-control-allow-origin"), Some(APP));
    assert!(
        created.headers.get_all("vary").iter().any(|v| v.to_str().unwrap().contains("Origin")),
        "{created:?}"
    );
    let listed = daemon
        .request_with(Method::GET, &path("/conversations"), Body::None, &[("origin", APP)])
        .await;
    assert_eq!(listed.status, 200);
    assert_eq!(header(&listed, "access-control-allow-origin"), Some(APP));

    let count =
        daemon.get(&path("/conversations")).await.body["conversations"].as_array().unwrap().len();
    let cross_site = daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("origin", EVIL)],
        )
        .await;
    cross_site.assert_error(403, "FORBIDDEN");
    assert_eq!(header(&cross_site, "access-control-allow-origin"), None);
    let count_after =
        daemon.get(&path("/conversations")).await.body["conversations"].as_array().unwrap().len();
    assert_eq!(count_after, count, "the refused request created nothing");
}

// ---------------------------------------------------------------------------------------
// 10. The daemon's authorize hook: the memory API's authentication.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn production_runtime_requests_need_credentials_and_roles() {
    let directory = tempfile::tempdir().unwrap();
    let writer = create_key(directory.path(), "write");
    let reader = create_key(directory.path(), "read");
    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--profile", "production", "--cors-origin", APP],
        &[],
    );

    // No credentials: the memory API's own 401, in its envelope.
    let anonymous = daemon.get(&path("/conversations")).await;
    anonymous.assert_error(401, "UNAUTHORIZED");
    let memory_answer = daemon.get("/api/memories").await;
    assert_eq!(anonymous.body["error"]["message"], memory_answer.body["error"]["message"]);
    assert_eq!(anonymous.body.as_object().unwrap().len(), 1, "only `error`: {:?}", anonymous.body);
    daemon.post(&path("/conversations"), json!({})).await.assert_error(401, "UNAUTHORIZED");
    daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("x-api-key", "cairn_wrong")],
        )
        .await
        .assert_error(401, "UNAUTHORIZED");
    // Preflights are not subject to authentication.
    let preflight = preflight(&daemon, APP).await;
    assert_eq!(preflight.status, 204, "{preflight:?}");
    assert_eq!(header(&preflight, "access-control-allow-origin"), Some(APP));

    // A reader reads but may not write.
    let as_reader = [("x-api-key", reader.as_str())];
    let listed =
        daemon.request_with(Method::GET, &path("/conversations"), Body::None, &as_reader).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let refused = daemon
        .request_with(Method::POST, &path("/conversations"), Body::Json(json!({})), &as_reader)
        .await;
    assert!(refused.assert_error(403, "FORBIDDEN").contains("`write` role"));

    // A writer does both.
    let as_writer = [("x-api-key", writer.as_str())];
    let created = daemon
        .request_with(Method::POST, &path("/conversations"), Body::Json(json!({})), &as_writer)
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["conversation"]["id"].as_str().unwrap();
    let sent = daemon
        .request_with(
            Method::POST,
            &conversation_path(id, "/messages"),
            Body::Json(json!({"message": "hello"})),
            &as_writer,
        )
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let events = daemon
        .request_with(Method::GET, &conversation_path(id, "/events"), Body::None, &as_reader)
        .await;
    assert_eq!(events.status, 200);
    assert!(events.body["events"].as_array().unwrap().len() > 2);
    daemon
        .request_with(
            Method::POST,
            &conversation_path(id, "/messages"),
            Body::Json(json!({"message": "hi"})),
            &as_reader,
        )
        .await
        .assert_error(403, "FORBIDDEN");
    let mut stream =
        daemon.stream(Method::GET, &conversation_path(id, "/events/stream"), Body::None, &[]).await;
    assert_eq!(stream.status, 401, "streams need credentials too");
    assert_eq!(stream.json().await["error"]["code"], "UNAUTHORIZED");
    stream = daemon
        .stream(Method::GET, &conversation_path(id, "/events/stream"), Body::None, &as_reader)
        .await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.next().await.unwrap().json()["offset"], 0);
}

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
