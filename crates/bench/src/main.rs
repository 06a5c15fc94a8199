//! `cairn-bench`: measures Cairn against the budgets of DESIGN.md and prints a report.
//!
//! Run it with `cargo xtask bench` (a release build). It seeds a real SQLite store with a
//! synthetic corpus of agent memories, times ingest, context packs and search in process,
//! then starts the release `cairn` daemon on the largest corpus and times it over HTTP,
//! including how soon its event streams (SSE) deliver a conversation's events. It also times
//! the conversation runtime's appends in process. The report says, for every figure, whether
//! it is within budget; the exit status is 0 either way, since this is a report, not a test.

mod corpus;
mod daemon;
mod eval;
mod http;
mod inproc;
mod runtime;
mod stats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use cairn_memory::Engine;
use cairn_memory::embed::HashingEmbedder;
use cairn_store_sqlite::SqliteStore;
use hyper::{Method, StatusCode};

use crate::corpus::{Corpus, Rng};
use crate::stats::{Latencies, count, duration, megabytes};

const USAGE: &str = "\
cairn-bench: measures Cairn against the budgets of DESIGN.md

USAGE:
    cargo xtask bench [-- OPTIONS]
    cargo run --release -p cairn-bench -- [OPTIONS]

OPTIONS:
    --quick              only 10,000 memories (as --sizes 10000), 100 event streams and
                         fewer runtime appends
    --sizes N[,N...]     corpus sizes to measure [default: 10000,100000]; the daemon runs
                         on the largest
    --calls N            measured context and search calls per size [default: 1000]
    --seed N             seed of the synthetic corpus [default: 42]
    --no-daemon          skip the daemon figures (start, RSS, HTTP throughput, SSE delivery)
    --rebuild-daemon     run `cargo build -p cairn-cli` first, even when the binary exists
    --keep               keep the data directory of the largest size (cairn.db) and print it
    --sample N           print N synthetic memories, tasks and queries, and exit
    -h, --help           print this help
";

/// Budgets of DESIGN.md, section "Budgets" (stated for 100,000 memories, 2 cores).
mod budget {
    use std::time::Duration;

    pub const INGEST_PER_SECOND: f64 = 20_000.0;
    pub const CONTEXT_P50: Duration = Duration::from_millis(2);
    pub const CONTEXT_P99: Duration = Duration::from_millis(10);
    pub const SEARCH_P50: Duration = Duration::from_millis(2);
    pub const DAEMON_RSS_BYTES: u64 = 100 * 1024 * 1024;
    pub const START_TO_HEALTHY: Duration = Duration::from_millis(200);
    pub const HEALTH_VS_BARE: f64 = 0.80;
    /// SSE delivery (append → client receives) p99.
    pub const SSE_DELIVERY_P99: Duration = Duration::from_millis(5);
}

const WARM_UP_CALLS: usize = 50;
const HTTP_CONTEXT_REQUESTS: usize = 200;
const THROUGHPUT_CONNECTIONS: usize = 16;
const THROUGHPUT_DURATION: Duration = Duration::from_secs(3);
const BREAKDOWN_CALLS: usize = 200;
/// Event streams open at once for the SSE delivery figures (`--quick`: the first only).
const SSE_STREAMS: [usize; 2] = [100, 1_000];
const SSE_WARM_UP: usize = 20;
const SSE_SAMPLES: usize = 300;

#[derive(Debug)]
struct Options {
    sizes: Vec<usize>,
    quick: bool,
    calls: usize,
    seed: u64,
    daemon: bool,
    rebuild_daemon: bool,
    keep: bool,
    sample: Option<usize>,
}

fn parse_args(args: impl Iterator<Item = String>) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        sizes: vec![10_000, 100_000],
        quick: false,
        calls: 1_000,
        seed: 42,
        daemon: true,
        rebuild_daemon: false,
        keep: false,
        sample: None,
    };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> anyhow::Result<String> {
            inline.clone().or_else(|| args.next()).with_context(|| format!("{name} needs a value"))
        };
        let number = |text: &str| -> anyhow::Result<u64> {
            text.trim().replace('_', "").parse().with_context(|| format!("not a number: {text:?}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--quick" => {
                options.sizes = vec![10_000];
                options.quick = true;
            }
            "--sizes" => {
                options.sizes = value("--sizes")?
                    .split(',')
                    .filter(|part| !part.trim().is_empty())
                    .map(|part| number(part).map(|n| n as usize))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--calls" => options.calls = number(&value("--calls")?)? as usize,
            "--seed" => options.seed = number(&value("--seed")?)?,
            "--no-daemon" => options.daemon = false,
            "--keep" => options.keep = true,
            "--rebuild-daemon" => options.rebuild_daemon = true,
            "--sample" => options.sample = Some(number(&value("--sample")?)? as usize),
            "--" => {}
            other => anyhow::bail!("unknown option {other:?}\n\n{USAGE}"),
        }
    }
    options.sizes.sort_unstable();
    options.sizes.dedup();
    anyhow::ensure!(
        !options.sizes.is_empty() && options.sizes.iter().all(|&n| n > 0),
        "--sizes needs at least one positive size"
    );
    anyhow::ensure!(options.calls > 0, "--calls must be positive");
    Ok(Some(options))
}

/// `eval --data FILE [--model-dir DIR] [--hashing] [--budget N]`.
/// Embedding throughput and query latency of the local model, when it is installed
/// (`cairn model fetch`; `CAIRN_MODEL_DIR` points elsewhere).
async fn local_model_figures(
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let directory = eval::default_model_dir().unwrap_or_default();
    if !cairn_embed::model_installed(&directory) {
        report.note(format!(
            "the local model is not installed in {}; its figures are left out",
            directory.display()
        ));
        return Ok(());
    }
    eprintln!("local model…");
    let model = cairn_embed::LocalModel::load(&directory).map_err(anyhow::Error::msg)?;
    let texts: Vec<String> = (0..512).map(|_| corpus.memory(rng).content).collect();
    let started = Instant::now();
    for batch in texts.chunks(32) {
        cairn_memory::embed::Embedder::embed(&model, batch).await?;
    }
    let per_second = texts.len() as f64 / started.elapsed().as_secs_f64();
    report.info(
        "embedding throughput, all-MiniLM-L6-v2".to_owned(),
        format!("{}/s", count(per_second)),
    );
    let mut samples = Vec::new();
    for _ in 0..100 {
        let query = vec![corpus.query(rng)];
        let started = Instant::now();
        cairn_memory::embed::Embedder::embed(&model, &query).await?;
        samples.push(started.elapsed());
    }
    let lat = Latencies::new(samples);
    report.info(
        "query embedding p50 / p99, all-MiniLM-L6-v2".to_owned(),
        format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
    );
    Ok(())
}

fn eval_options(args: &[String]) -> anyhow::Result<eval::EvalOptions> {
    let mut options =
        eval::EvalOptions { data: PathBuf::new(), model_dir: None, hashing: false, budget: 500 };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--data" => options.data = PathBuf::from(value()?),
            "--model-dir" => options.model_dir = Some(PathBuf::from(value()?)),
            "--budget" => options.budget = value()?.parse().context("--budget takes a number")?,
            "--hashing" => options.hashing = true,
            other => anyhow::bail!("unknown eval option `{other}`; see --help"),
        }
    }
    anyhow::ensure!(!options.data.as_os_str().is_empty(), "eval needs --data FILE (LoCoMo JSON)");
    Ok(options)
}

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|first| first == "eval") {
        args.remove(0);
        let options = eval_options(&args)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        return runtime.block_on(eval::run(options));
    }
    let Some(options) = parse_args(args.into_iter())? else {
        print!("{USAGE}");
        return Ok(());
    };
    if let Some(samples) = options.sample {
        let corpus = Corpus::new();
        let mut rng = Rng::new(options.seed);
        for _ in 0..samples {
            let memory = corpus.memory(&mut rng);
            println!(
                "memory [{}] {:?} {:?}: {}",
                memory.scope, memory.repo, memory.tags, memory.content
            );
        }
        for _ in 0..samples {
            println!("task:  {}", corpus.task(&mut rng));
            println!("query: {}", corpus.query(&mut rng));
        }
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(run(&options))?;
    report.print();
    Ok(())
}

enum Verdict {
    Ok,
    Over,
    Info,
}

struct Row {
    figure: String,
    measured: String,
    budget: String,
    verdict: Verdict,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    fn check(&mut self, figure: String, measured: String, budget: String, ok: bool) {
        let verdict = if ok { Verdict::Ok } else { Verdict::Over };
        self.rows.push(Row { figure, measured, budget, verdict });
    }

    fn info(&mut self, figure: String, measured: String) {
        self.rows.push(Row { figure, measured, budget: "—".into(), verdict: Verdict::Info });
    }

    fn note(&mut self, note: String) {
        eprintln!("  {note}");
        self.notes.push(note);
    }

    fn print(&self) {
        let width = |pick: fn(&Row) -> &str, title: &str| {
            self.rows
                .iter()
                .map(|row| pick(row).chars().count())
                .max()
                .unwrap_or(0)
                .max(title.len())
        };
        let (figure, measured, budget) = (
            width(|row| &row.figure, "Figure"),
            width(|row| &row.measured, "Measured"),
            width(|row| &row.budget, "Budget"),
        );
        println!();
        println!("Cairn benchmark report (budgets: DESIGN.md, \"Budgets\")");
        println!();
        println!(
            "{:<figure$}  {:>measured$}  {:<budget$}  Verdict",
            "Figure", "Measured", "Budget"
        );
        println!("{}", "-".repeat(figure + measured + budget + 6 + 11));
        for row in &self.rows {
            let verdict = match row.verdict {
                Verdict::Ok => "ok",
                Verdict::Over => "OVER BUDGET",
                Verdict::Info => "",
            };
            // Pad by characters, not bytes: `µs` and `≥` are multi-byte.
            let pad = |text: &str, to: usize| " ".repeat(to.saturating_sub(text.chars().count()));
            println!(
                "{}{}  {}{}  {}{}  {verdict}",
                row.figure,
                pad(&row.figure, figure),
                pad(&row.measured, measured),
                row.measured,
                row.budget,
                pad(&row.budget, budget),
            );
        }
        let over = self.rows.iter().filter(|row| matches!(row.verdict, Verdict::Over)).count();
        println!();
        if over == 0 {
            println!("All figures within budget.");
        } else {
            println!("{over} figure(s) OVER BUDGET.");
        }
        if !self.notes.is_empty() {
            println!();
            println!("Notes:");
            for note in &self.notes {
                println!("  - {note}");
            }
        }
    }
}

async fn run(options: &Options) -> anyhow::Result<Report> {
    let mut report = Report::default();
    if cfg!(debug_assertions) {
        report.note("this is a debug build: figures are meaningless; use --release".into());
    }
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    eprintln!(
        "cairn-bench: sizes {:?}, {} calls, seed {}, {cores} cores",
        options.sizes, options.calls, options.seed
    );
    let corpus = Corpus::new();
    // The tokenizer loads in the background when an engine starts; load it now so it does
    // not compete with the first ingest.
    let before = own_rss();
    cairn_memory::count_tokens("warm up");
    if let (Some(before), Some(after)) = (before, own_rss()) {
        report.note(format!(
            "loading the o200k tokenizer grew this process by {}",
            megabytes(after.saturating_sub(before))
        ));
    }

    let largest = *options.sizes.last().expect("at least one size");
    let mut sse = None;
    for &size in &options.sizes {
        let n = count(size as f64);
        let dir = tempfile::Builder::new().prefix("cairn-bench-").tempdir()?;
        let database = dir.path().join("cairn.db");
        let mut rng = Rng::new(options.seed ^ size as u64);
        {
            let store = SqliteStore::open(&database)
                .with_context(|| format!("cannot open {}", database.display()))?;
            let engine = Engine::new(Arc::new(store));

            eprintln!("[{n}] ingesting…");
            let ingest = inproc::ingest(&engine, &corpus, &mut rng, size).await?;
            report.check(
                format!("ingest, {n} memories"),
                format!("{}/s", count(ingest.per_second)),
                format!("≥ {}/s", count(budget::INGEST_PER_SECOND)),
                ingest.per_second >= budget::INGEST_PER_SECOND,
            );
            report.info(
                format!("  ingest time, {n}"),
                format!("{:.2} s", ingest.elapsed.as_secs_f64()),
            );
            report.info(
                format!("  ingest, last 10 % of batches, {n}"),
                format!("{}/s", count(ingest.last_tenth_per_second)),
            );
            let db_bytes = std::fs::metadata(&database).map_or(0, |m| m.len());
            report.info(format!("  database file, {n}"), megabytes(db_bytes));

            eprintln!("[{n}] context packs…");
            let context =
                inproc::context(&engine, &corpus, &mut rng, WARM_UP_CALLS, options.calls).await?;
            let lat = &context.latencies;
            report.check(
                format!("context p50, {n}"),
                duration(lat.p50()),
                format!("≤ {}", duration(budget::CONTEXT_P50)),
                lat.p50() <= budget::CONTEXT_P50,
            );
            report.check(
                format!("context p99, {n}"),
                duration(lat.p99()),
                format!("≤ {}", duration(budget::CONTEXT_P99)),
                lat.p99() <= budget::CONTEXT_P99,
            );
            report.info(
                format!("  context mean / max, {n}"),
                format!("{} / {}", duration(lat.mean()), duration(lat.max())),
            );
            report.info(
                format!("  context memories / tokens used, {n}"),
                format!("{:.1} / {:.0}", context.mean_memories_used, context.mean_tokens),
            );

            eprintln!("[{n}] search…");
            let search =
                inproc::search(&engine, &corpus, &mut rng, WARM_UP_CALLS, options.calls).await?;
            let lat = &search.latencies;
            report.check(
                format!("search p50, {n}"),
                duration(lat.p50()),
                format!("≤ {}", duration(budget::SEARCH_P50)),
                lat.p50() <= budget::SEARCH_P50,
            );
            report.info(format!("  search p99, {n}"), duration(lat.p99()));
            report.info(format!("  search mean hits, {n}"), format!("{:.1}", search.mean_hits));

            eprintln!("[{n}] context breakdown…");
            let parts = inproc::breakdown(&engine, &corpus, &mut rng, BREAKDOWN_CALLS).await?;
            let part = |latencies: &Latencies| {
                format!("{} / {}", duration(latencies.p50()), duration(latencies.p99()))
            };
            report.info(format!("  part: FTS query p50 / p99, {n}"), part(&parts.fts));
            report.info(format!("  part: token counting p50 / p99, {n}"), part(&parts.tokens));
            report.info(format!("  part: recall write p50 / p99, {n}"), part(&parts.recall));
            report.info(
                format!("  part: candidates / packed, {n}"),
                format!("{:.0} / {:.1}", parts.mean_candidates, parts.mean_packed),
            );
            eprintln!("[{n}] hybrid retrieval (hashing embedder: the index and fusion)…");
            let hybrid = engine.clone().with_embedder(Arc::new(HashingEmbedder::new(384)));
            let started = Instant::now();
            hybrid.embeddings_settled().await?;
            report.info(
                format!("  embed {n} memories (hashing, 384 dimensions)"),
                duration(started.elapsed()),
            );
            let context =
                inproc::context(&hybrid, &corpus, &mut rng, WARM_UP_CALLS, options.calls).await?;
            let lat = &context.latencies;
            report.info(
                format!("hybrid context p50 / p99, {n}"),
                format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
            );
            let search =
                inproc::search(&hybrid, &corpus, &mut rng, WARM_UP_CALLS, options.calls).await?;
            let lat = &search.latencies;
            report.info(
                format!("hybrid search p50 / p99, {n}"),
                format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
            );
            drop(hybrid);
            // The engine and its connections close here, before the daemon opens the file.
        }

        if size == largest && options.daemon {
            eprintln!("[{n}] daemon…");
            sse = Some(
                daemon_figures(options, &mut report, &corpus, &mut rng, dir.path(), &n).await?,
            );
        }
        if size == largest && options.keep {
            report.note(format!("kept the data directory {}", dir.keep().display()));
        }
    }
    local_model_figures(&mut report, &corpus, &mut Rng::new(options.seed)).await?;
    runtime_figures(options, &mut report, sse).await?;
    Ok(report)
}

/// The conversation runtime: appends per second in process, and the SSE delivery measured
/// on the daemon (`None` without the daemon).
async fn runtime_figures(
    options: &Options,
    report: &mut Report,
    sse: Option<anyhow::Result<Vec<runtime::Delivery>>>,
) -> anyhow::Result<()> {
    eprintln!("runtime appends…");
    let plan = if options.quick {
        runtime::AppendPlan { warm_up: 50, one: 500, conversations: 100, tasks: 16, many: 1_000 }
    } else {
        runtime::AppendPlan { warm_up: 100, one: 2_000, conversations: 100, tasks: 16, many: 5_000 }
    };
    let appends = runtime::appends(&plan).await?;
    report.info(
        format!("runtime appends, 1 conversation, sequential ({})", count(plan.one as f64)),
        format!("{}/s", count(appends.one)),
    );
    report.info(
        format!(
            "runtime appends, {} conversations, {} tasks ({})",
            plan.conversations,
            plan.tasks,
            count(plan.many as f64)
        ),
        format!("{}/s", count(appends.many)),
    );
    match sse {
        Some(Ok(deliveries)) => {
            for delivery in deliveries {
                let streams = count(delivery.streams as f64);
                let lat = &delivery.latencies;
                report.check(
                    format!("SSE delivery (append request → receipt) p99, {streams} streams"),
                    duration(lat.p99()),
                    format!("≤ {}", duration(budget::SSE_DELIVERY_P99)),
                    lat.p99() <= budget::SSE_DELIVERY_P99,
                );
                report.info(
                    format!("  SSE delivery (append request → receipt) p50, {streams} streams"),
                    duration(lat.p50()),
                );
                if let Some(rss) = delivery.rss {
                    report
                        .info(format!("  daemon RSS with {streams} open streams"), megabytes(rss));
                }
            }
            report.notes.push(format!(
                "SSE delivery: {SSE_SAMPLES} appends (`POST …/intermediate-messages`, one at a \
                 time, each to the next conversation) while one event stream per conversation is \
                 open, each on its own connection; measured from sending the append to the \
                 stream's client reading the event, so it includes the append's own handling."
            ));
        }
        Some(Err(error)) => report.note(format!("SSE delivery was not measured: {error:#}")),
        None => report.note("SSE delivery needs the daemon; --no-daemon leaves it out".into()),
    }
    Ok(())
}

async fn daemon_figures(
    options: &Options,
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
    data_dir: &std::path::Path,
    n: &str,
) -> anyhow::Result<anyhow::Result<Vec<runtime::Delivery>>> {
    let (binary, stale) = daemon::binary(options.rebuild_daemon)?;
    if let Some(stale) = stale {
        report.note(stale);
    }
    let age = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .map_or_else(String::new, |age| format!(", built {} min ago", age.as_secs() / 60));
    report.notes.push(format!("daemon binary: {}{age}", binary.display()));

    let log = data_dir.join("daemon.log");
    let mut daemon = daemon::Daemon::start(&binary, data_dir, &log).await?;
    report.check(
        format!("daemon start to healthy, {n}"),
        duration(daemon.to_healthy),
        format!("≤ {}", duration(budget::START_TO_HEALTHY)),
        daemon.to_healthy <= budget::START_TO_HEALTHY,
    );
    report.info(format!("  daemon start to listening, {n}"), duration(daemon.to_listening));
    let (rss_at_start, _) = daemon.memory()?;
    report.info(format!("  daemon RSS when healthy, {n}"), megabytes(rss_at_start));

    let http_context = http_context(daemon.address, corpus, rng).await?;
    report.info(
        format!("  HTTP context p50 / p99, {n}"),
        format!("{} / {}", duration(http_context.p50()), duration(http_context.p99())),
    );
    let (rss, _) = daemon.memory()?;
    report.check(
        format!("daemon RSS after {HTTP_CONTEXT_REQUESTS} contexts, {n}"),
        megabytes(rss),
        format!("≤ {}", megabytes(budget::DAEMON_RSS_BYTES)),
        rss <= budget::DAEMON_RSS_BYTES,
    );

    // Two alternating rounds of half the time each, so drift in the machine's load (a build
    // next door, a warming cache) weighs on both servers alike.
    let bare_server = http::BareServer::start()?;
    let (mut bare, mut cairn) = (http::Throughput::default(), http::Throughput::default());
    for _ in 0..2 {
        for (address, total) in [(bare_server.address, &mut bare), (daemon.address, &mut cairn)] {
            let round = http::throughput(
                address,
                "/api/health",
                THROUGHPUT_CONNECTIONS,
                THROUGHPUT_DURATION / 2,
            )
            .await?;
            total.add(round);
        }
    }
    drop(bare_server);
    let ratio = cairn.per_second / bare.per_second;
    report.check(
        format!("GET /api/health vs bare hyper, {n}"),
        format!("{:.1} %", ratio * 100.0),
        format!("≥ {:.0} %", budget::HEALTH_VS_BARE * 100.0),
        ratio >= budget::HEALTH_VS_BARE,
    );
    report.info(
        format!("  GET /api/health, {THROUGHPUT_CONNECTIONS} connections"),
        format!("{} req/s", count(cairn.per_second)),
    );
    report.info("  bare hyper, same client".into(), format!("{} req/s", count(bare.per_second)));
    if cairn.failures + bare.failures > 0 {
        report
            .note(format!("throughput failures: cairn {}, bare {}", cairn.failures, bare.failures));
    }
    let (rss_end, peak) = daemon.memory()?;
    report.info(
        "  daemon RSS at the end / peak".into(),
        format!("{} / {}", megabytes(rss_end), megabytes(peak)),
    );

    // Last, so the open streams weigh on none of the figures above. A failure here costs
    // only these figures (the streams are closed either way).
    let stream_counts = if options.quick { &SSE_STREAMS[..1] } else { &SSE_STREAMS[..] };
    eprintln!("[{n}] SSE delivery, {stream_counts:?} streams…");
    let sse = runtime::sse_delivery(&daemon, stream_counts, SSE_WARM_UP, SSE_SAMPLES).await;
    daemon.stop()?;
    Ok(sse)
}

/// This process's resident memory in bytes, where `/proc` tells.
fn own_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line["VmRSS:".len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// [`HTTP_CONTEXT_REQUESTS`] `POST /api/context` over one keep-alive connection.
async fn http_context(
    address: SocketAddr,
    corpus: &Corpus,
    rng: &mut Rng,
) -> anyhow::Result<Latencies> {
    let mut connection = http::Connection::open(address).await?;
    let mut samples = Vec::with_capacity(HTTP_CONTEXT_REQUESTS);
    for _ in 0..HTTP_CONTEXT_REQUESTS {
        let request = inproc::context_request(corpus, rng);
        let body = Bytes::from(serde_json::to_vec(&request)?);
        let started = Instant::now();
        let (status, answer) = connection.send(Method::POST, "/api/context", Some(body)).await?;
        samples.push(started.elapsed());
        anyhow::ensure!(
            status == StatusCode::OK,
            "POST /api/context answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    Ok(Latencies::new(samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Option<Options>> {
        parse_args(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn arguments() {
        let options = parse(&[]).unwrap().unwrap();
        assert_eq!(options.sizes, [10_000, 100_000]);
        let quick = parse(&["--quick"]).unwrap().unwrap();
        assert_eq!(quick.sizes, [10_000]);
        assert!(quick.quick && !options.quick);
        let options =
            parse(&["--sizes", "100_000,5000", "--calls=10", "--no-daemon"]).unwrap().unwrap();
        assert_eq!(options.sizes, [5_000, 100_000]);
        assert_eq!(options.calls, 10);
        assert!(!options.daemon);
        assert!(parse(&["--help"]).unwrap().is_none());
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--sizes"]).is_err());
    }
}
