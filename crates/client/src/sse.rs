//! Server-Sent Events: a frame parser, and [`EventStream`], a conversation's events that
//! reconnect by themselves after the last offset seen.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cairn_types::RuntimeEvent;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{Client, Error};

/// One SSE message: its `event` name (`message` when none), `id` and `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// Splits a byte stream into frames; comments, `retry:` and frames without data are skipped.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    buffer: String,
    pending: Vec<u8>,
}

impl Parser {
    /// Feeds bytes; returns the frames they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        // A chunk may end inside a UTF-8 sequence: keep the incomplete tail for the next one.
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(text) => text.len(),
            Err(error) => error.valid_up_to(),
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        self.buffer.push_str(&text.replace("\r\n", "\n"));
        let mut frames = Vec::new();
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let (mut event, mut id, mut data) = (None, None, Vec::new());
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => event = Some(value.to_owned()),
                    "id" => id = Some(value.to_owned()),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            if !data.is_empty() {
                let event = event.unwrap_or_else(|| "message".to_owned());
                frames.push(Frame { event, id, data: data.join("\n") });
            }
        }
        frames
    }
}

/// How long a stream may stay silent (the daemon sends a heartbeat every 15 s) before it
/// is taken for dead and reopened.
const IDLE_LIMIT: Duration = Duration::from_secs(45);

/// The longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A conversation's events as they are appended, from [`Client::stream_events`].
///
/// It reconnects by itself when the connection drops, with `Last-Event-ID` set to the last
/// offset it yielded, so no offset is repeated or skipped. It ends with an error when the
/// service refuses the stream (an unknown conversation, bad credentials), and stops when
/// dropped.
#[derive(Debug)]
pub struct EventStream {
    receiver: mpsc::Receiver<Result<RuntimeEvent, Error>>,
    task: JoinHandle<()>,
}

impl EventStream {
    pub(crate) fn open(
        client: Client,
        conversation_id: String,
        after_offset: Option<u64>,
    ) -> EventStream {
        let (sender, receiver) = mpsc::channel(64);
        let task = tokio::spawn(follow(client, conversation_id, after_offset, sender));
        EventStream { receiver, task }
    }

    /// The next event; `None` once the stream has ended.
    pub async fn next(&mut self) -> Option<Result<RuntimeEvent, Error>> {
        self.receiver.recv().await
    }
}

impl futures_core::Stream for EventStream {
    type Item = Result<RuntimeEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(context)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the stream, reopening it after the last offset whenever it drops.
async fn follow(
    client: Client,
    conversation_id: String,
    mut last: Option<u64>,
    sender: mpsc::Sender<Result<RuntimeEvent, Error>>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match client.open_event_stream(&conversation_id, last).await {
            // The service said no: that will not change by asking again.
            Err(Error::Api(error)) => {
                let _ = sender.send(Err(Error::Api(error))).await;
                return;
            }
            Err(_) => {}
            Ok(body) => {
                backoff = Duration::from_millis(100);
                if !read_events(body, &mut last, &sender).await {
                    return;
                }
            }
        }
        if sender.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Forwards the events of one connection; false when the receiver is gone or the service
/// ended the stream with an error.
async fn read_events(
    mut body: Incoming,
    last: &mut Option<u64>,
    sender: &mpsc::Sender<Result<RuntimeEvent, Error>>,
) -> bool {
    let mut parser = Parser::default();
    loop {
        let frame = match tokio::time::timeout(IDLE_LIMIT, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            // Closed, broken or silent for too long: reconnect.
            Ok(Some(Err(_)) | None) | Err(_) => return !sender.is_closed(),
        };
        let Some(bytes) = frame.data_ref() else { continue };
        for frame in parser.push(bytes) {
            if frame.event == "error" {
                let error = crate::ServiceApiError::from_frame(&frame.data);
                let _ = sender.send(Err(Error::Api(error))).await;
                return false;
            }
            let event: RuntimeEvent = match serde_json::from_str(&frame.data) {
                Ok(event) => event,
                Err(error) => {
                    let message = format!("an event is not a runtime event: {error}");
                    let _ = sender.send(Err(Error::Decode { url: String::new(), message })).await;
                    return false;
                }
            };
            // A resumed stream starts after `last`; never hand out an offset twice.
            if last.is_some_and(|last| event.offset <= last) {
                continue;
            }
            *last = Some(event.offset);
            if sender.send(Ok(event)).await.is_err() {
                return false;
            }
        }
    }
}

/// Bytes of a finished body, for callers that read a streamed reply.
pub(crate) async fn next_bytes(body: &mut Incoming) -> Option<Result<Bytes, hyper::Error>> {
    loop {
        match body.frame().await? {
            Ok(frame) => match frame.into_data() {
                Ok(bytes) => return Some(Ok(bytes)),
                Err(_) => continue,
            },
            Err(error) => return Some(Err(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_and_utf8_sequences() {
        let mut parser = Parser::default();
        let text = "retry: 1000\n\nid: 0\ndata: {\"t\":\"é\"}\n\n: heartbeat\n\nevent: delta\ndata: a\ndata: b\n\n";
        let bytes = text.as_bytes();
        let mut frames = Vec::new();
        for chunk in bytes.chunks(3) {
            frames.extend(parser.push(chunk));
        }
        assert_eq!(
            frames,
            [
                Frame {
                    event: "message".into(),
                    id: Some("0".into()),
                    data: "{\"t\":\"é\"}".into()
                },
                Frame { event: "delta".into(), id: None, data: "a\nb".into() },
            ]
        );
    }
}
