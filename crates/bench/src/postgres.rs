//! PostgreSQL (issue 15): release `cairn serve --database-url` daemons on one database,
//! measured over HTTP. Appends per second to one conversation and across many with 1, 2 and
//! 3 daemons (the offsets read back and checked after each run); SSE delivery to a stream on
//! one daemon of events appended through another, next to delivery within one daemon; and
//! context packs and search on 100,000 memories, on one daemon and spread over three.
//!
//! The server is a throwaway cluster (`initdb` into a temporary directory, PostgreSQL's
//! durable defaults: `fsync`, `synchronous_commit` and `full_page_writes` on), or an
//! operator's (`--database-url`), where the bench works in schemas `cairn_bench_*` of its own,
//! dropped first.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use cairn_memory::Engine;
use cairn_store_postgres::{PgOptions, PgStore};
use cairn_test_support::postgres::TestCluster;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::Report;
use crate::corpus::{Corpus, Rng};
use crate::daemon::Daemon;
use crate::http::Connection;
use crate::runtime::{Received, open_stream};
use crate::stats::{Latencies, count, duration, seconds};
use crate::{budget, inproc};

const BASE: &str = "/api/runtime/conversations";
/// How long one answer or one streamed event may take before the measure gives up.
const PATIENCE: Duration = Duration::from_secs(30);
/// Unmeasured time at the start of every append run, with every sender already sending.
const APPEND_WARM_UP: Duration = Duration::from_millis(500);

/// Where the server is.
#[derive(Debug)]
pub enum Target {
    /// A throwaway cluster this bench starts (the default).
    Started,
    /// An operator's server (`--database-url URL`).
    Url(String),
}

/// What the PostgreSQL part measures, and how much.
pub struct Plan {
    /// The most daemons; appends are measured with 1, 2, … of them.
    pub daemons: usize,
    /// Concurrent senders (one keep-alive connection each), spread round robin.
    pub connections: usize,
    /// Conversations of the "many" append runs.
    pub conversations: usize,
    /// Measured time of one append run.
    pub duration: Duration,
    pub sse_warm_up: usize,
    /// Measured appends for each of same-daemon and cross-daemon delivery.
    pub sse_samples: usize,
    pub memories: usize,
    /// Warm-up calls before each context and search measure.
    pub warm_up: usize,
    /// Measured context and search calls of each kind.
    pub calls: usize,
    pub seed: u64,
}

/// A database the bench uses: a name for the report, its URL, and the
/// `synchronous_commit` its sessions get.
struct Database {
    url: String,
    synchronous_commit: String,
}

/// Runs the whole PostgreSQL part, adding its rows and notes to `report`. An error stops
/// this part only; the caller notes it.
pub async fn figures(
    target: &Target,
    plan: &Plan,
    binary: &Path,
    corpus: &Corpus,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (cluster, psql, databases) = match target {
        Target::Started => {
            if let Err(why) = cairn_test_support::postgres::server_binaries() {
                report.note(format!("PostgreSQL not measured: {why}"));
                return Ok(());
            }
            eprintln!("postgres: starting a throwaway cluster (initdb)…");
            let cluster = tokio::task::spawn_blocking(|| {
                std::panic::catch_unwind(TestCluster::start_durable).map_err(|panic| {
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "the cluster did not start".to_owned())
                })
            })
            .await?;
            let cluster = match cluster {
                Ok(cluster) => cluster,
                Err(why) => {
                    report.note(format!("PostgreSQL not measured: {why}"));
                    return Ok(());
                }
            };
            let psql = cluster.bin_dir().join("psql");
            let durable = cluster.create_database();
            // The same server, a database whose sessions commit without waiting for the
            // flush: what an operator gets with `synchronous_commit = off`.
            let relaxed = cluster.create_database();
            let name = relaxed.rsplit('/').next().unwrap_or_default().to_owned();
            cluster
                .psql("postgres", &format!("ALTER DATABASE {name} SET synchronous_commit = off"));
            let databases = vec![
                Database { url: durable, synchronous_commit: "on".into() },
                Database { url: relaxed, synchronous_commit: "off".into() },
            ];
            (Some(cluster), psql, databases)
        }
        Target::Url(url) => {
            let psql = std::env::var_os("CAIRN_PG_BIN")
                .map_or_else(|| PathBuf::from("psql"), |bin| PathBuf::from(bin).join("psql"));
            let setting = run_psql(&psql, url, "SHOW synchronous_commit")
                .context("psql cannot reach --database-url (the bench runs its SQL with psql)")?;
            (None, psql, vec![Database { url: url.clone(), synchronous_commit: setting }])
        }
    };
    let settings = run_psql(
        &psql,
        &databases[0].url,
        "SELECT string_agg(name || ' = ' || current_setting(name), ', ' ORDER BY name) \
         FROM pg_settings WHERE name IN ('server_version', 'fsync', 'synchronous_commit', \
         'full_page_writes', 'shared_buffers', 'max_connections', 'work_mem', \
         'effective_cache_size', 'wal_level', 'random_page_cost', 'jit')",
    )?;
    report.notes.push(format!(
        "PostgreSQL: {} ({settings}{}).",
        if cluster.is_some() {
            "a throwaway cluster the bench started (initdb into a temporary directory, on this \
             machine's disk, run as the `postgres` user)"
        } else {
            "the server of --database-url"
        },
        if databases.len() > 1 {
            "; the second database of the append runs has `ALTER DATABASE … SET \
             synchronous_commit = off`"
        } else {
            ""
        }
    ));

    let mut verified = Vec::new();
    for (index, database) in databases.iter().enumerate() {
        let schema = "cairn_bench_runtime";
        drop_schema(&psql, &database.url, schema)?;
        let mut daemons = Vec::new();
        for n in 1..=plan.daemons {
            while daemons.len() < n {
                daemons.push(start_daemon(binary, &database.url, schema).await?);
            }
            for many in [false, true] {
                let conversations = if many { plan.conversations } else { 1 };
                eprintln!(
                    "postgres: appends, {conversations} conversation(s), {n} daemon(s), \
                     synchronous_commit {}…",
                    database.synchronous_commit
                );
                let run = appends(&daemons, conversations, plan).await?;
                report.info(
                    format!(
                        "PostgreSQL appends, {} conversation{}, {n} daemon{}, sync commit {}",
                        conversations,
                        if many { "s" } else { "" },
                        if n > 1 { "s" } else { "" },
                        database.synchronous_commit
                    ),
                    format!("{}/s", count(run.per_second)),
                );
                verified.push((
                    format!(
                        "{conversations} conv., {n} daemon(s), sync commit {}",
                        database.synchronous_commit
                    ),
                    run,
                ));
            }
        }
        if index == 0 {
            eprintln!("postgres: SSE delivery, stream on daemon A…");
            let sse = sse_delivery(&daemons[0], &daemons[1 % daemons.len()], plan).await?;
            for (name, lat) in [("same daemon", &sse.same), ("other daemon", &sse.cross)] {
                let figure = format!(
                    "PostgreSQL SSE delivery (append request → receipt) p99, {name}, {} daemons",
                    daemons.len()
                );
                report.check(
                    figure,
                    duration(lat.p99()),
                    format!("≤ {}", duration(budget::SSE_DELIVERY_P99)),
                    lat.p99() <= budget::SSE_DELIVERY_P99,
                );
                report.info(format!("  p50, {name}"), duration(lat.p50()));
            }
            report.info(
                "  other daemon: acknowledged → receipt p50 / p99".into(),
                format!("{} / {}", duration(sse.cross_ack.p50()), duration(sse.cross_ack.p99())),
            );
        }
        for mut daemon in daemons {
            daemon.daemon.stop()?;
        }
    }
    let failed: Vec<String> = verified
        .iter()
        .filter_map(|(name, run)| run.verified.as_ref().err().map(|why| format!("{name}: {why}")))
        .collect();
    let (appended, failures) = verified.iter().fold((0, 0), |(appended, failures), (_, run)| {
        (appended + run.acknowledged, failures + run.failures)
    });
    if failed.is_empty() {
        report.notes.push(format!(
            "PostgreSQL appends: after each of the {} runs every conversation's events were read \
             back (`GET …/events`, every page): offsets 0..N−1, N = the events before the run \
             plus the appends acknowledged with 201 ({} in all; {} appends answered otherwise).",
            verified.len(),
            count(appended as f64),
            count(failures as f64)
        ));
    } else {
        report.note(format!("PostgreSQL appends: the read-back FAILED: {}", failed.join("; ")));
    }
    report.notes.push(format!(
        "PostgreSQL appends: `POST {BASE}/{{id}}/custom-events` (`page.viewed`, one event per \
         request) from {} concurrent senders, each on its own keep-alive connection, sender i \
         on daemon i mod n; \"many\" spreads each sender's appends over {} conversations in \
         turn. Measured over {} after {} with every sender sending; the daemons are started \
         once per database and added one at a time (`--embedder none`, default pools), the \
         client runs in the bench's process on the same 2 cores as the daemons and the server.",
        plan.connections,
        plan.conversations,
        seconds(plan.duration),
        seconds(APPEND_WARM_UP),
    ));
    report.notes.push(format!(
        "PostgreSQL SSE delivery: one event stream on daemon A; {} appends (custom events, one \
         at a time after {} unmeasured) alternately through A itself and through daemon B, each \
         on a keep-alive connection of its own; measured from sending the append request to \
         the stream's client reading the event. Across daemons the event reaches A by the \
         database's NOTIFY (A then reads it from the table); \"acknowledged → receipt\" starts \
         at B's 201 instead.",
        2 * plan.sse_samples,
        2 * plan.sse_warm_up,
    ));

    let measured = memory_figures(&databases[0].url, &psql, plan, binary, corpus, report).await;
    if let Some(cluster) = &cluster {
        // What the server saw: deadlocks and other errors its sessions met.
        let log = cluster.log();
        let deadlocks = log.matches("ERROR:  deadlock detected").count();
        let errors = log.matches("ERROR:  ").count();
        report.note(format!(
            "PostgreSQL's log over the whole part: {deadlocks} deadlocks detected, {errors} \
             statements failed in all"
        ));
    }
    drop(cluster);
    measured
}

/// Context packs and search on `plan.memories` memories: loaded in process through the
/// engine on a `PgStore`, `ANALYZE`d, then measured in process and over HTTP on one daemon
/// and spread over [`Plan::daemons`].
async fn memory_figures(
    url: &str,
    psql: &Path,
    plan: &Plan,
    binary: &Path,
    corpus: &Corpus,
    report: &mut Report,
) -> anyhow::Result<()> {
    let schema = "cairn_bench_memories";
    let n = count(plan.memories as f64);
    drop_schema(psql, url, schema)?;
    // Listening, as a daemon's store does: its full-text index is kept only then.
    let options = PgOptions {
        schema: schema.to_owned(),
        application_name: "cairn-bench".to_owned(),
        ..PgOptions::new(url)
    };
    let mut rng = Rng::new(plan.seed ^ 0x9057 ^ plan.memories as u64);
    {
        let engine = Engine::new(Arc::new(PgStore::open(options).await?));
        eprintln!("postgres: [{n}] ingesting through the engine…");
        let ingest = inproc::ingest(&engine, corpus, &mut rng, plan.memories).await?;
        report.info(
            format!("PostgreSQL ingest (engine in process, batches of {}), {n}", inproc::BATCH),
            format!("{}/s ({})", count(ingest.per_second), seconds(ingest.elapsed)),
        );
        let started = Instant::now();
        run_psql(psql, url, &format!("SET search_path TO {schema}; ANALYZE"))?;
        report.info(format!("  ANALYZE after the load, {n}"), seconds(started.elapsed()));
        let size = run_psql(
            psql,
            url,
            &format!(
                "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_class c \
                 JOIN pg_namespace s ON s.oid = c.relnamespace \
                 WHERE s.nspname = '{schema}' AND c.relkind = 'r'"
            ),
        )?;
        report.info(format!("  tables and indexes, {n}"), size);

        // The steady state, as on SQLite: once the engine's full-text index is built (the
        // SQL plan answers meanwhile, slower).
        let waited = fulltext_ready(|| engine.fulltext_index() == "ready").await?;
        report.info(format!("  full-text index ready in process, {n}"), duration(waited));
        eprintln!("postgres: [{n}] context and search in process…");
        let context = inproc::context(&engine, corpus, &mut rng, plan.warm_up, plan.calls).await?;
        let lat = &context.latencies;
        report.info(
            format!("PostgreSQL context p50 / p99, in process, {n}"),
            format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
        );
        let search = inproc::search(&engine, corpus, &mut rng, plan.warm_up, plan.calls).await?;
        let lat = &search.latencies;
        report.info(
            format!("PostgreSQL search p50 / p99, in process, {n}"),
            format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
        );
        report.info(format!("  search mean hits, {n}"), format!("{:.1}", search.mean_hits));
    }

    let mut daemons = Vec::new();
    for _ in 0..plan.daemons {
        daemons.push(start_daemon(binary, url, schema).await?);
    }
    for (number, daemon) in daemons.iter().enumerate() {
        let waited = daemon.fulltext_index_ready(Duration::from_secs(300)).await?;
        report.info(
            format!("  full-text index ready, daemon {} of {}, {n}", number + 1, daemons.len()),
            duration(waited),
        );
    }
    let measured = http_memory_figures(&daemons, plan, corpus, &mut rng, report).await;
    let measured = measured.map_err(|error| {
        let logs: Vec<String> = daemons
            .iter()
            .enumerate()
            .map(|(index, daemon)| format!("daemon {}'s log:\n{}", index + 1, daemon.log_tail()))
            .collect();
        error.context(logs.join("\n"))
    });
    for mut daemon in daemons {
        daemon.daemon.stop()?;
    }
    measured?;
    report.notes.push(format!(
        "PostgreSQL memories: {n} of the synthetic corpus loaded in process through the engine \
         on a `PgStore` (`create_memories`, batches of {}: one multi-row insert of the memories \
         and their postings per batch), then `ANALYZE` (as an operator would after a bulk \
         load; autovacuum would get there later), then measured in process ({} calls after {} \
         warm-up) and over HTTP on `cairn serve --database-url … --embedder none` (full text, \
         as the SQLite figures): `POST /api/context` (1,000-token budget, 80 % with a \
         repository) and `GET /api/search?q=…`, one call at a time on one keep-alive \
         connection; then {} clients at once (one connection each, each its own share of the \
         calls) on one daemon, and on {} daemons one client each.",
        inproc::BATCH,
        plan.calls,
        plan.warm_up,
        plan.daemons,
        plan.daemons,
    ));
    Ok(())
}

/// Context and search over HTTP on `daemons`, one client and spread.
async fn http_memory_figures(
    daemons: &[PgDaemon],
    plan: &Plan,
    corpus: &Corpus,
    rng: &mut Rng,
    report: &mut Report,
) -> anyhow::Result<()> {
    let n = count(plan.memories as f64);
    let addresses: Vec<SocketAddr> = daemons.iter().map(|daemon| daemon.address).collect();
    for kind in [Kind::Context, Kind::Search] {
        eprintln!("postgres: [{n}] {} over HTTP…", kind.name());
        let requests = |rng: &mut Rng, calls: usize| -> anyhow::Result<Vec<Call>> {
            (0..calls).map(|_| kind.request(corpus, rng)).collect()
        };
        calls(&[addresses[0]], requests(rng, plan.warm_up)?, 1).await?;
        let one = calls(&[addresses[0]], requests(rng, plan.calls)?, 1).await?;
        if !one.failures.is_empty() {
            report.note(format!(
                "PostgreSQL HTTP {}, 1 daemon, 1 client: FAILED calls{}",
                kind.name(),
                one.failed(plan.calls)
            ));
        }
        let lat = &one.latencies;
        let (p50_budget, p99_budget) = kind.budgets();
        report.check(
            format!("PostgreSQL HTTP {} p50, 1 daemon, 1 client, {n}", kind.name()),
            duration(lat.p50()),
            format!("≤ {}", duration(p50_budget)),
            lat.p50() <= p50_budget,
        );
        match p99_budget {
            Some(p99_budget) => report.check(
                format!("PostgreSQL HTTP {} p99, 1 daemon, 1 client, {n}", kind.name()),
                duration(lat.p99()),
                format!("≤ {}", duration(p99_budget)),
                lat.p99() <= p99_budget,
            ),
            None => report.info(
                format!("  PostgreSQL HTTP {} p99, 1 daemon, 1 client, {n}", kind.name()),
                duration(lat.p99()),
            ),
        }
        let clients = addresses.len();
        for (daemons_used, name) in
            [(&addresses[..1], "1 daemon"), (&addresses[..], &*format!("{clients} daemons"))]
        {
            calls(daemons_used, requests(rng, plan.warm_up)?, clients).await?;
            let spread = calls(daemons_used, requests(rng, plan.calls)?, clients).await?;
            let lat = &spread.latencies;
            report.info(
                format!("  {} p50 / p99, {clients} clients on {name}, {n}", kind.name()),
                format!(
                    "{} / {} ({}/s{})",
                    duration(lat.p50()),
                    duration(lat.p99()),
                    count(spread.per_second),
                    spread.failed(plan.calls)
                ),
            );
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Kind {
    Context,
    Search,
}

/// One HTTP call: method, path and body.
type Call = (Method, String, Option<Bytes>);

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Context => "context",
            Kind::Search => "search",
        }
    }

    fn budgets(self) -> (Duration, Option<Duration>) {
        match self {
            Kind::Context => (budget::CONTEXT_P50, Some(budget::CONTEXT_P99)),
            Kind::Search => (budget::SEARCH_P50, None),
        }
    }

    fn request(self, corpus: &Corpus, rng: &mut Rng) -> anyhow::Result<Call> {
        Ok(match self {
            Kind::Context => {
                let request = inproc::context_request(corpus, rng);
                let body = Bytes::from(serde_json::to_vec(&request)?);
                (Method::POST, "/api/context".to_owned(), Some(body))
            }
            Kind::Search => {
                let query = percent_encode(&corpus.query(rng));
                (Method::GET, format!("/api/search?q={query}"), None)
            }
        })
    }
}

struct Calls {
    /// Of the calls answered 200.
    latencies: Latencies,
    /// All calls, answered or not.
    per_second: f64,
    /// Calls answered otherwise, by status.
    failures: BTreeMap<u16, u64>,
}

impl Calls {
    /// `, 3 × 500 of 1,000` when some calls failed.
    fn failed(&self, of: usize) -> String {
        if self.failures.is_empty() {
            return String::new();
        }
        let statuses: Vec<String> = self
            .failures
            .iter()
            .map(|(status, times)| format!("{} × {status}", count(*times as f64)))
            .collect();
        format!(", {} of {}", statuses.join(", "), count(of as f64))
    }
}

/// `requests` split among `clients` concurrent clients, client i on `addresses[i mod n]`,
/// each one call at a time on its own keep-alive connection; every answer must be 200.
async fn calls(
    addresses: &[SocketAddr],
    requests: Vec<Call>,
    clients: usize,
) -> anyhow::Result<Calls> {
    let total = requests.len();
    let mut shares: Vec<Vec<Call>> = (0..clients).map(|_| Vec::new()).collect();
    for (index, request) in requests.into_iter().enumerate() {
        shares[index % clients].push(request);
    }
    let mut connections = Vec::with_capacity(clients);
    for client in 0..clients {
        connections.push(Connection::open(addresses[client % addresses.len()]).await?);
    }
    let started = Instant::now();
    let tasks: Vec<_> = connections
        .into_iter()
        .zip(shares)
        .map(|(mut connection, share)| {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(share.len());
                let mut failures = BTreeMap::new();
                for (method, path, body) in share {
                    let sent = Instant::now();
                    let (status, _) = connection.send(method, &path, body).await?;
                    if status == StatusCode::OK {
                        samples.push(sent.elapsed());
                    } else {
                        *failures.entry(status.as_u16()).or_insert(0u64) += 1;
                    }
                }
                anyhow::Ok((samples, failures))
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(total);
    let mut failures = BTreeMap::new();
    for task in tasks {
        let (answered, failed) = task.await??;
        samples.extend(answered);
        for (status, times) in failed {
            *failures.entry(status).or_insert(0) += times;
        }
    }
    let per_second = total as f64 / started.elapsed().as_secs_f64();
    anyhow::ensure!(!samples.is_empty(), "no call answered 200: {failures:?}");
    Ok(Calls { latencies: Latencies::new(samples), per_second, failures })
}

/// One append run.
struct AppendRun {
    per_second: f64,
    /// Appends answered 201 over the whole run, warm-up included.
    acknowledged: u64,
    /// Appends answered otherwise.
    failures: u64,
    /// The read-back: every conversation's offsets 0..N−1 with N as expected, or why not.
    verified: Result<(), String>,
}

/// Creates `conversations` conversations, then sends custom events to them from
/// `plan.connections` senders spread over `daemons` for [`APPEND_WARM_UP`] and then
/// `plan.duration` (measured), and reads every conversation back.
async fn appends(
    daemons: &[PgDaemon],
    conversations: usize,
    plan: &Plan,
) -> anyhow::Result<AppendRun> {
    let mut control = Connection::open(daemons[0].address).await?;
    let mut ids = Vec::with_capacity(conversations);
    let mut before = Vec::with_capacity(conversations);
    for _ in 0..conversations {
        let (status, answer) =
            control.send(Method::POST, BASE, Some(Bytes::from_static(b"{}"))).await?;
        anyhow::ensure!(status == StatusCode::CREATED, "creating a conversation: {status}");
        let answer: Value = serde_json::from_slice(&answer)?;
        let id = answer["conversation"]["id"].as_str().context("no conversation id")?.to_owned();
        before.push(events(&mut control, &id).await?.len() as u64);
        ids.push(id);
    }
    let ids = Arc::new(ids);
    let acknowledged: Arc<Vec<AtomicU64>> =
        Arc::new((0..conversations).map(|_| AtomicU64::new(0)).collect());
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let running = Arc::new(AtomicBool::new(true));
    let mut senders = Vec::with_capacity(plan.connections);
    for sender in 0..plan.connections {
        let mut connection = Connection::open(daemons[sender % daemons.len()].address).await?;
        let (ids, acknowledged, ok, failed, running) =
            (ids.clone(), acknowledged.clone(), ok.clone(), failed.clone(), running.clone());
        senders.push(tokio::spawn(async move {
            let mut n = 0usize;
            while running.load(Ordering::Relaxed) {
                let conversation = (sender + n) % ids.len();
                let body = json!({
                    "eventName": "page.viewed",
                    "payload": {"url": format!("/page/{sender}/{n}")},
                });
                n += 1;
                let path = format!("{BASE}/{}/custom-events", ids[conversation]);
                let sent = connection.send(Method::POST, &path, Some(body.to_string().into()));
                match tokio::time::timeout(PATIENCE, sent).await {
                    Ok(Ok((StatusCode::CREATED, _))) => {
                        acknowledged[conversation].fetch_add(1, Ordering::Relaxed);
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(_)) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    // A broken connection or no answer: this sender stops.
                    Ok(Err(_)) | Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(APPEND_WARM_UP).await;
    let (from, started) = (ok.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(plan.duration).await;
    let (to, elapsed) = (ok.load(Ordering::Relaxed), started.elapsed());
    running.store(false, Ordering::Relaxed);
    for sender in senders {
        sender.await?;
    }
    // Read back through the last daemon (the appends went through all of them).
    let mut reader = Connection::open(daemons[daemons.len() - 1].address).await?;
    let mut verified = Ok(());
    for (index, id) in ids.iter().enumerate() {
        let offsets: Vec<u64> = events(&mut reader, id)
            .await?
            .iter()
            .map(|event| event["offset"].as_u64().unwrap_or(u64::MAX))
            .collect();
        let expected = before[index] + acknowledged[index].load(Ordering::Relaxed);
        let gapless = offsets.iter().enumerate().all(|(at, offset)| *offset == at as u64);
        if !gapless || offsets.len() as u64 != expected {
            verified = Err(format!(
                "conversation {id}: {} events (expected {expected}), offsets {}",
                offsets.len(),
                if gapless { "0..N−1" } else { "NOT gapless" }
            ));
            break;
        }
    }
    Ok(AppendRun {
        per_second: (to - from) as f64 / elapsed.as_secs_f64(),
        acknowledged: acknowledged.iter().map(|n| n.load(Ordering::Relaxed)).sum(),
        failures: failed.load(Ordering::Relaxed),
        verified,
    })
}

/// Every event of a conversation, following the pages.
async fn events(connection: &mut Connection, id: &str) -> anyhow::Result<Vec<Value>> {
    let mut all = Vec::new();
    let mut path = format!("{BASE}/{id}/events");
    loop {
        let (status, answer) = connection.get(&path).await?;
        anyhow::ensure!(status == StatusCode::OK, "GET {path} answered {status}");
        let mut page: Value = serde_json::from_slice(&answer)?;
        if let Some(events) = page["events"].as_array_mut() {
            all.append(events);
        }
        match page["nextAfterOffset"].as_u64() {
            Some(next) => path = format!("{BASE}/{id}/events?afterOffset={next}"),
            None => return Ok(all),
        }
    }
}

struct Sse {
    /// Appended through the stream's own daemon: request → receipt.
    same: Latencies,
    /// Appended through another daemon: request → receipt.
    cross: Latencies,
    /// Appended through another daemon: its acknowledgement → receipt.
    cross_ack: Latencies,
}

/// A stream on `a`; appends alternately through `a` and `b`.
async fn sse_delivery(a: &Daemon, b: &Daemon, plan: &Plan) -> anyhow::Result<Sse> {
    let mut through_a = Connection::open(a.address).await?;
    let mut through_b = Connection::open(b.address).await?;
    let (status, answer) =
        through_a.send(Method::POST, BASE, Some(Bytes::from_static(b"{}"))).await?;
    anyhow::ensure!(status == StatusCode::CREATED, "creating a conversation: {status}");
    let answer: Value = serde_json::from_slice(&answer)?;
    let id = answer["conversation"]["id"].as_str().context("no conversation id")?.to_owned();
    let last = events(&mut through_a, &id).await?.len().saturating_sub(1);
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let path = format!("{BASE}/{id}/events/stream?afterOffset={last}");
    let tasks = open_stream(a.address, &path, None, 0, sender)
        .await?
        .context("the daemon refused the event stream")?;
    let mut next = async || match tokio::time::timeout(PATIENCE, receiver.recv()).await {
        Ok(Some(received)) => Ok(received),
        Ok(None) => anyhow::bail!("the event stream ended"),
        Err(_) => anyhow::bail!("the event stream said nothing for {} s", PATIENCE.as_secs()),
    };
    loop {
        if let Received::Connected = next().await? {
            break;
        }
    }
    let (mut same, mut cross, mut cross_ack) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 0..2 * (plan.sse_warm_up + plan.sse_samples) {
        let other = sample % 2 == 1;
        let connection = if other { &mut through_b } else { &mut through_a };
        let body =
            json!({"eventName": "page.viewed", "payload": {"url": format!("/sse/{sample}")}});
        let path = format!("{BASE}/{id}/custom-events");
        let sent = Instant::now();
        let (status, answer) =
            connection.send(Method::POST, &path, Some(body.to_string().into())).await?;
        let acknowledged = Instant::now();
        anyhow::ensure!(status == StatusCode::CREATED, "POST {path} answered {status}");
        let answer: Value = serde_json::from_slice(&answer)?;
        let offset = answer["event"]["offset"].as_u64().context("the append has no offset")?;
        let at = loop {
            match next().await? {
                Received::Event { offset: got, at, .. } if got >= offset => break at,
                Received::Ended(_) => anyhow::bail!("the event stream ended"),
                _ => {}
            }
        };
        if sample < 2 * plan.sse_warm_up {
            continue;
        }
        if other {
            cross.push(at.saturating_duration_since(sent));
            cross_ack.push(at.saturating_duration_since(acknowledged));
        } else {
            same.push(at.saturating_duration_since(sent));
        }
    }
    for task in tasks {
        task.abort();
    }
    Ok(Sse {
        same: Latencies::new(same),
        cross: Latencies::new(cross),
        cross_ack: Latencies::new(cross_ack),
    })
}

/// Waits (up to five minutes) until `ready` says the full-text index is built; how long.
pub(crate) async fn fulltext_ready(ready: impl Fn() -> bool) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while !ready() {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "the full-text index was not ready after five minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(started.elapsed())
}

/// `cairn serve --database-url <url> --database-schema <schema> --embedder none` in a
/// temporary data directory of its own (it holds only the log).
async fn start_daemon(binary: &Path, url: &str, schema: &str) -> anyhow::Result<PgDaemon> {
    let dir = tempfile::Builder::new().prefix("cairn-bench-pg-").tempdir()?;
    let log = dir.path().join("daemon.log");
    let args = ["--database-url", url, "--database-schema", schema, "--embedder", "none"];
    let daemon = Daemon::start_with(binary, dir.path(), &log, &args).await?;
    Ok(PgDaemon { daemon, _dir: dir })
}

/// A daemon and its data directory, removed after it.
struct PgDaemon {
    daemon: Daemon,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for PgDaemon {
    type Target = Daemon;

    fn deref(&self) -> &Daemon {
        &self.daemon
    }
}

fn drop_schema(psql: &Path, url: &str, schema: &str) -> anyhow::Result<()> {
    run_psql(psql, url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))?;
    Ok(())
}

/// Runs `sql` with psql on `url`: its unaligned, tuples-only output.
fn run_psql(psql: &Path, url: &str, sql: &str) -> anyhow::Result<String> {
    let output = Command::new(psql)
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .output()
        .with_context(|| format!("cannot run {}", psql.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "psql `{sql}` failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `q` for a query string: unreserved characters as they are, the rest `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(percent_encode("pnpm lockfile"), "pnpm%20lockfile");
        assert_eq!(percent_encode("a&b=c/é"), "a%26b%3Dc%2F%C3%A9");
    }
}
