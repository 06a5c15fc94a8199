//! Conversions between SQLite rows and Cairn's types.

use cairn_store::{Result, StoreError};
use cairn_types::{Memory, Outcome, PatchEvidence, Timestamp};
use rusqlite::Row;
use serde::de::DeserializeOwned;

/// The memory columns, in the order [`memory_from_row`] reads them, for a table aliased `m`.
/// Recall bookkeeping comes from `memory_recalls` (a memory never recalled has no row there):
/// one lookup by its primary key each, in a table small enough to stay in the page cache.
pub(crate) const MEMORY_COLUMNS: &str = "m.id, m.content, m.scope, m.status, m.repo, m.tags, \
     m.source, m.metadata, m.created_at, m.updated_at, \
     (SELECT r.last_recalled_at FROM memory_recalls r WHERE r.memory_id = m.id), \
     coalesce((SELECT r.recall_count FROM memory_recalls r WHERE r.memory_id = m.id), 0), \
     m.archived_at";
/// How many columns [`MEMORY_COLUMNS`] names: a column selected after them is at this index.
pub(crate) const MEMORY_COLUMN_COUNT: usize = 13;

pub(crate) fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

fn parse_json<T: DeserializeOwned>(text: &str, column: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Corrupt(format!("column {column}: {error}")))
}

fn parse_enum<T: std::str::FromStr<Err = String>>(text: &str) -> Result<T> {
    text.parse().map_err(StoreError::Corrupt)
}

pub(crate) fn memory_from_row(row: &Row<'_>) -> Result<Memory> {
    let get_error = |error| StoreError::backend(error);
    let text = |index: usize| row.get::<_, String>(index).map_err(get_error);
    let millis = |index: usize| row.get::<_, Option<i64>>(index).map_err(get_error);
    Ok(Memory {
        id: text(0)?,
        content: text(1)?,
        scope: parse_enum(&text(2)?)?,
        status: parse_enum(&text(3)?)?,
        repo: row.get(4).map_err(get_error)?,
        tags: parse_json(&text(5)?, "tags")?,
        source: row.get(6).map_err(get_error)?,
        metadata: parse_json(&text(7)?, "metadata")?,
        created_at: Timestamp::from_millis(row.get(8).map_err(get_error)?),
        updated_at: Timestamp::from_millis(row.get(9).map_err(get_error)?),
        last_recalled_at: millis(10)?.map(Timestamp::from_millis),
        recall_count: row.get::<_, i64>(11).map_err(get_error)? as u64,
        archived_at: millis(12)?.map(Timestamp::from_millis),
    })
}

pub(crate) fn outcome_from_row(row: &Row<'_>) -> rusqlite::Result<Outcome> {
    let exit_code: i32 = row.get(2)?;
    Ok(Outcome {
        outcome_id: row.get(0)?,
        command: row.get(1)?,
        exit_code,
        succeeded: exit_code == 0,
        task: row.get(3)?,
        repo: row.get(4)?,
        recorded_at: Timestamp::from_millis(row.get(5)?),
        previous_failures: row.get::<_, i64>(6)? as u64,
    })
}

pub(crate) fn evidence_from_row(row: &Row<'_>) -> Result<PatchEvidence> {
    let get_error = |error| StoreError::backend(error);
    let text = |index: usize| row.get::<_, String>(index).map_err(get_error);
    Ok(PatchEvidence {
        evidence_id: text(0)?,
        task: text(1)?,
        files: parse_json(&text(2)?, "files")?,
        commands: parse_json(&text(3)?, "commands")?,
        memories_used: parse_json(&text(4)?, "memories_used")?,
        created_at: Timestamp::from_millis(row.get(5).map_err(get_error)?),
    })
}
