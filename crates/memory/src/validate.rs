//! Input rules, checked before anything is stored. Each failure names the wire field.

use cairn_types::{JsonObject, MAX_CONTENT_BYTES, MemoryPatch, NewMemory};

use crate::{Error, Result};

pub(crate) const MAX_TEXT_BYTES: usize = 16 * 1024;
pub(crate) const MAX_QUERY_BYTES: usize = 4 * 1024;
pub(crate) const MAX_NAME_BYTES: usize = 512;
const MAX_TAGS: usize = 32;
const MAX_TAG_BYTES: usize = 64;
const MAX_METADATA_BYTES: usize = 16 * 1024;
const MAX_LIST_ITEMS: usize = 1000;

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::Invalid { field, reason: reason.into() }
}

/// The character no text may hold: PostgreSQL's `text` cannot store it, so both storage
/// backends refuse it alike, before anything is stored.
const NUL: char = '\u{0}';

fn no_nul(field: &'static str, value: &str) -> Result<()> {
    if value.contains(NUL) {
        return Err(invalid(field, "must not contain the NUL character (U+0000)"));
    }
    Ok(())
}

/// A required, non-blank text of at most `max` bytes, without U+0000.
pub(crate) fn required_text(
    field: &'static str,
    value: Option<String>,
    max: usize,
) -> Result<String> {
    let value = value.ok_or_else(|| invalid(field, "is required"))?;
    if value.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(invalid(field, format!("is {} bytes; the limit is {max}", value.len())));
    }
    no_nul(field, &value)?;
    Ok(value)
}

/// An optional text: when given, it follows the rules of [`required_text`].
pub(crate) fn optional_text(
    field: &'static str,
    value: Option<String>,
    max: usize,
) -> Result<Option<String>> {
    value.map(|value| required_text(field, Some(value), max)).transpose()
}

pub(crate) fn new_memory(mut input: NewMemory) -> Result<NewMemory> {
    input.content = content(input.content)?;
    input.repo = optional_text("repo", input.repo, MAX_NAME_BYTES)?;
    input.source = optional_text("source", input.source, MAX_NAME_BYTES)?;
    input.tags = tags(input.tags)?;
    metadata(&input.metadata)?;
    Ok(input)
}

pub(crate) fn patch(mut patch: MemoryPatch) -> Result<MemoryPatch> {
    if patch.is_empty() {
        return Err(invalid(
            "body",
            "names no change; give at least one of content, scope, status, tags, metadata, archived",
        ));
    }
    patch.content = patch.content.map(content).transpose()?;
    patch.tags = patch.tags.map(tags).transpose()?;
    if let Some(metadata_object) = &patch.metadata {
        metadata(metadata_object)?;
    }
    Ok(patch)
}

fn content(content: String) -> Result<String> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(invalid(
            "content",
            format!("is {} bytes; the limit is {MAX_CONTENT_BYTES} (64 KiB)", content.len()),
        ));
    }
    required_text("content", Some(content), MAX_CONTENT_BYTES)
}

/// Tags are trimmed; repeats are dropped.
fn tags(tags: Vec<String>) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(invalid("tags", format!("has {} tags; the limit is {MAX_TAGS}", tags.len())));
    }
    let mut kept: Vec<String> = Vec::with_capacity(tags.len());
    for tag in tags {
        let tag = tag.trim();
        if tag.is_empty() || tag.len() > MAX_TAG_BYTES {
            return Err(invalid("tags", format!("each tag must be 1 to {MAX_TAG_BYTES} bytes")));
        }
        no_nul("tags", tag)?;
        if !kept.iter().any(|existing| existing == tag) {
            kept.push(tag.to_owned());
        }
    }
    Ok(kept)
}

fn metadata(metadata: &JsonObject) -> Result<()> {
    let size = serde_json::to_string(metadata).map(|text| text.len()).unwrap_or(usize::MAX);
    if size > MAX_METADATA_BYTES {
        return Err(invalid(
            "metadata",
            format!("is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}"),
        ));
    }
    fn check(value: &serde_json::Value) -> Result<()> {
        match value {
            serde_json::Value::String(text) => no_nul("metadata", text),
            serde_json::Value::Array(items) => items.iter().try_for_each(check),
            serde_json::Value::Object(fields) => fields.iter().try_for_each(|(key, value)| {
                no_nul("metadata", key)?;
                check(value)
            }),
            _ => Ok(()),
        }
    }
    metadata.iter().try_for_each(|(key, value)| {
        no_nul("metadata", key)?;
        check(value)
    })
}

/// A list of non-blank strings such as file paths or commands.
pub(crate) fn string_list(field: &'static str, items: Vec<String>) -> Result<Vec<String>> {
    if items.len() > MAX_LIST_ITEMS {
        return Err(invalid(
            field,
            format!("has {} items; the limit is {MAX_LIST_ITEMS}", items.len()),
        ));
    }
    for item in &items {
        if item.trim().is_empty() || item.len() > MAX_TEXT_BYTES {
            return Err(invalid(
                field,
                format!("each item must be non-empty and at most {MAX_TEXT_BYTES} bytes"),
            ));
        }
        no_nul(field, item)?;
    }
    Ok(items)
}

/// File paths: at most 200, each 1 to 1024 bytes.
pub(crate) fn paths(field: &'static str, paths: Vec<String>) -> Result<Vec<String>> {
    const MAX_PATHS: usize = 200;
    const MAX_PATH_BYTES: usize = 1024;
    if paths.len() > MAX_PATHS {
        return Err(invalid(field, format!("has {} paths; the limit is {MAX_PATHS}", paths.len())));
    }
    if paths.iter().any(|path| path.trim().is_empty() || path.len() > MAX_PATH_BYTES) {
        return Err(invalid(
            field,
            format!("each path must be non-empty and at most {MAX_PATH_BYTES} bytes"),
        ));
    }
    paths.iter().try_for_each(|path| no_nul(field, path))?;
    Ok(paths)
}

pub(crate) fn token_budget(budget: Option<u32>) -> Result<u32> {
    let budget = budget.unwrap_or(crate::DEFAULT_TOKEN_BUDGET);
    if budget == 0 || budget > crate::MAX_TOKEN_BUDGET {
        return Err(invalid(
            "tokenBudget",
            format!("must be from 1 to {}", crate::MAX_TOKEN_BUDGET),
        ));
    }
    Ok(budget)
}

#[cfg(test)]
mod tests {
    use cairn_types::Scope;

    use super::*;

    fn memory(content: &str) -> NewMemory {
        NewMemory {
            content: content.to_owned(),
            scope: Scope::User,
            repo: None,
            tags: vec![],
            source: None,
            metadata: JsonObject::default(),
        }
    }

    fn refused_field(result: Result<NewMemory>) -> &'static str {
        match result {
            Err(Error::Invalid { field, reason }) => {
                assert!(reason.contains("U+0000"), "{reason}");
                field
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn no_stored_text_may_hold_a_nul_character() {
        assert!(new_memory(memory("plain text, é and 日本")).is_ok());
        assert_eq!(refused_field(new_memory(memory("a\u{0}b"))), "content");
        let tagged = NewMemory { tags: vec!["ok".into(), "b\u{0}d".into()], ..memory("x") };
        assert_eq!(refused_field(new_memory(tagged)), "tags");
        let repo = NewMemory { repo: Some("re\u{0}po".into()), ..memory("x") };
        assert_eq!(refused_field(new_memory(repo)), "repo");
        let source = NewMemory { source: Some("\u{0}".into()), ..memory("x") };
        assert_eq!(refused_field(new_memory(source)), "source");
        for metadata in [
            serde_json::json!({"deep": {"list": ["fine", "not\u{0}fine"]}}),
            serde_json::json!({"key\u{0}": 1}),
        ] {
            let serde_json::Value::Object(metadata) = metadata else { unreachable!() };
            let with = NewMemory { metadata, ..memory("x") };
            assert_eq!(refused_field(new_memory(with)), "metadata");
        }
        let patched = patch(MemoryPatch { content: Some("\u{0}".into()), ..Default::default() });
        assert!(matches!(patched, Err(Error::Invalid { field: "content", .. })));
        let listed = string_list("files", vec!["a.rs".into(), "b\u{0}.rs".into()]);
        assert!(matches!(listed, Err(Error::Invalid { field: "files", .. })));
    }
}
