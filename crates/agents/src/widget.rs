//! What a widget's output must be, given the prompt's input: required form fields, their
//! types, ranges and options, a rating within its scale, a choice among its options. The
//! built-in kinds are the ones the chat widget renders (`form`, `rating`, `choice`, `date`,
//! `confirm`, see `clients/react/src/chat/renderers.tsx`); another kind's output is taken as
//! it is. Pure, so the runtime checks a submission before it changes anything.

use serde_json::{Map, Value};

/// Checks `output` against the `input` of a `kind` widget: `Err` names the field at fault
/// (`output.email: …`).
pub fn check_output(kind: &str, input: &Value, output: &Value) -> Result<(), String> {
    let fields = || {
        output.as_object().ok_or_else(|| format!("output: a `{kind}` widget's output is an object"))
    };
    match kind {
        "form" => check_form(input, fields()?),
        "rating" => {
            let low = input.get("min").and_then(Value::as_f64).unwrap_or(1.0);
            let high = input.get("max").and_then(Value::as_f64).unwrap_or(5.0);
            let value = required(fields()?, "value")?;
            match value.as_f64() {
                Some(number) if number.fract() == 0.0 && (low..=high).contains(&number) => Ok(()),
                _ => Err(format!("output.value: a whole number from {low} to {high}, not {value}")),
            }
        }
        "choice" => {
            let value = required(fields()?, "value")?;
            check_option(input.get("options"), "value", value)
        }
        "date" => {
            let value = required(fields()?, "date")?;
            let date = value
                .as_str()
                .ok_or_else(|| format!("output.date: a date as YYYY-MM-DD, not {value}"))?;
            check_date("date", date, input)
        }
        "confirm" => match required(fields()?, "confirmed")? {
            Value::Bool(_) => Ok(()),
            other => Err(format!("output.confirmed: true or false, not {other}")),
        },
        _ => Ok(()),
    }
}

/// A field of a form's input: a name (a required text field) or `{name, type?, required?,
/// options?, min?, max?}`.
struct Field<'a> {
    name: &'a str,
    kind: &'a str,
    required: bool,
    spec: Option<&'a Value>,
}

fn form_fields(input: &Value) -> Vec<Field<'_>> {
    let Some(fields) = input.get("fields").and_then(Value::as_array) else { return Vec::new() };
    fields
        .iter()
        .filter_map(|field| match field {
            Value::String(name) => {
                Some(Field { name, kind: inferred_kind(name), required: true, spec: None })
            }
            Value::Object(spec) => {
                let name = spec.get("name")?.as_str()?;
                Some(Field {
                    name,
                    kind: spec.get("type").and_then(Value::as_str).unwrap_or(inferred_kind(name)),
                    required: spec.get("required") != Some(&Value::Bool(false)),
                    spec: Some(field),
                })
            }
            _ => None,
        })
        .collect()
}

/// The names of a form's fields, in order (a widget asked for in words lists them).
pub(crate) fn form_field_names(input: &Value) -> Vec<&str> {
    form_fields(input).into_iter().map(|field| field.name).collect()
}

/// The type a field gets from its name alone, as the chat widget infers it.
fn inferred_kind(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if lower.contains("email") {
        "email"
    } else if lower == "date" || lower.ends_with("date") {
        "date"
    } else {
        "text"
    }
}

fn check_form(input: &Value, output: &Map<String, Value>) -> Result<(), String> {
    let fields = form_fields(input);
    if fields.is_empty() {
        return Ok(());
    }
    // Fields the form did not ask for are kept as they are (a client may add its own).
    for field in &fields {
        let value = output.get(field.name).filter(|value| !is_blank(value));
        let Some(value) = value else {
            if field.required {
                return Err(format!("output.{}: required", field.name));
            }
            continue;
        };
        check_field(field, value)?;
    }
    Ok(())
}

fn check_field(field: &Field<'_>, value: &Value) -> Result<(), String> {
    let name = field.name;
    match field.kind {
        "number" | "integer" => {
            let number = value
                .as_f64()
                .or_else(|| value.as_str()?.trim().parse::<f64>().ok())
                .filter(|number| number.is_finite())
                .ok_or_else(|| format!("output.{name}: a number, not {value}"))?;
            if field.kind == "integer" && number.fract() != 0.0 {
                return Err(format!("output.{name}: a whole number, not {value}"));
            }
            let spec = field.spec.unwrap_or(&Value::Null);
            let low = spec.get("min").and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY);
            let high = spec.get("max").and_then(Value::as_f64).unwrap_or(f64::INFINITY);
            if !(low..=high).contains(&number) {
                return Err(format!("output.{name}: {number} is outside {low} to {high}"));
            }
        }
        "checkbox" | "boolean" => {
            if !value.is_boolean() {
                return Err(format!("output.{name}: true or false, not {value}"));
            }
        }
        kind => {
            let text = value.as_str().ok_or_else(|| format!("output.{name}: text, not {value}"))?;
            if kind == "email" && !is_email(text) {
                return Err(format!("output.{name}: an e-mail address, not {text:?}"));
            }
            if kind == "date" {
                check_date(name, text, field.spec.unwrap_or(&Value::Null))?;
            }
        }
    }
    check_option(field.spec.and_then(|spec| spec.get("options")), name, value)
}

/// `value` is one of `options` (strings or `{value}` objects) when there are options.
fn check_option(options: Option<&Value>, name: &str, value: &Value) -> Result<(), String> {
    let Some(options) = options.and_then(Value::as_array) else { return Ok(()) };
    let allowed = |option: &Value| option.get("value").unwrap_or(option) == value;
    if options.iter().any(allowed) {
        return Ok(());
    }
    Err(format!("output.{name}: {value} is not one of the options"))
}

/// A `YYYY-MM-DD` date within `input.min` / `input.max` (ISO dates compare as text).
fn check_date(name: &str, date: &str, input: &Value) -> Result<(), String> {
    if !is_date(date) {
        return Err(format!("output.{name}: a date as YYYY-MM-DD, not {date:?}"));
    }
    if let Some(min) = input.get("min").and_then(Value::as_str).filter(|min| date < *min) {
        return Err(format!("output.{name}: {date} is before {min}"));
    }
    if let Some(max) = input.get("max").and_then(Value::as_str).filter(|max| date > *max) {
        return Err(format!("output.{name}: {date} is after {max}"));
    }
    Ok(())
}

fn required<'a>(output: &'a Map<String, Value>, name: &str) -> Result<&'a Value, String> {
    output
        .get(name)
        .filter(|value| !value.is_null())
        .ok_or_else(|| format!("output.{name}: required"))
}

fn is_blank(value: &Value) -> bool {
    value.is_null() || value.as_str().is_some_and(|text| text.trim().is_empty())
}

/// One `@` with something on each side and a dot in the domain, no spaces.
pub(crate) fn is_email(text: &str) -> bool {
    let text = text.trim();
    let Some((local, domain)) = text.split_once('@') else { return false };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && !text.contains(char::is_whitespace)
}

/// `YYYY-MM-DD` with a month and day that can exist.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<u32>().ok();
    matches!((number(0..4), number(5..7), number(8..10)), (Some(_), Some(1..=12), Some(1..=31)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check_output;

    #[test]
    fn a_form_needs_its_required_fields_in_their_types() {
        let input = json!({"fields": ["name", "email"]});
        assert_eq!(
            check_output("form", &input, &json!({"name": "Ada", "email": "ada@example.com"})),
            Ok(())
        );
        assert_eq!(
            check_output("form", &input, &json!({"name": "Ada"})),
            Err("output.email: required".to_owned())
        );
        assert_eq!(
            check_output("form", &input, &json!({"name": "Ada", "email": "  "})),
            Err("output.email: required".to_owned())
        );
        let error =
            check_output("form", &input, &json!({"name": "Ada", "email": "ada"})).unwrap_err();
        assert!(error.starts_with("output.email: an e-mail address"), "{error}");
        let error =
            check_output("form", &input, &json!({"name": 7, "email": "a@b.co"})).unwrap_err();
        assert!(error.starts_with("output.name: text"), "{error}");
        assert_eq!(
            check_output("form", &input, &json!({"name": "A", "email": "a@b.co", "x": "1"})),
            Ok(()),
            "fields it did not ask for are the client's"
        );
        let specs = json!({"fields": [
            {"name": "seats", "type": "number", "min": 1, "max": 10},
            {"name": "plan", "options": ["team", {"value": "solo", "label": "Solo"}], "required": false}
        ]});
        assert_eq!(check_output("form", &specs, &json!({"seats": "3", "plan": "solo"})), Ok(()));
        assert_eq!(check_output("form", &specs, &json!({"seats": 3})), Ok(()));
        let error = check_output("form", &specs, &json!({"seats": 11})).unwrap_err();
        assert!(error.starts_with("output.seats: 11 is outside"), "{error}");
        let error = check_output("form", &specs, &json!({"seats": 2, "plan": "gold"})).unwrap_err();
        assert!(error.starts_with("output.plan:"), "{error}");
        assert!(check_output("form", &input, &json!("Ada")).is_err());
    }

    #[test]
    fn ratings_choices_dates_and_confirmations_stay_within_their_input() {
        let scale = json!({"min": 1, "max": 5});
        assert_eq!(check_output("rating", &scale, &json!({"value": 4})), Ok(()));
        for wrong in [
            json!({"value": 9}),
            json!({"value": 0}),
            json!({"value": 2.5}),
            json!({"value": "4"}),
            json!({}),
        ] {
            let error = check_output("rating", &scale, &wrong).unwrap_err();
            assert!(error.starts_with("output.value:"), "{wrong}: {error}");
        }
        let options = json!({"options": ["red", {"value": "blue"}]});
        assert_eq!(check_output("choice", &options, &json!({"value": "blue"})), Ok(()));
        assert!(check_output("choice", &options, &json!({"value": "green"})).is_err());
        let window = json!({"min": "2026-01-01", "max": "2026-12-31"});
        assert_eq!(check_output("date", &window, &json!({"date": "2026-05-04"})), Ok(()));
        assert!(check_output("date", &window, &json!({"date": "2027-01-01"})).is_err());
        assert!(check_output("date", &window, &json!({"date": "2026-13-01"})).is_err());
        assert_eq!(check_output("confirm", &json!({}), &json!({"confirmed": false})), Ok(()));
        assert!(check_output("confirm", &json!({}), &json!({"confirmed": "yes"})).is_err());
        assert_eq!(check_output("map", &json!({}), &json!(["anything"])), Ok(()));
    }
}
