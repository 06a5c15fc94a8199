//! Reading the log back: the language model's recent history, and compaction's summary.

use cairn_store::EventRange;
use cairn_types::RuntimeEvent;
use serde_json::{Value, json};

use cairn_runtime::*;

use super::DefaultRuntime;
use crate::llm::ChatMessage;
use crate::support::shorten;

/// How many earlier messages the language model sees.
const HISTORY_MESSAGES: usize = 20;
/// How many of the newest messages a turn reads to find them: intermediate messages hidden
/// from the model are skipped, so a few more than it sees, and never the whole log.
const HISTORY_READ: u32 = 2 * HISTORY_MESSAGES as u32;
/// How many messages compaction reads at a time while its summary has room.
const COMPACTION_PAGE: u32 = 100;
/// The longest summary compaction writes, in characters, and the longest line of it.
const SUMMARY_CHARS: usize = 4000;
const SUMMARY_LINE_CHARS: usize = 200;

impl DefaultRuntime {
    /// The newest messages of the conversation as the language model should see them: one
    /// bounded read of the newest [`HISTORY_READ`] messages, whatever the log's length.
    pub(super) async fn history(&self, conversation_id: &str) -> Result<Vec<ChatMessage>> {
        if self.shared.chat.is_none() {
            return Ok(Vec::new());
        }
        let range = EventRange::newest_of_kind("message", HISTORY_READ);
        let events = self.read_events(conversation_id, &range).await?;
        let mut messages: Vec<ChatMessage> = events
            .iter()
            .filter(|event| event.data["visibleToModel"].as_bool() != Some(false))
            .filter_map(|event| {
                let text = event.data["text"].as_str()?;
                Some(match event.data["role"].as_str()? {
                    "user" => ChatMessage::user(text),
                    _ => ChatMessage::assistant(text),
                })
            })
            .collect();
        let keep = messages.len().saturating_sub(HISTORY_MESSAGES);
        Ok(messages.split_off(keep))
    }

    pub(super) async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        self.shared.store.read_events(conversation_id, range).await.map_err(RuntimeError::internal)
    }

    /// The extractive summary of the messages with offsets `from ..= to`: each as
    /// `role: text` (a line shortened to [`SUMMARY_LINE_CHARS`]), the whole shortened to
    /// [`SUMMARY_CHARS`]. Messages are read a page at a time only while the summary has
    /// room; the rest are counted by the store, not read.
    pub(super) async fn summarise(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Value> {
        let mut lines: Vec<String> = Vec::new();
        let mut length = 0;
        let mut after = from.checked_sub(1);
        let before = to.checked_add(1);
        while length <= SUMMARY_CHARS {
            let page = EventRange {
                after,
                before,
                kind: Some("message".to_owned()),
                limit: COMPACTION_PAGE,
                newest: false,
            };
            let events = self.read_events(conversation_id, &page).await?;
            for event in &events {
                let (Some(role), Some(text)) =
                    (event.data["role"].as_str(), event.data["text"].as_str())
                else {
                    continue;
                };
                let line = format!("{role}: {}", shorten(text, SUMMARY_LINE_CHARS));
                length += line.chars().count() + 1;
                lines.push(line);
            }
            if events.len() < COMPACTION_PAGE as usize {
                break;
            }
            after = events.last().map(|event| event.offset);
        }
        let counted = EventRange {
            after: from.checked_sub(1),
            before,
            kind: Some("message".to_owned()),
            ..EventRange::default()
        };
        let message_count = self
            .shared
            .store
            .count_events(conversation_id, &counted)
            .await
            .map_err(RuntimeError::internal)?;
        Ok(json!({
            "fromOffset": from,
            "toOffset": to,
            "messageCount": message_count,
            "text": shorten(&lines.join("\n"), SUMMARY_CHARS),
        }))
    }
}
