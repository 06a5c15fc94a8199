//! The report's figures of the daemon over HTTP: start, RSS, context packs, health, creates.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cairn_memory::Engine;
use cairn_store_sqlite::SqliteStore;
use hyper::{Method, StatusCode};

use crate::corpus::{Corpus, Rng};
use crate::options::Options;
use crate::report::Report;
use crate::stats::{Latencies, count, duration, megabytes};
use crate::{
    BATCH_CONNECTIONS, BATCH_SIZE, CREATE_CONNECTIONS, CREATE_DURATION, HTTP_CONTEXT_REQUESTS,
    SSE_HOLD, SSE_KEYS, SSE_SAMPLES, SSE_STREAMS, SSE_WARM_UP, STEADY_CONTEXT_REQUESTS,
    STEADY_CONTEXT_SIZE, THROUGHPUT_CONNECTIONS, THROUGHPUT_ROUND, THROUGHPUT_ROUNDS,
    WRK_CONNECTIONS, release,
};
use crate::{budget, daemon, http, inproc, runtime};

/// A steady context-pack load's p99, with its p50, its slowest and how many were over the
/// budget.
pub(crate) fn steady_summary(steady: &Latencies) -> String {
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
pub(crate) async fn steady_context_figures(
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

pub(crate) async fn daemon_figures(
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
    // On a large store the full-text index is still being built (FTS5 answers meanwhile):
    // the steady state is measured once it is ready.
    let waited = daemon.fulltext_index_ready(Duration::from_secs(300)).await?;
    report.info(
        format!("  full-text index ready, after the first {HTTP_CONTEXT_REQUESTS}, {n}"),
        duration(waited),
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
pub(crate) async fn write_figures(
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
pub(crate) fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(", "))
}

/// `requests` `POST /api/context` over one keep-alive connection, one after another.
pub(crate) async fn http_context(
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
pub(crate) fn time_of_day(at: std::time::SystemTime) -> String {
    let since_epoch = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let millis = since_epoch.as_millis() % 86_400_000;
    let (hours, minutes) = (millis / 3_600_000, millis / 60_000 % 60);
    format!("{hours:02}:{minutes:02}:{:02}.{:03}", millis / 1000 % 60, millis % 1000)
}
