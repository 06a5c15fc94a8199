//! The health report of `GET /api/health`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    #[schema(example = "healthy")]
    pub status: String,
    /// Memories that are not archived.
    pub memory_count: u64,
    /// Seconds since the service started.
    pub uptime: f64,
    #[schema(example = "0.1.0")]
    pub version: String,
    /// `hybrid` when an embedder is configured, else `fulltext`.
    #[schema(example = "hybrid")]
    pub retrieval: String,
    /// Memories not embedded yet (found by full-text ranking until they are).
    pub embeddings_pending: u64,
    /// Where full-text search runs: `ready` (the in-memory index), `building` (while it is
    /// built at start; the database's own search answers, slower), `fallback` (the
    /// database's own: the index may have missed changes, as while a PostgreSQL listener is
    /// down, until it is built again).
    #[schema(example = "ready")]
    pub fulltext_index: String,
    /// The storage schema's version: the newest migration the database has.
    #[schema(example = 14)]
    pub schema_version: u32,
    /// The build: the version and the git commit it was built from.
    #[schema(example = "0.1.0+3f2a1bc")]
    pub build: String,
}
