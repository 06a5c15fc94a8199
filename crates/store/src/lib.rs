//! Cairn's storage traits: what the memory engine needs from a database, and nothing more.
//!
//! Backends (`cairn-store-sqlite` today, PostgreSQL later) implement [`MemoryStore`] and run
//! the [`conformance`] suite, so every backend behaves the same to the engine above it.

mod conflicts;
#[cfg(feature = "conformance")]
pub mod conformance;
mod connectors;
mod conversations;
mod erasure;
pub mod fulltext;
mod idempotency;
pub mod row_table;
mod shared;
pub mod transfer;

pub use conflicts::*;
pub use connectors::*;
pub use conversations::*;
pub use erasure::erasure_statements;
pub use idempotency::*;
pub use shared::*;

use async_trait::async_trait;
use cairn_types::{
    ApiKey, AuditEntry, ConflictSide, ConflictStatus, ConversationTokenRecord, JsonObject, Memory,
    Outcome, PatchEvidence, Scope, Status, Timestamp,
};

/// What storage can fail with. Callers above only distinguish "the backend failed".
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("storage backend failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Backend(Box::new(error))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The schema's version: the newest migration applied to the database, and the newest this
/// binary knows (an older binary sharing a database a newer one migrated sees more applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaVersion {
    pub applied: u32,
    pub known: u32,
}

impl SchemaVersion {
    /// Whether every migration this binary knows is applied.
    pub fn current(self) -> bool {
        self.applied >= self.known
    }
}

/// Which memories a list or a search considers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilter {
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    pub repo: Option<String>,
    pub include_archived: bool,
}

/// A label a listing's filter may set (see [`MemoryFilter::conditions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Scope,
    Status,
    /// Compared without case.
    Repo,
}

impl MemoryFilter {
    /// The WHERE clause of a listing: only the conditions this filter sets, each rendered by
    /// `condition(label, n)` with its value as the `n`th parameter (from 1), joined with
    /// `AND`, and `m.archived_at IS NULL` unless archived memories count; with the values in
    /// parameter order. A clause of only what is set lets the planner use the index on each
    /// label (a `(? IS NULL OR m.scope = ?)` clause scans every row: 120 to 170 ms for a count
    /// or a page of a rare status at 1,000,000 memories).
    pub fn conditions(&self, condition: impl Fn(Label, usize) -> String) -> (String, Vec<String>) {
        let set = [
            (Label::Scope, self.scope.map(|scope| scope.as_str().to_owned())),
            (Label::Status, self.status.map(|status| status.as_str().to_owned())),
            (Label::Repo, self.repo.clone()),
        ];
        let mut clauses = Vec::new();
        let mut values = Vec::new();
        for (label, value) in set {
            if let Some(value) = value {
                values.push(value);
                clauses.push(condition(label, values.len()));
            }
        }
        if !self.include_archived {
            clauses.push("m.archived_at IS NULL".to_owned());
        }
        let clause = if clauses.is_empty() { "1 = 1".to_owned() } else { clauses.join(" AND ") };
        (clause, values)
    }

    /// Whether the filter asks for every live memory, whose count the stores keep.
    pub fn is_every_live_memory(&self) -> bool {
        *self == MemoryFilter::default()
    }
}

/// A change applied to one memory atomically. `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryChange {
    pub content: Option<String>,
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    pub tags: Option<Vec<String>>,
    pub metadata: Option<JsonObject>,
    /// `Some(Some(t))` archives at `t`, `Some(None)` restores.
    pub archived_at: Option<Option<Timestamp>>,
}

impl MemoryChange {
    /// The memory `before` becomes with this change at `at`, as every backend stores it.
    /// `updatedAt` moves forward even for two changes in one millisecond, so it identifies
    /// the version a reader saw (guarded changes and the embedding worker rely on it).
    pub fn applied_to(&self, before: &Memory, at: Timestamp) -> Memory {
        let mut after = before.clone();
        if let Some(content) = &self.content {
            after.content = content.clone();
        }
        if let Some(scope) = self.scope {
            after.scope = scope;
        }
        if let Some(status) = self.status {
            after.status = status;
        }
        if let Some(tags) = &self.tags {
            after.tags = tags.clone();
        }
        if let Some(metadata) = &self.metadata {
            after.metadata = metadata.clone();
        }
        if let Some(archived_at) = self.archived_at {
            after.archived_at = archived_at;
        }
        after.updated_at = at.max(Timestamp::from_millis(before.updated_at.as_millis() + 1));
        after
    }
}

/// A memory's version as a reader saw it: a guarded change applies only while it is the same.
/// Every change moves `updatedAt`; a recall moves `lastRecalledAt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub updated_at: Timestamp,
    pub last_recalled_at: Option<Timestamp>,
}

impl Version {
    pub fn of(memory: &Memory) -> Version {
        Version { updated_at: memory.updated_at, last_recalled_at: memory.last_recalled_at }
    }
}

/// Memories that served a task at one time (a context pack's), for
/// [`MemoryStore::record_recalls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    pub memory_ids: Vec<String>,
    pub task_key: String,
    pub at: Timestamp,
}

impl Recall {
    /// By memory, in order of first appearance: how many times `recalls` recall it and the
    /// latest of those times.
    pub fn tally(recalls: &[Recall]) -> Vec<(&str, u64, Timestamp)> {
        let mut order: Vec<(&str, u64, Timestamp)> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for recall in recalls {
            for id in &recall.memory_ids {
                match index.get(id.as_str()) {
                    Some(&at) => {
                        let entry: &mut (&str, u64, Timestamp) = &mut order[at];
                        entry.1 += 1;
                        entry.2 = entry.2.max(recall.at);
                    }
                    None => {
                        index.insert(id.as_str(), order.len());
                        order.push((id.as_str(), 1, recall.at));
                    }
                }
            }
        }
        order
    }
}

/// A change to one memory, applied only when the memory is as expected.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedChange {
    pub id: String,
    pub change: MemoryChange,
    /// The memory as it was read.
    pub expected: Version,
}

/// Who makes a change, and what to call it in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Audit<'a> {
    pub actor: &'a str,
    pub action: &'a str,
}

/// Which audit entries a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub memory_id: Option<String>,
    pub actor: Option<String>,
}

/// A full-text candidate: a memory and its text relevance (higher is better, at least 0).
#[derive(Debug, Clone, PartialEq)]
pub struct TextMatch {
    pub memory: Memory,
    pub relevance: f64,
}

/// A memory stored right next to another (see [`MemoryStore::adjacent_memories`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Adjacent {
    /// The memory asked about.
    pub of: String,
    /// Whether `memory` was stored after it (else before).
    pub after: bool,
    pub memory: Memory,
}

/// A page of memories and the count of all that match.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPage {
    pub memories: Vec<Memory>,
    pub total: u64,
}

/// Storage for the memory engine: memories with full-text search, the recall log, outcomes
/// and patch evidence. Every method is one atomic operation.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores new memories, all or none, each with a `create` entry in the audit log.
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()>;

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>>;

    /// Applies `change`, sets `updatedAt` and logs `action` by `actor` in the audit log, in
    /// one transaction; returns the memory as it is after, or `None` when there is no such
    /// memory.
    /// Applies groups of guarded changes in one transaction, each group whole or not at
    /// all: a group with a memory that is missing or changed since it was read is skipped. Returns,
    /// group by group, whether it applied.
    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>>;

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryChange,
        updated_at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Option<Memory>>;

    /// The audit log, newest first.
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)>;

    /// The memories with these ids that exist, in the order asked.
    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>>;

    /// For each of `ids`, the live (not archived) memories stored just before and just after
    /// it, in the order the store received them: at most two per id, the one before first,
    /// whatever their scope, repository or source (the caller decides what counts as the
    /// same thread). Two index lookups per id: no scan.
    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<Adjacent>>;

    /// Up to `limit` live (not archived) memories in the order the store received them,
    /// from just after `after` (a position this returned; 0 to start), each with its
    /// position: a walk of pages meets every live memory once however many are added
    /// meanwhile, and each page is one range of an index (an offset would step over every
    /// row before it: quadratic in a walk of a million).
    async fn live_memories_after(&self, after: i64, limit: u32) -> Result<Vec<(i64, Memory)>>;

    /// Memories matching `filter`, newest first.
    async fn list_memories(
        &self,
        filter: &MemoryFilter,
        limit: u32,
        offset: u64,
    ) -> Result<MemoryPage>;

    /// Memories whose text contains any of `terms` (lower-case words), most relevant first.
    /// Archived memories are never returned.
    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>>;

    /// Counts memories that are not archived.
    async fn count_memories(&self) -> Result<u64>;

    /// The schema's migration as the database has it, and the newest this binary knows; a
    /// round trip to the database, so it also says whether the database answers.
    async fn schema_version(&self) -> Result<SchemaVersion>;

    /// [`count_memories`](MemoryStore::count_memories) when the store keeps the count at
    /// hand and answers without I/O; `None` when it must count.
    fn count_memories_now(&self) -> Option<u64> {
        None
    }

    /// Whether full-text search runs on the in-memory index ([`fulltext::TextIndex`]) or on
    /// the database's own (slower, never wrong).
    fn fulltext_index(&self) -> fulltext::IndexState {
        fulltext::IndexState::Fallback
    }

    /// Marks memories as recalled at `at` for `task_key`: sets `lastRecalledAt`, increments
    /// `recallCount`, and remembers which memories served the task. One [`Recall`] given to
    /// [`MemoryStore::record_recalls`].
    async fn record_recall(
        &self,
        memory_ids: &[String],
        task_key: &str,
        at: Timestamp,
    ) -> Result<()> {
        let recall = Recall { memory_ids: memory_ids.to_vec(), task_key: task_key.to_owned(), at };
        self.record_recalls(std::slice::from_ref(&recall)).await
    }

    /// Records `recalls` in one transaction, in their order, each as
    /// [`MemoryStore::record_recall`] would: a memory recalled `n` times gains `n` to its
    /// `recallCount`, and its `lastRecalledAt` becomes the latest of its recalls' times (never
    /// earlier than it was). A memory that no longer exists is passed over. Recall bookkeeping
    /// is kept apart from the memories' rows (a narrow table of its own), so the few pages a
    /// commit of many recalls writes are not the wide rows of the memories.
    async fn record_recalls(&self, recalls: &[Recall]) -> Result<()>;

    /// The memories recalled for `task_key`, in the order they were first served.
    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>>;

    /// Stores an outcome, findable by `task_key` when it has one. `previous_failures` is
    /// computed by the store, in the same transaction, as the count of earlier failures of
    /// the same command.
    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome>;

    /// Outcomes recorded for a task, oldest first.
    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>>;

    /// Recorded outcomes of exactly `command`, newest first.
    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>>;

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()>;

    /// Patch evidence recorded for a task, oldest first.
    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>>;

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>>;

    /// Deletes memories for good, in one transaction: the rows with their full-text entries
    /// and vectors, the recall log and conflicts that name them (their connector items stay,
    /// marked erased: see [`ConnectorItem::memory_id`]), and the
    /// content of their audit entries (`before` and `after` are cleared); an entry of
    /// `audit.action` records that each was erased, by whom and when. Returns the ids that
    /// existed.
    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>>;

    /// A repository's newest active, not archived, `repo`-scoped memories (its standing
    /// rules are among them), at most `limit`; indexed, with no count.
    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>>;

    /// The ids of memories carrying `tag`, archived ones included.
    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>>;

    /// The ids of memories whose text contains `text` (case folded), archived ones included.
    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>>;
}

/// Everything Cairn stores, for code that holds one backend.
pub trait Store:
    MemoryStore
    + KeyStore
    + ConnectorStore
    + ConflictStore
    + VectorStore
    + ConversationStore
    + IdempotencyStore
{
}

impl<T> Store for T where
    T: MemoryStore
        + KeyStore
        + ConnectorStore
        + ConflictStore
        + VectorStore
        + ConversationStore
        + IdempotencyStore
{
}

/// Storage for API keys. Keys are looked up by the SHA-256 of the presented key.
#[async_trait]
pub trait KeyStore: Send + Sync {
    async fn insert_key(&self, key: &ApiKey) -> Result<()>;

    /// The key with this hash, unless it is revoked.
    async fn find_active_key(&self, hash: &str) -> Result<Option<ApiKey>>;

    /// Every key, revoked ones included, oldest first.
    async fn list_keys(&self) -> Result<Vec<ApiKey>>;

    /// Revokes a key; false when there is no such key or it was revoked already.
    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<bool>;

    /// Notes that the key was used at `at` (bookkeeping: a crash may lose the last note).
    async fn mark_key_used(&self, id: &str, at: Timestamp) -> Result<()>;

    /// Stores a token for its conversation, in one step with the conversation's existence:
    /// false, storing nothing, when the conversation does not exist (or is being erased, on
    /// a backend where an erasure and a mint can overlap), so no token outlives its
    /// conversation.
    async fn insert_conversation_token(&self, token: &ConversationTokenRecord) -> Result<bool>;

    /// The conversation token with this hash, unless it is revoked or expired at `now`.
    async fn find_conversation_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConversationTokenRecord>>;

    /// Revokes a conversation token; false when there is none or it was revoked already.
    async fn revoke_conversation_token(&self, id: &str, at: Timestamp) -> Result<bool>;
}

/// A conflict as stored; its memories are read fresh when it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictRecord {
    pub id: String,
    pub subject: String,
    pub repo: Option<String>,
    /// Two sides or more, each with its memories in id order.
    pub sides: Vec<ConflictSide>,
    pub reason: String,
    pub status: ConflictStatus,
    pub detected_at: Timestamp,
    pub resolution: Option<String>,
    pub resolved_at: Option<Timestamp>,
}

impl ConflictRecord {
    /// Every memory of the conflict, side after side.
    pub fn memory_ids(&self) -> impl Iterator<Item = &String> {
        self.sides.iter().flat_map(|side| &side.memory_ids)
    }
}

/// How an open conflict is settled, applied in one transaction with its closing.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    /// Recorded as the conflict's `resolution`.
    pub resolution: String,
    /// A memory created by the settlement (a merge), with its `create` audit entry.
    pub insert: Option<Memory>,
    /// Changes to the conflict's memories (a memory no longer there is skipped).
    pub changes: Vec<(String, MemoryChange)>,
    pub at: Timestamp,
}

/// Storage for detected conflicts.
#[async_trait]
pub trait ConflictStore: Send + Sync {
    /// Records conflicts a dream cycle found, in one transaction, and moves their new
    /// memories that are not archived to `review`. A conflict whose memories were all in a
    /// conflict of the same subject and repository before (open or resolved) is skipped; one
    /// with new memories joins the open conflict of its subject and repository, or opens one.
    /// Returns the conflicts stored or grown, as they now are. `dry_run` changes nothing and
    /// returns what would be.
    async fn record_conflicts(
        &self,
        found: &[ConflictRecord],
        actor: &str,
        dry_run: bool,
    ) -> Result<Vec<ConflictRecord>>;

    /// Conflicts with this status (all when `None`), newest first.
    async fn list_conflicts(&self, status: Option<ConflictStatus>) -> Result<Vec<ConflictRecord>>;

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>>;

    /// Settles an open conflict: its memories change, the merged memory (if any) is created,
    /// and the conflict is marked resolved, all or nothing. False, with nothing changed, when
    /// the conflict is not open.
    async fn settle_conflict(
        &self,
        id: &str,
        settlement: &Settlement,
        audit: &Audit<'_>,
    ) -> Result<bool>;
}

/// A memory waiting for its vector (it has none for the model, or its text changed since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEmbedding {
    /// The memory's place in storage order: pass the last one seen as `after` to go on.
    pub position: i64,
    pub memory_id: String,
    pub content: String,
    /// The memory's `updatedAt` when read: the vector is kept for this version.
    pub version: Timestamp,
}

/// Storage for embeddings: one vector per memory and model, next to the memory.
#[async_trait]
pub trait VectorStore: Send + Sync {
    /// Memories that are not archived and lack a current vector for `model`, in storage
    /// order, starting after position `after` (0 for the start).
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<PendingEmbedding>>;

    /// How many memories are waiting for a vector of `model`.
    async fn count_pending_embeddings(&self, model: &str) -> Result<u64>;

    /// Stores vectors (replacing older ones of the same model) in one transaction. A vector
    /// whose memory changed since it was read is dropped: it will be embedded again.
    async fn store_embeddings(
        &self,
        model: &str,
        vectors: &[(PendingEmbedding, Vec<f32>)],
    ) -> Result<()>;

    /// Every current vector of `model` for memories that are not archived.
    async fn load_embeddings(&self, model: &str) -> Result<Vec<(String, Vec<f32>)>>;

    /// A page of [`VectorStore::load_embeddings`]: at most `limit` vectors with their places
    /// in storage order, after position `after` (0 for the start). Loading page by page
    /// keeps a start from holding every vector of a large store in memory at once, so a
    /// backend reads only the page.
    async fn embeddings_page(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<(i64, String, Vec<f32>)>>;

    /// The current vectors of `model` for these memories (those that have one and are not
    /// archived), read by id: a daemon takes in the vectors another one stored.
    async fn load_embeddings_of(
        &self,
        model: &str,
        ids: &[String],
    ) -> Result<Vec<(String, Vec<f32>)>>;
}

#[cfg(test)]
mod tests {
    use cairn_types::{Scope, Status};

    use super::{Label, MemoryFilter};

    #[test]
    fn a_listing_names_only_the_conditions_its_filter_sets() {
        let render = |label: Label, n: usize| format!("{label:?} = ${n}");
        assert_eq!(
            MemoryFilter::default().conditions(render),
            ("m.archived_at IS NULL".to_owned(), Vec::new())
        );
        let filter = MemoryFilter {
            status: Some(Status::Stale),
            repo: Some("Shop".to_owned()),
            include_archived: true,
            ..MemoryFilter::default()
        };
        assert_eq!(
            filter.conditions(render),
            ("Status = $1 AND Repo = $2".to_owned(), vec!["stale".to_owned(), "Shop".to_owned()])
        );
        let everything = MemoryFilter { include_archived: true, ..MemoryFilter::default() };
        assert_eq!(everything.conditions(render).0, "1 = 1");
        let scoped = MemoryFilter { scope: Some(Scope::User), ..MemoryFilter::default() };
        assert_eq!(scoped.conditions(render).0, "Scope = $1 AND m.archived_at IS NULL");
        assert!(MemoryFilter::default().is_every_live_memory() && !scoped.is_every_live_memory());
    }
}
