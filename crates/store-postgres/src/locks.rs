//! Locks shared by every daemon on the database: session advisory locks, all of one store's
//! held through one session of its lock pool, so a held lock keeps no connection of its own
//! (a conversation's step holds its lock across a language model's answer, seconds long,
//! and 64 such steps once took 64 connections of a pool of 32).
//!
//! A lock is taken with `pg_try_advisory_lock` on the shared session, and waited for by
//! trying again, with growing pauses, for as long as [`LOCK_WAIT`]: the session is never
//! blocked by a wait, so any number of steps can wait at once. Advisory locks are
//! re-entrant within a session, so the store keeps the keys its session holds and never asks
//! for one of them again: two holders in one daemon exclude each other as two daemons do.
//!
//! When a daemon dies or the session drops, PostgreSQL releases its locks with the session,
//! so a lock is never left behind by a crash; a dropped session is replaced for the next lock.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_store::{LockAttempt, Result, SharedLock, StoreError};
use tokio::sync::oneshot;

use crate::{PgStore, lock_key, pg};

/// How long a wait for a lock may last: as long as a request may (a language model's step
/// behind another one), not a pool's few seconds.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(120);

/// The first pause between two tries of a busy lock; each pause doubles, up to
/// [`MOST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const MOST_PAUSE: Duration = Duration::from_millis(100);

/// The session a store's locks are held through, and the keys held on it.
#[derive(Default)]
pub(crate) struct LockSession {
    client: tokio::sync::Mutex<Option<Arc<deadpool_postgres::Client>>>,
    held: Mutex<HashSet<i64>>,
}

impl LockSession {
    /// The live session, connecting a new one when there is none or it closed.
    pub(crate) async fn client(&self, store: &PgStore) -> Result<Arc<deadpool_postgres::Client>> {
        let mut current = self.client.lock().await;
        if let Some(client) = current.as_ref().filter(|client| !client.is_closed()) {
            return Ok(client.clone());
        }
        let client = store
            .lock_pool()
            .get()
            .await
            .map_err(|error| StoreError::Backend(format!("lock connection: {error}").into()))?;
        let client = Arc::new(client);
        *current = Some(client.clone());
        Ok(client)
    }

    /// Marks `key` held by this store; false when it is already.
    fn reserve(&self, key: i64) -> bool {
        self.held.lock().expect("never poisoned").insert(key)
    }

    fn forget(&self, key: i64) {
        self.held.lock().expect("never poisoned").remove(&key);
    }
}

/// A held advisory lock: its key and the session holding it.
struct Held {
    key: i64,
    client: Arc<deadpool_postgres::Client>,
    store: PgStore,
}

impl Drop for Held {
    fn drop(&mut self) {
        let (key, client, store) = (self.key, self.client.clone(), self.store.clone());
        let release = async move {
            let unlocked = client
                .query_one("SELECT pg_advisory_unlock($1)", &[&key])
                .await
                .map(|row| row.get::<_, bool>(0));
            if !matches!(unlocked, Ok(true)) {
                // Never go on with a session that may still hold the lock: a new one is
                // made for the next lock, and this one's locks end with it.
                tracing::warn!(?unlocked, "an advisory lock was not released; closing its session");
                let mut current = store.lock_session().client.lock().await;
                if current.as_ref().is_some_and(|current| Arc::ptr_eq(current, &client)) {
                    *current = None;
                }
            }
            store.lock_session().forget(key);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(release);
            }
            // No runtime: the store is going away, and its session with it.
            Err(_) => self.store.lock_session().forget(self.key),
        }
    }
}

/// One try of `key`, on a task of its own: a caller that stops waiting gets no lock, and a
/// lock taken for it is released at once (the guard is dropped when the send fails).
async fn try_key(store: &PgStore, key: i64) -> Result<Option<Held>> {
    let store = store.clone();
    let (sender, receiver) = oneshot::channel();
    tokio::spawn(async move {
        let taken = async {
            if !store.lock_session().reserve(key) {
                return Ok(None);
            }
            let attempt = async {
                let client = store.lock_session().client(&store).await?;
                let row = client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                    .await
                    .map_err(pg)?;
                Ok::<_, StoreError>(row.get::<_, bool>(0).then_some(client))
            }
            .await;
            match attempt {
                Ok(Some(client)) => Ok(Some(Held { key, client, store: store.clone() })),
                busy_or_failed => {
                    store.lock_session().forget(key);
                    busy_or_failed.map(|_| None)
                }
            }
        }
        .await;
        let _ = sender.send(taken);
    });
    receiver
        .await
        .map_err(|_| StoreError::Backend("the lock task ended without an answer".into()))?
}

/// Takes the lock `name`, waiting for it up to [`LOCK_WAIT`].
pub(crate) async fn lock(store: &PgStore, name: &str) -> Result<SharedLock> {
    let key = lock_key(store.schema(), name);
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    let mut pause = FIRST_PAUSE;
    loop {
        if let Some(held) = try_key(store, key).await? {
            return Ok(SharedLock::new(held));
        }
        if tokio::time::Instant::now() + pause > deadline {
            return Err(StoreError::Backend(
                format!("the lock `{name}` stayed taken for {} s", LOCK_WAIT.as_secs()).into(),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MOST_PAUSE);
    }
}

/// Takes the lock `name` when no one holds it.
pub(crate) async fn try_lock(store: &PgStore, name: &str) -> Result<LockAttempt> {
    let key = lock_key(store.schema(), name);
    Ok(match try_key(store, key).await? {
        Some(held) => LockAttempt::Held(SharedLock::new(held)),
        None => LockAttempt::Busy,
    })
}
