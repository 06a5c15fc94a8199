//! The one delegating store tests build on: every call goes to the store inside, and the
//! [`Hooks`] hear of (or change) the few calls a test watches: a sync batch that fails part
//! way ([`FailingSyncStore`]), the rows conversation reads return (the runtime's bounded
//! reads). One copy of the delegation instead of one a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use cairn_types::{
    ApiKey, AuditEntry, Connector, Conversation, ConversationTokenRecord, Memory, OpenPrompt,
    Outcome, PatchEvidence, RuntimeEvent, Snapshot, SyncReport, Timestamp,
};

use crate::*;

/// What a [`Watched`] store tells, or lets change, of the calls it passes on.
#[async_trait]
pub trait Hooks: Send + Sync + 'static {
    /// A connector's sync batch: applied by `inner` unless the hooks say otherwise.
    async fn apply_sync_batch(
        &self,
        inner: &dyn Store,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied> {
        inner.apply_sync_batch(connector_id, batch, at, actor).await
    }

    /// The rows (events, prompts) a conversation read returned.
    fn rows_read(&self, _rows: usize) {}
}

/// A store that passes every call to `inner`, telling `hooks`.
pub struct Watched<H> {
    pub inner: Arc<dyn Store>,
    pub hooks: H,
}

impl<H: Hooks> Watched<H> {
    pub fn new(inner: Arc<dyn Store>, hooks: H) -> Watched<H> {
        Watched { inner, hooks }
    }

    fn counted<T>(&self, rows: Result<Vec<T>>) -> Result<Vec<T>> {
        if let Ok(rows) = &rows {
            self.hooks.rows_read(rows.len());
        }
        rows
    }
}

/// When [`FailingSyncStore`] fails the batch it was told to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedFailure {
    /// The batch never reaches the store: nothing of it is applied.
    BeforeCommit,
    /// The store commits the batch and the caller is told it failed (a lost answer).
    AfterCommit,
}

/// A store that passes every call to another, except that its `fail_at`-th sync batch (from 1)
/// fails once, as `failure` says, to test what a sync that stops part way leaves behind.
pub type FailingSyncStore = Watched<FailingSync>;

/// The hooks of a [`FailingSyncStore`].
pub struct FailingSync {
    fail_at: usize,
    failure: InjectedFailure,
    batches: AtomicUsize,
}

impl Watched<FailingSync> {
    /// `inner`, failing its `fail_at`-th sync batch as `failure` says.
    pub fn failing_sync(
        inner: Arc<dyn Store>,
        fail_at: usize,
        failure: InjectedFailure,
    ) -> FailingSyncStore {
        Watched::new(inner, FailingSync { fail_at, failure, batches: AtomicUsize::new(0) })
    }

    /// How many sync batches were asked for, the failed one included.
    pub fn batches(&self) -> usize {
        self.hooks.batches.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Hooks for FailingSync {
    async fn apply_sync_batch(
        &self,
        inner: &dyn Store,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied> {
        let n = self.batches.fetch_add(1, Ordering::SeqCst) + 1;
        let injected = || StoreError::Backend(format!("injected failure of sync batch {n}").into());
        match (n == self.fail_at, self.failure) {
            (true, InjectedFailure::BeforeCommit) => Err(injected()),
            (true, InjectedFailure::AfterCommit) => {
                inner.apply_sync_batch(connector_id, batch, at, actor).await?;
                Err(injected())
            }
            (false, _) => inner.apply_sync_batch(connector_id, batch, at, actor).await,
        }
    }
}

#[async_trait]
impl<H: Hooks> MemoryStore for Watched<H> {
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()> {
        self.inner.insert_memories(memories, actor).await
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        self.inner.get_memory(id).await
    }

    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>> {
        self.inner.apply_guarded(groups, at, audit).await
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryChange,
        updated_at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Option<Memory>> {
        self.inner.update_memory(id, change, updated_at, audit).await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        self.inner.list_audit(filter, limit, offset).await
    }

    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>> {
        self.inner.get_memories(ids).await
    }

    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<crate::Adjacent>> {
        self.inner.adjacent_memories(ids).await
    }

    async fn live_memories_after(&self, after: i64, limit: u32) -> Result<Vec<(i64, Memory)>> {
        self.inner.live_memories_after(after, limit).await
    }

    async fn list_memories(
        &self,
        filter: &MemoryFilter,
        limit: u32,
        offset: u64,
    ) -> Result<MemoryPage> {
        self.inner.list_memories(filter, limit, offset).await
    }

    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>> {
        self.inner.search_memories(terms, filter, limit).await
    }

    async fn count_memories(&self) -> Result<u64> {
        self.inner.count_memories().await
    }

    async fn schema_version(&self) -> Result<crate::SchemaVersion> {
        self.inner.schema_version().await
    }

    async fn record_recalls(&self, recalls: &[crate::Recall]) -> Result<()> {
        self.inner.record_recalls(recalls).await
    }

    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>> {
        self.inner.recalled_for_task(task_key).await
    }

    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome> {
        self.inner.insert_outcome(outcome, task_key).await
    }

    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>> {
        self.inner.outcomes_for_task(task_key).await
    }

    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>> {
        self.inner.outcomes_for_command(command, limit).await
    }

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()> {
        self.inner.insert_evidence(evidence, task_key).await
    }

    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>> {
        self.inner.evidence_for_task(task_key).await
    }

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>> {
        self.inner.get_evidence(id).await
    }

    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>> {
        self.inner.erase_memories(ids, at, audit).await
    }

    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>> {
        self.inner.newest_repo_memories(repo, limit).await
    }

    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>> {
        self.inner.memory_ids_tagged(tag).await
    }

    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>> {
        self.inner.memory_ids_containing(text).await
    }
}

#[async_trait]
impl<H: Hooks> KeyStore for Watched<H> {
    async fn insert_key(&self, key: &ApiKey) -> Result<()> {
        self.inner.insert_key(key).await
    }

    async fn find_active_key(&self, hash: &str) -> Result<Option<ApiKey>> {
        self.inner.find_active_key(hash).await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        self.inner.list_keys().await
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<bool> {
        self.inner.revoke_key(id, at).await
    }

    async fn mark_key_used(&self, id: &str, at: Timestamp) -> Result<()> {
        self.inner.mark_key_used(id, at).await
    }

    async fn insert_conversation_token(&self, token: &ConversationTokenRecord) -> Result<bool> {
        self.inner.insert_conversation_token(token).await
    }

    async fn find_conversation_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConversationTokenRecord>> {
        self.inner.find_conversation_token(hash, now).await
    }

    async fn revoke_conversation_token(&self, id: &str, at: Timestamp) -> Result<bool> {
        self.inner.revoke_conversation_token(id, at).await
    }
}

#[async_trait]
impl<H: Hooks> ConflictStore for Watched<H> {
    async fn record_conflicts(
        &self,
        found: &[ConflictRecord],
        actor: &str,
        dry_run: bool,
    ) -> Result<Vec<ConflictRecord>> {
        self.inner.record_conflicts(found, actor, dry_run).await
    }

    async fn list_conflicts(
        &self,
        status: Option<cairn_types::ConflictStatus>,
    ) -> Result<Vec<ConflictRecord>> {
        self.inner.list_conflicts(status).await
    }

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>> {
        self.inner.get_conflict(id).await
    }

    async fn settle_conflict(
        &self,
        id: &str,
        settlement: &Settlement,
        audit: &Audit<'_>,
    ) -> Result<bool> {
        self.inner.settle_conflict(id, settlement, audit).await
    }
}

#[async_trait]
impl<H: Hooks> VectorStore for Watched<H> {
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<PendingEmbedding>> {
        self.inner.pending_embeddings(model, after, limit).await
    }

    async fn count_pending_embeddings(&self, model: &str) -> Result<u64> {
        self.inner.count_pending_embeddings(model).await
    }

    async fn store_embeddings(
        &self,
        model: &str,
        vectors: &[(PendingEmbedding, Vec<f32>)],
    ) -> Result<()> {
        self.inner.store_embeddings(model, vectors).await
    }

    async fn load_embeddings(&self, model: &str) -> Result<Vec<(String, Vec<f32>)>> {
        self.inner.load_embeddings(model).await
    }

    async fn embeddings_page(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, String, Vec<f32>)>> {
        self.inner.embeddings_page(model, after, limit).await
    }

    async fn load_embeddings_of(
        &self,
        model: &str,
        ids: &[String],
    ) -> Result<Vec<(String, Vec<f32>)>> {
        self.inner.load_embeddings_of(model, ids).await
    }
}

#[async_trait]
impl<H: Hooks> ConnectorStore for Watched<H> {
    async fn insert_connector(&self, connector: &Connector) -> Result<()> {
        self.inner.insert_connector(connector).await
    }

    async fn list_connectors(&self) -> Result<Vec<Connector>> {
        self.inner.list_connectors().await
    }

    async fn get_connector(&self, id: &str) -> Result<Option<Connector>> {
        self.inner.get_connector(id).await
    }

    async fn delete_connector(&self, id: &str) -> Result<bool> {
        self.inner.delete_connector(id).await
    }

    async fn record_sync(&self, id: &str, report: &SyncReport) -> Result<()> {
        self.inner.record_sync(id, report).await
    }

    async fn connector_items(&self, id: &str) -> Result<Vec<ConnectorItem>> {
        self.inner.connector_items(id).await
    }

    async fn connector_memory_count(&self, id: &str) -> Result<u64> {
        self.inner.connector_memory_count(id).await
    }

    async fn apply_sync_batch(
        &self,
        connector_id: &str,
        batch: &SyncBatch,
        at: Timestamp,
        actor: &str,
    ) -> Result<BatchApplied> {
        self.hooks.apply_sync_batch(self.inner.as_ref(), connector_id, batch, at, actor).await
    }
}

#[async_trait]
impl<H: Hooks> ConversationStore for Watched<H> {
    async fn create_conversation(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        events: &[NewEvent],
    ) -> Result<Option<Vec<RuntimeEvent>>> {
        self.inner.create_conversation(conversation, snapshot, events).await
    }

    async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>> {
        self.inner.get_conversation(id).await
    }

    async fn list_conversations(&self, query: &ConversationQuery) -> Result<Vec<Conversation>> {
        self.inner.list_conversations(query).await
    }

    async fn delete_conversations(&self, ids: &[String]) -> Result<Vec<String>> {
        self.inner.delete_conversations(ids).await
    }

    async fn conversations_with_contact(&self, kind: &str, address: &str) -> Result<Vec<String>> {
        self.inner.conversations_with_contact(kind, address).await
    }

    async fn conversations_mentioning(&self, text: &str) -> Result<Vec<String>> {
        self.inner.conversations_mentioning(text).await
    }

    async fn commit(&self, commit: &Commit) -> Result<CommitOutcome> {
        self.inner.commit(commit).await
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        self.counted(self.inner.list_events(conversation_id, after_offset, limit).await)
    }

    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>> {
        self.counted(self.inner.events_between(conversation_id, from, to).await)
    }

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Option<Snapshot>> {
        self.inner.get_snapshot(conversation_id).await
    }

    async fn open_prompts(
        &self,
        conversation_id: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OpenPrompt>> {
        self.counted(self.inner.open_prompts(conversation_id, after, before, limit).await)
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        self.counted(self.inner.read_events(conversation_id, range).await)
    }

    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64> {
        self.inner.count_events(conversation_id, range).await
    }

    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>> {
        let found = self.inner.get_event(conversation_id, event_id).await;
        if let Ok(Some(_)) = &found {
            self.hooks.rows_read(1);
        }
        found
    }

    async fn get_prompt(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> Result<Option<PromptRecord>> {
        self.inner.get_prompt(conversation_id, prompt_id).await
    }

    async fn find_idempotency(&self, key: &str) -> Result<Option<IdempotencyRecord>> {
        self.inner.find_idempotency(key).await
    }

    async fn create_voice_segment(&self, record: &VoiceSegmentRecord) -> Result<bool> {
        self.inner.create_voice_segment(record).await
    }

    async fn claim_voice_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        self.inner.claim_voice_token(token_hash, now).await
    }

    async fn end_voice_segment(
        &self,
        segment_id: &str,
        at: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        self.inner.end_voice_segment(segment_id, at).await
    }

    async fn get_voice_segment(&self, segment_id: &str) -> Result<Option<VoiceSegmentRecord>> {
        self.inner.get_voice_segment(segment_id).await
    }
}

#[async_trait]
impl<H: Hooks> crate::IdempotencyStore for Watched<H> {
    async fn claim_idempotency(
        &self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        self.inner.claim_idempotency(scope, key, fingerprint, now).await
    }

    async fn complete_idempotency(
        &self,
        scope: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        self.inner.complete_idempotency(scope, key, answer).await
    }

    async fn release_idempotency(&self, scope: &str, key: &str) -> Result<()> {
        self.inner.release_idempotency(scope, key).await
    }

    async fn purge_idempotency(&self, now: Timestamp) -> Result<u64> {
        self.inner.purge_idempotency(now).await
    }
}
