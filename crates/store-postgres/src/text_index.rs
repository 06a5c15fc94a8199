//! The in-memory full-text index ([`cairn_store::fulltext::TextIndex`]) of this daemon, over
//! the live memories of the shared database, keyed by memory id.
//!
//! The database stays the source of truth, and every daemon holds its own index, kept in
//! step as the vector index is: this store's own writes are taken after their commit,
//! before the write returns (every memory write sends the ids it changed with NOTIFY, and
//! the same ids are noted for the index); the other daemons' writes come as
//! [`ExternalChange::Memories`] from the listener. A change is re-read from the table, so
//! what the index holds is what was committed. When the listener is down notifications are
//! lost, so searches use SQL until it is back and the index has been built again. A store
//! that does not listen never uses the index.
//!
//! A search reads every write acknowledged before it began, whichever daemon took it: before
//! it asks the index it waits for a read barrier, a NOTIFY of this store's own that the
//! listener hears after every notification committed before it (PostgreSQL delivers them in
//! commit order), and that the index's task reaches after applying them. Searches that
//! arrive while a barrier is being sent share the next one. A barrier not back within
//! [`BARRIER_WAIT`] sends the search to SQL.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use cairn_store::fulltext::{DocLabels, Held, IndexCell, TextIndex};
use cairn_store::{ExternalChange, Result, StoreError};
use deadpool_postgres::GenericClient;
use tokio::sync::{mpsc, oneshot};

use crate::rows::query;

/// Rows read per statement while building.
const BUILD_PAGE: i64 = 10_000;
/// Below this many live memories the index is built before the store opens.
const BUILT_AT_OPEN_BELOW: u64 = 10_000;
/// How long a search waits for its read barrier before it asks SQL instead.
const BARRIER_WAIT: Duration = Duration::from_millis(250);

/// The index and its state: while it is built, the ids of the memories changed meanwhile;
/// `Fallback`: changes may have been missed (the listener was down, or a re-read failed), so
/// SQL answers until the index is built again.
#[derive(Debug)]
pub(crate) struct SearchIndex {
    pub(crate) cell: IndexCell<String, String>,
    /// Ids noted by transactions not yet committed, by transaction (its address).
    noted: Mutex<HashMap<usize, Vec<String>>>,
    /// Wakes the task that re-reads changes and rebuilds.
    work: mpsc::UnboundedSender<Work>,
    /// Searches waiting for the next read barrier to be sent.
    asking: mpsc::UnboundedSender<oneshot::Sender<()>>,
    /// Barriers sent and not yet reached, by number, with their searches.
    sent: Mutex<BTreeMap<u64, Vec<oneshot::Sender<()>>>>,
}

#[derive(Debug)]
pub(crate) enum Work {
    Changed(Vec<String>),
    Rebuild,
    /// The listener heard read barrier `n`: what was heard before it is in the queue ahead.
    Barrier(u64),
}

/// What the index's tasks (see [`start`]) take: its work, and the searches asking for a
/// read barrier.
pub(crate) struct Tasks {
    work: mpsc::UnboundedReceiver<Work>,
    asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
}

impl SearchIndex {
    /// A new index, and what its tasks take.
    pub(crate) fn new() -> (Arc<SearchIndex>, Tasks) {
        let (work, receiver) = mpsc::unbounded_channel();
        let (asking, asked) = mpsc::unbounded_channel();
        let index = SearchIndex {
            cell: IndexCell::building(),
            noted: Mutex::default(),
            work,
            asking,
            sent: Mutex::default(),
        };
        (Arc::new(index), Tasks { work: receiver, asked })
    }

    /// What the listener heard of this store's read barrier `n` (on its task).
    pub(crate) fn heard_barrier(&self, n: u64) {
        let _ = self.work.send(Work::Barrier(n));
    }

    /// Waits until the index holds every write acknowledged before the call, on any daemon;
    /// false when it is not ready or the barrier did not come back in time (ask SQL then).
    pub(crate) async fn caught_up(&self) -> bool {
        if self.cell.state() != cairn_store::fulltext::IndexState::Ready {
            return false;
        }
        let (reached, waiting) = oneshot::channel();
        if self.asking.send(reached).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(BARRIER_WAIT, waiting).await, Ok(Ok(())))
    }

    /// Barriers up to `n` are reached: their searches go on.
    fn reached(&self, n: u64) {
        let mut sent = self.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let later = sent.split_off(&(n + 1));
        for waiter in std::mem::replace(&mut *sent, later).into_values().flatten() {
            let _ = waiter.send(());
        }
    }

    /// Every barrier sent is lost (the listener is down): their searches ask SQL now.
    fn drop_barriers(&self) {
        self.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// What the listener heard (called on its task: it must not block).
    pub(crate) fn heard(&self, change: &ExternalChange) {
        match change {
            ExternalChange::Memories { ids } if ids.is_empty() => {
                let _ = self.work.send(Work::Rebuild);
            }
            ExternalChange::Memories { ids } => {
                let _ = self.work.send(Work::Changed(ids.clone()));
            }
            ExternalChange::Poll => {
                // The listener is down: whatever the others write now is not heard.
                *self.cell.lock() = Held::Fallback;
                self.drop_barriers();
            }
            ExternalChange::Resync => {
                let _ = self.work.send(Work::Rebuild);
            }
            _ => {}
        }
    }

    /// Notes that the transaction at `tx` changed `ids`.
    pub(crate) fn note(&self, tx: usize, ids: &[String]) {
        let mut noted = self.noted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        noted.entry(tx).or_default().extend(ids.iter().cloned());
    }

    /// The ids the transaction at `tx` noted (it committed or not: the caller knows).
    pub(crate) fn take_noted(&self, tx: usize) -> Vec<String> {
        let mut noted = self.noted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        noted.remove(&tx).unwrap_or_default()
    }

    /// After this store's commit: the memories `ids` as they now are.
    pub(crate) async fn absorb(&self, client: &(impl GenericClient + ?Sized), ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        if let Err(error) = self.take(client, ids).await {
            tracing::warn!(%error, "the full-text index missed a change; rebuilding it");
            *self.cell.lock() = Held::Fallback;
            let _ = self.work.send(Work::Rebuild);
        }
    }

    async fn take(&self, client: &(impl GenericClient + ?Sized), ids: Vec<String>) -> Result<()> {
        if let Held::Building(changed) = &mut *self.cell.lock() {
            changed.extend(ids);
            return Ok(());
        }
        let rows = read_rows(client, &ids).await?;
        match &mut *self.cell.lock() {
            Held::Building(changed) => changed.extend(ids),
            Held::Ready(index) => apply(index, &ids, &rows)?,
            Held::Fallback => {}
        }
        Ok(())
    }

    /// Builds the index again from the table, before returning (after an import).
    pub(crate) async fn rebuild(&self, client: &(impl GenericClient + ?Sized)) -> Result<()> {
        build(self, client).await
    }
}

/// A memory row's indexed text and labels.
struct Row {
    content: String,
    tags: String,
    labels: DocLabels,
    live: bool,
}

/// The rows of `ids` (archived ones too; an erased one is absent).
async fn read_rows(
    client: &(impl GenericClient + ?Sized),
    ids: &[String],
) -> Result<HashMap<String, Row>> {
    let rows = query(
        client,
        "SELECT id, content, tags::text, scope, status, repo, archived_at IS NULL \
         FROM memories WHERE id = ANY($1)",
        &[&ids],
    )
    .await?;
    rows.iter().map(row).collect()
}

fn row(row: &tokio_postgres::Row) -> Result<(String, Row)> {
    let get = |error| StoreError::backend(error);
    let scope: String = row.try_get(3).map_err(get)?;
    let status: String = row.try_get(4).map_err(get)?;
    Ok((
        row.try_get(0).map_err(get)?,
        Row {
            content: row.try_get(1).map_err(get)?,
            tags: row.try_get(2).map_err(get)?,
            labels: DocLabels {
                scope: scope.parse().map_err(StoreError::Corrupt)?,
                status: status.parse().map_err(StoreError::Corrupt)?,
                repo: row.try_get(5).map_err(get)?,
            },
            live: row.try_get(6).map_err(get)?,
        },
    ))
}

fn apply(index: &mut TextIndex<String>, ids: &[String], rows: &HashMap<String, Row>) -> Result<()> {
    let mut erased = false;
    for id in ids {
        match rows.get(id) {
            Some(row) if row.live => index.put(id.clone(), &row.content, &row.tags, &row.labels),
            // Archived: the row keeps the text it was indexed with (unless that changed too).
            Some(row) => index.remove(id, Some((&row.content, &row.tags))),
            // Erased: no trace of its words may stay.
            None => {
                index.forget(id);
                erased = true;
            }
        }
    }
    if erased {
        index.drop_unheld_terms();
    }
    Ok(())
}

/// Builds the index from the table, then takes the changes noted meanwhile.
async fn build(index: &SearchIndex, client: &(impl GenericClient + ?Sized)) -> Result<()> {
    *index.cell.lock() = Held::Building(Vec::new());
    let mut built = TextIndex::new();
    let mut after = i64::MIN;
    loop {
        let rows = query(
            client,
            "SELECT id, content, tags::text, scope, status, repo, true, pk FROM memories \
             WHERE archived_at IS NULL AND pk > $1 ORDER BY pk LIMIT $2",
            &[&after, &BUILD_PAGE],
        )
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.try_get(7).map_err(StoreError::backend)?;
        for found in &rows {
            let (id, memory) = row(found)?;
            built.put(id, &memory.content, &memory.tags, &memory.labels);
        }
    }
    // The changes made during the build, re-read until none are left; the index is ready
    // under the same lock that finds none, so no change falls between.
    let mut recount = false;
    loop {
        let changed = {
            let mut held = index.cell.lock();
            let Held::Building(changed) = &mut *held else { return Ok(()) };
            if changed.is_empty() {
                if recount {
                    // A change re-indexed over the version the build read may have left a
                    // term's count high.
                    built.compact();
                }
                built.shrink_to_fit();
                *held = Held::Ready(Box::new(built));
                return Ok(());
            }
            std::mem::take(changed)
        };
        recount = true;
        let rows = read_rows(client, &changed).await?;
        apply(&mut built, &changed, &rows)?;
    }
}

/// Builds the index (now when the store is small, else in the background), then keeps it:
/// re-reads what the others changed, rebuilds after a resync. Ends with the store.
pub(crate) async fn start(
    store: &crate::PgStore,
    index: Arc<SearchIndex>,
    tasks: Tasks,
    live: u64,
) -> Result<()> {
    let Tasks { mut work, asked } = tasks;
    if live < BUILT_AT_OPEN_BELOW {
        let client = store.client().await?;
        build(&index, &client).await?;
    } else {
        let _ = index.work.send(Work::Rebuild);
    }
    let shared: Weak<crate::Shared> = Arc::downgrade(&store.shared);
    tokio::spawn(send_barriers(shared.clone(), Arc::downgrade(&index), asked));
    let index = Arc::downgrade(&index);
    tokio::spawn(async move {
        while let Some(first) = work.recv().await {
            let (Some(index), Some(shared)) = (index.upgrade(), shared.upgrade()) else { return };
            let store = crate::PgStore { shared };
            // Take everything waiting: one rebuild serves many notices.
            let mut jobs = vec![first];
            while let Ok(more) = work.try_recv() {
                jobs.push(more);
            }
            let rebuild = jobs.iter().any(|job| matches!(job, Work::Rebuild));
            let barrier = jobs
                .iter()
                .filter_map(|job| match job {
                    Work::Barrier(n) => Some(*n),
                    _ => None,
                })
                .max();
            if rebuild && let Some(n) = barrier {
                // SQL answers while the index is built; the waiting searches need not wait.
                *index.cell.lock() = Held::Building(Vec::new());
                index.reached(n);
            }
            let result = async {
                let client = store.client().await?;
                if rebuild {
                    let started = std::time::Instant::now();
                    build(&index, &client).await?;
                    tracing::info!(
                        seconds = started.elapsed().as_secs_f64(),
                        "the full-text index is built"
                    );
                } else {
                    let ids: Vec<String> = jobs
                        .into_iter()
                        .flat_map(|job| match job {
                            Work::Changed(ids) => ids,
                            Work::Rebuild | Work::Barrier(_) => Vec::new(),
                        })
                        .collect();
                    if !ids.is_empty() {
                        index.take(&client, ids).await?;
                    }
                }
                Ok::<(), StoreError>(())
            }
            .await;
            if result.is_err() {
                *index.cell.lock() = Held::Fallback;
            }
            if let Some(n) = barrier {
                index.reached(n);
            }
            if let Err(error) = result {
                tracing::warn!(%error, "the full-text index could not be brought up to date; retrying");
                drop(store);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let _ = index.work.send(Work::Rebuild);
            }
        }
    });
    Ok(())
}

/// Sends read barriers for the searches that ask, one for all those waiting when it is sent
/// (each asked before it was sent, so it was committed after each search began).
async fn send_barriers(
    shared: Weak<crate::Shared>,
    index: Weak<SearchIndex>,
    mut asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let mut number = 0u64;
    while let Some(first) = asked.recv().await {
        let (Some(index), Some(shared)) = (index.upgrade(), shared.upgrade()) else { return };
        let store = crate::PgStore { shared };
        let mut waiting = vec![first];
        while let Ok(more) = asked.try_recv() {
            waiting.push(more);
        }
        number += 1;
        index
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(number, waiting);
        let sent = async {
            let client = store.client().await?;
            crate::notify::notify_barrier(&store, &client, number).await
        };
        if let Err(error) = sent.await {
            tracing::debug!(%error, "a read barrier could not be sent; SQL answers");
            index.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&number);
        }
    }
}
