//! `cairn-bench eval` on LongMemEval (Wu et al., 2024, "LongMemEval: Benchmarking Chat
//! Assistants on Long-Term Interactive Memory"): each question comes with its own haystack of
//! chat sessions, some of which (`answer_session_ids`) hold the answer, and in them the turns
//! marked `has_answer`.
//!
//! Retrieval only, no language model at any step: for every question a fresh store gets every
//! turn of its haystack as a memory (`User: text` / `Assistant: text`, in the order of the
//! sessions), and the question is asked as a search in each retrieval mode (100 hits). The
//! sessions are ranked by their best turn. Reported, overall and by question type:
//! session-level recall_any@5 and recall_all@5 (any / every evidence session among the first
//! five sessions), turn-level recall_any@10 and recall_all@10, and session MRR. Abstention
//! questions (`_abs`, whose sessions do not hold the answer) are left out, as in the
//! benchmark's own retrieval evaluation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use cairn_memory::Engine;
use cairn_memory::embed::Embedder;
use cairn_store_sqlite::SqliteStore;
use cairn_types::{NewMemory, RetrievalMode, Scope, SearchQuery};
use serde::Deserialize;

use crate::eval::EvalOptions;

/// One question of the file, with its haystack.
#[derive(Deserialize)]
pub(crate) struct Item {
    question_id: String,
    question_type: String,
    question: String,
    haystack_session_ids: Vec<String>,
    haystack_sessions: Vec<Vec<Turn>>,
    answer_session_ids: Vec<String>,
}

#[derive(Deserialize)]
struct Turn {
    role: String,
    content: String,
    #[serde(default)]
    has_answer: bool,
}

/// Whether a parsed JSON file is in LongMemEval's form (its items carry haystacks).
pub(crate) fn is_longmemeval(items: &[serde_json::Value]) -> bool {
    items.first().is_some_and(|item| item.get("haystack_sessions").is_some())
}

/// The hits a question asks for: enough turns to rank five sessions.
const HITS: u32 = 100;

/// Sums over questions.
#[derive(Default, Clone, Copy)]
struct Score {
    session_any5: f64,
    session_all5: f64,
    turn_any10: f64,
    turn_all10: f64,
    session_reciprocal_rank: f64,
    /// Questions with turns marked as holding the answer (the turn-level figures' count).
    turn_questions: usize,
    questions: usize,
}

impl Score {
    fn add(&mut self, other: &Score) {
        self.session_any5 += other.session_any5;
        self.session_all5 += other.session_all5;
        self.turn_any10 += other.turn_any10;
        self.turn_all10 += other.turn_all10;
        self.session_reciprocal_rank += other.session_reciprocal_rank;
        self.turn_questions += other.turn_questions;
        self.questions += other.questions;
    }

    fn row(&self, name: &str) -> String {
        let q = self.questions.max(1) as f64;
        let t = self.turn_questions.max(1) as f64;
        format!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            self.questions,
            self.session_any5 / q,
            self.session_all5 / q,
            self.session_reciprocal_rank / q,
            self.turn_any10 / t,
            self.turn_all10 / t,
        )
    }
}

/// Scores one question's ranked turns: `ranked` holds each hit's (session, holds the answer).
fn score(
    ranked: &[(usize, bool)],
    evidence_sessions: &HashSet<usize>,
    answer_turns: usize,
) -> Score {
    let mut sessions: Vec<usize> = Vec::new();
    for (session, _) in ranked {
        if !sessions.contains(session) {
            sessions.push(*session);
        }
    }
    let first5: HashSet<usize> = sessions.iter().take(5).copied().collect();
    let found = evidence_sessions.iter().filter(|session| first5.contains(session)).count();
    let turns_found = ranked.iter().take(10).filter(|(_, answer)| *answer).count();
    let one = |yes: bool| f64::from(u8::from(yes));
    Score {
        session_any5: one(found > 0),
        session_all5: one(found == evidence_sessions.len()),
        session_reciprocal_rank: sessions
            .iter()
            .position(|session| evidence_sessions.contains(session))
            .map_or(0.0, |rank| 1.0 / (rank + 1) as f64),
        turn_any10: one(answer_turns > 0 && turns_found > 0),
        turn_all10: one(answer_turns > 0 && turns_found == answer_turns),
        turn_questions: usize::from(answer_turns > 0),
        questions: 1,
    }
}

pub(crate) async fn run(
    options: &EvalOptions,
    items: Vec<serde_json::Value>,
    embedder: &Option<Arc<dyn Embedder>>,
) -> anyhow::Result<()> {
    let mut items: Vec<Item> = items
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(|error| anyhow::anyhow!("not a LongMemEval file: {error}"))?;
    items.retain(|item| !item.question_id.ends_with("_abs"));
    if let Some(keep) = options.questions {
        items.truncate(keep);
    }
    let modes: Vec<RetrievalMode> = if embedder.is_some() {
        vec![RetrievalMode::Fulltext, RetrievalMode::Semantic, RetrievalMode::Hybrid]
    } else {
        vec![RetrievalMode::Fulltext]
    };
    // By mode, then by question type.
    let mut scores: HashMap<RetrievalMode, BTreeMap<String, Score>> = HashMap::new();
    let started = std::time::Instant::now();
    for (number, item) in items.iter().enumerate() {
        let directory = tempfile::tempdir()?;
        let mut engine =
            Engine::new(Arc::new(SqliteStore::open(&directory.path().join("cairn.db"))?));
        if let Some(embedder) = embedder {
            engine = engine.with_embedder(embedder.clone());
        }
        let evidence_sessions: HashSet<usize> = item
            .haystack_session_ids
            .iter()
            .enumerate()
            .filter(|(_, id)| item.answer_session_ids.contains(id))
            .map(|(index, _)| index)
            .collect();
        let mut inputs = Vec::new();
        let mut turns: Vec<(usize, bool)> = Vec::new();
        for (session, haystack) in item.haystack_sessions.iter().enumerate() {
            for turn in haystack.iter().filter(|turn| !turn.content.trim().is_empty()) {
                inputs.push(NewMemory {
                    content: memory_text(&turn.role, &turn.content),
                    scope: Scope::User,
                    repo: None,
                    tags: Vec::new(),
                    source: None,
                    metadata: Default::default(),
                });
                turns.push((session, turn.has_answer));
            }
        }
        let created = engine.create_memories(inputs, "system:eval").await?;
        let by_id: HashMap<String, (usize, bool)> =
            created.into_iter().map(|memory| memory.id).zip(turns.iter().copied()).collect();
        let answer_turns = turns.iter().filter(|(_, answer)| *answer).count();
        engine.embeddings_settled().await?;
        for mode in &modes {
            let query = SearchQuery {
                q: Some(item.question.clone()),
                limit: Some(HITS),
                mode: Some(*mode),
                ..SearchQuery::default()
            };
            let hits = engine.search(query).await?;
            let ranked: Vec<(usize, bool)> =
                hits.hits.iter().filter_map(|hit| by_id.get(&hit.memory.id).copied()).collect();
            let one = score(&ranked, &evidence_sessions, answer_turns);
            let by_type = scores.entry(*mode).or_default();
            by_type.entry(item.question_type.clone()).or_default().add(&one);
        }
        if (number + 1) % 25 == 0 {
            eprintln!(
                "{} of {} questions ({:.0} s)",
                number + 1,
                items.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "| retrieval | questions | session recall_any@5 | session recall_all@5 | session MRR | \
         turn recall_any@10 | turn recall_all@10 |\n|---|---|---|---|---|---|---|"
    );
    for mode in &modes {
        let mut all = Score::default();
        for score in scores[mode].values() {
            all.add(score);
        }
        println!("{}", all.row(&format!("search, {}", mode.as_str())));
    }
    for mode in &modes {
        for (kind, score) in &scores[mode] {
            println!("{}", score.row(&format!("search, {}, {kind}", mode.as_str())));
        }
    }
    Ok(())
}

/// A turn as a memory: `User: text` or `Assistant: text`.
fn memory_text(role: &str, content: &str) -> String {
    let mut speaker = role.to_owned();
    if let Some(first) = speaker.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    let mut text = format!("{speaker}: {}", content.trim());
    // The store's limit on a memory's text; a longer turn keeps its beginning.
    let limit = cairn_types::MAX_CONTENT_BYTES;
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_ranked_by_their_best_turn() {
        // Turns of sessions 3, 3, 1, 0, 2, 4, 5: the sessions in order are 3, 1, 0, 2, 4, 5.
        let ranked =
            [(3, false), (3, false), (1, true), (0, false), (2, false), (4, false), (5, true)];
        let evidence: HashSet<usize> = [1, 5].into();
        let score = score(&ranked, &evidence, 2);
        assert_eq!(score.session_any5, 1.0, "session 1 is second");
        assert_eq!(score.session_all5, 0.0, "session 5 is sixth");
        assert_eq!(score.session_reciprocal_rank, 0.5);
        assert_eq!(
            (score.turn_any10, score.turn_all10),
            (1.0, 1.0),
            "both answer turns are in the first 10"
        );
        let none = super::score(&[(0, false)], &evidence, 0);
        assert_eq!((none.session_any5, none.turn_questions), (0.0, 0));
    }

    #[test]
    fn turns_become_memories_with_their_speaker() {
        assert_eq!(memory_text("user", " I moved to Denver. "), "User: I moved to Denver.");
        assert_eq!(memory_text("assistant", "Nice!"), "Assistant: Nice!");
        let long = memory_text("user", &"é".repeat(cairn_types::MAX_CONTENT_BYTES));
        assert!(long.len() <= cairn_types::MAX_CONTENT_BYTES && long.starts_with("User: é"));
    }
}
