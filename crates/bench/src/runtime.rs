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

use crate::daemon::Daemon;
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

/// SSE delivery with a number of streams open.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub streams: usize,
    /// From sending `POST …/intermediate-messages` to the stream's client reading the event.
    pub latencies: Latencies,
    /// The daemon's resident memory with the streams open, in bytes.
    pub rss: Option<u64>,
}

/// For each of `stream_counts` (ascending): opens event streams on the daemon until that
/// many are open, one conversation and one connection each, then measures `samples`
/// appends, each to the next conversation in turn, from the append request until the
/// stream's client reads the event. The streams are closed when this returns.
pub async fn sse_delivery(
    daemon: &Daemon,
    stream_counts: &[usize],
    warm_up: usize,
    samples: usize,
) -> anyhow::Result<Vec<Delivery>> {
    let mut streams = Streams::new(daemon.address).await?;
    let mut figures = Vec::with_capacity(stream_counts.len());
    for &count in stream_counts {
        streams.grow(count).await?;
        streams.delivery(warm_up).await?;
        let latencies = streams.delivery(samples).await?;
        let rss = daemon.memory().ok().map(|(rss, _)| rss);
        figures.push(Delivery { streams: count, latencies, rss });
    }
    streams.close();
    Ok(figures)
}

/// What a stream's reader tells the measure.
#[derive(Debug)]
enum Received {
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
}

impl Streams {
    async fn new(address: SocketAddr) -> anyhow::Result<Streams> {
        let (sender, receiver) = mpsc::unbounded_channel();
        Ok(Streams {
            address,
            control: Connection::open(address).await?,
            conversations: Vec::new(),
            tasks: Vec::new(),
            sender,
            receiver,
            appended: 0,
        })
    }

    /// Creates conversations and opens their streams until `count` streams are connected.
    async fn grow(&mut self, count: usize) -> anyhow::Result<()> {
        let first = self.conversations.len();
        for index in first..count {
            let path = format!("{BASE}/conversations");
            let body = Bytes::from_static(b"{}");
            let answer = post_created(&mut self.control, &path, body).await?;
            let id = answer["conversation"]["id"]
                .as_str()
                .context("the created conversation has no id")?
                .to_owned();
            // `conversation.created` is offset 0: the stream starts after it.
            let path = format!("{BASE}/conversations/{id}/events/stream?afterOffset=0");
            self.conversations.push(id);
            let tasks = open_stream(self.address, &path, index, self.sender.clone())
                .await
                .with_context(|| format!("cannot open event stream {}", index + 1))?;
            self.tasks.extend(tasks);
        }
        let mut connected = 0;
        while connected < count - first {
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

/// Opens one event stream on a connection of its own and reads it in a task that tells
/// `sender` when it is connected and when each event arrives. Returns the connection's
/// task and the reader.
async fn open_stream(
    address: SocketAddr,
    path: &str,
    index: usize,
    sender: mpsc::UnboundedSender<Received>,
) -> anyhow::Result<[JoinHandle<()>; 2]> {
    let stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let (mut requests, connection) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .context("HTTP handshake failed")?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = Request::get(path)
        .header(HOST, address.to_string())
        .header(ACCEPT, "text/event-stream")
        .body(Empty::new())?;
    let response = match requests.send_request(request).await {
        Ok(response) if response.status() == StatusCode::OK => response,
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
    Ok([connection, reader])
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
