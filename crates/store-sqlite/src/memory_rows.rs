//! Writing and reading a memory's rows inside a transaction: inserts (a batch in one
//! statement), changes with their audit entries, and reads by id.

use cairn_store::{Audit, MemoryChange, Result};
use cairn_types::{Memory, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows::{MEMORY_COLUMNS, json_text, memory_from_row};
use crate::{audit, sql};

/// Inserts one memory and its `create` (or other) audit entry.
pub(crate) fn insert_memory_row(
    tx: &rusqlite::Transaction<'_>,
    memory: &Memory,
    audit: &Audit<'_>,
) -> Result<()> {
    insert_memory_rows(tx, &[memory])?;
    audit::append(tx, audit, memory.created_at, &memory.id, None, Some(memory))
}

/// Inserts `memories` (without audit entries) with one statement, whatever their number.
///
/// One statement, not one a memory, because of the full-text index: before each statement of
/// a transaction that the index is part of, SQLite opens a statement savepoint, and FTS5
/// writes what it holds in memory to a new segment of the index at every savepoint. A
/// statement a memory made a segment a memory, which FTS5 then merged again and again (two
/// thirds of a batch's time); one statement makes one segment a commit. The rows go in as a
/// JSON array read by `jsonb_each`, in order, so their rowids follow the slice as before.
/// `jsonb_each`, not `json_each`: the latter gives each row's `value` as JSON text, which
/// each of the thirteen `->>` then parses again (a tenth of a batch's time in `perf`); the
/// former gives it in SQLite's binary JSON, which `->>` reads in place. The values are the
/// same (a test stores awkward text and extreme numbers and reads them back).
pub(crate) fn insert_memory_rows(
    tx: &rusqlite::Transaction<'_>,
    memories: &[&Memory],
) -> Result<()> {
    insert_memory_rows_only(tx, memories)?;
    // A memory that comes with recalls (an import, a restored copy) brings its bookkeeping;
    // a new one has none, and the statement is not run for it.
    let mut recalled = memories
        .iter()
        .filter(|memory| memory.recall_count != 0 || memory.last_recalled_at.is_some())
        .peekable();
    if recalled.peek().is_some() {
        let mut statement = tx
            .prepare_cached(
                "INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at) \
                 VALUES (?1, ?2, ?3)",
            )
            .map_err(sql)?;
        for memory in recalled {
            statement
                .execute(params![
                    memory.id,
                    memory.recall_count as i64,
                    memory.last_recalled_at.map(Timestamp::as_millis)
                ])
                .map_err(sql)?;
        }
    }
    Ok(())
}

fn insert_memory_rows_only(tx: &rusqlite::Transaction<'_>, memories: &[&Memory]) -> Result<()> {
    if memories.len() <= 1 {
        return insert_memory_rows_bound(tx, memories);
    }
    let rows: Vec<_> = memories.iter().copied().map(memory_values).collect();
    let rows = json_text(&rows);
    if rows.contains("\\u0000") {
        // SQLite's JSON functions end text at an escaped NUL, where bound text keeps it. The
        // engine refuses NUL in memories: this is for other callers' rows (and for a memory
        // that quotes `\u0000`, which costs it nothing but speed).
        return insert_memory_rows_bound(tx, memories);
    }
    tx.prepare_cached(&format!(
        "{INSERT_MEMORY} SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, \
         value ->> 4, value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, \
         value ->> 10 FROM jsonb_each(?1) ORDER BY key"
    ))
    .map_err(sql)?
    .execute([rows])
    .map_err(sql)?;
    Ok(())
}

/// The memory's own columns; its recall bookkeeping goes to `memory_recalls`.
const INSERT_MEMORY: &str = "INSERT INTO memories (id, content, scope, status, repo, tags, \
     source, metadata, created_at, updated_at, archived_at)";

/// Inserts `memories` with a statement each, their values bound.
fn insert_memory_rows_bound(tx: &rusqlite::Transaction<'_>, memories: &[&Memory]) -> Result<()> {
    let mut statement = tx
        .prepare_cached(&format!(
            "{INSERT_MEMORY} VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
        ))
        .map_err(sql)?;
    for memory in memories {
        statement.execute(memory_values(memory)).map_err(sql)?;
    }
    Ok(())
}

/// A memory's values in [`INSERT_MEMORY`]'s order.
type MemoryValues<'a> = (
    &'a str,
    &'a str,
    &'static str,
    &'static str,
    Option<&'a str>,
    String,
    Option<&'a str>,
    String,
    i64,
    i64,
    Option<i64>,
);

/// A memory's [`MemoryValues`]: bound as a statement's parameters, or written as a row of
/// the JSON array `jsonb_each` reads.
fn memory_values(memory: &Memory) -> MemoryValues<'_> {
    (
        &memory.id,
        &memory.content,
        memory.scope.as_str(),
        memory.status.as_str(),
        memory.repo.as_deref(),
        json_text(&memory.tags),
        memory.source.as_deref(),
        json_text(&memory.metadata),
        memory.created_at.as_millis(),
        memory.updated_at.as_millis(),
        memory.archived_at.map(Timestamp::as_millis),
    )
}

/// Applies a change to one memory with its audit entry; the memory before and after, or
/// `None` when there is no such memory.
pub(crate) fn update_memory_row(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    change: &MemoryChange,
    updated_at: Timestamp,
    audit: &Audit<'_>,
) -> Result<Option<(Memory, Memory)>> {
    let Some(before) = read_memory(tx, id)? else { return Ok(None) };
    let after = change.applied_to(&before, updated_at);
    write_changed(tx, &before, &after, audit)?;
    Ok(Some((before, after)))
}

/// Stores `after` over `before` (a change [`MemoryChange::applied_to`] it), with its audit entry.
pub(crate) fn write_changed(
    tx: &rusqlite::Transaction<'_>,
    before: &Memory,
    after: &Memory,
    audit: &Audit<'_>,
) -> Result<()> {
    tx.prepare_cached(
        "UPDATE memories SET content = ?2, scope = ?3, status = ?4, tags = ?5, metadata = ?6, \
         archived_at = ?7, updated_at = ?8 WHERE id = ?1",
    )
    .map_err(sql)?
    .execute(changed_values(&before.id, after))
    .map_err(sql)?;
    audit::append(tx, audit, after.updated_at, &before.id, Some(before), Some(after))
}

/// Stores each change's `after` over its `before`, with their audit entries in order, in one
/// statement however many there are (see [`insert_memory_rows`] for why one: a statement a
/// change made an FTS5 segment a change when the text, the tags or liveness changed, as a
/// merge's archives do). A memory changed twice ends as its last change made it.
pub(crate) fn write_changes(
    tx: &rusqlite::Transaction<'_>,
    changes: &[(Memory, Memory)],
    audit: &Audit<'_>,
) -> Result<()> {
    let rows = (changes.len() > 1).then(|| {
        let mut written = std::collections::HashSet::new();
        let last: Vec<ChangedValues<'_>> = changes
            .iter()
            .rev()
            .filter(|(before, _)| written.insert(before.id.as_str()))
            .map(|(before, after)| changed_values(&before.id, after))
            .collect();
        json_text(&last)
    });
    // One change, or text `jsonb_each` would cut at a NUL (see `insert_memory_rows_only`):
    // a statement each.
    let Some(rows) = rows.filter(|rows| !rows.contains("\\u0000")) else {
        for (before, after) in changes {
            write_changed(tx, before, after, audit)?;
        }
        return Ok(());
    };
    tx.prepare_cached(
        "UPDATE memories SET content = v.value ->> 1, scope = v.value ->> 2, \
         status = v.value ->> 3, tags = v.value ->> 4, metadata = v.value ->> 5, \
         archived_at = v.value ->> 6, updated_at = v.value ->> 7 \
         FROM jsonb_each(?1) AS v WHERE memories.id = v.value ->> 0",
    )
    .map_err(sql)?
    .execute([rows])
    .map_err(sql)?;
    for (before, after) in changes {
        audit::append(tx, audit, after.updated_at, &before.id, Some(before), Some(after))?;
    }
    Ok(())
}

/// What a change writes of a memory, in the order of [`write_changed`]'s parameters and
/// [`write_changes`]' rows.
type ChangedValues<'a> =
    (&'a str, &'a str, &'static str, &'static str, String, String, Option<i64>, i64);

fn changed_values<'a>(id: &'a str, after: &'a Memory) -> ChangedValues<'a> {
    (
        id,
        &after.content,
        after.scope.as_str(),
        after.status.as_str(),
        json_text(&after.tags),
        json_text(&after.metadata),
        after.archived_at.map(Timestamp::as_millis),
        after.updated_at.as_millis(),
    )
}

/// How a change from `before` to `after` moves the count of live memories.
pub(crate) fn live_change(before: &Memory, after: &Memory) -> i64 {
    i64::from(after.archived_at.is_none()) - i64::from(before.archived_at.is_none())
}

pub(crate) fn read_memory(connection: &Connection, id: &str) -> Result<Option<Memory>> {
    let query = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?1");
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let row = statement.query_row([id], |row| Ok(memory_from_row(row))).optional().map_err(sql)?;
    row.transpose()
}
