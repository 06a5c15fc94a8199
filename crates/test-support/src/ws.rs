//! WebSocket helpers for tests of the voice sockets.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::{Error, Message};

/// The next text message on `socket`, parsed as JSON, within `within`; pings and pongs are
/// skipped. Panics when none comes in time, or on any other frame (binary, close).
pub async fn next_json<S>(socket: &mut S, within: Duration) -> Value
where
    S: Stream<Item = Result<Message, Error>> + Unpin,
{
    loop {
        let message = tokio::time::timeout(within, socket.next())
            .await
            .unwrap_or_else(|_| panic!("no message within {within:?}"))
            .expect("the socket is open")
            .expect("the socket is healthy");
        match message {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("expected an event, got {other:?}"),
        }
    }
}
