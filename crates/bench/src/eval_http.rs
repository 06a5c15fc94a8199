//! `cairn-bench eval --http`: the eval as a user of the daemon sees it.
//!
//! A release `cairn serve` is started twice on a fresh data directory: once without a model
//! (full text) and once with the local model installed in its data directory (hybrid, the
//! daemon's default then). Each time, every turn of every conversation is stored as a memory
//! with `POST /api/memories`, one request at a time, all in the one daemon (as a user's
//! importer would: about 3,000 memories for five conversations); the daemon's embeddings are
//! awaited (`embeddingsPending` of `GET /api/health`), and every question is asked with
//! `GET /api/search?q=…&limit=10` in the daemon's default mode, one at a time, through the
//! Rust client. Reported per daemon: the same quality figures as the in-process eval, the
//! search latency the client saw, and the daemon's resident memory after ingesting and
//! embedding, after the questions, and at its peak.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cairn_client::{Client, ClientOptions};
use cairn_types::{NewMemory, Scope, SearchQuery};
use serde_json::Value;

use crate::daemon::{self, Daemon};
use crate::eval::{CATEGORIES, Scores, turns};
use crate::stats::Latencies;

/// What one daemon did.
struct Run {
    name: &'static str,
    retrieval: String,
    memories: usize,
    /// From the first create to the last embedding.
    ingest: Duration,
    scores: Scores,
    latencies: Vec<Duration>,
    /// Resident memory after ingesting and embedding, after the questions, and the peak.
    rss_ingested: u64,
    rss_after: u64,
    rss_peak: u64,
}

/// Runs the eval over HTTP against a daemon without the model and, when `model_dir` holds
/// one, a daemon with it.
pub async fn run(conversations: &[Value], model_dir: Option<&Path>) -> anyhow::Result<()> {
    let (binary, stale) = daemon::binary(false)?;
    if let Some(stale) = stale {
        eprintln!("warning: {stale}");
    }
    let mut runs = vec![evaluate(&binary, conversations, None).await?];
    match model_dir.filter(|directory| cairn_embed::model_installed(directory)) {
        Some(directory) => runs.push(evaluate(&binary, conversations, Some(directory)).await?),
        None => eprintln!("no model: the HTTP eval runs the full-text daemon only"),
    }
    print(&runs);
    Ok(())
}

async fn evaluate(
    binary: &Path,
    conversations: &[Value],
    model_dir: Option<&Path>,
) -> anyhow::Result<Run> {
    let directory = tempfile::tempdir()?;
    let data_dir = directory.path().join("data");
    let mut args = vec![];
    match model_dir {
        // The daemon uses the model it finds in its data directory.
        Some(model_dir) => install_model(model_dir, &data_dir)?,
        None => args.extend(["--embedder", "none"]),
    }
    let log = directory.path().join("daemon.log");
    let mut daemon = Daemon::start_with(binary, &data_dir, &log, &args).await?;
    let client = Client::new(ClientOptions::new(format!("http://{}", daemon.address)))?;
    let name = if model_dir.is_some() { "with the model" } else { "without a model" };
    eprintln!("HTTP eval, daemon {name}: storing the turns…");

    let started = Instant::now();
    let mut by_turn: Vec<HashMap<String, String>> = Vec::new();
    let mut memories = 0;
    for conversation in conversations {
        let mut ids = HashMap::new();
        for (turn, content) in turns(&conversation["conversation"]) {
            let memory = NewMemory {
                content,
                scope: Scope::User,
                repo: None,
                tags: Vec::new(),
                source: None,
                metadata: Default::default(),
            };
            let created = client.create_memory(&memory).await?;
            ids.insert(turn, created.id);
            memories += 1;
        }
        by_turn.push(ids);
    }
    let health = settled(&client).await?;
    let ingest = started.elapsed();
    let (rss_ingested, _) = daemon.memory()?;
    eprintln!(
        "{memories} memories stored and embedded in {:.1} s ({}); asking…",
        ingest.as_secs_f64(),
        health.retrieval
    );

    let mut scores = Scores::default();
    let mut latencies = Vec::new();
    for (conversation, ids) in conversations.iter().zip(&by_turn) {
        for qa in conversation["qa"].as_array().into_iter().flatten() {
            let (Some(question), Some(category)) =
                (qa["question"].as_str(), qa["category"].as_u64())
            else {
                continue;
            };
            let evidence: Vec<String> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|turn| ids.get(turn.as_str()?.trim()).cloned())
                .collect();
            if category == 5 || evidence.is_empty() {
                continue;
            }
            let query = SearchQuery {
                q: Some(question.to_owned()),
                limit: Some(10),
                ..SearchQuery::default()
            };
            let asked = Instant::now();
            let result = client.search(&query).await?;
            latencies.push(asked.elapsed());
            let ranked: Vec<String> = result.hits.into_iter().map(|hit| hit.memory.id).collect();
            scores.add(category, &ranked, &evidence);
        }
    }
    let (rss_after, rss_peak) = daemon.memory()?;
    daemon.stop()?;
    Ok(Run {
        name,
        retrieval: health.retrieval,
        memories,
        ingest,
        scores,
        latencies,
        rss_ingested,
        rss_after,
        rss_peak,
    })
}

/// Waits until the daemon has embedded every memory; its health then.
async fn settled(client: &Client) -> anyhow::Result<cairn_types::Health> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let health = client.health().await?;
        if health.embeddings_pending == 0 {
            return Ok(health);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} memories still wait for their embeddings after 10 minutes",
            health.embeddings_pending
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Links the model's files into `data_dir`'s model folder, where the daemon looks.
fn install_model(model_dir: &Path, data_dir: &Path) -> anyhow::Result<()> {
    let target = cairn_embed::model_dir(data_dir);
    std::fs::create_dir_all(&target)?;
    for entry in std::fs::read_dir(model_dir)? {
        let entry = entry?;
        let source = std::fs::canonicalize(entry.path())?;
        std::os::unix::fs::symlink(&source, target.join(entry.file_name()))
            .with_context(|| format!("cannot link {}", source.display()))?;
    }
    Ok(())
}

fn print(runs: &[Run]) {
    let mb = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!(
        "\nOver HTTP, one daemon per row, every conversation's turns in it, one request at a \
         time:\n\n| daemon | retrieval | memories | recall_any@5 | MRR@10 | recall@5 | search p50 \
         / p99 | RSS after ingest / after the questions / peak |\n|---|---|---|---|---|---|---|---|"
    );
    for run in runs {
        let all = run.scores.all();
        let latencies = Latencies::new(run.latencies.clone());
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.1} % | {:.1} / {:.1} ms | {:.0} / {:.0} / {:.0} MB |",
            run.name,
            run.retrieval,
            run.memories,
            all.recall_any5(),
            all.mrr(),
            100.0 * all.recall5 / all.questions.max(1) as f64,
            latencies.p50().as_secs_f64() * 1e3,
            latencies.p99().as_secs_f64() * 1e3,
            mb(run.rss_ingested),
            mb(run.rss_after),
            mb(run.rss_peak),
        );
    }
    println!(
        "\nBy question category:\n\n| daemon | category | questions | recall_any@5 | MRR@10 |\n|---|---|---|---|---|"
    );
    for run in runs {
        for (category, label) in CATEGORIES {
            let score = run.scores.category(category);
            println!(
                "| {} | {label} | {} | {:.3} | {:.3} |",
                run.name,
                score.questions,
                score.recall_any5(),
                score.mrr()
            );
        }
    }
    for run in runs {
        println!(
            "\n{}: {} memories stored one request at a time and embedded in {:.1} s.",
            run.name,
            run.memories,
            run.ingest.as_secs_f64()
        );
    }
}
