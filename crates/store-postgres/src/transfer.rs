//! [`cairn_store::transfer::Transfer`] for PostgreSQL: export in one snapshot, import into an
//! empty schema.
//!
//! Every value travels through `to_jsonb` (export) and `jsonb_populate_recordset` (import),
//! so one generic statement serves every table: integers, strings and nulls as themselves,
//! the jsonb columns as JSON, the vector as a hex string. Text keys are ordered byte-wise
//! (`COLLATE "C"`), as SQLite orders them, so both sides read rows in the same order.

use async_trait::async_trait;
use cairn_store::transfer::{Export, TABLES, TableSpec, Transfer, table};
use cairn_store::{Result, StoreError};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use crate::memories::Counts;
use crate::rows::{execute, query};
use crate::{PgStore, pg};

/// The PostgreSQL table of a logical one (the same name) and its column for a logical column.
fn column(table: &str, name: &str) -> &'static str {
    match (table, name) {
        (_, "rowid") => "pk",
        ("embeddings", "memory_rowid") => "memory_pk",
        ("runtime_events", "offset") => "event_offset",
        ("runtime_prompts", "offset") => "prompt_offset",
        (_, other) => leak(other),
    }
}

/// Column names are `&'static str` in [`TABLES`]; this keeps the signature simple.
fn leak(name: &str) -> &'static str {
    TABLES
        .iter()
        .flat_map(|table| table.columns.iter())
        .find(|column| **column == name)
        .copied()
        .unwrap_or("")
}

/// Whether a key column holds integers (the others hold text).
fn integer_key(name: &str) -> bool {
    matches!(name, "rowid" | "seq" | "memory_rowid" | "offset")
}

fn spec(name: &str) -> Result<&'static TableSpec> {
    table(name).ok_or_else(|| StoreError::Corrupt(format!("no table `{name}` to transfer")))
}

/// One key value as a statement parameter.
fn key_param(value: &serde_json::Value) -> Result<Box<dyn ToSql + Sync + Send>> {
    match value {
        serde_json::Value::Number(number) => number
            .as_i64()
            .map(|n| Box::new(n) as Box<dyn ToSql + Sync + Send>)
            .ok_or_else(|| StoreError::Corrupt(format!("key {number} is not an integer"))),
        serde_json::Value::String(text) => Ok(Box::new(text.clone())),
        other => Err(StoreError::Corrupt(format!("key {other} is neither integer nor text"))),
    }
}

/// Reads rows of `spec` after `after` in key order (see [`Export::rows`]).
pub(crate) async fn read_rows(
    client: &(impl GenericClient + ?Sized),
    spec: &TableSpec,
    after: Option<&[serde_json::Value]>,
    limit: u32,
) -> Result<Vec<Vec<serde_json::Value>>> {
    let select: Vec<String> = spec
        .columns
        .iter()
        .map(|name| {
            let column = column(spec.name, name);
            if *name == "vector" {
                format!("to_jsonb(encode({column}, 'hex'))")
            } else {
                format!("to_jsonb({column})")
            }
        })
        .collect();
    let key = |name: &&str| {
        let column = column(spec.name, name);
        if integer_key(name) { column.to_owned() } else { format!("{column} COLLATE \"C\"") }
    };
    let keys: Vec<String> = spec.key.iter().map(key).collect();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut condition = String::new();
    if let Some(after) = after {
        let placeholders: Vec<String> = spec
            .key
            .iter()
            .enumerate()
            .map(|(n, name)| {
                if integer_key(name) {
                    format!("${}::bigint", n + 1)
                } else {
                    format!("${}::text COLLATE \"C\"", n + 1)
                }
            })
            .collect();
        condition = format!("WHERE ({}) > ({})", keys.join(", "), placeholders.join(", "));
        for value in after {
            params.push(key_param(value)?);
        }
    }
    params.push(Box::new(i64::from(limit)));
    let sql = format!(
        "SELECT {} FROM {} {condition} ORDER BY {} LIMIT ${}",
        select.join(", "),
        spec.name,
        keys.join(", "),
        params.len()
    );
    let params: Vec<&(dyn ToSql + Sync)> =
        params.iter().map(|param| &**param as &(dyn ToSql + Sync)).collect();
    let rows = client.query(&sql, &params).await.map_err(pg)?;
    Ok(rows
        .iter()
        .map(|row| {
            (0..spec.columns.len())
                .map(|index| {
                    row.get::<_, Option<serde_json::Value>>(index)
                        .unwrap_or(serde_json::Value::Null)
                })
                .collect()
        })
        .collect())
}

/// One read of the whole schema: a connection taken out of the pool, in a repeatable-read
/// transaction until dropped (then closed, never returned to the pool mid-transaction).
struct PgExport {
    client: Option<deadpool_postgres::Client>,
}

impl Drop for PgExport {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // Detached from the pool: dropping it closes the session and its transaction.
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

#[async_trait]
impl Export for PgExport {
    async fn rows(
        &mut self,
        table: &str,
        after: Option<&[serde_json::Value]>,
        limit: u32,
    ) -> Result<Vec<Vec<serde_json::Value>>> {
        let spec = spec(table)?;
        let client =
            self.client.as_ref().ok_or_else(|| StoreError::Corrupt("export closed".into()))?;
        read_rows(client, spec, after, limit).await
    }
}

#[async_trait]
impl Transfer for PgStore {
    async fn export(&self) -> Result<Box<dyn Export>> {
        let client = self.client().await?;
        client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")
            .await
            .map_err(pg)?;
        Ok(Box::new(PgExport { client: Some(client) }))
    }

    async fn is_empty(&self) -> Result<bool> {
        self.read((), |_, client, ()| {
            Box::pin(async move {
                let checks: Vec<String> = TABLES
                    .iter()
                    .map(|table| format!("NOT EXISTS (SELECT 1 FROM {})", table.name))
                    .collect();
                let empty: bool = query(client, &format!("SELECT {}", checks.join(" AND ")), &[])
                    .await?[0]
                    .get(0);
                Ok(empty)
            })
        })
        .await
    }

    async fn import_rows(&self, table: &str, rows: &[Vec<serde_json::Value>]) -> Result<()> {
        let spec = spec(table)?;
        if rows.is_empty() {
            return Ok(());
        }
        let records: Vec<serde_json::Value> = rows
            .iter()
            .map(|row| {
                let mut record = serde_json::Map::new();
                for (name, value) in spec.columns.iter().zip(row) {
                    let value = match (*name, value) {
                        // bytea's hex input format.
                        ("vector", serde_json::Value::String(hex)) => {
                            serde_json::Value::String(format!("\\x{hex}"))
                        }
                        _ => value.clone(),
                    };
                    record.insert(column(spec.name, name).to_owned(), value);
                }
                serde_json::Value::Object(record)
            })
            .collect();
        let columns: Vec<&str> = spec.columns.iter().map(|name| column(spec.name, name)).collect();
        let sql = format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} \
             FROM jsonb_populate_recordset(NULL::{table}, $1)",
            table = spec.name,
            columns = columns.join(", ")
        );
        let records = serde_json::Value::Array(records);
        self.tx_with_retry((sql, records), |_, tx, (sql, records)| {
            Box::pin(async move {
                execute(tx, sql, &[records]).await?;
                Ok(())
            })
        })
        .await
    }

    async fn finish_import(&self) -> Result<()> {
        self.tx_with_retry((), |store, tx, ()| {
            Box::pin(async move {
                for (table, column) in [
                    ("memories", "pk"),
                    ("task_recalls", "seq"),
                    ("outcomes", "pk"),
                    ("evidence", "pk"),
                    ("audit_log", "pk"),
                    ("connectors", "pk"),
                    ("conflict_sets", "pk"),
                ] {
                    query(
                        tx,
                        &format!(
                            "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), \
                             coalesce(max({column}), 0) + 1, false) FROM {table}"
                        ),
                        &[],
                    )
                    .await?;
                }
                // The full-text index, lengths and counts: derived, rebuilt here.
                execute(tx, "DELETE FROM memory_terms", &[]).await?;
                execute(tx, "UPDATE memory_counts SET live = 0, tokens = 0", &[]).await?;
                let mut counts = Counts::default();
                let mut after = 0i64;
                loop {
                    let rows = query(
                        tx,
                        "SELECT pk, content, tags FROM memories \
                         WHERE archived_at IS NULL AND pk > $1 ORDER BY pk LIMIT 1000",
                        &[&after],
                    )
                    .await?;
                    let Some(last) = rows.last() else { break };
                    after = last.get(0);
                    for row in &rows {
                        let pk: i64 = row.get(0);
                        let content: &str = row.get(1);
                        let tags: Vec<String> = crate::rows::from_json(row.get(2), "tags")?;
                        let tokens = crate::memories::index_memory(tx, pk, content, &tags).await?;
                        execute(
                            tx,
                            "UPDATE memories SET doc_tokens = $2 WHERE pk = $1",
                            &[&pk, &tokens],
                        )
                        .await?;
                        counts += Counts { live: 1, tokens: i64::from(tokens) };
                    }
                }
                execute(
                    tx,
                    "UPDATE memory_counts SET live = $1, tokens = $2 WHERE slot = 0",
                    &[&counts.live, &counts.tokens],
                )
                .await?;
                // Every memory changed: the other daemons rebuild their indexes.
                crate::notify::notify_memories(store, tx, &[]).await?;
                Ok(())
            })
        })
        .await?;
        if let Some(index) = self.text_index() {
            index.rebuild(&self.client().await?).await?;
        }
        // The store's own tables only: a bare ANALYZE walks every table of the database and
        // warns for each it does not own (the system catalogs, for one not a superuser).
        self.call((), |_, client, ()| {
            Box::pin(async move {
                let tables = client
                    .query(
                        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
                         WHERE schemaname = current_schema()",
                        &[],
                    )
                    .await
                    .map_err(pg)?;
                let names: Vec<String> = tables.iter().map(|row| row.get(0)).collect();
                if names.is_empty() {
                    return Ok(());
                }
                client.batch_execute(&format!("ANALYZE {}", names.join(", "))).await.map_err(pg)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_memory;
    use cairn_store::transfer::copy_table;
    use cairn_store::{MemoryStore, PendingEmbedding, VectorStore};
    use cairn_types::{Scope, Timestamp};

    use super::*;
    use crate::tests::options;
    use cairn_test_support::postgres::TestCluster;

    /// A schema with data, exported and imported into another schema, exports the same rows;
    /// the copy searches, counts and loads vectors as the original.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_export_imported_elsewhere_exports_the_same_rows() {
        let (_cluster, url) = TestCluster::with_database();
        let source = PgStore::open(options(&url, "source")).await.unwrap();
        let mut memories: Vec<_> = (0..25)
            .map(|n| sample_memory(&format!("deploy note {n} with tooling"), Scope::Repo, n))
            .collect();
        memories[3].archived_at = Some(Timestamp::from_millis(9));
        source.insert_memories(&memories, "tester").await.unwrap();
        source
            .record_recall(&[memories[0].id.clone()], "task-1", Timestamp::from_millis(5))
            .await
            .unwrap();
        let pending = source.pending_embeddings("m", 0, 2).await.unwrap();
        let vectors: Vec<(PendingEmbedding, Vec<f32>)> =
            pending.into_iter().map(|p| (p, vec![0.25, -1.5, 3.0])).collect();
        source.store_embeddings("m", &vectors).await.unwrap();

        let target = PgStore::open(options(&url, "target")).await.unwrap();
        assert!(target.is_empty().await.unwrap());
        assert!(!source.is_empty().await.unwrap());
        let mut export = source.export().await.unwrap();
        for spec in TABLES {
            copy_table(export.as_mut(), &target, spec, 7, &mut |_| {}).await.unwrap();
        }
        target.finish_import().await.unwrap();
        drop(export);

        let mut original = source.export().await.unwrap();
        let mut copy = target.export().await.unwrap();
        for spec in TABLES {
            let a = original.rows(spec.name, None, u32::MAX).await.unwrap();
            let b = copy.rows(spec.name, None, u32::MAX).await.unwrap();
            assert_eq!(a, b, "table {}", spec.name);
        }
        assert_eq!(target.count_memories().await.unwrap(), 24);
        let terms = vec!["deploy".to_owned()];
        let ours = source.search_memories(&terms, &Default::default(), 10).await.unwrap();
        let theirs = target.search_memories(&terms, &Default::default(), 10).await.unwrap();
        assert_eq!(ours, theirs, "the copy ranks as the original");
        assert_eq!(theirs.len(), 10);
        assert_eq!(
            target.load_embeddings("m").await.unwrap(),
            source.load_embeddings("m").await.unwrap()
        );
        assert_eq!(target.load_embeddings("m").await.unwrap().len(), 2);
        // New rows after an import get keys past the imported ones.
        target.insert_memories(&[sample_memory("after", Scope::User, 99)], "tester").await.unwrap();
        assert_eq!(target.count_memories().await.unwrap(), 25);
    }
}
