//! Custom and journey event definitions: a name and a JSON Schema for the payload, compiled
//! once when the handler is built and checked before the runtime sees an event.
//!
//! Schemas are checked with `jsonschema` under the default-on `json-schema` feature. An
//! embedder who turns it off still gets the names checked, and the handler refuses to build
//! with a definition whose schema is anything but `true` or `{}`, rather than accept
//! payloads it cannot check.

use std::collections::HashMap;

use cairn_http::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A named event and the JSON Schema its payload must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventDefinition {
    pub name: String,
    /// Any JSON Schema (draft 2020-12 unless `$schema` says otherwise); `true` takes anything.
    #[serde(default = "accept_anything")]
    pub schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl EventDefinition {
    /// An event whose payload may be anything.
    pub fn any_payload(name: impl Into<String>) -> EventDefinition {
        EventDefinition { name: name.into(), schema: accept_anything(), description: None }
    }
}

fn accept_anything() -> Value {
    Value::Bool(true)
}

/// The `customEvents` and `journeyEvents` a deployment defines, as an events file holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventDefinitions {
    #[serde(default)]
    pub custom_events: Vec<EventDefinition>,
    #[serde(default)]
    pub journey_events: Vec<EventDefinition>,
}

#[cfg(feature = "json-schema")]
type Validator = jsonschema::Validator;

/// Without the `json-schema` feature only schemas that accept anything are allowed.
#[cfg(not(feature = "json-schema"))]
type Validator = ();

/// Compiled definitions of one kind (custom or journey events).
pub(crate) struct EventSchemas {
    kind: &'static str,
    validators: HashMap<String, Validator>,
}

impl EventSchemas {
    pub(crate) fn compile(
        kind: &'static str,
        definitions: &[EventDefinition],
    ) -> Result<EventSchemas, String> {
        let mut validators = HashMap::new();
        for definition in definitions {
            let validator = compile(&definition.schema).map_err(|error| {
                format!("{kind}: the schema of `{}` is not valid: {error}", definition.name)
            })?;
            if validators.insert(definition.name.clone(), validator).is_some() {
                return Err(format!("{kind}: `{}` is defined twice", definition.name));
            }
        }
        Ok(EventSchemas { kind, validators })
    }

    /// Checks that `name` is defined and `payload` matches its schema (422 otherwise, naming
    /// every place the payload fails).
    pub(crate) fn validate(&self, name: &str, payload: &Value) -> Result<(), ApiError> {
        let Some(validator) = self.validators.get(name) else {
            let mut known: Vec<&str> = self.validators.keys().map(String::as_str).collect();
            known.sort_unstable();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Err(ApiError::validation(format!(
                "eventName: `{name}` is not one of the defined {} ({known})",
                self.kind
            )));
        };
        let problems = problems(validator, payload);
        if problems.is_empty() { Ok(()) } else { Err(ApiError::validation(problems.join("; "))) }
    }
}

#[cfg(feature = "json-schema")]
fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::validator_for(schema).map_err(|error| error.to_string())
}

#[cfg(not(feature = "json-schema"))]
fn compile(schema: &Value) -> Result<Validator, String> {
    let accepts_anything = match schema {
        Value::Bool(true) => true,
        Value::Object(object) => object.is_empty(),
        _ => false,
    };
    if accepts_anything {
        Ok(())
    } else {
        Err("payload schemas need cairn-runtime's `json-schema` feature; without it a \
             definition's schema must be `true` or `{}`"
            .to_owned())
    }
}

#[cfg(feature = "json-schema")]
fn problems(validator: &Validator, payload: &Value) -> Vec<String> {
    validator
        .iter_errors(payload)
        .map(|error| {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "payload".to_owned() } else { format!("payload{at}") };
            format!("{at}: {error}")
        })
        .collect()
}

#[cfg(not(feature = "json-schema"))]
fn problems(_validator: &Validator, _payload: &Value) -> Vec<String> {
    Vec::new()
}

#[cfg(all(test, feature = "json-schema"))]
mod tests {
    use serde_json::json;

    use super::*;

    fn schemas() -> EventSchemas {
        let definition = EventDefinition {
            name: "order.updated".into(),
            schema: json!({
                "type": "object",
                "required": ["orderId"],
                "properties": {"orderId": {"type": "string"}, "total": {"type": "number"}}
            }),
            description: None,
        };
        EventSchemas::compile("customEvents", &[definition]).unwrap()
    }

    #[test]
    fn payload_must_match_the_schema() {
        let schemas = schemas();
        assert!(schemas.validate("order.updated", &json!({"orderId": "o1"})).is_ok());
        let error = schemas.validate("order.updated", &json!({"orderId": 7})).unwrap_err();
        assert!(error.message().contains("payload/orderId"), "{}", error.message());
        let error = schemas.validate("order.updated", &json!({})).unwrap_err();
        assert!(error.message().contains("orderId"), "{}", error.message());
    }

    #[test]
    fn undefined_names_are_refused_with_the_known_ones() {
        let error = schemas().validate("order.deleted", &json!({})).unwrap_err();
        assert!(error.message().contains("order.updated"), "{}", error.message());
    }

    #[test]
    fn invalid_schemas_and_duplicates_fail_at_build() {
        let bad =
            EventDefinition { name: "x".into(), schema: json!({"type": 12}), description: None };
        assert!(EventSchemas::compile("customEvents", &[bad]).is_err());
        let one = EventDefinition::any_payload("x");
        assert!(EventSchemas::compile("customEvents", &[one.clone(), one]).is_err());
    }
}
