//! Templates: `{{a.b.c}}` paths of a conversation's context, rendered into text and JSON.

use serde_json::Value;

/// Replaces each `{{a.b.c}}` with that dotted path of `context` (array elements by index);
/// a missing value renders as nothing, strings as themselves, other values as JSON.
pub fn render(template: &str, context: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(length) = rest[open + 2..].find("}}") else { break };
        out.push_str(&rest[..open]);
        let path = rest[open + 2..open + 2 + length].trim();
        match lookup(context, path) {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => out.push_str(text),
            Some(value) => out.push_str(&value.to_string()),
        }
        rest = &rest[open + 2 + length + 2..];
    }
    out.push_str(rest);
    out
}

fn lookup<'v>(context: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(context, |value, key| match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Renders the templates inside every string of `value`.
pub(super) fn render_value(value: &Value, context: &Value) -> Value {
    match value {
        Value::String(template) => Value::String(render(template, context)),
        Value::Array(items) => items.iter().map(|item| render_value(item, context)).collect(),
        Value::Object(map) => {
            map.iter().map(|(key, item)| (key.clone(), render_value(item, context))).collect()
        }
        other => other.clone(),
    }
}
