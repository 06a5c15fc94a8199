//! [`cairn_store::transfer::Transfer`] for SQLite: the whole file exported from one read
//! snapshot, so `cairn migrate` can move a solo daemon's data to PostgreSQL.
//!
//! Values travel as JSON: integers, reals, strings and nulls as themselves, the columns that
//! hold JSON documents (tags, metadata, evidence lists, a connector's last sync, a
//! conversation's channel) parsed, the vector blob as a hex string.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_store::transfer::{Export, TABLES, TableSpec, Transfer, table};
use cairn_store::{Result, StoreError};
use r2d2::PooledConnection;
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::types::{Value as SqlValue, ValueRef};

use crate::{SqliteStore, run_blocking, sql};

/// The columns that hold JSON documents (exported parsed, imported as their text).
const JSON_COLUMNS: &[&str] =
    &["tags", "metadata", "files", "commands", "memories_used", "last_sync", "channel"];

fn spec(name: &str) -> Result<&'static TableSpec> {
    table(name).ok_or_else(|| StoreError::Corrupt(format!("no table `{name}` to transfer")))
}

fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn from_hex(text: &str) -> Result<Vec<u8>> {
    let corrupt = || StoreError::Corrupt(format!("not hex: {text:.20}"));
    if !text.len().is_multiple_of(2) {
        return Err(corrupt());
    }
    (0..text.len())
        .step_by(2)
        .map(|at| {
            u8::from_str_radix(text.get(at..at + 2).ok_or_else(corrupt)?, 16).map_err(|_| corrupt())
        })
        .collect()
}

fn to_json(column: &str, value: ValueRef<'_>) -> Result<serde_json::Value> {
    Ok(match value {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(n) => n.into(),
        ValueRef::Real(x) => {
            serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into)
        }
        ValueRef::Text(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            if JSON_COLUMNS.contains(&column) {
                serde_json::from_str(&text)
                    .map_err(|error| StoreError::Corrupt(format!("column {column}: {error}")))?
            } else {
                serde_json::Value::String(text.into_owned())
            }
        }
        ValueRef::Blob(bytes) => serde_json::Value::String(to_hex(bytes)),
    })
}

fn to_sql(column: &str, value: &serde_json::Value) -> Result<SqlValue> {
    Ok(match value {
        serde_json::Value::Null => SqlValue::Null,
        _ if JSON_COLUMNS.contains(&column) => SqlValue::Text(value.to_string()),
        serde_json::Value::String(hex) if column == "vector" => SqlValue::Blob(from_hex(hex)?),
        serde_json::Value::String(text) => SqlValue::Text(text.clone()),
        serde_json::Value::Bool(flag) => SqlValue::Integer(i64::from(*flag)),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(n) => SqlValue::Integer(n),
            None => SqlValue::Real(number.as_f64().unwrap_or_default()),
        },
        other => SqlValue::Text(other.to_string()),
    })
}

/// Reads rows of `spec` after `after`, in key order.
fn read_rows(
    connection: &rusqlite::Connection,
    spec: &TableSpec,
    after: Option<&[serde_json::Value]>,
    limit: u32,
) -> Result<Vec<Vec<serde_json::Value>>> {
    let columns: Vec<String> = spec.columns.iter().map(|name| quoted(name)).collect();
    let keys: Vec<String> = spec.key.iter().map(|name| quoted(name)).collect();
    let mut params: Vec<SqlValue> = Vec::new();
    let mut condition = String::new();
    if let Some(after) = after {
        let placeholders: Vec<String> = (1..=spec.key.len()).map(|n| format!("?{n}")).collect();
        condition = format!("WHERE ({}) > ({})", keys.join(", "), placeholders.join(", "));
        for (name, value) in spec.key.iter().zip(after) {
            params.push(to_sql(name, value)?);
        }
    }
    params.push(SqlValue::Integer(i64::from(limit)));
    let query = format!(
        "SELECT {} FROM {} {condition} ORDER BY {} LIMIT ?{}",
        columns.join(", "),
        spec.name,
        keys.join(", "),
        params.len()
    );
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let mut rows = statement.query(rusqlite::params_from_iter(params)).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let mut values = Vec::with_capacity(spec.columns.len());
        for (index, name) in spec.columns.iter().enumerate() {
            values.push(to_json(name, row.get_ref(index).map_err(sql)?)?);
        }
        out.push(values);
    }
    Ok(out)
}

/// One read transaction on a pooled reader, held until dropped.
struct SqliteExport {
    connection: Arc<Mutex<Option<PooledConnection<SqliteConnectionManager>>>>,
}

impl Drop for SqliteExport {
    fn drop(&mut self) {
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(connection) = connection.take() {
            let _ = connection.execute_batch("ROLLBACK");
        }
    }
}

#[async_trait]
impl Export for SqliteExport {
    async fn rows(
        &mut self,
        table: &str,
        after: Option<&[serde_json::Value]>,
        limit: u32,
    ) -> Result<Vec<Vec<serde_json::Value>>> {
        let spec = spec(table)?;
        let after = after.map(<[serde_json::Value]>::to_vec);
        let connection = self.connection.clone();
        run_blocking(move || {
            let connection = connection.lock().unwrap_or_else(|e| e.into_inner());
            let connection =
                connection.as_ref().ok_or_else(|| StoreError::Corrupt("export closed".into()))?;
            read_rows(connection, spec, after.as_deref(), limit)
        })
        .await
    }
}

#[async_trait]
impl Transfer for SqliteStore {
    async fn export(&self) -> Result<Box<dyn Export>> {
        let pool = self.readers.clone();
        let connection = run_blocking(move || {
            let connection = pool.get().map_err(StoreError::backend)?;
            // The snapshot starts at the first read: taken now, for every table.
            connection.execute_batch("BEGIN; SELECT count(*) FROM memories;").map_err(sql)?;
            Ok(connection)
        })
        .await?;
        Ok(Box::new(SqliteExport { connection: Arc::new(Mutex::new(Some(connection))) }))
    }

    async fn is_empty(&self) -> Result<bool> {
        self.read(|connection| {
            let checks: Vec<String> = TABLES
                .iter()
                .map(|table| format!("NOT EXISTS (SELECT 1 FROM {})", table.name))
                .collect();
            connection
                .query_row(&format!("SELECT {}", checks.join(" AND ")), [], |row| row.get(0))
                .map_err(sql)
        })
        .await
    }

    async fn import_rows(&self, table: &str, rows: &[Vec<serde_json::Value>]) -> Result<()> {
        let spec = spec(table)?;
        let rows = rows.to_vec();
        self.write(move |tx| {
            let columns: Vec<String> = spec.columns.iter().map(|name| quoted(name)).collect();
            let placeholders: Vec<String> =
                (1..=spec.columns.len()).map(|n| format!("?{n}")).collect();
            let mut statement = tx
                .prepare_cached(&format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    spec.name,
                    columns.join(", "),
                    placeholders.join(", ")
                ))
                .map_err(sql)?;
            for row in &rows {
                let values = spec
                    .columns
                    .iter()
                    .zip(row)
                    .map(|(name, value)| to_sql(name, value))
                    .collect::<Result<Vec<_>>>()?;
                statement.execute(rusqlite::params_from_iter(values)).map_err(sql)?;
            }
            Ok(())
        })
        .await
    }

    async fn finish_import(&self) -> Result<()> {
        // The full-text index follows the rows by trigger; the live count is taken again.
        let count: i64 = self
            .write(|tx| {
                tx.query_row("SELECT count(*) FROM memories WHERE archived_at IS NULL", [], |row| {
                    row.get(0)
                })
                .map_err(sql)
            })
            .await?;
        self.writer.live_memories.store(count as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::MemoryStore;
    use cairn_store::conformance::sample_memory;
    use cairn_store::transfer::copy_table;
    use cairn_types::Scope;

    use super::*;

    /// Every table of a store with data, exported and imported into another file, exports
    /// the same rows; the copy searches and counts as the original.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_export_imported_elsewhere_exports_the_same_rows() {
        let directory = tempfile::tempdir().unwrap();
        let source = SqliteStore::open(&directory.path().join("a.db")).unwrap();
        let mut memories: Vec<_> = (0..25)
            .map(|n| sample_memory(&format!("deploy note {n} with tooling"), Scope::Repo, n))
            .collect();
        memories[3].archived_at = Some(cairn_types::Timestamp::from_millis(9));
        source.insert_memories(&memories, "tester").await.unwrap();
        source
            .record_recall(
                &[memories[0].id.clone()],
                "task-1",
                cairn_types::Timestamp::from_millis(5),
            )
            .await
            .unwrap();
        let target = SqliteStore::open(&directory.path().join("b.db")).unwrap();
        assert!(target.is_empty().await.unwrap());
        assert!(!source.is_empty().await.unwrap());

        let mut export = source.export().await.unwrap();
        for spec in TABLES {
            copy_table(export.as_mut(), &target, spec, 7, &mut |_| {}).await.unwrap();
        }
        target.finish_import().await.unwrap();

        let mut again = target.export().await.unwrap();
        let mut original = source.export().await.unwrap();
        for spec in TABLES {
            let a = original.rows(spec.name, None, u32::MAX).await.unwrap();
            let b = again.rows(spec.name, None, u32::MAX).await.unwrap();
            assert_eq!(a, b, "table {}", spec.name);
        }
        assert_eq!(target.count_memories().await.unwrap(), 24);
        let terms = vec!["deploy".to_owned()];
        let hits = target.search_memories(&terms, &Default::default(), 50).await.unwrap();
        assert_eq!(hits.len(), 24, "the copy's full-text index holds every live memory");
    }
}
