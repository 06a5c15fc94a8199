//! Storage for connectors and the pieces of their sources they imported.

use async_trait::async_trait;
use cairn_types::{Connector, Memory, SyncReport, Timestamp};

use crate::Result;

/// One piece of a connector's source, as last imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorItem {
    pub key: String,
    /// `None` once its memory was erased: the piece is never imported again (a sync counts
    /// it as skipped), so an erasure holds while the source still has the text.
    pub memory_id: Option<String>,
    /// Empty for an erased piece.
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

/// What a batch changed, as the store found it when applying it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchApplied {
    /// Pieces stored as new memories.
    pub imported: u64,
    /// Pieces whose memory got new text.
    pub updated: u64,
    /// Pieces forgotten, their memories archived.
    pub archived: u64,
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
    /// by `actor` for every memory it touches, and says what it changed.
    ///
    /// Idempotent, against the items as they are when the transaction runs, so a batch
    /// applied twice (a retry after a failure, a sync that read the items before another
    /// finished) changes nothing the second time and never duplicates a memory: an insert
    /// whose key the connector has already imported updates that memory when its content
    /// hash differs and is skipped otherwise; an update whose hash is already stored is
    /// skipped; a removal of a key the connector no longer has is skipped. An erased piece
    /// ([`ConnectorItem::memory_id`] `None`) stays erased: inserts, updates and removals of
    /// its key are skipped.
    async fn apply_sync_batch(
        &self,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied>;
}
