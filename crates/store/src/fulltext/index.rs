//! An in-memory full-text index that finds the best `k` memories by BM25 without scoring
//! every match (MaxScore, Turtle and Flood 1995).
//!
//! FTS5 keeps its postings in rowid order and scores every row a query matches, and its
//! `bm25()` first walks each word's whole posting list to count the rows that hold it: a
//! task of common words ("cargo build slow index") read half a million postings at a
//! million memories. Here each term's postings are in memory, in the order memories were
//! indexed, with the largest term frequency and the shortest document of the list kept
//! beside them: the most any one memory can gain from the term. A search walks the lists
//! one memory at a time and keeps the best `k`; once the `k`-th best score is above what
//! the weakest terms could add together, memories that hold only those terms cannot enter,
//! so their lists are no longer walked, only probed (a galloping search) for memories that
//! the other terms brought in. The scores are exactly FTS5's `bm25(memories_fts, 2.0, 1.0)`
//! (k1 = 1.2, b = 0.75, content weighing twice the tags, FTS5's idf), and the answer is
//! the exact top `k`; only the work differs.
//!
//! A removed memory leaves its postings behind, marked dead in its document (a removal
//! does not know the lists it is in unless told the text it had), until dead postings are
//! an eighth of all, when the lists are compacted. An erased memory's words leave at once
//! ([`TextIndex::erase`]).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use cairn_types::{Scope, Status};

use super::tokens::{Document, tokenize};
use crate::row_table::RowTable;

/// FTS5's BM25 constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Compaction once dead postings are this share of all (and at least [`COMPACT_FROM`]).
const DEAD_SHARE: usize = 8;
const COMPACT_FROM: usize = 4_096;
/// Documents of the strongest list scored before the walk, for a first threshold.
const SEED_DOCS: usize = 2_048;

/// What a search can filter a memory by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocLabels {
    pub scope: Scope,
    pub status: Status,
    pub repo: Option<String>,
}

/// A search's filter: `None` admits anything. Repository names compare without ASCII case,
/// as the stores compare them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelFilter {
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    pub repo: Option<String>,
}

/// A store's filter as the index applies it (the index holds live memories only).
impl From<&crate::MemoryFilter> for LabelFilter {
    fn from(filter: &crate::MemoryFilter) -> LabelFilter {
        LabelFilter { scope: filter.scope, status: filter.status, repo: filter.repo.clone() }
    }
}

#[derive(Debug)]
struct Doc<K> {
    key: K,
    /// Tokens in content and tags: FTS5's document length.
    length: u32,
    /// Distinct terms: the postings the document holds.
    terms: u32,
    /// 0: no repository; else the interned name's number.
    repo: u32,
    scope: Scope,
    status: Status,
    live: bool,
    /// Of the indexed text: a change of labels alone keeps the postings.
    fingerprint: u64,
}

#[derive(Debug)]
struct Postings {
    /// Document slots, ascending.
    slots: Vec<u32>,
    /// `2 · occurrences in content + occurrences in tags`, per posting.
    freqs: Vec<u16>,
    /// Live documents in the list: the term's document frequency.
    live: u32,
    max_freq: u16,
    min_length: u32,
}

impl Default for Postings {
    fn default() -> Postings {
        Postings {
            slots: Vec::new(),
            freqs: Vec::new(),
            live: 0,
            max_freq: 0,
            min_length: u32::MAX,
        }
    }
}

/// The in-memory index: documents by a backend's key (a row id, a memory's id), with their
/// labels.
#[derive(Debug)]
pub struct TextIndex<K = i64> {
    terms: HashMap<Box<str>, Postings>,
    docs: Vec<Doc<K>>,
    /// Per slot: the document's length plus one, 0 when it is dead. The one value the walk
    /// reads for every document it visits, two bytes each (a megabyte's array stays in the
    /// cache, where the documents themselves are a miss each).
    lengths: Vec<u16>,
    /// Each live document's slot, by its key (kept in `docs` only).
    slots: RowTable,
    repos: HashMap<Box<str>, u32>,
    /// Live documents by their labels (scope, status, repository number): a listing's
    /// count without reading the documents.
    by_labels: HashMap<(Scope, Status, u32), u64>,
    live_tokens: u64,
    postings: usize,
    dead_postings: usize,
}

impl<K> Default for TextIndex<K> {
    fn default() -> TextIndex<K> {
        TextIndex {
            terms: HashMap::new(),
            docs: Vec::new(),
            lengths: Vec::new(),
            slots: RowTable::default(),
            repos: HashMap::new(),
            by_labels: HashMap::new(),
            live_tokens: 0,
            postings: 0,
            dead_postings: 0,
        }
    }
}

impl<K: Clone + Eq + Hash> TextIndex<K> {
    pub fn new() -> TextIndex<K> {
        TextIndex::default()
    }

    /// Documents indexed (live).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slot of the live document `key`.
    fn slot(&self, key: &K) -> Option<u32> {
        self.slots.find(key, |slot| &self.docs[slot as usize].key)
    }

    /// Indexes (or re-indexes) the document `key`: its content, its tags as stored (the
    /// list's JSON text), and its labels.
    pub fn put(&mut self, key: K, content: &str, tags_text: &str, labels: &DocLabels) {
        let fingerprint = fingerprint(content, tags_text);
        let repo = self.repo_number(labels.repo.as_deref());
        if let Some(slot) = self.slot(&key) {
            let doc = &mut self.docs[slot as usize];
            if doc.fingerprint == fingerprint {
                let (was, now) =
                    ((doc.scope, doc.status, doc.repo), (labels.scope, labels.status, repo));
                (doc.scope, doc.status, doc.repo) = now;
                self.relabel(Some(was), Some(now));
                return;
            }
            self.remove(&key, None);
        }
        let document = Document::of_text(content, tags_text);
        let Ok(slot) = u32::try_from(self.docs.len()) else {
            // Four billion slots, most of them dead: renumber and try again.
            self.compact();
            return self.put(key, content, tags_text, labels);
        };
        let length = u32::try_from(document.length).unwrap_or(u32::MAX);
        for (term, in_content, in_tags) in &document.terms {
            let freq = (2 * i64::from(*in_content) + i64::from(*in_tags)).min(i64::from(u16::MAX));
            let postings = match self.terms.get_mut(term.as_str()) {
                Some(postings) => postings,
                None => self.terms.entry(term.as_str().into()).or_default(),
            };
            postings.slots.push(slot);
            postings.freqs.push(freq as u16);
            postings.live += 1;
            postings.max_freq = postings.max_freq.max(freq as u16);
            postings.min_length = postings.min_length.min(length);
        }
        self.postings += document.terms.len();
        self.live_tokens += u64::from(length);
        self.lengths.push(length.min(u32::from(u16::MAX) - 1) as u16 + 1);
        self.relabel(None, Some((labels.scope, labels.status, repo)));
        self.docs.push(Doc {
            key,
            length,
            terms: document.terms.len() as u32,
            repo,
            scope: labels.scope,
            status: labels.status,
            live: true,
            fingerprint,
        });
        self.slots.insert(slot, |slot| &self.docs[slot as usize].key);
    }

    /// Takes the document `key` out of searches. With the text it was indexed with, the
    /// terms' document frequencies drop at once; without it, at the next compaction.
    pub fn remove(&mut self, key: &K, indexed: Option<(&str, &str)>) {
        let Some(slot) = self.slots.remove(key, |slot| &self.docs[slot as usize].key) else {
            return;
        };
        let doc = &mut self.docs[slot as usize];
        doc.live = false;
        let was = (doc.scope, doc.status, doc.repo);
        self.lengths[slot as usize] = 0;
        self.live_tokens -= u64::from(doc.length);
        self.dead_postings += doc.terms as usize;
        let indexed_as = doc.fingerprint;
        self.relabel(Some(was), None);
        if let Some((content, tags_text)) = indexed
            && fingerprint(content, tags_text) == indexed_as
        {
            for (term, _, _) in Document::of_text(content, tags_text).terms {
                if let Some(postings) = self.terms.get_mut(term.as_str()) {
                    postings.live = postings.live.saturating_sub(1);
                }
            }
        }
        if self.dead_postings >= COMPACT_FROM && self.dead_postings * DEAD_SHARE >= self.postings {
            self.compact();
        }
    }

    /// Removes the document `key`, which had this text, and every trace of its words: its
    /// postings, and the terms no other document holds.
    pub fn erase(&mut self, key: &K, content: &str, tags_text: &str) {
        let Some(slot) = self.slot(key) else { return };
        self.remove(key, Some((content, tags_text)));
        for (term, _, _) in Document::of_text(content, tags_text).terms {
            let Some(postings) = self.terms.get_mut(term.as_str()) else { continue };
            if let Ok(at) = postings.slots.binary_search(&slot) {
                postings.slots.remove(at);
                postings.freqs.remove(at);
                self.postings -= 1;
                self.dead_postings -= 1;
            }
            if postings.slots.is_empty() {
                self.terms.remove(term.as_str());
            }
        }
        if let Some(doc) = self.docs.get_mut(slot as usize) {
            doc.terms = 0;
        }
    }

    /// [`TextIndex::erase`] when the text is no longer known: every list is searched for
    /// the document (tens of milliseconds at a million documents; erasures are rare).
    pub fn forget(&mut self, key: &K) {
        let Some(slot) = self.slot(key) else { return };
        self.remove(key, None);
        let mut emptied = 0;
        self.terms.retain(|_, postings| {
            if let Ok(at) = postings.slots.binary_search(&slot) {
                postings.slots.remove(at);
                postings.freqs.remove(at);
                postings.live = postings.live.saturating_sub(1);
                emptied += 1;
            }
            !postings.slots.is_empty()
        });
        self.postings -= emptied;
        self.dead_postings = self.dead_postings.saturating_sub(emptied);
        if let Some(doc) = self.docs.get_mut(slot as usize) {
            doc.terms = 0;
        }
    }

    /// Drops every term no live document holds (with its dead postings): after an erasure of
    /// a memory the index had already let go (archived before it was erased), its words
    /// leave with it. A pass over the dictionary; erasures are rare.
    pub fn drop_unheld_terms(&mut self) {
        let mut dropped = 0;
        self.terms.retain(|_, postings| {
            let held = postings.live > 0;
            if !held {
                dropped += postings.slots.len();
            }
            held
        });
        self.postings -= dropped;
        self.dead_postings = self.dead_postings.saturating_sub(dropped);
    }

    /// Drops dead postings and documents, renumbering the live ones in their order, and
    /// counts every term's documents again.
    pub fn compact(&mut self) {
        let mut renumbered = vec![u32::MAX; self.docs.len()];
        let mut docs = Vec::with_capacity(self.slots.len());
        for (old, doc) in std::mem::take(&mut self.docs).into_iter().enumerate() {
            if doc.live {
                renumbered[old] = docs.len() as u32;
                docs.push(doc);
            }
        }
        self.terms.retain(|_, postings| {
            let mut kept = 0;
            let (mut max_freq, mut min_length) = (0, u32::MAX);
            for at in 0..postings.slots.len() {
                let slot = renumbered[postings.slots[at] as usize];
                if slot != u32::MAX {
                    postings.slots[kept] = slot;
                    postings.freqs[kept] = postings.freqs[at];
                    max_freq = max_freq.max(postings.freqs[at]);
                    min_length = min_length.min(docs[slot as usize].length);
                    kept += 1;
                }
            }
            postings.slots.truncate(kept);
            postings.freqs.truncate(kept);
            postings.slots.shrink_to_fit();
            postings.freqs.shrink_to_fit();
            (postings.live, postings.max_freq, postings.min_length) =
                (kept as u32, max_freq, min_length);
            kept > 0
        });
        self.slots.renumber(|slot| renumbered[slot as usize]);
        self.postings = self.terms.values().map(|postings| postings.slots.len()).sum();
        self.dead_postings = 0;
        self.lengths =
            docs.iter().map(|doc| doc.length.min(u32::from(u16::MAX) - 1) as u16 + 1).collect();
        self.docs = docs;
    }

    /// Gives back the memory the lists grew into (after building from a whole table).
    pub fn shrink_to_fit(&mut self) {
        for postings in self.terms.values_mut() {
            postings.slots.shrink_to_fit();
            postings.freqs.shrink_to_fit();
        }
        self.docs.shrink_to_fit();
        self.lengths.shrink_to_fit();
        self.slots.shrink_to_fit(|slot| &self.docs[slot as usize].key);
    }

    /// Moves a live document's count from the labels it had to those it has.
    fn relabel(&mut self, was: Option<(Scope, Status, u32)>, now: Option<(Scope, Status, u32)>) {
        if let Some(was) = was
            && let Some(count) = self.by_labels.get_mut(&was)
        {
            *count -= 1;
            if *count == 0 {
                self.by_labels.remove(&was);
            }
        }
        if let Some(now) = now {
            *self.by_labels.entry(now).or_default() += 1;
        }
    }

    /// How many live documents the filter admits, from counts kept by label (a sum over
    /// the label combinations held, a few dozen: no document is read).
    pub fn count(&self, filter: &LabelFilter) -> u64 {
        let Some(repo) = self.wanted_repo(filter) else { return 0 };
        self.by_labels
            .iter()
            .filter(|((scope, status, number), _)| admits(filter, repo, *scope, *status, *number))
            .map(|(_, count)| count)
            .sum()
    }

    /// The number of the repository `filter` names (`Some(None)` when it names none);
    /// `None` when it names one no document has: nothing is admitted.
    fn wanted_repo(&self, filter: &LabelFilter) -> Option<Option<u32>> {
        match filter.repo.as_deref() {
            None => Some(None),
            Some(repo) => self.repos.get(repo.to_ascii_lowercase().as_str()).map(|&n| Some(n)),
        }
    }

    fn repo_number(&mut self, repo: Option<&str>) -> u32 {
        let Some(repo) = repo else { return 0 };
        let folded = repo.to_ascii_lowercase();
        let next = self.repos.len() as u32 + 1;
        *self.repos.entry(folded.into_boxed_str()).or_insert(next)
    }

    /// The best `k` live documents the filter admits for the query's words, by BM25,
    /// best first: `(key, score)`. Each word counts as FTS5 counts a phrase: a word that
    /// the tokenizer splits counts each of its tokens; the same term twice counts twice.
    pub fn search(&self, words: &[String], filter: &LabelFilter, k: usize) -> Vec<(K, f64)> {
        if k == 0 || self.slots.is_empty() {
            return Vec::new();
        }
        let Some(repo) = self.wanted_repo(filter) else { return Vec::new() };
        let filtered = filter.scope.is_some() || filter.status.is_some() || repo.is_some();
        // The document's length when it is live (`lengths` says) and admitted (its record is
        // read only when there is a filter).
        let admitted = |slot: u32| -> Option<u32> {
            let length = u32::from(self.lengths[slot as usize]).checked_sub(1)?;
            let admitted = !filtered || {
                let doc = &self.docs[slot as usize];
                admits(filter, repo, doc.scope, doc.status, doc.repo)
            };
            admitted.then_some(length)
        };
        let mut counted: Vec<(String, u32)> = Vec::new();
        for token in words.iter().flat_map(|word| tokenize(word)) {
            match counted.iter_mut().find(|(term, _)| *term == token) {
                Some((_, times)) => *times += 1,
                None => counted.push((token, 1)),
            }
        }
        let documents = self.slots.len() as f64;
        let average = (self.live_tokens as f64 / documents).max(f64::MIN_POSITIVE);
        // BM25's length normaliser of a document (or a list's shortest) of `length` tokens.
        let norm = |length: u32| K1 * (1.0 - B + B * f64::from(length) / average);
        let mut cursors: Vec<Cursor<'_>> = counted
            .iter()
            .filter_map(|(term, times)| {
                let postings = self.terms.get(term.as_str()).filter(|p| p.live > 0)?;
                let weight = idf(documents, f64::from(postings.live)) * f64::from(*times);
                let bound =
                    weight * saturation(f64::from(postings.max_freq), norm(postings.min_length));
                Some(Cursor { postings, at: 0, weight, bound })
            })
            .collect();
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        // bounds[i]: the most the lists 0..=i can add together.
        let bounds: Vec<f64> = cursors
            .iter()
            .scan(0.0, |sum, cursor| {
                *sum += cursor.bound;
                Some(*sum)
            })
            .collect();
        let mut best: BinaryHeap<Reverse<Hit>> = BinaryHeap::with_capacity(k + 1);
        let keep = |best: &mut BinaryHeap<Reverse<Hit>>, hit: Hit| -> Option<f64> {
            if best.len() < k {
                best.push(Reverse(hit));
            } else if best.peek().is_some_and(|Reverse(least)| hit.score > least.score) {
                best.pop();
                best.push(Reverse(hit));
            } else {
                return None;
            }
            (best.len() == k).then(|| best.peek().map_or(f64::NEG_INFINITY, |Reverse(h)| h.score))
        };
        // A head start: documents of the strongest list (a sample of at most SEED_DOCS),
        // scored whole. Any k exact scores bound the final k-th best from below, so the walk
        // prunes from its first document instead of after k of them; it skips these.
        let mut threshold = f64::NEG_INFINITY;
        let mut seeded: Vec<u32> = Vec::new();
        if let Some(strongest) = cursors.last() {
            let slots = &strongest.postings.slots;
            let step = slots.len().div_ceil(SEED_DOCS).max(1);
            let mut probes: Vec<Cursor<'_>> = cursors.iter().map(Cursor::restart).collect();
            for &slot in slots.iter().step_by(step) {
                seeded.push(slot);
                let Some(length) = admitted(slot) else { continue };
                let norm = norm(length);
                let mut score = 0.0;
                for probe in &mut probes {
                    probe.seek(slot);
                    if probe.current() == Some(slot) {
                        score += probe.score(norm);
                    }
                }
                if let Some(least) = keep(&mut best, Hit { score, slot }) {
                    threshold = least;
                }
            }
        }
        let mut seeded = seeded.into_iter().peekable();
        // Lists before `essential` are only probed.
        let mut essential = 0;
        while essential < cursors.len() && bounds[essential] <= threshold {
            essential += 1;
        }
        while let Some(slot) = cursors[essential..].iter().filter_map(Cursor::current).min() {
            while seeded.next_if(|&seed| seed < slot).is_some() {}
            // Scored already (seeded), dead or not admitted: passed over.
            let length = match seeded.next_if_eq(&slot) {
                Some(_) => None,
                None => admitted(slot),
            };
            let Some(length) = length else {
                for cursor in &mut cursors[essential..] {
                    if cursor.current() == Some(slot) {
                        cursor.at += 1;
                    }
                }
                continue;
            };
            let norm = norm(length);
            let mut score = 0.0;
            for cursor in &mut cursors[essential..] {
                if cursor.current() == Some(slot) {
                    score += cursor.score(norm);
                    cursor.at += 1;
                }
            }
            for i in (0..essential).rev() {
                if score + bounds[i] <= threshold {
                    break;
                }
                let cursor = &mut cursors[i];
                cursor.seek(slot);
                if cursor.current() == Some(slot) {
                    score += cursor.score(norm);
                }
            }
            if let Some(least) = keep(&mut best, Hit { score, slot }) {
                threshold = least;
                while essential < cursors.len() && bounds[essential] <= threshold {
                    essential += 1;
                }
                if essential == cursors.len() {
                    break;
                }
            }
        }
        let mut hits: Vec<Hit> = best.into_iter().map(|Reverse(hit)| hit).collect();
        hits.sort_by(|a, b| b.cmp(a));
        hits.into_iter().map(|hit| (self.docs[hit.slot as usize].key.clone(), hit.score)).collect()
    }
}

/// FTS5's idf of a term held by `holding` of `documents`.
pub fn idf(documents: f64, holding: f64) -> f64 {
    let holding = holding.min(documents);
    let idf = ((documents - holding + 0.5) / (holding + 0.5)).ln();
    if idf > 0.0 { idf } else { 1e-6 }
}

/// BM25's term-frequency part for a weighted frequency and a length's normaliser.
fn saturation(freq: f64, norm: f64) -> f64 {
    freq * (K1 + 1.0) / (freq + norm)
}

fn fingerprint(content: &str, tags_text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (content, tags_text).hash(&mut hasher);
    hasher.finish()
}

struct Cursor<'a> {
    postings: &'a Postings,
    at: usize,
    /// idf times how often the query holds the term.
    weight: f64,
    /// The most one document can gain from the term.
    bound: f64,
}

impl<'a> Cursor<'a> {
    /// The same list from its start.
    fn restart(&self) -> Cursor<'a> {
        Cursor { postings: self.postings, at: 0, weight: self.weight, bound: self.bound }
    }

    fn current(&self) -> Option<u32> {
        self.postings.slots.get(self.at).copied()
    }

    fn score(&self, norm: f64) -> f64 {
        self.weight * saturation(f64::from(self.postings.freqs[self.at]), norm)
    }

    /// Moves to the first posting at or after `slot` (galloping, then binary search).
    fn seek(&mut self, slot: u32) {
        let slots = &self.postings.slots;
        if self.at >= slots.len() || slots[self.at] >= slot {
            return;
        }
        let (mut low, mut step) = (self.at, 1);
        while low + step < slots.len() && slots[low + step] < slot {
            low += step;
            step *= 2;
        }
        let high = (low + step + 1).min(slots.len());
        self.at = low + 1 + slots[low + 1..high].partition_point(|&s| s < slot);
    }
}

#[derive(Debug, Clone, Copy)]
struct Hit {
    score: f64,
    slot: u32,
}

impl PartialEq for Hit {
    fn eq(&self, other: &Hit) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Hit {}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Hit) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// By score, then the older document (a lower slot) first among equals.
impl Ord for Hit {
    fn cmp(&self, other: &Hit) -> Ordering {
        self.score.total_cmp(&other.score).then(other.slot.cmp(&self.slot))
    }
}

/// Whether a document of these labels passes `filter`, whose repository is `repo` (its
/// number, from [`TextIndex::wanted_repo`]).
fn admits(
    filter: &LabelFilter,
    repo: Option<u32>,
    scope: Scope,
    status: Status,
    number: u32,
) -> bool {
    filter.scope.is_none_or(|wanted| wanted == scope)
        && filter.status.is_none_or(|wanted| wanted == status)
        && repo.is_none_or(|wanted| wanted == number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_test_support::rng::Rng;

    fn labels(repo: Option<&str>) -> DocLabels {
        DocLabels { scope: Scope::Repo, status: Status::Active, repo: repo.map(str::to_owned) }
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    /// Every admitted document scored, sorted: what FTS5's `ORDER BY bm25()` gives.
    fn exhaustive(index: &TextIndex, query: &[String], filter: &LabelFilter) -> Vec<(i64, f64)> {
        let everything = index.slots.len();
        let mut all: Vec<(i64, f64)> = Vec::new();
        // The search with k = everything never prunes: it scores every match.
        for (key, score) in index.search(query, filter, everything) {
            all.push((key, score));
        }
        all
    }

    #[test]
    fn scores_are_fts5s_bm25() {
        let mut index = TextIndex::new();
        index.put(1, "deploy the deploys", r#"["deploy"]"#, &labels(None));
        index.put(2, "run the tests before deploying anything at all", "[]", &labels(None));
        index.put(3, "nothing here", "[]", &labels(None));
        let hits = index.search(&words("deploy"), &LabelFilter::default(), 10);
        // SQLite 3.40: -bm25(t, 2.0, 1.0) of the same rows (columns content, tags; the
        // backend's tokenizer), MATCH 'deploy'.
        assert_eq!(hits.iter().map(|hit| hit.0).collect::<Vec<_>>(), [1, 2]);
        assert!((hits[0].1 - 1.81176470588235e-06).abs() < 1e-18, "{hits:?}");
        assert!((hits[1].1 - 1.14498141263941e-06).abs() < 1e-18, "{hits:?}");
    }

    #[test]
    fn the_pruned_top_k_is_the_exhaustive_top_k() {
        let vocabulary: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
        let mut rng = Rng::new(7);
        let mut index = TextIndex::new();
        for key in 0..5_000 {
            let length = 3 + rng.below(20);
            // Zipf-like: low numbers are common.
            let text: Vec<&str> = (0..length)
                .map(|_| {
                    let rank = (rng.unit().powi(3) * vocabulary.len() as f64) as usize;
                    vocabulary[rank.min(vocabulary.len() - 1)].as_str()
                })
                .collect();
            let repo = ["a", "b", "c"][rng.below(3)];
            index.put(key, &text.join(" "), "[]", &labels(Some(repo)));
            if key % 7 == 0 {
                index.remove(&(key / 2), None);
            }
        }
        for round in 0..200 {
            let query: Vec<String> = (0..1 + rng.below(6))
                .map(|_| vocabulary[(rng.unit().powi(2) * 300.0) as usize % 300].clone())
                .collect();
            let filter = if round % 3 == 0 {
                LabelFilter { repo: Some("B".into()), ..LabelFilter::default() }
            } else {
                LabelFilter::default()
            };
            let k = [1, 5, 10, 50][round % 4];
            let all = exhaustive(&index, &query, &filter);
            let pruned = index.search(&query, &filter, k);
            let expected: Vec<(i64, f64)> = all.into_iter().take(k).collect();
            assert_eq!(pruned.len(), expected.len(), "{query:?}");
            for (got, want) in pruned.iter().zip(&expected) {
                assert!(
                    (got.1 - want.1).abs() < 1e-9,
                    "{query:?}: {pruned:?} against {expected:?}"
                );
            }
        }
    }

    #[test]
    fn counts_by_label_follow_every_change() {
        let mut index = TextIndex::new();
        index.put(1, "use pnpm", "[]", &labels(Some("Web")));
        index.put(2, "use npm", "[]", &labels(Some("web")));
        index.put(3, "tabs in makefiles", "[]", &labels(None));
        let stale = DocLabels { status: Status::Stale, ..labels(Some("web")) };
        index.put(2, "use npm", "[]", &stale);
        index.put(1, "use yarn", "[]", &labels(Some("web")));
        index.put(4, "the build is slow", "[]", &labels(Some("api")));
        index.remove(&4, None);
        index.put(5, "a secret", "[]", &labels(None));
        index.erase(&5, "a secret", "[]");
        let count = |scope: Option<Scope>, status: Option<Status>, repo: Option<&str>| {
            index.count(&LabelFilter { scope, status, repo: repo.map(str::to_owned) })
        };
        assert_eq!(count(None, None, None), 3);
        assert_eq!(count(None, None, Some("WEB")), 2, "repositories without case");
        assert_eq!(count(None, Some(Status::Stale), None), 1, "a change of labels moves the count");
        assert_eq!(count(None, Some(Status::Active), Some("web")), 1, "new text, same labels");
        assert_eq!(count(None, None, Some("api")), 0, "removed");
        assert_eq!(count(None, None, Some("nowhere")), 0);
        assert_eq!(count(Some(Scope::Repo), None, None), 3);
        assert_eq!(count(Some(Scope::User), None, None), 0);
    }

    #[test]
    fn labels_filter_before_the_cut_and_repositories_ignore_case() {
        let mut index = TextIndex::new();
        for key in 0..50 {
            index.put(key, "flaky test in the parser", "[]", &labels(Some("web")));
        }
        index.put(100, "flaky test", "[]", &labels(Some("Cairn")));
        let filter = LabelFilter { repo: Some("CAIRN".into()), ..LabelFilter::default() };
        let hits = index.search(&words("flaky"), &filter, 3);
        assert_eq!(hits.iter().map(|hit| hit.0).collect::<Vec<_>>(), [100]);
        let stale = LabelFilter { status: Some(Status::Stale), ..LabelFilter::default() };
        assert!(index.search(&words("flaky"), &stale, 3).is_empty());
        let unknown = LabelFilter { repo: Some("nowhere".into()), ..LabelFilter::default() };
        assert!(index.search(&words("flaky"), &unknown, 3).is_empty());
    }

    #[test]
    fn changes_and_removals_are_searched_as_they_are_now() {
        let mut index = TextIndex::new();
        index.put(1, "use pnpm", "[]", &labels(None));
        index.put(2, "use npm", "[]", &labels(None));
        index.put(1, "use yarn", "[]", &labels(None));
        assert!(index.search(&words("pnpm"), &LabelFilter::default(), 5).is_empty());
        assert_eq!(index.search(&words("yarn"), &LabelFilter::default(), 5)[0].0, 1);
        index.put(2, "use npm", "[]", &DocLabels { status: Status::Stale, ..labels(None) });
        let stale = LabelFilter { status: Some(Status::Stale), ..LabelFilter::default() };
        assert_eq!(index.search(&words("npm"), &stale, 5)[0].0, 2, "relabelled in place");
        index.remove(&2, Some(("use npm", "[]")));
        assert!(index.search(&words("npm"), &LabelFilter::default(), 5).is_empty());
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn erasure_leaves_no_word_behind_and_compaction_keeps_answers() {
        let mut index = TextIndex::new();
        index.put(1, "the secret is hunter2", "[]", &labels(None));
        index.put(2, "the build is slow", "[]", &labels(None));
        index.erase(&1, "the secret is hunter2", "[]");
        assert!(!index.terms.contains_key("hunter2") && !index.terms.contains_key("secret"));
        index.put(3, "another secret: swordfish", "[]", &labels(None));
        index.forget(&3);
        assert!(!index.terms.contains_key("swordfish") && !index.terms.contains_key("secret"));
        // Archived (out of searches, its postings dead), then erased: its words go too.
        index.put(4, "the vault code is 8812", "[]", &labels(None));
        index.remove(&4, Some(("the vault code is 8812", "[]")));
        assert!(index.terms.contains_key("vault"), "dead postings wait for compaction");
        index.drop_unheld_terms();
        assert!(!index.terms.contains_key("vault") && !index.terms.contains_key("8812"));
        assert!(index.terms.contains_key("build"));
        assert!(index.terms.contains_key("build"));
        for key in 10..10_000 {
            index.put(key, "a slow build", "[]", &labels(None));
            index.remove(&key, None);
        }
        assert!(index.docs.len() < 5_000, "compacted: {}", index.docs.len());
        assert_eq!(index.search(&words("slow"), &LabelFilter::default(), 5)[0].0, 2);
    }
}
