//! The conversation runtime: how fast it appends events in process, and how soon the
//! daemon's event streams (SSE) deliver an appended event to their clients.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use cairn_agents::{DefaultRuntime, RuntimeConfig};
use cairn_runtime::{CreateConversationInput, IntermediateMessageInput, Runtime as _};
use cairn_store_sqlite::SqliteStore;
use http_body_util::{BodyExt as _, Empty};
use hyper::header::{ACCEPT, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::daemon::{Daemon, Rates};
use crate::http::Connection;
use crate::stats::Latencies;

const BASE: &str = "/api/runtime";
/// How long one stream may take to connect, or one appended event to arrive, before the
/// measure gives up.
const PATIENCE: Duration = Duration::from_secs(30);

/// How many appends [`appends`] makes.
#[derive(Debug, Clone, Copy)]
pub struct AppendPlan {
    /// Unmeasured appends to the single conversation first.
    pub warm_up: usize,
    /// Sequential appends to one conversation.
    pub one: usize,
    /// Conversations the concurrent appends spread over.
    pub conversations: usize,
    /// Concurrent tasks, each appending to its own conversations.
    pub tasks: usize,
    /// Appends, all tasks together.
    pub many: usize,
}

/// Events appended per second.
#[derive(Debug, Clone, Copy)]
pub struct AppendFigures {
    /// One conversation, one append after another.
    pub one: f64,
    /// Many conversations, from concurrent tasks.
    pub many: f64,
}

/// `emit_intermediate_message` on a [`DefaultRuntime`] over a fresh SQLite store (no memory
/// engine, default configuration): to one conversation, one after another, then across
/// many conversations from concurrent tasks, each task owning its conversations.
pub async fn appends(plan: &AppendPlan) -> anyhow::Result<AppendFigures> {
    anyhow::ensure!(
        plan.tasks > 0 && plan.tasks <= plan.conversations,
        "every task needs a conversation of its own"
    );
    let dir = tempfile::Builder::new().prefix("cairn-bench-runtime-").tempdir()?;
    let database = dir.path().join("cairn.db");
    let store = SqliteStore::open(&database)
        .with_context(|| format!("cannot open {}", database.display()))?;
    let runtime = Arc::new(DefaultRuntime::new(Arc::new(store), None, RuntimeConfig::default()));

    let first = create(&runtime).await?;
    for n in 0..plan.warm_up {
        emit(&runtime, &first, n).await?;
    }
    let started = Instant::now();
    for n in 0..plan.one {
        emit(&runtime, &first, n).await?;
    }
    let one = plan.one as f64 / started.elapsed().as_secs_f64();

    let mut conversations = Vec::with_capacity(plan.conversations);
    for _ in 0..plan.conversations {
        conversations.push(create(&runtime).await?);
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..plan.tasks)
        .map(|task| {
            let owned: Vec<String> =
                conversations.iter().skip(task).step_by(plan.tasks).cloned().collect();
            let share = plan.many / plan.tasks + usize::from(task < plan.many % plan.tasks);
            let runtime = runtime.clone();
            tokio::spawn(async move {
                for n in 0..share {
                    emit(&runtime, &owned[n % owned.len()], n).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let many = plan.many as f64 / started.elapsed().as_secs_f64();
    Ok(AppendFigures { one, many })
}

async fn create(runtime: &DefaultRuntime) -> anyhow::Result<String> {
    Ok(runtime.create_conversation(CreateConversationInput::default()).await?.id)
}

async fn emit(runtime: &DefaultRuntime, conversation_id: &str, n: usize) -> anyhow::Result<()> {
    let input = IntermediateMessageInput {
        conversation_id: conversation_id.to_owned(),
        text: format!("Still looking into it ({n})."),
        visible_to_model: true,
    };
    runtime.emit_intermediate_message(input).await?;
    Ok(())
}

/// What [`sse_delivery`] measures.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// Streams to have open, ascending.
    pub counts: Vec<usize>,
    /// Unmeasured appends after each growth.
    pub warm_up: usize,
    /// Measured appends at each count.
    pub samples: usize,
    /// How long the open streams are held idle, their daemon watched, before the appends.
    pub hold: Duration,
    /// API keys the streams are opened with, in turn (none: the solo profile's local caller).
    pub keys: Vec<String>,
}

/// SSE delivery with a number of streams open.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Streams asked for.
    pub requested: usize,
    /// Streams the daemon accepted; the others were refused with 429.
    pub streams: usize,
    /// From sending `POST …/intermediate-messages` to the stream's client reading the event.
    pub latencies: Latencies,
    /// The daemon's resident memory with the streams open, in bytes.
    pub rss: Option<u64>,
    /// What the daemon did per second while the streams were open and idle: their
    /// fallback polls.
    pub idle: Option<Rates>,
}

/// The figures of [`sse_delivery`].
#[derive(Debug, Clone)]
pub struct StreamFigures {
    /// The daemon's resident memory before any stream was opened.
    pub rss_before: Option<u64>,
    /// The daemon's work per second, idle, before any stream was opened.
    pub idle_before: Option<Rates>,
    pub deliveries: Vec<Delivery>,
}

/// For each count of `plan` (ascending): opens event streams on the daemon until that many
/// are open (or refused), one conversation and one connection each; holds them idle for
/// `plan.hold`, watching the daemon's reads and processor time; then measures
/// `plan.samples` appends, each to the next conversation in turn, from the append request
/// until the stream's client reads the event. The streams are closed when this returns.
pub async fn sse_delivery(daemon: &Daemon, plan: &StreamPlan) -> anyhow::Result<StreamFigures> {
    let rss_before = daemon.memory().ok().map(|(rss, _)| rss);
    let idle_before = watch_idle(daemon, plan.hold).await;
    let mut streams = Streams::new(daemon.address, plan.keys.clone()).await?;
    let mut deliveries = Vec::with_capacity(plan.counts.len());
    for &count in &plan.counts {
        streams.grow(count).await?;
        anyhow::ensure!(!streams.conversations.is_empty(), "the daemon refused every stream");
        let idle = watch_idle(daemon, plan.hold).await;
        streams.delivery(plan.warm_up).await?;
        let latencies = streams.delivery(plan.samples).await?;
        let rss = daemon.memory().ok().map(|(rss, _)| rss);
        deliveries.push(Delivery {
            requested: count,
            streams: streams.conversations.len(),
            latencies,
            rss,
            idle,
        });
    }
    streams.close();
    Ok(StreamFigures { rss_before, idle_before, deliveries })
}

/// The daemon's reads and processor time per second over `hold`, after a second to settle.
async fn watch_idle(daemon: &Daemon, hold: Duration) -> Option<Rates> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = daemon.activity().ok()?;
    tokio::time::sleep(hold).await;
    Some(daemon.activity().ok()?.rates_since(&before))
}

/// What a stream's reader tells the measure.
#[derive(Debug)]
pub(crate) enum Received {
    /// The `retry:` frame, the first of every stream: it is connected.
    Connected,
    /// An event (`id: <offset>`) arrived on stream `stream` at `at`.
    Event { stream: usize, offset: u64, at: Instant },
    /// The stream ended.
    Ended(usize),
}

/// Event streams open on the daemon, one per conversation, each on its own HTTP/1.1
/// connection, and a keep-alive connection for the appends.
struct Streams {
    address: SocketAddr,
    control: Connection,
    /// The conversation of each stream.
    conversations: Vec<String>,
    /// The connection and reader tasks of every stream; aborting them closes the streams.
    tasks: Vec<JoinHandle<()>>,
    sender: mpsc::UnboundedSender<Received>,
    receiver: mpsc::UnboundedReceiver<Received>,
    /// Appends made so far, for their text.
    appended: usize,
    /// Keys the streams are opened with, in turn; the next is `keys[opened % keys.len()]`.
    keys: Vec<String>,
    /// Streams asked for so far, accepted or refused.
    opened: usize,
}

impl Streams {
    async fn new(address: SocketAddr, keys: Vec<String>) -> anyhow::Result<Streams> {
        let (sender, receiver) = mpsc::unbounded_channel();
        Ok(Streams {
            address,
            control: Connection::open(address).await?,
            conversations: Vec::new(),
            tasks: Vec::new(),
            sender,
            receiver,
            appended: 0,
            keys,
            opened: 0,
        })
    }

    /// Creates conversations and opens their streams until `count` streams have been asked
    /// for; waits until every accepted one is connected. Refused streams (429) are left out.
    async fn grow(&mut self, count: usize) -> anyhow::Result<()> {
        let first = self.conversations.len();
        while self.opened < count {
            let path = format!("{BASE}/conversations");
            let body = Bytes::from_static(b"{}");
            let answer = post_created(&mut self.control, &path, body).await?;
            let id = answer["conversation"]["id"]
                .as_str()
                .context("the created conversation has no id")?
                .to_owned();
            // `conversation.created` is offset 0: the stream starts after it.
            let path = format!("{BASE}/conversations/{id}/events/stream?afterOffset=0");
            let key = (!self.keys.is_empty()).then(|| &self.keys[self.opened % self.keys.len()]);
            self.opened += 1;
            let index = self.conversations.len();
            let opened = open_stream(self.address, &path, key, index, self.sender.clone())
                .await
                .with_context(|| format!("cannot open event stream {}", self.opened))?;
            if let Some(tasks) = opened {
                self.conversations.push(id);
                self.tasks.extend(tasks);
            }
        }
        let mut connected = 0;
        while connected < self.conversations.len() - first {
            match self.next().await? {
                Received::Connected => connected += 1,
                Received::Event { .. } => {}
                Received::Ended(stream) => anyhow::bail!("event stream {} ended", stream + 1),
            }
        }
        Ok(())
    }

    /// `samples` appends, each to the next conversation in turn: from sending the append
    /// until its stream's reader has the event.
    async fn delivery(&mut self, samples: usize) -> anyhow::Result<Latencies> {
        let mut latencies = Vec::with_capacity(samples);
        for sample in 0..samples {
            let stream = sample % self.conversations.len();
            let path = format!(
                "{BASE}/conversations/{}/intermediate-messages",
                self.conversations[stream]
            );
            self.appended += 1;
            let body = json!({ "text": format!("Still looking into it ({}).", self.appended) });
            let body = Bytes::from(body.to_string());
            let started = Instant::now();
            let answer = post_created(&mut self.control, &path, body).await?;
            let offset = answer["events"]
                .as_array()
                .and_then(|events| events.iter().filter_map(|event| event["offset"].as_u64()).max())
                .context("the append answered no event")?;
            // Earlier events of other streams, if any, are passed over.
            let received = loop {
                match self.next().await? {
                    Received::Event { stream: from, offset: got, at }
                        if from == stream && got >= offset =>
                    {
                        break at;
                    }
                    Received::Ended(from) => anyhow::bail!("event stream {} ended", from + 1),
                    _ => {}
                }
            };
            latencies.push(received.saturating_duration_since(started));
        }
        Ok(Latencies::new(latencies))
    }

    async fn next(&mut self) -> anyhow::Result<Received> {
        match tokio::time::timeout(PATIENCE, self.receiver.recv()).await {
            Ok(Some(received)) => Ok(received),
            Ok(None) => anyhow::bail!("every event stream ended"),
            Err(_) => anyhow::bail!("no event stream said anything for {} s", PATIENCE.as_secs()),
        }
    }

    /// Closes every stream's connection.
    fn close(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        self.close();
    }
}

/// Opens one event stream on a connection of its own (with `key` as `X-API-Key`, if any)
/// and reads it in a task that tells `sender` when it is connected and when each event
/// arrives. Returns the connection's task and the reader, or `None` when the daemon refused
/// the stream with 429 Too Many Requests.
pub(crate) async fn open_stream(
    address: SocketAddr,
    path: &str,
    key: Option<&String>,
    index: usize,
    sender: mpsc::UnboundedSender<Received>,
) -> anyhow::Result<Option<[JoinHandle<()>; 2]>> {
    let stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let (mut requests, connection) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .context("HTTP handshake failed")?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request =
        Request::get(path).header(HOST, address.to_string()).header(ACCEPT, "text/event-stream");
    if let Some(key) = key {
        request = request.header("x-api-key", key.as_str());
    }
    let request = request.body(Empty::new())?;
    let response = match requests.send_request(request).await {
        Ok(response) if response.status() == StatusCode::OK => response,
        Ok(response) if response.status() == StatusCode::TOO_MANY_REQUESTS => {
            connection.abort();
            return Ok(None);
        }
        Ok(response) => {
            connection.abort();
            anyhow::bail!("GET {path} answered {}", response.status());
        }
        Err(error) => {
            connection.abort();
            return Err(error.into());
        }
    };
    let mut body = response.into_body();
    let reader = tokio::spawn(async move {
        // Kept until the stream ends, so the connection stays up.
        let _requests = requests;
        let mut buffer: Vec<u8> = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            let at = Instant::now();
            let Ok(data) = frame.into_data() else { continue };
            buffer.extend_from_slice(&data);
            while let Some(end) = buffer.windows(2).position(|pair| pair == b"\n\n") {
                let message: Vec<u8> = buffer.drain(..end + 2).collect();
                for line in String::from_utf8_lossy(&message).lines() {
                    let received = if line.starts_with("retry:") {
                        Received::Connected
                    } else if let Some(offset) = line.strip_prefix("id:") {
                        let Ok(offset) = offset.trim().parse() else { continue };
                        Received::Event { stream: index, offset, at }
                    } else {
                        continue;
                    };
                    if sender.send(received).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sender.send(Received::Ended(index));
    });
    Ok(Some([connection, reader]))
}

/// POSTs `body` and returns the JSON answer, which must be 201 Created.
async fn post_created(control: &mut Connection, path: &str, body: Bytes) -> anyhow::Result<Value> {
    let (status, answer) = control.send(Method::POST, path, Some(body)).await?;
    anyhow::ensure!(
        status == StatusCode::CREATED,
        "POST {path} answered {status}: {}",
        String::from_utf8_lossy(&answer)
    );
    Ok(serde_json::from_slice(&answer)?)
}
