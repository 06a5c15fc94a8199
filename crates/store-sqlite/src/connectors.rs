//! Connectors and the pieces they imported, in SQLite.

use async_trait::async_trait;
use cairn_store::{
    Audit, BatchApplied, ConnectorItem, ConnectorStore, MemoryChange, Result, StoreError, SyncBatch,
};
use cairn_types::{Connector, ConnectorKind, Timestamp};
use rusqlite::{OptionalExtension, Row, params};

use crate::memory_rows::{insert_memory_row, update_memory_row};
use crate::rows::json_text;
use crate::{SqliteStore, sql};

const CONNECTOR_COLUMNS: &str =
    "id, kind, name, path, scope, repo, max_commits, created_at, last_sync";

fn connector_from_row(row: &Row<'_>) -> rusqlite::Result<Result<Connector>> {
    let kind: String = row.get(1)?;
    let scope: String = row.get(4)?;
    let last_sync: Option<String> = row.get(8)?;
    let id: String = row.get(0)?;
    let name: String = row.get(2)?;
    let path: String = row.get(3)?;
    let repo: Option<String> = row.get(5)?;
    let max_commits: i64 = row.get(6)?;
    let created_at: i64 = row.get(7)?;
    Ok((|| {
        let kind = match kind.as_str() {
            "folder" => ConnectorKind::Folder,
            "git" => ConnectorKind::Git,
            other => return Err(StoreError::Corrupt(format!("unknown connector kind `{other}`"))),
        };
        let last_sync = last_sync
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|error| StoreError::Corrupt(format!("connector last_sync: {error}")))?;
        Ok(Connector {
            id,
            kind,
            name,
            path,
            scope: scope.parse().map_err(StoreError::Corrupt)?,
            repo,
            max_commits: max_commits as u32,
            created_at: Timestamp::from_millis(created_at),
            last_sync,
        })
    })())
}

#[async_trait]
impl ConnectorStore for SqliteStore {
    async fn insert_connector(&self, connector: &Connector) -> Result<()> {
        let connector = connector.clone();
        self.write(move |tx| {
            tx.prepare_cached(&format!(
                "INSERT INTO connectors ({CONNECTOR_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .map_err(sql)?
            .execute(params![
                connector.id,
                connector.kind.as_str(),
                connector.name,
                connector.path,
                connector.scope.as_str(),
                connector.repo,
                connector.max_commits,
                connector.created_at.as_millis(),
                connector.last_sync.as_ref().map(json_text),
            ])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn list_connectors(&self) -> Result<Vec<Connector>> {
        self.read(|connection| {
            let mut statement = connection
                .prepare_cached(&format!(
                    "SELECT {CONNECTOR_COLUMNS} FROM connectors ORDER BY rowid"
                ))
                .map_err(sql)?;
            let rows = statement.query_map([], connector_from_row).map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn get_connector(&self, id: &str) -> Result<Option<Connector>> {
        let id = id.to_owned();
        self.read(move |connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {CONNECTOR_COLUMNS} FROM connectors WHERE id = ?1"
                ))
                .map_err(sql)?
                .query_row([id], connector_from_row)
                .optional()
                .map_err(sql)?
                .transpose()
        })
        .await
    }

    async fn delete_connector(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |tx| {
            tx.execute("DELETE FROM connector_items WHERE connector_id = ?1", [&id])
                .map_err(sql)?;
            let deleted = tx.execute("DELETE FROM connectors WHERE id = ?1", [&id]).map_err(sql)?;
            Ok(deleted == 1)
        })
        .await
    }

    async fn record_sync(&self, id: &str, report: &cairn_types::SyncReport) -> Result<()> {
        let (id, report) = (id.to_owned(), json_text(report));
        self.write(move |tx| {
            tx.execute("UPDATE connectors SET last_sync = ?2 WHERE id = ?1", params![id, report])
                .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn connector_items(&self, id: &str) -> Result<Vec<ConnectorItem>> {
        let id = id.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached("SELECT key, memory_id, content_hash FROM connector_items WHERE connector_id = ?1")
                .map_err(sql)?;
            let rows = statement
                .query_map([id], |row| {
                    let memory_id: String = row.get(1)?;
                    // An empty memory id marks a piece whose memory was erased.
                    let memory_id = Some(memory_id).filter(|id| !id.is_empty());
                    Ok(ConnectorItem { key: row.get(0)?, memory_id, content_hash: row.get(2)? })
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn connector_memory_count(&self, id: &str) -> Result<u64> {
        let id = id.to_owned();
        self.read(move |connection| {
            let count: i64 = connection
                .prepare_cached(
                    "SELECT count(*) FROM connector_items i JOIN memories m ON m.id = i.memory_id \
                     WHERE i.connector_id = ?1 AND m.archived_at IS NULL",
                )
                .map_err(sql)?
                .query_row([id], |row| row.get(0))
                .map_err(sql)?;
            Ok(count as u64)
        })
        .await
    }

    async fn apply_sync_batch(
        &self,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied> {
        let (connector_id, batch, actor) =
            (connector_id.to_owned(), batch.clone(), actor.to_owned());
        self.write_counted(move |tx| apply_batch(tx, &connector_id, &batch, at, &actor)).await
    }
}

/// One sync batch in `tx`, checked against the items as they are now (see
/// [`ConnectorStore::apply_sync_batch`]): what it changed, and the change in live memories.
fn apply_batch(
    tx: &rusqlite::Transaction<'_>,
    connector_id: &str,
    batch: &SyncBatch,
    at: Timestamp,
    actor: &str,
) -> Result<(BatchApplied, i64)> {
    let mut applied = BatchApplied::default();
    let mut live_change: i64 = 0;
    let import = Audit { actor, action: "import" };
    let stored_item = |key: &str| -> Result<Option<(String, String)>> {
        tx.prepare_cached(
            "SELECT memory_id, content_hash FROM connector_items WHERE connector_id = ?1 AND key = ?2",
        )
        .map_err(sql)?
        .query_row(params![connector_id, key], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
        .map_err(sql)
    };
    let remember_item = |key: &str, memory_id: &str, hash: &str| {
        tx.prepare_cached(
            "INSERT INTO connector_items (connector_id, key, memory_id, content_hash) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (connector_id, key) DO UPDATE SET memory_id = ?3, content_hash = ?4",
        )
        .map_err(sql)?
        .execute(params![connector_id, key, memory_id, hash])
        .map_err(sql)
    };
    let new_text = |memory_id: &str, content: &str| {
        let change = MemoryChange { content: Some(content.to_owned()), ..MemoryChange::default() };
        update_memory_row(tx, memory_id, &change, at, &import)
    };
    for (memory, key, hash) in &batch.inserts {
        match stored_item(key)? {
            // Erased: it stays so.
            Some((memory_id, _)) if memory_id.is_empty() => {}
            // Imported already (a retried batch): the memory follows the piece, once.
            Some((memory_id, stored))
                if crate::memory_rows::read_memory(tx, &memory_id)?.is_some() =>
            {
                if stored != *hash {
                    new_text(&memory_id, &memory.content)?;
                    remember_item(key, &memory_id, hash)?;
                    applied.updated += 1;
                }
            }
            _ => {
                insert_memory_row(tx, memory, &import)?;
                remember_item(key, &memory.id, hash)?;
                live_change += i64::from(memory.archived_at.is_none());
                applied.imported += 1;
            }
        }
    }
    for update in &batch.updates {
        let Some((memory_id, stored)) = stored_item(&update.key)? else { continue };
        if memory_id.is_empty() {
            continue;
        }
        if stored != update.content_hash && new_text(&memory_id, &update.content)?.is_some() {
            remember_item(&update.key, &memory_id, &update.content_hash)?;
            applied.updated += 1;
        }
    }
    let archive = Audit { actor, action: "archive" };
    for removed in &batch.removals {
        let Some((memory_id, _)) = stored_item(&removed.key)? else { continue };
        if memory_id.is_empty() {
            continue;
        }
        let current = crate::memory_rows::read_memory(tx, &memory_id)?;
        if current.is_some_and(|memory| memory.archived_at.is_none()) {
            let change = MemoryChange { archived_at: Some(Some(at)), ..MemoryChange::default() };
            update_memory_row(tx, &memory_id, &change, at, &archive)?;
            live_change -= 1;
        }
        tx.execute(
            "DELETE FROM connector_items WHERE connector_id = ?1 AND key = ?2",
            params![connector_id, removed.key],
        )
        .map_err(sql)?;
        applied.archived += 1;
    }
    Ok((applied, live_change))
}

#[cfg(test)]
mod tests {
    use crate::tests::fresh_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_connectors_pass_the_conformance_checks() {
        let directory = tempfile::tempdir().unwrap();
        cairn_store::conformance::run_connectors(fresh_stores(&directory, "connectors")).await;
    }
}
