//! [`cairn_store::MemoryStore`] on PostgreSQL: memories, their postings and counts, recalls,
//! outcomes and evidence.

use async_trait::async_trait;
use cairn_store::{
    Audit, AuditFilter, GuardedChange, MemoryChange, MemoryFilter, MemoryPage, MemoryStore, Result,
    TextMatch,
};
use cairn_types::{AuditEntry, Memory, Outcome, PatchEvidence, Timestamp};

use crate::{PgStore, not_yet};

#[async_trait]
impl MemoryStore for PgStore {
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()> {
        let _ = (memories, actor);
        Err(not_yet())
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>> {
        let _ = (groups, at, audit);
        Err(not_yet())
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryChange,
        updated_at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Option<Memory>> {
        let _ = (id, change, updated_at, audit);
        Err(not_yet())
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        let _ = (filter, limit, offset);
        Err(not_yet())
    }

    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>> {
        let _ = (ids,);
        Err(not_yet())
    }

    async fn list_memories(
        &self,
        filter: &MemoryFilter,
        limit: u32,
        offset: u64,
    ) -> Result<MemoryPage> {
        let _ = (filter, limit, offset);
        Err(not_yet())
    }

    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>> {
        let _ = (terms, filter, limit);
        Err(not_yet())
    }

    async fn count_memories(&self) -> Result<u64> {
        Err(not_yet())
    }

    async fn record_recall(
        &self,
        memory_ids: &[String],
        task_key: &str,
        at: Timestamp,
    ) -> Result<()> {
        let _ = (memory_ids, task_key, at);
        Err(not_yet())
    }

    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>> {
        let _ = (task_key,);
        Err(not_yet())
    }

    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome> {
        let _ = (outcome, task_key);
        Err(not_yet())
    }

    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>> {
        let _ = (task_key,);
        Err(not_yet())
    }

    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>> {
        let _ = (command, limit);
        Err(not_yet())
    }

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()> {
        let _ = (evidence, task_key);
        Err(not_yet())
    }

    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>> {
        let _ = (task_key,);
        Err(not_yet())
    }

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>> {
        let _ = (ids, at, audit);
        Err(not_yet())
    }

    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>> {
        let _ = (repo, limit);
        Err(not_yet())
    }

    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>> {
        let _ = (tag,);
        Err(not_yet())
    }

    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>> {
        let _ = (text,);
        Err(not_yet())
    }
}
