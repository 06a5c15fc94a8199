//! Ranking: full-text relevance blended with recency, recall history, scope and status.
//!
//! The blend, for a candidate with relevance `r` (BM25, cosine similarity or fused rank
//! score) among candidates whose best is `r_max` and worst `r_min`:
//!
//! ```text
//! score = (0.70 · (r - r_min) / (r_max - r_min) + 0.10 · recency + 0.10 · recall + scope + repo + boost) · status
//! recency = 0.5 ^ (days since last update or recall / 30)
//! recall  = n / (n + 3)               for n earlier recalls
//! scope   = task 0.10, repo 0.07, user 0.04, global 0
//! repo    = 0.05 when the memory belongs to the requested repository
//! status  = active 1.0, review 0.8, stale 0.6
//! ```
//!
//! Relevance dominates, so a memory that matches well is never buried by one that is only
//! recent; the rest break near-ties the way a person would. Relevance is spread over the
//! candidates' own range: cosine similarities and fused scores sit close together (0.4 to
//! 0.6, say), and dividing by the best alone would leave recall history to decide the order.

use std::cmp::Ordering;

use cairn_store::TextMatch;
use cairn_types::{Memory, Scope, Status, Timestamp};

/// The most full-text candidates ranked for one request.
pub(crate) const CANDIDATES: u32 = 200;

const DAY_MILLIS: f64 = 86_400_000.0;
const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;

/// What the request prefers, beyond the words.
#[derive(Default)]
pub(crate) struct Preferences<'a> {
    /// The repository the request is about: its memories rank higher, and another
    /// repository's memories are left out.
    pub repo: Option<&'a str>,
    /// An extra score for a memory, such as naming a file the task touches.
    pub boost: Option<&'a (dyn Fn(&Memory) -> f64 + Sync)>,
}

pub(crate) struct Ranked {
    pub memory: Memory,
    pub score: f64,
}

/// Ranks candidates, best first.
pub(crate) fn rank(
    candidates: Vec<TextMatch>,
    preferences: &Preferences<'_>,
    now: Timestamp,
) -> Vec<Ranked> {
    let best = candidates.iter().map(|candidate| candidate.relevance).fold(f64::MIN, f64::max);
    let worst = candidates.iter().map(|candidate| candidate.relevance).fold(f64::MAX, f64::min);
    let spread = best - worst;
    let relative = |relevance: f64| if spread > 0.0 { (relevance - worst) / spread } else { 1.0 };
    let mut ranked: Vec<Ranked> = candidates
        .into_iter()
        // The one repository rule: another repository's memories are left out, whatever
        // their scope.
        .filter(|candidate| crate::repo_admits(preferences.repo, candidate.memory.repo.as_deref()))
        .map(|candidate| {
            let score = score(&candidate.memory, relative(candidate.relevance), preferences, now);
            Ranked { memory: candidate.memory, score }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| b.memory.created_at.cmp(&a.memory.created_at))
    });
    ranked
}

fn score(memory: &Memory, relevance: f64, preferences: &Preferences<'_>, now: Timestamp) -> f64 {
    let last_touched = memory
        .last_recalled_at
        .map_or(memory.updated_at, |recalled| recalled.max(memory.updated_at));
    let age_days = ((now.as_millis() - last_touched.as_millis()) as f64 / DAY_MILLIS).max(0.0);
    let recency = 0.5_f64.powf(age_days / RECENCY_HALF_LIFE_DAYS);
    let recalls = memory.recall_count as f64;
    let recall = recalls / (recalls + 3.0);
    let scope = match memory.scope {
        Scope::Task => 0.10,
        Scope::Repo => 0.07,
        Scope::User => 0.04,
        Scope::Global => 0.0,
    };
    let repo = match (preferences.repo, memory.repo.as_deref()) {
        (Some(wanted), Some(own)) if wanted == own => 0.05,
        _ => 0.0,
    };
    let boost = preferences.boost.map_or(0.0, |boost| boost(memory));
    let status = match memory.status {
        Status::Active => 1.0,
        Status::Review => 0.8,
        Status::Stale => 0.6,
    };
    (0.70 * relevance + 0.10 * recency + 0.10 * recall + scope + repo + boost) * status
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_memory;

    use super::*;

    fn candidate(content: &str, scope: Scope, relevance: f64) -> TextMatch {
        TextMatch { memory: sample_memory(content, scope, 0), relevance }
    }

    #[test]
    fn relevance_dominates_and_scope_breaks_ties() {
        let now = Timestamp::from_millis(0);
        let ranked = rank(
            vec![
                candidate("global", Scope::Global, 1.0),
                candidate("task", Scope::Task, 1.0),
                candidate("weak task", Scope::Task, 0.2),
            ],
            &Preferences::default(),
            now,
        );
        let order: Vec<&str> = ranked.iter().map(|r| r.memory.content.as_str()).collect();
        assert_eq!(order, ["task", "global", "weak task"]);
    }

    #[test]
    fn other_repositories_are_left_out_and_stale_memories_sink() {
        let mut other = candidate("other repo", Scope::Repo, 1.0);
        other.memory.repo = Some("elsewhere".into());
        let mut other_task = candidate("other repo's task", Scope::Task, 1.0);
        other_task.memory.repo = Some("elsewhere".into());
        let mut stale = candidate("stale", Scope::Repo, 1.0);
        stale.memory.status = Status::Stale;
        let fresh = candidate("fresh", Scope::Repo, 1.0);
        let preferences = Preferences { repo: Some("cairn"), boost: None };
        let ranked =
            rank(vec![other, other_task, stale, fresh], &preferences, Timestamp::from_millis(0));
        let order: Vec<&str> = ranked.iter().map(|r| r.memory.content.as_str()).collect();
        assert_eq!(order, ["fresh", "stale"]);
    }

    #[test]
    fn recency_and_recall_raise_equal_matches() {
        let now = Timestamp::from_millis(100 * DAY_MILLIS as i64);
        let old = candidate("old", Scope::User, 1.0);
        let mut recalled = candidate("recalled", Scope::User, 1.0);
        recalled.memory.recall_count = 5;
        recalled.memory.last_recalled_at = Some(now);
        let ranked = rank(vec![old, recalled], &Preferences::default(), now);
        assert_eq!(ranked[0].memory.content, "recalled");
    }
}
