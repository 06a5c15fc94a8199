//! Copies of a database file: `cairn backup` takes one while a daemon serves writes (SQLite's
//! online backup API, the whole database in one step, so one read transaction: a consistent
//! snapshot, with writers going on in the write-ahead log meanwhile), `cairn restore` puts one
//! into an empty data directory. And the lock by which a daemon says it serves a database,
//! so that what must not run beside one (a restore, a migration) can tell.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::migrations::MIGRATIONS;

/// What a backup or restore can fail with, in words for the person running it.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{0}")]
    Refused(String),
    #[error("{path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

fn sqlite(path: &Path) -> impl FnOnce(rusqlite::Error) -> CopyError + '_ {
    move |source| CopyError::Sqlite { path: path.to_owned(), source }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CopyError + '_ {
    move |source| CopyError::Io { path: path.to_owned(), source }
}

/// The lock file beside a database: a daemon holds it shared while it serves the database;
/// a restore or a migration holds it alone.
fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.file_name().unwrap_or_default().to_owned();
    name.push(".lock");
    database.with_file_name(name)
}

/// A lock on a database, held until dropped (or the process ends).
#[derive(Debug)]
pub struct DatabaseLock {
    _file: File,
}

fn lock_file(database: &Path) -> Result<File, CopyError> {
    let path = lock_path(database);
    OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io(&path))
}

/// Says that a daemon serves `database`; fails while a restore or migration holds it.
pub fn serve_lock(database: &Path) -> Result<DatabaseLock, CopyError> {
    let file = lock_file(database)?;
    match file.try_lock_shared() {
        Ok(()) => Ok(DatabaseLock { _file: file }),
        Err(_) => Err(CopyError::Refused(format!(
            "{} is being restored or migrated; wait for that to finish",
            database.display()
        ))),
    }
}

/// Holds `database` alone; fails while a daemon serves it.
pub fn exclusive_lock(database: &Path) -> Result<DatabaseLock, CopyError> {
    let file = lock_file(database)?;
    match file.try_lock() {
        Ok(()) => Ok(DatabaseLock { _file: file }),
        Err(_) => Err(CopyError::Refused(format!(
            "a daemon serves {}; stop it first (`cairn serve` holds {})",
            database.display(),
            lock_path(database).display()
        ))),
    }
}

/// Copies `source` (a live database) whole into `destination`, in one step: a consistent
/// snapshot. `destination` is written beside itself first and renamed into place, so it is
/// never half a copy; it is a single file (no write-ahead log).
pub fn backup_database(source: &Path, destination: &Path) -> Result<(), CopyError> {
    if !source.is_file() {
        return Err(CopyError::Refused(format!("{} is not a database file", source.display())));
    }
    let from = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(sqlite(source))?;
    check_version(&from, source)?;
    copy(&from, source, destination)
}

/// Puts the copy `source` into `database` (a data directory's `cairn.db`), which must hold
/// no data, while no daemon serves it.
pub fn restore_database(source: &Path, database: &Path) -> Result<(), CopyError> {
    let _alone = exclusive_lock(database)?;
    if !source.is_file() {
        return Err(CopyError::Refused(format!("{} is not a backup file", source.display())));
    }
    let from = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(source))?;
    check_version(&from, source)?;
    let checked: String =
        from.query_row("PRAGMA quick_check", [], |row| row.get(0)).map_err(sqlite(source))?;
    if checked != "ok" {
        return Err(CopyError::Refused(format!(
            "{} is damaged ({checked}); nothing was restored",
            source.display()
        )));
    }
    if database.exists() {
        let rows = held_rows(database)?;
        if rows > 0 {
            return Err(CopyError::Refused(format!(
                "{} holds data already ({rows} memories, conversations and keys); restore into \
                 an empty data directory (nothing was changed)",
                database.display()
            )));
        }
    }
    copy(&from, source, database)?;
    for suffix in ["-wal", "-shm"] {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
    Ok(())
}

/// Refuses a file that is not a Cairn database, or one of a newer release.
fn check_version(connection: &Connection, path: &Path) -> Result<(), CopyError> {
    let version: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(sqlite(path))?;
    let has_memories: bool = connection
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'memories'",
            [],
            |row| row.get(0),
        )
        .map_err(sqlite(path))?;
    if version == 0 || !has_memories {
        return Err(CopyError::Refused(format!("{} is not a Cairn database", path.display())));
    }
    if version as usize > MIGRATIONS.len() {
        return Err(CopyError::Refused(format!(
            "{} was written by a newer Cairn (schema {version}, this one knows {}); use that \
             release",
            path.display(),
            MIGRATIONS.len()
        )));
    }
    Ok(())
}

/// Memories, conversations and keys in an existing database.
fn held_rows(database: &Path) -> Result<i64, CopyError> {
    let connection = Connection::open_with_flags(database, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(database))?;
    let mut rows = 0;
    for table in ["memories", "conversations", "api_keys"] {
        let exists: bool = connection
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |row| row.get(0),
            )
            .map_err(sqlite(database))?;
        if exists {
            let count: i64 = connection
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| row.get(0))
                .map_err(sqlite(database))?;
            rows += count;
        }
    }
    Ok(rows)
}

/// Copies `from` into `destination` through a file beside it, renamed into place.
fn copy(from: &Connection, source: &Path, destination: &Path) -> Result<(), CopyError> {
    let mut partial = destination.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let _ = std::fs::remove_file(&partial);
    let mut to = Connection::open(&partial).map_err(sqlite(&partial))?;
    {
        let backup = Backup::new(from, &mut to).map_err(sqlite(source))?;
        // The whole database in one step: one read transaction, a consistent snapshot. A
        // writer holding the database's lock at that instant makes the step wait its turn.
        loop {
            match backup.step(-1).map_err(sqlite(source))? {
                StepResult::Done => break,
                StepResult::More => {}
                // Busy or locked: a writer holds the database at this instant.
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    let mode: String = to
        .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
        .map_err(sqlite(&partial))?;
    debug_assert_eq!(mode, "delete");
    drop(to);
    crate::restrict_to_owner(&partial).map_err(|error| CopyError::Refused(error.to_string()))?;
    std::fs::rename(&partial, destination).map_err(io(destination))
}
