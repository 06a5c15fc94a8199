//! The backend-neutral half of full-text search: which rows a query considers.
//!
//! Scoring every row a query matches costs about a microsecond a row, so an OR of all a
//! task's words costs tens of milliseconds at 100,000 memories when one of them is common
//! ("build", "test"). A backend measures how many memories hold each word (cached here per
//! word, measured again as the corpus grows), then asks for the rows that hold a selective
//! word, or, when every word is common, all of them ([`plan`]): BM25 weighs selective words
//! an order of magnitude more than common ones, so the best hits are nearly always among
//! those rows. When the plan finds fewer than [`FEW_HITS`], the rows holding any word are
//! added. Each backend runs the plan its own way (an FTS5 expression; a postings query).

mod cell;
mod index;
mod porter;
mod tokens;

pub use cell::{Held, IndexCell};
pub use index::{DocLabels, LabelFilter, TextIndex};
pub use tokens::{Document, tokenize};

use std::collections::HashMap;
use std::sync::Mutex;

/// Where a store's full-text searches run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// On the in-memory index.
    Ready,
    /// On the database's own full-text search, while the index is built at start.
    Building,
    /// On the database's own: the store keeps no index, or it may have missed changes (a
    /// PostgreSQL listener that is down) until it is built again.
    Fallback,
}

impl IndexState {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Ready => "ready",
            IndexState::Building => "building",
            IndexState::Fallback => "fallback",
        }
    }
}

/// How many matching rows the selective words may bring in together.
pub const SELECTIVE_ROWS: u64 = 1_000;
/// Fewer hits than this from the plan widen the search to any word.
pub const FEW_HITS: usize = 5;
/// Cached word frequencies are measured again once the corpus has grown by a quarter.
const REMEASURE_GROWTH: f64 = 1.25;
const MAX_CACHED_WORDS: usize = 100_000;
/// Only words in at least this many memories are worth caching.
const CACHED_FROM_DOCUMENTS: u64 = 100;

/// How many memories hold each common word, as a backend last measured it.
#[derive(Debug, Default)]
pub struct WordFrequencies {
    cache: Mutex<HashMap<String, Measured>>,
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    documents: u64,
    corpus: u64,
}

impl WordFrequencies {
    /// The memories holding `word`, when measured since the corpus (now `corpus` memories)
    /// grew by a quarter; `None`: measure it, then [`WordFrequencies::remember`] it.
    pub fn cached(&self, word: &str, corpus: u64) -> Option<u64> {
        let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(word).copied();
        let fresh =
            |measured: &Measured| corpus as f64 <= measured.corpus.max(1) as f64 * REMEASURE_GROWTH;
        cached.filter(fresh).map(|measured| measured.documents)
    }

    /// Keeps a measurement of `word` in a corpus of `corpus` memories.
    pub fn remember(&self, word: &str, documents: u64, corpus: u64) {
        if documents < CACHED_FROM_DOCUMENTS {
            // Rare words are cheap to count, and their counts change fastest in relative
            // terms: a word nobody has written yet must be found once somebody does.
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED_WORDS {
            cache.clear();
        }
        cache.insert(word.to_owned(), Measured { documents, corpus });
    }
}

/// Which rows a query considers: (word, memories holding it) pairs.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Rows holding any of these words.
    Any(Vec<(String, u64)>),
    /// Rows holding every one of these words.
    All(Vec<(String, u64)>),
}

impl Plan {
    /// The plan's words with their frequencies.
    pub fn phrases(&self) -> &[(String, u64)] {
        match self {
            Plan::Any(phrases) | Plan::All(phrases) => phrases,
        }
    }
}

/// From words measured and sorted rarest first: the selective words (as long as they match
/// at most [`SELECTIVE_ROWS`] rows together); when every word is common, all of them
/// together. Common words are left out when selective ones exist: BM25 weighs them an order
/// of magnitude less, and walking their long posting lists is what makes a query slow.
pub fn plan(measured: &[(String, u64)]) -> Plan {
    let mut selective = Vec::new();
    let mut rows = 0;
    for (word, documents) in measured {
        if rows + documents > SELECTIVE_ROWS {
            break;
        }
        selective.push((word.clone(), *documents));
        rows += documents;
    }
    if selective.is_empty() { Plan::All(measured.to_vec()) } else { Plan::Any(selective) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(words: &[(&str, u64)]) -> Vec<(String, u64)> {
        words.iter().map(|(word, documents)| ((*word).to_owned(), *documents)).collect()
    }

    #[test]
    fn plans_keep_selective_words_or_require_every_common_one() {
        assert_eq!(
            plan(&measured(&[("parser", 40), ("flaky", 300)])),
            Plan::Any(measured(&[("parser", 40), ("flaky", 300)]))
        );
        assert_eq!(
            plan(&measured(&[("parser", 40), ("flaky", 300), ("build", 40_000)])),
            Plan::Any(measured(&[("parser", 40), ("flaky", 300)])),
            "common words are left out when selective ones exist"
        );
        assert_eq!(
            plan(&measured(&[("build", 40_000), ("test", 50_000)])),
            Plan::All(measured(&[("build", 40_000), ("test", 50_000)]))
        );
    }

    #[test]
    fn common_words_are_cached_until_the_corpus_grows_by_a_quarter() {
        let frequencies = WordFrequencies::default();
        frequencies.remember("build", 400, 1_000);
        frequencies.remember("parser", 3, 1_000);
        assert_eq!(frequencies.cached("build", 1_250), Some(400));
        assert_eq!(frequencies.cached("build", 1_251), None, "measured again");
        assert_eq!(frequencies.cached("parser", 1_000), None, "rare words are always counted");
    }
}
