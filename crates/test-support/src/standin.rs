//! Stand-ins for paid HTTP endpoints (an OpenAI-compatible chat, embeddings, transcription or
//! speech API) on loopback: a plain HTTP/1.1 server on its own threads that keeps every
//! request it received and answers each with what the test's function says, including
//! answers cut in pieces with pauses between them, errors, and answers that never come.
//!
//! Only for services we do not run ourselves; Cairn's own components are always the real ones.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One request the stand-in received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target as sent, with its query string.
    pub path: String,
    /// The protocol version of the request line, such as `HTTP/1.1`.
    pub version: String,
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// The request line as sent, without its line end: `POST /v1/chat/completions HTTP/1.1`.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.method, self.path, self.version)
    }

    /// The first header of this name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body parsed as JSON; panics, showing the body, when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "{} {}: the body is not JSON ({error}): {:?}",
                self.method,
                self.path,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What a stand-in does with a request: the steps are written to (or done on) the
/// connection in order, then it is closed.
pub struct Answer {
    steps: Vec<Step>,
}

enum Step {
    Write(Vec<u8>),
    Pause(Duration),
    Run(Box<dyn FnOnce() + Send>),
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Answer({} steps)", self.steps.len())
    }
}

impl Answer {
    /// An answer whose bytes the test writes itself, head included.
    pub fn raw() -> Answer {
        Answer { steps: Vec::new() }
    }

    /// A whole answer: `status` (such as `200 OK`), a content type and a body with its length.
    pub fn new(status: &str, content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
        let body = body.into();
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n",
            body.len()
        );
        Answer::raw().write(head).write(body)
    }

    /// A JSON answer.
    pub fn json(status: &str, body: &Value) -> Answer {
        Answer::new(status, "application/json", body.to_string())
    }

    /// The head of an answer whose body ends when the connection closes: add its pieces with
    /// [`Answer::write`] and [`Answer::pause`].
    pub fn streaming(status: &str, content_type: &str) -> Answer {
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
        );
        Answer::raw().write(head)
    }

    /// No answer at all: the connection is held open for `duration`, then closed.
    pub fn silence(duration: Duration) -> Answer {
        Answer::raw().pause(duration)
    }

    /// The same answer, begun after `delay` (a slow provider).
    pub fn delayed(mut self, delay: Duration) -> Answer {
        if !delay.is_zero() {
            self.steps.insert(0, Step::Pause(delay));
        }
        self
    }

    /// Writes `bytes` next.
    pub fn write(mut self, bytes: impl Into<Vec<u8>>) -> Answer {
        self.steps.push(Step::Write(bytes.into()));
        self
    }

    /// Writes `bytes` as one chunk of a `transfer-encoding: chunked` body; empty `bytes` write
    /// the last chunk, which ends the body.
    pub fn write_chunk(self, bytes: impl AsRef<[u8]>) -> Answer {
        let bytes = bytes.as_ref();
        let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
        chunk.extend_from_slice(bytes);
        chunk.extend_from_slice(b"\r\n");
        self.write(chunk)
    }

    /// Waits `duration` before the next step.
    pub fn pause(mut self, duration: Duration) -> Answer {
        self.steps.push(Step::Pause(duration));
        self
    }

    /// Runs `step` (on the stand-in's thread) before the next one: to note when something was
    /// sent, or to wait for the test's signal.
    pub fn then(mut self, step: impl FnOnce() + Send + 'static) -> Answer {
        self.steps.push(Step::Run(Box::new(step)));
        self
    }
}

type Respond = dyn Fn(&Request) -> Answer + Send + Sync;

/// A stand-in server on a free loopback port. It runs until the test process ends.
#[derive(Clone)]
pub struct StandIn {
    address: std::net::SocketAddr,
    received: Arc<(Mutex<Vec<Request>>, Condvar)>,
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "StandIn({})", self.address)
    }
}

impl StandIn {
    /// Starts a stand-in that answers every request with `respond`, each connection on a
    /// thread of its own (so a slow answer holds up no other).
    pub fn start(respond: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let address = listener.local_addr().expect("a bound address");
        let received: Arc<(Mutex<Vec<Request>>, Condvar)> = Arc::default();
        let respond: Arc<Respond> = Arc::new(respond);
        let kept = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (kept, respond) = (kept.clone(), respond.clone());
                std::thread::spawn(move || serve_connection(stream, &kept, &*respond));
            }
        });
        StandIn { address, received }
    }

    /// Starts a stand-in that answers the requests with `answers`, one each, in order of
    /// arrival. A request after the last answer gets a `500` that says so, so a client that
    /// asks more often than the test expects sees a failure.
    pub fn answering(answers: impl IntoIterator<Item = Answer>) -> StandIn {
        let answers = Mutex::new(answers.into_iter().collect::<VecDeque<Answer>>());
        StandIn::start(move |request| {
            answers.lock().unwrap().pop_front().unwrap_or_else(|| {
                let message = format!(
                    "the stand-in has no answer left for {} {}",
                    request.method, request.path
                );
                openai::error("500 Internal Server Error", &message)
            })
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn address(&self) -> std::net::SocketAddr {
        self.address
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<Request> {
        self.received.0.lock().unwrap().clone()
    }

    /// Waits until `count` requests have arrived (panics after `patience`), and returns them.
    pub fn wait_for(&self, count: usize, patience: Duration) -> Vec<Request> {
        let deadline = Instant::now() + patience;
        let (requests, arrived) = &*self.received;
        let mut requests = requests.lock().unwrap();
        while requests.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the stand-in at {} received {} of {count} requests within {patience:?}",
                self.address,
                requests.len()
            );
            requests = arrived.wait_timeout(requests, left).unwrap().0;
        }
        requests.clone()
    }
}

/// Answers the requests of one connection until it closes or an answer closes it (every
/// [`Answer`] does). A request that cannot be read ends the connection quietly: clients
/// under test may hang up at any point.
fn serve_connection(
    stream: TcpStream,
    received: &(Mutex<Vec<Request>>, Condvar),
    respond: &Respond,
) {
    let Ok(reading) = stream.try_clone() else { return };
    let mut reader = BufReader::new(reading);
    let Some(request) = read_request(&mut reader) else { return };
    let answer = respond(&request);
    {
        let (requests, arrived) = received;
        requests.lock().unwrap().push(request);
        arrived.notify_all();
    }
    let mut stream = stream;
    for step in answer.steps {
        match step {
            // The client may have gone; what it saw is for the test to check.
            Step::Write(bytes) => {
                let _ = stream.write_all(&bytes).and_then(|()| stream.flush());
            }
            Step::Pause(duration) => std::thread::sleep(duration),
            Step::Run(step) => step(),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Reads one HTTP/1.1 request: its line, headers and body (by length or chunked).
fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let version = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut request = Request { method, path, version, headers, body: Vec::new() };
    let chunked =
        request.header("transfer-encoding").is_some_and(|value| value.contains("chunked"));
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = request.header("content-length") {
        request.body.resize(length.parse().ok()?, 0);
        reader.read_exact(&mut request.body).ok()?;
    }
    Some(request)
}

/// Answers in the shapes of OpenAI's API, which the compatible providers share.
pub mod openai {
    use super::{Answer, Value, json};
    use std::time::Duration;

    /// A chat completion whose message is `content`.
    pub fn chat(content: &str) -> Answer {
        let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]});
        Answer::json("200 OK", &body)
    }

    /// A streamed chat completion: one `data:` event a piece, `pause` before each after the
    /// first, then `[DONE]`.
    pub fn chat_stream(pieces: &[&str], pause: Duration) -> Answer {
        let mut answer = Answer::streaming("200 OK", "text/event-stream");
        for (index, piece) in pieces.iter().enumerate() {
            if index > 0 && !pause.is_zero() {
                answer = answer.pause(pause);
            }
            answer = answer.write(chat_chunk(piece));
        }
        answer.write("data: [DONE]\n\n")
    }

    /// One `data:` event of a streamed completion carrying `content`.
    pub fn chat_chunk(content: &str) -> String {
        let data = json!({"choices": [{"index": 0, "delta": {"content": content}}]});
        format!("data: {data}\n\n")
    }

    /// An embeddings answer with one vector per input.
    pub fn embeddings(vectors: &[Vec<f32>]) -> Answer {
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(index, vector)| json!({"object": "embedding", "index": index, "embedding": vector}))
            .collect();
        Answer::json("200 OK", &json!({"object": "list", "data": data}))
    }

    /// A transcription answer.
    pub fn transcription(text: &str) -> Answer {
        Answer::json("200 OK", &json!({"text": text}))
    }

    /// An error answer in OpenAI's envelope.
    pub fn error(status: &str, message: &str) -> Answer {
        Answer::json(
            status,
            &json!({"error": {"message": message, "type": "invalid_request_error"}}),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use super::{Answer, StandIn, openai};

    fn exchange(stand_in: &StandIn, request: &str) -> String {
        let mut stream = TcpStream::connect(stand_in.address()).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn a_stand_in_keeps_requests_and_answers_in_pieces() {
        let stand_in = StandIn::start(|request| match request.path.as_str() {
            "/v1/chat/completions" => openai::chat_stream(&["a", "b"], Duration::from_millis(200)),
            _ => openai::error("404 Not Found", "no such route"),
        });
        let started = Instant::now();
        let body = r#"{"model":"m"}"#;
        let answer = exchange(
            &stand_in,
            &format!(
                "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        );
        assert!(started.elapsed() >= Duration::from_millis(200), "the pause was kept");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("data: [DONE]\n\n"), "{answer}");
        let chunked =
            "GET /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
        assert!(exchange(&stand_in, chunked).starts_with("HTTP/1.1 404"));
        let requests = stand_in.wait_for(2, Duration::from_secs(5));
        assert_eq!(requests[0].json()["model"], "m");
        assert_eq!(requests[0].header("CONTENT-LENGTH"), Some("13"));
        assert_eq!(requests[1].text(), "hi");
        assert_eq!(Answer::raw().write("x").pause(Duration::ZERO).steps.len(), 2);
    }

    #[test]
    fn a_stand_in_with_answers_gives_each_once_then_refuses() {
        let chunked =
            Answer::streaming("200 OK", "text/plain").write_chunk("hello").write_chunk("");
        let stand_in = StandIn::answering([chunked, openai::transcription("hi")]);
        let get = "GET /a?b=c HTTP/1.1\r\n\r\n";
        assert!(exchange(&stand_in, get).ends_with("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
        assert!(exchange(&stand_in, get).ends_with(r#"{"text":"hi"}"#));
        let spent = exchange(&stand_in, get);
        assert!(spent.starts_with("HTTP/1.1 500 "), "{spent}");
        assert!(spent.contains("no answer left for GET /a?b=c"), "{spent}");
        assert_eq!(stand_in.requests()[0].line(), "GET /a?b=c HTTP/1.1");
    }
}
