//! A real `cairn serve` process on a free port with a fresh temporary data directory, and a
//! small HTTP client for it: JSON requests, error envelopes, Server-Sent Events. A daemon
//! that fails to start panics with its log; a request that hangs panics after 30 s naming it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// A `cairn serve` process. Killed when dropped.
pub struct Daemon {
    child: Child,
    base_url: String,
    data_dir: PathBuf,
    // Keeps the directory alive for the daemon's lifetime when the daemon owns it.
    _temp: Option<tempfile::TempDir>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A response: status, headers and the body parsed as JSON (`Value::Null` when not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Value,
    /// The body as text.
    pub text: String,
}

/// What a request sends.
pub enum Body<'a> {
    None,
    Json(Value),
    Raw(&'a [u8]),
}

impl Daemon {
    /// Starts a daemon with a data directory of its own.
    pub fn start() -> Daemon {
        Daemon::start_with(&[], &[])
    }

    /// Starts a daemon with a data directory of its own and extra `cairn serve` arguments
    /// and environment variables.
    pub fn start_with(args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let temp = tempfile::tempdir().expect("temp dir");
        let mut daemon = Daemon::start_in_with(temp.path(), args, envs);
        daemon._temp = Some(temp);
        daemon
    }

    /// Starts a daemon on an existing data directory (for restarts).
    pub fn start_in(data_dir: &Path) -> Daemon {
        Daemon::start_in_with(data_dir, &[], &[])
    }

    pub fn start_in_with(data_dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("daemon.log"))
            .expect("log file");
        // Port 0 picks a free port, unless the test names one (to restart at the same URL).
        let port: &[&str] = if args.contains(&"--port") { &[] } else { &["--port", "0"] };
        let mut child = cairn_command(data_dir, "serve", port)
            .args(args)
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the cairn binary starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read the listening line");
        let base_url = line
            .trim()
            .strip_prefix("cairn listening on ")
            .unwrap_or_else(|| {
                let log = std::fs::read_to_string(data_dir.join("daemon.log")).unwrap_or_default();
                panic!("unexpected first line from cairn serve: {line:?}; its log:\n{log}")
            })
            .to_owned();
        let client = Client::builder(TokioExecutor::new()).build_http();
        Daemon { child, base_url, data_dir: data_dir.to_owned(), _temp: None, client }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The address the daemon listens on.
    pub fn address(&self) -> std::net::SocketAddr {
        let address = self.base_url.trim_start_matches("http://");
        address.parse().unwrap_or_else(|_| panic!("not an address: {address}"))
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the daemon's /proc status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmHWM line");
        kib * 1024
    }

    pub async fn request(&self, method: Method, path: &str, body: Body<'_>) -> Reply {
        self.request_with(method, path, body, &[]).await
    }

    /// A request with extra headers, such as credentials.
    pub async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let response = self.send(method.clone(), path, body, headers, &[]).await;
        read_reply(response).await.unwrap_or_else(|error| panic!("{method} {path}: {error}"))
    }

    /// A JSON POST whose failure (a daemon killed under it) is an `Err`, not a panic.
    pub async fn try_post(&self, path: &str, body: Value) -> Result<Reply, String> {
        let response = self.try_send(Method::POST, path, Body::Json(body), &[], &[]).await?;
        read_reply(response).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path, Body::None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.request(Method::POST, path, Body::Json(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Reply {
        self.request(Method::PATCH, path, Body::Json(body)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.request(Method::DELETE, path, Body::None).await
    }

    /// Stores a memory and returns its id.
    pub async fn remember(&self, memory: Value) -> String {
        let reply = self.post("/api/memories", memory).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        reply.body["id"].as_str().unwrap().to_owned()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        self.signal("-TERM");
        self.child.wait().expect("wait for cairn")
    }

    /// Sends SIGKILL: the process gets no chance to clean up.
    pub fn kill_hard(mut self) {
        self.signal("-KILL");
        self.child.wait().expect("wait for cairn");
    }

    fn signal(&mut self, signal: &str) {
        let status =
            Command::new("kill").arg(signal).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
    }
}

/// `cairn <subcommand> --data-dir <dir> <args>`, with test-friendly defaults: rate limits
/// off (tests that check them turn them on) and info logs.
pub fn cairn_command(data_dir: &Path, subcommand: &str, args: &[&str]) -> Command {
    let mut command = Command::new(cairn_bin());
    command.arg(subcommand).args(args).arg("--data-dir").arg(data_dir).env("RUST_LOG", "info");
    if subcommand == "serve" {
        command.envs([
            ("SERVICE_RATE_LIMIT_READ", "0"),
            ("SERVICE_RATE_LIMIT_WRITE", "0"),
            ("SERVICE_RATE_LIMIT_CONTEXT", "0"),
            ("SERVICE_RATE_LIMIT_BULK", "0"),
            ("SERVICE_RATE_LIMIT_START", "0"),
        ]);
    }
    command
}

/// An API key of `role`, made with `cairn keys create` in `data_dir`: the secret.
pub fn create_key(data_dir: &Path, role: &str) -> String {
    let output = run_cairn(data_dir, "keys", &["create", "--role", role], &[]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let secret = stdout.lines().last().unwrap().to_owned();
    assert!(secret.starts_with("cairn_"), "{stdout}");
    secret
}

pub use crate::unused_url;

/// The `cairn` binary under test: `CAIRN_BIN` when set, else the one cargo built beside the
/// running test (`target/<profile>/cairn`; cargo builds it for `cairn-cli`'s integration
/// tests, which are the ones that start daemons).
pub fn cairn_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CAIRN_BIN") {
        return PathBuf::from(bin);
    }
    let test = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test> -> target/<profile>/cairn
    let profile = test.parent().and_then(Path::parent).expect("a test binary under target/");
    let bin = profile.join("cairn");
    assert!(
        bin.exists(),
        "{} does not exist: build it (`cargo build -p cairn-cli`) or set CAIRN_BIN",
        bin.display()
    );
    bin
}

/// Runs a command to completion with `input` on its standard input.
pub fn run_with_input(command: &mut Command, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cairn runs");
    child.stdin.take().expect("stdin is piped").write_all(input.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("cairn finishes")
}

/// Runs a `cairn` command to completion and returns its output.
pub fn run_cairn(
    data_dir: &Path,
    subcommand: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> std::process::Output {
    cairn_command(data_dir, subcommand, args)
        .envs(envs.iter().copied())
        .output()
        .expect("cairn runs")
}

impl Daemon {
    /// Runs a client subcommand of `cairn` (such as `connectors`) against this daemon.
    pub fn run_client(&self, args: &[&str]) -> std::process::Output {
        self.run_client_with_input(args, "")
    }

    /// Runs a client subcommand with `input` on its standard input.
    pub fn run_client_with_input(&self, args: &[&str], input: &str) -> std::process::Output {
        run_with_input(Command::new(cairn_bin()).args(args).env("CAIRN_URL", &self.base_url), input)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Reply {
    /// Asserts an error envelope with this status and code, and returns its message.
    pub fn assert_error(&self, status: u16, code: &str) -> &str {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.body["error"]["code"], code, "{self:?}");
        assert_eq!(self.body["error"]["status"], status, "{self:?}");
        self.body["error"]["message"].as_str().expect("error message")
    }
}

/// A response read as Server-Sent Events, message by message, as the frames arrive.
pub struct EventStream {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    body: hyper::body::Incoming,
    buffer: Vec<u8>,
    what: String,
}

/// One Server-Sent Events message (comments dropped; `data` lines joined with `\n`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseMessage {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: Option<String>,
}

impl SseMessage {
    /// The data parsed as JSON.
    pub fn json(&self) -> Value {
        let data = self.data.as_deref().unwrap_or_default();
        serde_json::from_str(data).unwrap_or_else(|error| panic!("not JSON ({error}): {data:?}"))
    }
}

impl Daemon {
    /// Sends a JSON request and returns the response as soon as its head arrives.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
        headers: &[(&str, &str)],
        more_headers: &[(&str, &str)],
    ) -> hyper::Response<hyper::body::Incoming> {
        let sent = self.try_send(method, path, body, headers, more_headers).await;
        sent.unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`Daemon::send`], answering a timeout or a failed connection as an `Err`.
    async fn try_send(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
        headers: &[(&str, &str)],
        more_headers: &[(&str, &str)],
    ) -> Result<hyper::Response<hyper::body::Incoming>, String> {
        let bytes = match body {
            Body::None => Bytes::new(),
            Body::Json(value) => Bytes::from(serde_json::to_vec(&value).unwrap()),
            Body::Raw(raw) => Bytes::copy_from_slice(raw),
        };
        let mut request = hyper::Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base_url))
            .header("content-type", "application/json");
        for (name, value) in headers.iter().chain(more_headers) {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(bytes)).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .map_err(|_| format!("{method} {path} timed out"))?
            .map_err(|error| format!("{method} {path} failed: {error}"))
    }
}

/// A whole response: status, headers, the body as JSON (`null` when not JSON) and as text.
async fn read_reply(response: hyper::Response<hyper::body::Incoming>) -> Result<Reply, String> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let raw = response.into_body().collect().await.map_err(|error| error.to_string())?;
    let raw = raw.to_bytes();
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Ok(Reply { status, headers, body, text: String::from_utf8_lossy(&raw).into_owned() })
}

/// How long a stream may stay silent before a read gives up: generous, for slow machines.
const STREAM_PATIENCE: Duration = Duration::from_secs(30);

impl Daemon {
    /// Sends a request with `Accept: text/event-stream` and returns as soon as the response
    /// head arrives; the body is read with [`EventStream::next`].
    pub async fn stream(
        &self,
        method: Method,
        path: &str,
        body: Body<'_>,
        headers: &[(&str, &str)],
    ) -> EventStream {
        let accept = [("accept", "text/event-stream")];
        let response = self.send(method.clone(), path, body, headers, &accept).await;
        EventStream::from_response(response, format!("{method} {path}"))
    }
}

impl EventStream {
    /// Reads a response that has already arrived; `what` names it in failures.
    pub fn from_response(
        response: hyper::Response<hyper::body::Incoming>,
        what: impl Into<String>,
    ) -> EventStream {
        EventStream {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.into_body(),
            buffer: Vec::new(),
            what: what.into(),
        }
    }

    pub fn content_type(&self) -> &str {
        self.headers.get("content-type").and_then(|value| value.to_str().ok()).unwrap_or_default()
    }

    /// The next message that carries data or an event name (comments, heartbeats and
    /// `retry:`-only messages are skipped); `None` when the stream ends. Panics when nothing
    /// arrives for 30 seconds.
    pub async fn next(&mut self) -> Option<SseMessage> {
        loop {
            while let Some(message) = self.take_message() {
                if message.data.is_some() || message.event.is_some() {
                    return Some(message);
                }
            }
            let frame =
                tokio::time::timeout(STREAM_PATIENCE, self.body.frame()).await.unwrap_or_else(
                    |_| panic!("{}: nothing arrived for {STREAM_PATIENCE:?}", self.what),
                );
            match frame {
                None => {
                    assert!(
                        self.buffer.iter().all(u8::is_ascii_whitespace),
                        "{}: the stream ended inside a message: {:?}",
                        self.what,
                        String::from_utf8_lossy(&self.buffer)
                    );
                    return None;
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend(data.iter().filter(|byte| **byte != b'\r'));
                    }
                }
                Some(Err(error)) => panic!("{}: reading the stream failed: {error}", self.what),
            }
        }
    }

    /// Reads the rest of the body as text.
    pub async fn text(mut self) -> String {
        let rest = tokio::time::timeout(STREAM_PATIENCE, self.body.collect())
            .await
            .unwrap_or_else(|_| panic!("{}: the body did not end", self.what))
            .unwrap()
            .to_bytes();
        self.buffer.extend_from_slice(&rest);
        String::from_utf8_lossy(&self.buffer).into_owned()
    }

    /// Reads the whole body as JSON: for answers that are not streams, such as errors.
    pub async fn json(self) -> Value {
        let what = self.what.clone();
        let text = self.text().await;
        serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{what}: not JSON ({error}): {text}"))
    }

    /// Cuts the first complete message (up to a blank line) off the buffer.
    fn take_message(&mut self) -> Option<SseMessage> {
        let end = self.buffer.windows(2).position(|pair| pair == b"\n\n")?;
        let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
        let text = String::from_utf8(raw).expect("event streams are UTF-8");
        let mut message = SseMessage::default();
        for line in text.lines().filter(|line| !line.is_empty() && !line.starts_with(':')) {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
            match field {
                "event" => message.event = Some(value),
                "id" => message.id = Some(value),
                "data" => {
                    message.data = Some(match message.data.take() {
                        Some(data) => format!("{data}\n{value}"),
                        None => value,
                    });
                }
                _ => {}
            }
        }
        Some(message)
    }
}
