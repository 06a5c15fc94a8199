//! Storage for connectors and the pieces of their sources they imported.

use async_trait::async_trait;
use cairn_types::{Connector, Memory, SyncReport, Timestamp};

use crate::Result;

/// One piece of a connector's source, as last imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorItem {
    pub key: String,
    pub memory_id: String,
    pub content_hash: String,
}

/// A changed piece: its memory gets the new text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemUpdate {
    pub key: String,
    pub memory_id: String,
    pub content: String,
    pub content_hash: String,
}

/// Part of a sync, applied in one transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncBatch {
    /// New pieces: the memory to store, its key and content hash.
    pub inserts: Vec<(Memory, String, String)>,
    pub updates: Vec<ItemUpdate>,
    /// Pieces gone from the source: their memories are archived and the items forgotten.
    pub removals: Vec<ConnectorItem>,
}

/// Storage for connectors and what they imported.
#[async_trait]
pub trait ConnectorStore: Send + Sync {
    async fn insert_connector(&self, connector: &Connector) -> Result<()>;

    /// Every connector, oldest first.
    async fn list_connectors(&self) -> Result<Vec<Connector>>;

    async fn get_connector(&self, id: &str) -> Result<Option<Connector>>;

    /// Forgets a connector and its items (not its memories); false when there is none.
    async fn delete_connector(&self, id: &str) -> Result<bool>;

    async fn record_sync(&self, id: &str, report: &SyncReport) -> Result<()>;

    async fn connector_items(&self, id: &str) -> Result<Vec<ConnectorItem>>;

    /// How many of the connector's memories are not archived.
    async fn connector_memory_count(&self, id: &str) -> Result<u64>;

    /// Applies part of a sync in one transaction, with an `import` (or `archive`) audit entry
    /// by `actor` for every memory it touches.
    async fn apply_sync_batch(
        &self,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<()>;
}
