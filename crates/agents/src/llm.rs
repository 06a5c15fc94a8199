//! A small client for an OpenAI-compatible chat-completions endpoint.
//!
//! The conversation runtime uses it to write replies: [`ChatClient::complete`] posts the
//! conversation to `{url}/chat/completions` with `"stream": true`, hands each text delta to a
//! callback as the Server-Sent Events arrive, and returns the whole text. ureq is blocking, so
//! the exchange runs on tokio's blocking pool and the callback is called from there.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// How much of an error answer's body [`ChatError::Http`] keeps.
const BODY_EXCERPT_BYTES: usize = 300;

/// Where and how to reach the chat-completions endpoint.
#[derive(Clone)]
pub struct ChatConfig {
    /// The API's base URL, such as `http://127.0.0.1:9000/v1`; requests go to
    /// `POST {url}/chat/completions`.
    pub url: String,
    /// The model named in each request.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// The longest one exchange may take, from connecting to reading the last streamed delta.
    pub timeout: Duration,
}

impl fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }

    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new("assistant", content)
    }
}

/// Why a completion failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The endpoint answered with a non-2xx status; `body` holds the first 300 bytes of its body.
    #[error("the chat endpoint answered {status}: {body}")]
    Http { status: u16, body: String },
    /// The endpoint could not be reached, the connection failed or a timeout expired.
    #[error("the chat endpoint could not be reached: {0}")]
    Transport(String),
    /// The endpoint's answer was not an understandable completion (or it reported an error
    /// inside a successful answer).
    #[error("the chat endpoint's answer was not understood: {0}")]
    Protocol(String),
}

impl ChatError {
    /// What a conversation may record of the failure: its kind, never the endpoint's
    /// address or anything the endpoint answered. Log the error itself (its `Display`) for
    /// the operators.
    pub fn public_message(&self) -> &'static str {
        match self {
            ChatError::Http { .. } => "the language model refused the request",
            ChatError::Transport(_) => "the language model could not be reached",
            ChatError::Protocol(_) => "the language model's answer was not understood",
        }
    }
}

/// A client for `POST {url}/chat/completions`; cheap to clone.
#[derive(Clone)]
pub struct ChatClient {
    endpoint: String,
    model: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatClient")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .finish()
    }
}

impl ChatClient {
    pub fn new(config: ChatConfig) -> ChatClient {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                    .build(),
            )
            .build()
            .into();
        ChatClient {
            endpoint: format!("{}/chat/completions", config.url.trim_end_matches('/')),
            model: config.model,
            api_key: config.api_key,
            agent,
        }
    }

    /// The full URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The model named in each request.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Sends the conversation with `stream: true`, calls `on_delta` with each text delta as it
    /// arrives, returns the whole text.
    ///
    /// `on_delta` is called from the blocking thread that reads the response, so deltas reach it
    /// as soon as they are read. A server that answers with plain JSON instead of a stream
    /// (`content-type: application/json`) is accepted too: its `choices[0].message.content` is
    /// the whole text, delivered as a single delta. Dropping the returned future stops the
    /// exchange at the next line read and `on_delta` is not called again.
    pub async fn complete(
        &self,
        messages: Vec<ChatMessage>,
        on_delta: impl FnMut(&str) + Send + 'static,
    ) -> Result<String, ChatError> {
        let client = self.clone();
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(Arc::clone(&cancelled));
        let mut on_delta = on_delta;
        let task = tokio::task::spawn_blocking(move || {
            client.request(&messages, &cancelled, &mut on_delta)
        });
        match task.await {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => Err(ChatError::Transport(format!("the request task stopped: {error}"))),
        }
    }

    fn request(
        &self,
        messages: &[ChatMessage],
        cancelled: &AtomicBool,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<String, ChatError> {
        tracing::debug!(endpoint = %self.endpoint, messages = messages.len(), "chat completion");
        let mut request = self.agent.post(&self.endpoint);
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let response = request
            .send_json(json!({"model": self.model, "messages": messages, "stream": true}))
            .map_err(|error| ChatError::Transport(format!("{}: {error}", self.endpoint)))?;
        let status = response.status();
        let is_json = response
            .body()
            .mime_type()
            .is_some_and(|mime| mime.eq_ignore_ascii_case("application/json"));
        let body = response.into_body();
        if !status.is_success() {
            return Err(ChatError::Http { status: status.as_u16(), body: body_excerpt(body) });
        }
        if is_json {
            return read_whole(body, cancelled, on_delta);
        }
        read_stream(BufReader::new(body.into_reader()), cancelled, on_delta)
    }
}

/// Tells the blocking request to stop when [`ChatClient::complete`]'s future goes away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Reads a non-streamed answer: `choices[0].message.content` is the whole text.
fn read_whole(
    mut body: ureq::Body,
    cancelled: &AtomicBool,
    on_delta: &mut dyn FnMut(&str),
) -> Result<String, ChatError> {
    let bytes = body
        .read_to_vec()
        .map_err(|error| ChatError::Transport(format!("reading the answer: {error}")))?;
    let answer: Value = serde_json::from_slice(&bytes).map_err(|error| {
        ChatError::Protocol(format!("the answer is not JSON ({error}): {}", excerpt(&bytes)))
    })?;
    if let Some(message) = reported_error(&answer) {
        return Err(ChatError::Protocol(format!("the server reported an error: {message}")));
    }
    let text = answer["choices"][0]["message"]["content"]
        .as_str()
        .ok_or_else(|| ChatError::Protocol("no choices[0].message.content in the answer".into()))?
        .to_owned();
    if cancelled.load(Ordering::Relaxed) {
        return Err(cancelled_error());
    }
    if !text.is_empty() {
        on_delta(&text);
    }
    Ok(text)
}

/// Reads a Server-Sent Events stream of `data: {chunk}` lines up to `data: [DONE]` (or the end
/// of the body), passing each `choices[0].delta.content` to `on_delta`. Comments, blank lines
/// and other fields are ignored.
fn read_stream(
    mut reader: impl BufRead,
    cancelled: &AtomicBool,
    on_delta: &mut dyn FnMut(&str),
) -> Result<String, ChatError> {
    let mut text = String::new();
    let mut line = Vec::new();
    loop {
        if cancelled.load(Ordering::Relaxed) {
            return Err(cancelled_error());
        }
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|error| ChatError::Transport(format!("reading the stream: {error}")))?;
        if read == 0 {
            return Ok(text);
        }
        let Some(data) = data_field(&line) else { continue };
        let data = std::str::from_utf8(data).map_err(|_| {
            ChatError::Protocol(format!("a data line is not UTF-8: {}", excerpt(data)))
        })?;
        let data = data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            return Ok(text);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            ChatError::Protocol(format!(
                "a data line is not JSON ({error}): {}",
                excerpt(data.as_bytes())
            ))
        })?;
        if let Some(message) = reported_error(&chunk) {
            return Err(ChatError::Protocol(format!("the server reported an error: {message}")));
        }
        if let Some(delta) = chunk["choices"][0]["delta"]["content"].as_str()
            && !delta.is_empty()
        {
            text.push_str(delta);
            on_delta(delta);
        }
    }
}

/// The value of a `data` field line (without its line ending), or `None` for any other line.
fn data_field(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let value = line.strip_prefix(b"data")?;
    if value.is_empty() {
        return Some(value);
    }
    let value = value.strip_prefix(b":")?;
    Some(value.strip_prefix(b" ").unwrap_or(value))
}

/// The message of an `{"error": ...}` object some servers send instead of a completion.
fn reported_error(value: &Value) -> Option<String> {
    let error = value.get("error").filter(|error| !error.is_null())?;
    Some(match error["message"].as_str().or(error.as_str()) {
        Some(message) => message.to_owned(),
        None => excerpt(error.to_string().as_bytes()),
    })
}

fn cancelled_error() -> ChatError {
    ChatError::Transport("the completion was cancelled".into())
}

/// The first bytes of an error answer's body; a body that cannot be read gives what arrived.
fn body_excerpt(body: ureq::Body) -> String {
    let mut bytes = Vec::with_capacity(BODY_EXCERPT_BYTES);
    // Only the message depends on the body, so a failed read keeps whatever was read.
    let _ = body.into_reader().take(BODY_EXCERPT_BYTES as u64).read_to_end(&mut bytes);
    excerpt(&bytes)
}

/// At most [`BODY_EXCERPT_BYTES`] of `bytes` as text, without a character cut in half at the end.
fn excerpt(bytes: &[u8]) -> String {
    let bytes = &bytes[..bytes.len().min(BODY_EXCERPT_BYTES)];
    let bytes = match std::str::from_utf8(bytes) {
        Err(error) if error.error_len().is_none() => &bytes[..error.valid_up_to()],
        _ => bytes,
    };
    String::from_utf8_lossy(bytes).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc;

    use cairn_test_support::standin::{Answer, Request, StandIn};

    use super::*;

    /// A stand-in that answers one request with `answer`, and the base URL to reach it (with a
    /// trailing slash, which the client must cope with).
    fn serve_once(answer: Answer) -> (String, StandIn) {
        let stand_in = StandIn::answering([answer]);
        (format!("{}/v1/", stand_in.url()), stand_in)
    }

    /// The one request the stand-in received.
    fn received(stand_in: &StandIn) -> Request {
        stand_in.wait_for(1, Duration::from_secs(60)).swap_remove(0)
    }

    fn client(url: String, api_key: Option<&str>) -> ChatClient {
        ChatClient::new(ChatConfig {
            url,
            model: "test-model".into(),
            api_key: api_key.map(str::to_owned),
            // Only a guard against a hang; nothing here depends on it.
            timeout: Duration::from_secs(60),
        })
    }

    fn conversation() -> Vec<ChatMessage> {
        vec![ChatMessage::system("Be brief."), ChatMessage::user("Greet the world.")]
    }

    type Deltas = Arc<Mutex<Vec<String>>>;

    /// A collector for deltas that also signals each one on a channel.
    fn collector() -> (Deltas, mpsc::Receiver<()>, impl FnMut(&str) + Send + 'static) {
        let deltas = Arc::new(Mutex::new(Vec::new()));
        let (signal, arrived) = mpsc::channel();
        let sink = Arc::clone(&deltas);
        let on_delta = move |delta: &str| {
            sink.lock().unwrap().push(delta.to_owned());
            let _ = signal.send(());
        };
        (deltas, arrived, on_delta)
    }

    #[tokio::test]
    async fn streams_deltas_in_order_and_returns_the_whole_text() {
        let (deltas, arrived, on_delta) = collector();
        // The rest is held back until the first delta has reached the callback, which shows
        // that deltas are delivered while the stream is still open. The limit only keeps a
        // broken client from hanging the test.
        let (told, prompt) = mpsc::channel();
        let rest = "event: message\nid: 3\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\", wörld\"}}]}\r\n\r\n\
                    data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}\n\n\
                    data: {\"choices\":[],\"usage\":{\"total_tokens\":9}}\n\n\
                    data: [DONE]\n\n";
        // Cut inside "ö" so both a line and a character span two chunks.
        let cut = rest.find('ö').unwrap() + 1;
        let answer = Answer::raw()
            .write(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                 transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n",
            )
            .write_chunk(
                ": keep-alive\n\n\
                 data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n\
                 data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n",
            )
            .then(move || {
                let _ = told.send(arrived.recv_timeout(Duration::from_secs(60)).is_ok());
            })
            .write_chunk(&rest.as_bytes()[..cut])
            .write_chunk(&rest.as_bytes()[cut..])
            .write_chunk("");
        let (url, server) = serve_once(answer);

        let text = client(url, Some("sk-test")).complete(conversation(), on_delta).await.unwrap();

        assert_eq!(text, "Hello, wörld!");
        assert_eq!(*deltas.lock().unwrap(), ["Hello", ", wörld", "!"]);
        let prompt = prompt.recv().expect("the stand-in sent the rest");
        assert!(prompt, "the first delta did not arrive before the rest was sent");
        let received = received(&server);
        let body = received.json();
        assert_eq!(received.method, "POST");
        assert_eq!(received.path, "/v1/chat/completions");
        assert_eq!(received.header("authorization"), Some("Bearer sk-test"));
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Greet the world."},
            ])
        );
    }

    #[tokio::test]
    async fn accepts_a_non_streamed_json_answer() {
        let (deltas, _arrived, on_delta) = collector();
        let body = json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "Just this."},
                "finish_reason": "stop",
            }],
        });
        let (url, server) =
            serve_once(Answer::new("200 OK", "application/json; charset=utf-8", body.to_string()));

        let text = client(url, None).complete(conversation(), on_delta).await.unwrap();

        assert_eq!(text, "Just this.");
        assert_eq!(*deltas.lock().unwrap(), ["Just this."]);
        let received = received(&server);
        assert_eq!(received.header("authorization"), None);
        assert_eq!(received.json()["stream"], true);
    }

    #[tokio::test]
    async fn a_refusal_gives_the_status_and_the_start_of_the_body() {
        let (deltas, _arrived, on_delta) = collector();
        let body = format!(
            "{{\"error\":{{\"message\":\"Incorrect API key\",\"padding\":\"{}\"}}}}",
            "x".repeat(1000)
        );
        let (url, server) = serve_once(Answer::new("401 Unauthorized", "application/json", body));

        let error =
            client(url, Some("wrong")).complete(conversation(), on_delta).await.unwrap_err();

        match error {
            ChatError::Http { status, body } => {
                assert_eq!(status, 401);
                assert!(
                    body.starts_with("{\"error\":{\"message\":\"Incorrect API key\""),
                    "{body}"
                );
                assert_eq!(body.len(), BODY_EXCERPT_BYTES);
            }
            other => panic!("expected an HTTP error, got {other:?}"),
        }
        assert!(deltas.lock().unwrap().is_empty());
        received(&server);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_error() {
        let (_deltas, _arrived, on_delta) = collector();

        let error = client(format!("{}/v1", cairn_test_support::unused_url()), None)
            .complete(conversation(), on_delta)
            .await
            .unwrap_err();

        assert!(matches!(error, ChatError::Transport(_)), "{error:?}");
    }

    #[tokio::test]
    async fn a_malformed_data_line_is_a_protocol_error() {
        let (deltas, _arrived, on_delta) = collector();
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n\
                    data: {\"choices\": [oops\n\n\
                    data: [DONE]\n\n";
        let (url, server) = serve_once(Answer::new("200 OK", "text/event-stream", body));

        let error = client(url, None).complete(conversation(), on_delta).await.unwrap_err();

        assert!(
            matches!(&error, ChatError::Protocol(message) if message.contains("oops")),
            "{error:?}"
        );
        assert_eq!(*deltas.lock().unwrap(), ["Hi"]);
        received(&server);
    }

    #[test]
    fn the_stream_reader_handles_errors_and_a_missing_done() {
        let mut deltas = Vec::new();
        let mut on_delta = |delta: &str| deltas.push(delta.to_owned());
        let running = AtomicBool::new(false);

        let stream =
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata\n\nretry: 5\n\n\
                       data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n";
        assert_eq!(read_stream(&stream[..], &running, &mut on_delta).unwrap(), "ab");

        let stream = b"data: {\"error\":{\"message\":\"model overloaded\"}}\n\n";
        let error = read_stream(&stream[..], &running, &mut on_delta).unwrap_err();
        assert!(matches!(&error, ChatError::Protocol(message) if message.contains("overloaded")));

        let cancelled = AtomicBool::new(true);
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n";
        assert!(matches!(
            read_stream(&stream[..], &cancelled, &mut on_delta),
            Err(ChatError::Transport(_))
        ));

        assert_eq!(deltas, ["a", "b"]);
    }

    #[test]
    fn excerpts_do_not_cut_characters() {
        let text = format!("{}é", "a".repeat(BODY_EXCERPT_BYTES - 1));
        assert_eq!(excerpt(text.as_bytes()), "a".repeat(BODY_EXCERPT_BYTES - 1));
        assert_eq!(excerpt(b"  short \n"), "short");
    }

    #[test]
    fn public_messages_carry_nothing_from_the_endpoint() {
        let errors = [
            ChatError::Http {
                status: 401,
                body: "{\"error\": \"key sk-live-123 revoked\"}".into(),
            },
            ChatError::Transport("http://10.0.0.7:9000/v1/chat/completions: refused".into()),
            ChatError::Protocol("the answer is not JSON: <html>internal proxy page".into()),
        ];
        for error in errors {
            let public = error.public_message();
            for secret in ["sk-live", "10.0.0.7", "proxy", "401", "http"] {
                assert!(!public.contains(secret), "{public:?} leaks {secret:?}");
            }
            assert!(error.to_string().len() > public.len(), "the log keeps the details");
        }
    }

    #[test]
    fn debug_output_hides_the_api_key() {
        let config = ChatConfig {
            url: "http://127.0.0.1:9000/v1".into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            timeout: Duration::from_secs(1),
        };
        assert!(!format!("{config:?}").contains("sk-secret"));
    }
}
