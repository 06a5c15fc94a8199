//! Neighbour propagation: a memory stored right before or after a strong match, in the same
//! thread, shares part of its score.
//!
//! Memories written in sequence by one writer (the turns of a conversation, the notes of one
//! session) answer each other: "Did you finish the marathon?" / "Yes, in four hours!" — the
//! answer holds none of the question's words. Retrieval over single turns misses such
//! answers; adding a fraction of each strong match's relevance to its neighbours finds them
//! (neighbouring turns' context lifts recall by several points in published ablations on
//! conversational memory). The neighbours are read by two index lookups per match, never by
//! a scan, and only the best matches spread their score.

use std::collections::HashMap;

use cairn_store::{MemoryFilter, Store, TextMatch};
use cairn_types::Memory;

use crate::Result;

/// How many of the best candidates spread their relevance to their neighbours (5 and 20
/// measured no better).
const SEEDS: usize = 10;
/// The share of a match's relevance its neighbours get: 0.2 keeps MRR highest, 0.5 trades
/// too much of it for recall; 0.35 between them.
const SHARE: f64 = 0.35;
/// What a memory that asks (its text ends with a question mark) keeps of its own relevance:
/// the question is rarely the answer, which is usually the next memory, and the question
/// passes its whole share on to it. 0.3 measured best of 0.15, 0.3 and 0.5 off.
const ASKING_KEEPS: f64 = 0.7;
/// Neighbours further apart in time than this are not one thread.
const SAME_THREAD_MILLIS: i64 = 60 * 60 * 1000;

/// `candidates` (best first) with their neighbours' shares added, best first; neighbours that
/// were not candidates (and pass `filter`) join with their share alone. Relevance is first
/// spread over the candidates' range (the best 1, the worst 0), so that close cosine
/// similarities do not all pass on nearly the whole share.
pub(crate) async fn propagate(
    store: &dyn Store,
    candidates: Vec<TextMatch>,
    filter: &MemoryFilter,
) -> Result<Vec<TextMatch>> {
    if candidates.is_empty() {
        return Ok(candidates);
    }
    let best = candidates.iter().map(|candidate| candidate.relevance).fold(f64::MIN, f64::max);
    let worst = candidates.iter().map(|candidate| candidate.relevance).fold(best, f64::min);
    let relative = |relevance: f64| {
        if best > worst { (relevance - worst) / (best - worst) } else { 1.0 }
    };
    let mut ranked: Vec<TextMatch> = candidates
        .into_iter()
        .map(|candidate| TextMatch { relevance: relative(candidate.relevance), ..candidate })
        .collect();
    let positions: HashMap<String, usize> = ranked
        .iter()
        .enumerate()
        .map(|(position, hit)| (hit.memory.id.clone(), position))
        .collect();
    let seeds: Vec<String> = ranked.iter().take(SEEDS).map(|hit| hit.memory.id.clone()).collect();
    let adjacent = store.adjacent_memories(&seeds).await?;
    let mut bonus: HashMap<String, f64> = HashMap::new();
    let mut joining: Vec<Memory> = Vec::new();
    for (seed, neighbour) in adjacent {
        let seed = &ranked[positions[&seed]];
        if seed.relevance <= 0.0
            || !same_thread(&seed.memory, &neighbour)
            || !admits(filter, &neighbour)
        {
            continue;
        }
        *bonus.entry(neighbour.id.clone()).or_default() += SHARE * seed.relevance;
        if !positions.contains_key(&neighbour.id)
            && !joining.iter().any(|memory| memory.id == neighbour.id)
        {
            joining.push(neighbour);
        }
    }
    ranked.extend(joining.into_iter().map(|memory| TextMatch { memory, relevance: 0.0 }));
    for hit in &mut ranked {
        if crate::cues::asks(&hit.memory.content) {
            hit.relevance *= ASKING_KEEPS;
        }
        hit.relevance += bonus.get(&hit.memory.id).copied().unwrap_or(0.0);
    }
    ranked.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    Ok(ranked)
}

/// Whether two memories stored one after the other belong to one thread: the same scope,
/// repository and source, written within an hour of each other.
fn same_thread(a: &Memory, b: &Memory) -> bool {
    a.scope == b.scope
        && a.repo == b.repo
        && a.source == b.source
        && (a.created_at.as_millis() - b.created_at.as_millis()).abs() <= SAME_THREAD_MILLIS
}

fn admits(filter: &MemoryFilter, memory: &Memory) -> bool {
    memory.archived_at.is_none()
        && filter.scope.is_none_or(|scope| scope == memory.scope)
        && filter.status.is_none_or(|status| status == memory.status)
        && filter.repo.as_deref().is_none_or(|repo| memory.repo.as_deref() == Some(repo))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_types::{NewMemory, RetrievalMode, Scope, SearchQuery};

    use crate::Engine;

    fn memory(content: &str, source: Option<&str>, scope: Scope) -> NewMemory {
        NewMemory {
            content: content.to_owned(),
            scope,
            repo: None,
            tags: Vec::new(),
            source: source.map(str::to_owned),
            metadata: Default::default(),
        }
    }

    async fn contents(engine: &Engine, q: &str) -> Vec<String> {
        let query = SearchQuery {
            q: Some(q.to_owned()),
            mode: Some(RetrievalMode::Fulltext),
            ..SearchQuery::default()
        };
        let result = engine.search(query).await.unwrap();
        result.hits.into_iter().map(|hit| hit.memory.content).collect()
    }

    #[tokio::test]
    async fn the_answer_after_a_matching_question_is_found_within_its_thread() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(Arc::new(store.unwrap()));
        let chat = Some("chat");
        let memories = vec![
            memory("Tabs in makefiles, always.", Some("notes"), Scope::User),
            memory("Mel: did you run the Boston marathon?", chat, Scope::User),
            memory("Caroline: Yes! Four hours, and my knees still hurt.", chat, Scope::User),
            memory("Caroline: What a day that was.", chat, Scope::User),
            memory("Mel: The Boston trip was fun.", chat, Scope::Global),
            memory("Release notes are written on Fridays.", chat, Scope::Global),
        ];
        engine.create_memories(memories, "tester").await.unwrap();

        assert_eq!(
            contents(&engine, "How did the Boston marathon go?").await,
            [
                "Mel: did you run the Boston marathon?",
                "Caroline: Yes! Four hours, and my knees still hurt.",
                "Mel: The Boston trip was fun.",
            ],
            "the answer shares no word with the question but follows the best match in its \
             thread; the note of another source before that match is not of the thread, and \
             the weakest match passes nothing on"
        );
        assert_eq!(
            contents(&engine, "makefiles").await,
            ["Tabs in makefiles, always."],
            "a match whose neighbours are of another source passes on nothing"
        );
    }

    #[tokio::test]
    async fn the_answer_ranks_above_the_question_it_answers() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(Arc::new(store.unwrap()));
        let chat = Some("chat");
        let memories = vec![
            memory("Caroline: How long was the Boston marathon?", chat, Scope::User),
            memory("Melanie: The Boston marathon took me four hours.", chat, Scope::User),
            memory("Caroline: Wow, well done!", chat, Scope::User),
            memory(
                "Melanie: Training for the next marathon starts in the spring, a long plan.",
                Some("notes"),
                Scope::User,
            ),
        ];
        engine.create_memories(memories, "tester").await.unwrap();

        let found = contents(&engine, "How long was the Boston marathon?").await;
        assert_eq!(
            found[..2],
            [
                "Melanie: The Boston marathon took me four hours.",
                "Caroline: How long was the Boston marathon?",
            ],
            "a memory that asks matches the question best but holds no answer: the one after \
             it, which tells, comes first"
        );
    }
}
