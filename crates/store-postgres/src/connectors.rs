//! [`cairn_store::ConnectorStore`] on PostgreSQL: connectors and the items they imported.

use async_trait::async_trait;
use cairn_store::{BatchApplied, ConnectorItem, ConnectorStore, Result, SyncBatch};
use cairn_types::{Connector, SyncReport, Timestamp};

use crate::{PgStore, not_yet};

#[async_trait]
impl ConnectorStore for PgStore {
    async fn insert_connector(&self, connector: &Connector) -> Result<()> {
        let _ = (connector,);
        Err(not_yet())
    }

    async fn list_connectors(&self) -> Result<Vec<Connector>> {
        Err(not_yet())
    }

    async fn get_connector(&self, id: &str) -> Result<Option<Connector>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn delete_connector(&self, id: &str) -> Result<bool> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn record_sync(&self, id: &str, report: &SyncReport) -> Result<()> {
        let _ = (id, report);
        Err(not_yet())
    }

    async fn connector_items(&self, id: &str) -> Result<Vec<ConnectorItem>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn connector_memory_count(&self, id: &str) -> Result<u64> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn apply_sync_batch(
        &self,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied> {
        let _ = (connector_id, batch, at, actor);
        Err(not_yet())
    }
}
