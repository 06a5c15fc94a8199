//! [`cairn_store::transfer::Transfer`] for PostgreSQL: export in one snapshot, import into an
//! empty schema.

use async_trait::async_trait;
use cairn_store::Result;
use cairn_store::transfer::{Export, Transfer};

use crate::{PgStore, not_yet};

#[async_trait]
impl Transfer for PgStore {
    async fn export(&self) -> Result<Box<dyn Export>> {
        Err(not_yet())
    }

    async fn is_empty(&self) -> Result<bool> {
        Err(not_yet())
    }

    async fn import_rows(&self, table: &str, rows: &[Vec<serde_json::Value>]) -> Result<()> {
        let _ = (table, rows);
        Err(not_yet())
    }

    async fn finish_import(&self) -> Result<()> {
        Err(not_yet())
    }
}
