//! Embeddings in SQLite: little-endian `f32` blobs beside the memory they belong to.

use async_trait::async_trait;
use cairn_store::{PendingEmbedding, Result, VectorStore};
use cairn_types::Timestamp;
use rusqlite::params;

use crate::{SqliteStore, sql};

/// The live memories without a current vector of model ?1.
const PENDING: &str = "FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.rowid AND e.model = ?1 \
     WHERE m.archived_at IS NULL AND (e.version IS NULL OR e.version <> m.updated_at)";

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .collect()
}

#[async_trait]
impl VectorStore for SqliteStore {
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<PendingEmbedding>> {
        let model = model.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(&format!(
                    "SELECT m.rowid, m.id, m.content, m.updated_at {PENDING} AND m.rowid > ?3 ORDER BY m.rowid LIMIT ?2"
                ))
                .map_err(sql)?;
            let rows = statement
                .query_map(params![model, limit, after], |row| {
                    Ok(PendingEmbedding {
                        position: row.get(0)?,
                        memory_id: row.get(1)?,
                        content: row.get(2)?,
                        version: Timestamp::from_millis(row.get(3)?),
                    })
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn count_pending_embeddings(&self, model: &str) -> Result<u64> {
        let model = model.to_owned();
        self.read(move |connection| {
            let count: i64 = connection
                .prepare_cached(&format!("SELECT count(*) {PENDING}"))
                .map_err(sql)?
                .query_row([model], |row| row.get(0))
                .map_err(sql)?;
            Ok(count as u64)
        })
        .await
    }

    async fn store_embeddings(
        &self,
        model: &str,
        vectors: &[(PendingEmbedding, Vec<f32>)],
    ) -> Result<()> {
        let model = model.to_owned();
        let rows: Vec<(String, i64, Vec<u8>)> = vectors
            .iter()
            .map(|(pending, vector)| {
                (pending.memory_id.clone(), pending.version.as_millis(), to_blob(vector))
            })
            .collect();
        self.write_relaxed(move |tx| {
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO embeddings (memory_rowid, model, version, vector) \
                     SELECT rowid, ?2, ?3, ?4 FROM memories WHERE id = ?1 AND updated_at = ?3 \
                     ON CONFLICT (memory_rowid, model) DO UPDATE SET version = excluded.version, vector = excluded.vector",
                )
                .map_err(sql)?;
            for (memory_id, version, blob) in &rows {
                upsert.execute(params![memory_id, model, version, blob]).map_err(sql)?;
            }
            Ok(())
        })
        .await
    }

    async fn load_embeddings(&self, model: &str) -> Result<Vec<(String, Vec<f32>)>> {
        let model = model.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT m.id, e.vector FROM embeddings e JOIN memories m ON m.rowid = e.memory_rowid \
                     WHERE e.model = ?1 AND e.version = m.updated_at AND m.archived_at IS NULL",
                )
                .map_err(sql)?;
            let rows = statement
                .query_map([model], |row| Ok((row.get::<_, String>(0)?, from_blob(&row.get::<_, Vec<u8>>(1)?))))
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn embeddings_page(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, String, Vec<f32>)>> {
        let model = model.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT e.memory_rowid, m.id, e.vector FROM embeddings e JOIN memories m ON m.rowid = e.memory_rowid \
                     WHERE e.model = ?1 AND e.memory_rowid > ?2 AND e.version = m.updated_at AND m.archived_at IS NULL \
                     ORDER BY e.memory_rowid LIMIT ?3",
                )
                .map_err(sql)?;
            let rows = statement
                .query_map(params![model, after, limit], |row| {
                    Ok((row.get(0)?, row.get::<_, String>(1)?, from_blob(&row.get::<_, Vec<u8>>(2)?)))
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn load_embeddings_of(
        &self,
        model: &str,
        ids: &[String],
    ) -> Result<Vec<(String, Vec<f32>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let model = model.to_owned();
        let ids = serde_json::to_string(ids).map_err(cairn_store::StoreError::backend)?;
        self.read(move |connection| {
            // One statement for them all: the ids' JSON array is walked first (CROSS JOIN
            // keeps that order), each found by the memories' id index and its vector by the
            // embeddings' key, instead of a statement run per id.
            let mut statement = connection
                .prepare_cached(
                    "SELECT m.id, e.vector FROM json_each(?2) j CROSS JOIN memories m ON m.id = j.value \
                     JOIN embeddings e ON e.memory_rowid = m.rowid AND e.model = ?1 \
                     WHERE e.version = m.updated_at AND m.archived_at IS NULL",
                )
                .map_err(sql)?;
            let rows = statement
                .query_map(params![model, ids], |row| {
                    Ok((row.get::<_, String>(0)?, from_blob(&row.get::<_, Vec<u8>>(1)?)))
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }
}
