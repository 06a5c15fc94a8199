//! [`cairn_store::ConflictStore`] on PostgreSQL: conflict sets and their members.

use async_trait::async_trait;
use cairn_store::{Audit, ConflictRecord, ConflictStore, Result, Settlement};
use cairn_types::ConflictStatus;

use crate::{PgStore, not_yet};

#[async_trait]
impl ConflictStore for PgStore {
    async fn record_conflicts(
        &self,
        found: &[ConflictRecord],
        actor: &str,
        dry_run: bool,
    ) -> Result<Vec<ConflictRecord>> {
        let _ = (found, actor, dry_run);
        Err(not_yet())
    }

    async fn list_conflicts(&self, status: Option<ConflictStatus>) -> Result<Vec<ConflictRecord>> {
        let _ = (status,);
        Err(not_yet())
    }

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn settle_conflict(
        &self,
        id: &str,
        settlement: &Settlement,
        audit: &Audit<'_>,
    ) -> Result<bool> {
        let _ = (id, settlement, audit);
        Err(not_yet())
    }
}
