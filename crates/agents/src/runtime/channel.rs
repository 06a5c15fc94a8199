//! Channel events: the idempotency key of a delivery, and a channel event's data as the
//! events and results it makes.

use cairn_store::Commit;
use serde_json::{Map, Value, json};

use cairn_runtime::*;

use super::commit::TurnResult;
use super::turn::message_data;

/// A channel event's idempotency key and what it was used for: a digest of the event (less
/// what differs between deliveries of one event: `receivedAt`, `deliveryId`, `verified`).
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    pub(super) key: String,
    pub(super) fingerprint: String,
}

impl Delivery {
    pub(super) fn of(input: &ChannelEventInput) -> Option<Delivery> {
        let key = input.idempotency_key()?;
        let event = ChannelEventInput {
            received_at: None,
            delivery_id: None,
            verified: None,
            ..input.clone()
        };
        let bytes = serde_json::to_vec(&event).expect("channel events serialize");
        let fingerprint =
            format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
        Some(Delivery { key, fingerprint })
    }

    pub(super) fn stamp(delivery: Option<&Delivery>, commit: &mut Commit) {
        commit.idempotency_key = delivery.map(|delivery| delivery.key.clone());
        commit.idempotency_fingerprint = delivery.map(|delivery| delivery.fingerprint.clone());
    }
}

/// The non-null fields of a channel event, for its event's data.
pub(super) fn channel_data(input: &ChannelEventInput, nature: ChannelEventNature) -> Value {
    let mut data = match serde_json::to_value(input) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    data.retain(|key, value| !value.is_null() && key != "createConversation");
    data.insert("nature".into(), json!(nature.as_str()));
    Value::Object(data)
}

/// A channel event's data with the fields of a `message` event over it.
pub(super) fn with_message(channel_data: &Value, role: &str, text: &str) -> Value {
    let mut data = channel_data.clone();
    if let (Value::Object(data), Value::Object(message)) = (&mut data, message_data(role, text)) {
        data.extend(message);
    }
    data
}

pub(super) fn channel_result(result: TurnResult, created: bool) -> ChannelEventResult {
    ChannelEventResult {
        conversation: result.conversation,
        events: result.events,
        text: Some(result.text).filter(|text| !text.is_empty()),
        active_journey_id: result.active_journey_id,
        duplicate: result.duplicate,
        created,
    }
}
