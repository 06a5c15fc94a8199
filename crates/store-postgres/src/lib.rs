//! Cairn's PostgreSQL backend: every storage trait of `cairn-store` on one PostgreSQL
//! database that several daemons share.
//!
//! tokio-postgres with deadpool pools (one for statements, one for the session that holds locks), versioned
//! migrations run under an advisory lock, offsets and idempotency kept by the database, and
//! a LISTEN/NOTIFY doorbell that tells each daemon what the others changed.

mod audit;
mod config;
mod conflicts;
mod connectors;
mod conversations;
mod idempotency;
mod keys;
mod locks;
mod memories;
mod migrations;
mod notify;
mod rows;
mod search;
mod text_index;
mod transfer;
mod vectors;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cairn_store::{ExternalChange, Result, StoreError};

pub use config::redact_url;
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
    /// Connections for the session that holds shared locks: one at a time (every lock is
    /// held through it), a second while a closed one is replaced.
    pub lock_connections: usize,
    /// PEM roots to verify the server's certificate with; the platform's when `None`.
    pub ca_file: Option<PathBuf>,
    /// Names this daemon's sessions (`pg_stat_activity.application_name`).
    pub application_name: String,
    /// Whether to listen for other daemons' changes (a daemon does; `cairn keys` does not).
    pub listen: bool,
}

impl PgOptions {
    /// The defaults for `url`: schema `public`, 16 statement connections, 2 lock
    /// connections, the platform's roots, listening.
    pub fn new(url: &str) -> PgOptions {
        PgOptions {
            url: url.to_owned(),
            schema: "public".to_owned(),
            pool_size: 16,
            lock_connections: 2,
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
    /// This store's random id: in its sessions' `application_name` and in the payloads of
    /// its notifications, so it can tell its own.
    instance: String,
    /// Connections for statements.
    pool: deadpool_postgres::Pool,
    /// Connections that hold shared locks.
    locks: deadpool_postgres::Pool,
    /// The session this store's shared locks are held through (see `locks`).
    lock_session: locks::LockSession,
    channels: notify::Channels,
    feed: Arc<notify::Feed>,
    listener: Option<tokio::task::JoinHandle<()>>,
    /// Full-text search's index, when this store listens (it hears the others' writes).
    text_index: Option<Arc<text_index::SearchIndex>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PgStore")
            .field("schema", &self.shared.schema)
            .field("instance", &self.shared.instance)
            .finish()
    }
}

/// The future a transaction body returns, borrowing the transaction and its data.
pub(crate) type TxFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

/// How long a caller waits for a pooled connection, or for a new one to be made.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// How many times a transaction runs at most when it meets a serialization failure, a
/// deadlock or a connection closed before its commit was sent.
const ATTEMPTS: u32 = 4;

/// A random id of 8 hex digits for this store.
fn new_instance() -> String {
    use sha2::Digest;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let seed = format!(
        "{nanos}:{}:{}:{:?}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::thread::current().id()
    );
    hex::encode(&sha2::Sha256::digest(seed.as_bytes())[..4])
}

fn pool(
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    size: usize,
) -> Result<deadpool_postgres::Pool> {
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tls,
        deadpool_postgres::ManagerConfig {
            // A closed connection (a restarted server, a terminated session) is dropped when
            // it comes back to the pool; a live one is handed out without a round trip.
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    deadpool_postgres::Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(POOL_WAIT))
        .recycle_timeout(Some(POOL_WAIT))
        .build()
        .map_err(|error| StoreError::Backend(format!("connection pool: {error}").into()))
}

/// Connects one connection outside the pools (migrations, the listener), its socket driven
/// by a task of its own.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
) -> Result<tokio_postgres::Client> {
    let (client, connection) = config.connect(tls).await.map_err(pg)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "database connection ended");
        }
    });
    Ok(client)
}

/// Whether `error` is worth running the transaction again for: a serialization failure, a
/// deadlock, or a connection that closed (the statement never reached a commit).
fn retryable(error: &StoreError) -> bool {
    let Some(error) = postgres_error(error) else {
        return false;
    };
    if connection_lost(error) {
        return true;
    }
    matches!(
        error.code(),
        Some(code) if *code == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
            || *code == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Runs `future` on its own task and waits for it: a caller that stops waiting cannot cut
/// it short between a commit and what follows. A panic in it is resumed here.
pub(crate) async fn spawn<T: Send + 'static>(
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    match tokio::spawn(future).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => Err(StoreError::backend(error)),
    }
}

impl PgStore {
    /// Connects, runs the migrations this binary knows (under an advisory lock, so daemons
    /// starting together migrate once) and starts listening when `options.listen`.
    pub async fn open(options: PgOptions) -> Result<PgStore> {
        let instance = new_instance();
        let options = PgOptions {
            application_name: format!("{}/{instance}", options.application_name),
            ..options
        };
        let statements = config::pg_config(&options, config::Purpose::Statements)?;
        let lock_sessions = config::pg_config(&options, config::Purpose::Locks)?;
        let admin = config::pg_config(&options, config::Purpose::Admin)?;
        let tls = config::tls(&options)?;

        let mut client = connect(&admin, tls.clone()).await?;
        migrations::apply(&mut client, &options.schema, migrations::MIGRATIONS).await?;
        // What the connection really is, as the server sees it: `sslmode=prefer` (the
        // default) falls back to plaintext when the server offers no TLS.
        let encrypted = client
            .query_opt("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
            .await
            .ok()
            .flatten()
            .and_then(|row| row.try_get::<_, bool>(0).ok());
        drop(client);

        let channels = notify::Channels::new(&options.schema);
        let feed = Arc::new(notify::Feed::new(&instance, channels.clone()));
        let listener = if options.listen {
            let (handle, connected) =
                notify::spawn_listener(feed.clone(), admin.clone(), tls.clone());
            // Whatever is committed once the store is open is heard (unless the server cannot
            // be reached now: the listener keeps trying, and streams poll meanwhile).
            let _ = tokio::time::timeout(POOL_WAIT, connected).await;
            Some(handle)
        } else {
            None
        };
        let (text_index, tasks) = match listener {
            Some(_) => {
                let (index, tasks) = text_index::SearchIndex::new();
                let hearing = index.clone();
                feed.add(Arc::new(move |change: &ExternalChange| hearing.heard(change)));
                let hearing = index.clone();
                feed.on_barrier(Arc::new(move |n| hearing.heard_barrier(n)));
                (Some(index), Some(tasks))
            }
            None => (None, None),
        };
        let shared = Shared {
            schema: options.schema.clone(),
            instance,
            pool: pool(statements, tls.clone(), options.pool_size)?,
            locks: pool(lock_sessions, tls.clone(), options.lock_connections)?,
            lock_session: locks::LockSession::default(),
            channels,
            feed,
            listener,
            text_index,
        };
        tracing::info!(
            url = %config::redact_url(&options.url),
            schema = %shared.schema,
            tls = match encrypted {
                Some(true) => "encrypted",
                Some(false) => "plaintext",
                None => "unknown",
            },
            sslmode = ?admin.get_ssl_mode(),
            "opened the PostgreSQL store"
        );
        let store = PgStore { shared: Arc::new(shared) };
        if let (Some(index), Some(tasks)) = (store.shared.text_index.clone(), tasks) {
            let live = store
                .read((), |_, client, ()| {
                    Box::pin(async move { memories::corpus(client).await.map(|(live, _)| live) })
                })
                .await?;
            text_index::start(&store, index, tasks, live).await?;
        }
        Ok(store)
    }

    /// Full-text search's index, when this store has one.
    pub(crate) fn text_index(&self) -> Option<&text_index::SearchIndex> {
        self.shared.text_index.as_deref()
    }

    /// The schema this store's tables live in.
    pub fn schema(&self) -> &str {
        &self.shared.schema
    }

    /// This store's id, as in its sessions' `application_name` (`<name>/<instance>`).
    pub fn instance(&self) -> &str {
        &self.shared.instance
    }

    pub(crate) fn channels(&self) -> &notify::Channels {
        &self.shared.channels
    }

    pub(crate) fn feed(&self) -> &notify::Feed {
        &self.shared.feed
    }

    pub(crate) fn lock_pool(&self) -> &deadpool_postgres::Pool {
        &self.shared.locks
    }

    pub(crate) fn lock_session(&self) -> &locks::LockSession {
        &self.shared.lock_session
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        let asked = std::time::Instant::now();
        let client = self.shared.pool.get().await;
        metrics::histogram!("cairn_store_pool_wait_seconds", "backend" => "postgres")
            .record(asked.elapsed().as_secs_f64());
        client.map_err(|error| {
            metrics::counter!("cairn_store_errors_total", "backend" => "postgres").increment(1);
            StoreError::Backend(format!("database connection: {error}").into())
        })
    }

    /// Runs `body` in a transaction on a pooled connection, to completion even when the
    /// caller stops waiting, and commits it; a serialization failure or deadlock is retried
    /// (up to 3 times), as is a connection found closed before the commit was sent. `body`
    /// may therefore run more than once: it must not act outside the transaction.
    ///
    /// The transaction is READ COMMITTED; a body that reads twice and needs one snapshot
    /// starts with `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`.
    pub(crate) async fn tx_with_retry<D, T, F>(&self, data: D, body: F) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c Transaction<'c>, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        let store = self.clone();
        spawn(async move {
            let mut attempt = 1;
            loop {
                match store.transaction_once(&data, &body).await {
                    Err(Attempt::Again(error)) if attempt < ATTEMPTS => {
                        tracing::debug!(%error, attempt, "retrying a transaction");
                        tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
                        attempt += 1;
                    }
                    Err(Attempt::Again(error) | Attempt::Failed(error)) => return Err(error),
                    Ok(value) => return Ok(value),
                }
            }
        })
        .await
    }

    async fn transaction_once<D, T, F>(&self, data: &D, body: &F) -> Result<T, Attempt>
    where
        F: for<'c> Fn(&'c PgStore, &'c Transaction<'c>, &'c D) -> TxFuture<'c, T>,
    {
        let classify = |error: StoreError| {
            if retryable(&error) { Attempt::Again(error) } else { Attempt::Failed(error) }
        };
        let mut client = self.client().await.map_err(Attempt::Failed)?;
        let tx = client.transaction().await.map_err(|error| classify(pg(error)))?;
        let (address, done) = async {
            // The memories the body changes are noted under the transaction's address.
            let address = &tx as *const Transaction<'_> as usize;
            let value = match body(self, &tx, data).await {
                Ok(value) => value,
                Err(error) => return (address, Err(classify(error))),
            };
            // Whatever happens to the commit is the caller's to know: it may have landed.
            match tx.commit().await {
                Ok(()) => (address, Ok(value)),
                Err(error) => (address, Err(Attempt::Failed(pg(error)))),
            }
        }
        .await;
        if let Some(index) = self.text_index() {
            let changed = index.take_noted(address);
            if done.is_ok() {
                index.absorb(&client, changed).await;
            }
        }
        done
    }

    /// Runs `body` on a pooled connection without an explicit transaction (each statement
    /// sees its own snapshot), to completion even when the caller stops waiting; again on
    /// another connection while the one it had was found lost (each such try drops a dead
    /// connection from the pool, so at most the pool's size plus one). For reads only.
    pub(crate) async fn read<D, T, F>(&self, data: D, body: F) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c deadpool_postgres::Client, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        let attempts = u32::try_from(self.shared.pool.status().max_size).unwrap_or(u32::MAX);
        self.on_client(data, body, attempts.saturating_add(1)).await
    }

    /// Runs `body` once on a pooled connection without an explicit transaction, to
    /// completion even when the caller stops waiting: for a write that is one statement (so
    /// atomic by itself), never repeated, since a connection lost after the statement was
    /// sent leaves unknown whether it committed.
    pub(crate) async fn call<D, T, F>(&self, data: D, body: F) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c deadpool_postgres::Client, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        self.on_client(data, body, 1).await
    }

    async fn on_client<D, T, F>(&self, data: D, body: F, attempts: u32) -> Result<T>
    where
        D: Send + Sync + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c PgStore, &'c deadpool_postgres::Client, &'c D) -> TxFuture<'c, T>
            + Send
            + Sync
            + 'static,
    {
        let store = self.clone();
        spawn(async move {
            let mut attempt = 1;
            loop {
                let client = store.client().await?;
                match body(&store, &client, &data).await {
                    Err(error) if attempt < attempts && closed(&error) => attempt += 1,
                    result => return result,
                }
            }
        })
        .await
    }
}

/// How one run of a transaction failed.
enum Attempt {
    /// Worth another run.
    Again(StoreError),
    Failed(StoreError),
}

/// Whether `error` is a connection found lost.
fn closed(error: &StoreError) -> bool {
    postgres_error(error).is_some_and(connection_lost)
}

/// Whether the connection is gone: closed, or its session ended by the server (terminated
/// by an administrator or a failover, a shutdown, a crash). A pooled connection whose
/// session was terminated may still look open until its first statement reads the server's
/// notice of it.
fn connection_lost(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    error.is_closed()
        || matches!(
            error.code(),
            Some(code) if *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
        )
}

/// A PostgreSQL error as a store error, counted (`cairn_store_errors_total`).
pub(crate) fn pg(error: tokio_postgres::Error) -> StoreError {
    metrics::counter!("cairn_store_errors_total", "backend" => "postgres").increment(1);
    StoreError::backend(PgError(error))
}

/// A PostgreSQL error that says what happened: the server's own message, its SQLSTATE code,
/// and its detail and hint when it gave them (tokio-postgres says only "db error"); for an
/// error of the connection, the cause.
#[derive(Debug)]
pub(crate) struct PgError(pub(crate) tokio_postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(db) = self.0.as_db_error() {
            write!(formatter, "{} (SQLSTATE {})", db.message(), db.code().code())?;
            if let Some(detail) = db.detail() {
                write!(formatter, "; {detail}")?;
            }
            if let Some(hint) = db.hint() {
                write!(formatter, "; hint: {hint}")?;
            }
            return Ok(());
        }
        write!(formatter, "{}", self.0)?;
        let mut source = std::error::Error::source(&self.0);
        while let Some(cause) = source {
            write!(formatter, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The PostgreSQL error behind a store error, if it is one.
pub(crate) fn postgres_error(error: &StoreError) -> Option<&tokio_postgres::Error> {
    let StoreError::Backend(source) = error else { return None };
    source
        .downcast_ref::<PgError>()
        .map(|error| &error.0)
        .or_else(|| source.downcast_ref::<tokio_postgres::Error>())
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

#[cfg(test)]
mod tests;
