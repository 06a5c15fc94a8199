//! Conformance checks of [`ConnectorStore`]: sync batches are idempotent, so a sync retried
//! after a failure part way (or one that read the items before another sync finished)
//! never imports a piece twice, and a sync's report and statuses read back as written.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use cairn_types::{
    ApiKey, AuditEntry, Connector, ConnectorKind, Conversation, ConversationTokenRecord, IdPrefix,
    Memory, OpenPrompt, Outcome, PatchEvidence, RuntimeEvent, Scope, Snapshot, SyncReport,
    SyncStatus, Timestamp, new_id,
};

use super::sample_memory;
use crate::*;

/// Runs every connector check, each against a fresh store from `open_store`.
pub async fn run_connectors<F, Fut>(mut open_store: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    a_batch_applied_twice_imports_each_piece_once(open_store().await).await;
    stale_updates_and_removals_change_nothing(open_store().await).await;
    failed_sync_reports_read_back(open_store().await).await;
    an_erased_piece_stays_erased(open_store().await).await;
}

fn sample_connector() -> Connector {
    Connector {
        id: new_id(IdPrefix::Connector),
        kind: ConnectorKind::Folder,
        name: "docs".to_owned(),
        path: "/srv/docs".to_owned(),
        scope: Scope::Repo,
        repo: Some("docs".to_owned()),
        max_commits: 500,
        created_at: Timestamp::from_millis(1),
        last_sync: None,
    }
}

/// How many live memories hold `content`, whoever stored them.
async fn live_copies(store: &Arc<dyn Store>, content: &str) -> usize {
    let page = store.list_memories(&MemoryFilter::default(), 500, 0).await.unwrap();
    page.memories.iter().filter(|memory| memory.content == content).count()
}

async fn a_batch_applied_twice_imports_each_piece_once(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let install = sample_memory("Install with make.", Scope::Repo, 2);
    let deploy = sample_memory("Deploy on Tuesdays.", Scope::Repo, 2);
    let batch = SyncBatch {
        inserts: vec![
            (install.clone(), "setup.md#Install".to_owned(), "h1".to_owned()),
            (deploy.clone(), "deploy.md".to_owned(), "h2".to_owned()),
        ],
        ..SyncBatch::default()
    };
    let at = Timestamp::from_millis(3);
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first, BatchApplied { imported: 2, updated: 0, archived: 0 });

    // The same batch again, as a retry would send it (with the memories' ids of the first
    // attempt, or with new ones, as a sync that read the items earlier would): no copies.
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(
        again,
        BatchApplied::default(),
        "a batch applied twice changes nothing the second time"
    );
    let mut renamed = batch.clone();
    for (memory, _, _) in &mut renamed.inserts {
        memory.id = new_id(IdPrefix::Memory);
    }
    let stale = store.apply_sync_batch(&connector.id, &renamed, at, "system:sync").await.unwrap();
    assert_eq!(stale, BatchApplied::default());
    assert_eq!(live_copies(&store, "Install with make.").await, 1);
    assert_eq!(live_copies(&store, "Deploy on Tuesdays.").await, 1);
    assert_eq!(store.count_memories().await.unwrap(), 2);
    assert_eq!(store.connector_memory_count(&connector.id).await.unwrap(), 2);

    // An insert of a piece imported already, whose text changed since, updates its memory.
    let mut changed = sample_memory("Install with just.", Scope::Repo, 4);
    changed.id = new_id(IdPrefix::Memory);
    let batch = SyncBatch {
        inserts: vec![(changed, "setup.md#Install".to_owned(), "h3".to_owned())],
        ..SyncBatch::default()
    };
    let applied = store
        .apply_sync_batch(&connector.id, &batch, Timestamp::from_millis(4), "system:sync")
        .await
        .unwrap();
    assert_eq!(applied, BatchApplied { imported: 0, updated: 1, archived: 0 });
    let memory = store.get_memory(&install.id).await.unwrap().expect("the same memory");
    assert_eq!(memory.content, "Install with just.");
    assert_eq!(store.count_memories().await.unwrap(), 2);
    let mut items = store.connector_items(&connector.id).await.unwrap();
    items.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        items,
        [
            ConnectorItem {
                key: "deploy.md".to_owned(),
                memory_id: Some(deploy.id.clone()),
                content_hash: "h2".to_owned()
            },
            ConnectorItem {
                key: "setup.md#Install".to_owned(),
                memory_id: Some(install.id.clone()),
                content_hash: "h3".to_owned()
            },
        ]
    );
}

async fn an_erased_piece_stays_erased(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let ada = sample_memory("Ada's phone is 555-0100.", Scope::Repo, 2);
    let insert = (ada.clone(), "people.md".to_owned(), "h1".to_owned());
    let batch = SyncBatch { inserts: vec![insert.clone()], ..SyncBatch::default() };
    let at = Timestamp::from_millis(3);
    store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    let audit = crate::Audit { actor: "key:admin", action: "erase" };
    let erased = store.erase_memories(std::slice::from_ref(&ada.id), at, &audit).await.unwrap();
    assert_eq!(erased, std::slice::from_ref(&ada.id));
    let items = store.connector_items(&connector.id).await.unwrap();
    assert_eq!(
        items,
        [ConnectorItem {
            key: "people.md".to_owned(),
            memory_id: None,
            content_hash: String::new()
        }],
        "the piece is remembered as erased, without its memory or a hash of its text"
    );

    // A sync that read the items before the erasure, with the same text, a new text or
    // the piece gone: nothing comes back, and the mark stays.
    let again = SyncBatch { inserts: vec![insert], ..SyncBatch::default() };
    let update = ItemUpdate {
        key: "people.md".to_owned(),
        memory_id: ada.id.clone(),
        content: "Ada's phone is 555-0199.".to_owned(),
        content_hash: "h2".to_owned(),
    };
    let changed = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let removal = ConnectorItem {
        key: "people.md".to_owned(),
        memory_id: Some(ada.id.clone()),
        content_hash: "h1".to_owned(),
    };
    let gone = SyncBatch { removals: vec![removal], ..SyncBatch::default() };
    for batch in [again, changed, gone] {
        let applied =
            store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
        assert_eq!(applied, BatchApplied::default());
    }
    assert_eq!(store.count_memories().await.unwrap(), 0);
    assert!(store.get_memory(&ada.id).await.unwrap().is_none());
    assert_eq!(store.connector_items(&connector.id).await.unwrap(), items);
}

async fn stale_updates_and_removals_change_nothing(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let notes = sample_memory("Notes v1.", Scope::Repo, 2);
    let batch = SyncBatch {
        inserts: vec![(notes.clone(), "notes.md".to_owned(), "h1".to_owned())],
        ..SyncBatch::default()
    };
    let at = Timestamp::from_millis(3);
    store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();

    let update = ItemUpdate {
        key: "notes.md".to_owned(),
        memory_id: notes.id.clone(),
        content: "Notes v2.".to_owned(),
        content_hash: "h2".to_owned(),
    };
    let batch = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first.updated, 1);
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(again, BatchApplied::default(), "an update whose text is stored already is skipped");

    let removal = ConnectorItem {
        key: "notes.md".to_owned(),
        memory_id: Some(notes.id.clone()),
        content_hash: "h2".to_owned(),
    };
    let gone = ConnectorItem { key: "never-imported.md".to_owned(), ..removal.clone() };
    let batch = SyncBatch { removals: vec![removal, gone], ..SyncBatch::default() };
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first, BatchApplied { imported: 0, updated: 0, archived: 1 });
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(again, BatchApplied::default(), "a removal of a forgotten piece is skipped");
    assert!(store.get_memory(&notes.id).await.unwrap().unwrap().archived_at.is_some());
    assert_eq!(store.count_memories().await.unwrap(), 0);
    assert!(store.connector_items(&connector.id).await.unwrap().is_empty());

    // A stale update of the removed piece does not bring it back.
    let update = ItemUpdate {
        key: "notes.md".to_owned(),
        memory_id: notes.id.clone(),
        content: "Notes v3.".to_owned(),
        content_hash: "h3".to_owned(),
    };
    let batch = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let stale = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(stale, BatchApplied::default());
    assert_eq!(store.get_memory(&notes.id).await.unwrap().unwrap().content, "Notes v2.");
}

async fn failed_sync_reports_read_back(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let report = SyncReport {
        started_at: Timestamp::from_millis(3),
        finished_at: Timestamp::from_millis(4),
        status: SyncStatus::Error,
        imported: 250,
        updated: 0,
        unchanged: 0,
        archived: 0,
        skipped: 1,
        error: Some("the sync stopped part way".to_owned()),
    };
    store.record_sync(&connector.id, &report).await.unwrap();
    let read = store.get_connector(&connector.id).await.unwrap().unwrap();
    assert_eq!(read.last_sync, Some(report));
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
pub struct FailingSyncStore {
    inner: Arc<dyn Store>,
    fail_at: usize,
    failure: InjectedFailure,
    batches: AtomicUsize,
}

impl FailingSyncStore {
    pub fn new(
        inner: Arc<dyn Store>,
        fail_at: usize,
        failure: InjectedFailure,
    ) -> FailingSyncStore {
        FailingSyncStore { inner, fail_at, failure, batches: AtomicUsize::new(0) }
    }

    /// How many sync batches were asked for, the failed one included.
    pub fn batches(&self) -> usize {
        self.batches.load(Ordering::SeqCst)
    }

    async fn apply_sync_batch_or_fail(
        &self,
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
                self.inner.apply_sync_batch(connector_id, batch, at, actor).await?;
                Err(injected())
            }
            (false, _) => self.inner.apply_sync_batch(connector_id, batch, at, actor).await,
        }
    }
}

#[async_trait]
impl MemoryStore for FailingSyncStore {
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

    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<(String, Memory)>> {
        self.inner.adjacent_memories(ids).await
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
impl KeyStore for FailingSyncStore {
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
impl ConflictStore for FailingSyncStore {
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
impl VectorStore for FailingSyncStore {
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
impl ConnectorStore for FailingSyncStore {
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
        self.apply_sync_batch_or_fail(connector_id, batch, at, actor).await
    }
}

#[async_trait]
impl ConversationStore for FailingSyncStore {
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
        self.inner.list_events(conversation_id, after_offset, limit).await
    }

    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>> {
        self.inner.events_between(conversation_id, from, to).await
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
        self.inner.open_prompts(conversation_id, after, before, limit).await
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        self.inner.read_events(conversation_id, range).await
    }

    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64> {
        self.inner.count_events(conversation_id, range).await
    }

    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>> {
        self.inner.get_event(conversation_id, event_id).await
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
impl crate::IdempotencyStore for FailingSyncStore {
    async fn claim_idempotency(
        &self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<crate::Claim> {
        self.inner.claim_idempotency(scope, key, fingerprint, now).await
    }

    async fn complete_idempotency(
        &self,
        scope: &str,
        key: &str,
        answer: &crate::StoredAnswer,
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
