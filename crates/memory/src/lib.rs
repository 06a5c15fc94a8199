//! Cairn's memory engine: storing memories, finding the relevant ones, packing them into a
//! context within a token budget, guarding actions, and recording what agents did.
//!
//! The engine is transport-free: the HTTP API (`cairn-api`), the conversation runtime and
//! the benchmarks all call it directly. Storage is any [`Store`].

mod connectors;
mod consolidate;
mod context;
mod cues;
mod dream;
pub mod embed;
mod guard;
mod neighbours;
pub mod privacy;
mod rank;
mod recall;
mod repo;
mod semantic;
mod shell;
mod sources;
mod text;
mod tokens;
mod validate;

use std::borrow::Cow;
use std::sync::Arc;

use cairn_store::{
    Audit, AuditFilter, ExternalChange, MemoryChange, MemoryFilter, SharedLock, Store, StoreError,
};
use cairn_types::{
    AuditList, AuditQuery, CodingContext, CodingContextRequest, ContextPack, ContextRequest,
    ErasureReport, ErasureRequest, EvidencePack, GuardRequest, GuardResult, IdPrefix, Memory,
    MemoryList, MemoryListQuery, MemoryPatch, NewMemory, Outcome, OutcomeRequest, PatchEvidence,
    PatchEvidenceRequest, RetrievalMode, SearchHit, SearchQuery, SearchResult, Status, Timestamp,
    new_id,
};

pub use crate::guard::built_in_verdict;
pub use crate::repo::{RepoSource, repo_identity};
pub use crate::text::question_coverage;
pub use crate::tokens::count_tokens;

/// Default and largest page sizes of memory lists.
pub const DEFAULT_LIST_LIMIT: u32 = 50;
pub const MAX_LIST_LIMIT: u32 = 500;
/// Default and largest numbers of search hits.
pub const DEFAULT_SEARCH_LIMIT: u32 = 20;
pub const MAX_SEARCH_LIMIT: u32 = 100;
/// The token budget of a context pack when the request names none.
pub const DEFAULT_TOKEN_BUDGET: u32 = 2000;
pub const MAX_TOKEN_BUDGET: u32 = 1_000_000;

/// What the engine's operations fail with; the API maps each to one error code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input breaks a rule; `field` is its name on the wire.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// Item `index` (from 0) of a batch breaks a rule; `field` is its name on the wire.
    #[error("memories[{index}].{field}: {reason}")]
    InvalidItem { index: usize, field: &'static str, reason: String },
    #[error("no memory has the id `{0}`")]
    MemoryNotFound(String),
    #[error("no patch evidence has the id `{0}`")]
    EvidenceNotFound(String),
    /// The embedder failed (a model error, an unreachable embeddings endpoint).
    #[error("{0}")]
    Embedding(String),
    #[error("no conflict has the id `{0}`")]
    ConflictNotFound(String),
    #[error("conflict `{0}` is resolved already")]
    ConflictResolved(String),
    #[error("no connector has the id `{0}`")]
    ConnectorNotFound(String),
    #[error("connector `{0}` is syncing already; wait for it to finish")]
    SyncRunning(String),
    /// The connector's source could not be read.
    #[error("{0}")]
    Source(String),
    /// A review decision on a memory that is not awaiting one.
    #[error("memory `{id}` is {state}, not awaiting review")]
    NotInReview { id: String, state: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A new memory from `input`, checked, created at `now`.
pub(crate) fn new_memory(input: NewMemory, now: Timestamp) -> Result<Memory> {
    let input = validate::new_memory(input)?;
    Ok(Memory {
        id: new_id(IdPrefix::Memory),
        content: input.content,
        scope: input.scope,
        status: Status::Active,
        repo: input.repo,
        tags: input.tags,
        source: input.source,
        metadata: input.metadata,
        created_at: now,
        updated_at: now,
        last_recalled_at: None,
        recall_count: 0,
        archived_at: None,
    })
}

/// A review decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Approve,
    Reject,
}

impl Decision {
    fn action(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
        }
    }
}

/// The store's lock that decisions hold, so daemons sharing a store decide one at a time.
const DECISIONS_LOCK: &str = "memory/decisions";

/// What [`Engine::candidates`] looks for: memories matching `text` that pass `filter`, at
/// most `limit`, the semantic side keeping to the repository rule for `repo`, retrieved by
/// `mode` (the daemon's default when `None`).
#[derive(Clone, Copy)]
pub(crate) struct CandidateQuery<'a> {
    pub(crate) text: &'a str,
    pub(crate) filter: &'a MemoryFilter,
    pub(crate) repo: Option<&'a str>,
    pub(crate) limit: u32,
    pub(crate) mode: Option<RetrievalMode>,
}

/// Held by a decision (see [`Engine::decision_lock`]) until dropped.
pub(crate) struct DecisionGuard {
    _local: tokio::sync::OwnedMutexGuard<()>,
    _shared: Option<SharedLock>,
}

/// Where the engine reads the time for decisions that depend on it (the dream cycle's
/// window); tests move it.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The memory engine over one store.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    entry_tokens: Arc<tokens::EntryTokens>,
    /// Held shared by each recall write in flight; taken exclusively to wait for them all.
    recalls: Arc<recall::PendingRecalls>,
    syncs: Arc<connectors::RunningSyncs>,
    /// Held by decisions that check a state before changing it (archive, approve, reject,
    /// resolve, the dream cycle), so two of them never act on the same stale check; with
    /// the store's lock of the same purpose (see [`Engine::decision_lock`]).
    decisions: Arc<tokio::sync::Mutex<()>>,
    semantic: Option<Arc<semantic::Semantic>>,
    clock: Clock,
    /// The folders connectors may read (canonical); `None`: any.
    connector_roots: Option<Arc<[std::path::PathBuf]>>,
}

impl Engine {
    /// Creates the engine, and starts loading the tokenizer in the background so the first
    /// context pack does not pay for it.
    pub fn new(store: Arc<dyn Store>) -> Engine {
        tokens::warm_up();
        Engine {
            store,
            entry_tokens: Arc::default(),
            recalls: Arc::default(),
            syncs: Arc::default(),
            decisions: Arc::default(),
            semantic: None,
            clock: Arc::new(Timestamp::now),
            connector_roots: None,
        }
    }

    /// Reads the time from `clock` instead of the system's, for new memories and the dream
    /// cycle's window.
    pub fn with_clock(mut self, clock: Clock) -> Engine {
        self.clock = clock;
        self
    }

    pub(crate) fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// Lets connectors read only under `roots` (canonical paths; see `connectors.rs`).
    pub fn with_connector_roots(mut self, roots: Vec<std::path::PathBuf>) -> Engine {
        self.connector_roots = Some(roots.into());
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Held by decisions that check a state before changing it: this process's lock first,
    /// then the store's, which daemons sharing the store take too (nothing to take for a
    /// store one process uses).
    pub(crate) async fn decision_lock(&self) -> Result<DecisionGuard> {
        let local = self.decisions.clone().lock_owned().await;
        let shared = self.store.lock(DECISIONS_LOCK).await?;
        Ok(DecisionGuard { _local: local, _shared: shared })
    }

    /// Takes in what other daemons sharing the store changed, so nothing this one keeps is
    /// stale for long: their memory writes wake the embedder (when this daemon embeds) and
    /// drop cached token counts, their vectors go into this daemon's index, and after news
    /// may have been missed the index is loaded again. Never blocks (the work is spawned);
    /// call it inside a tokio runtime. Reads (search, packs, counts) always go to the store
    /// and need nothing.
    pub fn external_change(&self, change: &ExternalChange) {
        match change {
            ExternalChange::Memories { ids } => {
                for id in ids {
                    self.entry_tokens.remove(id);
                }
                self.wake_embedder(ids.len());
                if let Some(semantic) = &self.semantic
                    && !ids.is_empty()
                {
                    // Erased memories' vectors leave this daemon's index too, not only when
                    // a search meets them.
                    semantic.forget_erased(self.store.clone(), ids.clone());
                }
            }
            ExternalChange::Vectors { model, ids } => {
                let Some(semantic) = &self.semantic else { return };
                if semantic.model() != model {
                    return;
                }
                if ids.is_empty() {
                    // Which ones was not said: all of them.
                    semantic.reload(self.store.clone());
                } else {
                    semantic.refresh(self.store.clone(), ids.clone());
                }
            }
            ExternalChange::Resync => {
                if let Some(semantic) = &self.semantic {
                    semantic.reload(self.store.clone());
                }
            }
            ExternalChange::Appended { .. } | ExternalChange::Poll => {}
        }
    }

    /// Stores a memory on behalf of `actor` (a principal id, written to the audit log).
    pub async fn create_memory(&self, input: NewMemory, actor: &str) -> Result<Memory> {
        let mut created = match self.create_memories(vec![input], actor).await {
            Ok(created) => created,
            // One memory: its fields are named as the single create's body has them.
            Err(Error::InvalidItem { field, reason, .. }) => {
                return Err(Error::Invalid { field, reason });
            }
            Err(error) => return Err(error),
        };
        Ok(created.pop().expect("one memory in, one memory out"))
    }

    /// Creates many memories in one transaction: all are stored, or none. Each is checked
    /// before anything is stored; the first that breaks a rule fails the call with
    /// [`Error::InvalidItem`], naming its position.
    pub async fn create_memories(
        &self,
        inputs: Vec<NewMemory>,
        actor: &str,
    ) -> Result<Vec<Memory>> {
        let now = self.now();
        let memories = inputs
            .into_iter()
            .enumerate()
            .map(|(index, input)| {
                new_memory(input, now).map_err(|error| match error {
                    Error::Invalid { field, reason } => Error::InvalidItem { index, field, reason },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.store.insert_memories(&memories, actor).await?;
        self.wake_embedder(memories.len());
        // Count a new memory's context entry now, while it is at hand, so the context packs
        // that use it do not tokenize on their hot path. Tokenizing is CPU work, on a
        // blocking thread; the caller does not wait for it (a pack that comes first counts
        // what it uses itself), so a create answers as soon as its commit is durable.
        // A batch's memories are left to the packs that use them, as after a restart:
        // counting them all cost an importer a quarter of the daemon's processor time
        // (o200k's pre-tokenizing regex, tens of microseconds a memory), for memories of
        // which a pack uses a few.
        if let [memory] = memories.as_slice() {
            let (entry_tokens, created) = (self.entry_tokens.clone(), memory.clone());
            tokio::task::spawn_blocking(move || {
                entry_tokens.insert(&created, count_tokens(&context::format_entry(&created)));
            });
        }
        Ok(memories)
    }

    /// Restores exported memories as they were (ids, statuses, times, archived ones), in one
    /// transaction: all that are not stored yet, or none when one breaks a rule. Those whose
    /// id is stored here already are skipped, so an import may run again. Recall bookkeeping
    /// (`recallCount`, `lastRecalledAt`) comes along, as decay ranks by it.
    pub async fn import_memories(
        &self,
        memories: Vec<Memory>,
        actor: &str,
    ) -> Result<cairn_types::ImportedMemories> {
        let item = |index: usize| {
            move |error: Error| match error {
                Error::Invalid { field, reason } => Error::InvalidItem { index, field, reason },
                other => other,
            }
        };
        let mut checked = Vec::with_capacity(memories.len());
        for (index, memory) in memories.into_iter().enumerate() {
            let well_formed = memory.id.strip_prefix("mem_").is_some_and(|rest| {
                !rest.is_empty()
                    && rest.len() <= 64
                    && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            });
            if !well_formed {
                let reason = "must be a memory id (`mem_` and letters or digits)".to_owned();
                return Err(Error::InvalidItem { index, field: "id", reason });
            }
            let input = NewMemory {
                content: memory.content,
                scope: memory.scope,
                repo: memory.repo,
                tags: memory.tags,
                source: memory.source,
                metadata: memory.metadata,
            };
            let input = validate::new_memory(input).map_err(item(index))?;
            checked.push(Memory {
                content: input.content,
                repo: input.repo,
                tags: input.tags,
                source: input.source,
                metadata: input.metadata,
                ..memory
            });
        }
        let ids: Vec<String> = checked.iter().map(|memory| memory.id.clone()).collect();
        let present: std::collections::HashSet<String> =
            self.store.get_memories(&ids).await?.into_iter().map(|memory| memory.id).collect();
        let (skipped, new): (Vec<Memory>, Vec<Memory>) =
            checked.into_iter().partition(|memory| present.contains(&memory.id));
        self.store.insert_memories(&new, actor).await?;
        self.wake_embedder(new.len());
        Ok(cairn_types::ImportedMemories {
            imported: new.into_iter().map(|memory| memory.id).collect(),
            skipped: skipped.into_iter().map(|memory| memory.id).collect(),
        })
    }

    /// Waits until every recall write started so far has landed (reads never need to: they
    /// show recalls in flight).
    pub async fn settled(&self) {
        self.recalls.settled().await;
    }

    pub async fn get_memory(&self, id: &str) -> Result<Memory> {
        let mut memory =
            self.store.get_memory(id).await?.ok_or_else(|| Error::MemoryNotFound(id.to_owned()))?;
        self.recalls.overlay([&mut memory]);
        Ok(memory)
    }

    pub async fn list_memories(&self, query: MemoryListQuery) -> Result<MemoryList> {
        let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT).min(MAX_LIST_LIMIT);
        let offset = query.offset.unwrap_or(0);
        let filter = MemoryFilter {
            scope: query.scope,
            status: query.status,
            repo: query.repo,
            include_archived: query.include_archived.unwrap_or(false),
        };
        let mut page = self.store.list_memories(&filter, limit, offset).await?;
        self.recalls.overlay(&mut page.memories);
        Ok(MemoryList { memories: page.memories, total: page.total, limit, offset })
    }

    pub async fn update_memory(&self, id: &str, patch: MemoryPatch, actor: &str) -> Result<Memory> {
        let patch = validate::patch(patch)?;
        let now = Timestamp::now();
        let only_archiving = MemoryPatch { archived: None, ..patch.clone() }.is_empty();
        let action = match patch.archived {
            Some(true) if only_archiving => "archive",
            Some(false) if only_archiving => "restore",
            _ => "update",
        };
        let change = MemoryChange {
            content: patch.content,
            scope: patch.scope,
            status: patch.status,
            tags: patch.tags,
            metadata: patch.metadata,
            archived_at: patch.archived.map(|archived| archived.then_some(now)),
        };
        let updated = self.apply_change(id, &change, now, &Audit { actor, action }).await?;
        self.wake_embedder(1);
        Ok(updated)
    }

    /// Archives a memory: it leaves lists, retrieval and guards until it is restored.
    pub async fn archive_memory(&self, id: &str, actor: &str) -> Result<Memory> {
        let _decision = self.decision_lock().await?;
        let current = self.get_memory(id).await?;
        if current.archived_at.is_some() {
            return Ok(current);
        }
        let now = Timestamp::now();
        let change = MemoryChange { archived_at: Some(Some(now)), ..MemoryChange::default() };
        self.apply_change(id, &change, now, &Audit { actor, action: "archive" }).await
    }

    async fn apply_change(
        &self,
        id: &str,
        change: &MemoryChange,
        now: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Memory> {
        self.store
            .update_memory(id, change, now, audit)
            .await?
            .ok_or_else(|| Error::MemoryNotFound(id.to_owned()))
    }

    /// Memories awaiting a decision (`status: review`), newest first.
    pub async fn review_queue(
        &self,
        limit: Option<u32>,
        offset: Option<u64>,
    ) -> Result<MemoryList> {
        let query = MemoryListQuery {
            status: Some(Status::Review),
            limit,
            offset,
            ..MemoryListQuery::default()
        };
        self.list_memories(query).await
    }

    /// Approves a memory in review: it becomes `active`.
    pub async fn approve(&self, id: &str, actor: &str) -> Result<Memory> {
        self.decide(id, actor, Decision::Approve).await
    }

    /// Rejects a memory in review: it is archived (and can still be restored).
    pub async fn reject(&self, id: &str, actor: &str) -> Result<Memory> {
        self.decide(id, actor, Decision::Reject).await
    }

    async fn decide(&self, id: &str, actor: &str, decision: Decision) -> Result<Memory> {
        let _decision = self.decision_lock().await?;
        let current = self.get_memory(id).await?;
        if current.status != Status::Review || current.archived_at.is_some() {
            let state = match current.archived_at {
                Some(_) => "archived".to_owned(),
                None => current.status.to_string(),
            };
            return Err(Error::NotInReview { id: id.to_owned(), state });
        }
        let change = match decision {
            Decision::Approve => {
                MemoryChange { status: Some(Status::Active), ..MemoryChange::default() }
            }
            // A rejected memory leaves review: archived, and stale should it be restored.
            Decision::Reject => MemoryChange {
                status: Some(Status::Stale),
                archived_at: Some(Some(Timestamp::now())),
                ..MemoryChange::default()
            },
        };
        // A decision on one side of a conflict settles it, in the same transaction.
        let approved = decision == Decision::Approve;
        self.decide_in_conflicts(&current, change, approved, actor, decision.action()).await?;
        self.get_memory(id).await
    }

    /// The audit log, newest first.
    pub async fn audit_log(&self, query: AuditQuery) -> Result<AuditList> {
        let limit = query.limit.unwrap_or(DEFAULT_LIST_LIMIT).min(MAX_LIST_LIMIT);
        let offset = query.offset.unwrap_or(0);
        let filter = AuditFilter { memory_id: query.memory_id, actor: query.actor };
        let (entries, total) = self.store.list_audit(&filter, limit, offset).await?;
        Ok(AuditList { entries, total, limit, offset })
    }

    /// Everything recorded for a task: its patch evidence, the memories they used, and its
    /// outcomes.
    pub async fn evidence_pack(&self, task: String) -> Result<EvidencePack> {
        let task = validate::required_text("task", Some(task), validate::MAX_TEXT_BYTES)?;
        let key = text::task_key(&task);
        let evidence = self.store.evidence_for_task(&key).await?;
        let mut memory_ids: Vec<String> = Vec::new();
        for id in evidence.iter().flat_map(|record| &record.memories_used) {
            if !memory_ids.contains(id) {
                memory_ids.push(id.clone());
            }
        }
        let mut memories = self.store.get_memories(&memory_ids).await?;
        self.recalls.overlay(&mut memories);
        let outcomes = self.store.outcomes_for_task(&key).await?;
        Ok(EvidencePack { task, generated_at: Timestamp::now(), evidence, memories, outcomes })
    }

    /// Turns semantic retrieval on: memories are embedded by a background worker (stored
    /// vectors are loaded first), and search and context packs fuse both rankings. Must be
    /// called inside a tokio runtime.
    pub fn with_embedder(mut self, embedder: Arc<dyn embed::Embedder>) -> Engine {
        self.semantic = Some(semantic::Semantic::start(self.store.clone(), embedder));
        self
    }

    /// `hybrid` with an embedder, `fulltext` without.
    pub fn retrieval(&self) -> RetrievalMode {
        if self.semantic.is_some() { RetrievalMode::Hybrid } else { RetrievalMode::Fulltext }
    }

    /// Memories waiting to be embedded (0 without an embedder).
    pub fn embeddings_pending(&self) -> u64 {
        self.semantic.as_ref().map_or(0, |semantic| semantic.pending())
    }

    /// Waits until the embedder has caught up with every memory written so far (for tools
    /// and tests): the stored vectors are loaded and none is missing or stale.
    pub async fn embeddings_settled(&self) -> Result<()> {
        let Some(semantic) = &self.semantic else { return Ok(()) };
        loop {
            semantic.wake();
            let pending = self.store.count_pending_embeddings(semantic.model()).await?;
            // The worker's own count too: it goes down just after a batch's vectors are
            // stored, and `embeddings_pending` reads it.
            if pending == 0 && semantic.loaded() && semantic.pending() == 0 {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Tells the embedding worker that `written` memories were created or changed.
    pub(crate) fn wake_embedder(&self, written: usize) {
        if let Some(semantic) = &self.semantic {
            semantic.written(written as u64);
        }
    }

    /// Candidates for ranking: by words, by meaning, or both fused (the default when an
    /// embedder is configured). A failing embedder degrades hybrid retrieval to full text.
    /// The semantic side keeps to the repository rule for `repo` before its top-k cut; the
    /// caller still applies the rule to the whole.
    pub(crate) async fn candidates(
        &self,
        query: CandidateQuery<'_>,
    ) -> Result<Vec<cairn_store::TextMatch>> {
        let mut found = self.candidates_of_anyone(query).await?;
        found.retain(|candidate| privacy::owners(&candidate.memory).next().is_none());
        Ok(found)
    }

    /// Candidates without the privacy rule: callers filter by who reads.
    async fn candidates_of_anyone(
        &self,
        query: CandidateQuery<'_>,
    ) -> Result<Vec<cairn_store::TextMatch>> {
        let terms = text::query_terms(query.text);
        let matches = self.matches(query, &terms).await?;
        let covered = cues::cover(&terms, matches);
        let spread = neighbours::propagate(self.store.as_ref(), covered, query.filter).await?;
        Ok(cues::prefer_speakers(query.text, spread))
    }

    /// What matches the text, by words (its query `terms`), meaning or both.
    async fn matches(
        &self,
        CandidateQuery { text, filter, repo, limit, mode }: CandidateQuery<'_>,
        terms: &[String],
    ) -> Result<Vec<cairn_store::TextMatch>> {
        let mode = mode.unwrap_or(self.retrieval());
        if mode != RetrievalMode::Fulltext && self.semantic.is_none() {
            return Err(Error::Invalid {
                field: "mode",
                reason: "semantic retrieval is off: the daemon has no embedder".to_owned(),
            });
        }
        // A speaker the query names is looked for by who speaks (`cues::prefer_speakers`), not
        // by words or meaning: its name is taken out of the query when what the words match
        // shows it is a speaker's.
        let store = self.store.as_ref();
        let (mut matched, mut text, mut terms) = (None, Cow::Borrowed(text), Cow::Borrowed(terms));
        if cues::may_name(&text) {
            let words = store.search_memories(&terms, filter, limit).await?;
            let named = cues::speakers_named(&text, &words);
            let rest = cues::without_names(&text, &named);
            let rest_terms = text::query_terms(&rest);
            if named.is_empty() || rest_terms.is_empty() {
                matched = Some(words);
            } else {
                (text, terms) = (Cow::Owned(rest), Cow::Owned(rest_terms));
            }
        }
        let fulltext = async {
            match matched {
                Some(words) => Ok(words),
                None => store.search_memories(&terms, filter, limit).await,
            }
        };
        match (mode, &self.semantic) {
            (RetrievalMode::Fulltext, _) | (_, None) => Ok(fulltext.await?),
            (RetrievalMode::Semantic, Some(semantic)) => {
                semantic::candidates(semantic, store, &text, filter, repo, limit as usize).await
            }
            (RetrievalMode::Hybrid, Some(semantic)) => {
                let k = limit as usize;
                // The words are matched while the query is embedded; the nearest vectors'
                // memories that the words found already are not read again.
                let (words, query) = tokio::join!(fulltext, semantic.embed_query(&text));
                let words = words?;
                let meaning = match query {
                    Ok(query) => {
                        semantic::nearest_to(semantic, store, &query, filter, repo, k, &words)
                            .await
                            .map(|meaning| (meaning, query))
                    }
                    Err(error) => Err(error),
                };
                match meaning {
                    Ok((meaning, query)) => {
                        let mut fused = semantic::hybrid(semantic, query, words, meaning).await;
                        fused.truncate(limit as usize);
                        Ok(fused)
                    }
                    Err(error) => {
                        tracing::warn!(%error, "semantic retrieval failed; using full text alone");
                        Ok(words)
                    }
                }
            }
        }
    }

    /// Ranked search among the memories a reader may see: those no conversation or contact
    /// owns, which pass `shared` (an agent's knowledge), and those `owners` own (tags such as
    /// `conversation:conv_…`, see [`privacy`]). Searching does not count as recall.
    pub async fn search_as(
        &self,
        query: SearchQuery,
        owners: &[String],
        shared: impl Fn(&Memory) -> bool,
    ) -> Result<SearchResult> {
        let q = validate::required_text("q", query.q, validate::MAX_QUERY_BYTES)?;
        let limit = query.limit.unwrap_or(DEFAULT_SEARCH_LIMIT).clamp(1, MAX_SEARCH_LIMIT);
        let filter = MemoryFilter {
            scope: query.scope,
            status: query.status,
            repo: None,
            include_archived: false,
        };
        // Other repositories' memories are dropped below: ask for more when there may be some.
        let wanted = if query.repo.is_some() { limit.max(50) * 4 } else { limit.max(50) };
        let repo = query.repo.as_deref();
        let ask =
            CandidateQuery { text: &q, filter: &filter, repo, limit: wanted, mode: query.mode };
        let mut candidates = self.candidates_of_anyone(ask).await?;
        candidates.retain(|candidate| {
            repo_admits(query.repo.as_deref(), candidate.memory.repo.as_deref())
                && privacy::readable(&candidate.memory, owners, &shared)
        });
        let preferences = rank::Preferences { repo: query.repo.as_deref(), boost: None };
        let ranked = rank::rank(candidates, &preferences, Timestamp::now());
        let mut hits: Vec<SearchHit> = ranked
            .into_iter()
            .take(limit as usize)
            .map(|ranked| SearchHit { memory: ranked.memory, score: round(ranked.score) })
            .collect();
        self.recalls.overlay(hits.iter_mut().map(|hit| &mut hit.memory));
        Ok(SearchResult { query: q, hits })
    }

    /// Ranked search among the memories no conversation or contact owns. Searching does not
    /// count as recall.
    pub async fn search(&self, query: SearchQuery) -> Result<SearchResult> {
        self.search_as(query, &[], |_| true).await
    }

    /// The memories relevant to a task, within its token budget. The memories used are
    /// marked as recalled for the task.
    pub async fn context(&self, request: ContextRequest) -> Result<ContextPack> {
        context::context_pack(self, request).await
    }

    /// A context pack for a coding task that also weighs the files the agent will touch.
    pub async fn coding_context(&self, request: CodingContextRequest) -> Result<CodingContext> {
        context::coding_context(self, request).await
    }

    pub async fn guard(&self, request: GuardRequest) -> Result<GuardResult> {
        guard::check(self, request).await
    }

    pub async fn record_outcome(&self, request: OutcomeRequest) -> Result<Outcome> {
        let command =
            validate::required_text("command", Some(request.command), validate::MAX_TEXT_BYTES)?;
        let outcome = Outcome {
            outcome_id: new_id(IdPrefix::Outcome),
            command: text::normalize_command(&command),
            exit_code: request.exit_code,
            succeeded: request.exit_code == 0,
            task: validate::optional_text("task", request.task, validate::MAX_TEXT_BYTES)?,
            repo: validate::optional_text("repo", request.repo, validate::MAX_NAME_BYTES)?,
            recorded_at: Timestamp::now(),
            previous_failures: 0,
        };
        let task_key = outcome.task.as_deref().map(text::task_key);
        Ok(self.store.insert_outcome(&outcome, task_key.as_deref()).await?)
    }

    /// Records patch evidence; `memoriesUsed` are the memories context packs served for the
    /// same task (compared after trimming, folding case and collapsing white space).
    pub async fn record_patch_evidence(
        &self,
        request: PatchEvidenceRequest,
    ) -> Result<PatchEvidence> {
        let task = validate::required_text("task", Some(request.task), validate::MAX_TEXT_BYTES)?;
        let files = validate::string_list("files", request.files)?;
        let commands = validate::string_list("commands", request.commands)?;
        let task_key = text::task_key(&task);
        let mut memories_used = self.store.recalled_for_task(&task_key).await?;
        for id in self.recalls.for_task(&task_key) {
            if !memories_used.contains(&id) {
                memories_used.push(id);
            }
        }
        let evidence = PatchEvidence {
            evidence_id: new_id(IdPrefix::Evidence),
            task,
            files,
            commands,
            memories_used,
            created_at: Timestamp::now(),
        };
        self.store.insert_evidence(&evidence, &task_key).await?;
        Ok(evidence)
    }

    pub async fn get_evidence(&self, id: &str) -> Result<PatchEvidence> {
        self.store.get_evidence(id).await?.ok_or_else(|| Error::EvidenceNotFound(id.to_owned()))
    }

    /// Memories that are not archived.
    pub async fn memory_count(&self) -> Result<u64> {
        Ok(self.store.count_memories().await?)
    }

    /// [`memory_count`](Engine::memory_count) when the store has it at hand (SQLite keeps
    /// it; PostgreSQL counts, as other daemons write too); `None` when it must count.
    pub fn memory_count_now(&self) -> Option<u64> {
        self.store.count_memories_now()
    }

    /// Where full-text search runs now: `ready` (the in-memory index), `building` (at
    /// start), `fallback` (the database's own).
    pub fn fulltext_index(&self) -> &'static str {
        self.store.fulltext_index().as_str()
    }
}

/// Scores go out with four decimals: enough to order by, no noise.
fn round(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

/// The one repository rule of retrieval (search, context packs, guards' memories and
/// outcomes): a request that names a repository sees what belongs to it (`own`) and what
/// belongs to none, never another repository's; a request that names none sees all.
pub(crate) fn repo_admits(repo: Option<&str>, own: Option<&str>) -> bool {
    match (repo, own) {
        // Names are compared case-insensitively: `Shop` and `shop` are one repository.
        (Some(wanted), Some(own)) => wanted.eq_ignore_ascii_case(own),
        _ => true,
    }
}

impl Engine {
    /// Deletes for good what `request` names: memories (rows, full-text entries, vectors,
    /// token counts, the content of their audit entries; the audit keeps that each was
    /// erased, by whom and when) and conversations (events, prompts, snapshots).
    pub async fn erase(&self, request: ErasureRequest, actor: &str) -> Result<ErasureReport> {
        let subject = match request.subject.map(|subject| subject.trim().to_owned()) {
            Some(subject) if subject.chars().count() < 3 => {
                return Err(Error::Invalid {
                    field: "subject",
                    reason: "give at least 3 characters, so an erasure cannot sweep everything"
                        .to_owned(),
                });
            }
            subject => subject,
        };
        // Conversations go first, then the memories, gathered after they are gone: a turn
        // that stores a memory for one of them meanwhile finds its conversation gone when it
        // checks, after its write, and erases that memory itself (`erase_if_orphaned`).
        // Either the memory was written before this gathering, which finds it, or after the
        // conversations were deleted, which its own check sees.
        let mut conversations = request.conversation_ids;
        if let Some(contact) = &request.contact {
            conversations.extend(
                self.store.conversations_with_contact(&contact.channel, &contact.address).await?,
            );
        }
        if let Some(subject) = &subject {
            conversations.extend(self.store.conversations_mentioning(subject).await?);
        }
        conversations.sort_unstable();
        conversations.dedup();
        let deleted = self.store.delete_conversations(&conversations).await?;
        let mut memories = request.memory_ids;
        if let Some(contact) = &request.contact {
            let tag = privacy::contact_tag(&contact.channel, &contact.address);
            memories.extend(self.store.memory_ids_tagged(&tag).await?);
        }
        if let Some(subject) = &subject {
            memories.extend(self.store.memory_ids_containing(subject).await?);
        }
        // What a conversation owns goes with it.
        for conversation in &conversations {
            let tag = privacy::conversation_tag(conversation);
            memories.extend(self.store.memory_ids_tagged(&tag).await?);
        }
        memories.sort_unstable();
        memories.dedup();
        let erased = self.erase_memories(&memories, actor).await?;
        Ok(ErasureReport { memories: erased, conversations: deleted })
    }

    /// Erases `ids` for good (see [`Engine::erase`]); answers those that existed.
    async fn erase_memories(&self, ids: &[String], actor: &str) -> Result<Vec<String>> {
        let audit = Audit { actor, action: "erase" };
        let erased = self.store.erase_memories(ids, Timestamp::now(), &audit).await?;
        for id in &erased {
            self.entry_tokens.remove(id);
            if let Some(semantic) = &self.semantic {
                semantic.remove(id);
            }
        }
        Ok(erased)
    }

    /// Erases the memory `id`, just written for `conversation`, when that conversation no
    /// longer exists (an erasure ran meanwhile): the other half of [`Engine::erase`]'s
    /// ordering. Answers whether it was erased.
    pub async fn erase_if_orphaned(
        &self,
        id: &str,
        conversation: &str,
        actor: &str,
    ) -> Result<bool> {
        if self.store.get_conversation(conversation).await?.is_some() {
            return Ok(false);
        }
        Ok(!self.erase_memories(&[id.to_owned()], actor).await?.is_empty())
    }
}

/// What the crate's tests share.
#[cfg(test)]
pub(crate) mod testing {
    use cairn_types::{NewMemory, Scope};

    /// A memory to create: `content` in `scope`, with no repository, tags, source or metadata.
    pub(crate) fn memory(content: &str, scope: Scope) -> NewMemory {
        NewMemory {
            content: content.to_owned(),
            scope,
            repo: None,
            tags: Vec::new(),
            source: None,
            metadata: Default::default(),
        }
    }
}
