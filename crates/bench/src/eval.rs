//! `cairn-bench eval`: retrieval quality on conversations in the LoCoMo format (LongMemEval's
//! form goes to [`crate::longmemeval`]).
//!
//! Every turn of a conversation is stored as a memory through the real engine; every
//! question with evidence (category 5, the adversarial one, is left out) is asked as a
//! search in each retrieval mode, and as a context pack. Reported, overall and per question
//! category: recall@1, @5 and @10 (the share of a question's evidence turns in the first k
//! hits, averaged), recall_any@5 (the share of questions with any evidence turn in the first
//! 5) and MRR@10 (the mean of 1 / rank of the first evidence turn within the first 10); for
//! context packs also the share of evidence turns the pack holds and of questions it holds
//! evidence for.

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
    /// A file that keeps the model's vectors between runs, by text (the same vectors the
    /// model gives, so the figures do not change; only the time to get them).
    pub embedding_cache: Option<PathBuf>,
    /// Also run the eval over HTTP against real daemons (`eval_http`).
    pub http: bool,
    /// Store every conversation in one store (as one daemon would hold them) instead of one
    /// store each: questions then compete with every conversation's turns.
    pub shared: bool,
    /// Only these conversations (1-based), to tune on some and check on the others.
    pub conversations: Option<Vec<usize>>,
    /// Write every question whose evidence is not in the first 5 hits of the last mode
    /// (hybrid with a model), with its evidence and those hits, to this file.
    pub misses: Option<PathBuf>,
    /// LongMemEval: only the first N questions.
    pub questions: Option<usize>,
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

/// The categories of LoCoMo's questions (5, adversarial, is left out).
pub(crate) const CATEGORIES: [(u64, &str); 4] =
    [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")];

#[derive(Default, Clone, Copy)]
pub(crate) struct Score {
    recall1: f64,
    pub(crate) recall5: f64,
    recall10: f64,
    /// Questions with at least one evidence turn in the first 5.
    any5: f64,
    /// 1 / rank of the first evidence turn within the first 10.
    reciprocal_rank: f64,
    pub(crate) questions: usize,
}

impl Score {
    fn add(&mut self, ranked: &[String], evidence: &[String]) {
        let found = |k: usize| {
            evidence.iter().filter(|id| ranked.iter().take(k).any(|hit| hit == *id)).count()
        };
        self.recall1 += found(1) as f64 / evidence.len() as f64;
        self.recall5 += found(5) as f64 / evidence.len() as f64;
        self.recall10 += found(10) as f64 / evidence.len() as f64;
        self.any5 += f64::from(u8::from(found(5) > 0));
        self.reciprocal_rank += ranked
            .iter()
            .take(10)
            .position(|hit| evidence.contains(hit))
            .map_or(0.0, |rank| 1.0 / (rank + 1) as f64);
        self.questions += 1;
    }

    fn merge(&mut self, other: &Score) {
        self.recall1 += other.recall1;
        self.recall5 += other.recall5;
        self.recall10 += other.recall10;
        self.any5 += other.any5;
        self.reciprocal_rank += other.reciprocal_rank;
        self.questions += other.questions;
    }

    pub(crate) fn recall_any5(&self) -> f64 {
        self.any5 / self.questions.max(1) as f64
    }

    pub(crate) fn mrr(&self) -> f64 {
        self.reciprocal_rank / self.questions.max(1) as f64
    }

    fn row(&self, name: &str) -> String {
        let n = self.questions.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} % | {:.1} % | {:.1} % | {:.3} | {:.3} |",
            self.questions,
            100.0 * self.recall1 / n,
            100.0 * self.recall5 / n,
            100.0 * self.recall10 / n,
            self.recall_any5(),
            self.mrr()
        )
    }
}

/// Scores by question category.
#[derive(Default, Clone)]
pub(crate) struct Scores(HashMap<u64, Score>);

impl Scores {
    pub(crate) fn add(&mut self, category: u64, ranked: &[String], evidence: &[String]) {
        self.0.entry(category).or_default().add(ranked, evidence);
    }

    pub(crate) fn all(&self) -> Score {
        let mut all = Score::default();
        for score in self.0.values() {
            all.merge(score);
        }
        all
    }

    pub(crate) fn category(&self, category: u64) -> Score {
        self.0.get(&category).copied().unwrap_or_default()
    }
}

/// How one backend scored.
struct Results {
    modes: Vec<RetrievalMode>,
    scores: HashMap<RetrievalMode, Scores>,
    /// The context pack's entries in the order of the pack.
    context: Scores,
    /// The share of each question's evidence turns that its pack holds, summed.
    context_recall: f64,
    /// Questions whose pack holds at least one evidence turn.
    context_any: usize,
    /// In-process latency of each search, by mode (milliseconds).
    latencies: HashMap<RetrievalMode, Vec<f64>>,
}

/// A question with evidence, and the memories that hold it.
struct Question {
    text: String,
    category: u64,
    evidence: Vec<String>,
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
    let mut conversations: Vec<Value> =
        serde_json::from_str(&text).context("not a LoCoMo or LongMemEval JSON file")?;
    drop(text);
    let (embedder, cache) = embedder(&options)?;
    eprintln!(
        "embedder: {}",
        embedder.as_ref().map_or("none (full text only)".to_owned(), |e| e.model().to_owned())
    );
    if crate::longmemeval::is_longmemeval(&conversations) {
        crate::longmemeval::run(&options, conversations, &embedder).await?;
        if let Some(cache) = &cache {
            cache.save()?;
        }
        return Ok(());
    }
    if let Some(keep) = &options.conversations {
        let count = conversations.len();
        anyhow::ensure!(
            keep.iter().all(|number| *number <= count),
            "--conversations: the file holds {count}"
        );
        conversations = keep.iter().map(|number| conversations[number - 1].clone()).collect();
    }
    if options.http {
        let model_dir = options.model_dir.clone().or_else(default_model_dir);
        crate::eval_http::run(&conversations, model_dir.as_deref()).await?;
    }
    let sqlite = evaluate(&options, &conversations, &embedder, &Backend::Sqlite).await?;
    if let Some(cache) = &cache {
        cache.save()?;
    }
    let Some(target) = &options.postgres else {
        print_results(&sqlite, None, &options);
        return Ok(());
    };
    // A started server lives until the comparison is done.
    let (_cluster, url) = match target {
        PostgresTarget::Started => {
            let cluster = cairn_test_support::postgres::TestCluster::start_durable();
            let url = cluster.create_database();
            (Some(cluster), url)
        }
        PostgresTarget::Url(url) => (None, url.clone()),
    };
    let run = format!("{:x}", std::process::id());
    let postgres =
        evaluate(&options, &conversations, &embedder, &Backend::Postgres { url, run }).await?;
    print_results(&sqlite, Some(&postgres), &options);
    let n = |scores: &Scores| scores.all().recall5 / scores.all().questions.max(1) as f64;
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
    let backends: Vec<(&str, &Results)> = match postgres {
        None => vec![("", sqlite)],
        Some(postgres) => vec![(", SQLite", sqlite), (", PostgreSQL", postgres)],
    };
    let header = "| retrieval | questions | recall@1 | recall@5 | recall@10 | recall_any@5 | MRR@10 |\n\
                  |---|---|---|---|---|---|---|";
    println!("{header}");
    for mode in &sqlite.modes {
        for (name, results) in &backends {
            let row = results.scores[mode].all().row(&format!("search, {}{name}", mode.as_str()));
            println!("{row}");
        }
    }
    for (name, results) in &backends {
        let name = format!("context pack, {} tokens (order of the pack){name}", options.budget);
        println!("{}", results.context.all().row(&name));
    }
    println!("\nBy question category:\n\n{header}");
    for mode in &sqlite.modes {
        for (name, results) in &backends {
            for (category, label) in CATEGORIES {
                let row = results.scores[mode]
                    .category(category)
                    .row(&format!("search, {}, {label}{name}", mode.as_str()));
                println!("{row}");
            }
        }
    }
    for (name, results) in &backends {
        for (category, label) in CATEGORIES {
            println!(
                "{}",
                results.context.category(category).row(&format!("context pack, {label}{name}"))
            );
        }
    }
    for (name, results) in &backends {
        let questions = results.context.all().questions.max(1) as f64;
        println!(
            "\n{} questions; a {}-token context pack holds {:.1} % of the evidence turns and \
             evidence for {:.1} % of the questions{name}.",
            results.context.all().questions,
            options.budget,
            100.0 * results.context_recall / questions,
            100.0 * results.context_any as f64 / questions,
        );
        for mode in &results.modes {
            let mut latencies = results.latencies[mode].clone();
            latencies.sort_by(f64::total_cmp);
            let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
            if !latencies.is_empty() {
                println!(
                    "search, {}{name}: {:.2} ms p50, {:.2} ms p99 in process",
                    mode.as_str(),
                    at(0.5),
                    at(0.99)
                );
            }
        }
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
    let mut scores: HashMap<RetrievalMode, Scores> = HashMap::new();
    let mut latencies: HashMap<RetrievalMode, Vec<f64>> = HashMap::new();
    let mut context = Scores::default();
    let mut context_recall = 0.0;
    let mut context_any = 0;
    // One store per conversation, or (`shared`) one for them all: the engines, each with
    // the questions to ask it.
    let mut engines: Vec<(tempfile::TempDir, Engine, Vec<Question>)> = Vec::new();
    // Every stored turn's text by memory id, for the misses' file.
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut misses = String::new();
    for (number, conversation) in conversations.iter().enumerate() {
        if engines.is_empty() || !options.shared {
            let directory = tempfile::tempdir()?;
            let store = backend.open(number, directory.path()).await?;
            let mut engine = Engine::new(store);
            if let Some(embedder) = embedder {
                engine = engine.with_embedder(embedder.clone());
            }
            engines.push((directory, engine, Vec::new()));
        }
        let (_, engine, questions) = engines.last_mut().expect("an engine was just made");
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
        eprintln!("conversation {}: {} turns stored", number + 1, created.len());
        if options.misses.is_some() {
            texts.extend(created.iter().map(|memory| (memory.id.clone(), memory.content.clone())));
        }
        questions.extend(conversation["qa"].as_array().into_iter().flatten().filter_map(|qa| {
            let evidence: Vec<String> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|turn| by_turn.get(turn.as_str()?.trim()).cloned())
                .collect();
            let question = Question {
                text: qa["question"].as_str()?.to_owned(),
                category: qa["category"].as_u64().filter(|category| *category != 5)?,
                evidence,
            };
            Some(question).filter(|question| !question.evidence.is_empty())
        }));
    }

    for (_, engine, questions) in &engines {
        engine.embeddings_settled().await?;
        // Searches first: context packs record recall, which then shapes ranking.
        for question in questions {
            for mode in &modes {
                let query = SearchQuery {
                    q: Some(question.text.clone()),
                    limit: Some(10),
                    mode: Some(*mode),
                    ..SearchQuery::default()
                };
                let started = std::time::Instant::now();
                let hits = engine.search(query).await?;
                latencies.entry(*mode).or_default().push(started.elapsed().as_secs_f64() * 1e3);
                let ranked: Vec<String> = hits.hits.into_iter().map(|hit| hit.memory.id).collect();
                let missed = || !ranked.iter().take(5).any(|id| question.evidence.contains(id));
                if options.misses.is_some() && Some(mode) == modes.last() && missed() {
                    misses.push_str(&miss(question, &ranked, &texts));
                }
                scores.entry(*mode).or_default().add(
                    question.category,
                    &ranked,
                    &question.evidence,
                );
            }
        }
    }
    for (_, engine, questions) in &engines {
        for question in questions {
            let request = ContextRequest {
                task: question.text.clone(),
                repo: None,
                token_budget: Some(options.budget),
            };
            let pack = engine.context(request).await?;
            context.add(question.category, &pack.memory_ids, &question.evidence);
            let evidence = &question.evidence;
            let held = evidence.iter().filter(|id| pack.memory_ids.contains(id)).count();
            context_recall += held as f64 / evidence.len() as f64;
            context_any += usize::from(held > 0);
        }
    }

    if let Some(file) = &options.misses {
        std::fs::write(file, misses).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(Results { modes, scores, context, context_recall, context_any, latencies })
}

/// A missed question as text: the question, its evidence and the first 5 hits.
fn miss(question: &Question, ranked: &[String], texts: &HashMap<String, String>) -> String {
    let text = |id: &String| texts.get(id).map_or("?", String::as_str).to_owned();
    let mut out = format!("## [{}] {}\n", question.category, question.text);
    for id in &question.evidence {
        out.push_str(&format!("  evidence: {}\n", text(id)));
    }
    for (rank, id) in ranked.iter().take(5).enumerate() {
        out.push_str(&format!("  {}: {}\n", rank + 1, text(id)));
    }
    out + "\n"
}

/// Every turn as (dia_id, memory text): `Speaker: text`, with the photo's caption if any.
pub(crate) fn turns(conversation: &Value) -> Vec<(String, String)> {
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

/// The model's vectors by text, kept in a file between runs.
struct CachingEmbedder {
    model: Arc<dyn Embedder>,
    file: PathBuf,
    vectors: std::sync::Mutex<HashMap<String, Vec<f32>>>,
    /// Vectors computed since the file was last written.
    fresh: std::sync::atomic::AtomicUsize,
}

impl CachingEmbedder {
    fn open(model: Arc<dyn Embedder>, file: PathBuf) -> CachingEmbedder {
        let vectors: HashMap<String, Vec<f32>> = std::fs::read(&file)
            .ok()
            .and_then(|bytes| {
                serde_json::from_slice::<(String, HashMap<String, Vec<f32>>)>(&bytes).ok()
            })
            .filter(|(model_name, _)| model_name == model.model())
            .map(|(_, vectors)| vectors)
            .unwrap_or_default();
        eprintln!("embedding cache: {} vectors from {}", vectors.len(), file.display());
        CachingEmbedder { model, file, vectors: std::sync::Mutex::new(vectors), fresh: 0.into() }
    }

    fn save(&self) -> anyhow::Result<()> {
        if self.fresh.swap(0, std::sync::atomic::Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let vectors = self.vectors.lock().expect("cache lock");
        let bytes = serde_json::to_vec(&(self.model.model(), &*vectors))?;
        std::fs::write(&self.file, bytes)
            .with_context(|| format!("cannot write {}", self.file.display()))
    }
}

#[async_trait::async_trait]
impl Embedder for CachingEmbedder {
    fn model(&self) -> &str {
        self.model.model()
    }

    fn dimensions(&self) -> usize {
        self.model.dimensions()
    }

    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, cairn_memory::embed::EmbedError> {
        let missing: Vec<String> = {
            let vectors = self.vectors.lock().expect("cache lock");
            texts.iter().filter(|text| !vectors.contains_key(*text)).cloned().collect()
        };
        if !missing.is_empty() {
            let computed = self.model.embed(&missing).await?;
            let mut vectors = self.vectors.lock().expect("cache lock");
            for (text, vector) in missing.into_iter().zip(computed) {
                vectors.insert(text, vector);
            }
            self.fresh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let vectors = self.vectors.lock().expect("cache lock");
        Ok(texts.iter().map(|text| vectors[text].clone()).collect())
    }
}

/// The embedder, and its cache when the options name one (to save after the run).
type WithCache = (Option<Arc<dyn Embedder>>, Option<Arc<CachingEmbedder>>);

fn embedder(options: &EvalOptions) -> anyhow::Result<WithCache> {
    let Some(model) = model(options)? else { return Ok((None, None)) };
    Ok(match &options.embedding_cache {
        Some(file) => {
            let cache = Arc::new(CachingEmbedder::open(model, file.clone()));
            (Some(cache.clone()), Some(cache))
        }
        None => (Some(model), None),
    })
}

fn model(options: &EvalOptions) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
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
