//! Server-Sent Events: the event stream of a conversation, and a reply streamed as text
//! deltas.
//!
//! A stream writes every event as `id: <offset>` + `data: <event JSON>`, resumes after
//! `Last-Event-ID`, reads the log a page at a time, is woken as soon as the runtime appends
//! (when the runtime offers [`Runtime::subscribe`], the log is read only then), polls only
//! when the runtime offers no subscription, sends a comment heartbeat when idle, and ends
//! cleanly when the handler shuts down or the client goes away.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cairn_http::{ApiError, ResponseBody};
use cairn_types::runtime::MAX_EVENT_PAGE;
use cairn_types::{ErrorCode, ErrorEnvelope, RuntimeEvent};
use http::{HeaderValue, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::handler::{ErrorMapper, StreamPermit};
use crate::runtime::{Runtime, RuntimeError, TextDeltas};

/// How an event stream waits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamOptions {
    pub poll_interval: Duration,
    pub heartbeat: Duration,
}

/// A response body fed by a channel: the stream ends when the sender is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|chunk| Ok(Frame::data(chunk))))
    }
}

fn sse_response(receiver: mpsc::Receiver<Bytes>) -> Response<ResponseBody> {
    let mut response = Response::new(ChannelBody(receiver).boxed());
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx buffer responses unless told not to.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *response.status_mut() = StatusCode::OK;
    response
}

/// One runtime event as an SSE message.
pub fn event_frame(event: &RuntimeEvent) -> Bytes {
    let data = serde_json::to_string(event).expect("events always serialize");
    Bytes::from(format!("id: {}\ndata: {data}\n\n", event.offset))
}

fn named_frame(name: &str, data: &impl serde::Serialize) -> Bytes {
    let data = serde_json::to_string(data).expect("stream payloads always serialize");
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// A piece of the reply as it is written.
fn delta_frame(text: &str) -> Bytes {
    named_frame("delta", &serde_json::json!({ "text": text }))
}

/// How many events one read of the log returns: a stream far behind catches up a page at
/// a time, each page sent before the next is read.
const STREAM_PAGE: u32 = MAX_EVENT_PAGE;

/// What keeps an event stream open: its place among its principal's streams, and the end of
/// the credential it was opened with, if that can end.
pub(crate) struct StreamAccess {
    pub(crate) permit: StreamPermit,
    pub(crate) ends: Option<crate::handler::CredentialEnds>,
}

/// `GET /conversations/:id/events/stream`. Answers 404 before streaming when the
/// conversation does not exist. `permit` is held as long as the stream is open.
pub(crate) async fn stream_events(
    runtime: Arc<dyn Runtime>,
    conversation_id: String,
    after: Option<u64>,
    options: StreamOptions,
    mut shutdown: watch::Receiver<bool>,
    errors: ErrorMapper,
    access: StreamAccess,
) -> Result<Response<ResponseBody>, ApiError> {
    // Subscribe before the first read, so nothing appended in between goes unnoticed.
    let mut appended = runtime.subscribe(&conversation_id);
    if let Some(appended) = &mut appended {
        appended.borrow_and_update();
    }
    let first = runtime
        .list_events(&conversation_id, after, STREAM_PAGE)
        .await
        .map_err(|e| errors.map(e))?;
    let (sender, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let _open = crate::OpenGauge::new("cairn_event_streams_open");
        let StreamAccess { permit: _permit, mut ends } = access;
        let mut last = after;
        let mut pending = first;
        // Tells the browser how soon to reconnect after a drop.
        if sender.send(Bytes::from_static(b"retry: 1000\n\n")).await.is_err() {
            return;
        }
        let mut idle_since = Instant::now();
        loop {
            // A full page says more may follow: read on before waiting.
            let caught_up = pending.len() < STREAM_PAGE as usize;
            for event in pending.drain(..) {
                last = Some(event.offset);
                if sender.send(event_frame(&event)).await.is_err() {
                    return;
                }
                idle_since = Instant::now();
            }
            if *shutdown.borrow() {
                return;
            }
            if caught_up {
                let heartbeat_at = idle_since + options.heartbeat;
                // With a subscription the log is read only when it grew; polling is the
                // fallback of runtimes that announce nothing.
                let polling = appended.is_none();
                tokio::select! {
                    biased;
                    () = crate::handler::credential_ended(&mut ends) => {
                        let message = "the credential this stream was opened with was revoked \
                             or has expired";
                        let envelope = ErrorEnvelope::new(ErrorCode::Unauthorized, message);
                        let _ = sender.send(named_frame("error", &envelope)).await;
                        return;
                    }
                    _ = wait_for_append(&mut appended) => {}
                    _ = tokio::time::sleep(options.poll_interval), if polling => {}
                    _ = tokio::time::sleep_until(heartbeat_at) => {
                        if sender.send(Bytes::from_static(b": heartbeat\n\n")).await.is_err() {
                            return;
                        }
                        idle_since = Instant::now();
                        continue;
                    }
                    _ = shutdown.changed() => return,
                    _ = sender.closed() => return,
                }
            }
            match runtime.list_events(&conversation_id, last, STREAM_PAGE).await {
                Ok(events) => pending = events,
                Err(error) => {
                    let error = errors.map(error);
                    let envelope = ErrorEnvelope::new(error.code(), error.message());
                    let _ = sender.send(named_frame("error", &envelope)).await;
                    return;
                }
            }
        }
    });
    Ok(sse_response(receiver))
}

/// Waits for the log to grow. Without a subscription it never returns; when the runtime
/// drops its sender it returns at once, and the stream polls from then on.
async fn wait_for_append(appended: &mut Option<watch::Receiver<u64>>) {
    match appended {
        Some(receiver) => {
            if receiver.changed().await.is_err() {
                *appended = None;
            }
        }
        None => std::future::pending().await,
    }
}

/// A turn streamed to a caller that asked for `text/event-stream` (sendMessage, channel
/// events): `event: delta` frames carry `{"text": …}` as the reply is written, then
/// `event: result` carries the operation's result (or `event: error` an error envelope).
/// Errors found before the first delta are answered as ordinary JSON errors with their
/// status.
pub(crate) async fn stream_turn<F, T>(
    turn: impl FnOnce(TextDeltas) -> F,
    errors: ErrorMapper,
) -> Result<Response<ResponseBody>, ApiError>
where
    F: Future<Output = Result<T, RuntimeError>> + Send + 'static,
    T: serde::Serialize + Send + 'static,
{
    let (deltas, mut delta_receiver) = mpsc::unbounded_channel::<String>();
    let mut turn = tokio::spawn(turn(deltas));
    let first = tokio::select! {
        delta = delta_receiver.recv() => delta,
        result = &mut turn => return whole_reply(joined(result), delta_receiver, errors),
    };
    // No delta and the sender gone: the turn ended without writing; answer as a whole, so
    // an error keeps its status.
    let Some(first) = first else {
        return whole_reply(joined(turn.await), delta_receiver, errors);
    };
    let (sender, receiver) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut delta = Some(first);
        while let Some(text) = delta {
            // A client that left still lets the turn finish; it is just not told.
            let _ = sender.send(delta_frame(&text)).await;
            delta = delta_receiver.recv().await;
        }
        let frame = match joined(turn.await) {
            Ok(result) => named_frame("result", &result),
            Err(error) => {
                let error = errors.map(error);
                named_frame("error", &ErrorEnvelope::new(error.code(), error.message()))
            }
        };
        let _ = sender.send(frame).await;
    });
    Ok(sse_response(receiver))
}

/// The reply when the turn ended before the stream started: an error is a plain JSON
/// error; a result is its deltas and the result in one stream.
fn whole_reply<T: serde::Serialize>(
    result: Result<T, RuntimeError>,
    mut deltas: mpsc::UnboundedReceiver<String>,
    errors: ErrorMapper,
) -> Result<Response<ResponseBody>, ApiError> {
    let result = result.map_err(|error| errors.map(error))?;
    let mut frames = Vec::new();
    while let Ok(delta) = deltas.try_recv() {
        frames.push(delta_frame(&delta));
    }
    frames.push(named_frame("result", &result));
    let (sender, receiver) = mpsc::channel::<Bytes>(frames.len());
    for frame in frames {
        sender.try_send(frame).expect("the channel holds every frame");
    }
    Ok(sse_response(receiver))
}

fn joined<T>(
    result: Result<Result<T, RuntimeError>, tokio::task::JoinError>,
) -> Result<T, RuntimeError> {
    result.unwrap_or_else(|error| Err(RuntimeError::internal(error)))
}
