//! Cairn's SQLite storage backend: one database file in WAL mode, full-text search with FTS5.
//!
//! Reads go through a pool of connections; writes go through a single writer connection, so
//! writers queue in the process instead of spinning on SQLite's lock. Every call runs on
//! tokio's blocking threads, never on the async workers.

mod audit;
mod backup;
mod conflicts;
mod connectors;
mod conversations;
mod idempotency;
mod keys;
mod migrations;
mod rows;
mod search;
mod transfer;
mod vectors;

pub use crate::backup::{
    CopyError, DatabaseLock, backup_database, exclusive_lock, restore_database, serve_lock,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_store::{
    Audit, AuditFilter, GuardedChange, MemoryChange, MemoryFilter, MemoryPage, MemoryStore, Recall,
    Result, StoreError, TextMatch, Version,
};
use cairn_types::{AuditEntry, Memory, Outcome, PatchEvidence, Timestamp};
use r2d2::Pool;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::rows::{
    MEMORY_COLUMNS, evidence_from_row, json_text, memory_from_row, outcome_from_row,
};

/// How long a connection waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const READER_CONNECTIONS: u32 = 8;
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// The write-ahead log is cut back to this size whenever a checkpoint resets it.
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;
/// Past this size (readers kept every passive checkpoint from reaching the end of the log, so
/// it never started again from its beginning), the checkpointer restarts the log if the
/// readers let it within [`RESTART_WAIT`].
const WAL_RESTART_AT: u64 = WAL_SIZE_LIMIT;
/// How long a restarting checkpoint waits for the writer and for readers of older snapshots
/// (writers wait meanwhile; readers never do). A reader's snapshot lasts one request.
const RESTART_WAIT: Duration = Duration::from_millis(20);
/// Past this size (restarts kept failing), the checkpointer waits for the readers as long as
/// it takes (up to the busy timeout) and truncates the log, so the file stays bounded.
const WAL_TRUNCATE_AT: u64 = 4 * WAL_SIZE_LIMIT;

/// A [`MemoryStore`] in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    readers: Pool<SqliteConnectionManager>,
    writer: Arc<Writer>,
    word_frequencies: Arc<cairn_store::fulltext::WordFrequencies>,
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
        if together.is_ok() || jobs.len() == 1 {
            self.answer(jobs, together);
            return;
        }
        for job in jobs {
            let alone = commit_inserts(&mut connections.synced, std::slice::from_ref(&job));
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
        restrict_to_owner(path)?;
        let manager = || SqliteConnectionManager::file(path).with_init(configure_connection);
        let mut synced = open_writer(path, "FULL")?;
        migrations::apply(&mut synced).map_err(StoreError::backend)?;
        let relaxed = open_writer(path, "NORMAL")?;
        let count: i64 = synced
            .query_row("SELECT count(*) FROM memories WHERE archived_at IS NULL", [], |row| {
                row.get(0)
            })
            .map_err(sql)?;
        let writer = Arc::new(Writer {
            connections: std::sync::Mutex::new(WriterConnections { synced, relaxed }),
            live_memories: AtomicU64::new(count as u64),
            pending_inserts: std::sync::Mutex::default(),
        });
        let readers = Pool::builder()
            .max_size(READER_CONNECTIONS)
            .min_idle(Some(1))
            .build(manager())
            .map_err(StoreError::backend)?;
        let alive = Arc::new(());
        spawn_checkpointer(path, Arc::downgrade(&alive))?;
        Ok(SqliteStore { readers, writer, word_frequencies: Arc::default(), _alive: alive })
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
    // Every change moves `updatedAt` forward, even two in one millisecond, so it identifies
    // the version a reader saw (guarded changes and the embedding worker rely on it).
    let updated_at = updated_at.max(Timestamp::from_millis(before.updated_at.as_millis() + 1));
    tx.prepare_cached(
        "UPDATE memories SET content = coalesce(?2, content), scope = coalesce(?3, scope), \
         status = coalesce(?4, status), tags = coalesce(?5, tags), \
         metadata = coalesce(?6, metadata), \
         archived_at = CASE WHEN ?7 THEN ?8 ELSE archived_at END, updated_at = ?9 \
         WHERE id = ?1",
    )
    .map_err(sql)?
    .execute(params![
        id,
        change.content,
        change.scope.map(|scope| scope.as_str()),
        change.status.map(|status| status.as_str()),
        change.tags.as_ref().map(json_text),
        change.metadata.as_ref().map(json_text),
        change.archived_at.is_some(),
        change.archived_at.flatten().map(Timestamp::as_millis),
        updated_at.as_millis(),
    ])
    .map_err(sql)?;
    let after =
        read_memory(tx, id)?.ok_or_else(|| StoreError::Corrupt(format!("{id} vanished")))?;
    audit::append(tx, audit, updated_at, id, Some(&before), Some(&after))?;
    Ok(Some((before, after)))
}

/// How a change from `before` to `after` moves the count of live memories.
pub(crate) fn live_change(before: &Memory, after: &Memory) -> i64 {
    i64::from(after.archived_at.is_none()) - i64::from(before.archived_at.is_none())
}

fn read_memory(connection: &Connection, id: &str) -> Result<Option<Memory>> {
    let query = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?1");
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let row = statement.query_row([id], |row| Ok(memory_from_row(row))).optional().map_err(sql)?;
    row.transpose()
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

/// Moves the write-ahead log into the database every second from a thread of its own, so no
/// request pays for a checkpoint. The thread ends when the store is dropped. Each checkpoint
/// that copies anything is logged at debug level (`RUST_LOG=cairn_store_sqlite=debug`) with
/// the frames it copied and how long it took, to line up with slow requests.
fn spawn_checkpointer(path: &Path, alive: std::sync::Weak<()>) -> Result<()> {
    let mut connection = Connection::open(path).map_err(sql)?;
    configure_connection(&mut connection).map_err(sql)?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    std::thread::Builder::new()
        .name("sqlite-checkpoint".to_owned())
        .spawn(move || {
            let mut copied_before = 0;
            while alive.upgrade().is_some() {
                std::thread::sleep(CHECKPOINT_INTERVAL);
                let started = std::time::Instant::now();
                match checkpoint(&connection, &wal, WAL_RESTART_AT, WAL_TRUNCATE_AT) {
                    Ok(done) => {
                        // The log restarts (its frame count drops) once a checkpoint copied
                        // it all and a writer began again at its start.
                        let copied = if done.copied < copied_before {
                            done.copied
                        } else {
                            done.copied - copied_before
                        };
                        copied_before = done.copied;
                        if copied > 0 || done.truncated || done.restart.is_some() {
                            tracing::debug!(
                                copied_frames = copied,
                                log_frames = done.log_frames,
                                restarted = ?done.restart,
                                truncated = done.truncated,
                                elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                                "checkpoint"
                            );
                        }
                    }
                    Err(error) => tracing::warn!(%error, "checkpoint failed"),
                }
            }
        })
        .map_err(StoreError::backend)?;
    Ok(())
}

/// What one [`checkpoint`] found and did.
#[derive(Debug, Clone, Copy)]
struct Checkpointed {
    /// Frames in the log, and those of them in the database now.
    log_frames: i64,
    copied: i64,
    /// Whether the log had grown past `restart_at` and a restart was tried: `Some(true)` when
    /// the next commit starts it again from its beginning.
    restart: Option<bool>,
    /// Whether the log had grown past its bound and was emptied.
    truncated: bool,
}

/// One checkpoint. PASSIVE never waits for readers or the writer.
///
/// SQLite starts the log again from its beginning at the first commit after a checkpoint
/// copied all of it, unless a reader still reads an older snapshot in it; under a steady
/// load some reader always does, and the log grows. So past `restart_at`, RESTART takes the
/// writer's lock, copies the few frames PASSIVE left and waits for the readers of older
/// snapshots to finish, each for [`RESTART_WAIT`] at most (a reader starting meanwhile reads
/// the database, which holds everything, and is not waited for): writers wait that long,
/// readers not at all, and the next commit restarts the log (and cuts its file back to
/// [`WAL_SIZE_LIMIT`]). Past `truncate_at` (restarts keep failing), TRUNCATE waits for them
/// up to the busy timeout and empties the log, so the file stays bounded however busy the
/// readers are. Every frame is in the database, synced, before the log restarts: durability
/// is SQLite's as with any checkpoint.
fn checkpoint(
    connection: &Connection,
    wal: &Path,
    restart_at: u64,
    truncate_at: u64,
) -> rusqlite::Result<Checkpointed> {
    let (log_frames, copied) =
        connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get(1)?, row.get(2)?))
        })?;
    let size = std::fs::metadata(wal).map_or(0, |metadata| metadata.len());
    let truncated = size > truncate_at;
    let mut restart = None;
    if truncated {
        connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    } else if size > restart_at {
        connection.busy_timeout(RESTART_WAIT)?;
        let busy =
            connection.query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| row.get::<_, i64>(0));
        connection.busy_timeout(BUSY_TIMEOUT)?;
        restart = Some(busy? == 0);
    }
    Ok(Checkpointed { log_frames, copied, restart, truncated })
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

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()> {
        let (done, committed) = tokio::sync::oneshot::channel();
        let job = PendingInsert { memories: memories.to_vec(), actor: actor.to_owned(), done };
        self.writer
            .pending_inserts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(job);
        let writer = self.writer.clone();
        // The commit runs to its end on a blocking thread even when the caller stops waiting.
        run_blocking(move || {
            writer.commit_pending_inserts();
            Ok(())
        })
        .await?;
        committed.await.map_err(StoreError::backend)?
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        let id = id.to_owned();
        self.read(move |connection| read_memory(connection, &id)).await
    }

    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = serde_json::to_string(ids).map_err(StoreError::backend)?;
        self.read(move |connection| {
            // One statement for them all, the ids' JSON array walked in order (CROSS JOIN
            // keeps it), each found by the id index, instead of a statement run per id.
            let query = format!(
                "SELECT {MEMORY_COLUMNS} FROM json_each(?1) j CROSS JOIN memories m \
                 ON m.id = j.value ORDER BY j.key"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let rows = statement.query_map([ids], |row| Ok(memory_from_row(row))).map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<(String, Memory)>> {
        let ids = ids.to_vec();
        self.read(move |connection| {
            // The rowid is the order of insertion; archived rows are stepped over.
            let query = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.rowid IN (
                     (SELECT max(rowid) FROM memories WHERE archived_at IS NULL
                         AND rowid < (SELECT rowid FROM memories WHERE id = ?1)),
                     (SELECT min(rowid) FROM memories WHERE archived_at IS NULL
                         AND rowid > (SELECT rowid FROM memories WHERE id = ?1))
                 ) ORDER BY m.rowid"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let mut adjacent = Vec::with_capacity(ids.len() * 2);
            for id in &ids {
                let rows =
                    statement.query_map([id], |row| Ok(memory_from_row(row))).map_err(sql)?;
                for row in rows {
                    adjacent.push((id.clone(), row.map_err(sql)??));
                }
            }
            Ok(adjacent)
        })
        .await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        let filter = filter.clone();
        self.read(move |connection| audit::list(connection, &filter, limit, offset)).await
    }

    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>> {
        let groups = groups.to_vec();
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        self.write_counted(move |tx| {
            let audit = Audit { actor: &actor, action: &action };
            let mut applied = Vec::with_capacity(groups.len());
            let mut live = 0;
            for group in &groups {
                let mut expected = true;
                for guarded in group {
                    let memory = read_memory(tx, &guarded.id)?;
                    expected &=
                        memory.is_some_and(|memory| Version::of(&memory) == guarded.expected);
                }
                if expected {
                    for guarded in group {
                        if let Some((before, after)) =
                            update_memory_row(tx, &guarded.id, &guarded.change, at, &audit)?
                        {
                            live += live_change(&before, &after);
                        }
                    }
                }
                applied.push(expected);
            }
            Ok((applied, live))
        })
        .await
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryChange,
        updated_at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Option<Memory>> {
        let (id, change) = (id.to_owned(), change.clone());
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        self.write_counted(move |tx| {
            let audit = Audit { actor: &actor, action: &action };
            Ok(match update_memory_row(tx, &id, &change, updated_at, &audit)? {
                Some((before, after)) => {
                    let live_change = live_change(&before, &after);
                    (Some(after), live_change)
                }
                None => (None, 0),
            })
        })
        .await
    }

    async fn list_memories(
        &self,
        filter: &MemoryFilter,
        limit: u32,
        offset: u64,
    ) -> Result<MemoryPage> {
        let (scope, status, repo, include_archived) = filter_params(filter);
        self.read(move |connection| {
            let count_query = format!("SELECT count(*) FROM memories m WHERE {FILTER_SQL}");
            let total: i64 = connection
                .prepare_cached(&count_query)
                .map_err(sql)?
                .query_row(params![scope, status, repo, include_archived], |row| row.get(0))
                .map_err(sql)?;
            let page_query = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {FILTER_SQL} \
                 ORDER BY m.created_at DESC, m.rowid DESC LIMIT ?5 OFFSET ?6"
            );
            let mut statement = connection.prepare_cached(&page_query).map_err(sql)?;
            let offset = i64::try_from(offset).unwrap_or(i64::MAX);
            let rows = statement
                .query_map(params![scope, status, repo, include_archived, limit, offset], |row| {
                    Ok(memory_from_row(row))
                })
                .map_err(sql)?;
            let memories = rows.map(|row| row.map_err(sql)?).collect::<Result<Vec<_>>>()?;
            Ok(MemoryPage { memories, total: total as u64 })
        })
        .await
    }

    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let (terms, filter) = (terms.to_vec(), filter.clone());
        let frequencies = self.word_frequencies.clone();
        let corpus = self.live_memories();
        self.read(move |connection| {
            search::search(connection, &frequencies, corpus, &terms, &filter, limit)
        })
        .await
    }

    async fn count_memories(&self) -> Result<u64> {
        Ok(self.live_memories())
    }

    async fn schema_version(&self) -> Result<cairn_store::SchemaVersion> {
        let applied = self
            .read(|connection| {
                connection
                    .pragma_query_value(None, "user_version", |row| row.get::<_, u32>(0))
                    .map_err(sql)
            })
            .await?;
        Ok(cairn_store::SchemaVersion { applied, known: migrations::MIGRATIONS.len() as u32 })
    }

    fn count_memories_now(&self) -> Option<u64> {
        Some(self.live_memories())
    }

    async fn record_recalls(&self, recalls: &[Recall]) -> Result<()> {
        if recalls.iter().all(|recall| recall.memory_ids.is_empty()) {
            return Ok(());
        }
        let recalls = recalls.to_vec();
        self.write_relaxed(move |tx| {
            // Each memory's row in `memory_recalls` is written once however many of the
            // recalls name it; a memory erased meanwhile has no row in `memories` and is
            // passed over.
            let mut mark = tx
                .prepare_cached(
                    "INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at) \
                     SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?1) \
                     ON CONFLICT (memory_id) DO UPDATE SET \
                     recall_count = recall_count + excluded.recall_count, \
                     last_recalled_at = max(coalesce(last_recalled_at, excluded.last_recalled_at), \
                     excluded.last_recalled_at)",
                )
                .map_err(sql)?;
            for (id, times, at) in Recall::tally(&recalls) {
                mark.execute(params![id, times as i64, at.as_millis()]).map_err(sql)?;
            }
            let mut log = tx
                .prepare_cached(
                    "INSERT INTO task_recalls (task_key, memory_id, first_recalled_at) \
                     SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?2) \
                     ON CONFLICT (task_key, memory_id) DO NOTHING",
                )
                .map_err(sql)?;
            for recall in &recalls {
                for id in &recall.memory_ids {
                    log.execute(params![recall.task_key, id, recall.at.as_millis()])
                        .map_err(sql)?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT memory_id FROM task_recalls WHERE task_key = ?1 ORDER BY seq",
                )
                .map_err(sql)?;
            let rows = statement.query_map([task_key], |row| row.get(0)).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<String>>>().map_err(sql)
        })
        .await
    }

    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome> {
        let mut outcome = outcome.clone();
        let task_key = task_key.map(str::to_owned);
        self.write(move |tx| {
            let failures: i64 = tx
                .prepare_cached("SELECT count(*) FROM outcomes WHERE command = ?1 AND exit_code <> 0")
                .map_err(sql)?
                .query_row([&outcome.command], |row| row.get(0))
                .map_err(sql)?;
            outcome.previous_failures = failures as u64;
            tx.prepare_cached(
                "INSERT INTO outcomes (id, command, exit_code, task, repo, recorded_at, previous_failures, task_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(sql)?
            .execute(params![
                outcome.outcome_id,
                outcome.command,
                outcome.exit_code,
                outcome.task,
                outcome.repo,
                outcome.recorded_at.as_millis(),
                failures,
                task_key,
            ])
            .map_err(sql)?;
            Ok(outcome)
        })
        .await
    }

    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>> {
        let command = command.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, command, exit_code, task, repo, recorded_at, previous_failures FROM outcomes \
                     WHERE command = ?1 ORDER BY recorded_at DESC, rowid DESC LIMIT ?2",
                )
                .map_err(sql)?;
            let rows = statement.query_map(params![command, limit], outcome_from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, command, exit_code, task, repo, recorded_at, previous_failures FROM outcomes \
                     WHERE task_key = ?1 ORDER BY rowid",
                )
                .map_err(sql)?;
            let rows = statement.query_map([task_key], outcome_from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, task, files, commands, memories_used, created_at FROM evidence \
                     WHERE task_key = ?1 ORDER BY rowid",
                )
                .map_err(sql)?;
            let rows =
                statement.query_map([task_key], |row| Ok(evidence_from_row(row))).map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()> {
        let evidence = evidence.clone();
        let task_key = task_key.to_owned();
        self.write(move |tx| {
            tx.prepare_cached(
                "INSERT INTO evidence (id, task, files, commands, memories_used, created_at, task_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql)?
            .execute(params![
                evidence.evidence_id,
                evidence.task,
                json_text(&evidence.files),
                json_text(&evidence.commands),
                json_text(&evidence.memories_used),
                evidence.created_at.as_millis(),
                task_key,
            ])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>> {
        let id = id.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, task, files, commands, memories_used, created_at FROM evidence WHERE id = ?1",
                )
                .map_err(sql)?;
            let row = statement.query_row([id], |row| Ok(evidence_from_row(row))).optional().map_err(sql)?;
            row.transpose()
        })
        .await
    }

    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>> {
        let ids = ids.to_vec();
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        let erased = self
            .write_counted(move |tx| {
                let audit = Audit { actor: &actor, action: &action };
                let mut erased = Vec::new();
                let mut live = 0;
                for id in &ids {
                    let Some(memory) = read_memory(tx, id)? else { continue };
                    live -= i64::from(memory.archived_at.is_none());
                    for statement in [
                        // The FTS trigger removes a live memory's entry; vectors cascade.
                        "DELETE FROM memories WHERE id = ?1",
                        // Its connector item stays, erased, so no sync imports the text again.
                        "UPDATE connector_items SET memory_id = '', content_hash = '' \
                     WHERE memory_id = ?1",
                        // A conflict's reason quotes its memories: it goes with any of them.
                        "DELETE FROM conflict_sets WHERE id IN \
                     (SELECT conflict_id FROM conflict_members WHERE memory_id = ?1)",
                        "UPDATE audit_log SET before = NULL, after = NULL WHERE memory_id = ?1",
                    ] {
                        tx.prepare_cached(statement).map_err(sql)?.execute([id]).map_err(sql)?;
                    }
                    audit::append(tx, &audit, at, id, None, None)?;
                    erased.push(id.clone());
                }
                // The per-task recall log has no index by memory (each pack would pay for it, and
                // the steady pack's p99 rose by 2 ms with one): one pass over it for them all.
                if !erased.is_empty() {
                    let erased = serde_json::to_string(&erased).map_err(StoreError::backend)?;
                    tx.prepare_cached(
                    "DELETE FROM task_recalls WHERE memory_id IN (SELECT value FROM json_each(?1))",
                )
                .map_err(sql)?
                .execute([erased])
                .map_err(sql)?;
                }
                Ok((erased, live))
            })
            .await;
        if erased.as_ref().is_ok_and(|erased| !erased.is_empty()) {
            self.scrub_log().await;
        }
        erased
    }

    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>> {
        let repo = repo.to_owned();
        self.read(move |connection| {
            let query = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m INDEXED BY memories_repo_rules_nocase \
                 WHERE m.repo = ?1 COLLATE NOCASE AND m.scope = 'repo' AND m.status = 'active' \
                 AND m.archived_at IS NULL ORDER BY m.created_at DESC LIMIT ?2"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let rows = statement
                .query_map(params![repo, limit], |row| Ok(memory_from_row(row)))
                .map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>> {
        let tag = tag.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id FROM memories \
                     WHERE EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?1)",
                )
                .map_err(sql)?;
            let rows = statement.query_map([tag], |row| row.get(0)).map_err(sql)?;
            rows.map(|row| row.map_err(sql)).collect()
        })
        .await
    }

    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>> {
        let text = text.to_lowercase();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached("SELECT id FROM memories WHERE instr(cairn_fold(content), ?1) > 0")
                .map_err(sql)?;
            let rows = statement.query_map([text], |row| row.get(0)).map_err(sql)?;
            rows.map(|row| row.map_err(sql)).collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_store::MemoryStore;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_store_passes_the_conformance_suite() {
        let directory = tempfile::tempdir().unwrap();
        let mut n = 0;
        cairn_store::conformance::run(|| {
            n += 1;
            let path = directory.path().join(format!("conformance-{n}.db"));
            async move { Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn cairn_store::Store> }
        })
        .await;
    }

    fn synchronous(store: &SqliteStore) -> impl Future<Output = Result<i64>> + '_ {
        store.write(|tx| tx.query_row("PRAGMA synchronous", [], |row| row.get(0)).map_err(sql))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_failure_of_a_relaxed_write_leaves_later_writes_unsynced() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
        const FULL: i64 = 2;
        assert_eq!(synchronous(&store).await.unwrap(), FULL);

        let failed = store
            .write_relaxed(|_| -> Result<()> { Err(StoreError::Corrupt("injected".into())) })
            .await;
        assert!(failed.is_err());
        assert_eq!(synchronous(&store).await.unwrap(), FULL, "after a failed relaxed write");

        let panicked = store.write_relaxed(|_| -> Result<()> { panic!("injected") }).await;
        assert!(panicked.is_err(), "a panic in a change is an error to its caller");
        assert_eq!(synchronous(&store).await.unwrap(), FULL, "after a panicking relaxed write");

        let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
        store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
        assert_eq!(store.get_memory(&memory.id).await.unwrap(), Some(memory));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_whose_caller_stops_waiting_is_still_counted() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
        let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
        // Polled once (the write starts), then dropped, as a server drops a request.
        let insert = store.insert_memories(std::slice::from_ref(&memory), "tester");
        let _ = tokio::time::timeout(Duration::ZERO, insert).await;
        while store.get_memory(&memory.id).await.unwrap().is_none() {
            tokio::task::yield_now().await;
        }
        // The writer is free again only once the dropped write's work is all done.
        store.write(|_| Ok(())).await.unwrap();
        assert_eq!(store.count_memories().await.unwrap(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_inserts_share_commits_and_a_failing_one_fails_alone() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
        let first = cairn_store::conformance::sample_memory("first", cairn_types::Scope::User, 1);
        store.insert_memories(std::slice::from_ref(&first), "tester").await.unwrap();
        // 40 callers at once, two memories each; caller 17 repeats an id already stored.
        let inserts = (0..40).map(|n| {
            let mut pair: Vec<Memory> = (0..2)
                .map(|k| {
                    let text = format!("caller {n} memory {k}");
                    cairn_store::conformance::sample_memory(&text, cairn_types::Scope::User, n)
                })
                .collect();
            if n == 17 {
                pair[1].id = first.id.clone();
            }
            let store = store.clone();
            tokio::spawn(async move { store.insert_memories(&pair, "tester").await })
        });
        let outcomes = futures_join_all(inserts).await;
        for (n, outcome) in outcomes.iter().enumerate() {
            assert_eq!(outcome.is_ok(), n != 17, "caller {n}: {outcome:?}");
        }
        assert_eq!(store.count_memories().await.unwrap(), 1 + 39 * 2, "caller 17 stored nothing");
        let counted: i64 = store
            .read(|connection| {
                connection
                    .query_row("SELECT count(*) FROM memories", [], |row| row.get(0))
                    .map_err(sql)
            })
            .await
            .unwrap();
        assert_eq!(counted, 1 + 39 * 2);
    }

    async fn futures_join_all(
        tasks: impl Iterator<Item = tokio::task::JoinHandle<Result<()>>>,
    ) -> Vec<Result<()>> {
        let mut outcomes = Vec::new();
        for task in tasks.collect::<Vec<_>>() {
            outcomes.push(task.await.unwrap());
        }
        outcomes
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_is_stored_exactly_as_given() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
        let texts = [
            "plain words",
            "quotes \" and \\ backslashes, a tab\tand a newline\n, emoji 🦀, accents é",
            "a memory that quotes \\u0000 as text",
            "a NUL \0 inside (the engine refuses it; the store keeps what it is given)",
            "",
        ];
        let mut memories: Vec<Memory> = texts
            .iter()
            .enumerate()
            .map(|(n, text)| {
                cairn_store::conformance::sample_memory(text, cairn_types::Scope::Repo, n as i64)
            })
            .collect();
        memories[1].tags = vec!["tag \"quoted\"".to_owned(), "🦀".to_owned()];
        memories[1].repo = None;
        memories[1].source = Some("src/lib.rs:1".to_owned());
        memories[1].metadata.insert("n".to_owned(), serde_json::json!({"deep": [1, 2.5, null]}));
        memories[1].last_recalled_at = Some(Timestamp::from_millis(-1));
        memories[1].recall_count = u64::from(u32::MAX) + 7;
        memories[1].archived_at = Some(Timestamp::from_millis(i64::MAX));
        // Without the NUL, the batch takes the one-statement path; with it, the other.
        for batch in [&memories[..3], &memories[3..]] {
            store.insert_memories(batch, "tester").await.unwrap();
            for memory in batch {
                assert_eq!(store.get_memory(&memory.id).await.unwrap().as_ref(), Some(memory));
            }
        }
        let listed = store.list_memories(&MemoryFilter::default(), 10, 0).await.unwrap();
        assert_eq!(listed.total, 4, "the archived one is left out");
        let found = store
            .search_memories(&["backslash".to_owned()], &MemoryFilter::default(), 10)
            .await
            .unwrap();
        assert!(found.is_empty(), "the archived memory is not in the full-text index");
        let found = store
            .search_memories(&["quote".to_owned()], &MemoryFilter::default(), 10)
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
    }

    /// Inserts `count` memories of about a kilobyte each (`fill` repeated), a large log, and
    /// returns them.
    async fn insert_large_memories(store: &SqliteStore, count: i64, fill: char) -> Vec<Memory> {
        let text = fill.to_string().repeat(1_000);
        let memories: Vec<Memory> = (0..count)
            .map(|n| {
                let content = format!("{n} {text}");
                cairn_store::conformance::sample_memory(&content, cairn_types::Scope::User, n)
            })
            .collect();
        store.insert_memories(&memories, "tester").await.unwrap();
        memories
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_keep_the_log_bounded() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let store = SqliteStore::open(&path).unwrap();
        insert_large_memories(&store, 3_000, 'x').await;
        let wal = directory.path().join("cairn.db-wal");
        let limit = 1024 * 1024;
        assert!(std::fs::metadata(&wal).unwrap().len() > limit, "the test writes a large log");

        // A reader in the middle of a transaction holds passive checkpoints back.
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN; SELECT count(*) FROM memories;").unwrap();
        let checkpointer = Connection::open(&path).unwrap();
        checkpointer.busy_timeout(Duration::from_millis(200)).unwrap();
        let _ = checkpoint(&checkpointer, &wal, u64::MAX, limit);
        reader.execute_batch("COMMIT").unwrap();
        checkpoint(&checkpointer, &wal, u64::MAX, limit).unwrap();
        assert!(std::fs::metadata(&wal).unwrap().len() <= limit);
        assert_eq!(store.count_memories().await.unwrap(), 3_000, "nothing is lost");
    }

    /// Past `restart_at`, a checkpoint restarts the log when no reader holds an older
    /// snapshot, and gives up after a short wait when one does; the next commit writes the
    /// log from its beginning, and everything written before is read back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_log_restarts_when_the_readers_let_it() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let store = SqliteStore::open(&path).unwrap();
        let memories = insert_large_memories(&store, 2_000, 'y').await;
        let wal = directory.path().join("cairn.db-wal");
        let restart_at = 1024 * 1024;
        assert!(std::fs::metadata(&wal).unwrap().len() > restart_at);

        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN; SELECT count(*) FROM memories;").unwrap();
        let checkpointer = Connection::open(&path).unwrap();
        checkpointer.busy_timeout(BUSY_TIMEOUT).unwrap();
        let started = std::time::Instant::now();
        let held = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
        assert_eq!(held.restart, Some(false), "a reader in the log holds the restart back");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "it waits {RESTART_WAIT:?}, not the busy timeout: {:?}",
            started.elapsed()
        );
        // Meanwhile the reader still reads, and writers still write.
        let counted: i64 =
            reader.query_row("SELECT count(*) FROM memories", [], |row| row.get(0)).unwrap();
        assert_eq!(counted, 2_000);
        reader.execute_batch("COMMIT").unwrap();

        let done = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
        assert_eq!(done.restart, Some(true), "{done:?}");
        let late = cairn_store::conformance::sample_memory("late", cairn_types::Scope::User, 1);
        store.insert_memories(std::slice::from_ref(&late), "tester").await.unwrap();
        let after = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
        assert!(after.log_frames < 100, "the log started again: {after:?}");
        assert_eq!(store.count_memories().await.unwrap(), 2_001, "nothing is lost");
        assert_eq!(store.get_memory(&memories[7].id).await.unwrap().unwrap(), memories[7]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn data_survives_reopening_the_file() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
        {
            let store = SqliteStore::open(&path).unwrap();
            store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
        }
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(reopened.get_memory(&memory.id).await.unwrap(), Some(memory));
        assert_eq!(reopened.count_memories().await.unwrap(), 1, "the count is rebuilt at open");
    }
}
