//! Sentence embeddings from all-MiniLM-L6-v2, computed in process on the CPU with candle.
//!
//! This reproduces sentence-transformers' pipeline for the model: WordPiece tokens with
//! `[CLS]` and `[SEP]`, at most 256 tokens a text, the six-layer BERT encoder, the mean of the
//! token vectors over the attention mask, and L2 normalisation. The model files come from
//! `fetch::fetch_model` or any folder holding `model.safetensors`, `tokenizer.json` and
//! `config.json`; nothing is fetched at run time.

use std::path::Path;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The model's name as sentence-transformers knows it.
const MODEL: &str = "all-MiniLM-L6-v2";

/// The length of every vector.
const DIMENSIONS: usize = 384;

/// The longest input in tokens, `[CLS]` and `[SEP]` included; sentence-transformers'
/// `max_seq_length` for this model. Longer texts are cut.
const MAX_TOKENS: usize = 256;

/// The most texts that go through the model in one forward pass. It bounds memory: the
/// attention scores of a pass take `BATCH * 12 heads * MAX_TOKENS^2 * 4` bytes, 100 MB here.
const BATCH: usize = 32;

/// An all-MiniLM-L6-v2 sentence embedder running on the CPU.
pub struct LocalEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &MODEL)
            .field("device", &self.device)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `dir`.
    pub fn load(dir: &Path) -> Result<LocalEmbedder, String> {
        let device = Device::Cpu;

        let config_path = dir.join("config.json");
        let config = std::fs::read_to_string(&config_path)
            .map_err(|e| format!("cannot read {}: {e}", config_path.display()))?;
        let config: Config = serde_json::from_str(&config)
            .map_err(|e| format!("{} is not a BERT config: {e}", config_path.display()))?;
        if config.hidden_size != DIMENSIONS {
            return Err(format!(
                "{} describes a model with {} dimensions; {MODEL} has {DIMENSIONS}",
                config_path.display(),
                config.hidden_size
            ));
        }

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| format!("cannot load {}: {e}", tokenizer_path.display()))?;
        // The file asks for truncation at 128 and padding to a fixed 128; sentence-transformers
        // overrides both, and so does this: 256 tokens, padding per batch by `embed` itself.
        let truncation = TruncationParams {
            direction: TruncationDirection::Right,
            max_length: MAX_TOKENS,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        };
        tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| format!("cannot set the tokenizer's truncation: {e}"))?;
        tokenizer.with_padding(None);

        let weights_path = dir.join("model.safetensors");
        let tensors = candle_core::safetensors::load(&weights_path, &device)
            .map_err(|e| format!("cannot load {}: {e}", weights_path.display()))?;
        let weights = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model = BertModel::load(weights, &config)
            .map_err(|e| format!("{} does not hold {MODEL}: {e}", weights_path.display()))?;

        Ok(LocalEmbedder { model, tokenizer, device })
    }

    /// The model's name: `all-MiniLM-L6-v2`.
    pub fn model(&self) -> &str {
        MODEL
    }

    /// The length of every vector: 384.
    pub fn dimensions(&self) -> usize {
        DIMENSIONS
    }

    /// Returns one unit-length vector per text, in the order of `texts`.
    ///
    /// Texts longer than 256 tokens are cut. The texts are sorted by length and run in
    /// padded batches of up to 32, so a call with many texts wastes little work on padding.
    /// Blocking and CPU-bound (candle uses every core): call it from a blocking thread in
    /// async code.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch_fast(inputs, true)
            .map_err(|e| format!("cannot tokenize the texts: {e}"))?;

        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&tokenizers::Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let embedded =
                self.forward(&batch).map_err(|e| format!("the model failed on a batch: {e}"))?;
            for (&i, vector) in chunk.iter().zip(embedded) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// Runs one padded batch through the model, pools and normalises.
    fn forward(&self, batch: &[&tokenizers::Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let width = batch.iter().map(|encoding| encoding.len()).max().unwrap_or(0);
        let rows = batch.len();
        let mut ids = vec![0u32; rows * width];
        let mut type_ids = vec![0u32; rows * width];
        let mut mask = vec![0u32; rows * width];
        for (row, encoding) in batch.iter().enumerate() {
            let start = row * width;
            let len = encoding.len();
            ids[start..start + len].copy_from_slice(encoding.get_ids());
            type_ids[start..start + len].copy_from_slice(encoding.get_type_ids());
            mask[start..start + len].copy_from_slice(encoding.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (rows, width), &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, (rows, width), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &self.device)?;

        // The hidden states are (rows, width, 384); padding positions are left out of the mean.
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
        mean.broadcast_div(&norms)?.to_vec2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// Loads the model once per test binary, fetching it into a fixed cache folder first when
    /// this machine does not have it yet.
    fn embedder() -> &'static LocalEmbedder {
        static EMBEDDER: OnceLock<LocalEmbedder> = OnceLock::new();
        EMBEDDER.get_or_init(|| {
            let cache = crate::test_cache();
            let dir = crate::fetch::fetch_model(&cache).unwrap();
            LocalEmbedder::load(&dir).unwrap()
        })
    }

    fn embed_one(text: &str) -> Vec<f32> {
        embedder().embed(&[text.to_owned()]).unwrap().remove(0)
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn max_difference(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    #[test]
    fn can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<LocalEmbedder>();
    }

    #[test]
    fn a_missing_folder_is_a_clear_error() {
        let missing = std::env::temp_dir().join("cairn-no-such-model-folder");
        let err = LocalEmbedder::load(&missing).unwrap_err();
        assert!(err.starts_with("cannot read ") && err.contains("config.json"), "{err}");
    }

    #[test]
    fn names_the_model_and_its_size() {
        let embedder = embedder();
        assert_eq!(embedder.model(), "all-MiniLM-L6-v2");
        assert_eq!(embedder.dimensions(), 384);
        assert!(embedder.embed(&[]).unwrap().is_empty());
    }

    #[test]
    fn vectors_have_384_dimensions_and_unit_length() {
        let texts = ["The user prefers dark mode", "", "🦀 Ünïcödé — 中文 text"].map(str::to_owned);
        for vector in embedder().embed(&texts).unwrap() {
            assert_eq!(vector.len(), 384);
            assert!(vector.iter().all(|x| x.is_finite()));
            let norm = dot(&vector, &vector).sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
        }
    }

    #[test]
    fn is_deterministic() {
        let text = "Deploys go through the staging cluster first";
        assert_eq!(embed_one(text), embed_one(text));
    }

    #[test]
    fn matches_sentence_transformers() {
        // Computed with sentence-transformers 6.2 and torch 2.15 on the CPU:
        // SentenceTransformer("all-MiniLM-L6-v2").encode(text, normalize_embeddings=True).
        let vector = embed_one("The user prefers dark mode");
        assert!(max_difference(&vector[..8], &REFERENCE_DARK_MODE) < 1e-4, "{:?}", &vector[..8]);
        // The similarities of sentence-transformers' own quick-start example.
        let weather = embed_one("The weather is lovely today.");
        let sunny = embed_one("It's so sunny outside!");
        let stadium = embed_one("He drove to the stadium.");
        assert!((dot(&weather, &sunny) - REFERENCE_SIMILARITIES[0]).abs() < 1e-3);
        assert!((dot(&weather, &stadium) - REFERENCE_SIMILARITIES[1]).abs() < 1e-3);
        assert!((dot(&sunny, &stadium) - REFERENCE_SIMILARITIES[2]).abs() < 1e-3);
    }

    /// The first eight components of the reference vector of "The user prefers dark mode".
    const REFERENCE_DARK_MODE: [f32; 8] =
        [0.0433392, 0.0020725, 0.0113642, 0.0546068, -0.0171562, -0.0335283, 0.0909681, 0.0207133];

    /// The first eight components of the reference vector of the 2,000-word text of
    /// `long_texts_are_truncated`, which sentence-transformers cuts at 256 tokens.
    const REFERENCE_LONG: [f32; 8] = [
        0.0043988, -0.0679085, -0.0441802, -0.0218879, 0.0171644, 0.0064333, 0.0775624, -0.0208301,
    ];

    /// The reference similarities of weather/sunny, weather/stadium and sunny/stadium; the
    /// same as in sentence-transformers' documentation.
    const REFERENCE_SIMILARITIES: [f32; 3] = [0.6659554, 0.104584, 0.1411445];

    #[test]
    fn a_paraphrase_is_closer_than_an_unrelated_text() {
        let preference = embed_one("The user prefers dark mode");
        let question = embed_one("Which colour theme does the user like?");
        let unrelated = embed_one("The build uses cargo");
        let related = dot(&preference, &question);
        let other = dot(&preference, &unrelated);
        assert!(related > other + 0.2, "paraphrase {related}, unrelated {other}");
    }

    #[test]
    fn a_padded_batch_equals_texts_one_by_one() {
        let texts = [
            "Short.",
            "A somewhat longer sentence about the memory service and its ranking.",
            "The longest of the three texts talks about SQLite, write-ahead logging, \
             synchronous commits, context packs, guards, and the dream cycle that merges \
             near-duplicate memories every night.",
        ]
        .map(str::to_owned);
        let batch = embedder().embed(&texts).unwrap();
        for (text, batched) in texts.iter().zip(&batch) {
            let alone = embed_one(text);
            assert!(max_difference(batched, &alone) < 1e-5, "{text}");
        }
    }

    #[test]
    fn long_texts_are_truncated() {
        let words: Vec<String> = (0..2_000).map(|i| format!("word{}", i % 97)).collect();
        let long = words.join(" ");
        let vector = embed_one(&long);
        assert_eq!(vector.len(), 384);
        assert!((dot(&vector, &vector).sqrt() - 1.0).abs() < 1e-5);
        assert!(max_difference(&vector[..8], &REFERENCE_LONG) < 1e-4, "{:?}", &vector[..8]);
        // Only the first 254 word pieces count, so a text that adds words at the end changes
        // nothing.
        let longer = format!("{long} and a different ending that is cut off");
        assert!(max_difference(&vector, &embed_one(&longer)) < 1e-6);
    }
}
