//! Recall bookkeeping in flight. A context pack marks the memories it used as recalled after
//! it answers, in the background, so no request waits for that write, and no read waits for
//! it either: until it lands, reads lay the pending recalls over what the store returns.
//!
//! The writes are coalesced: a pack's recall joins a queue, and one writer task commits what
//! queued during the last [`WINDOW`] (and while its previous commit ran) in one transaction
//! ([`cairn_store::MemoryStore::record_recalls`]). Packs that recall the same memories then
//! rewrite its row once, not once each, and the store's log grows by a commit's pages every
//! window instead of every pack (issue 16: the log's checkpoints were the context pack's
//! stall). Under overload the queue is bounded: past [`MAX_QUEUED`] recalls waiting, new
//! ones are shed (not counted), and the writer logs how many at warn level.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_store::{Recall, Store};
use cairn_types::{Memory, Timestamp};
use tokio::sync::watch;

/// How long the writer waits for more recalls before each commit.
pub(crate) const WINDOW: Duration = Duration::from_millis(50);

/// The most recalls waiting for the writer; more are shed. At a few hundred packs a second
/// the queue holds well under a hundred; this many means the store stopped keeping up.
pub(crate) const MAX_QUEUED: usize = 20_000;

/// Recalls written in the background and not landed yet.
pub(crate) struct PendingRecalls {
    ledger: Mutex<Ledger>,
    /// How many recall writes are in flight; watched by [`PendingRecalls::settled`].
    in_flight: watch::Sender<usize>,
    queue: Mutex<Queue>,
}

/// Recalls waiting for the writer task.
#[derive(Default)]
struct Queue {
    recalls: Vec<Recall>,
    /// Whether a writer task is running (it ends when it finds the queue empty).
    writing: bool,
    /// Recalls shed since the writer last said so.
    shed: u64,
}

#[derive(Default)]
struct Ledger {
    /// By memory: the times of its pending recalls.
    memories: HashMap<String, Vec<Timestamp>>,
    /// By task key: the memories of its pending recalls.
    tasks: HashMap<String, Vec<String>>,
}

impl Default for PendingRecalls {
    fn default() -> PendingRecalls {
        PendingRecalls {
            ledger: Mutex::default(),
            in_flight: watch::Sender::new(0),
            queue: Mutex::default(),
        }
    }
}

impl PendingRecalls {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a recall for the writer task (started when none runs), which commits it with
    /// the others queued in the same window; reads show it meanwhile. Returns whether it was
    /// queued: `false` when the queue is full and the recall is shed.
    pub(crate) fn record(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
        memory_ids: &[String],
        task_key: &str,
        at: Timestamp,
    ) -> bool {
        let mut queue = self.queue();
        if queue.recalls.len() >= MAX_QUEUED {
            queue.shed += 1;
            return false;
        }
        let recall = self.start(memory_ids, task_key, at);
        queue.recalls.push(recall);
        if !queue.writing {
            queue.writing = true;
            let (recalls, store) = (self.clone(), store.clone());
            tokio::spawn(async move { recalls.write(store).await });
        }
        true
    }

    /// The writer task: every [`WINDOW`], commits what queued in one transaction, until a
    /// window passes with nothing queued.
    async fn write(self: Arc<Self>, store: Arc<dyn Store>) {
        loop {
            tokio::time::sleep(WINDOW).await;
            let (batch, shed) = {
                let mut queue = self.queue();
                if queue.recalls.is_empty() {
                    queue.writing = false;
                    return;
                }
                (std::mem::take(&mut queue.recalls), std::mem::take(&mut queue.shed))
            };
            if shed > 0 {
                tracing::warn!(
                    shed,
                    queued = MAX_QUEUED,
                    "recall bookkeeping fell behind: recalls shed, not counted"
                );
            }
            if let Err(error) = store.record_recalls(&batch).await {
                tracing::error!(%error, recalls = batch.len(), "recording recalls failed");
            }
            for recall in batch {
                self.landed(recall);
            }
        }
    }

    /// Records a recall about to be written: the pending write, which
    /// [`PendingRecalls::landed`] takes off the ledger.
    pub(crate) fn start(&self, memory_ids: &[String], task_key: &str, at: Timestamp) -> Recall {
        let mut ledger = self.ledger();
        for id in memory_ids {
            ledger.memories.entry(id.clone()).or_default().push(at);
        }
        ledger.tasks.entry(task_key.to_owned()).or_default().extend(memory_ids.iter().cloned());
        self.in_flight.send_modify(|count| *count += 1);
        Recall { memory_ids: memory_ids.to_vec(), task_key: task_key.to_owned(), at }
    }

    /// Takes a recall off the ledger once its write landed (or failed).
    pub(crate) fn landed(&self, recall: Recall) {
        let mut ledger = self.ledger();
        for id in &recall.memory_ids {
            if let Some(times) = ledger.memories.get_mut(id) {
                if let Some(index) = times.iter().position(|at| *at == recall.at) {
                    times.swap_remove(index);
                }
                if times.is_empty() {
                    ledger.memories.remove(id);
                }
            }
        }
        if let Some(ids) = ledger.tasks.get_mut(&recall.task_key) {
            for id in &recall.memory_ids {
                if let Some(index) = ids.iter().position(|pending| pending == id) {
                    ids.remove(index);
                }
            }
            if ids.is_empty() {
                ledger.tasks.remove(&recall.task_key);
            }
        }
        drop(ledger);
        self.in_flight.send_modify(|count| *count -= 1);
    }

    /// Lays pending recalls over memories as read: a recall later than the memory's stored
    /// `lastRecalledAt` has not landed for it yet.
    pub(crate) fn overlay<'a>(&self, memories: impl IntoIterator<Item = &'a mut Memory>) {
        let ledger = self.ledger();
        if ledger.memories.is_empty() {
            return;
        }
        for memory in memories {
            let Some(times) = ledger.memories.get(&memory.id) else { continue };
            for &at in times {
                if memory.last_recalled_at.is_none_or(|stored| at > stored) {
                    memory.recall_count += 1;
                    memory.last_recalled_at = Some(at);
                }
            }
        }
    }

    /// The memories of pending recalls for a task, to add to those the store knows.
    pub(crate) fn for_task(&self, task_key: &str) -> Vec<String> {
        self.ledger().tasks.get(task_key).cloned().unwrap_or_default()
    }

    /// Waits until every recall write started so far has landed (for a clean shutdown).
    pub(crate) async fn settled(&self) {
        let mut in_flight = self.in_flight.subscribe();
        let _ = in_flight.wait_for(|count| *count == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_types::{PatchEvidenceRequest, Scope};

    use crate::{Engine, text};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_show_a_recall_in_flight_without_waiting_for_it() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(Arc::new(store.unwrap()));
        let input = crate::testing::memory("Deploys go through the release script.", Scope::Repo);
        let memory = engine.create_memory(input, "t").await.unwrap();
        let task = "ship the release";
        let key = text::task_key(task);
        let at = cairn_types::Timestamp::now();

        // A recall whose write has not landed (the writer is busy elsewhere).
        let recall = engine.recalls.start(std::slice::from_ref(&memory.id), &key, at);
        let read = engine.get_memory(&memory.id).await.unwrap();
        assert_eq!((read.recall_count, read.last_recalled_at), (1, Some(at)));
        let listed = engine.list_memories(Default::default()).await.unwrap();
        assert_eq!(listed.memories[0].recall_count, 1);
        let request =
            PatchEvidenceRequest { task: task.to_owned(), files: Vec::new(), commands: Vec::new() };
        let evidence = engine.record_patch_evidence(request).await.unwrap();
        assert_eq!(evidence.memories_used, std::slice::from_ref(&memory.id));

        // The write lands: counted once, from the store.
        engine.store.record_recall(std::slice::from_ref(&memory.id), &key, at).await.unwrap();
        let read = engine.get_memory(&memory.id).await.unwrap();
        assert_eq!(read.recall_count, 1, "a landed recall is not counted twice");
        engine.recalls.landed(recall);
        engine.settled().await;
        assert_eq!(engine.get_memory(&memory.id).await.unwrap().recall_count, 1);
    }

    /// Packs made at once have their recalls written together, and every one is counted:
    /// in the store itself once they landed, not only in what reads lay over it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recalls_of_packs_made_at_once_are_all_counted() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Arc::new(Engine::new(Arc::new(store.unwrap())));
        let mut ids = Vec::new();
        for content in ["Deploys go through the release script.", "Deploys need a tag first."] {
            let input = crate::testing::memory(content, Scope::Repo);
            ids.push(engine.create_memory(input, "t").await.unwrap().id);
        }
        let packs: Vec<_> = (0..40)
            .map(|n| {
                let engine = engine.clone();
                tokio::spawn(async move {
                    let request = cairn_types::ContextRequest {
                        task: format!("deploy number {n}"),
                        repo: None,
                        token_budget: None,
                    };
                    engine.context(request).await.unwrap().memory_ids
                })
            })
            .collect();
        for pack in packs {
            let mut used = pack.await.unwrap();
            used.sort();
            let mut expected = ids.clone();
            expected.sort();
            assert_eq!(used, expected, "each pack holds both memories");
        }
        engine.settled().await;
        for id in &ids {
            let stored = engine.store.get_memory(id).await.unwrap().unwrap();
            assert_eq!(stored.recall_count, 40, "every pack's recall landed");
            assert_eq!(engine.get_memory(id).await.unwrap().recall_count, 40);
        }
        let served = engine.store.recalled_for_task(&text::task_key("deploy number 7")).await;
        assert_eq!(served.unwrap().len(), 2);
    }
}
