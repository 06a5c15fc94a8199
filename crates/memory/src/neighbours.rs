//! Neighbour propagation: a memory stored right before or after a strong match, in the same
//! thread, shares part of its score.
//!
//! Memories written in sequence by one writer (the turns of a conversation, the notes of one
//! session) answer each other: "Did you finish the marathon?" / "Yes, in four hours!" — the
//! answer holds none of the question's words. Retrieval over single turns misses such
//! answers; adding a fraction of each strong match's relevance to its neighbours finds them
//! (neighbouring turns' context lifts recall by several points in published ablations on
//! conversational memory). The store says which side a neighbour is on: the memory after one
//! that asks gets more (it most often answers), and the memory one further on gets a little
//! when it is a candidate already (an answer two turns on, after a remark). The neighbours
//! are read by index lookups (two per match and two per neighbour), never by a scan, and
//! only the best matches spread their score.

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
/// How many times [`SHARE`] a memory that asks passes to the memory after it, which most
/// often answers it (1.5, 2 and 3 measured; 2 best on the half of the development set it
/// was chosen on and on the other half).
const ASKED_PASSES: f64 = 2.0;
/// The share the memory one further away gets (the neighbour's neighbour on the far side
/// from the match) when it matched or joined already: a question is often answered two
/// turns on, after a remark. It reorders; it brings no memory in on its own (a note two
/// away from a match, holding no word of the query, is too weak a guess to fill a pack).
const FAR_SHARE: f64 = 0.1;
/// Neighbours further apart in time than this are not one thread.
const SAME_THREAD_MILLIS: i64 = 60 * 60 * 1000;

/// A first-ring neighbour, whose far side gets [`FAR_SHARE`] of its seed's relevance.
struct Ring {
    near: Memory,
    /// Whether `near` was stored after the seed.
    after: bool,
    relevance: f64,
}

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
    let mut bonus: HashMap<String, f64> = HashMap::new();
    let mut joining: Vec<Memory> = Vec::new();
    let mut pass = |memory: Memory, share: f64| {
        *bonus.entry(memory.id.clone()).or_default() += share;
        if !positions.contains_key(&memory.id) && !joining.iter().any(|m| m.id == memory.id) {
            joining.push(memory);
        }
    };
    // The first ring: each seed's neighbours.
    let mut rings: Vec<Ring> = Vec::new();
    for near in store.adjacent_memories(&seeds).await? {
        let seed = &ranked[positions[&near.of]];
        if seed.relevance <= 0.0
            || !same_thread(&seed.memory, &near.memory)
            || !admits(filter, &near.memory)
        {
            continue;
        }
        let answers = near.after && crate::cues::asks(&seed.memory.content);
        let share = if answers { SHARE * ASKED_PASSES } else { SHARE };
        rings.push(Ring {
            near: near.memory.clone(),
            after: near.after,
            relevance: seed.relevance,
        });
        pass(near.memory, share * seed.relevance);
    }
    // The second: the neighbour's own neighbour, on the side away from the seed.
    let mut nearest: Vec<String> = rings.iter().map(|ring| ring.near.id.clone()).collect();
    nearest.sort_unstable();
    nearest.dedup();
    let far_side = match nearest.is_empty() {
        true => Vec::new(),
        false => store.adjacent_memories(&nearest).await?,
    };
    for far in far_side {
        // The far side reorders what matched or joined; it brings nothing in on its own.
        let id = &far.memory.id;
        if !positions.contains_key(id) && !bonus.contains_key(id) {
            continue;
        }
        for ring in rings.iter().filter(|ring| ring.near.id == far.of && ring.after == far.after) {
            if same_thread(&ring.near, &far.memory) && admits(filter, &far.memory) {
                *bonus.entry(id.clone()).or_default() += FAR_SHARE * ring.relevance;
            }
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
             thread (the memory after it, two from the match, is not brought in); the note of \
             another source before that match is not of the thread, and the weakest match \
             passes nothing on"
        );
        assert_eq!(
            contents(&engine, "makefiles").await,
            ["Tabs in makefiles, always."],
            "a match whose neighbours are of another source passes on nothing"
        );
    }

    #[tokio::test]
    async fn a_question_passes_more_to_the_memory_after_it_than_to_the_one_before() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let engine = Engine::new(Arc::new(store.unwrap()));
        let chat = Some("chat");
        let memories = vec![
            memory("Caroline: I finally finished the quilt for my niece.", chat, Scope::User),
            memory("Melanie: How was the pottery class?", chat, Scope::User),
            memory("Caroline: Loved it, I made two bowls and a mug.", chat, Scope::User),
        ];
        engine.create_memories(memories, "tester").await.unwrap();

        let found = contents(&engine, "pottery class").await;
        let rank = |text: &str| found.iter().position(|hit| hit.starts_with(text)).unwrap();
        assert_eq!(found.len(), 3, "both neighbours join: {found:?}");
        assert!(
            rank("Caroline: Loved it") < rank("Caroline: I finally"),
            "neither neighbour holds a word of the query; the one after the question answers \
             it: {found:?}"
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
