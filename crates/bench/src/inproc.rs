//! In-process measurements: bulk ingest, context packs and search through the engine, and
//! a breakdown of a context pack into its storage and tokenizer parts.

use std::time::{Duration, Instant};

use cairn_memory::{Engine, count_tokens};
use cairn_store::MemoryFilter;
use cairn_types::{ContextRequest, MemoryListQuery, Scope, SearchQuery, Status, Timestamp};

use crate::corpus::{Corpus, Rng};
use crate::stats::Latencies;

pub const BATCH: usize = 1_000;

/// Bulk ingest of `count` memories in batches of [`BATCH`]; only the engine calls are timed.
pub struct Ingest {
    pub elapsed: Duration,
    pub per_second: f64,
    /// The rate over the last tenth of the batches, to show whether ingest slows as it grows.
    pub last_tenth_per_second: f64,
}

pub async fn ingest(
    engine: &Engine,
    corpus: &Corpus,
    rng: &mut Rng,
    count: usize,
) -> anyhow::Result<Ingest> {
    let batches = count.div_ceil(BATCH);
    let tail_from = batches - batches.div_ceil(10);
    let (mut elapsed, mut tail, mut tail_count) = (Duration::ZERO, Duration::ZERO, 0);
    for index in 0..batches {
        let size = BATCH.min(count - index * BATCH);
        let batch: Vec<_> = (0..size).map(|_| corpus.memory(rng)).collect();
        let started = Instant::now();
        engine.create_memories(batch, "system:bench").await?;
        let took = started.elapsed();
        elapsed += took;
        if index >= tail_from {
            tail += took;
            tail_count += size;
        }
    }
    Ok(Ingest {
        elapsed,
        per_second: count as f64 / elapsed.as_secs_f64(),
        last_tenth_per_second: tail_count as f64 / tail.as_secs_f64(),
    })
}

/// A realistic context request: a task, usually in one repository, with a 1,000 token budget.
pub fn context_request(corpus: &Corpus, rng: &mut Rng) -> ContextRequest {
    let task = corpus.task(rng);
    let repo = rng.chance(0.8).then(|| corpus.repo(rng));
    ContextRequest { task, repo, token_budget: Some(1000) }
}

pub struct ContextFigures {
    pub latencies: Latencies,
    pub mean_memories_used: f64,
    pub mean_tokens: f64,
}

pub async fn context(
    engine: &Engine,
    corpus: &Corpus,
    rng: &mut Rng,
    warm_up: usize,
    calls: usize,
) -> anyhow::Result<ContextFigures> {
    for _ in 0..warm_up {
        engine.context(context_request(corpus, rng)).await?;
    }
    let requests: Vec<_> = (0..calls).map(|_| context_request(corpus, rng)).collect();
    let mut samples = Vec::with_capacity(calls);
    let (mut used, mut tokens) = (0usize, 0usize);
    for request in requests {
        let started = Instant::now();
        let pack = engine.context(request).await?;
        samples.push(started.elapsed());
        used += pack.memories_used;
        tokens += pack.token_count;
    }
    Ok(ContextFigures {
        latencies: Latencies::new(samples),
        mean_memories_used: used as f64 / calls as f64,
        mean_tokens: tokens as f64 / calls as f64,
    })
}

pub struct SearchFigures {
    pub latencies: Latencies,
    pub mean_hits: f64,
}

pub async fn search(
    engine: &Engine,
    corpus: &Corpus,
    rng: &mut Rng,
    warm_up: usize,
    calls: usize,
) -> anyhow::Result<SearchFigures> {
    let query =
        |rng: &mut Rng| SearchQuery { q: Some(corpus.query(rng)), ..SearchQuery::default() };
    for _ in 0..warm_up {
        engine.search(query(rng)).await?;
    }
    let queries: Vec<_> = (0..calls).map(|_| query(rng)).collect();
    let mut samples = Vec::with_capacity(calls);
    let mut hits = 0usize;
    for query in queries {
        let started = Instant::now();
        let result = engine.search(query).await?;
        samples.push(started.elapsed());
        hits += result.hits.len();
    }
    Ok(SearchFigures { latencies: Latencies::new(samples), mean_hits: hits as f64 / calls as f64 })
}

/// Pages of 50 memories with their total, as the console lists them, by a label or two:
/// a scope, a status (most are active; stale and review are rare), a repository, a scope
/// and a status together, or none.
pub async fn listing(
    engine: &Engine,
    corpus: &Corpus,
    rng: &mut Rng,
    calls: usize,
) -> anyhow::Result<Latencies> {
    let pick_scope = |rng: &mut Rng| Scope::ALL[rng.below(Scope::ALL.len())];
    let pick_status = |rng: &mut Rng| Status::ALL[rng.below(Status::ALL.len())];
    let mut samples = Vec::with_capacity(calls);
    for call in 0..calls + WARM_UP_LISTINGS {
        let mut query = MemoryListQuery { limit: Some(50), ..MemoryListQuery::default() };
        match call % 5 {
            0 => query.scope = Some(pick_scope(rng)),
            1 => query.status = Some(pick_status(rng)),
            2 => query.repo = Some(corpus.repo(rng)),
            3 => (query.scope, query.status) = (Some(pick_scope(rng)), Some(pick_status(rng))),
            _ => {}
        }
        let started = Instant::now();
        std::hint::black_box(engine.list_memories(query).await?);
        if call >= WARM_UP_LISTINGS {
            samples.push(started.elapsed());
        }
    }
    Ok(Latencies::new(samples))
}

/// Listings made before the timed ones.
const WARM_UP_LISTINGS: usize = 10;

/// The parts of a context pack, each timed on its own through the public store and
/// tokenizer APIs, the way `cairn_memory::context` calls them.
pub struct Breakdown {
    /// `search_memories`: the FTS5 query for up to 200 candidates, with their rows.
    pub fts: Latencies,
    /// o200k token counts of the entries that fill a 1,000 token budget, and of the whole.
    pub tokens: Latencies,
    /// `record_recall`: the write transaction that marks the packed memories recalled.
    pub recall: Latencies,
    pub mean_candidates: f64,
    pub mean_packed: f64,
}

pub async fn breakdown(
    engine: &Engine,
    corpus: &Corpus,
    rng: &mut Rng,
    calls: usize,
) -> anyhow::Result<Breakdown> {
    let store = engine.store();
    let (mut fts, mut tokens, mut recall) = (Vec::new(), Vec::new(), Vec::new());
    let (mut candidates_total, mut packed_total) = (0usize, 0usize);
    for _ in 0..calls {
        let task = corpus.task(rng);
        let terms = terms(&task);

        let started = Instant::now();
        let candidates = store.search_memories(&terms, &MemoryFilter::default(), 200).await?;
        fts.push(started.elapsed());
        candidates_total += candidates.len();

        let started = Instant::now();
        let (mut used, mut context, mut ids) = (0usize, String::new(), Vec::new());
        for candidate in &candidates {
            let entry = format!("- [{}] {}\n", candidate.memory.scope, candidate.memory.content);
            let cost = count_tokens(&entry);
            if used + cost > 1000 {
                continue;
            }
            used += cost;
            context.push_str(&entry);
            ids.push(candidate.memory.id.clone());
        }
        std::hint::black_box(count_tokens(&context));
        tokens.push(started.elapsed());
        packed_total += ids.len();

        let started = Instant::now();
        if !ids.is_empty() {
            store.record_recall(&ids, &task.to_lowercase(), Timestamp::now()).await?;
        }
        recall.push(started.elapsed());
    }
    Ok(Breakdown {
        fts: Latencies::new(fts),
        tokens: Latencies::new(tokens),
        recall: Latencies::new(recall),
        mean_candidates: candidates_total as f64 / calls as f64,
        mean_packed: packed_total as f64 / calls as f64,
    })
}

/// The search terms of a task, as the engine takes them: distinct lower-case words of two
/// letters or more, without the few stop words the generated tasks contain.
fn terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase) {
        if word.chars().count() >= 2
            && !["in", "the", "up", "of", "for", "and"].contains(&word.as_str())
            && !terms.contains(&word)
        {
            terms.push(word);
        }
    }
    terms
}
