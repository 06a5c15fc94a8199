//! The conversation runtime's wire types: its records (conversations, their event log,
//! snapshots and prompts), every operation's request and result (`operations`), and the
//! channel-event inputs (`channel`). A client needs nothing else to speak to a runtime.

mod channel;
mod operations;
mod voice;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use self::channel::*;
pub use self::operations::*;
pub use self::voice::*;
use crate::{JsonObject, Timestamp};

/// Where a conversation is in its life. `active` → `handoff` (a human took over) →
/// `active` (resumed); any → `closed`; resuming reopens a closed conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    Active,
    Handoff,
    Closed,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Active => "active",
            Lifecycle::Handoff => "handoff",
            Lifecycle::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Option<Lifecycle> {
        match text {
            "active" => Some(Lifecycle::Active),
            "handoff" => Some(Lifecycle::Handoff),
            "closed" => Some(Lifecycle::Closed),
            _ => None,
        }
    }
}

/// The channel a conversation happens on: `web`, `voice`, `sms`, `email`, … with the
/// provider and address when a channel adapter knows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationChannel {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The channel's own id for the thread (a phone number, a thread id, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<JsonObject>,
}

/// A conversation record, as every operation returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ConversationChannel>,
    /// Whatever the creator attached (`null` when nothing).
    pub context: Value,
    pub lifecycle: Lifecycle,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One entry of a conversation's ordered log. Offsets start at 0 and have no gaps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeEvent {
    pub id: String,
    pub conversation_id: String,
    pub offset: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: Timestamp,
    pub data: Value,
}

/// The journey state of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub conversation_id: String,
    pub lifecycle: Lifecycle,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_journey_id: Option<String>,
    pub active_state_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_summary: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journey_context: Option<Value>,
    pub updated_at: Timestamp,
}

impl Snapshot {
    /// The snapshot of a conversation no journey has touched yet.
    pub fn empty(conversation: &Conversation) -> Snapshot {
        Snapshot {
            conversation_id: conversation.id.clone(),
            lifecycle: conversation.lifecycle,
            active_journey_id: None,
            active_state_ids: Vec::new(),
            compaction_summary: None,
            definition_hash: None,
            journey_context: None,
            updated_at: conversation.updated_at,
        }
    }
}

/// A widget prompt the runtime opened and nobody has answered yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenPrompt {
    pub prompt_id: String,
    pub widget_kind: String,
    pub input: Value,
    /// The offset of the `prompt.opened` event.
    pub offset: u64,
}
