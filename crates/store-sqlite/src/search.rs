//! Full-text search planned by term selectivity.
//!
//! FTS5 computes BM25 for every row a query matches, at about a microsecond a row, so an OR
//! of all a task's words costs tens of milliseconds at 100,000 memories when one of them is
//! common ("build", "test"). The planner measures how many memories contain each word
//! (cached per word, re-measured as the corpus grows), then asks FTS5 for the rows that
//! contain a selective word, or, when every word is common, all of them: BM25 weighs
//! selective words an order of magnitude more than common ones, so the best hits are nearly
//! always among those rows. A window over the newest matches bounds the rows scored, and
//! when the plan finds very few rows, the rows holding any word are added.

use std::collections::HashMap;
use std::sync::Mutex;

use cairn_store::{MemoryFilter, Result, TextMatch};
use rusqlite::{Connection, params};

use crate::rows::{MEMORY_COLUMNS, memory_from_row};
use crate::{FILTER_SQL, filter_params, sql};

/// How many matching rows the selective words may bring in together.
const SELECTIVE_ROWS: u64 = 1_000;
/// The most rows one query scores: the newest matches when the words are all common.
const SCORED_ROWS: u32 = 600;
/// Fewer hits than this from the plan widen the search to any word.
const FEW_HITS: usize = 5;
/// Cached word frequencies are measured again once the corpus has grown by a quarter.
const REMEASURE_GROWTH: f64 = 1.25;
const MAX_CACHED_WORDS: usize = 100_000;
/// Only words in at least this many memories are worth caching.
const CACHED_FROM_DOCUMENTS: u64 = 100;

/// How many memories contain each word, measured lazily.
#[derive(Debug, Default)]
pub(crate) struct WordFrequencies {
    cache: Mutex<HashMap<String, Measured>>,
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    documents: u64,
    corpus: u64,
}

impl WordFrequencies {
    fn documents(&self, connection: &Connection, word: &str, corpus: u64) -> Result<u64> {
        let cached = self.cache.lock().expect("cache lock").get(word).copied();
        let fresh =
            |measured: &Measured| corpus as f64 <= measured.corpus.max(1) as f64 * REMEASURE_GROWTH;
        if let Some(measured) = cached.filter(fresh) {
            return Ok(measured.documents);
        }
        let documents: i64 = connection
            .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
            .map_err(sql)?
            .query_row([quote(word)], |row| row.get(0))
            .map_err(sql)?;
        if (documents as u64) < CACHED_FROM_DOCUMENTS {
            // Rare words are cheap to count, and their counts change fastest in relative
            // terms: a word nobody has written yet must be found once somebody does.
            return Ok(documents as u64);
        }
        let mut cache = self.cache.lock().expect("cache lock");
        if cache.len() >= MAX_CACHED_WORDS {
            cache.clear();
        }
        cache.insert(word.to_owned(), Measured { documents: documents as u64, corpus });
        Ok(documents as u64)
    }
}

/// Finds up to `limit` memories matching `words`, most relevant first.
pub(crate) fn search(
    connection: &Connection,
    frequencies: &WordFrequencies,
    corpus: u64,
    words: &[String],
    filter: &MemoryFilter,
    limit: u32,
) -> Result<Vec<TextMatch>> {
    let mut measured = Vec::with_capacity(words.len());
    for word in words {
        let documents = frequencies.documents(connection, word, corpus)?;
        if documents > 0 {
            measured.push((word.as_str(), documents));
        }
    }
    if measured.is_empty() {
        return Ok(Vec::new());
    }
    measured.sort_by_key(|&(_, documents)| documents);
    let plan = plan(&measured);
    let mut hits = run(connection, &plan, filter, limit)?;
    let any = any_of(words);
    if hits.len() < (limit as usize).min(FEW_HITS) && plan != any {
        // Few rows held a selective word or all the common ones: add the best of the rows
        // holding any word. BM25 uses the same corpus statistics in both queries, so the
        // scores compare.
        for hit in run(connection, &any, filter, limit)? {
            if !hits.iter().any(|known| known.memory.id == hit.memory.id) {
                hits.push(hit);
            }
        }
        hits.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
        hits.truncate(limit as usize);
    }
    Ok(hits)
}

/// The FTS5 expression: the selective words (rarest first, as long as they match at most
/// [`SELECTIVE_ROWS`] rows together); when every word is common, all of them together.
///
/// Common words are left out when selective ones exist: BM25 weighs them an order of
/// magnitude less, and walking their long posting lists is what makes a query slow.
fn plan(measured: &[(&str, u64)]) -> String {
    let mut selective = Vec::new();
    let mut rows = 0;
    for &(word, documents) in measured {
        if rows + documents > SELECTIVE_ROWS {
            break;
        }
        selective.push(quote(word));
        rows += documents;
    }
    if !selective.is_empty() {
        return selective.join(" OR ");
    }
    let common: Vec<String> = measured.iter().map(|(word, _)| quote(word)).collect();
    common.join(" AND ")
}

fn any_of(words: &[String]) -> String {
    words.iter().map(|word| quote(word)).collect::<Vec<_>>().join(" OR ")
}

/// A word as an FTS5 string: data, never query syntax.
pub(crate) fn quote(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// Scores at most [`SCORED_ROWS`] matches (the newest), keeps the best, then reads and
/// filters only those rows. With filters, every scored row is a candidate.
fn run(
    connection: &Connection,
    expression: &str,
    filter: &MemoryFilter,
    limit: u32,
) -> Result<Vec<TextMatch>> {
    let unfiltered = filter.scope.is_none() && filter.status.is_none() && filter.repo.is_none();
    // Archived memories are rare; a margin keeps the page full after they are dropped.
    let preselect =
        if unfiltered { limit.saturating_add(limit / 2).saturating_add(10) } else { SCORED_ROWS };
    let (scope, status, repo, _) = filter_params(filter);
    // bm25() is lower for better matches; content weighs twice as much as tags.
    let query = format!(
        "SELECT {MEMORY_COLUMNS}, best.score AS score FROM (
             SELECT rowid, score FROM (
                 SELECT rowid, bm25(memories_fts, 2.0, 1.0) AS score FROM memories_fts
                 WHERE memories_fts MATCH ?5 ORDER BY rowid DESC LIMIT ?7
             ) ORDER BY score LIMIT ?8
         ) AS best JOIN memories m ON m.rowid = best.rowid
         WHERE {FILTER_SQL} ORDER BY best.score LIMIT ?6"
    );
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let rows = statement
        .query_map(
            params![scope, status, repo, false, expression, limit, SCORED_ROWS, preselect],
            |row| {
                let score: f64 = row.get("score")?;
                Ok(memory_from_row(row).map(|memory| TextMatch { memory, relevance: -score }))
            },
        )
        .map_err(sql)?;
    rows.map(|row| row.map_err(sql)?).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_keep_selective_words_or_require_every_common_one() {
        assert_eq!(plan(&[("parser", 40), ("flaky", 300)]), r#""parser" OR "flaky""#);
        assert_eq!(
            plan(&[("parser", 40), ("flaky", 300), ("build", 40_000)]),
            r#""parser" OR "flaky""#,
            "common words are left out when selective ones exist"
        );
        assert_eq!(plan(&[("build", 40_000), ("test", 50_000)]), r#""build" AND "test""#);
        assert_eq!(plan(&[("build", 40_000)]), r#""build""#);
    }

    #[test]
    fn quoting_makes_words_data() {
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }
}
