//! Context packs: ranked memories laid out as a Markdown list within a token budget.

use std::collections::HashMap;

use cairn_store::MemoryFilter;
use cairn_types::{
    CodingContext, CodingContextRequest, ContextPack, ContextRequest, FileContext, Memory,
    Timestamp,
};

use crate::rank::{self, Preferences, Ranked};
use crate::tokens;
use crate::{CandidateQuery, Engine, Result, privacy, text, validate};

pub(crate) async fn context_pack(engine: &Engine, request: ContextRequest) -> Result<ContextPack> {
    let task = validate::required_text("task", Some(request.task), validate::MAX_TEXT_BYTES)?;
    let repo = validate::optional_text("repo", request.repo, validate::MAX_NAME_BYTES)?;
    let budget = validate::token_budget(request.token_budget)?;
    let candidates = repo_candidates(engine, &task, repo.as_deref(), budget).await?;
    let preferences = Preferences { repo: repo.as_deref(), boost: None };
    let ranked = rank::rank(candidates, &preferences, Timestamp::now());
    let mut packer = Packer::new(budget as usize);
    let costs = entry_costs(engine, ranked.iter().map(|ranked| &ranked.memory)).await;
    packer.add_all(ranked, MATCHES, &costs);
    add_standing_rules(engine, &mut packer, repo.as_deref()).await?;
    let (pack, _) = packer.finish();
    record_recall(engine, &pack.memory_ids, &task).await?;
    Ok(pack)
}

/// Why a memory that matched the task is in a pack.
const MATCHES: &str = "matches the task";

/// Candidates under the one repository rule of retrieval: a request that names a
/// repository sees that repository's memories and those of no repository, never another
/// repository's.
async fn repo_candidates(
    engine: &Engine,
    text: &str,
    repo: Option<&str>,
    budget: u32,
) -> Result<Vec<cairn_store::TextMatch>> {
    let filter = MemoryFilter::default();
    let limit = candidates_for(budget);
    let query = CandidateQuery { text, filter: &filter, repo, limit, mode: None };
    let mut candidates = engine.candidates(query).await?;
    candidates.retain(|candidate| crate::repo_admits(repo, candidate.memory.repo.as_deref()));
    Ok(candidates)
}

/// A repository's standing rules and preferences ("use pnpm, not npm"), newest first, after
/// what matched, while the budget allows: they bear on every task in the repository even
/// when they share no word with it.
async fn add_standing_rules(
    engine: &Engine,
    packer: &mut Packer,
    repo: Option<&str>,
) -> Result<()> {
    let Some(repo) = repo else { return Ok(()) };
    if packer.remaining() < SMALLEST_ENTRY {
        // Full of what matched: no rule would fit.
        return Ok(());
    }
    let mut memories = engine.store.newest_repo_memories(repo, STANDING_RULES).await?;
    memories.retain(|memory| {
        privacy::owners(memory).next().is_none() && text::is_rule(&memory.content)
    });
    let costs = entry_costs(engine, memories.iter()).await;
    let reason = format!("a standing rule of repository {repo}");
    for memory in memories {
        packer.add(memory, &reason, &costs);
    }
    Ok(())
}

/// How many of a repository's newest repo-scoped memories are looked at for standing rules.
const STANDING_RULES: u32 = 20;

/// The fewest tokens an entry takes (`- [repo] Use pnpm.` is 8).
const SMALLEST_ENTRY: usize = 8;

pub(crate) async fn coding_context(
    engine: &Engine,
    request: CodingContextRequest,
) -> Result<CodingContext> {
    let task = validate::required_text("task", Some(request.task), validate::MAX_TEXT_BYTES)?;
    let files = validate::paths("files", request.files)?;
    let repo = validate::optional_text("repo", request.repo, validate::MAX_NAME_BYTES)?;
    let budget = validate::token_budget(request.token_budget)?;

    let file_names: Vec<FileNames> = files.iter().map(|path| FileNames::of(path)).collect();
    let mut query = task.clone();
    for names in &file_names {
        query.push(' ');
        query.push_str(&names.words);
    }
    let candidates = repo_candidates(engine, &query, repo.as_deref(), budget).await?;
    let boost = |memory: &Memory| -> f64 {
        file_names.iter().map(|names| names.mention_weight(&memory.content)).fold(0.0, f64::max)
    };
    let preferences = Preferences { repo: repo.as_deref(), boost: Some(&boost) };
    let ranked = rank::rank(candidates, &preferences, Timestamp::now());
    let mut packer = Packer::new(budget as usize);
    let costs = entry_costs(engine, ranked.iter().map(|ranked| &ranked.memory)).await;
    packer.add_all(ranked, MATCHES, &costs);
    add_standing_rules(engine, &mut packer, repo.as_deref()).await?;
    let (pack, contents) = packer.finish();
    record_recall(engine, &pack.memory_ids, &task).await?;

    let file_contexts = files
        .iter()
        .zip(&file_names)
        .map(|(path, names)| FileContext {
            path: path.clone(),
            memory_ids: pack
                .memory_ids
                .iter()
                .filter(|id| {
                    contents.get(*id).is_some_and(|content| names.mention_weight(content) > 0.0)
                })
                .cloned()
                .collect(),
        })
        .collect();
    Ok(CodingContext { pack, files: file_contexts })
}

/// How many candidates to rank for a budget: enough for entries of 15 tokens on average to
/// fill it, within bounds. A short entry is about 10 tokens, a typical one 25 or more.
fn candidates_for(budget: u32) -> u32 {
    (budget / 15).clamp(30, rank::CANDIDATES)
}

/// Marks the memories as recalled after the response: the write is bookkeeping, so the
/// request does not wait for it, and reads show it before it lands; the writes of the packs
/// made within a few tens of milliseconds share one transaction (see `recall.rs`).
async fn record_recall(engine: &Engine, memory_ids: &[String], task: &str) -> Result<()> {
    if memory_ids.is_empty() {
        return Ok(());
    }
    engine.recalls.record(&engine.store, memory_ids, &text::task_key(task), Timestamp::now());
    Ok(())
}

/// The token count of each memory's entry, by id: from the cache, and what it lacks (new
/// memories after a restart, changed ones) counted on a blocking thread, since tokenizing
/// is CPU work (tens of microseconds an entry) that must not stall the async workers.
async fn entry_costs<'m>(
    engine: &Engine,
    memories: impl Iterator<Item = &'m Memory>,
) -> HashMap<String, usize> {
    let mut costs = HashMap::new();
    let mut missing = Vec::new();
    for memory in memories {
        match engine.entry_tokens.get(memory) {
            Some(cost) => {
                costs.insert(memory.id.clone(), cost);
            }
            None => missing.push(memory.clone()),
        }
    }
    if missing.is_empty() {
        return costs;
    }
    let cache = engine.entry_tokens.clone();
    let count = move || {
        missing
            .into_iter()
            .map(|memory| {
                let cost = cache.insert(&memory, tokens::count_tokens(&format_entry(&memory)));
                (memory.id, cost)
            })
            .collect::<Vec<_>>()
    };
    match tokio::task::spawn_blocking(count).await {
        Ok(counted) => costs.extend(counted),
        // The packer counts what is missing itself.
        Err(error) => tracing::error!(%error, "counting tokens failed"),
    }
    costs
}

/// Lays memories out in the order they are added (each with why), skipping any that would
/// overflow the budget or is in already. Also returns the used memories' contents by id.
///
/// The count of the whole context is the sum of its entries' counts: o200k's pre-tokenizer
/// never joins a piece across an entry's closing newline and the next entry's `-`, so
/// byte-pair merges cannot cross entries (a test checks this on awkward text). Entries'
/// counts come from [`entry_costs`], so packing itself does not tokenize.
struct Packer {
    budget: usize,
    context: String,
    token_count: usize,
    memory_ids: Vec<String>,
    reasons: Vec<String>,
    contents: HashMap<String, String>,
}

impl Packer {
    fn new(budget: usize) -> Packer {
        Packer {
            budget,
            context: String::new(),
            token_count: 0,
            memory_ids: Vec::new(),
            reasons: Vec::new(),
            contents: HashMap::new(),
        }
    }

    fn remaining(&self) -> usize {
        self.budget - self.token_count
    }

    fn add_all(&mut self, ranked: Vec<Ranked>, reason: &str, costs: &HashMap<String, usize>) {
        for Ranked { memory, .. } in ranked {
            if self.token_count == self.budget {
                break;
            }
            self.add(memory, reason, costs);
        }
    }

    /// Adds a memory when it fits what is left of the budget and is not in the pack yet.
    /// `costs` has its entry's count (only a failed count leaves it to be counted here).
    fn add(&mut self, memory: Memory, reason: &str, costs: &HashMap<String, usize>) {
        let remaining = self.budget - self.token_count;
        let known = costs.get(&memory.id).copied();
        if self.contents.contains_key(&memory.id) || known.is_some_and(|cost| cost > remaining) {
            return;
        }
        let entry = format_entry(&memory);
        let cost = known.unwrap_or_else(|| tokens::count_tokens(&entry));
        if cost > remaining {
            return;
        }
        self.token_count += cost;
        self.context.push_str(&entry);
        self.memory_ids.push(memory.id.clone());
        self.reasons.push(reason.to_owned());
        self.contents.insert(memory.id, memory.content);
    }

    fn finish(self) -> (ContextPack, HashMap<String, String>) {
        debug_assert_eq!(self.token_count, tokens::count_tokens(&self.context));
        let pack = ContextPack {
            context: self.context,
            memories_used: self.memory_ids.len(),
            token_count: self.token_count,
            memory_ids: self.memory_ids,
            reasons: self.reasons,
        };
        (pack, self.contents)
    }
}

/// Ranked memories packed as the task's matches, their costs counted here.
#[cfg(test)]
fn pack(ranked: Vec<Ranked>, budget: usize) -> (ContextPack, HashMap<String, String>) {
    let costs = ranked
        .iter()
        .map(|ranked| {
            (ranked.memory.id.clone(), tokens::count_tokens(&format_entry(&ranked.memory)))
        })
        .collect();
    let mut packer = Packer::new(budget);
    packer.add_all(ranked, MATCHES, &costs);
    packer.finish()
}

/// One memory as a list item: `- [scope] text`, later lines indented under it.
pub(crate) fn format_entry(memory: &Memory) -> String {
    let mut entry = format!("- [{}] ", memory.scope);
    for (index, line) in memory.content.trim().lines().enumerate() {
        if index > 0 {
            entry.push_str("\n  ");
        }
        entry.push_str(line.trim_end());
    }
    entry.push('\n');
    entry
}

/// How many of a file's directories, nearest first, a memory may name to count as about it.
const MAX_DIRECTORIES: usize = 8;

/// The names a memory may use for a file: its path, its file name, its directories.
struct FileNames {
    path: String,
    file_name: String,
    directories: Vec<String>,
    /// The path's words, for the full-text query.
    words: String,
}

impl FileNames {
    fn of(path: &str) -> FileNames {
        let path = path.trim().trim_start_matches("./").to_owned();
        let parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
        let file_name = parts.last().copied().unwrap_or_default().to_owned();
        // The nearest directories say most about a file; deep paths keep only those.
        let first = parts.len().saturating_sub(MAX_DIRECTORIES + 1).max(1);
        let directories =
            (first..parts.len()).map(|end| format!("{}/", parts[..end].join("/"))).collect();
        let words = parts.join(" ").replace(['.', '_', '-'], " ");
        FileNames { path, file_name, directories, words }
    }

    /// 0.3 when `content` names the file, 0.15 when it names one of its directories.
    fn mention_weight(&self, content: &str) -> f64 {
        if content.contains(&self.path)
            || (!self.file_name.is_empty() && content.contains(&self.file_name))
        {
            0.3
        } else if self.directories.iter().any(|directory| content.contains(directory.as_str())) {
            0.15
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_memory;
    use cairn_types::{ContextRequest, Scope};

    use super::*;

    #[test]
    fn packs_best_first_within_the_budget() {
        let long = sample_memory(&"lorem ipsum dolor ".repeat(40), Scope::Repo, 0);
        let short = sample_memory("Use pnpm.\nNot npm.", Scope::Repo, 0);
        let ranked =
            vec![Ranked { memory: long, score: 1.0 }, Ranked { memory: short.clone(), score: 0.5 }];
        let (packed, _) = pack(ranked, 20);
        assert_eq!(
            packed.memory_ids,
            vec![short.id],
            "a memory too large is skipped, smaller ones still fit"
        );
        assert_eq!(packed.context, "- [repo] Use pnpm.\n  Not npm.\n");
        assert_eq!(packed.token_count, tokens::count_tokens(&packed.context));
        assert!(packed.token_count <= 20);
    }

    #[test]
    fn a_context_counts_as_the_sum_of_its_entries() {
        let awkward = [
            "Ends with punctuation!",
            "Trailing spaces   \n\n  and blank lines\r\n",
            "Emoji 🦀🚀 and CJK 漢字かな, numbers 1234567",
            "```rust\nfn main() { println!(\"hi\"); }\n```",
            "- a nested list\n- [x] done\n",
            "'quoted' words don't split's",
            "   leading space, tab\tinside",
            "/// slashes // and paths src/lib.rs/",
            "ÀÉÎÕÜ ß ﬁ ligature, ٣٤٥ digits",
        ];
        let entries: Vec<String> = awkward
            .iter()
            .enumerate()
            .map(|(i, text)| format_entry(&sample_memory(text, Scope::ALL[i % 4], 0)))
            .collect();
        for first in &entries {
            for second in &entries {
                let joined = format!("{first}{second}");
                assert_eq!(
                    tokens::count_tokens(&joined),
                    tokens::count_tokens(first) + tokens::count_tokens(second),
                    "{joined:?}"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn entries_the_cache_lacks_are_counted_and_kept() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let store: std::sync::Arc<dyn cairn_store::Store> = std::sync::Arc::new(store.unwrap());
        let new = |content: &str| crate::testing::memory(content, Scope::User);
        let inputs = vec![new("Use pnpm, not npm."), new("pnpm store lives in ~/.pnpm-store")];
        let created = Engine::new(store.clone()).create_memories(inputs, "tester").await.unwrap();
        // A new engine over the same store counts nothing ahead, as after a restart.
        let engine = Engine::new(store);
        assert!(created.iter().all(|memory| engine.entry_tokens.get(memory).is_none()));

        let request =
            ContextRequest { task: "pnpm".to_owned(), repo: None, token_budget: Some(100) };
        let pack = engine.context(request).await.unwrap();
        assert_eq!(pack.memories_used, 2, "{}", pack.context);
        assert_eq!(pack.token_count, tokens::count_tokens(&pack.context));
        for memory in &created {
            let counted = tokens::count_tokens(&format_entry(memory));
            assert_eq!(engine.entry_tokens.get(memory), Some(counted), "kept for the next pack");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_single_create_is_counted_ahead_and_a_batch_by_the_packs_that_use_it() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(std::sync::Arc::new(store.unwrap()));
        let new = |content: &str| crate::testing::memory(content, Scope::User);
        let single = engine.create_memory(new("Use pnpm, not npm."), "tester").await.unwrap();
        let counted = tokens::count_tokens(&format_entry(&single));
        let waited = std::time::Instant::now();
        while engine.entry_tokens.get(&single) != Some(counted) {
            assert!(waited.elapsed() < std::time::Duration::from_secs(10), "never counted");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let inputs = vec![new("pnpm store lives in ~/.pnpm-store"), new("pnpm workspaces")];
        let batch = engine.create_memories(inputs, "tester").await.unwrap();
        assert!(batch.iter().all(|memory| engine.entry_tokens.get(memory).is_none()));

        let request =
            ContextRequest { task: "pnpm".to_owned(), repo: None, token_budget: Some(200) };
        let pack = engine.context(request).await.unwrap();
        assert_eq!(pack.memories_used, 3, "{}", pack.context);
        assert_eq!(pack.token_count, tokens::count_tokens(&pack.context));
        for memory in &batch {
            let counted = tokens::count_tokens(&format_entry(memory));
            assert_eq!(engine.entry_tokens.get(memory), Some(counted), "counted by the pack");
        }
    }

    #[test]
    fn file_names_match_paths_names_and_directories() {
        let names = FileNames::of("./crates/store/src/lib.rs");
        assert_eq!(names.mention_weight("see crates/store/src/lib.rs"), 0.3);
        assert_eq!(names.mention_weight("lib.rs is generated"), 0.3);
        assert_eq!(names.mention_weight("everything in crates/store/ is async"), 0.15);
        assert_eq!(names.mention_weight("unrelated"), 0.0);
    }
}
