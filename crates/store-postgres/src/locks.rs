//! Locks shared by every daemon on the database: session advisory locks held on a dedicated
//! connection (from the store's lock pool) until the guard is dropped.
//!
//! When a daemon dies or its lock connection drops, PostgreSQL releases its locks with the
//! session, so a lock is never left behind by a crash.

use cairn_store::{LockAttempt, Result, SharedLock, StoreError};
use tokio::sync::oneshot;

use crate::{PgStore, lock_key, pg, spawn};

/// A held advisory lock: its key and the session holding it.
struct Held {
    key: i64,
    client: Option<deadpool_postgres::Client>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let unlocked = client
                        .query_one("SELECT pg_advisory_unlock($1)", &[&key])
                        .await
                        .map(|row| row.get::<_, bool>(0));
                    if !matches!(unlocked, Ok(true)) {
                        // Never hand a session that may still hold the lock to someone else:
                        // closing it releases the lock.
                        drop(deadpool_postgres::Object::take(client));
                    }
                });
            }
            Err(_) => drop(deadpool_postgres::Object::take(client)),
        }
    }
}

async fn lock_client(store: &PgStore) -> Result<deadpool_postgres::Client> {
    store
        .lock_pool()
        .get()
        .await
        .map_err(|error| StoreError::Backend(format!("lock connection: {error}").into()))
}

/// Takes the lock `name`, waiting for it (up to the lock sessions' `lock_timeout`, 30 s).
pub(crate) async fn lock(store: &PgStore, name: &str) -> Result<SharedLock> {
    let key = lock_key(store.schema(), name);
    let store = store.clone();
    let (sender, receiver) = oneshot::channel();
    // On a task of its own: a caller that stops waiting gets no lock, and the lock taken for
    // it is released at once (the guard is dropped when the send fails).
    tokio::spawn(async move {
        let taken = async {
            let client = lock_client(&store).await?;
            client.execute("SELECT pg_advisory_lock($1)", &[&key]).await.map_err(pg)?;
            Ok(Held { key, client: Some(client) })
        }
        .await;
        let _ = sender.send(taken);
    });
    let held = receiver
        .await
        .map_err(|_| StoreError::Backend("the lock task ended without an answer".into()))??;
    Ok(SharedLock::new(held))
}

/// Takes the lock `name` when no one holds it.
pub(crate) async fn try_lock(store: &PgStore, name: &str) -> Result<LockAttempt> {
    let key = lock_key(store.schema(), name);
    let store = store.clone();
    spawn(async move {
        let client = lock_client(&store).await?;
        let row = client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(pg)?;
        if row.get::<_, bool>(0) {
            Ok(LockAttempt::Held(SharedLock::new(Held { key, client: Some(client) })))
        } else {
            Ok(LockAttempt::Busy)
        }
    })
    .await
}
