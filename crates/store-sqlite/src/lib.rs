//! Cairn's SQLite storage backend: one database file in WAL mode, full-text search with FTS5.
//!
//! Reads go through a pool of connections; writes go through a single writer connection, so
//! writers queue in the process instead of spinning on SQLite's lock. Every call runs on
//! tokio's blocking threads, never on the async workers.

mod audit;
mod backup;
mod checkpoint;
mod conflicts;
mod connectors;
mod conversations;
mod idempotency;
mod keys;
mod memories;
mod memory_rows;
mod migrations;
mod rows;
mod search;
#[cfg(test)]
mod tests;
mod text_index;
mod transfer;
mod vectors;

pub use crate::backup::{
    CopyError, DatabaseLock, backup_database, exclusive_lock, restore_database, serve_lock,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_store::{Audit, MemoryFilter, Result, StoreError};
use cairn_types::Memory;
use r2d2::Pool;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, TransactionBehavior};

use crate::checkpoint::spawn_checkpointer;
use crate::memory_rows::insert_memory_rows;
use crate::text_index::SearchIndex;

/// How long a connection waits for another process's lock before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const READER_CONNECTIONS: u32 = 8;
/// The write-ahead log is cut back to this size whenever a checkpoint resets it.
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// A [`MemoryStore`](cairn_store::MemoryStore) in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    readers: Pool<SqliteConnectionManager>,
    writer: Arc<Writer>,
    word_frequencies: Arc<cairn_store::fulltext::WordFrequencies>,
    /// Full-text search's index; FTS5 answers until it is built.
    text_index: Arc<SearchIndex>,
    /// The checkpoint thread runs while a clone of the store exists.
    _alive: Arc<()>,
}

/// The single writer. Two connections, one per durability, each with its `synchronous`
/// setting fixed when it opens, so nothing (a panic, a failed pragma) can leave users' writes
/// unsynced; one lock, so they never write at the same time and writers queue here instead of
/// spinning on SQLite's lock.
struct Writer {
    connections: std::sync::Mutex<WriterConnections>,
    /// Memories not archived. Counted once at open, then moved by each commit that changes
    /// it, on the same thread and before the lock is released, so a caller that stops waiting
    /// (a dropped request) cannot leave it wrong. Only this process writes the file.
    live_memories: AtomicU64,
    /// Memory inserts waiting for the writer (see [`Writer::commit_pending_inserts`]).
    pending_inserts: std::sync::Mutex<Vec<PendingInsert>>,
    /// Takes each commit's changed memories before the writer is released.
    text_index: Arc<SearchIndex>,
}

impl Writer {
    /// Checkpoints the whole log into the database and empties its file.
    fn truncate_log(&self) -> Result<()> {
        let connections =
            self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let busy: i64 = connections
            .synced
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .map_err(sql)?;
        match busy {
            0 => Ok(()),
            _ => Err(StoreError::Backend("readers held the log past the busy timeout".into())),
        }
    }
}

impl Drop for Writer {
    /// A graceful stop leaves the log empty: everything is in the database file, and no
    /// erased text waits in old frames of the log.
    fn drop(&mut self) {
        if let Err(error) = self.truncate_log() {
            tracing::warn!(%error, "the log was not emptied at close");
        }
    }
}

/// One caller's `insert_memories`, waiting to be committed.
struct PendingInsert {
    memories: Vec<Memory>,
    actor: String,
    done: tokio::sync::oneshot::Sender<Result<()>>,
}

impl Writer {
    /// Group commit: takes the writer, then every memory insert queued by then (its own
    /// caller's, and those of callers that queued theirs while the previous commit was being
    /// synced), and commits them in one transaction, so one sync to disk serves them all.
    /// Each caller's memories are stored all together or not at all, whatever becomes of the
    /// others: when the shared transaction fails, each caller's insert is tried again in a
    /// transaction of its own. (Not savepoints: releasing one flushes the full-text index,
    /// a cost per caller that the one transaction saves.) Called by every caller after
    /// queueing; one whose insert an earlier call took finds nothing left to do.
    fn commit_pending_inserts(&self) {
        let mut connections =
            self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let jobs = std::mem::take(
            &mut *self.pending_inserts.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if jobs.is_empty() {
            return;
        }
        let together = commit_inserts(&mut connections.synced, &jobs);
        self.text_index.absorb(&connections.synced);
        if together.is_ok() || jobs.len() == 1 {
            self.answer(jobs, together);
            return;
        }
        for job in jobs {
            let alone = commit_inserts(&mut connections.synced, std::slice::from_ref(&job));
            self.text_index.absorb(&connections.synced);
            self.answer(vec![job], alone);
        }
    }

    /// Tells the callers of `jobs` how their commit went, after counting what it added.
    fn answer(&self, jobs: Vec<PendingInsert>, committed: Result<u64>) {
        match committed {
            Ok(live) => {
                self.live_memories.fetch_add(live, Ordering::Relaxed);
                for job in jobs {
                    let _ = job.done.send(Ok(()));
                }
            }
            Err(error) => {
                let message = error.to_string();
                for job in jobs {
                    let _ = job.done.send(Err(StoreError::Backend(message.clone().into())));
                }
            }
        }
    }
}

/// The memories of `jobs` in one transaction, synced: the live memories they add. All of
/// them are inserted by one statement (see [`insert_memory_rows`]), then their audit entries.
fn commit_inserts(connection: &mut Connection, jobs: &[PendingInsert]) -> Result<u64> {
    let transaction =
        connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    let memories: Vec<&Memory> = jobs.iter().flat_map(|job| &job.memories).collect();
    insert_memory_rows(&transaction, &memories)?;
    let mut live = 0;
    for job in jobs {
        let audit = Audit { actor: &job.actor, action: "create" };
        for memory in &job.memories {
            audit::append(&transaction, &audit, memory.created_at, &memory.id, None, Some(memory))?;
            live += u64::from(memory.archived_at.is_none());
        }
    }
    transaction.commit().map_err(sql)?;
    Ok(live)
}

struct WriterConnections {
    synced: Connection,
    relaxed: Connection,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (or creates) the database at `path` and applies pending migrations.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        SqliteStore::open_with(path, text_index::BUILT_AT_OPEN_BELOW)
    }

    /// [`SqliteStore::open`], building the full-text index before returning when fewer than
    /// `built_at_open_below` memories are live, in the background otherwise.
    fn open_with(path: &Path, built_at_open_below: u64) -> Result<SqliteStore> {
        restrict_to_owner(path)?;
        let manager = || SqliteConnectionManager::file(path).with_init(configure_connection);
        let mut synced = open_writer(path, "FULL")?;
        migrations::apply(&mut synced).map_err(StoreError::backend)?;
        let relaxed = open_writer(path, "NORMAL")?;
        text_index::take_notes(&synced)?;
        text_index::take_notes(&relaxed)?;
        let count: i64 = synced
            .query_row("SELECT count(*) FROM memories WHERE archived_at IS NULL", [], |row| {
                row.get(0)
            })
            .map_err(sql)?;
        let text_index = SearchIndex::open(path, count as u64, built_at_open_below)?;
        let writer = Arc::new(Writer {
            connections: std::sync::Mutex::new(WriterConnections { synced, relaxed }),
            live_memories: AtomicU64::new(count as u64),
            pending_inserts: std::sync::Mutex::default(),
            text_index: text_index.clone(),
        });
        let readers = Pool::builder()
            .max_size(READER_CONNECTIONS)
            .min_idle(Some(1))
            .build(manager())
            .map_err(StoreError::backend)?;
        let alive = Arc::new(());
        spawn_checkpointer(path, Arc::downgrade(&alive))?;
        Ok(SqliteStore {
            readers,
            writer,
            word_frequencies: Arc::default(),
            text_index,
            _alive: alive,
        })
    }

    /// Empties the write-ahead log into the database after an erasure, so the frames that
    /// held the erased text (written before the erasure's zeroed pages) leave the files now,
    /// not at some later restart of the log. Waits for readers up to the busy timeout; if
    /// they hold on longer, the periodic checkpoints restart the log later.
    pub(crate) async fn scrub_log(&self) {
        let writer = self.writer.clone();
        let emptied = run_blocking(move || writer.truncate_log()).await;
        if let Err(error) = emptied {
            tracing::warn!(%error, "the log was not emptied after an erasure; it will be later");
        }
    }

    /// Memories not archived, as the writer counts them.
    fn live_memories(&self) -> u64 {
        self.writer.live_memories.load(Ordering::Relaxed)
    }

    async fn read<T, F>(&self, query: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let pool = self.readers.clone();
        run_blocking(move || {
            let asked = std::time::Instant::now();
            let connection = pool.get();
            metrics::histogram!("cairn_store_pool_wait_seconds", "backend" => "sqlite")
                .record(asked.elapsed().as_secs_f64());
            let connection = connection.map_err(sql_pool)?;
            query(&connection)
        })
        .await
    }

    /// Runs `change` in one immediate transaction on the writer connection; the commit is
    /// synced to disk before this returns.
    async fn write<T, F>(&self, change: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.write_with(Durability::Synced, move |tx| Ok((change(tx)?, 0))).await
    }

    /// Like [`SqliteStore::write`], for derived data that can be rebuilt (vectors, recall
    /// bookkeeping): synced by the next synced commit or checkpoint.
    async fn write_relaxed<T, F>(&self, change: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.write_with(Durability::Relaxed, move |tx| Ok((change(tx)?, 0))).await
    }

    /// Like [`SqliteStore::write`], for a change that adds (or, negative, removes) live
    /// memories: `change` returns its value and that difference, which the count takes on
    /// when the commit succeeds.
    async fn write_counted<T, F>(&self, change: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> Result<(T, i64)> + Send + 'static,
    {
        self.write_with(Durability::Synced, change).await
    }

    async fn write_with<T, F>(&self, durability: Durability, change: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Transaction<'_>) -> Result<(T, i64)> + Send + 'static,
    {
        let writer = self.writer.clone();
        // The work runs to its end on a blocking thread even when the caller stops waiting.
        run_blocking(move || {
            // A panic in an earlier change rolled its transaction back; the connections are
            // still good.
            let mut connections =
                writer.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let connection = match durability {
                Durability::Synced => &mut connections.synced,
                Durability::Relaxed => &mut connections.relaxed,
            };
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let (value, live_change) = change(&transaction)?;
            transaction.commit().map_err(sql)?;
            writer.text_index.absorb(connection);
            if live_change >= 0 {
                writer.live_memories.fetch_add(live_change as u64, Ordering::Relaxed);
            } else {
                subtract(&writer.live_memories, live_change.unsigned_abs());
            }
            Ok(value)
        })
        .await
    }
}

/// A writer connection whose commits are `synchronous` (FULL or NORMAL) for its whole life.
fn open_writer(path: &Path, synchronous: &str) -> Result<Connection> {
    let mut connection = Connection::open(path).map_err(sql)?;
    configure_connection(&mut connection).map_err(sql)?;
    connection.pragma_update(None, "synchronous", synchronous).map_err(sql)?;
    // Checkpoints run on a background thread (below), not inside a request's commit; after
    // one resets the log, the file is cut back to this size.
    connection.pragma_update(None, "wal_autocheckpoint", 0).map_err(sql)?;
    connection.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT as i64).map_err(sql)?;
    Ok(connection)
}

/// How hard a commit holds on to its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// Synced to disk before the call returns: survives a crash of the machine.
    Synced,
    /// In the log but not yet synced: survives a crash of the process; made durable by the
    /// next synced commit or checkpoint. For bookkeeping that is not a user's write.
    Relaxed,
}

fn configure_connection(connection: &mut Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // WAL lets readers run beside the writer; FULL syncs the log on every commit, so an
    // acknowledged write survives a crash of the machine, not only of the process.
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    // Deleted content is overwritten with zeros, so erased text is not left in free pages.
    connection.pragma_update(None, "secure_delete", "ON")?;
    register_fold(connection)
}

/// `cairn_fold(text)`: Unicode lower case (Rust's), where SQLite's `lower()` folds ASCII
/// only; erasure by subject matches "JÖRG" for "Jörg" as PostgreSQL's `lower()` does.
fn register_fold(connection: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    connection.create_scalar_function("cairn_fold", 1, flags, |context| {
        Ok(context.get::<Option<String>>(0)?.map(|text| text.to_lowercase()))
    })
}

/// Takes `amount` from a counter, stopping at zero.
pub(crate) fn subtract(counter: &AtomicU64, amount: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |value| {
        Some(value.saturating_sub(amount))
    });
}

/// Makes the database readable by its owner alone, whatever the umask: the file is created
/// 0600 before SQLite opens it (SQLite gives its WAL and shared-memory files the database's
/// mode), and files left more open by an older version are narrowed.
pub(crate) fn restrict_to_owner(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(StoreError::backend)?;
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StoreError::backend(error));
                }
                _ => {}
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

async fn run_blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(StoreError::backend)?
}

/// A SQLite error as a store error, counted (`cairn_store_errors_total`).
pub(crate) fn sql(error: rusqlite::Error) -> StoreError {
    metrics::counter!("cairn_store_errors_total", "backend" => "sqlite").increment(1);
    StoreError::backend(error)
}

fn sql_pool(error: r2d2::Error) -> StoreError {
    metrics::counter!("cairn_store_errors_total", "backend" => "sqlite").increment(1);
    StoreError::backend(error)
}

/// The WHERE clause shared by lists and searches, with its parameters ?1..?4. Repository
/// names compare case-insensitively (`Shop` is `shop`), as everywhere.
pub(crate) const FILTER_SQL: &str = "(?1 IS NULL OR m.scope = ?1) AND (?2 IS NULL OR m.status = ?2) \
     AND (?3 IS NULL OR m.repo = ?3 COLLATE NOCASE) AND (?4 OR m.archived_at IS NULL)";

pub(crate) fn filter_params(
    filter: &MemoryFilter,
) -> (Option<&'static str>, Option<&'static str>, Option<String>, bool) {
    (
        filter.scope.map(|scope| scope.as_str()),
        filter.status.map(|status| status.as_str()),
        filter.repo.clone(),
        filter.include_archived,
    )
}
