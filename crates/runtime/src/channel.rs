//! Channel events: what channels (a web widget, a phone provider, a scheduler, an operator
//! console) submit to `POST /channel-events`, how the `event` envelope merges over the
//! top-level fields, how the variant is told, and what makes two submissions the same.

use cairn_types::{Conversation, RuntimeEvent};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::runtime::{ChannelInput, CreateConversationInput};

/// The kinds of channel event (`kind` or `nature` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelEventNature {
    Message,
    ProviderObject,
    VoiceTurn,
    OutboundContact,
    Scheduled,
    OutputResolution,
    Handoff,
    HandoffReview,
}

impl ChannelEventNature {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelEventNature::Message => "message",
            ChannelEventNature::ProviderObject => "provider-object",
            ChannelEventNature::VoiceTurn => "voice-turn",
            ChannelEventNature::OutboundContact => "outbound-contact",
            ChannelEventNature::Scheduled => "scheduled",
            ChannelEventNature::OutputResolution => "output-resolution",
            ChannelEventNature::Handoff => "handoff",
            ChannelEventNature::HandoffReview => "handoff-review",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Inbound,
    Outbound,
    Internal,
}

/// Fields the `event` envelope may carry; it is merged over the top level.
const ENVELOPE_FIELDS: &[&str] = &[
    "actor",
    "agentId",
    "attachments",
    "body",
    "channel",
    "conversationId",
    "dedupeKey",
    "direction",
    "id",
    "idempotencyKey",
    "identity",
    "identityKey",
    "identityMetadata",
    "identityStreamId",
    "intent",
    "kind",
    "message",
    "metadata",
    "nature",
    "occurredAt",
    "payload",
    "providerObject",
    "raw",
    "sequence",
    "source",
    "status",
    "subject",
    "summary",
    "text",
    "turn",
];

/// The body of `POST /channel-events`, after the envelope is merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelEventInput {
    pub actor: Option<Value>,
    pub agent_id: Option<String>,
    pub app: Option<Value>,
    pub attachments: Option<Vec<Value>>,
    pub binding: Option<Value>,
    pub body: Option<String>,
    pub channel: Option<ChannelInput>,
    pub conversation_context: Option<Value>,
    pub conversation_id: Option<String>,
    pub create_conversation: Option<CreateConversationInput>,
    pub dedupe_key: Option<String>,
    pub delivery_id: Option<String>,
    pub direction: Option<Direction>,
    pub event_id: Option<String>,
    pub external_object_ids: Option<Map<String, Value>>,
    pub handling: Option<Value>,
    pub id: Option<String>,
    pub idempotency_key: Option<String>,
    pub identity: Option<Value>,
    pub identity_key: Option<String>,
    pub identity_metadata: Option<Map<String, Value>>,
    pub identity_stream_id: Option<String>,
    pub intent: Option<Value>,
    pub kind: Option<ChannelEventNature>,
    pub message: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub nature: Option<ChannelEventNature>,
    pub occurred_at: Option<String>,
    pub payload: Option<Value>,
    pub provider: Option<String>,
    pub provider_object: Option<Value>,
    pub provider_package_id: Option<String>,
    pub raw: Option<Value>,
    pub received_at: Option<String>,
    pub sequence: Option<Value>,
    pub source: Option<Value>,
    pub source_id: Option<String>,
    pub source_type: Option<SourceType>,
    pub status: Option<String>,
    pub stream_id: Option<String>,
    pub subject: Option<String>,
    pub summary: Option<String>,
    pub text: Option<String>,
    pub turn: Option<Value>,
    pub verified: Option<bool>,
    // Variant fields.
    pub transcript: Option<String>,
    pub from_channel: Option<ChannelInput>,
    pub reason: Option<String>,
    pub reason_code: Option<String>,
    pub reason_label: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceType {
    Application,
    ProviderAdapter,
    ScheduleAdapter,
    OperatorSurface,
}

/// Merges the `event` envelope over the top-level fields of a channel event body: a field
/// present in the envelope replaces the top-level one, except `metadata` and
/// `identityMetadata`, whose keys are merged (the envelope's win). Fields the envelope may
/// not carry are refused.
pub fn merge_envelope(mut body: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let Some(envelope) = body.remove("event") else {
        return Ok(body);
    };
    let envelope = match envelope {
        Value::Object(envelope) => envelope,
        Value::Null => return Ok(body),
        _ => return Err("event: the envelope must be a JSON object".to_owned()),
    };
    for (field, value) in envelope {
        if !ENVELOPE_FIELDS.contains(&field.as_str()) {
            return Err(format!("event.{field}: not a field the `event` envelope may carry"));
        }
        match (body.get_mut(&field), value) {
            (Some(Value::Object(top)), Value::Object(inner))
                if field == "metadata" || field == "identityMetadata" =>
            {
                top.extend(inner);
            }
            (_, value) => {
                body.insert(field, value);
            }
        }
    }
    Ok(body)
}

impl ChannelEventInput {
    /// The variant: `kind` or `nature`, else a message when there is text to read.
    pub fn nature(&self) -> Result<ChannelEventNature, String> {
        match (self.kind, self.nature) {
            (Some(kind), Some(nature)) if kind != nature => {
                Err(format!("kind `{}` and nature `{}` disagree", kind.as_str(), nature.as_str()))
            }
            (Some(nature), _) | (_, Some(nature)) => Ok(nature),
            (None, None) if self.message_text().is_some() => Ok(ChannelEventNature::Message),
            (None, None) => {
                Err("kind: say which kind of channel event this is (e.g. `message`)".to_owned())
            }
        }
    }

    /// The text a person wrote or said: `text`, `message`, `body`, or a voice `transcript`.
    pub fn message_text(&self) -> Option<&str> {
        [&self.text, &self.message, &self.body, &self.transcript]
            .into_iter()
            .find_map(|text| text.as_deref())
    }

    /// What makes a redelivery the same event: `idempotencyKey`, else `dedupeKey`, else the
    /// provider with its `eventId`.
    pub fn idempotency_key(&self) -> Option<String> {
        if let Some(key) = &self.idempotency_key {
            return Some(format!("key:{key}"));
        }
        if let Some(key) = &self.dedupe_key {
            return Some(format!("dedupe:{key}"));
        }
        match (&self.provider, &self.event_id) {
            (Some(provider), Some(event_id)) => Some(format!("provider:{provider}:{event_id}")),
            _ => None,
        }
    }

    /// Checks the variant's required fields.
    pub fn validate(&self) -> Result<ChannelEventNature, String> {
        let nature = self.nature()?;
        if nature != ChannelEventNature::VoiceTurn && self.channel.is_none() {
            return Err(format!("channel: required for a `{}` channel event", nature.as_str()));
        }
        if nature == ChannelEventNature::Message {
            if self.message_text().is_none() {
                return Err("text: required for a `message` channel event".to_owned());
            }
            if self.direction == Some(Direction::Internal) {
                return Err("direction: a message is `inbound` or `outbound`".to_owned());
            }
        }
        Ok(nature)
    }
}

/// The result of `POST /channel-events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEventResult {
    pub conversation: Conversation,
    /// The events this submission appended (for a repeat: those of the first delivery).
    pub events: Vec<RuntimeEvent>,
    /// The assistant's reply, when the event was a message that got one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_journey_id: Option<String>,
    /// True when this was a redelivery of an event applied before.
    pub duplicate: bool,
    /// True when the conversation was created by this event.
    pub created: bool,
}

/// The body of `POST /channel-outputs/resolve`: what became of something the runtime sent
/// out on a channel (the event that carried it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveOutputInput {
    pub conversation_id: String,
    /// The id of the event whose output is resolved (usually an assistant `message`).
    pub event_id: String,
    /// `delivered`, `read`, `failed`, … as the channel reports it.
    pub status: String,
    pub channel: Option<ChannelInput>,
    pub delivery_id: Option<String>,
    pub provider: Option<String>,
    pub error: Option<String>,
    pub metadata: Option<Map<String, Value>>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn envelope_fields_win_and_metadata_merges() {
        let body = object(json!({
            "text": "top", "channel": "web", "metadata": {"a": 1, "b": 1},
            "event": {"text": "inner", "metadata": {"b": 2}}
        }));
        let merged = merge_envelope(body).unwrap();
        assert_eq!(merged["text"], "inner");
        assert_eq!(merged["channel"], "web");
        assert_eq!(merged["metadata"], json!({"a": 1, "b": 2}));
        assert!(!merged.contains_key("event"));
    }

    #[test]
    fn envelope_refuses_fields_it_may_not_carry() {
        let body = object(json!({"event": {"verified": true}}));
        assert!(merge_envelope(body).unwrap_err().contains("event.verified"));
        assert!(merge_envelope(object(json!({"event": 3}))).is_err());
    }

    #[test]
    fn variant_rules() {
        let input: ChannelEventInput =
            serde_json::from_value(json!({"channel": "sms", "text": "hi"})).unwrap();
        assert_eq!(input.validate(), Ok(ChannelEventNature::Message));
        let input: ChannelEventInput = serde_json::from_value(json!({"text": "hi"})).unwrap();
        assert!(input.validate().unwrap_err().starts_with("channel:"));
        let input: ChannelEventInput =
            serde_json::from_value(json!({"kind": "voice-turn", "transcript": "hello"})).unwrap();
        assert_eq!(input.validate(), Ok(ChannelEventNature::VoiceTurn));
        assert_eq!(input.message_text(), Some("hello"));
        let input: ChannelEventInput =
            serde_json::from_value(json!({"kind": "message", "channel": "web"})).unwrap();
        assert!(input.validate().unwrap_err().starts_with("text:"));
    }

    #[test]
    fn idempotency_keys_in_order_of_precedence() {
        let input: ChannelEventInput = serde_json::from_value(
            json!({"idempotencyKey": "a", "dedupeKey": "b", "provider": "p", "eventId": "e"}),
        )
        .unwrap();
        assert_eq!(input.idempotency_key().as_deref(), Some("key:a"));
        let input: ChannelEventInput =
            serde_json::from_value(json!({"provider": "twilio", "eventId": "SM1"})).unwrap();
        assert_eq!(input.idempotency_key().as_deref(), Some("provider:twilio:SM1"));
        let input: ChannelEventInput = serde_json::from_value(json!({"eventId": "SM1"})).unwrap();
        assert_eq!(input.idempotency_key(), None);
    }
}
