//! Channel events: what channels (a web widget, a phone provider, a scheduler, an operator
//! console) submit to `POST /channel-events`, how the variant is told, and what makes two
//! submissions the same. (The `event` envelope is merged over the top level by the
//! handler before the body is read as a [`ChannelEventInput`].)

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::JsonObject;

use super::{ChannelInput, Conversation, CreateConversationInput, RuntimeEvent};

/// The kinds of channel event (`kind` or `nature` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Inbound,
    Outbound,
    Internal,
}

/// The body of `POST /channel-events`, after the envelope is merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
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
    #[schema(value_type = Option<Object>)]
    pub external_object_ids: Option<JsonObject>,
    pub handling: Option<Value>,
    pub id: Option<String>,
    pub idempotency_key: Option<String>,
    pub identity: Option<Value>,
    pub identity_key: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub identity_metadata: Option<JsonObject>,
    pub identity_stream_id: Option<String>,
    pub intent: Option<Value>,
    pub kind: Option<ChannelEventNature>,
    pub message: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<JsonObject>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SourceType {
    Application,
    ProviderAdapter,
    ScheduleAdapter,
    OperatorSurface,
}

/// The seed's input builders: one constructor per kind of channel event, the rest of the
/// fields left empty (set them on the returned value, or with the setters below).
impl ChannelEventInput {
    /// A channel event of any kind on `channel` (createChannelEventInput).
    pub fn new(kind: ChannelEventNature, channel: impl Into<ChannelInput>) -> ChannelEventInput {
        ChannelEventInput {
            kind: Some(kind),
            channel: Some(channel.into()),
            ..ChannelEventInput::default()
        }
    }

    /// A message someone sent on `channel` (createMessageChannelEventInput).
    pub fn message(channel: impl Into<ChannelInput>, text: impl Into<String>) -> ChannelEventInput {
        ChannelEventInput {
            text: Some(text.into()),
            direction: Some(Direction::Inbound),
            ..ChannelEventInput::new(ChannelEventNature::Message, channel)
        }
    }

    /// An object a provider reported, such as a delivery receipt
    /// (createProviderObjectChannelEventInput).
    pub fn provider_object(
        channel: impl Into<ChannelInput>,
        provider: impl Into<String>,
        object: Value,
    ) -> ChannelEventInput {
        ChannelEventInput {
            provider: Some(provider.into()),
            provider_object: Some(object),
            ..ChannelEventInput::new(ChannelEventNature::ProviderObject, channel)
        }
    }

    /// A finished turn of a voice call (createVoiceTurnChannelEventInput); the channel is
    /// `voice`.
    pub fn voice_turn(transcript: impl Into<String>) -> ChannelEventInput {
        ChannelEventInput {
            transcript: Some(transcript.into()),
            ..ChannelEventInput::new(ChannelEventNature::VoiceTurn, "voice")
        }
    }

    /// A request to contact someone on `channel` (createOutboundContactChannelEventInput).
    pub fn outbound_contact(channel: impl Into<ChannelInput>) -> ChannelEventInput {
        ChannelEventInput {
            direction: Some(Direction::Outbound),
            ..ChannelEventInput::new(ChannelEventNature::OutboundContact, channel)
        }
    }

    /// An event a scheduler fires (createScheduledChannelEventInput).
    pub fn scheduled(channel: impl Into<ChannelInput>) -> ChannelEventInput {
        ChannelEventInput::new(ChannelEventNature::Scheduled, channel)
    }

    /// What became of an output sent on `channel` (createChannelOutputResolutionEventInput).
    pub fn output_resolution(
        channel: impl Into<ChannelInput>,
        status: impl Into<String>,
    ) -> ChannelEventInput {
        ChannelEventInput {
            status: Some(status.into()),
            ..ChannelEventInput::new(ChannelEventNature::OutputResolution, channel)
        }
    }

    /// A conversation handed to `channel`, e.g. from the web to a phone line
    /// (createChannelHandoffEventInput).
    pub fn handoff(channel: impl Into<ChannelInput>) -> ChannelEventInput {
        ChannelEventInput::new(ChannelEventNature::Handoff, channel)
    }

    /// An operator's review of a handoff (createChannelHandoffReviewEventInput).
    pub fn handoff_review(channel: impl Into<ChannelInput>) -> ChannelEventInput {
        ChannelEventInput::new(ChannelEventNature::HandoffReview, channel)
    }

    /// The conversation the event belongs to (a new one is created when absent).
    pub fn in_conversation(mut self, conversation_id: impl Into<String>) -> ChannelEventInput {
        self.conversation_id = Some(conversation_id.into());
        self
    }

    /// What makes a redelivery the same event: it is applied once.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> ChannelEventInput {
        self.idempotency_key = Some(key.into());
        self
    }
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
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
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<JsonObject>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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

    #[test]
    fn builders_make_valid_events_of_their_kind() {
        let message = ChannelEventInput::message("sms", "hi").in_conversation("conv_1");
        assert_eq!(message.validate(), Ok(ChannelEventNature::Message));
        assert_eq!(message.conversation_id.as_deref(), Some("conv_1"));
        assert_eq!(
            ChannelEventInput::voice_turn("hello").validate(),
            Ok(ChannelEventNature::VoiceTurn)
        );
        let receipt = ChannelEventInput::provider_object("sms", "twilio", json!({"sid": "SM1"}));
        assert_eq!(receipt.validate(), Ok(ChannelEventNature::ProviderObject));
        for (input, kind) in [
            (ChannelEventInput::outbound_contact("email"), ChannelEventNature::OutboundContact),
            (ChannelEventInput::scheduled("web"), ChannelEventNature::Scheduled),
            (
                ChannelEventInput::output_resolution("sms", "delivered"),
                ChannelEventNature::OutputResolution,
            ),
            (ChannelEventInput::handoff("voice"), ChannelEventNature::Handoff),
            (ChannelEventInput::handoff_review("web"), ChannelEventNature::HandoffReview),
        ] {
            assert_eq!(input.validate(), Ok(kind));
        }
        let body = serde_json::to_value(ChannelEventInput::message("web", "hi")).unwrap();
        let back: ChannelEventInput = serde_json::from_value(body).unwrap();
        assert_eq!(back.kind, Some(ChannelEventNature::Message));
    }
}
