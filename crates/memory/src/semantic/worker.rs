//! The worker: it claims the embedder lock, loads the stored vectors, and embeds what is
//! missing, a batch at a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cairn_store::{LockAttempt, SharedLock, Store};
use tokio::sync::Notify;

use super::{BATCH, IDLE, LOAD_PAGE, LOCK_RETRY, Semantic};
use crate::embed::{FlatIndex, VectorIndex, VectorLabels};
use crate::{Error, Result};

/// The worker: ends when the engine that owns `semantic` is dropped.
pub(super) async fn work(
    semantic: std::sync::Weak<Semantic>,
    store: Arc<dyn Store>,
    wake: Arc<Notify>,
) {
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
pub(super) async fn refresh(
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
pub(super) async fn load(
    semantic: &std::sync::Weak<Semantic>,
    store: &dyn Store,
    model: &str,
) -> Result<()> {
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
