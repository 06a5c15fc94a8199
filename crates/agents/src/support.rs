//! Support references: the memories an answer rests on, as links a chat client can show.

use cairn_types::Memory;
use serde::{Deserialize, Serialize};

/// A memory an answer used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupportReference {
    /// The memory's id.
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The part of the memory shown to the reader.
    pub excerpt: String,
    pub score: f64,
}

/// A link to show under an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupportSourceLink {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

const LABEL_CHARS: usize = 60;
const EXCERPT_CHARS: usize = 280;

impl SupportReference {
    /// The reference to a memory: labelled by its `title` metadata, else its source, else
    /// its first words; linked by its `url` metadata or a source that is a URL.
    pub fn from_memory(memory: &Memory, score: f64) -> SupportReference {
        let text = |key: &str| memory.metadata.get(key).and_then(|value| value.as_str());
        let source_url = memory.source.as_deref().filter(|source| source.contains("://"));
        let label = text("title")
            .or(memory.source.as_deref())
            .map(|label| shorten(label, LABEL_CHARS))
            .unwrap_or_else(|| shorten(&memory.content, LABEL_CHARS));
        SupportReference {
            id: memory.id.clone(),
            label,
            url: text("url").or(source_url).map(str::to_owned),
            excerpt: shorten(&memory.content, EXCERPT_CHARS),
            score,
        }
    }
}

/// The distinct links of `references`, in order (one per URL, or per memory without one).
pub fn collect_support_source_links(references: &[SupportReference]) -> Vec<SupportSourceLink> {
    let mut links: Vec<SupportSourceLink> = Vec::new();
    for reference in references {
        let seen = links.iter().any(|link| match (&link.url, &reference.url) {
            (Some(a), Some(b)) => a == b,
            _ => link.id == reference.id,
        });
        if !seen {
            links.push(SupportSourceLink {
                id: reference.id.clone(),
                label: reference.label.clone(),
                url: reference.url.clone(),
            });
        }
    }
    links
}

/// `Sources: [1] label (url); [2] label`, or an empty string without references.
pub fn format_support_references(references: &[SupportReference]) -> String {
    let links = collect_support_source_links(references);
    if links.is_empty() {
        return String::new();
    }
    let items: Vec<String> = links
        .iter()
        .enumerate()
        .map(|(index, link)| match &link.url {
            Some(url) => format!("[{}] {} ({url})", index + 1, link.label),
            None => format!("[{}] {}", index + 1, link.label),
        })
        .collect();
    format!("Sources: {}", items.join("; "))
}

/// The text cut at a word boundary near `limit` characters, with `…` when cut.
pub(crate) fn shorten(text: &str, limit: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= limit {
        return text;
    }
    let cut: String = text.chars().take(limit).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{}…", cut.trim_end_matches([',', '.', ';', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(id: &str, label: &str, url: Option<&str>) -> SupportReference {
        SupportReference {
            id: id.into(),
            label: label.into(),
            url: url.map(Into::into),
            excerpt: String::new(),
            score: 1.0,
        }
    }

    #[test]
    fn links_are_distinct_by_url_and_formatted_in_order() {
        let references = [
            reference("mem_1", "Refund policy", Some("https://example.com/refunds")),
            reference("mem_2", "Refund policy (2)", Some("https://example.com/refunds")),
            reference("mem_3", "Shipping times", None),
        ];
        let links = collect_support_source_links(&references);
        assert_eq!(links.len(), 2);
        assert_eq!(
            format_support_references(&references),
            "Sources: [1] Refund policy (https://example.com/refunds); [2] Shipping times"
        );
        assert_eq!(format_support_references(&[]), "");
    }

    #[test]
    fn shorten_cuts_at_words() {
        assert_eq!(shorten("short text", 60), "short text");
        assert_eq!(shorten("one two three four", 12), "one two…");
    }
}
