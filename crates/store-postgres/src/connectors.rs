//! [`cairn_store::ConnectorStore`] on PostgreSQL: connectors and the items they imported.
//!
//! A sync batch runs under an advisory lock on its connector, so two daemons applying
//! batches of one connector take turns, as SQLite's single writer made them.

use async_trait::async_trait;
use cairn_store::{
    Audit, BatchApplied, ConnectorItem, ConnectorStore, MemoryChange, Result, StoreError, SyncBatch,
};
use cairn_types::{Connector, ConnectorKind, SyncReport, Timestamp};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::memories::{
    Counts, insert_memory_row, move_counts, notify, read_stored, update_memory_row,
};
use crate::rows::{execute, from_json, json_value, query, query_opt};
use crate::{PgStore, lock_key};

const CONNECTOR_COLUMNS: &str =
    "id, kind, name, path, scope, repo, max_commits, created_at, last_sync";

fn connector_from_row(row: &Row) -> Result<Connector> {
    let kind: &str = row.get(1);
    let kind = match kind {
        "folder" => ConnectorKind::Folder,
        "git" => ConnectorKind::Git,
        other => return Err(StoreError::Corrupt(format!("unknown connector kind `{other}`"))),
    };
    let scope: &str = row.get(4);
    let last_sync: Option<serde_json::Value> = row.get(8);
    Ok(Connector {
        id: row.get(0),
        kind,
        name: row.get(2),
        path: row.get(3),
        scope: scope.parse().map_err(StoreError::Corrupt)?,
        repo: row.get(5),
        max_commits: row.get::<_, i32>(6) as u32,
        created_at: Timestamp::from_millis(row.get(7)),
        last_sync: last_sync.map(|value| from_json(value, "last_sync")).transpose()?,
    })
}

#[async_trait]
impl ConnectorStore for PgStore {
    async fn insert_connector(&self, connector: &Connector) -> Result<()> {
        self.call(connector.clone(), |_, client, connector| {
            Box::pin(async move {
                execute(
                    client,
                    &format!(
                        "INSERT INTO connectors ({CONNECTOR_COLUMNS}) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    ),
                    &[
                        &connector.id,
                        &connector.kind.as_str(),
                        &connector.name,
                        &connector.path,
                        &connector.scope.as_str(),
                        &connector.repo,
                        &(connector.max_commits as i32),
                        &connector.created_at.as_millis(),
                        &connector.last_sync.as_ref().map(json_value),
                    ],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn list_connectors(&self) -> Result<Vec<Connector>> {
        let sql = format!("SELECT {CONNECTOR_COLUMNS} FROM connectors ORDER BY pk");
        self.select(sql, Vec::new(), connector_from_row).await
    }

    async fn get_connector(&self, id: &str) -> Result<Option<Connector>> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let row = query_opt(
                    client,
                    &format!("SELECT {CONNECTOR_COLUMNS} FROM connectors WHERE id = $1"),
                    &[id],
                )
                .await?;
                row.as_ref().map(connector_from_row).transpose()
            })
        })
        .await
    }

    async fn delete_connector(&self, id: &str) -> Result<bool> {
        self.tx_with_retry(id.to_owned(), |_, tx, id| {
            Box::pin(async move {
                execute(tx, "DELETE FROM connector_items WHERE connector_id = $1", &[id]).await?;
                let deleted = execute(tx, "DELETE FROM connectors WHERE id = $1", &[id]).await?;
                Ok(deleted == 1)
            })
        })
        .await
    }

    async fn record_sync(&self, id: &str, report: &SyncReport) -> Result<()> {
        self.call((id.to_owned(), json_value(report)), |_, client, (id, report)| {
            Box::pin(async move {
                execute(
                    client,
                    "UPDATE connectors SET last_sync = $2 WHERE id = $1",
                    &[id, report],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn connector_items(&self, id: &str) -> Result<Vec<ConnectorItem>> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let rows = query(
                    client,
                    "SELECT key, memory_id, content_hash FROM connector_items \
                     WHERE connector_id = $1 ORDER BY key",
                    &[id],
                )
                .await?;
                Ok(rows
                    .iter()
                    .map(|row| {
                        let memory_id: String = row.get(1);
                        // An empty memory id marks a piece whose memory was erased.
                        let memory_id = Some(memory_id).filter(|id| !id.is_empty());
                        ConnectorItem { key: row.get(0), memory_id, content_hash: row.get(2) }
                    })
                    .collect())
            })
        })
        .await
    }

    async fn connector_memory_count(&self, id: &str) -> Result<u64> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let count: i64 = query(
                    client,
                    "SELECT count(*) FROM connector_items i JOIN memories m ON m.id = i.memory_id \
                     WHERE i.connector_id = $1 AND m.archived_at IS NULL",
                    &[id],
                )
                .await?[0]
                    .get(0);
                Ok(count as u64)
            })
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
        let data = (connector_id.to_owned(), batch.clone(), actor.to_owned());
        self.tx_with_retry(data, move |store, tx, (connector_id, batch, actor)| {
            Box::pin(async move {
                let key = lock_key(store.schema(), &format!("connector:{connector_id}"));
                execute(tx, "SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
                let (applied, counts, changed) =
                    apply_batch(tx, connector_id, batch, at, actor).await?;
                move_counts(tx, counts).await?;
                notify(store, tx, &changed).await?;
                Ok(applied)
            })
        })
        .await
    }
}

async fn stored_item(
    tx: &(impl GenericClient + ?Sized),
    connector_id: &str,
    key: &str,
) -> Result<Option<(String, String)>> {
    Ok(query_opt(
        tx,
        "SELECT memory_id, content_hash FROM connector_items WHERE connector_id = $1 AND key = $2",
        &[&connector_id, &key],
    )
    .await?
    .map(|row| (row.get(0), row.get(1))))
}

async fn remember_item(
    tx: &(impl GenericClient + ?Sized),
    connector_id: &str,
    key: &str,
    memory_id: &str,
    hash: &str,
) -> Result<()> {
    execute(
        tx,
        "INSERT INTO connector_items (connector_id, key, memory_id, content_hash) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (connector_id, key) DO UPDATE SET memory_id = $3, content_hash = $4",
        &[&connector_id, &key, &memory_id, &hash],
    )
    .await?;
    Ok(())
}

/// One sync batch in `tx`, checked against the items as they are now (see
/// [`ConnectorStore::apply_sync_batch`]): what it changed, how the counts move, and the
/// memories written.
async fn apply_batch(
    tx: &(impl GenericClient + ?Sized),
    connector_id: &str,
    batch: &SyncBatch,
    at: Timestamp,
    actor: &str,
) -> Result<(BatchApplied, Counts, Vec<String>)> {
    let mut applied = BatchApplied::default();
    let mut counts = Counts::default();
    let mut changed = Vec::new();
    let import = Audit { actor, action: "import" };
    let text_change = |content: &str| MemoryChange {
        content: Some(content.to_owned()),
        ..MemoryChange::default()
    };
    for (memory, key, hash) in &batch.inserts {
        match stored_item(tx, connector_id, key).await? {
            // Erased: it stays so.
            Some((memory_id, _)) if memory_id.is_empty() => {}
            // Imported already (a retried batch): the memory follows the piece, once.
            Some((memory_id, stored)) if read_stored(tx, &memory_id, false).await?.is_some() => {
                if stored != *hash {
                    if let Some((_, _, moved)) = update_memory_row(
                        tx,
                        &memory_id,
                        &text_change(&memory.content),
                        at,
                        &import,
                    )
                    .await?
                    {
                        counts += moved;
                    }
                    remember_item(tx, connector_id, key, &memory_id, hash).await?;
                    changed.push(memory_id);
                    applied.updated += 1;
                }
            }
            _ => {
                counts += insert_memory_row(tx, memory, &import).await?;
                remember_item(tx, connector_id, key, &memory.id, hash).await?;
                changed.push(memory.id.clone());
                applied.imported += 1;
            }
        }
    }
    for update in &batch.updates {
        let Some((memory_id, stored)) = stored_item(tx, connector_id, &update.key).await? else {
            continue;
        };
        if memory_id.is_empty() || stored == update.content_hash {
            continue;
        }
        if let Some((_, _, moved)) =
            update_memory_row(tx, &memory_id, &text_change(&update.content), at, &import).await?
        {
            counts += moved;
            remember_item(tx, connector_id, &update.key, &memory_id, &update.content_hash).await?;
            changed.push(memory_id);
            applied.updated += 1;
        }
    }
    let archive = Audit { actor, action: "archive" };
    for removed in &batch.removals {
        let Some((memory_id, _)) = stored_item(tx, connector_id, &removed.key).await? else {
            continue;
        };
        if memory_id.is_empty() {
            continue;
        }
        let current = read_stored(tx, &memory_id, false).await?;
        if current.is_some_and(|stored| stored.memory.archived_at.is_none()) {
            let change = MemoryChange { archived_at: Some(Some(at)), ..MemoryChange::default() };
            if let Some((_, _, moved)) =
                update_memory_row(tx, &memory_id, &change, at, &archive).await?
            {
                counts += moved;
            }
            changed.push(memory_id);
        }
        execute(
            tx,
            "DELETE FROM connector_items WHERE connector_id = $1 AND key = $2",
            &[&connector_id, &removed.key],
        )
        .await?;
        applied.archived += 1;
    }
    Ok((applied, counts, changed))
}
