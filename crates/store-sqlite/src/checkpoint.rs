//! The checkpointer: a thread that moves the write-ahead log into the database and keeps
//! the log's file bounded, however busy the readers are.

use std::path::Path;
use std::time::Duration;

use cairn_store::{Result, StoreError};
use rusqlite::Connection;

use crate::{BUSY_TIMEOUT, WAL_SIZE_LIMIT, configure_connection, sql};

const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// Past this size (readers kept every passive checkpoint from reaching the end of the log, so
/// it never started again from its beginning), the checkpointer restarts the log if the
/// readers let it within [`RESTART_WAIT`].
const WAL_RESTART_AT: u64 = WAL_SIZE_LIMIT;
/// How long a restarting checkpoint waits for the writer and for readers of older snapshots
/// (writers wait meanwhile; readers never do). A reader's snapshot lasts one request.
pub(crate) const RESTART_WAIT: Duration = Duration::from_millis(20);
/// Past this size (restarts kept failing), the checkpointer waits for the readers as long as
/// it takes (up to the busy timeout) and truncates the log, so the file stays bounded.
const WAL_TRUNCATE_AT: u64 = 4 * WAL_SIZE_LIMIT;

/// Moves the write-ahead log into the database every second from a thread of its own, so no
/// request pays for a checkpoint. The thread ends when the store is dropped. Each checkpoint
/// that copies anything is logged at debug level (`RUST_LOG=cairn_store_sqlite=debug`) with
/// the frames it copied and how long it took, to line up with slow requests.
pub(crate) fn spawn_checkpointer(path: &Path, alive: std::sync::Weak<()>) -> Result<()> {
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
pub(crate) struct Checkpointed {
    /// Frames in the log, and those of them in the database now.
    pub(crate) log_frames: i64,
    copied: i64,
    /// Whether the log had grown past `restart_at` and a restart was tried: `Some(true)` when
    /// the next commit starts it again from its beginning.
    pub(crate) restart: Option<bool>,
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
pub(crate) fn checkpoint(
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
