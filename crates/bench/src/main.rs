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
mod daemon_figures;
mod dream;
mod dream_figures;
mod eval;
mod eval_http;
mod figures;
mod http;
mod inproc;
mod longmemeval;
mod options;
mod postgres;
mod report;
mod runtime;
mod semantic;
mod stats;
mod voice;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cairn_memory::Engine;
use cairn_memory::embed::HashingEmbedder;
use cairn_store_sqlite::SqliteStore;

use crate::corpus::{Corpus, Rng};
use crate::daemon_figures::{daemon_figures, steady_context_figures};
use crate::dream_figures::dream_figures;
use crate::figures::{
    hook_figures, local_model_figures, postgres_figures, runtime_figures, voice_figures,
};
use crate::options::{Options, USAGE, eval_options, parse_args};
use crate::report::{Growth, Report};
use crate::stats::{Latencies, count, duration, megabytes};

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
    /// Server VAD: the caller's last speech sample sent → the first reply audio, p50 (issue
    /// 32; the silence wait that ends the turn is part of it).
    pub const VOICE_SPEECH_END_TO_AUDIO: Duration = Duration::from_millis(500);
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
    if options.only_voice {
        voice_figures(options, &mut report).await?;
        return Ok(report);
    }
    if options.only_postgres {
        postgres_figures(options, &mut report, &corpus).await;
        return Ok(report);
    }
    if options.only_semantic || options.daemon {
        let (binary, _) = daemon::binary(options.rebuild_daemon)?;
        semantic::figures(&mut report, &binary, &corpus, options).await;
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
    let mut growth = Growth::default();
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
            growth.add(size, "context pack p50 / p99", [lat.p50(), lat.p99()]);
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
            growth.add(size, "search p50 / p99", [lat.p50(), lat.p99()]);
            report.check(
                format!("search p50, {n}"),
                duration(lat.p50()),
                format!("≤ {}", duration(budget::SEARCH_P50)),
                lat.p50() <= budget::SEARCH_P50,
            );
            report.info(format!("  search p99, {n}"), duration(lat.p99()));
            report.info(format!("  search mean hits, {n}"), format!("{:.1}", search.mean_hits));

            eprintln!("[{n}] listing…");
            let listing = inproc::listing(&engine, &corpus, &mut rng, options.calls).await?;
            growth.add(size, "listing by label p50 / p99", [listing.p50(), listing.p99()]);
            report.info(
                format!("listing by label (50 and the total) p50 / p99, {n}"),
                format!("{} / {}", duration(listing.p50()), duration(listing.p99())),
            );

            eprintln!("[{n}] context breakdown…");
            let parts = inproc::breakdown(&engine, &corpus, &mut rng, BREAKDOWN_CALLS).await?;
            let part = |latencies: &Latencies| {
                format!("{} / {}", duration(latencies.p50()), duration(latencies.p99()))
            };
            growth.add(size, "full-text query p50 / p99", [parts.fts.p50(), parts.fts.p99()]);
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
            growth.add(size, "hybrid context pack p50 / p99", [lat.p50(), lat.p99()]);
            report.info(
                format!("hybrid context p50 / p99, {n}"),
                format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
            );
            let search =
                inproc::search(&hybrid, &corpus, &mut rng, WARM_UP_CALLS, options.calls).await?;
            let lat = &search.latencies;
            growth.add(size, "hybrid search p50 / p99", [lat.p50(), lat.p99()]);
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
    growth.report(&mut report);
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

/// This process's resident memory in bytes, where `/proc` tells.
fn own_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line["VmRSS:".len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}
