//! Semantic retrieval's moving parts: the [`Embedder`] trait (models that turn text into
//! vectors), the in-memory [`VectorIndex`], and a deterministic [`HashingEmbedder`] for tests
//! that need no model.

use std::collections::HashMap;
use std::hash::BuildHasher as _;

use hashbrown::HashTable;

use cairn_types::{Memory, Scope, Status, Timestamp};

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(pub String);

/// A model that turns texts into unit-length vectors.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// The model's name, stored with each vector: vectors of different models never mix.
    fn model(&self) -> &str;

    fn dimensions(&self) -> usize;

    /// One unit-length vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// What an index keeps of a vector's memory besides the vector, so that a search filters
/// before its top-k cut rather than after it. A cache of the store's truth: the engine checks
/// every hit against the store and corrects the labels it finds stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorLabels {
    pub repo: Option<String>,
    pub scope: Scope,
    pub status: Status,
    /// The memory's `updatedAt` the labels were read at.
    pub version: Timestamp,
}

impl VectorLabels {
    pub fn of(memory: &Memory) -> VectorLabels {
        VectorLabels {
            repo: memory.repo.clone(),
            scope: memory.scope,
            status: memory.status,
            version: memory.updated_at,
        }
    }
}

/// Which vectors a search may return (`None` admits any).
#[derive(Debug, Clone, Default)]
pub struct VectorFilter {
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    /// The repository rule of retrieval: this repository's memories and those of none.
    pub repo: Option<String>,
}

impl VectorFilter {
    pub fn admits(&self, labels: &VectorLabels) -> bool {
        self.scope.is_none_or(|scope| scope == labels.scope)
            && self.status.is_none_or(|status| status == labels.status)
            && crate::repo_admits(self.repo.as_deref(), labels.repo.as_deref())
    }
}

/// Nearest-neighbour search over unit vectors by dot product (cosine similarity). Behind a
/// trait so another index can replace the flat one. Its similarities may be approximate
/// (within about 0.002 for [`FlatIndex`]'s int8 rows): callers that need exact ones score
/// the candidates again from the stored vectors.
pub trait VectorIndex: Send + Sync {
    fn upsert(&mut self, id: &str, vector: &[f32], labels: VectorLabels);
    /// Replaces a vector's labels; nothing happens when the index lacks it.
    fn relabel(&mut self, id: &str, labels: VectorLabels);
    fn labels(&self, id: &str) -> Option<VectorLabels>;
    fn remove(&mut self, id: &str);
    /// The `k` most similar ids among those `filter` admits, most similar first, with their
    /// similarity (found approximately by a large [`FlatIndex`]: see its two passes).
    fn search(&self, query: &[f32], k: usize, filter: &VectorFilter) -> Vec<(String, f32)>;
    /// The similarity of one memory's vector to `query`; `None` when the index lacks it.
    fn similarity(&self, query: &[f32], id: &str) -> Option<f32>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Brute-force search over one contiguous matrix of int8 rows: a vector is kept as 384 signed
/// bytes and one scale (its largest component over 127), a quarter of its `f32` size (38 MB
/// instead of 150 MB at 100,000 vectors), and a search reads a quarter of the bytes. The
/// query is quantised the same way and each admitted row scored by an integer dot product;
/// the similarities are within about 0.002 of the exact ones (see
/// `int8_similarities_stay_close_to_exact_ones`), so callers rank a wider shortlist exactly.
/// From 200,000 rows a search compares the rows' signs first and computes the products of
/// the nearest only ([`FlatIndex::scan_signs_first`]): approximate, measured in
/// docs/retrieval.md.
#[derive(Debug)]
pub struct FlatIndex {
    dimensions: usize,
    /// Each row's memory id: the one copy of it (`positions` hashes from here).
    ids: Vec<Box<str>>,
    /// `dimensions` quantised components per row.
    rows: Vec<i8>,
    /// One per row: the factor that turns a row's bytes back into its vector.
    scales: Vec<f32>,
    /// Each row's signs, a bit a component (`SIGN_WORDS` words a row): the first pass of a
    /// search of a large index (see [`FlatIndex::search`]).
    signs: Vec<u64>,
    /// When a search compares signs first, and how many rows it keeps from that pass.
    two_pass: TwoPass,
    /// One per row, in row order.
    labels: Vec<RowLabels>,
    /// Row numbers by id, hashed from `ids`: a million ids kept once, not twice (about 90
    /// MB a million).
    positions: HashTable<u32>,
    hasher: std::hash::RandomState,
    /// Repository names, interned: a row holds an index into `repos`.
    repos: Vec<String>,
    repo_numbers: HashMap<String, u32>,
    /// AVX2 when the CPU has it (checked once).
    #[cfg(target_arch = "x86_64")]
    v3: Option<pulp::x86::V3>,
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

impl FlatIndex {
    pub fn new(dimensions: usize) -> FlatIndex {
        FlatIndex {
            dimensions,
            ids: Vec::new(),
            rows: Vec::new(),
            scales: Vec::new(),
            signs: Vec::new(),
            two_pass: TwoPass::default(),
            labels: Vec::new(),
            positions: HashTable::new(),
            hasher: std::hash::RandomState::new(),
            repos: Vec::new(),
            repo_numbers: HashMap::new(),
            #[cfg(target_arch = "x86_64")]
            v3: pulp::x86::V3::try_new(),
        }
    }

    /// The quantised components of the row at `position`.
    fn row(&self, position: usize) -> &[i8] {
        &self.rows[position * self.dimensions..(position + 1) * self.dimensions]
    }

    /// The row of `id`.
    fn position(&self, id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.positions.find(hash, |&row| *self.ids[row as usize] == *id).map(|&row| row as usize)
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

    /// The `k` best admitted rows of `rows`, in no order, with their similarity to `query`.
    fn scan(
        &self,
        rows: std::ops::Range<usize>,
        query: &Query,
        admits: &impl Fn(&RowLabels) -> bool,
        k: usize,
    ) -> Vec<(usize, f32)> {
        let mut best = Best::new(k, rows.len());
        let first = rows.start;
        let rows = self.rows[rows.start * self.dimensions..rows.end * self.dimensions]
            .chunks_exact(self.dimensions)
            .zip(&self.labels[rows.clone()])
            .zip(&self.scales[rows]);
        let scale = query.scale;
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = self.v3 {
            // pulp runs the closure in a function compiled with AVX2 enabled.
            simd.vectorize(|| {
                for (offset, ((row, labels), row_scale)) in rows.enumerate() {
                    if admits(labels) {
                        let dot = avx2::dot(simd, row, &query.blocks);
                        best.offer(first + offset, dot as f32 * row_scale * scale);
                    }
                }
            });
            return best.into_vec();
        }
        for (offset, ((row, labels), row_scale)) in rows.enumerate() {
            if admits(labels) {
                let dot = dot_i8(row, &query.bytes);
                best.offer(first + offset, dot as f32 * row_scale * scale);
            }
        }
        best.into_vec()
    }

    fn sign_words(&self) -> usize {
        self.dimensions.div_ceil(64)
    }

    /// [`FlatIndex::scan`] in two passes, for a large index: first every admitted row's
    /// signs against the query's (the Hamming distance: 48 bytes a row for 384 dimensions,
    /// an eighth of the int8 row), keeping the nearest ([`TwoPass`]: 40 a hit wanted, at
    /// least 2,000); then those rows' int8 dot products, keeping the best `k`.
    fn scan_signs_first(
        &self,
        rows: std::ops::Range<usize>,
        query: &Query,
        admits: &impl Fn(&RowLabels) -> bool,
        k: usize,
    ) -> Vec<(usize, f32)> {
        let words = self.sign_words();
        let shortlist = (k * self.two_pass.per_hit).max(self.two_pass.least);
        let mut nearest = Best::new(shortlist, rows.len());
        let first = rows.start;
        let pass = |nearest: &mut Best| {
            let rows = self.signs[rows.start * words..rows.end * words]
                .chunks_exact(words)
                .zip(&self.labels[rows.clone()]);
            for (offset, (row, labels)) in rows.enumerate() {
                if admits(labels) {
                    let distance: u32 =
                        row.iter().zip(&query.signs).map(|(a, b)| (a ^ b).count_ones()).sum();
                    nearest.offer(first + offset, -(distance as f32));
                }
            }
        };
        #[cfg(target_arch = "x86_64")]
        match self.v3 {
            // With AVX2 comes POPCNT: one instruction a word.
            Some(simd) => simd.vectorize(|| pass(&mut nearest)),
            None => pass(&mut nearest),
        }
        #[cfg(not(target_arch = "x86_64"))]
        pass(&mut nearest);
        let scale = query.scale;
        let scored = nearest
            .into_vec()
            .into_iter()
            .map(|(position, _)| {
                let dot = dot_i8(self.row(position), &query.bytes);
                (position, dot as f32 * self.scales[position] * scale)
            })
            .collect();
        keep_best(scored, k)
    }

    /// The `k` best of the scored rows, best first, with their ids.
    fn best(&self, scored: Vec<(usize, f32)>, k: usize) -> Vec<(String, f32)> {
        let mut scored = keep_best(scored, k);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .map(|(position, score)| (self.ids[position].to_string(), score))
            .collect()
    }
}

impl VectorIndex for FlatIndex {
    fn upsert(&mut self, id: &str, vector: &[f32], labels: VectorLabels) {
        assert_eq!(vector.len(), self.dimensions, "vectors of one index share their dimensions");
        let labels = self.row_labels(labels);
        let (bytes, scale) = quantize(vector);
        let signs = signs(&bytes);
        let words = self.sign_words();
        match self.position(id) {
            Some(position) => {
                self.rows[position * self.dimensions..(position + 1) * self.dimensions]
                    .copy_from_slice(&bytes);
                self.signs[position * words..(position + 1) * words].copy_from_slice(&signs);
                self.scales[position] = scale;
                self.labels[position] = labels;
            }
            None => {
                let (hash, row) = (self.hasher.hash_one(id), self.ids.len() as u32);
                let (ids, hasher) = (&self.ids, &self.hasher);
                self.positions
                    .insert_unique(hash, row, |&row| hasher.hash_one(&*ids[row as usize]));
                self.ids.push(id.into());
                self.rows.extend_from_slice(&bytes);
                self.signs.extend_from_slice(&signs);
                self.scales.push(scale);
                self.labels.push(labels);
            }
        }
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
        let (ids, hash) = (&self.ids, self.hasher.hash_one(id));
        let Ok(entry) = self.positions.find_entry(hash, |&row| *ids[row as usize] == *id) else {
            return;
        };
        let position = entry.remove().0 as usize;
        let last = self.ids.len() - 1;
        if position != last {
            let dimensions = self.dimensions;
            let moved = self.hasher.hash_one(&*self.ids[last]);
            self.rows
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
            let words = self.sign_words();
            self.signs.copy_within(last * words..(last + 1) * words, position * words);
            self.ids.swap(position, last);
            self.scales.swap(position, last);
            self.labels.swap(position, last);
            if let Some(row) = self.positions.find_mut(moved, |&row| row as usize == last) {
                *row = position as u32;
            }
        }
        self.ids.pop();
        self.scales.pop();
        self.labels.pop();
        self.rows.truncate(last * self.dimensions);
        self.signs.truncate(last * self.sign_words());
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
        // A large index is scanned in two halves on two threads: each keeps its own best `k`,
        // and the best of both are the best of all.
        let rows = self.ids.len();
        let scan = |range: std::ops::Range<usize>| {
            if rows < self.two_pass.from {
                self.scan(range, &query, &admits, k)
            } else {
                self.scan_signs_first(range, &query, &admits, k)
            }
        };
        let scored = if rows < PARALLEL_ROWS {
            scan(0..rows)
        } else {
            let middle = rows / 2;
            let (mut first, second) = query_join(|| scan(0..middle), || scan(middle..rows));
            first.extend(second);
            first
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

/// A deterministic embedder with no model: words and word pairs hashed into signed buckets.
/// Texts that share words come out similar; paraphrases do not. For tests and benchmarks.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dimensions: usize,
}

impl HashingEmbedder {
    pub fn new(dimensions: usize) -> HashingEmbedder {
        HashingEmbedder { dimensions }
    }

    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let words: Vec<String> = crate::text::words(text).collect();
        let mut vector = vec![0f32; self.dimensions];
        let mut add = |feature: &str, weight: f32| {
            let hash = fnv1a(feature.as_bytes());
            let bucket = (hash % self.dimensions as u64) as usize;
            let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
            vector[bucket] += sign * weight;
        };
        for word in &words {
            add(word, 1.0);
        }
        for pair in words.windows(2) {
            add(&format!("{} {}", pair[0], pair[1]), 0.5);
        }
        normalize(&mut vector);
        vector
    }
}

#[async_trait::async_trait]
impl Embedder for HashingEmbedder {
    fn model(&self) -> &str {
        "hashing"
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }
}

/// A vector as signed bytes and the scale that turns them back: each component divided by
/// the largest magnitude over 127, rounded to the nearest integer (so each is off by at most
/// half the scale). A zero vector has scale 0.
fn quantize(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector.iter().fold(0f32, |largest, value| largest.max(value.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let bytes =
        vector.iter().map(|value| (value / scale).round().clamp(-127.0, 127.0) as i8).collect();
    (bytes, scale)
}

/// Runs `a` and `b` in parallel on the two threads kept for a request's own vector work (a
/// query's embedding, the index's scan), apart from rayon's global pool, where the embedding
/// worker's batches run (candle's products): there a query's halves waited behind a batch's
/// queued tasks, 38 ms p50 and 101 ms p90 for a question's embedding during batches instead of
/// 16 and 19 with threads of its own (the operating system shares the cores among them). The
/// threads sleep when no request needs them.
pub fn query_join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    query_threads().join(a, b)
}

/// Runs `op` on one of [`query_join`]'s two threads, so that the joins it makes (a query's
/// embedding makes one for each of its 36 products) start on a thread of their own pool:
/// the other thread takes the second half from there, and no outside thread sleeps and
/// wakes for each of them.
pub fn query_install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    query_threads().install(op)
}

fn query_threads() -> &'static rayon::ThreadPool {
    static THREADS: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    THREADS.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .thread_name(|number| format!("cairn-query-{number}"))
            .build()
            .expect("the query threads start")
    })
}

/// Rows from which a search runs on two threads: under it, the scan (a few tens of µs a
/// thousand rows on one thread: 100,000 took 4.4 ms under load, 2.15 ms idle on two) stays
/// under a millisecond, not worth the other thread's wake-up.
const PARALLEL_ROWS: usize = 20_000;

/// When a search compares signs first ([`FlatIndex::scan_signs_first`]). On
/// all-MiniLM-L6-v2's vectors of 29,320 texts, a first pass keeping 0.2 % of the rows kept
/// 97.3 % of the exact top 10, 0.4 % kept 99.4 %, 0.8 % kept 99.9 % (docs/retrieval.md); at
/// a million rows (two halves of 500,000) these numbers keep at least 0.4 %.
#[derive(Debug, Clone, Copy)]
struct TwoPass {
    /// Rows from which it does: under it every admitted row's int8 product is computed.
    from: usize,
    /// Rows kept from the first pass per hit wanted, and at least `least`.
    per_hit: usize,
    least: usize,
}

impl Default for TwoPass {
    fn default() -> TwoPass {
        TwoPass { from: 200_000, per_hit: 40, least: 2_000 }
    }
}

/// A vector's signs (of its quantised components), a bit each, 64 a word: set for a
/// positive component.
fn signs(bytes: &[i8]) -> Vec<u64> {
    bytes
        .chunks(64)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u64, |word, (bit, &byte)| word | (u64::from(byte > 0) << bit))
        })
        .collect()
}

/// A query quantised as the rows are, prepared once for every row it meets.
struct Query {
    bytes: Vec<i8>,
    scale: f32,
    /// Its signs, as [`FlatIndex::scan_signs_first`] compares them.
    signs: Vec<u64>,
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
            signs: signs(&bytes),
            bytes,
            scale,
        }
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

/// The dot product, in eight independent lanes so the compiler can vectorise it (a single
/// running sum is a dependency chain it must keep in order).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|value| *value /= norm);
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn lane_dot_products_match_the_plain_sum() {
        let a: Vec<f32> = (0..385).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..385).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }

    #[test]
    fn hashing_vectors_are_unit_length_and_deterministic() {
        let embedder = HashingEmbedder::new(128);
        let a = embedder.embed_one("Use pnpm in this repo");
        assert_eq!(a, embedder.embed_one("Use pnpm in this repo"));
        assert!((a.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(embedder.embed_one("").iter().all(|v| *v == 0.0));
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

    /// An index large enough to be scanned in two halves finds the rows an exhaustive
    /// ranking of every row's similarity finds, filter applied.
    /// Dense vectors in clusters (as a sentence model's are): the two-pass search of a large
    /// index finds nearly all of the exact int8 ranking's best rows, filtered or not.
    #[test]
    fn a_search_that_compares_signs_first_keeps_the_best_rows() {
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
        // Every search compares signs first, keeping 5 rows per hit (a quarter of the
        // default's: 50 for 10 hits, under 0.4 % of a half).
        index.two_pass = TwoPass { from: 0, per_hit: 5, least: 0 };
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
            assert!(hits.iter().all(|(id, _)| filter.admits(&index.labels(id).unwrap())));
            let query_bytes = Query::new(&query);
            let mut exact: Vec<(usize, f32)> = (0..index.len())
                .filter(|&row| filter.admits(&index.labels(&index.ids[row]).unwrap()))
                .map(|row| {
                    (row, dot_i8(index.row(row), &query_bytes.bytes) as f32 * index.scales[row])
                })
                .collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (row, _) in &exact[..k] {
                wanted += 1;
                found += usize::from(hits.iter().any(|(id, _)| **id == *index.ids[*row]));
            }
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.97, "recall@10 {recall:.3}");
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
