//! The vector index: int8 rows in one matrix, scanned whole while the index is small and
//! through a coarse quantiser's lists once it is large ([`lists`]).

use std::collections::HashMap;

use cairn_store::row_table::RowTable;
use cairn_types::{Scope, Status, Timestamp};

use super::{VectorFilter, VectorIndex, VectorLabels, quantize, query_join};

mod lists;

use lists::Lists;

/// Search over one contiguous matrix of int8 rows: a vector is kept as 384 signed bytes and
/// one scale (its largest component over 127), a quarter of its `f32` size (38 MB instead of
/// 150 MB at 100,000 vectors), and a search reads a quarter of the bytes. The query is
/// quantised the same way and each admitted row scored by an integer dot product; the
/// similarities are within about 0.002 of the exact ones (see
/// `int8_similarities_stay_close_to_exact_ones`), close enough to rank by.
/// Under 200,000 rows a search scores every admitted row; from there the rows are grouped
/// into lists around centroids (an inverted file: `flat/lists.rs`) and a search scores the
/// rows of the lists nearest the query only: approximate, measured in docs/retrieval.md.
#[derive(Debug)]
pub struct FlatIndex {
    dimensions: usize,
    /// Each row's memory id: the one copy of it (`positions` hashes from here).
    ids: Ids,
    /// `dimensions` quantised components per row.
    rows: Vec<i8>,
    /// One per row: the factor that turns a row's bytes back into its vector.
    scales: Vec<f32>,
    /// One per row, in row order.
    labels: Vec<RowLabels>,
    /// Row numbers by id (the ids kept in `ids` only).
    positions: RowTable,
    /// Repository names, interned: a row holds an index into `repos`.
    repos: Vec<String>,
    repo_numbers: HashMap<String, u32>,
    /// The rows' lists, once the index has [`Probe::from`] rows.
    lists: Option<Lists>,
    probe: Probe,
    simd: Simd,
}

/// The rows' ids, in one buffer: a million ids as a million heap strings took about 64 MB,
/// here about 38. A removed id's bytes stay until they are half the buffer, which is then
/// written again without them.
#[derive(Debug, Default)]
struct Ids {
    text: String,
    /// Each row's id: where it starts in `text`, and its length.
    spans: Vec<(u32, u32)>,
    /// Bytes of `text` no row points at.
    unused: usize,
}

impl Ids {
    fn get(&self, row: u32) -> &str {
        let (start, length) = self.spans[row as usize];
        &self.text[start as usize..(start + length) as usize]
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn push(&mut self, id: &str) {
        self.spans.push((self.text.len() as u32, id.len() as u32));
        self.text.push_str(id);
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.spans.swap(a, b);
    }

    /// Forgets the last row's id.
    fn pop(&mut self) {
        let Some((_, length)) = self.spans.pop() else { return };
        self.unused += length as usize;
        if self.unused > self.text.len() / 2 {
            let mut text = String::with_capacity(self.text.len() - self.unused);
            for span in &mut self.spans {
                let start = text.len() as u32;
                text.push_str(&self.text[span.0 as usize..(span.0 + span.1) as usize]);
                span.0 = start;
            }
            (self.text, self.unused) = (text, 0);
        }
    }
}

/// A row's labels as the scan reads them: the repository interned (`NO_REPO` for none).
#[derive(Debug, Clone, Copy)]
struct RowLabels {
    repo: u32,
    scope: Scope,
    status: Status,
    version: Timestamp,
}

const NO_REPO: u32 = u32::MAX;

/// When a search goes through lists, and how many it reads. Measured on 1,000,000 vectors
/// made from all-MiniLM-L6-v2's (docs/retrieval.md, "Vectors at a million").
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// Rows from which the index keeps lists: under it a search scores every admitted row
    /// (100,000 rows take about 2 ms on two threads).
    from: usize,
    /// Rows a list holds on average when the lists are made.
    rows_per_list: usize,
    /// Lists a search reads at least: the nearest to the query.
    lists: usize,
}

impl Default for Probe {
    fn default() -> Probe {
        Probe { from: 200_000, rows_per_list: 2_000, lists: 12 }
    }
}

/// Rows from which a scan runs on two threads: under it, the scan (a few tens of µs a
/// thousand rows on one thread: 100,000 took 4.4 ms under load, 2.15 ms idle on two) stays
/// under a millisecond, not worth the other thread's wake-up.
const PARALLEL_ROWS: usize = 20_000;

impl FlatIndex {
    pub fn new(dimensions: usize) -> FlatIndex {
        FlatIndex {
            dimensions,
            ids: Ids::default(),
            rows: Vec::new(),
            scales: Vec::new(),
            labels: Vec::new(),
            positions: RowTable::default(),
            repos: Vec::new(),
            repo_numbers: HashMap::new(),
            lists: None,
            probe: Probe::default(),
            simd: simd(),
        }
    }

    /// The quantised components of the row at `position`.
    fn row(&self, position: usize) -> &[i8] {
        &self.rows[position * self.dimensions..(position + 1) * self.dimensions]
    }

    /// The row of `id`.
    fn position(&self, id: &str) -> Option<usize> {
        self.positions.find(id, |row| self.ids.get(row)).map(|row| row as usize)
    }

    fn row_labels(&mut self, labels: VectorLabels) -> RowLabels {
        // Interned without case: `Shop` and `shop` are one repository (`repo_admits`).
        let repo = match labels.repo.map(|repo| repo.to_ascii_lowercase()) {
            None => NO_REPO,
            Some(repo) => match self.repo_numbers.get(&repo) {
                Some(&number) => number,
                None => {
                    let number = self.repos.len() as u32;
                    self.repos.push(repo.clone());
                    self.repo_numbers.insert(repo, number);
                    number
                }
            },
        };
        RowLabels { repo, scope: labels.scope, status: labels.status, version: labels.version }
    }

    /// Offers each admitted row of `positions` to `best`, scored against `query`; returns
    /// how many were admitted.
    fn score(
        &self,
        positions: impl Iterator<Item = usize>,
        query: &Query,
        admits: &impl Fn(&RowLabels) -> bool,
        best: &mut Best,
    ) -> usize {
        let mut admitted = 0;
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = self.simd {
            simd.vectorize(|| {
                for position in positions {
                    if admits(&self.labels[position]) {
                        admitted += 1;
                        let dot = avx2::dot(simd, self.row(position), &query.blocks);
                        best.offer(position, dot as f32 * self.scales[position] * query.scale);
                    }
                }
            });
            return admitted;
        }
        for position in positions {
            if admits(&self.labels[position]) {
                admitted += 1;
                let dot = dot_i8(self.row(position), &query.bytes);
                best.offer(position, dot as f32 * self.scales[position] * query.scale);
            }
        }
        admitted
    }

    /// The `k` best admitted rows of all, in no order: every row scored, in two halves on
    /// two threads for a large index (each keeps its own best `k`, and the best of both are
    /// the best of all).
    fn scan(
        &self,
        query: &Query,
        admits: &(impl Fn(&RowLabels) -> bool + Sync),
        k: usize,
    ) -> Vec<(usize, f32)> {
        let rows = self.ids.len();
        let half = |range: std::ops::Range<usize>| {
            let mut best = Best::new(k, range.len());
            self.score(range, query, admits, &mut best);
            best.into_vec()
        };
        if rows < PARALLEL_ROWS {
            return half(0..rows);
        }
        let (mut first, second) = query_join(|| half(0..rows / 2), || half(rows / 2..rows));
        first.extend(second);
        first
    }

    /// The `k` best of the scored rows, best first, with their ids.
    fn best(&self, scored: Vec<(usize, f32)>, k: usize) -> Vec<(String, f32)> {
        let mut scored = keep_best(scored, k);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .map(|(position, score)| (self.ids.get(position as u32).to_owned(), score))
            .collect()
    }

    /// Makes the lists when the index reaches [`Probe::from`] rows, and again each time it
    /// doubles (so that lists stay near [`Probe::rows_per_list`] long); drops them when it
    /// shrinks under half of that. Puts each list's rows next to each other again when an
    /// eighth of the rows are out of place.
    fn organise(&mut self) {
        let rows = self.ids.len();
        let due = match &self.lists {
            None => rows >= self.probe.from,
            Some(lists) => rows >= 2 * lists.trained_on(),
        };
        if due {
            let mut lists = Lists::train(self);
            self.permute(&lists.order());
            lists.renumber();
            self.lists = Some(lists);
        } else if rows < self.probe.from / 2 {
            self.lists = None;
        } else if let Some(mut lists) = self.lists.take() {
            if lists.out_of_place() > rows / 8 {
                self.permute(&lists.order());
                lists.renumber();
            }
            self.lists = Some(lists);
        }
    }

    /// Reorders the rows so that the row at `order[i]` comes to `i`: swaps along each cycle
    /// of the permutation, in place (a copy of a million rows would be 400 MB more for a
    /// moment), then hashes the ids' new rows.
    fn permute(&mut self, order: &[u32]) {
        let mut done = vec![false; order.len()];
        for start in 0..order.len() {
            let mut at = start;
            done[at] = true;
            loop {
                let next = order[at] as usize;
                if done[next] {
                    break;
                }
                self.swap_rows(at, next);
                done[next] = true;
                at = next;
            }
        }
        self.positions.clear();
        for row in 0..self.ids.len() as u32 {
            self.positions.insert(row, |row| self.ids.get(row));
        }
    }

    fn swap_rows(&mut self, a: usize, b: usize) {
        let dimensions = self.dimensions;
        let (low, high) = (a.min(b), a.max(b));
        let (head, tail) = self.rows.split_at_mut(high * dimensions);
        head[low * dimensions..(low + 1) * dimensions].swap_with_slice(&mut tail[..dimensions]);
        self.ids.swap(a, b);
        self.scales.swap(a, b);
        self.labels.swap(a, b);
    }
}

impl VectorIndex for FlatIndex {
    fn upsert(&mut self, id: &str, vector: &[f32], labels: VectorLabels) {
        assert_eq!(vector.len(), self.dimensions, "vectors of one index share their dimensions");
        let labels = self.row_labels(labels);
        let (bytes, scale) = quantize(vector);
        let position = match self.position(id) {
            Some(position) => {
                self.rows[position * self.dimensions..(position + 1) * self.dimensions]
                    .copy_from_slice(&bytes);
                self.scales[position] = scale;
                self.labels[position] = labels;
                position
            }
            None => {
                let row = self.ids.len();
                self.ids.push(id);
                self.positions.insert(row as u32, |row| self.ids.get(row));
                self.rows.extend_from_slice(&bytes);
                self.scales.push(scale);
                self.labels.push(labels);
                row
            }
        };
        if let Some(mut lists) = self.lists.take() {
            lists.place(self, position);
            self.lists = Some(lists);
        }
        self.organise();
    }

    fn relabel(&mut self, id: &str, labels: VectorLabels) {
        if let Some(position) = self.position(id) {
            self.labels[position] = self.row_labels(labels);
        }
    }

    fn labels(&self, id: &str) -> Option<VectorLabels> {
        let row = self.labels[self.position(id)?];
        Some(VectorLabels {
            repo: (row.repo != NO_REPO).then(|| self.repos[row.repo as usize].clone()),
            scope: row.scope,
            status: row.status,
            version: row.version,
        })
    }

    fn remove(&mut self, id: &str) {
        let Some(position) = self.positions.remove(id, |row| self.ids.get(row)) else {
            return;
        };
        let position = position as usize;
        let last = self.ids.len() - 1;
        if let Some(lists) = &mut self.lists {
            lists.remove(position, last);
        }
        if position != last {
            self.positions.moved(self.ids.get(last as u32), last as u32, position as u32);
            self.swap_rows(position, last);
        }
        self.ids.pop();
        self.scales.pop();
        self.labels.pop();
        self.rows.truncate(last * self.dimensions);
        self.organise();
    }

    fn search(&self, query: &[f32], k: usize, filter: &VectorFilter) -> Vec<(String, f32)> {
        if k == 0 || query.len() != self.dimensions {
            return Vec::new();
        }
        // A repository the index has never seen matches no row: only rows of no repository.
        let repo = filter
            .repo
            .as_ref()
            .map(|repo| self.repo_numbers.get(&repo.to_ascii_lowercase()).copied());
        let admits = |row: &RowLabels| {
            filter.scope.is_none_or(|scope| scope == row.scope)
                && filter.status.is_none_or(|status| status == row.status)
                && repo.is_none_or(|wanted| row.repo == NO_REPO || Some(row.repo) == wanted)
        };
        let query = Query::new(query);
        let scored = match &self.lists {
            Some(lists) => lists.search(self, &query, &admits, k),
            None => self.scan(&query, &admits, k),
        };
        self.best(scored, k)
    }

    fn similarity(&self, query: &[f32], id: &str) -> Option<f32> {
        if query.len() != self.dimensions {
            return None;
        }
        let position = self.position(id)?;
        let (query, query_scale) = quantize(query);
        Some(dot_i8(self.row(position), &query) as f32 * self.scales[position] * query_scale)
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// AVX2 when the CPU has it (checked once, when an index is made).
#[cfg(target_arch = "x86_64")]
type Simd = Option<pulp::x86::V3>;
#[cfg(not(target_arch = "x86_64"))]
type Simd = ();

fn simd() -> Simd {
    #[cfg(target_arch = "x86_64")]
    return pulp::x86::V3::try_new();
    #[cfg(not(target_arch = "x86_64"))]
    ()
}

/// A vector quantised as the rows are, prepared once for every row it meets.
struct Query {
    bytes: Vec<i8>,
    scale: f32,
    /// The bytes as [`avx2::dot`] reads them.
    #[cfg(target_arch = "x86_64")]
    blocks: avx2::Blocks,
}

impl Query {
    fn new(vector: &[f32]) -> Query {
        let (bytes, scale) = quantize(vector);
        Query {
            #[cfg(target_arch = "x86_64")]
            blocks: avx2::Blocks::new(&bytes),
            bytes,
            scale,
        }
    }
}

impl std::fmt::Debug for Query {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Query").field("bytes", &self.bytes.len()).finish()
    }
}

/// The `k` best of `scored` (all when they are fewer), in no order.
fn keep_best(mut scored: Vec<(usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    cut_to_best(&mut scored, k);
    scored
}

fn cut_to_best(scored: &mut Vec<(usize, f32)>, k: usize) {
    if k < scored.len() {
        scored.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
    }
}

/// The `k` best rows a scan has offered so far, in a buffer of a few times `k` cut back to
/// the best `k` whenever it fills, below whose worst no row is taken any more. A scan of
/// 100,000 rows kept a score for each: 1.6 MB allocated, faulted in and freed a query.
struct Best {
    k: usize,
    scored: Vec<(usize, f32)>,
    /// The worst score kept at the last cut: a row must beat it to be one of the best.
    floor: f32,
}

impl Best {
    fn new(k: usize, rows: usize) -> Best {
        let capacity = (4 * k).max(1_024).min(rows);
        Best { k, scored: Vec::with_capacity(capacity), floor: f32::NEG_INFINITY }
    }

    #[inline(always)]
    fn offer(&mut self, position: usize, score: f32) {
        if score <= self.floor {
            return;
        }
        if self.scored.len() == self.scored.capacity() {
            cut_to_best(&mut self.scored, self.k);
            self.floor = self.scored.iter().map(|row| row.1).fold(f32::INFINITY, f32::min);
            if score <= self.floor {
                return;
            }
        }
        self.scored.push((position, score));
    }

    fn into_vec(self) -> Vec<(usize, f32)> {
        keep_best(self.scored, self.k)
    }
}

/// The integer dot product of a row with the query, 32 bytes an instruction: `q · r` is
/// `|q| · (r` with `q`'s signs`)`, and `_mm256_maddubs_epi16` multiplies unsigned bytes by
/// signed ones, adding neighbours into 16 bits (at most 2 × 127 × 127, no saturation: no
/// component is -128). The compiler's vectorisation of [`dot_i8`] first widened each byte
/// to 32 bits.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use pulp::bytemuck::cast;
    use pulp::x86::V3;
    use std::arch::x86_64::__m256i;

    /// The quantised query in 32-byte blocks, with its blocks' magnitudes, and what is left.
    pub(super) struct Blocks {
        blocks: Vec<__m256i>,
        magnitudes: Vec<__m256i>,
        tail: Vec<i8>,
    }

    impl Blocks {
        pub(super) fn new(query: &[i8]) -> Blocks {
            let (blocks, tail) = pulp::as_arrays::<32, i8>(query);
            let magnitudes =
                blocks.iter().map(|block| cast(block.map(|byte| byte.abs()))).collect();
            let blocks = blocks.iter().map(|block| cast(*block)).collect();
            Blocks { blocks, magnitudes, tail: tail.to_vec() }
        }
    }

    #[inline(always)]
    pub(super) fn dot(simd: V3, row: &[i8], query: &Blocks) -> i32 {
        let (blocks, tail) = pulp::as_arrays::<32, i8>(row);
        let ones: __m256i = cast(simd.splat_i16x16(1));
        let mut sums: __m256i = cast(simd.splat_i32x8(0));
        for ((block, sign), magnitude) in blocks.iter().zip(&query.blocks).zip(&query.magnitudes) {
            let signed = simd.avx2._mm256_sign_epi8(cast(*block), *sign);
            let pairs = simd.avx2._mm256_maddubs_epi16(*magnitude, signed);
            sums = simd.avx2._mm256_add_epi32(sums, simd.avx2._mm256_madd_epi16(pairs, ones));
        }
        let lanes: [i32; 8] = cast(sums);
        let tail: i32 =
            tail.iter().zip(&query.tail).map(|(a, b)| i32::from(*a) * i32::from(*b)).sum();
        lanes.iter().sum::<i32>() + tail
    }
}

/// The integer dot product of two byte vectors, in sixteen independent lanes so the compiler
/// vectorises it (about three times faster than the `f32` one over the same rows, and it
/// reads a quarter of the bytes).
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let (a_chunks, b_chunks) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..16 {
            lanes[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    lanes.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::embed::{HashingEmbedder, dot, normalize};

    fn labels(repo: Option<&str>, scope: Scope) -> VectorLabels {
        VectorLabels {
            repo: repo.map(str::to_owned),
            scope,
            status: Status::Active,
            version: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn the_flat_index_finds_nearest_and_forgets_removed() {
        let embedder = HashingEmbedder::new(64);
        let mut index = FlatIndex::new(64);
        let any = VectorFilter::default();
        let texts =
            ["deploy the shop", "the shop deploys on friday", "tabs in makefiles", "coffee"];
        for (i, text) in texts.iter().enumerate() {
            index.upsert(&format!("m{i}"), &embedder.embed_one(text), labels(None, Scope::User));
        }
        let hits = index.search(&embedder.embed_one("deploy the shop now"), 2, &any);
        assert_eq!(hits[0].0, "m0");
        assert!(hits[0].1 > hits[1].1);
        index.remove("m0");
        assert_eq!(index.len(), 3);
        assert!(
            index
                .search(&embedder.embed_one("deploy the shop"), 3, &any)
                .iter()
                .all(|(id, _)| id != "m0")
        );
        index.upsert("m3", &embedder.embed_one("deploy the shop"), labels(None, Scope::Task));
        assert_eq!(
            index.search(&embedder.embed_one("deploy the shop"), 1, &any)[0].0,
            "m3",
            "upsert replaces"
        );
        assert_eq!(index.len(), 3);
        assert_eq!(index.labels("m3"), Some(labels(None, Scope::Task)), "moved rows keep theirs");
        assert_eq!(index.labels("m1"), Some(labels(None, Scope::User)));
        let query = embedder.embed_one("deploy the shop");
        let similarity = index.similarity(&query, "m3").unwrap();
        // Int8 rows: close to, not exactly, 1 (hashed vectors are sparse, so a little further
        // off than a sentence model's dense ones).
        assert!((similarity - 1.0).abs() < 5e-3, "the same text: {similarity}");
        assert!(index.similarity(&query, "m2").unwrap() < similarity);
        assert_eq!(index.similarity(&query, "m0"), None, "removed");
    }

    #[test]
    fn every_id_finds_its_own_row_through_upserts_and_removals() {
        let embedder = HashingEmbedder::new(16);
        let mut index = FlatIndex::new(16);
        let mut held: HashMap<String, Scope> = HashMap::new();
        let mut rng = cairn_test_support::rng::Rng::new(31);
        for step in 0..3_000 {
            let id = format!("mem_{}", rng.below(400));
            if rng.below(3) == 0 {
                index.remove(&id);
                held.remove(&id);
            } else {
                let scope = [Scope::User, Scope::Repo, Scope::Task][step % 3];
                index.upsert(&id, &embedder.embed_one(&id), labels(None, scope));
                held.insert(id, scope);
            }
        }
        assert_eq!(index.len(), held.len());
        for (id, scope) in &held {
            assert_eq!(index.labels(id), Some(labels(None, *scope)), "{id}");
            let own = index.similarity(&embedder.embed_one(id), id).unwrap();
            assert!((own - 1.0).abs() < 0.02, "{id}'s row is its own vector: {own}");
        }
        assert_eq!(index.labels("mem_400"), None);
    }

    #[test]
    fn filters_apply_before_the_top_k_cut() {
        let embedder = HashingEmbedder::new(64);
        let mut index = FlatIndex::new(64);
        let query = embedder.embed_one("deploy the shop");
        // A thousand other repositories' memories, all closer to the query than any of
        // `cairn`'s.
        for i in 0..1_000 {
            let repo = format!("repo{i}");
            index.upsert(&format!("o{i}"), &query, labels(Some(&repo), Scope::Repo));
        }
        let far = embedder.embed_one("the shop deploys on friday, tabs in makefiles");
        index.upsert("own", &far, labels(Some("cairn"), Scope::Repo));
        index.upsert("shared", &far, labels(None, Scope::User));
        index.upsert("task", &far, labels(Some("cairn"), Scope::Task));

        let in_cairn = VectorFilter { repo: Some("cairn".to_owned()), ..VectorFilter::default() };
        let mut found: Vec<String> =
            index.search(&query, 3, &in_cairn).into_iter().map(|(id, _)| id).collect();
        found.sort();
        assert_eq!(found, ["own", "shared", "task"]);
        let tasks = VectorFilter { scope: Some(Scope::Task), ..in_cairn.clone() };
        assert_eq!(index.search(&query, 3, &tasks).len(), 1);
        let unknown = VectorFilter { repo: Some("nowhere".to_owned()), ..VectorFilter::default() };
        assert_eq!(index.search(&query, 3, &unknown)[0].0, "shared", "only repo-less rows");

        index.relabel("own", labels(Some("elsewhere"), Scope::Repo));
        assert!(index.search(&query, 3, &in_cairn).iter().all(|(id, _)| id != "own"));
        assert_eq!(index.search(&query, 5, &VectorFilter::default()).len(), 5);
    }

    #[test]
    fn int8_similarities_stay_close_to_exact_ones() {
        // Dense unit vectors like a sentence model's: every component carries some weight.
        let mut state = 7u64;
        let mut unit = || {
            let mut vector: Vec<f32> = (0..384)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 20_001) as f32 / 10_000.0 - 1.0
                })
                .collect();
            normalize(&mut vector);
            vector
        };
        let vectors: Vec<Vec<f32>> = (0..300).map(|_| unit()).collect();
        let mut index = FlatIndex::new(384);
        for (i, vector) in vectors.iter().enumerate() {
            index.upsert(&format!("m{i}"), vector, labels(None, Scope::User));
        }
        let mut worst = 0f32;
        for _ in 0..20 {
            let query = unit();
            for (i, vector) in vectors.iter().enumerate() {
                let approximate = index.similarity(&query, &format!("m{i}")).unwrap();
                worst = worst.max((approximate - dot(vector, &query)).abs());
            }
            let hits = index.search(&query, 5, &VectorFilter::default());
            assert!(hits.windows(2).all(|pair| pair[0].1 >= pair[1].1), "best first");
        }
        assert!(worst < 2e-3, "largest error {worst}");
        let (bytes, scale) = quantize(&[0.0; 4]);
        assert_eq!((bytes, scale), (vec![0; 4], 0.0), "a zero vector stays zero");
        assert_eq!(dot_i8(&[127; 37], &[-128; 37]), 127 * -128 * 37, "no overflow, tail counted");
    }

    fn bytes(count: usize, seed: u64) -> Vec<i8> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state % 255) as i16 - 127) as i8
            })
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_dot_product_equals_the_plain_one() {
        let Some(simd) = pulp::x86::V3::try_new() else { return };
        for (dimensions, seed) in [(384, 1), (45, 2), (31, 3), (64, 4), (384, 5)] {
            let (row, query) = (bytes(dimensions, seed), bytes(dimensions, seed + 100));
            let prepared = avx2::Blocks::new(&query);
            let fast = simd.vectorize(|| avx2::dot(simd, &row, &prepared));
            assert_eq!(fast, dot_i8(&row, &query), "{dimensions} dimensions");
        }
        // The extremes: every product ±127 × 127.
        let (row, query) = (vec![127i8; 384], vec![-127i8; 384]);
        let prepared = avx2::Blocks::new(&query);
        assert_eq!(simd.vectorize(|| avx2::dot(simd, &row, &prepared)), -127 * 127 * 384);
    }

    /// Dense vectors in clusters (as a sentence model's are): a search through the lists of
    /// a large index finds nearly all of the exact int8 ranking's best rows, filtered or not,
    /// and keeps finding them while rows come and go.
    #[test]
    fn a_search_through_lists_keeps_the_best_rows() {
        let dimensions = 384;
        let mut rng = cairn_test_support::rng::Rng::new(11);
        let mut gaussian = move || {
            // Box–Muller.
            let (u, v): (f64, f64) = (rng.unit().max(1e-12), rng.unit());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        };
        let centres: Vec<Vec<f32>> =
            (0..200).map(|_| (0..dimensions).map(|_| gaussian()).collect()).collect();
        let mut index = FlatIndex::new(dimensions);
        // Lists from 4,000 rows, of 200 rows each: a search reads 12 of about 120.
        index.probe = Probe { from: 4_000, rows_per_list: 200, lists: 12 };
        let count = PARALLEL_ROWS + 4_000;
        let mut point = |centre: &[f32]| {
            let mut vector: Vec<f32> = centre.iter().map(|c| c + 0.8 * gaussian()).collect();
            normalize(&mut vector);
            vector
        };
        for i in 0..count {
            let repo = ["cairn", "shop"].get(i % 3).copied();
            let vector = point(&centres[i % centres.len()]);
            index.upsert(&format!("m{i}"), &vector, labels(repo, Scope::Repo));
        }
        // Some rows leave, some come back with other vectors.
        for i in (0..count).step_by(7) {
            index.remove(&format!("m{i}"));
        }
        for i in (0..count).step_by(21) {
            let vector = point(&centres[(i + 1) % centres.len()]);
            index.upsert(&format!("m{i}"), &vector, labels(None, Scope::Repo));
        }
        let lists = index.lists.as_ref().expect("a large index keeps lists");
        assert_eq!(lists.members.iter().map(Vec::len).sum::<usize>(), index.len());
        for (list, members) in lists.members.iter().enumerate() {
            assert!(members.iter().all(|&row| lists.of_row[row as usize] == list as u32));
        }
        let (mut found, mut wanted) = (0, 0);
        for q in 0..40 {
            let query = point(&centres[(q * 7) % centres.len()]);
            let filter = if q % 2 == 0 {
                VectorFilter::default()
            } else {
                VectorFilter { repo: Some("shop".to_owned()), ..VectorFilter::default() }
            };
            let k = 10;
            let hits = index.search(&query, k, &filter);
            assert_eq!(hits.len(), k);
            assert!(hits.iter().all(|(id, _)| filter.admits(&index.labels(id).unwrap())));
            let query_bytes = Query::new(&query);
            let mut exact: Vec<(usize, f32)> = (0..index.len())
                .filter(|&row| filter.admits(&index.labels(index.ids.get(row as u32)).unwrap()))
                .map(|row| {
                    (row, dot_i8(index.row(row), &query_bytes.bytes) as f32 * index.scales[row])
                })
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (row, _) in &exact[..k] {
                wanted += 1;
                found += usize::from(hits.iter().any(|(id, _)| id == index.ids.get(*row as u32)));
            }
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.95, "recall@10 {recall:.3}");
        // A filter only a few rows pass reads further lists until it has enough of them.
        index.relabel("m1", labels(Some("rare"), Scope::Task));
        index.relabel("m2", labels(Some("rare"), Scope::Task));
        let rare = VectorFilter { scope: Some(Scope::Task), ..VectorFilter::default() };
        let hits = index.search(&point(&centres[100]), 5, &rare);
        assert_eq!(hits.len(), 2, "{hits:?}");
        // Shrunk under half the threshold, the index scans every row again.
        for i in 0..count {
            index.remove(&format!("m{i}"));
        }
        assert!(index.lists.is_none() && index.is_empty());
    }

    #[test]
    fn a_large_index_scanned_in_halves_finds_the_best_rows() {
        let embedder = HashingEmbedder::new(32);
        let mut index = FlatIndex::new(32);
        let count = PARALLEL_ROWS + 5_001;
        for i in 0..count {
            let repo = ["cairn", "shop", "docs"].get(i % 4).copied();
            let text = format!("memory {i} about deploys {} and {}", i % 97, i % 13);
            index.upsert(&format!("m{i}"), &embedder.embed_one(&text), labels(repo, Scope::Repo));
        }
        let query = embedder.embed_one("deploys 42 and 3");
        for filter in [
            VectorFilter::default(),
            VectorFilter { repo: Some("shop".to_owned()), ..VectorFilter::default() },
        ] {
            let found = index.search(&query, 25, &filter);
            let mut all: Vec<(String, f32)> = (0..count)
                .map(|i| format!("m{i}"))
                .filter(|id| filter.admits(&index.labels(id).unwrap()))
                .map(|id| {
                    let similarity = index.similarity(&query, &id).unwrap();
                    (id, similarity)
                })
                .collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            let scores = |hits: &[(String, f32)]| hits.iter().map(|hit| hit.1).collect::<Vec<_>>();
            assert_eq!(scores(&found), scores(&all[..25]), "{:?}", filter.repo);
            assert!(found.iter().all(|(id, _)| filter.admits(&index.labels(id).unwrap())));
        }
    }
}
