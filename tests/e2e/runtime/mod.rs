//! The conversation runtime, mounted by the daemon at `/api/runtime`: conversations and their
//! event log, journeys and widgets, custom and journey events, lifecycle, channel events,
//! Server-Sent Events, CORS, authentication and an optional chat model, over real HTTP.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::util::Daemon;

mod access;
mod channel_events;
mod chat_model;
mod conversations;
mod lifecycle;
mod steps;
mod streams;

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
