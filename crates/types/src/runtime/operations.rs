//! The request bodies, query parameters and results of the runtime's operations, as they
//! cross the wire (`camelCase`). Bodies refuse unknown fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::{Conversation, ConversationChannel, OpenPrompt, RuntimeEvent, Snapshot};

/// A channel as callers may give it: a name (`"web"`) or the whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ChannelInput {
    /// The channel's type alone, e.g. `web`.
    Name(String),
    Channel(ConversationChannel),
}

impl From<&str> for ChannelInput {
    fn from(kind: &str) -> ChannelInput {
        ChannelInput::Name(kind.to_owned())
    }
}

impl From<String> for ChannelInput {
    fn from(kind: String) -> ChannelInput {
        ChannelInput::Name(kind)
    }
}

impl From<ConversationChannel> for ChannelInput {
    fn from(channel: ConversationChannel) -> ChannelInput {
        ChannelInput::Channel(channel)
    }
}

impl ChannelInput {
    pub fn into_channel(self) -> ConversationChannel {
        match self {
            ChannelInput::Name(kind) => {
                ConversationChannel { kind, provider: None, id: None, metadata: None }
            }
            ChannelInput::Channel(channel) => channel,
        }
    }
}

/// The body of `POST /conversations` (createConversation); every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateConversationInput {
    /// The conversation's id; one is made (`conv_…`) when absent.
    pub id: Option<String>,
    /// The agent that answers; the handler's default agent when absent.
    pub agent_id: Option<String>,
    pub channel: Option<ChannelInput>,
    /// Anything the caller wants kept with the conversation.
    pub context: Option<Value>,
}

/// `GET /conversations` (listConversations): newest first; `after`/`before` are cursors
/// (the `nextCursor` or `prevCursor` of a page), `afterUpdatedAt`/`beforeUpdatedAt` bound
/// `updatedAt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListConversationsInput {
    /// The `nextCursor` of the previous page: conversations older than it.
    pub after: Option<String>,
    /// The `prevCursor` of a page: conversations newer than it.
    pub before: Option<String>,
    /// Only conversations updated after this ISO 8601 time.
    pub after_updated_at: Option<String>,
    /// Only conversations updated before this ISO 8601 time.
    pub before_updated_at: Option<String>,
    /// Only this agent's conversations.
    pub agent_id: Option<String>,
    /// Page size (default 50, at most 200).
    pub limit: Option<u32>,
}

/// A page of conversations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationList {
    pub conversations: Vec<Conversation>,
    /// Pass as `after` for the next (older) page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Pass as `before` for the previous (newer) page; absent on the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_cursor: Option<String>,
    /// The last message of each conversation of the page that has one, by conversation id:
    /// what an inbox shows under each conversation.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub last_messages: std::collections::BTreeMap<String, LastMessage>,
}

/// A conversation's newest message, as a list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
    pub offset: u64,
    pub created_at: crate::Timestamp,
}

/// `{"conversation": …}`: what creating, reading and closing a conversation return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ConversationResult {
    pub conversation: Conversation,
}

/// `{"snapshot": …}`: a conversation's journey state (getSnapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotResult {
    pub snapshot: Snapshot,
}

/// `afterOffset`: the query of streamEvents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AfterOffset {
    /// Only events with a higher offset (all when absent).
    pub after_offset: Option<u64>,
}

/// The most events one listEvents or replayConversation call returns, and its default
/// `limit`. Longer logs are read a page at a time: pass a page's `nextAfterOffset` as the
/// next call's `afterOffset`.
pub const MAX_EVENT_PAGE: u32 = 1000;

/// The query of listEvents and replayConversation: a page of the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events with a higher offset (from the first event when absent).
    pub after_offset: Option<u64>,
    /// At most this many events, the oldest first (default and maximum 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// A page of the log (listEvents): `{events, nextAfterOffset?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    /// Events in offset order.
    pub events: Vec<RuntimeEvent>,
    /// Present when the log held more events than the page: pass it as `afterOffset` for
    /// the next page. Absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after_offset: Option<u64>,
}

/// The body of `POST /conversations/:id/messages` (sendMessage).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMessageBody {
    /// What the user wrote; not empty; at most 32768 characters.
    #[schema(
        min_length = 1,
        max_length = 32768,
        pattern = r"\S",
        example = "I would like to book a demo"
    )]
    pub message: String,
    /// What the client app knows of the moment (page, locale, …).
    pub app: Option<Value>,
    pub channel: Option<ChannelInput>,
    pub turn: Option<Value>,
}

/// The assistant's turn after a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageResult {
    /// The reply's text.
    pub text: String,
    /// The events the turn appended, the user's message first.
    pub events: Vec<RuntimeEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_journey_id: Option<String>,
}

/// The body of `POST /conversations/:id/widgets` (submitWidget): the answer to a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmitWidgetBody {
    /// The `promptId` of the `prompt.opened` event.
    pub prompt_id: String,
    pub widget_kind: String,
    /// What the widget produced (`null` when absent).
    #[serde(default)]
    pub output: Value,
}

/// An omitted event payload: an empty object, which a schema that requires no field takes.
fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The body of `POST /conversations/:id/custom-events` (emitCustomEvent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomEventBody {
    /// One of the custom events the handler defines.
    pub event_name: String,
    /// Checked against the event's JSON Schema; `{}` when absent.
    #[serde(default = "empty_object")]
    pub payload: Value,
}

/// Which journeys a journey event may move.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Routing {
    /// Recorded only; no journey sees it.
    None,
    /// Only the active state's transition on the event.
    ActiveJourneyOnly,
    /// The active state's transition on the event, else a journey it starts.
    #[default]
    Full,
    /// The target journey (the active one if none is named), and the target state if named.
    Targeted,
}

/// Where a targeted journey event goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JourneyTarget {
    pub journey_id: Option<String>,
    pub state_id: Option<String>,
}

/// The body of `POST /conversations/:id/journey-events` (emitJourneyEvent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JourneyEventBody {
    /// One of the journey events the handler defines.
    pub event_name: String,
    pub app: Option<Value>,
    /// Checked against the event's JSON Schema; `{}` when absent.
    #[serde(default = "empty_object")]
    pub payload: Value,
    /// Default `full`.
    pub routing: Option<Routing>,
    pub target: Option<JourneyTarget>,
}

/// The body of `POST /conversations/:id/intermediate-messages` (emitIntermediateMessage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntermediateMessageBody {
    /// Not empty; at most 32768 characters.
    #[schema(min_length = 1, max_length = 32768, pattern = r"\S")]
    pub text: String,
    /// Whether a language model sees it in later turns (default true).
    pub visible_to_model: Option<bool>,
}

/// The body of `POST /conversations/:id/preambles` (emitGeneratedPreamble).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreambleBody {
    /// At least 1.
    #[schema(minimum = 1)]
    pub max_words: Option<u32>,
    pub purpose: Option<String>,
}

/// The body of `POST /conversations/:id/compact` (compactConversation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactBody {
    pub from_offset: Option<u64>,
    /// Not below `fromOffset`.
    pub to_offset: Option<u64>,
    pub schema_version: Option<String>,
}

/// The body of `POST /conversations/:id/close` (closeConversation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloseBody {
    pub reason: Option<String>,
}

/// The body of `POST /conversations/:id/handoff` (requestHandoff).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffBody {
    /// Why a person should take over; not empty; at most 32768 characters.
    #[schema(min_length = 1, max_length = 32768, pattern = r"\S")]
    pub reason: String,
    pub summary: Option<String>,
    pub payload: Option<Value>,
}

/// The body of `POST /conversations/:id/resume` (resumeConversation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeBody {
    pub reason: Option<String>,
    pub payload: Option<Value>,
}

/// `{"event": …}`: the one event an operation appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventResult {
    pub event: RuntimeEvent,
}

/// `{"events": […]}`: events in offset order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventsResult {
    pub events: Vec<RuntimeEvent>,
}

/// What a journey event did: its own event, everything the journeys then appended, and
/// the journey state after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JourneyEventResult {
    pub event: RuntimeEvent,
    pub events: Vec<RuntimeEvent>,
    pub snapshot: Snapshot,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PreambleResult {
    pub events: Vec<RuntimeEvent>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CompactResult {
    pub events: Vec<RuntimeEvent>,
    pub snapshot: Snapshot,
    /// The summary kept in the snapshot.
    pub summary: Value,
}

/// A lifecycle change: the conversation after it and the event that records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LifecycleResult {
    pub conversation: Conversation,
    pub event: RuntimeEvent,
}

/// A message as replay shows it, rebuilt from the `message` events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayMessage {
    pub id: String,
    /// `user`, `assistant` or `system`.
    pub role: String,
    pub text: String,
    pub offset: u64,
    pub aborted: bool,
    pub intermediate: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A conversation rebuilt from its log, a page of events at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayResult {
    pub conversation: Conversation,
    /// The page's events, in offset order.
    pub events: Vec<RuntimeEvent>,
    /// The messages of the page's events.
    pub messages: Vec<ReplayMessage>,
    /// The prompts open now that were opened after `afterOffset` (at most 1000), whatever
    /// the page holds: the conversation's state, not a page of its log.
    pub open_prompts: Vec<OpenPrompt>,
    pub snapshot: Snapshot,
    /// Present when the log held more events than the page: pass it as `afterOffset` for
    /// the next page. Absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after_offset: Option<u64>,
}
