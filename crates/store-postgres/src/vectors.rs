//! [`cairn_store::VectorStore`] on PostgreSQL: vectors as little-endian f32 `bytea`, one per
//! memory and model.

use async_trait::async_trait;
use cairn_store::{PendingEmbedding, Result, VectorStore};

use crate::{PgStore, not_yet};

#[async_trait]
impl VectorStore for PgStore {
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<PendingEmbedding>> {
        let _ = (model, after, limit);
        Err(not_yet())
    }

    async fn count_pending_embeddings(&self, model: &str) -> Result<u64> {
        let _ = (model,);
        Err(not_yet())
    }

    async fn store_embeddings(
        &self,
        model: &str,
        vectors: &[(PendingEmbedding, Vec<f32>)],
    ) -> Result<()> {
        let _ = (model, vectors);
        Err(not_yet())
    }

    async fn load_embeddings(&self, model: &str) -> Result<Vec<(String, Vec<f32>)>> {
        let _ = (model,);
        Err(not_yet())
    }
}
