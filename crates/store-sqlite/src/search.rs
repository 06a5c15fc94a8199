//! Full-text search: the in-memory index's hits read from the table ([`read_hits`]), or,
//! while the index is being built, FTS5: the plan of [`cairn_store::fulltext`] (selective words, or
//! every common one) run as an FTS5 expression, ranked by FTS5's BM25. A window over the
//! newest matches bounds the rows scored; when the plan finds very few rows, the rows
//! holding any word are added.

use cairn_store::fulltext::{FEW_HITS, Plan, WordFrequencies, plan};
use cairn_store::{MemoryFilter, Result, StoreError, TextMatch};
use rusqlite::{Connection, params};

use crate::rows::{MEMORY_COLUMNS, memory_from_row};
use crate::{FILTER_SQL, filter_params, sql};

/// The most rows one query scores: the newest matches when the words are all common.
const SCORED_ROWS: u32 = 600;

/// How many memories hold `word` (in a corpus of `corpus`), from the cache or counted.
fn documents(
    connection: &Connection,
    frequencies: &WordFrequencies,
    word: &str,
    corpus: u64,
) -> Result<u64> {
    if let Some(documents) = frequencies.cached(word, corpus) {
        return Ok(documents);
    }
    let documents: i64 = connection
        .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")
        .map_err(sql)?
        .query_row([quote(word)], |row| row.get(0))
        .map_err(sql)?;
    frequencies.remember(word, documents as u64, corpus);
    Ok(documents as u64)
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
        let documents = documents(connection, frequencies, word, corpus)?;
        if documents > 0 {
            measured.push((word.clone(), documents));
        }
    }
    if measured.is_empty() {
        return Ok(Vec::new());
    }
    measured.sort_by_key(|&(_, documents)| documents);
    let plan = expression(&plan(&measured));
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

/// The FTS5 expression of a plan.
fn expression(plan: &Plan) -> String {
    let quoted: Vec<String> = plan.phrases().iter().map(|(word, _)| quote(word)).collect();
    match plan {
        Plan::Any(_) => quoted.join(" OR "),
        Plan::All(_) => quoted.join(" AND "),
    }
}

fn any_of(words: &[String]) -> String {
    words.iter().map(|word| quote(word)).collect::<Vec<_>>().join(" OR ")
}

/// The memories of the index's hits (`(rowid, score)`, best first) that the filter still
/// admits (a change committed after the index answered may have taken one out), in order.
pub(crate) fn read_hits(
    connection: &Connection,
    hits: &[(i64, f64)],
    filter: &MemoryFilter,
) -> Result<Vec<TextMatch>> {
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let rowids: Vec<i64> = hits.iter().map(|&(rowid, _)| rowid).collect();
    let rowids = serde_json::to_string(&rowids).map_err(StoreError::backend)?;
    let (scope, status, repo, _) = filter_params(filter);
    let query = format!(
        "SELECT {MEMORY_COLUMNS}, hit.key AS rank FROM json_each(?5) AS hit \
         JOIN memories m ON m.rowid = hit.value WHERE {FILTER_SQL} ORDER BY hit.key"
    );
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let rows = statement
        .query_map(params![scope, status, repo, false, rowids], |row| {
            let rank: i64 = row.get("rank")?;
            let relevance = hits.get(rank as usize).map_or(0.0, |&(_, score)| score);
            Ok(memory_from_row(row).map(|memory| TextMatch { memory, relevance }))
        })
        .map_err(sql)?;
    rows.map(|row| row.map_err(sql)?).collect()
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

    fn planned(measured: &[(&str, u64)]) -> String {
        let measured: Vec<(String, u64)> =
            measured.iter().map(|(word, documents)| ((*word).to_owned(), *documents)).collect();
        expression(&plan(&measured))
    }

    #[test]
    fn plans_keep_selective_words_or_require_every_common_one() {
        assert_eq!(planned(&[("parser", 40), ("flaky", 300)]), r#""parser" OR "flaky""#);
        assert_eq!(
            planned(&[("parser", 40), ("flaky", 300), ("build", 40_000)]),
            r#""parser" OR "flaky""#,
            "common words are left out when selective ones exist"
        );
        assert_eq!(planned(&[("build", 40_000), ("test", 50_000)]), r#""build" AND "test""#);
        assert_eq!(planned(&[("build", 40_000)]), r#""build""#);
    }

    #[test]
    fn quoting_makes_words_data() {
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }
}
