//! `cairn-bench eval`: retrieval quality on conversations in the LoCoMo format.
//!
//! Every turn of a conversation is stored as a memory through the real engine; every
//! question with evidence (category 5, the adversarial one, is left out) is asked as a
//! search in each retrieval mode, and as a context pack. Reported: recall@5 and recall@10
//! (the share of a question's evidence turns in the first 5 or 10 hits, averaged) and MRR
//! (the mean of 1 / rank of the first evidence turn).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use cairn_memory::Engine;
use cairn_memory::embed::{Embedder, HashingEmbedder};
use cairn_store::Store;
use cairn_store_postgres::{PgOptions, PgStore};
use cairn_store_sqlite::SqliteStore;
use cairn_types::{ContextRequest, NewMemory, RetrievalMode, Scope, SearchQuery};
use serde_json::Value;

pub struct EvalOptions {
    pub data: PathBuf,
    /// The local model's folder; `None` looks in the user's data directory.
    pub model_dir: Option<PathBuf>,
    /// Use the hashing embedder instead of a model (a check of the harness, not of quality).
    pub hashing: bool,
    /// The token budget of the context packs.
    pub budget: u32,
    /// Also run on PostgreSQL and compare with SQLite: `None` runs SQLite alone.
    pub postgres: Option<PostgresTarget>,
}

/// Where the PostgreSQL side of the eval runs.
pub enum PostgresTarget {
    /// A throwaway server the eval starts (`--postgres`).
    Started,
    /// An operator's database (`--database-url URL`); the eval makes schemas `cairn_eval_<n>`.
    Url(String),
}

/// The largest full-text recall@5 difference between the backends the eval accepts.
const PARITY: f64 = 0.02;

#[derive(Default, Clone, Copy)]
struct Score {
    recall5: f64,
    recall10: f64,
    reciprocal_rank: f64,
    questions: usize,
}

impl Score {
    fn add(&mut self, ranked: &[String], evidence: &[String]) {
        let found = |k: usize| {
            evidence.iter().filter(|id| ranked.iter().take(k).any(|hit| hit == *id)).count()
        };
        self.recall5 += found(5) as f64 / evidence.len() as f64;
        self.recall10 += found(10) as f64 / evidence.len() as f64;
        self.reciprocal_rank += ranked
            .iter()
            .position(|hit| evidence.contains(hit))
            .map_or(0.0, |rank| 1.0 / (rank + 1) as f64);
        self.questions += 1;
    }

    fn row(&self, name: &str) -> String {
        let n = self.questions.max(1) as f64;
        format!(
            "| {name} | {:.1} % | {:.1} % | {:.3} |",
            100.0 * self.recall5 / n,
            100.0 * self.recall10 / n,
            self.reciprocal_rank / n
        )
    }
}

/// How one backend scored.
struct Results {
    modes: Vec<RetrievalMode>,
    scores: HashMap<RetrievalMode, Score>,
    context: Score,
    context_recall: f64,
}

/// Opens a fresh, empty store for conversation `number`.
enum Backend {
    Sqlite,
    Postgres { url: String, run: String },
}

impl Backend {
    async fn open(
        &self,
        number: usize,
        directory: &std::path::Path,
    ) -> anyhow::Result<Arc<dyn Store>> {
        Ok(match self {
            Backend::Sqlite => Arc::new(SqliteStore::open(&directory.join("cairn.db"))?),
            Backend::Postgres { url, run } => {
                let options = PgOptions {
                    schema: format!("cairn_eval_{run}_{number}"),
                    listen: false,
                    application_name: "cairn-eval".to_owned(),
                    ..PgOptions::new(url)
                };
                Arc::new(PgStore::open(options).await?)
            }
        })
    }
}

pub async fn run(options: EvalOptions) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&options.data)
        .with_context(|| format!("cannot read {}", options.data.display()))?;
    let conversations: Vec<Value> =
        serde_json::from_str(&text).context("not a LoCoMo JSON file")?;
    let embedder = embedder(&options)?;
    eprintln!(
        "embedder: {}",
        embedder.as_ref().map_or("none (full text only)".to_owned(), |e| e.model().to_owned())
    );
    let sqlite = evaluate(&options, &conversations, &embedder, &Backend::Sqlite).await?;
    let Some(target) = &options.postgres else {
        print_results(&sqlite, None, &options);
        return Ok(());
    };
    // A started server lives until the comparison is done.
    let (_cluster, url) = match target {
        PostgresTarget::Started => {
            let cluster = cairn_store_postgres::testing::TestCluster::start_durable();
            let url = cluster.create_database();
            (Some(cluster), url)
        }
        PostgresTarget::Url(url) => (None, url.clone()),
    };
    let run = format!("{:x}", std::process::id());
    let postgres =
        evaluate(&options, &conversations, &embedder, &Backend::Postgres { url, run }).await?;
    print_results(&sqlite, Some(&postgres), &options);
    let n = |score: &Score| score.recall5 / score.questions.max(1) as f64;
    let difference = (n(&sqlite.scores[&RetrievalMode::Fulltext])
        - n(&postgres.scores[&RetrievalMode::Fulltext]))
    .abs();
    println!("\nfull-text recall@5 differs by {difference:.4} between SQLite and PostgreSQL");
    anyhow::ensure!(
        difference <= PARITY,
        "full-text recall@5 on PostgreSQL is {difference:.4} away from SQLite's (at most {PARITY})"
    );
    Ok(())
}

fn print_results(sqlite: &Results, postgres: Option<&Results>, options: &EvalOptions) {
    println!("| retrieval | recall@5 | recall@10 | MRR |");
    println!("|---|---|---|---|");
    let backends: Vec<(&str, &Results)> = match postgres {
        None => vec![("", sqlite)],
        Some(postgres) => vec![(", SQLite", sqlite), (", PostgreSQL", postgres)],
    };
    for mode in &sqlite.modes {
        for (name, results) in &backends {
            println!("{}", results.scores[mode].row(&format!("search, {}{name}", mode.as_str())));
        }
    }
    for (name, results) in &backends {
        println!("{}", results.context.row(&format!("context pack (order of the pack){name}")));
    }
    for (name, results) in &backends {
        println!(
            "\n{} questions; a {}-token context pack holds {:.1} % of the evidence turns{name}.",
            results.context.questions,
            options.budget,
            100.0 * results.context_recall / results.context.questions.max(1) as f64
        );
    }
}

async fn evaluate(
    options: &EvalOptions,
    conversations: &[Value],
    embedder: &Option<Arc<dyn Embedder>>,
    backend: &Backend,
) -> anyhow::Result<Results> {
    let modes: Vec<RetrievalMode> = if embedder.is_some() {
        vec![RetrievalMode::Fulltext, RetrievalMode::Semantic, RetrievalMode::Hybrid]
    } else {
        vec![RetrievalMode::Fulltext]
    };
    let mut scores: HashMap<RetrievalMode, Score> = HashMap::new();
    let mut context = Score::default();
    let mut context_recall = 0.0;
    for (number, conversation) in conversations.iter().enumerate() {
        let directory = tempfile::tempdir()?;
        let store = backend.open(number, directory.path()).await?;
        let mut engine = Engine::new(store);
        if let Some(embedder) = embedder {
            engine = engine.with_embedder(embedder.clone());
        }
        let turns = turns(&conversation["conversation"]);
        let inputs = turns.iter().map(|(_, content)| NewMemory {
            content: content.clone(),
            scope: Scope::User,
            repo: None,
            tags: Vec::new(),
            source: None,
            metadata: Default::default(),
        });
        let created = engine.create_memories(inputs.collect(), "system:eval").await?;
        let by_turn: HashMap<&str, String> = turns
            .iter()
            .zip(&created)
            .map(|((turn, _), memory)| (turn.as_str(), memory.id.clone()))
            .collect();
        engine.embeddings_settled().await?;
        eprintln!("conversation {}: {} turns stored", number + 1, created.len());

        let questions: Vec<(&str, Vec<String>)> = conversation["qa"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|qa| qa["category"].as_u64() != Some(5))
            .filter_map(|qa| {
                let evidence: Vec<String> = qa["evidence"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|turn| by_turn.get(turn.as_str()?.trim()).cloned())
                    .collect();
                Some((qa["question"].as_str()?, evidence))
                    .filter(|(_, evidence)| !evidence.is_empty())
            })
            .collect();
        // Searches first: context packs record recall, which then shapes ranking.
        for (question, evidence) in &questions {
            for mode in &modes {
                let query = SearchQuery {
                    q: Some((*question).to_owned()),
                    limit: Some(10),
                    mode: Some(*mode),
                    ..SearchQuery::default()
                };
                let hits = engine.search(query).await?;
                let ranked: Vec<String> = hits.hits.into_iter().map(|hit| hit.memory.id).collect();
                scores.entry(*mode).or_default().add(&ranked, evidence);
            }
        }
        for (question, evidence) in &questions {
            let request = ContextRequest {
                task: (*question).to_owned(),
                repo: None,
                token_budget: Some(options.budget),
            };
            let pack = engine.context(request).await?;
            context.add(&pack.memory_ids, evidence);
            context_recall += evidence.iter().filter(|id| pack.memory_ids.contains(id)).count()
                as f64
                / evidence.len() as f64;
        }
    }

    Ok(Results { modes, scores, context, context_recall })
}

/// Every turn as (dia_id, memory text): `Speaker: text`, with the photo's caption if any.
fn turns(conversation: &Value) -> Vec<(String, String)> {
    let Some(fields) = conversation.as_object() else { return Vec::new() };
    let mut sessions: Vec<(u32, &Vec<Value>)> = fields
        .iter()
        .filter_map(|(key, value)| {
            Some((key.strip_prefix("session_")?.parse().ok()?, value.as_array()?))
        })
        .collect();
    sessions.sort_by_key(|(number, _)| *number);
    let mut turns = Vec::new();
    for (_, session) in sessions {
        for turn in session {
            let (Some(id), Some(speaker), Some(text)) =
                (turn["dia_id"].as_str(), turn["speaker"].as_str(), turn["text"].as_str())
            else {
                continue;
            };
            let mut content = format!("{speaker}: {text}");
            if let Some(caption) = turn["blip_caption"].as_str() {
                content.push_str(&format!(" [shares a photo: {caption}]"));
            }
            turns.push((id.trim().to_owned(), content));
        }
    }
    turns
}

/// Where `cairn model fetch` installs the local model by default (the daemon's default
/// data directory), unless `CAIRN_MODEL_DIR` says otherwise.
pub fn default_model_dir() -> Option<PathBuf> {
    if let Some(directory) = std::env::var_os("CAIRN_MODEL_DIR") {
        return Some(PathBuf::from(directory));
    }
    let home = std::env::var_os("HOME")?;
    Some(cairn_embed::model_dir(&PathBuf::from(home).join(".local/share/cairn")))
}

fn embedder(options: &EvalOptions) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    if options.hashing {
        return Ok(Some(Arc::new(HashingEmbedder::new(384))));
    }
    let Some(directory) = options.model_dir.clone().or_else(default_model_dir) else {
        return Ok(None);
    };
    if !cairn_embed::model_installed(&directory) {
        eprintln!(
            "no model in {}; `cairn model fetch` installs one (or pass --model-dir)",
            directory.display()
        );
        return Ok(None);
    }
    let model = cairn_embed::LocalModel::load(&directory).map_err(anyhow::Error::msg)?;
    Ok(Some(Arc::new(model)))
}
