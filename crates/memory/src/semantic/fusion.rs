//! Fusion: the hybrid ranking, a convex combination of standardised full-text and semantic
//! scores.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_store::TextMatch;

use super::{LEXICAL_WEIGHT, Semantic};

/// The hybrid ranking of the full-text and semantic candidates: every candidate's similarity
/// is known (those only full text found are looked up in the index), so the two scores are
/// combined rather than the two ranks.
pub(crate) async fn hybrid(
    semantic: &Semantic,
    query: Arc<[f32]>,
    fulltext: Vec<TextMatch>,
    meaning: Vec<TextMatch>,
) -> Vec<TextMatch> {
    let known: HashSet<&str> = meaning.iter().map(|hit| hit.memory.id.as_str()).collect();
    let missing: Vec<String> = fulltext
        .iter()
        .filter(|hit| !known.contains(hit.memory.id.as_str()))
        .map(|hit| hit.memory.id.clone())
        .collect();
    let mut similarity: HashMap<String, f64> =
        meaning.iter().map(|hit| (hit.memory.id.clone(), hit.relevance)).collect();
    // A failed lookup (the blocking thread died) leaves them at the worst similarity.
    let looked_up = semantic.similarities(query, missing.clone()).await.unwrap_or_default();
    for (id, found) in missing.into_iter().zip(looked_up) {
        if let Some(found) = found {
            similarity.insert(id, f64::from(found.max(0.0)));
        }
    }
    combine(fulltext, meaning, &similarity, LEXICAL_WEIGHT)
}

/// Convex combination of standardised scores (Bruch et al., "An Analysis of Fusion
/// Functions for Hybrid Retrieval", TOIS 2023): `weight · z(bm25) + (1 − weight) · z(cos)`,
/// over the union of both candidate lists, where `z(x) = (x − mean) / std` over that side's
/// own candidates. A memory one side did not find gets that side's lowest standardised
/// score (no full-text match; no vector yet). Standardising rather than spreading min–max
/// keeps one outlier from squeezing the rest together: a BM25 best far above the others
/// stays far above, and close similarities stay close instead of being stretched over the
/// whole range.
pub(crate) fn combine(
    fulltext: Vec<TextMatch>,
    semantic: Vec<TextMatch>,
    similarity: &HashMap<String, f64>,
    weight: f64,
) -> Vec<TextMatch> {
    let words: HashMap<String, f64> =
        fulltext.iter().map(|hit| (hit.memory.id.clone(), hit.relevance)).collect();
    let words_scale = Standard::of(words.values().copied());
    let meaning_scale = Standard::of(similarity.values().copied());
    let mut fused: Vec<TextMatch> = Vec::with_capacity(fulltext.len() + semantic.len());
    let mut seen: HashSet<String> = HashSet::new();
    for hit in fulltext.into_iter().chain(semantic) {
        if !seen.insert(hit.memory.id.clone()) {
            continue;
        }
        let id = hit.memory.id.as_str();
        let relevance = weight * words_scale.z(words.get(id).copied())
            + (1.0 - weight) * meaning_scale.z(similarity.get(id).copied());
        fused.push(TextMatch { memory: hit.memory, relevance });
    }
    fused.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    fused
}

/// One side's scores standardised: mean and standard deviation over its candidates.
struct Standard {
    mean: f64,
    deviation: f64,
    lowest: f64,
    empty: bool,
}

impl Standard {
    fn of(scores: impl Iterator<Item = f64>) -> Standard {
        let scores: Vec<f64> = scores.collect();
        let n = scores.len().max(1) as f64;
        let mean = scores.iter().sum::<f64>() / n;
        let variance = scores.iter().map(|score| (score - mean).powi(2)).sum::<f64>() / n;
        let lowest = scores.iter().copied().fold(mean, f64::min);
        Standard { mean, deviation: variance.sqrt(), lowest, empty: scores.is_empty() }
    }

    /// The standardised score; a missing one is the lowest. When every score is the same
    /// (one candidate, say) a score is 0 and a missing one a standard unit below: a match
    /// still beats no match.
    fn z(&self, score: Option<f64>) -> f64 {
        match score {
            _ if self.empty => 0.0,
            Some(_) if self.deviation <= f64::EPSILON => 0.0,
            None if self.deviation <= f64::EPSILON => -1.0,
            score => (score.unwrap_or(self.lowest) - self.mean) / self.deviation,
        }
    }
}
