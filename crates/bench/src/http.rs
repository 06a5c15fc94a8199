//! A minimal HTTP/1.1 keep-alive client, a bare hyper server to compare the daemon with, and
//! the throughput loop both are measured by.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// One keep-alive HTTP/1.1 connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Connection {
    pub async fn open(address: SocketAddr) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP handshake failed")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Connection { sender, host: address.to_string() })
    }

    /// Sends one request and reads the whole response.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let mut request = Request::builder().method(method).uri(path).header(HOST, &self.host);
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request = request.body(Full::new(body.unwrap_or_default()))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    pub async fn get(&mut self, path: &str) -> anyhow::Result<(StatusCode, Bytes)> {
        self.send(Method::GET, path, None).await
    }
}

/// A health answer the size of the daemon's (the size makes no difference that `wrk`
/// measures: 75 bytes or these 120 served the same requests a second within 2 %).
const BARE_BODY: &[u8] = br#"{"status":"healthy","memoryCount":100000,"uptime":12.345,"version":"0.1.0","retrieval":"fulltext","embeddingsPending":0}"#;

/// A bare hyper 1.x server answering every request with a fixed JSON body, in a process of
/// its own (`cairn-bench bare-server`), as the daemon runs in its own: the load generator
/// then competes with both servers alike, and neither server shares a process, a runtime or
/// an allocator with it. The child ends when this is dropped.
pub struct BareServer {
    pub address: SocketAddr,
    /// The child's process id, for measuring its CPU time.
    pub pid: u32,
    child: std::process::Child,
}

/// The hidden subcommand that runs [`serve_bare`].
pub const BARE_SERVER_COMMAND: &str = "bare-server";

impl BareServer {
    /// Starts this executable as `cairn-bench bare-server` and waits for its address.
    pub fn start() -> anyhow::Result<BareServer> {
        use std::io::BufRead as _;
        let executable = std::env::current_exe().context("cannot find cairn-bench itself")?;
        let mut child = std::process::Command::new(executable)
            .arg(BARE_SERVER_COMMAND)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("cannot start the bare server")?;
        let stdout = child.stdout.take().context("the bare server's stdout")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let address = match line.trim().parse() {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("the bare server said {line:?} instead of its address");
            }
        };
        Ok(BareServer { address, pid: child.id(), child })
    }
}

impl Drop for BareServer {
    fn drop(&mut self) {
        // Closing its stdin ends it; kill it in case it does not notice.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cairn-bench bare-server`: serves [`BARE_BODY`] on a port of 127.0.0.1 chosen by the
/// system, on a multi-threaded tokio runtime as the daemon's, printing its address as the
/// first line of stdout; exits when stdin closes (its parent ended).
pub fn serve_bare() -> anyhow::Result<()> {
    use std::io::Read as _;
    let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .context("cannot bind the bare server")?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("bare-stdin".into()).spawn(|| {
        let mut sink = [0u8; 64];
        while matches!(std::io::stdin().read(&mut sink), Ok(read) if read > 0) {}
        std::process::exit(0);
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve_bare_on(listener))
}

async fn serve_bare_on(listener: std::net::TcpListener) -> anyhow::Result<()> {
    use std::io::Write as _;
    let address = listener.local_addr()?;
    let listener = TcpListener::from_std(listener)?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{address}")?;
    stdout.flush()?;
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(|_request| async {
                let mut response = Response::new(Full::new(Bytes::from_static(BARE_BODY)));
                response.headers_mut().insert(
                    CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/json"),
                );
                Ok::<_, Infallible>(response)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Requests per second of `GET path` over `connections` keep-alive connections.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throughput {
    pub requests: u64,
    pub failures: u64,
    pub seconds: f64,
    pub per_second: f64,
}

impl Throughput {
    /// Adds another round's requests and time.
    pub fn add(&mut self, round: Throughput) {
        self.requests += round.requests;
        self.failures += round.failures;
        self.seconds += round.seconds;
        self.per_second = self.requests as f64 / self.seconds;
    }
}

pub async fn throughput(
    address: SocketAddr,
    path: &'static str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Throughput> {
    load(address, connections, duration, move |_| (Method::GET, path, None), StatusCode::OK).await
}

/// Requests per second over `connections` keep-alive connections, each sending what
/// `request` makes of a running number (the method, the path and the body) until `duration`
/// has passed; an answer other than `expected` counts as a failure.
pub async fn load(
    address: SocketAddr,
    connections: usize,
    duration: Duration,
    request: impl Fn(u64) -> (Method, &'static str, Option<Bytes>) + Send + Sync + 'static,
    expected: StatusCode,
) -> anyhow::Result<Throughput> {
    let request = Arc::new(request);
    let sequence = Arc::new(AtomicU64::new(0));
    let mut opened = Vec::with_capacity(connections);
    for _ in 0..connections {
        let mut connection = Connection::open(address).await?;
        // One request first, so connection set-up is not measured.
        let (method, path, body) = request(sequence.fetch_add(1, Ordering::Relaxed));
        let (status, answer) = connection.send(method, path, body).await?;
        anyhow::ensure!(
            status == expected,
            "{path} answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        opened.push(connection);
    }
    let running = Arc::new(AtomicBool::new(true));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let tasks: Vec<_> = opened
        .into_iter()
        .map(|mut connection| {
            let (running, ok, failed) = (running.clone(), ok.clone(), failed.clone());
            let (request, sequence) = (request.clone(), sequence.clone());
            tokio::spawn(async move {
                while running.load(Ordering::Relaxed) {
                    let (method, path, body) = request(sequence.fetch_add(1, Ordering::Relaxed));
                    match connection.send(method, path, body).await {
                        Ok((status, _)) if status == expected => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    running.store(false, Ordering::Relaxed);
    for task in tasks {
        task.await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let requests = ok.load(Ordering::Relaxed);
    Ok(Throughput {
        requests,
        failures: failed.load(Ordering::Relaxed),
        seconds: elapsed,
        per_second: requests as f64 / elapsed,
    })
}

/// The processor time (user and system) process `pid` has used so far, from
/// `/proc/<pid>/stat`, in USER_HZ ticks (100 a second on every Linux architecture).
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    // After the command name, which is in parentheses and may hold spaces: utime and stime
    // are the 12th and 13th fields.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: Vec<u64> =
        after_name.split_whitespace().skip(11).take(2).filter_map(|n| n.parse().ok()).collect();
    anyhow::ensure!(ticks.len() == 2, "cannot parse /proc/{pid}/stat");
    Ok(Duration::from_millis((ticks[0] + ticks[1]) * 10))
}

/// Whether `wrk` is on the `PATH`.
pub fn wrk_available() -> bool {
    std::process::Command::new("wrk")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// `wrk -t2 -c<connections> -d<duration> http://<address><path>`: its requests per second.
/// Any answer not 2xx or 3xx counts as a failure, as wrk counts them.
pub async fn wrk(
    address: SocketAddr,
    path: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Throughput> {
    let mut command = std::process::Command::new("wrk");
    command
        .args(["-t2", &format!("-c{connections}"), &format!("-d{}s", duration.as_secs().max(1))])
        .arg(format!("http://{address}{path}"));
    let output =
        tokio::task::spawn_blocking(move || command.output()).await?.context("cannot run wrk")?;
    let text = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(output.status.success(), "wrk failed: {text}");
    // "  123456 requests in 3.00s, 12.34MB read" and "Non-2xx or 3xx responses: 12".
    let summary =
        text.lines().find(|line| line.contains(" requests in ")).context("wrk summary")?;
    let mut words = summary.split_whitespace();
    let requests: u64 = words.next().context("wrk count")?.parse()?;
    let seconds: f64 = words
        .nth(2)
        .and_then(|elapsed| elapsed.trim_end_matches(',').strip_suffix('s'))
        .context("wrk time")?
        .parse()?;
    let failures: u64 = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .map_or(Ok(0), |count| count.trim().parse())?;
    let ok = requests - failures.min(requests);
    Ok(Throughput { requests: ok, failures, seconds, per_second: ok as f64 / seconds })
}
