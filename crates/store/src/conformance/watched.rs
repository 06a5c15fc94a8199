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
pub trait Hooks: Send + Sync + 'static {
    /// Asked before each connector sync batch: `Some` fails the batch, before the store
    /// applies it or after (a lost answer), with that error.
    fn sync_batch_failure(&self) -> Option<(InjectedFailure, StoreError)> {
        None
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

    /// A call passed on as it is.
    async fn pass<T>(&self, call: impl Future<Output = Result<T>> + Send) -> Result<T> {
        call.await
    }

    /// A read whose rows the hooks hear of.
    async fn counted<T>(
        &self,
        call: impl Future<Output = Result<Vec<T>>> + Send,
    ) -> Result<Vec<T>> {
        let rows = call.await;
        if let Ok(rows) = &rows {
            self.hooks.rows_read(rows.len());
        }
        rows
    }

    /// A read of one row the hooks hear of when it is found.
    async fn found<T>(
        &self,
        call: impl Future<Output = Result<Option<T>>> + Send,
    ) -> Result<Option<T>> {
        let row = call.await;
        if let Ok(Some(_)) = &row {
            self.hooks.rows_read(1);
        }
        row
    }

    /// A sync batch, failed when the hooks say so.
    async fn synced<T>(&self, call: impl Future<Output = Result<T>> + Send) -> Result<T> {
        match self.hooks.sync_batch_failure() {
            None => call.await,
            Some((InjectedFailure::BeforeCommit, error)) => Err(error),
            Some((InjectedFailure::AfterCommit, error)) => {
                call.await?;
                Err(error)
            }
        }
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

impl Hooks for FailingSync {
    fn sync_batch_failure(&self) -> Option<(InjectedFailure, StoreError)> {
        let n = self.batches.fetch_add(1, Ordering::SeqCst) + 1;
        let error = StoreError::Backend(format!("injected failure of sync batch {n}").into());
        (n == self.fail_at).then_some((self.failure, error))
    }
}

/// Implements a store trait for `Watched<H>`: each listed method passes its arguments to
/// `inner`, through the `Watched` method named first (`pass`, `counted`, `found`, `synced`).
macro_rules! delegate {
    ($store:path { $($how:ident $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)* }) => {
        #[async_trait]
        impl<H: Hooks> $store for Watched<H> {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$ret> {
                    self.$how(self.inner.$name($($arg),*)).await
                }
            )*
        }
    };
}

delegate!(MemoryStore {
    pass insert_memories(memories: &[Memory], actor: &str) -> ();
    pass get_memory(id: &str) -> Option<Memory>;
    pass apply_guarded(groups: &[Vec<GuardedChange>], at: Timestamp, audit: &Audit<'_>)
        -> Vec<bool>;
    pass update_memory(id: &str, change: &MemoryChange, updated_at: Timestamp, audit: &Audit<'_>)
        -> Option<Memory>;
    pass list_audit(filter: &AuditFilter, limit: u32, offset: u64) -> (Vec<AuditEntry>, u64);
    pass get_memories(ids: &[String]) -> Vec<Memory>;
    pass adjacent_memories(ids: &[String]) -> Vec<crate::Adjacent>;
    pass live_memories_after(after: i64, limit: u32) -> Vec<(i64, Memory)>;
    pass list_memories(filter: &MemoryFilter, limit: u32, offset: u64) -> MemoryPage;
    pass search_memories(terms: &[String], filter: &MemoryFilter, limit: u32) -> Vec<TextMatch>;
    pass count_memories() -> u64;
    pass schema_version() -> crate::SchemaVersion;
    pass record_recalls(recalls: &[crate::Recall]) -> ();
    pass recalled_for_task(task_key: &str) -> Vec<String>;
    pass insert_outcome(outcome: &Outcome, task_key: Option<&str>) -> Outcome;
    pass outcomes_for_task(task_key: &str) -> Vec<Outcome>;
    pass outcomes_for_command(command: &str, limit: u32) -> Vec<Outcome>;
    pass insert_evidence(evidence: &PatchEvidence, task_key: &str) -> ();
    pass evidence_for_task(task_key: &str) -> Vec<PatchEvidence>;
    pass get_evidence(id: &str) -> Option<PatchEvidence>;
    pass erase_memories(ids: &[String], at: Timestamp, audit: &Audit<'_>) -> Vec<String>;
    pass newest_repo_memories(repo: &str, limit: u32) -> Vec<Memory>;
    pass memory_ids_tagged(tag: &str) -> Vec<String>;
    pass memory_ids_containing(text: &str) -> Vec<String>;
});

delegate!(KeyStore {
    pass insert_key(key: &ApiKey) -> ();
    pass find_active_key(hash: &str) -> Option<ApiKey>;
    pass list_keys() -> Vec<ApiKey>;
    pass revoke_key(id: &str, at: Timestamp) -> bool;
    pass mark_key_used(id: &str, at: Timestamp) -> ();
    pass insert_conversation_token(token: &ConversationTokenRecord) -> bool;
    pass find_conversation_token(hash: &str, now: Timestamp) -> Option<ConversationTokenRecord>;
    pass revoke_conversation_token(id: &str, at: Timestamp) -> bool;
});

delegate!(ConflictStore {
    pass record_conflicts(found: &[ConflictRecord], actor: &str, dry_run: bool)
        -> Vec<ConflictRecord>;
    pass list_conflicts(status: Option<cairn_types::ConflictStatus>) -> Vec<ConflictRecord>;
    pass get_conflict(id: &str) -> Option<ConflictRecord>;
    pass settle_conflict(id: &str, settlement: &Settlement, audit: &Audit<'_>) -> bool;
});

delegate!(VectorStore {
    pass pending_embeddings(model: &str, after: i64, limit: u32) -> Vec<PendingEmbedding>;
    pass count_pending_embeddings(model: &str) -> u64;
    pass store_embeddings(model: &str, vectors: &[(PendingEmbedding, Vec<f32>)]) -> ();
    pass load_embeddings(model: &str) -> Vec<(String, Vec<f32>)>;
    pass embeddings_page(model: &str, after: i64, limit: u32) -> Vec<(i64, String, Vec<f32>)>;
    pass load_embeddings_of(model: &str, ids: &[String]) -> Vec<(String, Vec<f32>)>;
});

delegate!(ConnectorStore {
    pass insert_connector(connector: &Connector) -> ();
    pass list_connectors() -> Vec<Connector>;
    pass get_connector(id: &str) -> Option<Connector>;
    pass delete_connector(id: &str) -> bool;
    pass record_sync(id: &str, report: &SyncReport) -> ();
    pass connector_items(id: &str) -> Vec<ConnectorItem>;
    pass connector_memory_count(id: &str) -> u64;
    synced apply_sync_batch(connector_id: &str, batch: &SyncBatch, at: Timestamp, actor: &str)
        -> BatchApplied;
});

delegate!(ConversationStore {
    pass create_conversation(conversation: &Conversation, snapshot: &Snapshot, events: &[NewEvent])
        -> Option<Vec<RuntimeEvent>>;
    pass get_conversation(id: &str) -> Option<Conversation>;
    pass list_conversations(query: &ConversationQuery) -> Vec<Conversation>;
    pass delete_conversations(ids: &[String]) -> Vec<String>;
    pass conversations_with_contact(kind: &str, address: &str) -> Vec<String>;
    pass conversations_mentioning(text: &str) -> Vec<String>;
    pass commit(commit: &Commit) -> CommitOutcome;
    counted list_events(conversation_id: &str, after_offset: Option<u64>, limit: u32)
        -> Vec<RuntimeEvent>;
    counted events_between(conversation_id: &str, from: u64, to: u64) -> Vec<RuntimeEvent>;
    pass get_snapshot(conversation_id: &str) -> Option<Snapshot>;
    counted open_prompts(conversation_id: &str, after: Option<u64>, before: Option<u64>, limit: u32)
        -> Vec<OpenPrompt>;
    counted read_events(conversation_id: &str, range: &EventRange) -> Vec<RuntimeEvent>;
    pass count_events(conversation_id: &str, range: &EventRange) -> u64;
    pass get_prompt(conversation_id: &str, prompt_id: &str) -> Option<PromptRecord>;
    pass find_idempotency(key: &str) -> Option<IdempotencyRecord>;
    pass create_voice_segment(record: &VoiceSegmentRecord) -> bool;
    pass claim_voice_token(token_hash: &str, now: Timestamp) -> Option<VoiceSegmentRecord>;
    pass end_voice_segment(segment_id: &str, at: Timestamp) -> Option<VoiceSegmentRecord>;
    pass get_voice_segment(segment_id: &str) -> Option<VoiceSegmentRecord>;
    found get_event(conversation_id: &str, event_id: &str) -> Option<RuntimeEvent>;
});

delegate!(crate::IdempotencyStore {
    pass claim_idempotency(scope: &str, key: &str, fingerprint: &str, now: Timestamp) -> Claim;
    pass complete_idempotency(scope: &str, key: &str, answer: &StoredAnswer) -> ();
    pass release_idempotency(scope: &str, key: &str) -> ();
    pass purge_idempotency(now: Timestamp) -> u64;
});
