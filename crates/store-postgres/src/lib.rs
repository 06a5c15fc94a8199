//! Cairn's PostgreSQL backend: every storage trait of `cairn-store` on one PostgreSQL
//! database that several daemons share.
//!
//! tokio-postgres with deadpool pools (one for statements, one for held locks), versioned
//! migrations run under an advisory lock, offsets and idempotency kept by the database, and
//! a LISTEN/NOTIFY doorbell that tells each daemon what the others changed.

// The skeleton: helpers the trait modules use once they are filled in.
#![allow(dead_code)]

mod audit;
mod config;
mod conflicts;
mod connectors;
mod conversations;
mod fts;
mod keys;
mod locks;
mod memories;
mod migrations;
mod notify;
mod rows;
mod search;
mod transfer;
mod vectors;

#[cfg(any(test, feature = "test-cluster"))]
pub mod testing;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use cairn_store::{Result, StoreError};

pub use deadpool_postgres::Transaction;

/// How to reach the database and how much of it to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?sslmode=require`.
    pub url: String,
    /// The schema Cairn's tables live in (created when missing); `public` by default.
    pub schema: String,
    /// Connections for statements.
    pub pool_size: usize,
    /// Connections that hold shared locks (a held lock keeps its session).
    pub lock_connections: usize,
    /// PEM roots to verify the server's certificate with; the platform's when `None`.
    pub ca_file: Option<PathBuf>,
    /// Names this daemon's sessions (`pg_stat_activity.application_name`).
    pub application_name: String,
    /// Whether to listen for other daemons' changes (a daemon does; `cairn keys` does not).
    pub listen: bool,
}

impl PgOptions {
    /// The defaults for `url`: schema `public`, 16 statement connections, 32 lock
    /// connections, the platform's roots, listening.
    pub fn new(url: &str) -> PgOptions {
        PgOptions {
            url: url.to_owned(),
            schema: "public".to_owned(),
            pool_size: 16,
            lock_connections: 32,
            ca_file: None,
            application_name: "cairn".to_owned(),
            listen: true,
        }
    }
}

/// A store on PostgreSQL. Cheap to clone: clones share pools and the listener.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

struct Shared {
    schema: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PgStore").field("schema", &self.shared.schema).finish()
    }
}

/// The future a transaction body returns, borrowing the transaction and its data.
pub(crate) type TxFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

impl PgStore {
    /// Connects, runs the migrations this binary knows (under an advisory lock, so daemons
    /// starting together migrate once) and starts listening when `options.listen`.
    pub async fn open(options: PgOptions) -> Result<PgStore> {
        let _ = options;
        Err(not_yet())
    }

    /// The schema this store's tables live in.
    pub fn schema(&self) -> &str {
        &self.shared.schema
    }

    /// Runs `body` in a transaction on a pooled connection, to completion even when the
    /// caller stops waiting, and commits it; a serialization failure or deadlock is retried
    /// (up to 3 times), as is a connection found closed before the commit was sent.
    pub(crate) async fn tx_with_retry<D, T, F>(&self, data: D, body: F) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c Transaction<'c>, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        let _ = (data, body);
        Err(not_yet())
    }

    /// Runs `body` on a pooled connection without an explicit transaction (each statement
    /// sees its own snapshot), to completion even when the caller stops waiting.
    pub(crate) async fn read<D, T, F>(&self, data: D, body: F) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c deadpool_postgres::Client, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        let _ = (data, body);
        Err(not_yet())
    }
}

/// The error of what is not built yet.
pub(crate) fn not_yet() -> StoreError {
    StoreError::Backend("the PostgreSQL backend does not do this yet".into())
}

/// A PostgreSQL error as a store error.
pub(crate) fn pg(error: tokio_postgres::Error) -> StoreError {
    StoreError::backend(error)
}

/// The advisory-lock key of `name` in `schema`: the first 8 bytes of
/// sha256("cairn:<schema>:<name>"), so stores on other schemas never collide.
pub(crate) fn lock_key(schema: &str, name: &str) -> i64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("cairn:{schema}:{name}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}
