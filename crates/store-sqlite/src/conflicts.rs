//! Detected conflicts in SQLite.

use async_trait::async_trait;
use cairn_store::{ConflictRecord, ConflictStore, Result};
use cairn_types::Timestamp;
use rusqlite::{OptionalExtension, Row, params};

use crate::{SqliteStore, sql};

const COLUMNS: &str =
    "id, first_id, second_id, subject, reason, status, detected_at, resolution, resolved_at";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ConflictRecord> {
    Ok(ConflictRecord {
        id: row.get(0)?,
        first_id: row.get(1)?,
        second_id: row.get(2)?,
        subject: row.get(3)?,
        reason: row.get(4)?,
        status: row.get(5)?,
        detected_at: Timestamp::from_millis(row.get(6)?),
        resolution: row.get(7)?,
        resolved_at: row.get::<_, Option<i64>>(8)?.map(Timestamp::from_millis),
    })
}

#[async_trait]
impl ConflictStore for SqliteStore {
    async fn insert_conflicts(&self, conflicts: &[ConflictRecord]) -> Result<Vec<ConflictRecord>> {
        let conflicts = conflicts.to_vec();
        self.write(move |tx| {
            let mut insert = tx
                .prepare_cached(&format!(
                    "INSERT INTO conflicts ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                     ON CONFLICT (first_id, second_id) DO NOTHING"
                ))
                .map_err(sql)?;
            let mut stored = Vec::new();
            for conflict in conflicts {
                let inserted = insert
                    .execute(params![
                        conflict.id,
                        conflict.first_id,
                        conflict.second_id,
                        conflict.subject,
                        conflict.reason,
                        conflict.status,
                        conflict.detected_at.as_millis(),
                        conflict.resolution,
                        conflict.resolved_at.map(Timestamp::as_millis),
                    ])
                    .map_err(sql)?;
                if inserted == 1 {
                    stored.push(conflict);
                }
            }
            Ok(stored)
        })
        .await
    }

    async fn conflict_exists(&self, first_id: &str, second_id: &str) -> Result<bool> {
        let (first_id, second_id) = (first_id.to_owned(), second_id.to_owned());
        self.read(move |connection| {
            let found: Option<i64> = connection
                .prepare_cached("SELECT 1 FROM conflicts WHERE first_id = ?1 AND second_id = ?2")
                .map_err(sql)?
                .query_row([first_id, second_id], |row| row.get(0))
                .optional()
                .map_err(sql)?;
            Ok(found.is_some())
        })
        .await
    }

    async fn list_conflicts(&self, status: Option<&str>) -> Result<Vec<ConflictRecord>> {
        let status = status.map(str::to_owned);
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM conflicts WHERE ?1 IS NULL OR status = ?1 ORDER BY rowid DESC"
                ))
                .map_err(sql)?;
            let rows = statement.query_map([status], from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>> {
        let id = id.to_owned();
        self.read(move |connection| {
            connection
                .prepare_cached(&format!("SELECT {COLUMNS} FROM conflicts WHERE id = ?1"))
                .map_err(sql)?
                .query_row([id], from_row)
                .optional()
                .map_err(sql)
        })
        .await
    }

    async fn resolve_conflict(&self, id: &str, resolution: &str, at: Timestamp) -> Result<bool> {
        let (id, resolution) = (id.to_owned(), resolution.to_owned());
        self.write(move |tx| {
            let changed = tx
                .execute(
                    "UPDATE conflicts SET status = 'resolved', resolution = ?2, resolved_at = ?3 \
                     WHERE id = ?1 AND status = 'open'",
                    params![id, resolution, at.as_millis()],
                )
                .map_err(sql)?;
            Ok(changed == 1)
        })
        .await
    }
}
