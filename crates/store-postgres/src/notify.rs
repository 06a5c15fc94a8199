//! The doorbell between daemons: NOTIFY payloads sent by writes, one LISTEN connection per
//! store that turns them into [`cairn_store::ExternalChange`]s, reconnecting when it drops.
//!
//! Payloads only say where to look (receivers always read the tables): NOTIFY is sent at
//! commit and never on rollback, holds at most 8,000 bytes, and is lost while a listener is
//! disconnected, so a listener that was down sends [`ExternalChange::Resync`] once it is back
//! and [`ExternalChange::Poll`] every 500 ms while it is down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use cairn_store::{ChangeListener, ExternalChange, Result};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::AsyncMessage;

use crate::{PgStore, Transaction, pg};

/// The longest payload sent; PostgreSQL's limit is 8,000 bytes.
const MAX_PAYLOAD: usize = 7_000;

/// While the listener is down: how often streams are told to poll.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// How often the listener checks its connection, and how long it waits for the answer.
const PING_EVERY: Duration = Duration::from_millis(500);
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// The channel names of one schema, so deployments sharing a database hear only their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Channels {
    pub(crate) events: String,
    pub(crate) memories: String,
    pub(crate) vectors: String,
    /// A store's read barriers (see `text_index`): heard by the store that sent them only.
    pub(crate) sync: String,
}

impl Channels {
    pub(crate) fn new(schema: &str) -> Channels {
        Channels {
            events: format!("cairn_{schema}_events"),
            memories: format!("cairn_{schema}_memories"),
            vectors: format!("cairn_{schema}_vectors"),
            sync: format!("cairn_{schema}_sync"),
        }
    }
}

/// `prefix` followed by the ids, or by `*` (which ones is not said) when too long.
fn payload(prefix: &str, ids: &[String]) -> String {
    let length = prefix.len() + ids.iter().map(|id| id.len() + 1).sum::<usize>();
    if length > MAX_PAYLOAD || ids.is_empty() {
        return format!("{prefix} *");
    }
    let mut payload = prefix.to_owned();
    for id in ids {
        payload.push(' ');
        payload.push_str(id);
    }
    payload
}

/// Tells the other daemons, at commit, that the memories `ids` were written.
#[allow(dead_code)] // Called by the memory writes (memories.rs, connectors.rs, conflicts.rs).
pub(crate) async fn notify_memories(
    store: &PgStore,
    tx: &Transaction<'_>,
    ids: &[String],
) -> Result<()> {
    let payload = payload(store.instance(), ids);
    tx.execute("SELECT pg_notify($1, $2)", &[&store.channels().memories, &payload])
        .await
        .map_err(pg)?;
    Ok(())
}

/// Tells the other daemons, at commit, that vectors of `model` were stored for `ids`.
#[allow(dead_code)] // Called by `store_embeddings` (vectors.rs).
pub(crate) async fn notify_vectors(
    store: &PgStore,
    tx: &Transaction<'_>,
    model: &str,
    ids: &[String],
) -> Result<()> {
    let payload = payload(&format!("{} {}", store.instance(), model.replace(' ', "_")), ids);
    tx.execute("SELECT pg_notify($1, $2)", &[&store.channels().vectors, &payload])
        .await
        .map_err(pg)?;
    Ok(())
}

/// Sends read barrier `number` (a pooled connection, autocommit): the listener hears it after
/// every notification committed before it, since PostgreSQL delivers them in commit order.
pub(crate) async fn notify_barrier(
    store: &PgStore,
    client: &deadpool_postgres::Client,
    number: u64,
) -> Result<()> {
    let payload = format!("{} {number}", store.instance());
    client
        .execute("SELECT pg_notify($1, $2)", &[&store.channels().sync, &payload])
        .await
        .map_err(pg)?;
    Ok(())
}

/// Called with the number of each of this store's read barriers the listener hears.
pub(crate) type BarrierListener = Arc<dyn Fn(u64) + Send + Sync>;

/// Decodes notifications and hands them to the registered listeners.
pub(crate) struct Feed {
    instance: String,
    channels: Channels,
    listeners: RwLock<Vec<ChangeListener>>,
    barriers: std::sync::OnceLock<BarrierListener>,
    /// Whether the listener has been connected once (a later connect is a resync).
    connected_once: AtomicBool,
}

impl Feed {
    pub(crate) fn new(instance: &str, channels: Channels) -> Feed {
        Feed {
            instance: instance.to_owned(),
            channels,
            listeners: RwLock::new(Vec::new()),
            barriers: std::sync::OnceLock::new(),
            connected_once: AtomicBool::new(false),
        }
    }

    pub(crate) fn add(&self, listener: ChangeListener) {
        self.listeners.write().unwrap_or_else(|poisoned| poisoned.into_inner()).push(listener);
    }

    /// Where this store's read barriers go once heard (set once).
    pub(crate) fn on_barrier(&self, listener: BarrierListener) {
        let _ = self.barriers.set(listener);
    }

    fn emit(&self, change: &ExternalChange) {
        let listeners =
            self.listeners.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        for listener in listeners {
            listener(change);
        }
    }

    /// The listener is connected and listening.
    fn connected(&self) {
        metrics::gauge!("cairn_postgres_listener_connected").set(1.0);
        if self.connected_once.swap(true, Ordering::SeqCst) {
            metrics::counter!("cairn_postgres_listener_reconnects_total").increment(1);
            tracing::info!("the database listener is connected again; resynchronising");
            self.emit(&ExternalChange::Resync);
        }
    }

    /// One notification.
    pub(crate) fn dispatch(&self, channel: &str, payload: &str) {
        if channel == self.channels.sync {
            if let (Some(number), Some(listener)) = (self.barrier(payload), self.barriers.get()) {
                listener(number);
            }
            return;
        }
        if let Some(change) = self.decode(channel, payload) {
            self.emit(&change);
        }
    }

    /// The number of a read barrier this store sent; `None` for another store's.
    fn barrier(&self, payload: &str) -> Option<u64> {
        let (from, number) = payload.split_once(' ')?;
        if from != self.instance {
            return None;
        }
        number.parse().ok()
    }

    fn decode(&self, channel: &str, payload: &str) -> Option<ExternalChange> {
        let mut words = payload.split(' ');
        if channel == self.channels.events {
            let (conversation_id, next_offset) = payload.rsplit_once(' ')?;
            let next_offset = next_offset.parse().ok()?;
            let conversation_id = conversation_id.to_owned();
            return Some(ExternalChange::Appended { conversation_id, next_offset });
        }
        let from = words.next()?;
        if from == self.instance {
            // Our own write: the engine acted on it already.
            return None;
        }
        if channel == self.channels.memories {
            return Some(ExternalChange::Memories { ids: ids(words) });
        }
        if channel == self.channels.vectors {
            let model = words.next()?.to_owned();
            return Some(ExternalChange::Vectors { model, ids: ids(words) });
        }
        None
    }
}

/// The ids of a payload; none for `*` (which ones was not said).
fn ids<'a>(words: impl Iterator<Item = &'a str>) -> Vec<String> {
    words.filter(|word| !word.is_empty() && *word != "*").map(str::to_owned).collect()
}

/// Starts the listener: one connection, LISTENing on the schema's channels, reconnecting
/// (100 ms, doubling to 2 s) whenever it is lost, and telling listeners to poll every
/// 500 ms while it is not listening. The receiver hears when it first listens.
pub(crate) fn spawn_listener(
    feed: Arc<Feed>,
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
) -> (tokio::task::JoinHandle<()>, oneshot::Receiver<()>) {
    let (first, connected) = oneshot::channel();
    let up = Arc::new(AtomicBool::new(false));
    let listening = {
        let (feed, up) = (feed.clone(), up.clone());
        async move {
            let mut first = Some(first);
            let mut backoff = Duration::from_millis(100);
            loop {
                if listen_once(&feed, &config, tls.clone(), &mut first, &up).await {
                    backoff = Duration::from_millis(100);
                }
                up.store(false, Ordering::SeqCst);
                feed.emit(&ExternalChange::Poll);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    };
    let polling = async move {
        let mut every = tokio::time::interval(POLL_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if !up.load(Ordering::SeqCst) {
                // Down: notifications are being lost, so streams poll meanwhile.
                feed.emit(&ExternalChange::Poll);
            }
        }
    };
    let handle = tokio::spawn(async move {
        tokio::join!(listening, polling);
    });
    (handle, connected)
}

/// Connects, listens and dispatches until the connection is lost; true when it listened.
async fn listen_once(
    feed: &Feed,
    config: &tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    first: &mut Option<oneshot::Sender<()>>,
    up: &AtomicBool,
) -> bool {
    let (client, mut connection) = match config.connect(tls).await {
        Ok(connected) => connected,
        Err(error) => {
            let error = crate::PgError(error);
            tracing::warn!(%error, "cannot connect the database listener; retrying");
            return false;
        }
    };
    let (sender, mut notifications) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(notification) = message
                && sender.send(notification).is_err()
            {
                break;
            }
        }
    });
    let channels = &feed.channels;
    let listen = format!(
        "LISTEN \"{}\"; LISTEN \"{}\"; LISTEN \"{}\"; LISTEN \"{}\"",
        channels.events, channels.memories, channels.vectors, channels.sync
    );
    let listening = client.batch_execute(&listen).await.is_ok();
    if listening {
        up.store(true, Ordering::SeqCst);
        feed.connected();
        if let Some(first) = first.take() {
            let _ = first.send(());
        }
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                notification = notifications.recv() => match notification {
                    Some(notification) => {
                        feed.dispatch(notification.channel(), notification.payload());
                    }
                    None => break,
                },
                _ = ping.tick() => {
                    let alive = tokio::time::timeout(PING_TIMEOUT, client.simple_query("SELECT 1"));
                    if !matches!(alive.await, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        metrics::gauge!("cairn_postgres_listener_connected").set(0.0);
        tracing::warn!("the database listener lost its connection; reconnecting");
    }
    driver.abort();
    listening
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_ids_or_say_all() {
        let ids: Vec<String> = vec!["mem_1".into(), "mem_2".into()];
        assert_eq!(payload("abcd1234", &ids), "abcd1234 mem_1 mem_2");
        let many: Vec<String> = (0..1_000).map(|n| format!("mem_{n:026}")).collect();
        assert_eq!(payload("abcd1234", &many), "abcd1234 *");
    }

    #[test]
    fn notifications_decode_and_own_writes_are_ignored() {
        let feed = Feed::new("self0001", Channels::new("s"));
        assert_eq!(
            feed.decode("cairn_s_events", "conv_1 42"),
            Some(ExternalChange::Appended { conversation_id: "conv_1".into(), next_offset: 42 })
        );
        assert_eq!(
            feed.decode("cairn_s_memories", "other001 mem_1 mem_2"),
            Some(ExternalChange::Memories { ids: vec!["mem_1".into(), "mem_2".into()] })
        );
        assert_eq!(
            feed.decode("cairn_s_memories", "other001 *"),
            Some(ExternalChange::Memories { ids: vec![] })
        );
        assert_eq!(
            feed.decode("cairn_s_vectors", "other001 minilm mem_1"),
            Some(ExternalChange::Vectors { model: "minilm".into(), ids: vec!["mem_1".into()] })
        );
        assert_eq!(feed.decode("cairn_s_memories", "self0001 mem_1"), None);
        assert_eq!(feed.decode("cairn_s_events", "garbage"), None);
        assert_eq!(feed.decode("cairn_other_events", "conv_1 1"), None);
        assert_eq!(feed.barrier("self0001 7"), Some(7));
        assert_eq!(feed.barrier("other001 7"), None);
        assert_eq!(feed.barrier("self0001 x"), None);
    }
}
