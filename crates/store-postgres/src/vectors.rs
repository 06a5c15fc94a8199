//! [`cairn_store::VectorStore`] on PostgreSQL: vectors as little-endian f32 `bytea`, one per
//! memory and model, exactly as SQLite's blobs. Every daemon keeps its own in-memory index
//! loaded from the table; the vectors one daemon stores reach the others by notification.

use async_trait::async_trait;
use cairn_store::{PendingEmbedding, Result, VectorStore};
use cairn_types::Timestamp;
use futures_util::TryStreamExt as _;

use crate::pg;
use crate::rows::query;
use crate::{PgStore, notify};

const PENDING: &str = "FROM memories m LEFT JOIN embeddings e ON e.memory_pk = m.pk AND e.model = $1 \
     WHERE m.archived_at IS NULL AND (e.version IS NULL OR e.version <> m.updated_at)";

/// The most ids one vectors notification names.
const NOTIFY_BATCH: usize = 32;

pub(crate) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

pub(crate) fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|bytes| f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .collect()
}

#[async_trait]
impl VectorStore for PgStore {
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<PendingEmbedding>> {
        self.read(model.to_owned(), move |_, client, model| {
            Box::pin(async move {
                let rows = query(
                    client,
                    &format!(
                        "SELECT m.pk, m.id, m.content, m.updated_at {PENDING} AND m.pk > $3 \
                         ORDER BY m.pk LIMIT $2"
                    ),
                    &[model, &i64::from(limit), &after],
                )
                .await?;
                Ok(rows
                    .iter()
                    .map(|row| PendingEmbedding {
                        position: row.get(0),
                        memory_id: row.get(1),
                        content: row.get(2),
                        version: Timestamp::from_millis(row.get(3)),
                    })
                    .collect())
            })
        })
        .await
    }

    async fn count_pending_embeddings(&self, model: &str) -> Result<u64> {
        self.read(model.to_owned(), |_, client, model| {
            Box::pin(async move {
                let count: i64 =
                    query(client, &format!("SELECT count(*) {PENDING}"), &[model]).await?[0].get(0);
                Ok(count as u64)
            })
        })
        .await
    }

    async fn store_embeddings(
        &self,
        model: &str,
        vectors: &[(PendingEmbedding, Vec<f32>)],
    ) -> Result<()> {
        if vectors.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(vectors.len());
        let mut versions = Vec::with_capacity(vectors.len());
        let mut blobs = Vec::with_capacity(vectors.len());
        // One row per memory (the last vector given wins, as SQLite's upserts in turn do):
        // PostgreSQL refuses to upsert one row twice in a statement.
        let mut seen = std::collections::HashSet::new();
        for (pending, vector) in vectors.iter().rev() {
            if !seen.insert(pending.memory_id.as_str()) {
                continue;
            }
            ids.push(pending.memory_id.clone());
            versions.push(pending.version.as_millis());
            blobs.push(to_blob(vector));
        }
        let data = (model.to_owned(), ids, versions, blobs);
        self.tx_with_retry(data, |store, tx, (model, ids, versions, blobs)| {
            Box::pin(async move {
                // Derived data, embedded again if lost: made durable by the next synced
                // commit, like SQLite's relaxed writer; for this transaction only.
                tx.batch_execute("SET LOCAL synchronous_commit = off").await.map_err(crate::pg)?;
                // A vector whose memory changed since it was read matches no row: dropped.
                let rows = query(
                    tx,
                    "INSERT INTO embeddings (memory_pk, model, version, vector) \
                     SELECT m.pk, $1, u.version, u.vector \
                     FROM unnest($2::text[], $3::bigint[], $4::bytea[]) AS u(id, version, vector) \
                     JOIN memories m ON m.id = u.id AND m.updated_at = u.version \
                     ORDER BY m.pk \
                     ON CONFLICT (memory_pk, model) DO UPDATE \
                     SET version = excluded.version, vector = excluded.vector \
                     RETURNING memory_pk",
                    &[model, ids, versions, blobs],
                )
                .await?;
                if !rows.is_empty() {
                    // Receivers read the table: naming a dropped one too is harmless.
                    for chunk in ids.chunks(NOTIFY_BATCH) {
                        notify::notify_vectors(store, tx, model, chunk).await?;
                    }
                }
                Ok(())
            })
        })
        .await
    }

    async fn load_embeddings(&self, model: &str) -> Result<Vec<(String, Vec<f32>)>> {
        self.read(model.to_owned(), |_, client, model| {
            Box::pin(async move {
                // Streamed: every vector of the model is read, and holding the rows and the
                // vectors at once would double the peak (150 MB of rows at 100,000 memories).
                let statement = client
                    .prepare_cached(
                        "SELECT m.id, e.vector FROM embeddings e \
                         JOIN memories m ON m.pk = e.memory_pk \
                         WHERE e.model = $1 AND e.version = m.updated_at \
                         AND m.archived_at IS NULL ORDER BY m.pk",
                    )
                    .await
                    .map_err(pg)?;
                let rows = client.query_raw(&statement, [model]).await.map_err(pg)?;
                let mut rows = std::pin::pin!(rows);
                let mut vectors = Vec::new();
                while let Some(row) = rows.try_next().await.map_err(pg)? {
                    vectors.push((row.get(0), from_blob(row.get(1))));
                }
                Ok(vectors)
            })
        })
        .await
    }

    async fn embeddings_page(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, String, Vec<f32>)>> {
        self.read(model.to_owned(), move |_, client, model| {
            Box::pin(async move {
                let rows = query(
                    client,
                    "SELECT m.pk, m.id, e.vector FROM embeddings e \
                     JOIN memories m ON m.pk = e.memory_pk \
                     WHERE e.model = $1 AND e.memory_pk > $2 AND e.version = m.updated_at \
                     AND m.archived_at IS NULL ORDER BY e.memory_pk LIMIT $3",
                    &[model, &after, &i64::from(limit)],
                )
                .await?;
                Ok(rows.iter().map(|row| (row.get(0), row.get(1), from_blob(row.get(2)))).collect())
            })
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
        self.read((model.to_owned(), ids.to_vec()), |_, client, (model, ids)| {
            Box::pin(async move {
                let rows = query(
                    client,
                    "SELECT m.id, e.vector FROM embeddings e JOIN memories m ON m.pk = e.memory_pk \
                     WHERE e.model = $1 AND m.id = ANY($2) AND e.version = m.updated_at \
                     AND m.archived_at IS NULL ORDER BY m.pk",
                    &[model, ids],
                )
                .await?;
                Ok(rows.iter().map(|row| (row.get(0), from_blob(row.get(1)))).collect())
            })
        })
        .await
    }
}
