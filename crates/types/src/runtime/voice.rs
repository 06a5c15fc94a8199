//! Voice: the records a voice start returns (a channel segment, its connection and the socket
//! to talk on), the bodies of the two start operations, and the client events of the
//! `service.voice.v1` socket protocol.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{Conversation, RuntimeEvent};
use crate::{JsonObject, Timestamp};

/// The WebSocket subprotocol of the voice socket.
pub const VOICE_PROTOCOL: &str = "service.voice.v1";

/// The only channel of a voice segment.
pub const VOICE_CHANNEL: &str = "voice";

/// The body of `POST /voice/conversations` (startVoiceConversation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartVoiceConversationInput {
    pub agent_id: Option<String>,
    /// Anything the caller's app wants recorded with the segment.
    pub app: Option<Value>,
    /// Hints about the voice client (its name, platform, audio devices …), kept with the
    /// segment.
    pub client: Option<Value>,
    pub context: Option<Value>,
    /// The conversation's id; one is made (`conv_…`) when absent.
    pub id: Option<String>,
}

/// The body of `POST /conversations/{id}/voice-segments` (startVoiceSegment).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartVoiceSegmentInput {
    pub app: Option<Value>,
    pub client: Option<Value>,
}

/// A stretch of a conversation spent on one channel; a voice segment lasts as long as its
/// socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSegment {
    pub id: String,
    pub conversation_id: String,
    /// Always `voice`.
    pub channel: String,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// Where a voice connection is: its socket token is issued (`pending`), the socket is open
/// (`connected`), or it closed or its token expired unused (`ended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VoiceConnectionStatus {
    Pending,
    Connected,
    Ended,
}

impl VoiceConnectionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VoiceConnectionStatus::Pending => "pending",
            VoiceConnectionStatus::Connected => "connected",
            VoiceConnectionStatus::Ended => "ended",
        }
    }

    pub fn parse(text: &str) -> Option<VoiceConnectionStatus> {
        match text {
            "pending" => Some(VoiceConnectionStatus::Pending),
            "connected" => Some(VoiceConnectionStatus::Connected),
            "ended" => Some(VoiceConnectionStatus::Ended),
            _ => None,
        }
    }
}

/// One connection of a voice segment: the socket and what carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoiceConnection {
    pub id: String,
    pub channel_segment_id: String,
    /// What carries the audio: `websocket` for the `service.voice.v1` socket.
    pub adapter: String,
    pub status: VoiceConnectionStatus,
    /// The speech provider, when one is not Cairn itself (`openai`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_session_id: Option<String>,
    /// When the socket token stops being accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

/// Where and how to open the voice socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoiceSocket {
    /// The socket's full `ws://` or `wss://` URL, token included: a browser's
    /// `new WebSocket(url, "service.voice.v1")` connects with it as it is.
    pub url: String,
    /// The single-use socket credential (also in `url`).
    pub token: String,
    /// Always `service.voice.v1`.
    pub protocol: String,
    pub expires_at: Timestamp,
}

/// What startVoiceConversation and startVoiceSegment return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoiceStartResult {
    pub conversation: Conversation,
    pub channel_segment: ChannelSegment,
    pub connection: VoiceConnection,
    pub socket: VoiceSocket,
    /// The events the start appended (the segment's `voice.segment.started`, and the
    /// conversation's first events when it was created).
    pub events: Vec<RuntimeEvent>,
    /// Where the conversation's events stream (SSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_url: Option<String>,
}

/// A client event of the `service.voice.v1` protocol, as the seed lists them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum VoiceClientEvent {
    #[serde(rename = "session.update")]
    SessionUpdate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<JsonObject>,
    },
    /// Base64 of pcm16, mono, 24 kHz, little-endian.
    #[serde(rename = "input_audio_buffer.append")]
    InputAudioBufferAppend {
        audio: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sequence: Option<f64>,
    },
    #[serde(rename = "input_audio_buffer.commit")]
    InputAudioBufferCommit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "input_audio_buffer.clear")]
    InputAudioBufferClear {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "response.cancel", rename_all = "camelCase")]
    ResponseCancel {
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "event_id")]
        event_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "response_id")]
        response_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio_end_ms: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        played_until_ms: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interrupted_message_id: Option<String>,
    },
    #[serde(rename = "conversation.item.truncate")]
    ConversationItemTruncate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_index: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio_end_ms: Option<f64>,
    },
}

impl VoiceClientEvent {
    /// The client's `event_id`, echoed by an `error` about this event.
    pub fn event_id(&self) -> Option<&str> {
        match self {
            VoiceClientEvent::SessionUpdate { event_id, .. }
            | VoiceClientEvent::InputAudioBufferAppend { event_id, .. }
            | VoiceClientEvent::InputAudioBufferCommit { event_id }
            | VoiceClientEvent::InputAudioBufferClear { event_id }
            | VoiceClientEvent::ResponseCancel { event_id, .. }
            | VoiceClientEvent::ConversationItemTruncate { event_id, .. } => event_id.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn client_events_parse_with_the_seed_names() {
        let cancel: VoiceClientEvent = serde_json::from_value(json!({
            "type": "response.cancel", "event_id": "e1", "response_id": "resp_1",
            "playedUntilMs": 1200, "interruptedMessageId": "msg_1"
        }))
        .unwrap();
        assert_eq!(cancel.event_id(), Some("e1"));
        let VoiceClientEvent::ResponseCancel { played_until_ms, response_id, .. } = cancel else {
            panic!("not a cancel")
        };
        assert_eq!((played_until_ms, response_id.as_deref()), (Some(1200.0), Some("resp_1")));

        let truncate: VoiceClientEvent = serde_json::from_value(json!({
            "type": "conversation.item.truncate", "item_id": "msg_1", "content_index": 0,
            "audio_end_ms": 300
        }))
        .unwrap();
        assert!(matches!(truncate, VoiceClientEvent::ConversationItemTruncate { .. }));
        assert!(
            serde_json::from_value::<VoiceClientEvent>(
                json!({"type": "input_audio_buffer.append"})
            )
            .is_err()
        );
        assert!(serde_json::from_value::<VoiceClientEvent>(json!({"type": "nope"})).is_err());
    }
}
