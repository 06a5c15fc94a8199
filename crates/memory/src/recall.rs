//! Recall bookkeeping in flight. A context pack marks the memories it used as recalled after
//! it answers, in the background, so no request waits for that write, and no read waits for
//! it either: until it lands, reads lay the pending recalls over what the store returns.

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_types::{Memory, Timestamp};
use tokio::sync::watch;

/// Recalls written in the background and not landed yet.
pub(crate) struct PendingRecalls {
    ledger: Mutex<Ledger>,
    /// How many recall writes are in flight; watched by [`PendingRecalls::settled`].
    in_flight: watch::Sender<usize>,
}

#[derive(Default)]
struct Ledger {
    /// By memory: the times of its pending recalls.
    memories: HashMap<String, Vec<Timestamp>>,
    /// By task key: the memories of its pending recalls.
    tasks: HashMap<String, Vec<String>>,
}

/// One pending recall write; [`PendingRecalls::landed`] takes it off the ledger.
pub(crate) struct Recall {
    memory_ids: Vec<String>,
    task_key: String,
    at: Timestamp,
}

impl Default for PendingRecalls {
    fn default() -> PendingRecalls {
        PendingRecalls { ledger: Mutex::default(), in_flight: watch::Sender::new(0) }
    }
}

impl PendingRecalls {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a recall about to be written.
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

    use cairn_types::{NewMemory, PatchEvidenceRequest, Scope};

    use crate::{Engine, text};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_show_a_recall_in_flight_without_waiting_for_it() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(Arc::new(store.unwrap()));
        let input = NewMemory {
            content: "Deploys go through the release script.".to_owned(),
            scope: Scope::Repo,
            repo: None,
            tags: Vec::new(),
            source: None,
            metadata: Default::default(),
        };
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
}
