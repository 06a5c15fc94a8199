//! The dream cycle at scale, and reads while the daemon is busy: a corpus in which many
//! memories contradict each other, the cycle's time and the daemon's peak memory over HTTP,
//! and the latency of `GET /api/memories/{id}` and `GET /api/memories?limit=20` with nothing
//! else running, during a dream cycle and during a connector sync.
//!
//! A cycle that takes too long, or makes the daemon too large, is stopped (the daemon is killed
//! and started again) and reported as such, so the bench never hangs on it nor takes the
//! machine's memory.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use cairn_memory::Engine;
use cairn_store_sqlite::SqliteStore;
use cairn_types::{JsonObject, NewMemory, Scope};
use hyper::{Method, StatusCode};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::corpus::{Corpus, REPOS, Rng};
use crate::daemon::Daemon;
use crate::http::Connection;
use crate::inproc::BATCH;
use crate::stats::Latencies;

/// Of every hundred memories seeded: `CONTRADICTING` say "Use pnpm in this repo." or "Use npm
/// in this repo." (half each, in one of [`CONTRADICTING_REPOS`] repositories),
/// `DUPLICATES` repeat an earlier ordinary memory with two words added, the rest are the
/// ordinary corpus.
const CONTRADICTING: usize = 50;
const DUPLICATES: usize = 5;
const CONTRADICTING_REPOS: usize = 4;
/// The pause between two reads of the read loop: a client polling, not a load generator.
const READ_PAUSE: Duration = Duration::from_millis(2);

/// What [`measure`] does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Corpus sizes, ascending; the connector sync runs on the largest.
    pub sizes: Vec<usize>,
    /// How long a timed dream cycle or sync may run before it is stopped.
    pub timeout: Duration,
    /// The resident memory at which a running cycle is stopped.
    pub memory_cap: u64,
    /// How long the reads run with nothing else running.
    pub idle_reads: Duration,
    /// How long the reads run alongside a dream cycle at most; a cycle still running then is
    /// stopped.
    pub busy_reads: Duration,
    /// Markdown files in the folder the connector syncs (three sections each).
    pub sync_files: usize,
}

/// What a seeded corpus holds.
pub struct Seeded {
    /// Ids of memories to read, a sample of all.
    pub ids: Vec<String>,
    pub contradicting: usize,
    pub duplicates: usize,
}

/// Seeds `database` with `size` memories in process, in batches of [`BATCH`].
pub async fn seed(
    database: &Path,
    corpus: &Corpus,
    rng: &mut Rng,
    size: usize,
) -> anyhow::Result<Seeded> {
    let store = SqliteStore::open(database)
        .with_context(|| format!("cannot open {}", database.display()))?;
    let engine = Engine::new(Arc::new(store));
    let mut seeded = Seeded { ids: Vec::new(), contradicting: 0, duplicates: 0 };
    // Recent ordinary memories, for the near-duplicates to repeat.
    let mut ordinary: Vec<NewMemory> = Vec::new();
    let mut made = 0;
    while made < size {
        let count = BATCH.min(size - made);
        let mut batch = Vec::with_capacity(count);
        for _ in 0..count {
            let roll = rng.below(100);
            if roll < CONTRADICTING {
                seeded.contradicting += 1;
                batch.push(contradicting(corpus, rng, made + batch.len()));
            } else if roll < CONTRADICTING + DUPLICATES && !ordinary.is_empty() {
                seeded.duplicates += 1;
                let mut again = ordinary[rng.below(ordinary.len())].clone();
                again.content.push_str(" Noted again.");
                batch.push(again);
            } else {
                let memory = corpus.memory(rng);
                if ordinary.len() < 1_000 {
                    ordinary.push(memory.clone());
                } else {
                    let slot = rng.below(ordinary.len());
                    ordinary[slot] = memory.clone();
                }
                batch.push(memory);
            }
        }
        made += batch.len();
        for memory in engine.create_memories(batch, "system:bench").await? {
            if seeded.ids.len() < 10_000 && rng.chance(0.2) {
                seeded.ids.push(memory.id);
            }
        }
    }
    anyhow::ensure!(!seeded.ids.is_empty(), "no memory ids were kept to read");
    Ok(seeded)
}

/// A package-manager preference that contradicts about half of the others of its repository,
/// made unique by where it was noted and a ticket number.
fn contradicting(corpus: &Corpus, rng: &mut Rng, index: usize) -> NewMemory {
    let tool = if rng.chance(0.5) { "pnpm" } else { "npm" };
    let repo = REPOS[rng.below(CONTRADICTING_REPOS)];
    let content = format!(
        "Use {tool} in this repo. Noted while working on {} in {} (ticket {}).",
        corpus.type_name(rng),
        corpus.path(rng),
        10_000 + index
    );
    NewMemory {
        content,
        scope: Scope::Repo,
        repo: Some(repo.to_owned()),
        tags: Vec::new(),
        source: Some("bench".to_owned()),
        metadata: JsonObject::new(),
    }
}

/// How a timed request ended.
#[derive(Debug, Clone)]
pub enum Outcome<T> {
    Answered(T),
    /// Still running after this long; the daemon was killed and started again.
    TimedOut(Duration),
    /// The daemon's resident memory passed the cap (this much); it was killed and started
    /// again.
    OverMemory(u64),
}

/// What a dream cycle answered, counted without keeping it.
#[derive(Debug, Clone, Copy, Default)]
pub struct DreamCounts {
    pub examined: u64,
    pub merge_groups: usize,
    pub merged: usize,
    pub staled: usize,
    pub conflicts: usize,
    /// Memory ids over all conflicts (each conflict names two or more).
    pub in_conflict: usize,
    pub response_bytes: usize,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DreamAnswer {
    examined: u64,
    merged: Vec<MergeAnswer>,
    staled: Vec<IgnoredAny>,
    conflicts: Vec<ConflictAnswer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MergeAnswer {
    merged_ids: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConflictAnswer {
    memory_ids: Vec<IgnoredAny>,
}

/// One timed request: how long, how it ended, and the daemon's peak resident memory over it.
#[derive(Debug, Clone)]
pub struct Timed<T> {
    pub elapsed: Duration,
    pub outcome: Outcome<T>,
    /// `VmHWM` after the request; the peak of the request alone when `peak_reset`.
    pub peak: Option<u64>,
    pub peak_reset: bool,
}

/// Sends one request and waits for its answer, at most `timeout`, while the daemon's resident
/// memory stays under `memory_cap`; otherwise kills the daemon and starts it again.
async fn timed_request(
    daemon: &mut Daemon,
    method: Method,
    path: String,
    body: Option<Bytes>,
    timeout: Duration,
    memory_cap: u64,
) -> anyhow::Result<Timed<(StatusCode, Bytes)>> {
    let peak_reset = daemon.reset_peak();
    let mut connection = Connection::open(daemon.address).await?;
    let started = Instant::now();
    let mut request: JoinHandle<anyhow::Result<(StatusCode, Bytes)>> =
        tokio::spawn(async move { connection.send(method, &path, body).await });
    let outcome = loop {
        tokio::select! {
            answer = &mut request => break Outcome::Answered(answer??),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {
                let (rss, _) = daemon.memory()?;
                if rss > memory_cap {
                    break Outcome::OverMemory(rss);
                }
                if started.elapsed() > timeout {
                    break Outcome::TimedOut(started.elapsed());
                }
            }
        }
    };
    let elapsed = started.elapsed();
    let peak = daemon.memory().ok().map(|(_, peak)| peak);
    if !matches!(outcome, Outcome::Answered(_)) {
        request.abort();
        daemon.restart_killed().await?;
    }
    Ok(Timed { elapsed, outcome, peak, peak_reset })
}

/// `POST /api/dream-cycle`, timed as [`timed_request`] does.
pub async fn dream_cycle(
    daemon: &mut Daemon,
    dry_run: bool,
    timeout: Duration,
    memory_cap: u64,
) -> anyhow::Result<Timed<DreamCounts>> {
    let body = Bytes::from(json!({ "dryRun": dry_run }).to_string());
    let timed = timed_request(
        daemon,
        Method::POST,
        "/api/dream-cycle".to_owned(),
        Some(body),
        timeout,
        memory_cap,
    )
    .await?;
    let outcome = match timed.outcome {
        Outcome::Answered((status, answer)) => {
            anyhow::ensure!(
                status == StatusCode::OK,
                "POST /api/dream-cycle answered {status}: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(500)])
            );
            let parsed: DreamAnswer =
                serde_json::from_slice(&answer).context("the dream report does not parse")?;
            Outcome::Answered(DreamCounts {
                examined: parsed.examined,
                merge_groups: parsed.merged.len(),
                merged: parsed.merged.iter().map(|group| group.merged_ids.len()).sum(),
                staled: parsed.staled.len(),
                conflicts: parsed.conflicts.len(),
                in_conflict: parsed.conflicts.iter().map(|c| c.memory_ids.len()).sum(),
                response_bytes: answer.len(),
            })
        }
        Outcome::TimedOut(after) => Outcome::TimedOut(after),
        Outcome::OverMemory(rss) => Outcome::OverMemory(rss),
    };
    Ok(Timed { elapsed: timed.elapsed, outcome, peak: timed.peak, peak_reset: timed.peak_reset })
}

/// Latencies of the two reads, alternating on one keep-alive connection.
#[derive(Debug, Clone)]
pub struct Reads {
    pub by_id: Latencies,
    pub list: Latencies,
    /// Answers other than 200, and broken connections.
    pub failures: u64,
}

/// Reads in a loop, [`READ_PAUSE`] apart, until `stop` is set or `limit` has passed.
async fn read_loop(
    address: SocketAddr,
    ids: Arc<Vec<String>>,
    seed: u64,
    stop: Arc<AtomicBool>,
    limit: Duration,
) -> anyhow::Result<Reads> {
    let mut connection = Connection::open(address).await?;
    let mut rng = Rng::new(seed);
    let (mut by_id, mut list, mut failures) = (Vec::new(), Vec::new(), 0);
    let started = Instant::now();
    let mut turn = 0_u64;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
        let (path, samples) = if turn.is_multiple_of(2) {
            (format!("/api/memories/{}", ids[rng.below(ids.len())]), &mut by_id)
        } else {
            ("/api/memories?limit=20".to_owned(), &mut list)
        };
        turn += 1;
        let sent = Instant::now();
        match connection.get(&path).await {
            Ok((StatusCode::OK, _)) => samples.push(sent.elapsed()),
            Ok(_) => failures += 1,
            Err(_) => {
                failures += 1;
                // A daemon killed for running too long is gone from this address.
                match Connection::open(address).await {
                    Ok(reopened) => connection = reopened,
                    Err(_) => break,
                }
            }
        }
        tokio::time::sleep(READ_PAUSE).await;
    }
    Ok(Reads { by_id: Latencies::new(by_id), list: Latencies::new(list), failures })
}

/// The reads with nothing else running, for `duration`.
pub async fn idle_reads(
    address: SocketAddr,
    ids: &Arc<Vec<String>>,
    duration: Duration,
) -> anyhow::Result<Reads> {
    read_loop(address, ids.clone(), 1, Arc::new(AtomicBool::new(false)), duration).await
}

/// Reads running alongside `work` until it returns.
async fn reads_alongside<T>(
    address: SocketAddr,
    ids: &Arc<Vec<String>>,
    limit: Duration,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(T, Reads)> {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = tokio::spawn(read_loop(address, ids.clone(), 2, stop.clone(), limit));
    let done = work.await;
    stop.store(true, Ordering::Relaxed);
    let reads = reads.await??;
    Ok((done?, reads))
}

/// A dream cycle (not a dry run) with the reads running alongside, both for at most `limit`.
pub async fn dream_with_reads(
    daemon: &mut Daemon,
    ids: &Arc<Vec<String>>,
    limit: Duration,
    memory_cap: u64,
) -> anyhow::Result<(Timed<DreamCounts>, Reads)> {
    let address = daemon.address;
    reads_alongside(address, ids, limit, dream_cycle(daemon, false, limit, memory_cap)).await
}

/// What a connector sync did.
#[derive(Debug, Clone, Copy)]
pub struct Synced {
    pub imported: u64,
    pub files: usize,
}

/// Writes `files` Markdown files of three sections each under `folder`, a hundred a
/// directory.
pub fn write_folder(
    folder: &Path,
    files: usize,
    corpus: &Corpus,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    for index in 0..files {
        let directory = folder.join(format!("part-{:03}", index / 100));
        std::fs::create_dir_all(&directory)?;
        let mut text = format!("# {} notes ({index})\n\n", corpus.type_name(rng));
        for heading in ["Overview", "Setup", "Pitfalls"] {
            text.push_str(&format!(
                "## {heading}\n\n{}\n\n{}\n\n",
                corpus.memory(rng).content,
                corpus.memory(rng).content
            ));
        }
        std::fs::write(directory.join(format!("note-{index:05}.md")), text)?;
    }
    Ok(())
}

/// Adds a folder connector for `folder` and syncs it, with the reads running alongside the
/// sync.
pub async fn sync_with_reads(
    daemon: &mut Daemon,
    ids: &Arc<Vec<String>>,
    folder: &Path,
    files: usize,
    plan: &Plan,
) -> anyhow::Result<(Timed<Synced>, Reads)> {
    let mut control = Connection::open(daemon.address).await?;
    let body = json!({ "kind": "folder", "path": folder, "repo": "docs-site", "scope": "repo" });
    let (status, answer) =
        control.send(Method::POST, "/api/connectors", Some(Bytes::from(body.to_string()))).await?;
    anyhow::ensure!(
        status == StatusCode::CREATED,
        "POST /api/connectors answered {status}: {}",
        String::from_utf8_lossy(&answer)
    );
    let connector: serde_json::Value = serde_json::from_slice(&answer)?;
    let id = connector["id"].as_str().context("the connector has no id")?.to_owned();
    let address = daemon.address;
    let sync = timed_request(
        daemon,
        Method::POST,
        format!("/api/connectors/{id}/sync"),
        None,
        plan.timeout,
        plan.memory_cap,
    );
    let (timed, reads) = reads_alongside(address, ids, plan.timeout, sync).await?;
    let outcome = match timed.outcome {
        Outcome::Answered((status, answer)) => {
            anyhow::ensure!(
                status == StatusCode::OK,
                "POST /api/connectors/{id}/sync answered {status}: {}",
                String::from_utf8_lossy(&answer)
            );
            let report: serde_json::Value = serde_json::from_slice(&answer)?;
            anyhow::ensure!(report["status"] == "ok", "the sync failed: {report}");
            Outcome::Answered(Synced { imported: report["imported"].as_u64().unwrap_or(0), files })
        }
        Outcome::TimedOut(after) => Outcome::TimedOut(after),
        Outcome::OverMemory(rss) => Outcome::OverMemory(rss),
    };
    let timed =
        Timed { elapsed: timed.elapsed, outcome, peak: timed.peak, peak_reset: timed.peak_reset };
    Ok((timed, reads))
}

/// Copies the database files of `from` (the database and its write-ahead log) into `to`.
pub fn copy_database(from: &Path, to: &Path) -> anyhow::Result<()> {
    for name in ["cairn.db", "cairn.db-wal"] {
        let source = from.join(name);
        if source.exists() {
            std::fs::copy(&source, to.join(name))
                .with_context(|| format!("cannot copy {}", source.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_types::DreamRequest;

    /// The seeded preferences are read as contradicting, and the duplicates as duplicates.
    #[tokio::test]
    async fn the_seeded_corpus_holds_conflicts_and_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("cairn.db");
        let seeded = seed(&database, &Corpus::new(), &mut Rng::new(7), 400).await.unwrap();
        assert!(seeded.contradicting > 150 && seeded.duplicates > 5);
        let engine = Engine::new(Arc::new(SqliteStore::open(&database).unwrap()));
        let request = DreamRequest { dry_run: true, stale_after_days: None, similarity: None };
        let report = engine.dream(request, "system:test").await.unwrap();
        assert_eq!(report.examined, 400);
        assert!(!report.conflicts.is_empty());
        assert!(!report.merged.is_empty());
    }
}
