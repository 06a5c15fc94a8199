//! The `event` envelope of `POST /channel-events`: channels may wrap an event's fields in
//! `event`, which is merged over the top-level fields before the body is read as a
//! [`ChannelEventInput`](cairn_types::runtime::ChannelEventInput).

use serde_json::{Map, Value};

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

    use proptest::prelude::*;

    fn field() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(ENVELOPE_FIELDS.to_vec()).prop_map(str::to_owned),
            Just("event".to_owned()),
            "[a-z]{1,8}",
        ]
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map(field(), inner, 0..5)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any body merges or is refused with a reason; a merged body has no envelope left.
        #[test]
        fn fuzz_envelope_merge(body in prop::collection::btree_map(field(), json(), 0..8)) {
            let body: Map<String, Value> = body.into_iter().collect();
            match merge_envelope(body) {
                Ok(merged) => prop_assert!(!merged.contains_key("event")),
                Err(reason) => prop_assert!(reason.starts_with("event")),
            }
        }
    }
}
