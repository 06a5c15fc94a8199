//! Semantic retrieval's moving parts: the [`Embedder`] trait (models that turn text into
//! vectors), the in-memory [`VectorIndex`], and a deterministic [`HashingEmbedder`] for tests
//! that need no model.

use cairn_types::{Memory, Scope, Status, Timestamp};

mod flat;

pub use flat::FlatIndex;

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
    /// similarity (found approximately by a large [`FlatIndex`]: see its lists).
    fn search(&self, query: &[f32], k: usize, filter: &VectorFilter) -> Vec<(String, f32)>;
    /// The similarity of one memory's vector to `query`; `None` when the index lacks it.
    fn similarity(&self, query: &[f32], id: &str) -> Option<f32>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
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

/// The dot product, in eight independent lanes so the compiler can vectorise it (a single
/// running sum is a dependency chain it must keep in order).
#[cfg(test)]
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
}
