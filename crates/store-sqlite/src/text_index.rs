//! The in-memory full-text index ([`cairn_store::fulltext::TextIndex`]) of the live memories,
//! kept in step with every commit of the writer.
//!
//! The database stays the source of truth. Each writer connection has temporary triggers
//! (not in the file) that note, inside the transaction, every memory row inserted, updated
//! or deleted, with the text an update or a delete found; after the commit, on the writer's
//! thread and before the writer is released, the index takes those rows as they now are.
//! A transaction that rolls back takes its notes with it. Nothing is written for the index,
//! so a crash loses nothing: the index is built again from the table at the next start.
//!
//! It is built at start: at once when the store is small, on a thread of its own otherwise,
//! while searches use FTS5 (which the triggers of the schema keep as before); commits made
//! during the build are noted and taken by the index when it is done.

use std::path::Path;
use std::sync::Arc;

use cairn_store::fulltext::{DocLabels, Held, IndexCell, TextIndex};
use cairn_store::{Result, StoreError};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::sql;

/// Below this many live memories the index is built before `open` returns (a few tens of
/// milliseconds); above, in the background.
pub(crate) const BUILT_AT_OPEN_BELOW: u64 = 10_000;
/// Rows read per statement while building.
const BUILD_PAGE: i64 = 10_000;

/// The temporary table and triggers of a writer connection.
const NOTES_SQL: &str = "
    PRAGMA temp_store = MEMORY;
    CREATE TEMP TABLE IF NOT EXISTS changed_memories (
        memory INTEGER PRIMARY KEY,
        content TEXT,
        tags TEXT,
        erased INTEGER NOT NULL DEFAULT 0
    );
    CREATE TEMP TRIGGER IF NOT EXISTS changed_memories_insert AFTER INSERT ON main.memories BEGIN
        INSERT OR IGNORE INTO changed_memories (memory) VALUES (new.rowid);
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS changed_memories_update AFTER UPDATE ON main.memories BEGIN
        INSERT OR IGNORE INTO changed_memories (memory, content, tags)
        VALUES (old.rowid, CASE WHEN old.archived_at IS NULL THEN old.content END, old.tags);
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS changed_memories_delete AFTER DELETE ON main.memories BEGIN
        INSERT OR IGNORE INTO changed_memories (memory, content, tags)
        VALUES (old.rowid, CASE WHEN old.archived_at IS NULL THEN old.content END, old.tags);
        UPDATE changed_memories SET erased = 1 WHERE memory = old.rowid;
    END;
";

/// Gives a writer connection its notes (see the module's comment).
pub(crate) fn take_notes(connection: &Connection) -> Result<()> {
    connection.execute_batch(NOTES_SQL).map_err(sql)
}

/// The index and its state, shared by the store's clones. While it is built, a change is
/// noted by its rowid (with the text of an erased memory); `Fallback`: a note could not be
/// read, so the index may be wrong and searches use FTS5.
#[derive(Debug)]
pub(crate) struct SearchIndex {
    pub(crate) cell: IndexCell<i64, (i64, Option<(String, String)>)>,
}

impl SearchIndex {
    /// Builds the index of the database at `path`, now when fewer than `built_at_open_below`
    /// memories are `live`, else in the background.
    pub(crate) fn open(
        path: &Path,
        live: u64,
        built_at_open_below: u64,
    ) -> Result<Arc<SearchIndex>> {
        let index = Arc::new(SearchIndex { cell: IndexCell::building() });
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        connection.busy_timeout(crate::BUSY_TIMEOUT).map_err(sql)?;
        if live < built_at_open_below {
            build(&connection, &index)?;
        } else {
            let building = index.clone();
            std::thread::Builder::new()
                .name("cairn-text-index".into())
                .spawn(move || {
                    let started = std::time::Instant::now();
                    match build(&connection, &building) {
                        Ok(()) => tracing::info!(
                            memories = live,
                            seconds = started.elapsed().as_secs_f64(),
                            "the full-text index is built"
                        ),
                        Err(error) => {
                            tracing::error!(%error, "building the full-text index failed; searches use FTS5");
                            *building.cell.lock() = Held::Fallback;
                        }
                    }
                })
                .map_err(StoreError::backend)?;
        }
        Ok(index)
    }

    /// After a commit on `connection` (a writer's): the memories it changed, as they are now.
    pub(crate) fn absorb(&self, connection: &Connection) {
        if let Err(error) = self.try_absorb(connection) {
            tracing::error!(%error, "the full-text index lost a change; searches use FTS5");
            *self.cell.lock() = Held::Fallback;
        }
    }

    fn try_absorb(&self, connection: &Connection) -> Result<()> {
        let mut statement = connection
            .prepare_cached(
                "SELECT c.memory, c.content, c.tags, c.erased, m.content, m.tags, m.scope, \
                 m.status, m.repo, m.rowid IS NOT NULL AND m.archived_at IS NULL \
                 FROM temp.changed_memories c LEFT JOIN main.memories m ON m.rowid = c.memory",
            )
            .map_err(sql)?;
        let changes = statement
            .query_map([], |row| {
                Ok(Change {
                    key: row.get(0)?,
                    before: row.get::<_, Option<String>>(1)?.zip(row.get::<_, Option<String>>(2)?),
                    erased: row.get(3)?,
                    now: match row.get::<_, Option<bool>>(9)? {
                        Some(true) => Some(Row {
                            content: row.get(4)?,
                            tags: row.get(5)?,
                            scope: row.get(6)?,
                            status: row.get(7)?,
                            repo: row.get(8)?,
                        }),
                        _ => None,
                    },
                })
            })
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<Change>>>()
            .map_err(sql)?;
        if changes.is_empty() {
            return Ok(());
        }
        connection
            .prepare_cached("DELETE FROM temp.changed_memories")
            .map_err(sql)?
            .execute([])
            .map_err(sql)?;
        match &mut *self.cell.lock() {
            Held::Building(changed) => changed.extend(
                changes
                    .into_iter()
                    .map(|change| (change.key, if change.erased { change.before } else { None })),
            ),
            Held::Ready(index) => {
                let erased = changes.iter().any(|change| change.erased);
                for change in changes {
                    change.apply(index)?;
                }
                if erased {
                    index.drop_unheld_terms();
                }
            }
            Held::Fallback => {}
        }
        Ok(())
    }
}

/// A memory row's indexed text and labels.
struct Row {
    content: String,
    tags: String,
    scope: String,
    status: String,
    repo: Option<String>,
}

impl Row {
    fn labels(&self) -> Result<DocLabels> {
        Ok(DocLabels {
            scope: self.scope.parse().map_err(StoreError::Corrupt)?,
            status: self.status.parse().map_err(StoreError::Corrupt)?,
            repo: self.repo.clone(),
        })
    }
}

/// One noted memory: the text it was indexed with (`None` when it was not live), whether it
/// was erased, and the row as it is now (`None`: archived or gone).
struct Change {
    key: i64,
    before: Option<(String, String)>,
    erased: bool,
    now: Option<Row>,
}

impl Change {
    fn apply(self, index: &mut TextIndex) -> Result<()> {
        let before = self.before.as_ref().map(|(content, tags)| (content.as_str(), tags.as_str()));
        match (&self.now, before) {
            (None, Some((content, tags))) if self.erased => index.erase(&self.key, content, tags),
            (None, before) => index.remove(&self.key, before),
            (Some(now), Some(before)) if before != (now.content.as_str(), now.tags.as_str()) => {
                index.remove(&self.key, Some(before));
                index.put(self.key, &now.content, &now.tags, &now.labels()?);
            }
            (Some(now), _) => index.put(self.key, &now.content, &now.tags, &now.labels()?),
        }
        Ok(())
    }
}

/// Reads every live memory into a new index, then takes the changes noted meanwhile.
fn build(connection: &Connection, index: &SearchIndex) -> Result<()> {
    let mut built = TextIndex::new();
    let mut after = i64::MIN;
    let mut statement = connection
        .prepare(
            "SELECT rowid, content, tags, scope, status, repo FROM memories \
             WHERE archived_at IS NULL AND rowid > ?1 ORDER BY rowid LIMIT ?2",
        )
        .map_err(sql)?;
    loop {
        let rows = statement
            .query_map(params![after, BUILD_PAGE], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    Row {
                        content: row.get(1)?,
                        tags: row.get(2)?,
                        scope: row.get(3)?,
                        status: row.get(4)?,
                        repo: row.get(5)?,
                    },
                ))
            })
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?;
        let Some(&(last, _)) = rows.last() else { break };
        for (key, row) in rows {
            built.put(key, &row.content, &row.tags, &row.labels()?);
        }
        after = last;
    }
    let mut held = index.cell.lock();
    let Held::Building(changed) = &mut *held else { return Ok(()) };
    let mut read = connection
        .prepare(
            "SELECT content, tags, scope, status, repo FROM memories \
             WHERE rowid = ?1 AND archived_at IS NULL",
        )
        .map_err(sql)?;
    let changed = std::mem::take(changed);
    let recount = !changed.is_empty();
    for (key, erased) in changed {
        let row = read
            .query_row([key], |row| {
                Ok(Row {
                    content: row.get(0)?,
                    tags: row.get(1)?,
                    scope: row.get(2)?,
                    status: row.get(3)?,
                    repo: row.get(4)?,
                })
            })
            .optional()
            .map_err(sql)?;
        match row {
            Some(row) => built.put(key, &row.content, &row.tags, &row.labels()?),
            None => match erased {
                Some((content, tags)) => built.erase(&key, &content, &tags),
                None => built.remove(&key, None),
            },
        }
    }
    if recount {
        // A memory changed during the build may have left a term's count high (its removal
        // did not know which version the build had read).
        built.compact();
    }
    built.shrink_to_fit();
    *held = Held::Ready(Box::new(built));
    Ok(())
}
