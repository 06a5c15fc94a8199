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

use cairn_store::Store;
use cairn_types::Timestamp;
use tokio::sync::Notify;

use crate::embed::{Embedder, FlatIndex, VectorFilter, VectorIndex, VectorLabels};
use crate::{Error, Result};

mod fusion;
mod search;
mod worker;

pub(crate) use fusion::hybrid;
pub(crate) use search::{candidates, nearest_to};
use worker::{load, refresh, work};

/// How much the full-text score counts in the convex combination (the semantic one 1 − it):
/// equal weights, the coarse choice (0.3 and 0.7 both measured lower).
const LEXICAL_WEIGHT: f64 = 0.5;
/// How many memories the worker embeds at once.
const BATCH: u32 = 32;
/// How long the worker sleeps when nothing waits, unless woken by a write.
const IDLE: Duration = Duration::from_secs(5);
/// How many stored vectors the start reads at once, with their memories' labels.
const LOAD_PAGE: u32 = 1_000;
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
    pub(crate) async fn embed_query(&self, text: &str) -> Result<Arc<[f32]>> {
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

    /// The `k` vectors nearest to `query` that `filter` admits, most similar first, with the
    /// index's similarity (int8 rows: within about 0.002 of the exact one).
    async fn search(
        &self,
        query: Arc<[f32]>,
        k: usize,
        filter: VectorFilter,
    ) -> Result<Vec<(String, f32)>> {
        let index = self.index.clone();
        let scan = move || index.read().expect("index lock").search(&query, k, &filter);
        tokio::task::spawn_blocking(scan)
            .await
            .map_err(|error| Error::Embedding(format!("the vector scan failed: {error}")))
    }

    /// The similarity of each of `ids`' vectors to `query` (`None` for one not embedded yet),
    /// as the index has it.
    async fn similarities(&self, query: Arc<[f32]>, ids: Vec<String>) -> Result<Vec<Option<f32>>> {
        let index = self.index.clone();
        let read = move || {
            let index = index.read().expect("index lock");
            ids.iter().map(|id| index.similarity(&query, id)).collect()
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

#[cfg(test)]
mod tests;
