//! Semantic retrieval: a background worker that embeds memories (never on the write path),
//! the in-memory index it fills, and the fusion of semantic and full-text rankings.
//!
//! Fusion is a convex combination of standardised scores (Bruch et al., "An Analysis of
//! Fusion Functions for Hybrid Retrieval", TOIS 2023): half the BM25 score's z-score, half
//! the cosine similarity's, each over its side's candidates. Every candidate has both
//! scores: one only full text found has its similarity read from the index. Unlike rank
//! fusion, a near tie on one side stays a near tie, and a clear winner on one side stays
//! clear. On the LoCoMo development set convex fusion lifted hybrid recall_any@5 from 0.621
//! (weighted reciprocal rank fusion, K = 20, semantic weight 0.5) to 0.657 and MRR@10 from
//! 0.460 to 0.501, and z-scores rather than min–max spreads added a little more; see
//! `docs/retrieval.md`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use cairn_store::{LockAttempt, MemoryFilter, SharedLock, Store, TextMatch};
use cairn_types::{Memory, Timestamp};
use tokio::sync::Notify;

use crate::embed::{Embedder, FlatIndex, VectorFilter, VectorIndex, VectorLabels};
use crate::{Error, Result};

/// How much the full-text score counts in the convex combination (the semantic one 1 − it):
/// equal weights, the coarse choice (0.3 and 0.7 both measured lower).
const LEXICAL_WEIGHT: f64 = 0.5;
/// How many memories the worker embeds at once.
const BATCH: u32 = 32;
/// How long the worker sleeps when nothing waits, unless woken by a write.
const IDLE: Duration = Duration::from_secs(5);
/// How many stored vectors the start reads at once, with their memories' labels.
const LOAD_PAGE: u32 = 1_000;
/// The index's similarities are approximate (int8 rows, within about 0.002 of the exact
/// ones): a search for `k` takes the `2k + 16` best by them and ranks those by the exact
/// similarity of their stored `f32` vectors, so what it returns is what an exact scan would.
fn shortlist(k: usize) -> usize {
    k.saturating_mul(2).saturating_add(16)
}
/// How many queries' vectors are kept: agents ask the same task again and again (a hook's
/// context pack for each prompt of one task), and a query's embedding is most of a hybrid
/// search's time (about 15 ms of the model's CPU against 2 for the rest).
const QUERY_CACHE: usize = 256;
/// While another daemon sharing the store embeds: how often this one asks for the embedder
/// lock again (so it takes over within seconds when that daemon stops).
const LOCK_RETRY: Duration = Duration::from_secs(5);

/// The index is a cache of the store, never the truth: each vector carries its memory's
/// labels (repository, scope, status), so a search filters before its top-k cut, and every
/// hit is checked against the store before it is used. A hit found archived (a merge, a
/// rejection, a synced source that lost the piece) or erased is dropped from the index then,
/// a hit whose labels went stale is relabelled, and the search asks for more until `k`
/// memories survive or the index has no more. So no write path has to tell the index
/// anything: the worker re-embeds (and relabels) every memory whose `updatedAt` moved, and
/// searches clear out what left.
///
/// The scan is CPU work (100,000 vectors of 384 dimensions take milliseconds), so it runs on
/// a blocking thread, as do the writes, which hold the lock only for a batch of rows; the
/// index loaded at start is built aside and swapped in.
pub(crate) struct Semantic {
    embedder: Arc<dyn Embedder>,
    /// Where the exact vectors are read for the final ranking.
    store: Arc<dyn Store>,
    index: Arc<RwLock<Box<dyn VectorIndex>>>,
    pending: AtomicU64,
    loaded: AtomicBool,
    wake: Arc<Notify>,
    /// The vectors of the latest queries, by text (the model is the semantic's, fixed).
    queries: Mutex<QueryCache>,
}

/// The vectors of the last [`QUERY_CACHE`] distinct queries; the oldest leaves first.
#[derive(Default)]
struct QueryCache {
    vectors: HashMap<String, Arc<[f32]>>,
    order: VecDeque<String>,
}

impl QueryCache {
    fn get(&self, text: &str) -> Option<Arc<[f32]>> {
        self.vectors.get(text).cloned()
    }

    fn insert(&mut self, text: &str, vector: Arc<[f32]>) {
        if self.vectors.insert(text.to_owned(), vector).is_none() {
            self.order.push_back(text.to_owned());
        }
        while self.order.len() > QUERY_CACHE {
            if let Some(oldest) = self.order.pop_front() {
                self.vectors.remove(&oldest);
            }
        }
    }
}

impl Semantic {
    /// Starts the worker: it loads the stored vectors, then embeds what is missing.
    pub(crate) fn start(store: Arc<dyn Store>, embedder: Arc<dyn Embedder>) -> Arc<Semantic> {
        let index: Box<dyn VectorIndex> = Box::new(FlatIndex::new(embedder.dimensions()));
        let semantic = Arc::new(Semantic {
            embedder,
            store: store.clone(),
            index: Arc::new(RwLock::new(index)),
            pending: AtomicU64::new(0),
            loaded: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
            queries: Mutex::new(QueryCache::default()),
        });
        tokio::spawn(work(Arc::downgrade(&semantic), store, semantic.wake.clone()));
        semantic
    }

    /// Takes in the vectors another daemon sharing the store computed for `ids`: each read
    /// from the store with its memory's labels and put in the index, unless the index holds
    /// a newer one. Runs in the background; the caller does not wait.
    pub(crate) fn refresh(self: &Arc<Self>, store: Arc<dyn Store>, ids: Vec<String>) {
        let semantic = Arc::downgrade(self);
        tokio::spawn(async move {
            if let Err(error) = refresh(&semantic, store.as_ref(), &ids).await {
                tracing::warn!(%error, "reading another daemon's vectors failed");
            }
        });
    }

    /// Loads every stored vector again (built aside and swapped in), after news of other
    /// daemons' writes may have been missed, and wakes the worker.
    pub(crate) fn reload(self: &Arc<Self>, store: Arc<dyn Store>) {
        let semantic = Arc::downgrade(self);
        let model = self.model().to_owned();
        tokio::spawn(async move {
            if let Err(error) = load(&semantic, store.as_ref(), &model).await {
                tracing::warn!(%error, "reloading stored vectors failed");
            }
            if let Some(semantic) = semantic.upgrade() {
                semantic.wake();
            }
        });
    }

    /// Forgets the vectors of those of `ids` the store no longer has (erased by another
    /// daemon). Runs in the background; the caller does not wait.
    pub(crate) fn forget_erased(self: &Arc<Self>, store: Arc<dyn Store>, ids: Vec<String>) {
        let semantic = Arc::downgrade(self);
        tokio::spawn(async move {
            let kept: HashSet<String> = match store.get_memories(&ids).await {
                Ok(memories) => memories.into_iter().map(|memory| memory.id).collect(),
                Err(error) => {
                    tracing::warn!(%error, "cannot check for erased memories");
                    return;
                }
            };
            if let Some(semantic) = semantic.upgrade() {
                for id in ids.iter().filter(|id| !kept.contains(*id)) {
                    semantic.remove(id);
                }
            }
        });
    }

    /// Forgets an erased memory's vector (on a blocking thread: a scan may hold the index).
    pub(crate) fn remove(&self, id: &str) {
        let (index, id) = (self.index.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || index.write().expect("index lock").remove(&id));
    }

    pub(crate) fn model(&self) -> &str {
        self.embedder.model()
    }

    /// Memories not embedded yet, as the worker last counted.
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Tells the worker that memories were written.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Counts `written` memories as waiting (until the worker's next exact count) and wakes it.
    pub(crate) fn written(&self, written: u64) {
        self.pending.fetch_add(written, Ordering::Relaxed);
        self.wake();
    }

    /// Whether the stored vectors are in the index.
    pub(crate) fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// The query's vector: from the cache of recent queries, or the embedder's.
    async fn embed_query(&self, text: &str) -> Result<Arc<[f32]>> {
        if let Some(vector) = self.queries.lock().expect("query cache lock").get(text) {
            return Ok(vector);
        }
        let mut vectors = self
            .embedder
            .embed(&[text.to_owned()])
            .await
            .map_err(|error| Error::Embedding(error.to_string()))?;
        let vector: Arc<[f32]> = vectors.pop().unwrap_or_default().into();
        if !vector.is_empty() {
            self.queries.lock().expect("query cache lock").insert(text, vector.clone());
        }
        Ok(vector)
    }

    /// The `k` vectors nearest to `query` that `filter` admits, most similar first, with
    /// their exact similarity: the index's approximate scan picks a shortlist, which is
    /// ranked by the stored vectors.
    async fn search(
        &self,
        query: Arc<[f32]>,
        k: usize,
        filter: VectorFilter,
    ) -> Result<Vec<(String, f32)>> {
        let index = self.index.clone();
        let scan = {
            let query = query.clone();
            move || index.read().expect("index lock").search(&query, shortlist(k), &filter)
        };
        let approximate = tokio::task::spawn_blocking(scan)
            .await
            .map_err(|error| Error::Embedding(format!("the vector scan failed: {error}")))?;
        let ids: Vec<String> = approximate.iter().map(|(id, _)| id.clone()).collect();
        let exact = self.exact_similarities(&query, &ids).await?;
        let mut ranked: Vec<(String, f32)> = approximate
            .into_iter()
            .map(|(id, approximate)| {
                let similarity = exact.get(&id).copied().unwrap_or(approximate);
                (id, similarity)
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked.truncate(k);
        Ok(ranked)
    }

    /// The exact similarity to `query` of those of `ids` whose current vector is stored.
    /// One whose memory changed since it was embedded has none (until the worker embeds it
    /// again); the index's approximate one stands in for it.
    async fn exact_similarities(
        &self,
        query: &[f32],
        ids: &[String],
    ) -> Result<HashMap<String, f32>> {
        let model = self.embedder.model();
        let vectors = self.store.load_embeddings_of(model, ids).await?;
        Ok(vectors
            .into_iter()
            .filter(|(_, vector)| vector.len() == query.len())
            .map(|(id, vector)| {
                let similarity = crate::embed::dot(&vector, query);
                (id, similarity)
            })
            .collect())
    }

    /// The similarity of each of `ids`' vectors to `query` (`None` for one not embedded yet):
    /// exact from the stored vectors, the index's approximate one where none is stored.
    async fn similarities(&self, query: Arc<[f32]>, ids: Vec<String>) -> Result<Vec<Option<f32>>> {
        let exact = self.exact_similarities(&query, &ids).await?;
        let index = self.index.clone();
        let read = move || {
            let index = index.read().expect("index lock");
            ids.iter()
                .map(|id| exact.get(id).copied().or_else(|| index.similarity(&query, id)))
                .collect()
        };
        tokio::task::spawn_blocking(read)
            .await
            .map_err(|error| Error::Embedding(format!("the vector lookup failed: {error}")))
    }

    /// Corrects the index after a search found some hits out of date: `gone` left retrieval
    /// (archived, with the `updatedAt` seen, or erased), `relabelled` changed. A row embedded
    /// after what was seen (a restored memory, say) is newer than the correction and stays.
    /// Nobody waits for it: the search that found them has skipped them already.
    fn correct(&self, gone: Vec<(String, Option<Timestamp>)>, relabelled: Vec<VectorLabelsOf>) {
        if gone.is_empty() && relabelled.is_empty() {
            return;
        }
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || {
            let mut index = index.write().expect("index lock");
            let seen_after = |index: &dyn VectorIndex, id: &str, seen: Timestamp| {
                index.labels(id).is_some_and(|labels| labels.version <= seen)
            };
            for (id, seen) in gone {
                if seen.is_none_or(|seen| seen_after(index.as_ref(), &id, seen)) {
                    index.remove(&id);
                }
            }
            for (id, labels) in relabelled {
                if seen_after(index.as_ref(), &id, labels.version) {
                    index.relabel(&id, labels);
                }
            }
        });
    }
}

/// A memory's id and its labels as the store has them.
type VectorLabelsOf = (String, VectorLabels);

/// The worker: ends when the engine that owns `semantic` is dropped.
async fn work(semantic: std::sync::Weak<Semantic>, store: Arc<dyn Store>, wake: Arc<Notify>) {
    let Some(model) = semantic.upgrade().map(|semantic| semantic.model().to_owned()) else {
        return;
    };
    if let Err(error) = load(&semantic, store.as_ref(), &model).await {
        tracing::error!(%error, "loading stored vectors failed");
    }
    if let Some(semantic) = semantic.upgrade() {
        if let Ok(pending) = store.count_pending_embeddings(&model).await {
            semantic.pending.store(pending, Ordering::Relaxed);
        }
        semantic.loaded.store(true, Ordering::Release);
    }
    // Passes over storage order from a cursor, so each batch reads only new rows; a pass
    // that finds nothing starts over once, to catch memories changed behind the cursor.
    let mut cursor = 0;
    // On a store shared by several daemons one of them embeds (whoever holds the embedder
    // lock), and the others take its vectors from the store as it announces them.
    let mut embedder = Embedding::Undecided;
    loop {
        if matches!(embedder, Embedding::Undecided | Embedding::Elsewhere) {
            let Some(current) = semantic.upgrade() else { return };
            embedder = claim(store.as_ref(), &model).await;
            if matches!(embedder, Embedding::Elsewhere | Embedding::Undecided) {
                // What waits is the other daemon's work; say how much, as it shrinks.
                if matches!(embedder, Embedding::Elsewhere)
                    && let Ok(pending) = store.count_pending_embeddings(&model).await
                {
                    current.pending.store(pending, Ordering::Relaxed);
                }
                drop(current);
                tokio::time::sleep(LOCK_RETRY).await;
                continue;
            }
        }
        let Some(current) = semantic.upgrade() else { return };
        match embed_batch(&current, store.as_ref(), &model, cursor).await {
            Ok(Some(last)) => cursor = last,
            Ok(None) if cursor > 0 => cursor = 0,
            Ok(None) => {
                drop(current);
                let _ = tokio::time::timeout(IDLE, wake.notified()).await;
            }
            Err(error) => {
                tracing::warn!(%error, "embedding failed; retrying shortly");
                drop(current);
                tokio::time::sleep(IDLE).await;
            }
        }
    }
}

/// The worker holds the store; woken, it finds the index gone and ends, so dropping the
/// engine closes the store's connections now rather than after the worker's idle wait (5 s:
/// long enough for a program that dropped its engine to open the file in another process and
/// find this one's checkpoints running on it).
impl Drop for Semantic {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// Whether this daemon embeds.
enum Embedding {
    /// Not asked yet, or the store could not say.
    Undecided,
    /// The store is this process's alone.
    Alone,
    /// This daemon holds the store's embedder lock for the model (until it stops).
    Here { _lock: SharedLock },
    /// Another daemon holds it.
    Elsewhere,
}

/// Asks the store for the embedder lock of `model`.
async fn claim(store: &dyn Store, model: &str) -> Embedding {
    match store.try_lock(&format!("embedder/{model}")).await {
        Ok(LockAttempt::Unshared) => Embedding::Alone,
        Ok(LockAttempt::Held(lock)) => {
            tracing::info!(model, "this daemon embeds the memories of every daemon on the store");
            Embedding::Here { _lock: lock }
        }
        Ok(LockAttempt::Busy) => Embedding::Elsewhere,
        Err(error) => {
            tracing::warn!(%error, "cannot ask the store who embeds; asking again shortly");
            Embedding::Undecided
        }
    }
}

/// Puts the stored vectors of `ids` in the index with their memories' labels, each unless
/// the index holds one computed for a newer version of its memory.
async fn refresh(
    semantic: &std::sync::Weak<Semantic>,
    store: &dyn Store,
    ids: &[String],
) -> Result<()> {
    let Some(model) = semantic.upgrade().map(|semantic| semantic.model().to_owned()) else {
        return Ok(());
    };
    let vectors = store.load_embeddings_of(&model, ids).await?;
    let mut labels: HashMap<String, VectorLabels> = store
        .get_memories(ids)
        .await?
        .into_iter()
        .filter(|memory| memory.archived_at.is_none())
        .map(|memory| (memory.id.clone(), VectorLabels::of(&memory)))
        .collect();
    let Some(semantic) = semantic.upgrade() else { return Ok(()) };
    let (index, dimensions) = (semantic.index.clone(), semantic.embedder.dimensions());
    tokio::task::spawn_blocking(move || {
        let mut index = index.write().expect("index lock");
        for (id, vector) in vectors {
            let Some(labels) = labels.remove(&id) else { continue };
            let newer_held = index.labels(&id).is_some_and(|held| held.version > labels.version);
            if vector.len() == dimensions && !newer_held {
                index.upsert(&id, &vector, labels);
            }
        }
    })
    .await
    .map_err(|error| Error::Embedding(format!("updating the vector index failed: {error}")))
}

/// Loads the stored vectors with their memories' labels into a new index, built aside a
/// page at a time while searches go on with the old one, then swapped in. Never more than a
/// page of `f32` vectors is held: at 100,000 memories all of them would be 150 MB, which the
/// allocator would keep after the start.
async fn load(semantic: &std::sync::Weak<Semantic>, store: &dyn Store, model: &str) -> Result<()> {
    let Some(dimensions) = semantic.upgrade().map(|semantic| semantic.embedder.dimensions()) else {
        return Ok(());
    };
    let mut built = FlatIndex::new(dimensions);
    let mut after = 0;
    loop {
        let page = store.embeddings_page(model, after, LOAD_PAGE).await?;
        let Some(last) = page.last().map(|(position, _, _)| *position) else { break };
        after = last;
        let ids: Vec<String> = page.iter().map(|(_, id, _)| id.clone()).collect();
        let mut labels = live_labels(store, &ids).await?;
        for (_, id, vector) in page {
            if let Some(labels) = labels.remove(&id)
                && vector.len() == dimensions
            {
                built.upsert(&id, &vector, labels);
            }
        }
    }
    let Some(semantic) = semantic.upgrade() else { return Ok(()) };
    let loaded = built.len();
    let index = semantic.index.clone();
    tokio::task::spawn_blocking(move || *index.write().expect("index lock") = Box::new(built))
        .await
        .map_err(|error| Error::Embedding(format!("building the vector index failed: {error}")))?;
    tracing::info!(model = %model, vectors = loaded, "semantic index loaded");
    Ok(())
}

/// The labels of those of `ids` that are stored and not archived, by id.
async fn live_labels(store: &dyn Store, ids: &[String]) -> Result<HashMap<String, VectorLabels>> {
    Ok(store
        .get_memories(ids)
        .await?
        .into_iter()
        .filter(|memory| memory.archived_at.is_none())
        .map(|memory| (memory.id.clone(), VectorLabels::of(&memory)))
        .collect())
}

/// Embeds one batch of pending memories after `cursor`; returns the last position embedded,
/// or `None` when nothing waits there.
async fn embed_batch(
    semantic: &Semantic,
    store: &dyn Store,
    model: &str,
    cursor: i64,
) -> Result<Option<i64>> {
    let pending = store.pending_embeddings(model, cursor, BATCH).await?;
    if pending.is_empty() {
        if cursor == 0 {
            semantic.pending.store(0, Ordering::Relaxed);
        }
        return Ok(None);
    }
    let last = pending.last().map(|item| item.position);
    let texts: Vec<String> = pending.iter().map(|item| item.content.clone()).collect();
    let vectors = semantic
        .embedder
        .embed(&texts)
        .await
        .map_err(|error| Error::Embedding(error.to_string()))?;
    let embedded: Vec<_> = pending.into_iter().zip(vectors).collect();
    // The labels as they are now; a memory archived meanwhile stays out.
    let ids: Vec<String> = embedded.iter().map(|(item, _)| item.memory_id.clone()).collect();
    let mut labels = live_labels(store, &ids).await?;
    let rows: Vec<(String, Vec<f32>, VectorLabels)> = embedded
        .iter()
        .filter_map(|(item, vector)| {
            let labels = labels.remove(&item.memory_id)?;
            Some((item.memory_id.clone(), vector.clone(), labels))
        })
        .collect();
    // The index first: once the store says nothing is pending, every vector is searchable.
    let index = semantic.index.clone();
    tokio::task::spawn_blocking(move || {
        let mut index = index.write().expect("index lock");
        for (id, vector, labels) in rows {
            index.upsert(&id, &vector, labels);
        }
    })
    .await
    .map_err(|error| Error::Embedding(format!("updating the vector index failed: {error}")))?;
    store.store_embeddings(model, &embedded).await?;
    // Counting exactly scans every memory, so it happens when the queue looks empty (above);
    // between batches the count goes down by what was embedded.
    let done = embedded.len() as u64;
    let _ = semantic.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |pending| {
        Some(pending.saturating_sub(done))
    });
    Ok(last)
}

/// The semantic ranking as full-text-style candidates: the `k` nearest memories that pass
/// `filter` and the repository rule for `repo` (see [`crate::repo_admits`]), with their
/// similarity as relevance. Fewer than `k` only when fewer such memories have vectors.
pub(crate) async fn candidates(
    semantic: &Semantic,
    store: &dyn Store,
    text: &str,
    filter: &MemoryFilter,
    repo: Option<&str>,
    k: usize,
) -> Result<Vec<TextMatch>> {
    Ok(nearest(semantic, store, text, filter, repo, k).await?.0)
}

/// [`candidates`], and the query's vector.
pub(crate) async fn nearest(
    semantic: &Semantic,
    store: &dyn Store,
    text: &str,
    filter: &MemoryFilter,
    repo: Option<&str>,
    k: usize,
) -> Result<(Vec<TextMatch>, Arc<[f32]>)> {
    let query = semantic.embed_query(text).await?;
    if k == 0 {
        return Ok((Vec::new(), query));
    }
    let labels = VectorFilter {
        scope: filter.scope,
        status: filter.status,
        repo: repo.or(filter.repo.as_deref()).map(str::to_owned),
    };
    let (mut found, mut checked) = (Vec::new(), HashSet::new());
    let mut asked = k;
    loop {
        let nearest = semantic.search(query.clone(), asked, labels.clone()).await?;
        let exhausted = nearest.len() < asked;
        let fresh: Vec<(String, f32)> =
            nearest.into_iter().filter(|(id, _)| checked.insert(id.clone())).collect();
        let ids: Vec<String> = fresh.iter().map(|(id, _)| id.clone()).collect();
        let mut memories: HashMap<String, Memory> = store
            .get_memories(&ids)
            .await?
            .into_iter()
            .map(|memory| (memory.id.clone(), memory))
            .collect();
        let (mut gone, mut relabelled) = (Vec::new(), Vec::new());
        for (id, similarity) in fresh {
            let Some(memory) = memories.remove(&id) else {
                gone.push((id, None));
                continue;
            };
            if memory.archived_at.is_some() {
                gone.push((id, Some(memory.updated_at)));
                continue;
            }
            let current = VectorLabels::of(&memory);
            if !labels.admits(&current) {
                relabelled.push((id, current));
            } else if passes(&memory, filter) {
                let relevance = f64::from(similarity.max(0.0));
                found.push(TextMatch { memory, relevance });
            }
        }
        semantic.correct(gone, relabelled);
        if found.len() >= k || exhausted {
            break;
        }
        asked = asked.saturating_mul(2);
    }
    found.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    found.truncate(k);
    Ok((found, query))
}

fn passes(memory: &Memory, filter: &MemoryFilter) -> bool {
    memory.archived_at.is_none()
        && filter.scope.is_none_or(|scope| scope == memory.scope)
        && filter.status.is_none_or(|status| status == memory.status)
        && filter.repo.as_deref().is_none_or(|repo| memory.repo.as_deref() == Some(repo))
}

/// The hybrid ranking of the full-text and semantic candidates: every candidate's similarity
/// is known (those only full text found are looked up in the index), so the two scores are
/// combined rather than the two ranks.
pub(crate) async fn hybrid(
    semantic: &Semantic,
    query: Arc<[f32]>,
    fulltext: Vec<TextMatch>,
    meaning: Vec<TextMatch>,
) -> Vec<TextMatch> {
    let known: HashSet<&str> = meaning.iter().map(|hit| hit.memory.id.as_str()).collect();
    let missing: Vec<String> = fulltext
        .iter()
        .filter(|hit| !known.contains(hit.memory.id.as_str()))
        .map(|hit| hit.memory.id.clone())
        .collect();
    let mut similarity: HashMap<String, f64> =
        meaning.iter().map(|hit| (hit.memory.id.clone(), hit.relevance)).collect();
    // A failed lookup (the blocking thread died) leaves them at the worst similarity.
    let looked_up = semantic.similarities(query, missing.clone()).await.unwrap_or_default();
    for (id, found) in missing.into_iter().zip(looked_up) {
        if let Some(found) = found {
            similarity.insert(id, f64::from(found.max(0.0)));
        }
    }
    combine(fulltext, meaning, &similarity, LEXICAL_WEIGHT)
}

/// Convex combination of standardised scores (Bruch et al., "An Analysis of Fusion
/// Functions for Hybrid Retrieval", TOIS 2023): `weight · z(bm25) + (1 − weight) · z(cos)`,
/// over the union of both candidate lists, where `z(x) = (x − mean) / std` over that side's
/// own candidates. A memory one side did not find gets that side's lowest standardised
/// score (no full-text match; no vector yet). Standardising rather than spreading min–max
/// keeps one outlier from squeezing the rest together: a BM25 best far above the others
/// stays far above, and close similarities stay close instead of being stretched over the
/// whole range.
pub(crate) fn combine(
    fulltext: Vec<TextMatch>,
    semantic: Vec<TextMatch>,
    similarity: &HashMap<String, f64>,
    weight: f64,
) -> Vec<TextMatch> {
    let words: HashMap<String, f64> =
        fulltext.iter().map(|hit| (hit.memory.id.clone(), hit.relevance)).collect();
    let words_scale = Standard::of(words.values().copied());
    let meaning_scale = Standard::of(similarity.values().copied());
    let mut fused: Vec<TextMatch> = Vec::with_capacity(fulltext.len() + semantic.len());
    let mut seen: HashSet<String> = HashSet::new();
    for hit in fulltext.into_iter().chain(semantic) {
        if !seen.insert(hit.memory.id.clone()) {
            continue;
        }
        let id = hit.memory.id.as_str();
        let relevance = weight * words_scale.z(words.get(id).copied())
            + (1.0 - weight) * meaning_scale.z(similarity.get(id).copied());
        fused.push(TextMatch { memory: hit.memory, relevance });
    }
    fused.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    fused
}

/// One side's scores standardised: mean and standard deviation over its candidates.
struct Standard {
    mean: f64,
    deviation: f64,
    lowest: f64,
    empty: bool,
}

impl Standard {
    fn of(scores: impl Iterator<Item = f64>) -> Standard {
        let scores: Vec<f64> = scores.collect();
        let n = scores.len().max(1) as f64;
        let mean = scores.iter().sum::<f64>() / n;
        let variance = scores.iter().map(|score| (score - mean).powi(2)).sum::<f64>() / n;
        let lowest = scores.iter().copied().fold(mean, f64::min);
        Standard { mean, deviation: variance.sqrt(), lowest, empty: scores.is_empty() }
    }

    /// The standardised score; a missing one is the lowest. When every score is the same
    /// (one candidate, say) a score is 0 and a missing one a standard unit below: a match
    /// still beats no match.
    fn z(&self, score: Option<f64>) -> f64 {
        match score {
            _ if self.empty => 0.0,
            Some(_) if self.deviation <= f64::EPSILON => 0.0,
            None if self.deviation <= f64::EPSILON => -1.0,
            score => (score.unwrap_or(self.lowest) - self.mean) / self.deviation,
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_memory;
    use cairn_types::Scope;

    use super::*;
    use crate::embed::HashingEmbedder;

    fn ranked(names: &[&str]) -> Vec<TextMatch> {
        names
            .iter()
            .map(|name| {
                let mut memory = sample_memory(name, Scope::User, 0);
                memory.id = (*name).to_owned();
                TextMatch { memory, relevance: 1.0 }
            })
            .collect()
    }

    /// Dropping the engine lets go of the store at once: the embedding worker ends instead of
    /// holding it through its idle wait.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_engine_lets_go_of_its_store() {
        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(
            cairn_store_sqlite::SqliteStore::open(&directory.path().join("c.db")).unwrap(),
        );
        let engine =
            crate::Engine::new(store.clone()).with_embedder(Arc::new(HashingEmbedder::new(64)));
        engine.embeddings_settled().await.unwrap();
        drop(engine);
        let started = std::time::Instant::now();
        while Arc::strong_count(&store) > 1 {
            assert!(started.elapsed() < IDLE / 2, "the worker still holds the store");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memories_are_embedded_in_the_background_and_found_by_meaning() {
        use cairn_types::{RetrievalMode, SearchQuery};

        use crate::Engine;

        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let open = || Arc::new(cairn_store_sqlite::SqliteStore::open(&path).unwrap());
        let engine = Engine::new(open()).with_embedder(Arc::new(HashingEmbedder::new(256)));
        let new = |content: &str| crate::testing::memory(content, Scope::User);
        let texts = [
            "the staging cluster restarts nightly",
            "coffee machine on floor two",
            "release notes go in CHANGELOG",
        ];
        let created = engine
            .create_memories(texts.iter().map(|text| new(text)).collect(), "tester")
            .await
            .unwrap();
        engine.embeddings_settled().await.unwrap();
        assert_eq!(engine.embeddings_pending(), 0);
        assert_eq!(engine.retrieval(), RetrievalMode::Hybrid);

        let search = |q: &str, mode| SearchQuery {
            q: Some(q.to_owned()),
            mode: Some(mode),
            ..SearchQuery::default()
        };
        let semantic = engine
            .search(search("staging cluster restarts", RetrievalMode::Semantic))
            .await
            .unwrap();
        assert_eq!(semantic.hits[0].memory.id, created[0].id);
        let hybrid = engine.search(search("coffee floor", RetrievalMode::Hybrid)).await.unwrap();
        assert_eq!(hybrid.hits[0].memory.id, created[1].id);

        let patch = cairn_types::MemoryPatch {
            content: Some("the coffee machine moved to floor three".to_owned()),
            ..Default::default()
        };
        engine.update_memory(&created[1].id, patch, "tester").await.unwrap();
        engine.embeddings_settled().await.unwrap();
        let moved = engine
            .search(search("machine moved floor three", RetrievalMode::Semantic))
            .await
            .unwrap();
        assert_eq!(moved.hits[0].memory.id, created[1].id, "a changed memory is embedded again");

        drop(engine);
        let reopened = Engine::new(open()).with_embedder(Arc::new(HashingEmbedder::new(256)));
        reopened.embeddings_settled().await.unwrap();
        let again = reopened
            .search(search("release notes changelog", RetrievalMode::Semantic))
            .await
            .unwrap();
        assert_eq!(again.hits[0].memory.id, created[2].id, "stored vectors are loaded at start");
        let fulltext_only = Engine::new(open());
        let refused =
            fulltext_only.search(search("anything", RetrievalMode::Semantic)).await.unwrap_err();
        assert!(matches!(refused, Error::Invalid { field: "mode", .. }));
    }

    /// Waits up to 2 s for `check` to hold.
    async fn eventually(check: impl Fn() -> bool) -> bool {
        for _ in 0..200 {
            if check() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        check()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn vectors_another_daemon_stored_are_taken_in_when_announced() {
        use cairn_store::ExternalChange;

        use crate::Engine;

        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let open = || Arc::new(cairn_store_sqlite::SqliteStore::open(&path).unwrap());
        let embedder = || Arc::new(HashingEmbedder::new(256));
        let reader = Engine::new(open()).with_embedder(embedder());
        reader.embeddings_settled().await.unwrap();
        let writer = Engine::new(open()).with_embedder(embedder());
        let memory = |content: &str| cairn_types::NewMemory {
            content: content.to_owned(),
            scope: Scope::User,
            repo: None,
            tags: vec![],
            source: None,
            metadata: Default::default(),
        };
        let first = writer.create_memory(memory("the staging cluster restarts"), "t").await;
        let first = first.unwrap().id;
        writer.embeddings_settled().await.unwrap();
        let index = reader.semantic.clone().unwrap().index.clone();
        let known = |id: &str| index.read().unwrap().labels(id).is_some();
        assert!(!known(&first), "the reader's worker has nothing to embed: the writer did");

        let ids = vec![first.clone()];
        reader.external_change(&ExternalChange::Vectors { model: "other".into(), ids });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!known(&first), "another model's vectors are not this index's");
        let ids = vec![first.clone()];
        reader.external_change(&ExternalChange::Vectors { model: "hashing".into(), ids });
        assert!(eventually(|| known(&first)).await, "announced vectors are read into the index");
        let query = cairn_types::SearchQuery {
            q: Some("staging cluster restarts".to_owned()),
            mode: Some(cairn_types::RetrievalMode::Semantic),
            ..cairn_types::SearchQuery::default()
        };
        let found = reader.search(query).await.unwrap();
        assert_eq!(found.hits[0].memory.id, first);

        // News that may have been missed: everything stored is loaded again.
        let second = writer.create_memory(memory("coffee on floor two"), "t").await;
        let second = second.unwrap().id;
        writer.embeddings_settled().await.unwrap();
        assert!(!known(&second));
        reader.external_change(&ExternalChange::Resync);
        assert!(eventually(|| known(&second) && known(&first)).await, "a resync reloads all");

        // Memories another daemon erased leave the index when it says so.
        let erase =
            cairn_types::ErasureRequest { memory_ids: vec![first.clone()], ..Default::default() };
        writer.erase(erase, "t").await.unwrap();
        let ids = vec![first.clone(), second.clone()];
        reader.external_change(&ExternalChange::Memories { ids });
        assert!(eventually(|| !known(&first)).await, "the erased memory's vector is dropped");
        assert!(known(&second), "the one still stored stays");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_int8_scan_re_scored_finds_what_an_exact_scan_finds() {
        use cairn_store::VectorStore as _;

        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(
            cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db")).unwrap(),
        );
        let engine =
            crate::Engine::new(store.clone()).with_embedder(Arc::new(HashingEmbedder::new(384)));
        // Near neighbours on purpose: many memories share most of their words.
        let words = ["deploy", "shop", "cluster", "staging", "nightly", "cache", "build", "tests"];
        let inputs = (0..400)
            .map(|i: usize| {
                let text: Vec<&str> =
                    (0..5).map(|j| words[(i * 7 + j * (i % 5 + 1)) % words.len()]).collect();
                new_memory(&format!("{} {i}", text.join(" ")), None)
            })
            .collect();
        engine.create_memories(inputs, "tester").await.unwrap();
        engine.embeddings_settled().await.unwrap();
        let semantic = engine.semantic.clone().unwrap();
        let stored = store.load_embeddings("hashing").await.unwrap();
        for text in ["deploy the shop nightly", "staging cluster cache", "build tests"] {
            let query = HashingEmbedder::new(384).embed_one(text);
            let mut exact: Vec<(String, f32)> = stored
                .iter()
                .map(|(id, vector)| (id.clone(), crate::embed::dot(vector, &query)))
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let filter = MemoryFilter::default();
            let (found, _) =
                nearest(&semantic, store.as_ref(), text, &filter, None, 10).await.unwrap();
            let found: Vec<(String, f32)> =
                found.into_iter().map(|hit| (hit.memory.id, hit.relevance as f32)).collect();
            for ((id, similarity), (exact_id, exact_similarity)) in found.iter().zip(&exact) {
                assert_eq!(similarity, exact_similarity, "{text}: exact similarities");
                assert!(id == exact_id || similarity == exact_similarity, "{text}: exact order");
            }
            assert_eq!(found.len(), 10);
        }
    }

    #[test]
    fn fusion_combines_normalised_scores() {
        let scored = |pairs: &[(&str, f64)]| -> Vec<TextMatch> {
            let mut hits = ranked(&pairs.iter().map(|(name, _)| *name).collect::<Vec<_>>());
            for (hit, (_, score)) in hits.iter_mut().zip(pairs) {
                hit.relevance = *score;
            }
            hits
        };
        let order = |fulltext: &[(&str, f64)], semantic: &[(&str, f64)], extra: &[(&str, f64)]| {
            let mut similarity: HashMap<String, f64> =
                semantic.iter().map(|(name, cos)| ((*name).to_owned(), *cos)).collect();
            similarity.extend(extra.iter().map(|(name, cos)| ((*name).to_owned(), *cos)));
            combine(scored(fulltext), scored(semantic), &similarity, 0.5)
                .into_iter()
                .map(|hit| (hit.memory.id, (hit.relevance * 1000.0).round() / 1000.0))
                .collect::<Vec<_>>()
        };
        let name = |pairs: Vec<(String, f64)>| -> Vec<String> {
            pairs.into_iter().map(|(name, _)| name).collect()
        };
        // BM25 8 and 4 (z 1 and −1; "c" has none: the lowest, −1); cosines 0.6, 0.5, 0.4
        // (z 1.22, 0, −1.22), "a"'s read from the index.
        let fused = order(&[("a", 8.0), ("b", 4.0)], &[("c", 0.6), ("b", 0.5)], &[("a", 0.4)]);
        assert_eq!(
            fused,
            [("c".to_owned(), 0.112), ("a".to_owned(), -0.112), ("b".to_owned(), -0.5)],
            "half of each side's standardised score"
        );
        assert_eq!(
            name(order(&[("a", 8.0), ("b", 7.0)], &[("b", 0.7), ("c", 0.6)], &[("a", 0.3)])),
            ["b", "a", "c"],
            "a near tie in words is decided by meaning"
        );
        assert_eq!(
            name(order(
                &[("a", 9.0), ("b", 3.0), ("c", 2.9)],
                &[("c", 0.62), ("d", 0.6)],
                &[("a", 0.58), ("b", 0.3)]
            )),
            ["a", "c", "d", "b"],
            "a clear winner in words stays ahead of a near tie in meaning"
        );
        assert_eq!(
            name(order(&[("words", 5.0)], &[("meaning", 0.9), ("other", 0.5)], &[])),
            ["meaning", "words", "other"],
            "a memory with no vector yet ranks by its words: above one only meaning found weakly"
        );
        assert_eq!(
            name(order(&[], &[("m", 0.9), ("n", 0.8)], &[])),
            ["m", "n"],
            "one ranking alone keeps its order"
        );
    }

    /// A stand-in for a sentence model: words of one meaning embed alike, so a query finds
    /// memories by meaning that share no word with it (and full text finds none of them).
    /// It counts the texts it is asked to embed.
    struct Synonyms(HashingEmbedder, std::sync::atomic::AtomicUsize);

    impl Synonyms {
        fn canonical(text: &str) -> String {
            let word = |word: String| match word.as_str() {
                "apples" | "berries" | "fruit" => "fruit".to_owned(),
                _ => word,
            };
            crate::text::words(text).map(word).collect::<Vec<_>>().join(" ")
        }
    }

    #[async_trait::async_trait]
    impl Embedder for Synonyms {
        fn model(&self) -> &str {
            "synonyms"
        }

        fn dimensions(&self) -> usize {
            self.0.dimensions()
        }

        async fn embed(
            &self,
            texts: &[String],
        ) -> std::result::Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
            self.1.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|text| self.0.embed_one(&Self::canonical(text))).collect())
        }
    }

    #[test]
    fn the_query_cache_keeps_the_latest_queries() {
        let mut cache = QueryCache::default();
        let vector = |x: f32| -> Arc<[f32]> { vec![x; 3].into() };
        for n in 0..QUERY_CACHE + 10 {
            cache.insert(&format!("query {n}"), vector(n as f32));
        }
        cache.insert("query 20", vector(-1.0));
        assert_eq!(cache.vectors.len(), QUERY_CACHE);
        assert!(cache.get("query 0").is_none() && cache.get("query 9").is_none());
        assert_eq!(cache.get("query 10").unwrap()[0], 10.0);
        assert_eq!(cache.get("query 20").unwrap()[0], -1.0, "a query asked again keeps its slot");
        assert!(cache.get(&format!("query {}", QUERY_CACHE + 9)).is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn asking_the_same_query_again_embeds_it_once_with_the_same_hits() {
        use cairn_types::{RetrievalMode, SearchQuery};

        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let embedder = Arc::new(Synonyms(HashingEmbedder::new(256), Default::default()));
        let engine = crate::Engine::new(Arc::new(store.unwrap())).with_embedder(embedder.clone());
        let memories = ["the staging cluster restarts nightly", "coffee machine on floor two"];
        let memories = memories.iter().map(|text| new_memory(text, None)).collect();
        engine.create_memories(memories, "tester").await.unwrap();
        engine.embeddings_settled().await.unwrap();
        let stored = embedder.1.load(Ordering::SeqCst);
        let query = || SearchQuery {
            q: Some("when does staging restart".to_owned()),
            mode: Some(RetrievalMode::Semantic),
            ..SearchQuery::default()
        };
        let ids = |result: cairn_types::SearchResult| -> Vec<String> {
            result.hits.into_iter().map(|hit| hit.memory.id).collect()
        };
        let first = ids(engine.search(query()).await.unwrap());
        let again = ids(engine.search(query()).await.unwrap());
        assert!(!first.is_empty());
        assert_eq!(first, again);
        assert_eq!(embedder.1.load(Ordering::SeqCst), stored + 1, "the query embedded once");
    }

    fn engine_with_synonyms(directory: &tempfile::TempDir) -> crate::Engine {
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        crate::Engine::new(Arc::new(store.unwrap()))
            .with_embedder(Arc::new(Synonyms(HashingEmbedder::new(256), Default::default())))
    }

    fn new_memory(content: &str, repo: Option<&str>) -> cairn_types::NewMemory {
        let scope = if repo.is_some() { Scope::Repo } else { Scope::User };
        cairn_types::NewMemory {
            repo: repo.map(str::to_owned),
            ..crate::testing::memory(content, scope)
        }
    }

    fn by_meaning(q: &str, repo: Option<&str>, limit: u32) -> cairn_types::SearchQuery {
        cairn_types::SearchQuery {
            q: Some(q.to_owned()),
            repo: repo.map(str::to_owned),
            limit: Some(limit),
            mode: Some(cairn_types::RetrievalMode::Hybrid),
            ..cairn_types::SearchQuery::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn archived_and_erased_memories_leave_no_gap_in_hybrid_results() {
        let directory = tempfile::tempdir().unwrap();
        let engine = engine_with_synonyms(&directory);
        // The nearest fifty say only "apples" (a search ranks at least fifty candidates);
        // ten more are further off; the rest unrelated.
        const GONE: usize = 50;
        let mut texts: Vec<String> = vec!["apples".to_owned(); GONE];
        texts.extend((0..10).map(|i| format!("apples in crate {i} of the cellar")));
        texts.extend((0..40).map(|i| format!("the staging cluster restarts at {i}")));
        let inputs = texts.iter().map(|text| new_memory(text, None)).collect();
        let created = engine.create_memories(inputs, "tester").await.unwrap();
        engine.embeddings_settled().await.unwrap();
        let nearest: Vec<&str> = created[..GONE].iter().map(|memory| memory.id.as_str()).collect();

        let before = engine.search(by_meaning("berries", None, 5)).await.unwrap();
        assert_eq!(before.hits.len(), 5, "found by meaning alone: no word is shared");
        assert!(before.hits.iter().all(|hit| nearest.contains(&hit.memory.id.as_str())));

        // Four ways out of retrieval: archive, a PATCH archiving, another with a change, erase.
        for id in &nearest[3..] {
            engine.archive_memory(id, "tester").await.unwrap();
        }
        let archive = cairn_types::MemoryPatch { archived: Some(true), ..Default::default() };
        engine.update_memory(nearest[0], archive.clone(), "tester").await.unwrap();
        let archive_stale = cairn_types::MemoryPatch {
            status: Some(cairn_types::Status::Stale),
            ..archive.clone()
        };
        engine.update_memory(nearest[1], archive_stale, "tester").await.unwrap();
        let erase = cairn_types::ErasureRequest {
            memory_ids: vec![nearest[2].to_owned()],
            ..Default::default()
        };
        engine.erase(erase, "tester").await.unwrap();

        for round in 0..2 {
            let after = engine.search(by_meaning("berries", None, 5)).await.unwrap();
            let found: Vec<&str> = after.hits.iter().map(|hit| hit.memory.id.as_str()).collect();
            assert_eq!(found.len(), 5, "round {round}: still five hits, {found:?}");
            assert!(found.iter().all(|id| !nearest.contains(id)), "round {round}: {found:?}");
        }
        let semantic = engine.semantic.clone().unwrap();
        let mut left = usize::MAX;
        for _ in 0..100 {
            left = semantic.index.read().unwrap().len();
            if left == created.len() - GONE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(left, created.len() - GONE, "the index let go of what left retrieval");

        // A restored memory is embedded again and found again.
        let restore = cairn_types::MemoryPatch { archived: Some(false), ..Default::default() };
        engine.update_memory(nearest[5], restore, "tester").await.unwrap();
        engine.embeddings_settled().await.unwrap();
        let restored = engine.search(by_meaning("berries", None, 5)).await.unwrap();
        assert_eq!(restored.hits[0].memory.id, nearest[5]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repository_finds_its_own_memories_among_a_thousand_closer_ones() {
        let directory = tempfile::tempdir().unwrap();
        let engine = engine_with_synonyms(&directory);
        let others: Vec<_> =
            (0..1_000).map(|i| new_memory("apples", Some(&format!("repo{i}")))).collect();
        engine.create_memories(others, "tester").await.unwrap();
        let own = vec![
            new_memory("apples in the cairn crate", Some("cairn")),
            new_memory("apples go in the cairn cellar", Some("cairn")),
            new_memory("apples are kept somewhere cool", None),
        ];
        let own: Vec<String> = engine
            .create_memories(own, "tester")
            .await
            .unwrap()
            .into_iter()
            .map(|memory| memory.id)
            .collect();
        engine.embeddings_settled().await.unwrap();

        let result = engine.search(by_meaning("berries", Some("cairn"), 3)).await.unwrap();
        let mut found: Vec<String> = result.hits.into_iter().map(|hit| hit.memory.id).collect();
        found.sort();
        let mut expected = own.clone();
        expected.sort();
        assert_eq!(found, expected, "its own and the repo-less, never another repository's");

        let request = cairn_types::ContextRequest {
            task: "berries".to_owned(),
            repo: Some("cairn".to_owned()),
            token_budget: Some(200),
        };
        let pack = engine.context(request).await.unwrap();
        assert!(own.iter().all(|id| pack.memory_ids.contains(id)), "{:?}", pack.memory_ids);
        assert_eq!(pack.memory_ids.len(), 3, "{}", pack.context);
    }
}
