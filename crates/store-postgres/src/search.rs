//! Full-text search: the planner of the SQLite backend and BM25 computed in SQL from the
//! postings table, so rankings match SQLite's.
//!
//! The postings (`memory_terms`) hold the terms FTS5 would index (see [`cairn_store::fulltext::tokenize`]), per
//! column, and `memories.doc_tokens` each live memory's length, so BM25 is FTS5's
//! `bm25(memories_fts, 2.0, 1.0)`: k1 = 1.2, b = 0.75, content weighing twice the tags,
//! `idf = ln((N − n + 0.5) / (n + 0.5))` (1e-6 when not positive), N and the mean length
//! from `memory_counts`. The plan is SQLite's ([`cairn_store::fulltext`]): the rarest words
//! while their rows sum to at most a thousand, else every word required; the newest
//! [`SCORED_ROWS`] matches scored; the best of the rows holding any word added when the
//! plan finds few.
//!
//! One approximation: a query word that unicode61 splits into several tokens (FTS5 would
//! look for them as a phrase) is left out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cairn_store::fulltext::{FEW_HITS, Plan, WordFrequencies, plan};
use cairn_store::{MemoryFilter, Result, TextMatch};
use deadpool_postgres::GenericClient;

use crate::PgStore;
use crate::memories::corpus;
use crate::rows::{FILTER_SQL, MEMORY_COLUMNS, filter_params, memory_from_row, query};
use cairn_store::fulltext::tokenize;

/// The most rows one query scores: the newest matches when the words are all common.
const SCORED_ROWS: i64 = 600;

/// FTS5's BM25 constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The frequencies of one store (by its instance), kept for the life of the process.
pub(crate) fn frequencies_of(store: &PgStore) -> Arc<WordFrequencies> {
    static ALL: OnceLock<Mutex<HashMap<String, Arc<WordFrequencies>>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    all.entry(store.instance().to_owned()).or_default().clone()
}

/// How many memories hold `term` (in a corpus of `corpus`), from the cache or counted.
async fn documents(
    client: &(impl GenericClient + ?Sized),
    frequencies: &WordFrequencies,
    term: &str,
    corpus: u64,
) -> Result<u64> {
    if let Some(documents) = frequencies.cached(term, corpus) {
        return Ok(documents);
    }
    let documents: i64 =
        query(client, "SELECT count(*) FROM memory_terms WHERE term = $1", &[&term]).await?[0]
            .get(0);
    frequencies.remember(term, documents as u64, corpus);
    Ok(documents as u64)
}

/// The memories of the index's hits (`(id, score)`, best first) that the filter still
/// admits (a change committed after the index answered may have taken one out), in order.
pub(crate) async fn read_hits(
    client: &(impl GenericClient + ?Sized),
    hits: &[(String, f64)],
    filter: &MemoryFilter,
) -> Result<Vec<TextMatch>> {
    if hits.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = hits.iter().map(|(id, _)| id.as_str()).collect();
    let (scope, status, repo) = filter_params(filter);
    let rows = query(
        client,
        &format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY($5) AND {FILTER_SQL}"),
        &[&scope, &status, &repo, &false, &ids],
    )
    .await?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let memory = memory_from_row(row)?;
        found.insert(memory.id.clone(), memory);
    }
    Ok(hits
        .iter()
        .filter_map(|(id, score)| {
            found.remove(id).map(|memory| TextMatch { memory, relevance: *score })
        })
        .collect())
}

/// FTS5's idf of a phrase in `documents` of `corpus` rows.
pub(crate) fn idf(corpus: u64, documents: u64) -> f64 {
    let idf = ((corpus as f64 - documents as f64 + 0.5) / (documents as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// FTS5's BM25 of one document, from `(idf, content_tf, tags_tf)` per phrase.
#[cfg(test)]
pub(crate) fn bm25(phrases: &[(f64, i32, i32)], length: i32, average: f64) -> f64 {
    phrases
        .iter()
        .map(|&(idf, content, tags)| {
            let f = 2.0 * f64::from(content) + f64::from(tags);
            idf * (f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * f64::from(length) / average))
        })
        .sum()
}

/// Finds up to `limit` memories matching `words`, most relevant first.
pub(crate) async fn search(
    client: &(impl GenericClient + ?Sized),
    frequencies: &WordFrequencies,
    words: &[String],
    filter: &MemoryFilter,
    limit: u32,
) -> Result<Vec<TextMatch>> {
    let (corpus_rows, corpus_tokens) = corpus(client).await?;
    if corpus_rows == 0 {
        return Ok(Vec::new());
    }
    let average = corpus_tokens.max(1) as f64 / corpus_rows as f64;
    let mut any = Vec::with_capacity(words.len());
    for word in words {
        let mut tokens = tokenize(word);
        if tokens.len() != 1 {
            continue;
        }
        let term = tokens.remove(0);
        let documents = documents(client, frequencies, &term, corpus_rows).await?;
        if documents > 0 {
            any.push((term, documents));
        }
    }
    if any.is_empty() {
        return Ok(Vec::new());
    }
    let mut measured = any.clone();
    measured.sort_by_key(|(_, documents)| *documents);
    let plan = plan(&measured);
    let scoring = Scoring { corpus: corpus_rows, average };
    let mut hits = run(client, &plan, &scoring, filter, limit).await?;
    let any = Plan::Any(any);
    let same = |a: &Plan, b: &Plan| {
        matches!((a, b), (Plan::Any(_), Plan::Any(_)))
            && sorted_terms(a.phrases()) == sorted_terms(b.phrases())
    };
    if hits.len() < (limit as usize).min(FEW_HITS) && !same(&plan, &any) {
        // Few rows held a selective word or all the common ones: add the best of the rows
        // holding any word. BM25 uses the same corpus statistics in both queries, so the
        // scores compare.
        for hit in run(client, &any, &scoring, filter, limit).await? {
            if !hits.iter().any(|known| known.memory.id == hit.memory.id) {
                hits.push(hit);
            }
        }
        hits.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
        hits.truncate(limit as usize);
    }
    Ok(hits)
}

fn sorted_terms(phrases: &[(String, u64)]) -> Vec<&str> {
    let mut terms: Vec<&str> = phrases.iter().map(|(term, _)| term.as_str()).collect();
    terms.sort_unstable();
    terms
}

struct Scoring {
    corpus: u64,
    average: f64,
}

/// Scores at most [`SCORED_ROWS`] matches (the newest), keeps the best, then reads and
/// filters only those rows. With filters, every scored row is a candidate.
async fn run(
    client: &(impl GenericClient + ?Sized),
    plan: &Plan,
    scoring: &Scoring,
    filter: &MemoryFilter,
    limit: u32,
) -> Result<Vec<TextMatch>> {
    let unfiltered = filter.scope.is_none() && filter.status.is_none() && filter.repo.is_none();
    // Archived memories are rare; a margin keeps the page full after they are dropped.
    let preselect = if unfiltered {
        limit.saturating_add(limit / 2).saturating_add(10)
    } else {
        SCORED_ROWS as u32
    };
    let (scope, status, repo) = filter_params(filter);
    let phrases = plan.phrases();
    let terms: Vec<&str> = phrases.iter().map(|(term, _)| term.as_str()).collect();
    let idfs: Vec<f64> =
        phrases.iter().map(|(_, documents)| idf(scoring.corpus, *documents)).collect();
    let candidates = match plan {
        Plan::Any(_) => "SELECT DISTINCT memory_pk FROM memory_terms WHERE term = ANY($5) \
                         ORDER BY memory_pk DESC LIMIT $8"
            .to_owned(),
        Plan::All(_) => {
            // Walk the rarest term's postings newest first, probing the others.
            let mut sql =
                "SELECT t0.memory_pk FROM memory_terms t0 WHERE t0.term = ($5::text[])[1]"
                    .to_owned();
            for (n, term) in terms.iter().enumerate().skip(1) {
                if terms[..n].contains(term) {
                    continue;
                }
                sql.push_str(&format!(
                    " AND EXISTS (SELECT 1 FROM memory_terms t{n} WHERE t{n}.term = ($5::text[])[{}] \
                     AND t{n}.memory_pk = t0.memory_pk)",
                    n + 1
                ));
            }
            sql.push_str(" ORDER BY t0.memory_pk DESC LIMIT $8");
            sql
        }
    };
    // Each candidate's score is a subquery of its own, so the plan probes the primary key
    // (term, memory) once per candidate and term: a join of the candidates with the terms'
    // postings is planned as a scan of every posting of each term (the planner cannot see
    // through `unnest`), work that grows with the corpus instead of with the candidates.
    let sql = format!(
        "WITH cand AS ({candidates}), \
         q AS (SELECT term, idf FROM unnest($5::text[], $6::float8[]) AS q(term, idf)), \
         scored AS ( \
             SELECT c.memory_pk, ( \
                 SELECT sum(q.idf * ((2.0::float8 * t.content_tf + t.tags_tf) * {k1p1}) \
                     / ((2.0::float8 * t.content_tf + t.tags_tf) \
                        + {K1}::float8 * ({one_minus_b}::float8 + {B}::float8 * m.doc_tokens / $7::float8))) \
                 FROM q JOIN memory_terms t ON t.term = q.term AND t.memory_pk = c.memory_pk \
             ) AS score \
             FROM cand c JOIN memories m ON m.pk = c.memory_pk \
             ORDER BY score DESC, c.memory_pk DESC LIMIT $9 \
         ) \
         SELECT {MEMORY_COLUMNS}, s.score FROM scored s JOIN memories m ON m.pk = s.memory_pk \
         WHERE ($1::text IS NULL OR m.scope = $1) AND ($2::text IS NULL OR m.status = $2) \
         AND ($3::text IS NULL OR lower(m.repo) = lower($3)) AND ($4 OR m.archived_at IS NULL) \
         ORDER BY s.score DESC, m.pk DESC LIMIT $10",
        k1p1 = K1 + 1.0,
        one_minus_b = 1.0 - B,
    );
    let rows = query(
        client,
        &sql,
        &[
            &scope,
            &status,
            &repo,
            &false,
            &terms,
            &idfs,
            &scoring.average,
            &SCORED_ROWS,
            &i64::from(preselect),
            &i64::from(limit),
        ],
    )
    .await?;
    rows.iter()
        .map(|row| {
            let score: f64 = row.get("score");
            Ok(TextMatch { memory: memory_from_row(row)?, relevance: score })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_is_fts5s() {
        // Three documents: "deploy the deploy script" (content, 4 tokens), "deploy once"
        // (2 tokens), "tea now" (2 tokens); no tags. Corpus: N = 3, 8 tokens, avgdl 8/3;
        // "deploy" is in 2 documents. Values from FTS5's formula with k1 1.2, b 0.75 and
        // the column weight 2.0: idf = ln(1.5 / 2.5) ≤ 0, so 1e-6.
        assert_eq!(idf(3, 2), 1e-6);
        // idf with one document in three: ln(2.5 / 1.5).
        let rare = idf(3, 1);
        assert!((rare - (2.5f64 / 1.5).ln()).abs() < 1e-12);
        let average = 8.0 / 3.0;
        let score = bm25(&[(rare, 2, 0)], 4, average);
        let f = 4.0;
        let expected = rare * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * 4.0 / average));
        assert!((score - expected).abs() < 1e-12);
    }

    /// Scores equal to what SQLite's `bm25(t, 2.0, 1.0)` gives for the same five documents
    /// (the sqlite3 CLI, FTS5 with the backend's tokenizer; values in the comments of
    /// `expected`), for an any-of plan, a tag match and an all-of plan.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scores_equal_sqlites_bm25() {
        use cairn_store::MemoryStore;
        use cairn_types::Scope;

        let cluster = cairn_test_support::postgres::TestCluster::start();
        let url = cluster.create_database();
        let store = PgStore::open(crate::tests::options(&url, "bm25")).await.unwrap();
        let documents: [(&str, &[&str]); 5] = [
            ("The deploy script deploys to staging; deploy with care.", &["tooling", "deploy"]),
            ("Coffee is in the kitchen. Someone mentioned a deploy once.", &[]),
            ("Tabs, not spaces, in Makefiles.", &["tooling"]),
            ("Staging is where the care goes.", &[]),
            ("Nothing to see here at all, really nothing.", &["misc"]),
        ];
        let memories: Vec<_> = documents
            .iter()
            .enumerate()
            .map(|(n, (content, tags))| {
                let mut memory =
                    cairn_store::conformance::sample_memory(content, Scope::User, n as i64);
                memory.tags = tags.iter().map(|tag| (*tag).to_owned()).collect();
                memory
            })
            .collect();
        store.insert_memories(&memories, "tester").await.unwrap();
        let client = store.client().await.unwrap();
        let (rows, tokens) = corpus(&client).await.unwrap();
        let scoring = Scoring { corpus: rows, average: tokens as f64 / rows as f64 };
        let check = |plan: Plan, expected: Vec<(usize, f64)>| {
            let (client, scoring, memories) = (&client, &scoring, &memories);
            async move {
                let hits = run(client, &plan, scoring, &MemoryFilter::default(), 10).await.unwrap();
                let mut got: Vec<(usize, f64)> = hits
                    .iter()
                    .map(|hit| {
                        let at = memories.iter().position(|m| m.id == hit.memory.id).unwrap();
                        (at + 1, hit.relevance)
                    })
                    .collect();
                got.sort_by_key(|(row, _)| *row);
                assert_eq!(got.len(), expected.len(), "{plan:?}");
                for ((row, score), (want_row, want)) in got.iter().zip(&expected) {
                    assert_eq!(row, want_row, "{plan:?}");
                    assert!((score - want).abs() < 1e-9, "{plan:?} row {row}: {score} vs {want}");
                }
            }
        };
        let phrase = |term: &str, documents: u64| (term.to_owned(), documents);
        // '"deploy" OR "staging"'
        check(
            Plan::Any(vec![phrase("deploi", 2), phrase("stage", 2)]),
            vec![(1, 1.036748614558446), (2, 0.439124783387007), (4, 0.503074994559872)],
        )
        .await;
        // '"tooling"'
        check(
            Plan::Any(vec![phrase("tool", 2)]),
            vec![(1, 0.298655472274737), (3, 0.381005326762256)],
        )
        .await;
        // '"care" AND "staging"'
        check(
            Plan::All(vec![phrase("care", 2), phrase("stage", 2)]),
            vec![(1, 0.851198758762494), (4, 1.006149989119743)],
        )
        .await;
    }
}
