//! Semantic retrieval's moving parts: the [`Embedder`] trait (models that turn text into
//! vectors), the in-memory [`VectorIndex`], and a deterministic [`HashingEmbedder`] for tests
//! that need no model.

use std::collections::HashMap;

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

/// Nearest-neighbour search over unit vectors by dot product (cosine similarity). Behind a
/// trait so an approximate index can replace the exact one.
pub trait VectorIndex: Send + Sync {
    fn upsert(&mut self, id: &str, vector: &[f32]);
    fn remove(&mut self, id: &str);
    /// The `k` most similar ids, most similar first, with their similarity.
    fn search(&self, query: &[f32], k: usize) -> Vec<(String, f32)>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Exact search over one contiguous `f32` matrix: a brute-force dot product per row.
#[derive(Debug)]
pub struct FlatIndex {
    dimensions: usize,
    ids: Vec<String>,
    rows: Vec<f32>,
    positions: HashMap<String, usize>,
}

impl FlatIndex {
    pub fn new(dimensions: usize) -> FlatIndex {
        FlatIndex { dimensions, ids: Vec::new(), rows: Vec::new(), positions: HashMap::new() }
    }
}

impl VectorIndex for FlatIndex {
    fn upsert(&mut self, id: &str, vector: &[f32]) {
        assert_eq!(vector.len(), self.dimensions, "vectors of one index share their dimensions");
        match self.positions.get(id) {
            Some(&position) => {
                self.rows[position * self.dimensions..(position + 1) * self.dimensions]
                    .copy_from_slice(vector);
            }
            None => {
                self.positions.insert(id.to_owned(), self.ids.len());
                self.ids.push(id.to_owned());
                self.rows.extend_from_slice(vector);
            }
        }
    }

    fn remove(&mut self, id: &str) {
        let Some(position) = self.positions.remove(id) else { return };
        let last = self.ids.len() - 1;
        if position != last {
            let (dimensions, moved) = (self.dimensions, self.ids[last].clone());
            self.rows
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
            self.ids.swap(position, last);
            self.positions.insert(moved, position);
        }
        self.ids.pop();
        self.rows.truncate(last * self.dimensions);
    }

    fn search(&self, query: &[f32], k: usize) -> Vec<(String, f32)> {
        if k == 0 || query.len() != self.dimensions {
            return Vec::new();
        }
        let mut scored: Vec<(usize, f32)> = self
            .rows
            .chunks_exact(self.dimensions)
            .map(|row| dot(row, query))
            .enumerate()
            .collect();
        let k = k.min(scored.len());
        if k < scored.len() {
            scored.select_nth_unstable_by(k, |a, b| b.1.total_cmp(&a.1));
            scored.truncate(k);
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.into_iter().map(|(position, score)| (self.ids[position].clone(), score)).collect()
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

/// The dot product, in eight independent lanes so the compiler can vectorise it (a single
/// running sum is a dependency chain it must keep in order).
fn dot(a: &[f32], b: &[f32]) -> f32 {
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
    fn the_flat_index_finds_nearest_and_forgets_removed() {
        let embedder = HashingEmbedder::new(64);
        let mut index = FlatIndex::new(64);
        let texts =
            ["deploy the shop", "the shop deploys on friday", "tabs in makefiles", "coffee"];
        for (i, text) in texts.iter().enumerate() {
            index.upsert(&format!("m{i}"), &embedder.embed_one(text));
        }
        let hits = index.search(&embedder.embed_one("deploy the shop now"), 2);
        assert_eq!(hits[0].0, "m0");
        assert!(hits[0].1 > hits[1].1);
        index.remove("m0");
        assert_eq!(index.len(), 3);
        assert!(
            index
                .search(&embedder.embed_one("deploy the shop"), 3)
                .iter()
                .all(|(id, _)| id != "m0")
        );
        index.upsert("m3", &embedder.embed_one("deploy the shop"));
        assert_eq!(
            index.search(&embedder.embed_one("deploy the shop"), 1)[0].0,
            "m3",
            "upsert replaces"
        );
        assert_eq!(index.len(), 3);
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
}
