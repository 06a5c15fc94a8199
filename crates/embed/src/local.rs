//! Sentence embeddings from all-MiniLM-L6-v2, computed in process on the CPU with candle.
//!
//! This reproduces sentence-transformers' pipeline for the model: WordPiece tokens with
//! `[CLS]` and `[SEP]`, at most 256 tokens a text, the six-layer BERT encoder, the mean of the
//! token vectors over the attention mask, and L2 normalisation. The model files come from
//! `fetch::fetch_model` or any folder holding `model.safetensors`, `tokenizer.json` and
//! `config.json`; nothing is fetched at run time.
//!
//! Memory is what this module is careful about. The word-embedding table (30,522 × 384 `f32`,
//! 47 MB, half the weights) stays in the file: each batch reads only the rows of the tokens
//! it holds (positioned reads, served by the page cache), and builds the same input tensor
//! candle's own lookup would. Batches are bounded in tokens, not only in texts, so the
//! attention scores of one pass stay a few megabytes whatever the texts' lengths.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use candle_core::{CpuStorage, D, DType, Device, Storage, Tensor};
use candle_nn::{Embedding, LayerNorm, Module as _, VarBuilder};
use candle_transformers::models::bert::{BertEncoder, Config};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The model's name as sentence-transformers knows it.
const MODEL: &str = "all-MiniLM-L6-v2";

/// The length of every vector.
const DIMENSIONS: usize = 384;

/// The longest input in tokens, `[CLS]` and `[SEP]` included; sentence-transformers'
/// `max_seq_length` for this model. Longer texts are cut.
const MAX_TOKENS: usize = 256;

/// The most texts that go through the model in one forward pass.
const BATCH: usize = 32;

/// The most tokens, padding included, in one forward pass. It bounds the memory of a pass:
/// the largest intermediate tensors are the feed-forward activations (`tokens * 1536 * 4`
/// bytes, 6 MB here) and the attention scores (`tokens * 12 heads * width * 4`, at most 12 MB
/// for texts of 256 tokens, under 2 MB for sentences). The texts are sorted by length first,
/// so a batch pads little.
const BATCH_TOKENS: usize = 1024;

/// The tensor of the word-embedding table in `model.safetensors` (after an optional
/// `bert.` prefix).
const WORD_TABLE: &str = "embeddings.word_embeddings.weight";

/// An all-MiniLM-L6-v2 sentence embedder running on the CPU.
pub struct LocalEmbedder {
    words: WordTable,
    positions: Embedding,
    token_types: Embedding,
    embedding_norm: LayerNorm,
    encoder: BertEncoder,
    /// The same weights (shared with candle's tensors, not copied), for one text at a time.
    single: Single,
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

/// The word-embedding table, read from `model.safetensors` a row at a time.
struct WordTable {
    file: File,
    /// Where the table's first row starts in the file.
    start: u64,
    rows: usize,
}

impl WordTable {
    /// The rows of `ids`, one after another, as one `f32` buffer.
    fn gather(&self, ids: &[u32]) -> std::io::Result<Vec<f32>> {
        let row_bytes = DIMENSIONS * 4;
        let mut read: HashMap<u32, Vec<f32>> = HashMap::new();
        let mut bytes = vec![0u8; row_bytes];
        let mut out = Vec::with_capacity(ids.len() * DIMENSIONS);
        for &id in ids {
            if let std::collections::hash_map::Entry::Vacant(entry) = read.entry(id) {
                if id as usize >= self.rows {
                    return Err(std::io::Error::other(format!(
                        "token {id} is not in the vocabulary"
                    )));
                }
                self.file
                    .read_exact_at(&mut bytes, self.start + u64::from(id) * row_bytes as u64)?;
                let row = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                entry.insert(row);
            }
            out.extend_from_slice(&read[&id]);
        }
        Ok(out)
    }
}

/// The encoder again, for one text at a time (a query): the same weights, read from candle's
/// tensors in place, through [`crate::thin::linear`] instead of candle's matrix product, on
/// the calling thread alone, with no padding and no mask (one text has none), and a few
/// buffers for the whole pass instead of a tensor an operation. Its vectors equal the batch
/// path's to within float rounding (see `a_padded_batch_equals_texts_one_by_one`).
struct Single {
    positions: Tensor,
    token_types: Tensor,
    norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    cpu: crate::thin::Cpu,
}

/// A linear layer's weights (`out × in`) and bias.
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

/// A layer norm's scale, shift and epsilon.
struct Norm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// Runs `f` on a CPU `f32` tensor's values, in place.
fn with_values<T>(tensor: &Tensor, f: impl FnOnce(&[f32]) -> T) -> candle_core::Result<T> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(values)) = &*storage else {
        candle_core::bail!("a weight is not an f32 tensor on the CPU")
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("a weight is not contiguous")
    };
    Ok(f(&values[start..end]))
}

impl Dense {
    fn load(tensors: &HashMap<String, Tensor>, name: &str) -> Result<Dense, String> {
        Ok(Dense { weight: tensor(tensors, name, "weight")?, bias: tensor(tensors, name, "bias")? })
    }

    /// `x` (rows of the weights' width) through the layer, into `out`.
    fn forward(
        &self,
        cpu: crate::thin::Cpu,
        x: &[f32],
        out: &mut Vec<f32>,
    ) -> candle_core::Result<()> {
        with_values(&self.weight, |weight| {
            with_values(&self.bias, |bias| {
                out.clear();
                out.resize(x.len() / (weight.len() / bias.len()) * bias.len(), 0.0);
                crate::thin::linear(cpu, x, weight, bias, out);
            })
        })?
    }
}

impl Norm {
    fn load(tensors: &HashMap<String, Tensor>, name: &str, eps: f64) -> Result<Norm, String> {
        Ok(Norm {
            weight: tensor(tensors, name, "weight")?,
            bias: tensor(tensors, name, "bias")?,
            eps: eps as f32,
        })
    }

    /// Normalises each row of `x` in place, as candle's `layer_norm` does.
    fn apply(&self, x: &mut [f32]) -> candle_core::Result<()> {
        with_values(&self.weight, |weight| {
            with_values(&self.bias, |bias| {
                for row in x.chunks_exact_mut(weight.len()) {
                    let n = row.len() as f32;
                    let (sum, squares) = row
                        .iter()
                        .fold((0f32, 0f32), |(sum, squares), v| (sum + v, squares + v * v));
                    let mean = sum / n;
                    let scale = (squares / n - mean * mean + self.eps).sqrt().recip();
                    for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
                        *v = (*v - mean) * scale * w + b;
                    }
                }
            })
        })?
    }
}

/// The tensor `{name}.{part}`, which must exist.
fn tensor(tensors: &HashMap<String, Tensor>, name: &str, part: &str) -> Result<Tensor, String> {
    tensors
        .get(&format!("{name}.{part}"))
        .cloned()
        .ok_or_else(|| format!("it has no {name}.{part}"))
}

impl Single {
    fn load(tensors: &HashMap<String, Tensor>, config: &Config) -> Result<Single, String> {
        let eps = config.layer_norm_eps;
        let layers = (0..config.num_hidden_layers)
            .map(|l| {
                let at = |name: &str| format!("encoder.layer.{l}.{name}");
                Ok(Layer {
                    query: Dense::load(tensors, &at("attention.self.query"))?,
                    key: Dense::load(tensors, &at("attention.self.key"))?,
                    value: Dense::load(tensors, &at("attention.self.value"))?,
                    attention_out: Dense::load(tensors, &at("attention.output.dense"))?,
                    attention_norm: Norm::load(tensors, &at("attention.output.LayerNorm"), eps)?,
                    intermediate: Dense::load(tensors, &at("intermediate.dense"))?,
                    output: Dense::load(tensors, &at("output.dense"))?,
                    output_norm: Norm::load(tensors, &at("output.LayerNorm"), eps)?,
                })
            })
            .collect::<Result<Vec<Layer>, String>>()?;
        if config.hidden_act != candle_transformers::models::bert::HiddenAct::Gelu
            || !DIMENSIONS.is_multiple_of(config.num_attention_heads)
        {
            return Err("it is not a BERT of exact GELU and whole attention heads".to_owned());
        }
        Ok(Single {
            positions: tensor(tensors, "embeddings.position_embeddings", "weight")?,
            token_types: tensor(tensors, "embeddings.token_type_embeddings", "weight")?,
            norm: Norm::load(tensors, "embeddings.LayerNorm", eps)?,
            layers,
            heads: config.num_attention_heads,
            cpu: crate::thin::Cpu::detect(),
        })
    }

    /// One text's unit vector: its token vectors through the encoder, averaged, normalised.
    /// `hidden` holds the text's word rows on entry.
    fn forward(&self, mut hidden: Vec<f32>, type_ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let tokens = type_ids.len();
        with_values(&self.token_types, |types| {
            with_values(&self.positions, |positions| {
                for (t, row) in hidden.chunks_exact_mut(DIMENSIONS).enumerate() {
                    let kind = type_ids[t] as usize * DIMENSIONS;
                    let types = &types[kind..kind + DIMENSIONS];
                    let positions = &positions[t * DIMENSIONS..(t + 1) * DIMENSIONS];
                    for ((v, kind), position) in row.iter_mut().zip(types).zip(positions) {
                        *v = *v + kind + position;
                    }
                }
            })
        })??;
        self.norm.apply(&mut hidden)?;
        let cpu = self.cpu;
        let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
        let (mut context, mut scores) = (vec![0f32; tokens * DIMENSIONS], vec![0f32; tokens]);
        let (mut projected, mut wide) = (Vec::new(), Vec::new());
        let width = DIMENSIONS / self.heads;
        let scale = 1.0 / (width as f32).sqrt();
        for layer in &self.layers {
            layer.query.forward(cpu, &hidden, &mut q)?;
            layer.key.forward(cpu, &hidden, &mut k)?;
            layer.value.forward(cpu, &hidden, &mut v)?;
            for head in 0..self.heads {
                let part = head * width..(head + 1) * width;
                for i in 0..tokens {
                    let qi = &q[i * DIMENSIONS..][part.clone()];
                    for (j, score) in scores.iter_mut().enumerate() {
                        let kj = &k[j * DIMENSIONS..][part.clone()];
                        *score = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                    }
                    let largest = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut total = 0.0;
                    for score in scores.iter_mut() {
                        *score = (*score - largest).exp();
                        total += *score;
                    }
                    let out = &mut context[i * DIMENSIONS..][part.clone()];
                    out.fill(0.0);
                    for (j, score) in scores.iter().enumerate() {
                        let vj = &v[j * DIMENSIONS..][part.clone()];
                        let weight = score / total;
                        for (o, x) in out.iter_mut().zip(vj) {
                            *o += weight * x;
                        }
                    }
                }
            }
            layer.attention_out.forward(cpu, &context, &mut projected)?;
            projected.iter_mut().zip(&hidden).for_each(|(p, h)| *p += h);
            layer.attention_norm.apply(&mut projected)?;
            layer.intermediate.forward(cpu, &projected, &mut wide)?;
            crate::thin::gelu(cpu, &mut wide);
            layer.output.forward(cpu, &wide, &mut hidden)?;
            hidden.iter_mut().zip(&projected).for_each(|(h, p)| *h += p);
            layer.output_norm.apply(&mut hidden)?;
        }
        let mut mean = vec![0f32; DIMENSIONS];
        for row in hidden.chunks_exact(DIMENSIONS) {
            mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
        }
        mean.iter_mut().for_each(|m| *m /= tokens.max(1) as f32);
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        mean.iter_mut().for_each(|m| *m /= norm);
        Ok(mean)
    }
}

/// One tensor's entry in a safetensors header.
#[derive(serde::Deserialize)]
struct TensorEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// Reads every `f32` tensor of `model.safetensors` but the word table into memory, and
/// locates the word table. Each tensor is read on its own: the file is never held whole.
fn read_weights(
    path: &Path,
    device: &Device,
) -> Result<(HashMap<String, Tensor>, WordTable), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot load {}: {e}", path.display());
    let file = File::open(path).map_err(|e| fail(&e))?;
    let mut length = [0u8; 8];
    file.read_exact_at(&mut length, 0).map_err(|e| fail(&e))?;
    let header_length = u64::from_le_bytes(length);
    if header_length > 100_000_000 {
        return Err(fail(&"not a safetensors file"));
    }
    let mut header = vec![0u8; header_length as usize];
    file.read_exact_at(&mut header, 8).map_err(|e| fail(&e))?;
    let header: HashMap<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| fail(&e))?;
    let data_start = 8 + header_length;
    let mut tensors = HashMap::new();
    let mut words = None;
    for (name, entry) in header {
        if name == "__metadata__" {
            continue;
        }
        let entry: TensorEntry = serde_json::from_value(entry).map_err(|e| fail(&e))?;
        if entry.dtype != "F32" {
            continue;
        }
        let (from, to) = entry.data_offsets;
        let expected = entry.shape.iter().product::<usize>() as u64 * 4;
        if to < from || to - from != expected {
            return Err(fail(&format!("tensor {name} has {} bytes for its shape", to - from)));
        }
        if name.ends_with(WORD_TABLE) {
            if entry.shape != [entry.shape[0], DIMENSIONS] {
                return Err(fail(&format!("{name} is not a table of {DIMENSIONS} columns")));
            }
            words = Some((
                name.clone(),
                WordTable {
                    file: file.try_clone().map_err(|e| fail(&e))?,
                    start: data_start + from,
                    rows: entry.shape[0],
                },
            ));
            continue;
        }
        let mut bytes = vec![0u8; (to - from) as usize];
        file.read_exact_at(&mut bytes, data_start + from).map_err(|e| fail(&e))?;
        let tensor = Tensor::from_raw_buffer(&bytes, DType::F32, &entry.shape, device)
            .map_err(|e| fail(&e))?;
        tensors.insert(name, tensor);
    }
    let Some((name, words)) = words else {
        return Err(fail(&format!("it has no {WORD_TABLE}")));
    };
    // Only the prefix the word table has (`bert.` or none) is the model's.
    let prefix = name.trim_end_matches(WORD_TABLE).to_owned();
    let tensors = tensors
        .into_iter()
        .filter_map(|(name, tensor)| Some((name.strip_prefix(&prefix)?.to_owned(), tensor)))
        .collect();
    Ok((tensors, words))
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
        let (tensors, words) = read_weights(&weights_path, &device)?;
        let single = Single::load(&tensors, &config)
            .map_err(|e| format!("{} does not hold {MODEL}: {e}", weights_path.display()))?;
        let weights = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let invalid = |e: candle_core::Error| {
            format!("{} does not hold {MODEL}: {e}", weights_path.display())
        };
        let embeddings = weights.pp("embeddings");
        let positions = candle_nn::embedding(
            config.max_position_embeddings,
            DIMENSIONS,
            embeddings.pp("position_embeddings"),
        )
        .map_err(invalid)?;
        let token_types = candle_nn::embedding(
            config.type_vocab_size,
            DIMENSIONS,
            embeddings.pp("token_type_embeddings"),
        )
        .map_err(invalid)?;
        let embedding_norm =
            candle_nn::layer_norm(DIMENSIONS, config.layer_norm_eps, embeddings.pp("LayerNorm"))
                .map_err(invalid)?;
        let encoder = BertEncoder::load(weights.pp("encoder"), &config).map_err(invalid)?;
        if words.rows != config.vocab_size {
            return Err(format!(
                "{} has {} words; its config says {}",
                weights_path.display(),
                words.rows,
                config.vocab_size
            ));
        }

        Ok(LocalEmbedder {
            words,
            positions,
            token_types,
            embedding_norm,
            encoder,
            single,
            tokenizer,
            device,
        })
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
    /// padded batches of up to 32 texts and 1,024 tokens, so a call with many texts wastes
    /// little work on padding and a pass never needs much memory (candle, on every core). A
    /// single text takes `Single`'s path, on the calling thread alone. Blocking and
    /// CPU-bound: call it from a blocking thread in async code.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch_fast(inputs, true)
            .map_err(|e| format!("cannot tokenize the texts: {e}"))?;

        if let [encoding] = &encodings[..] {
            let words = self
                .words
                .gather(encoding.get_ids())
                .map_err(|e| format!("the model failed on a text: {e}"))?;
            let type_ids = encoding.get_type_ids();
            let vector =
                cairn_memory::embed::query_install(|| self.single.forward(words, type_ids))
                    .map_err(|e| format!("the model failed on a text: {e}"))?;
            return Ok(vec![vector]);
        }
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in batches(&order, |i| encodings[i].len()) {
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
        let words = self.words.gather(&ids).map_err(candle_core::Error::wrap)?;
        let words = Tensor::from_vec(words, (rows, width, DIMENSIONS), &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, (rows, width), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &self.device)?;

        // BERT's embeddings, in the order of candle's `BertEmbeddings`: words plus token
        // types, plus positions, normalised.
        let embedded = (words + self.token_types.forward(&type_ids)?)?;
        let position_ids: Vec<u32> = (0..width as u32).collect();
        let position_ids = Tensor::new(&position_ids[..], &self.device)?;
        let embedded = embedded.broadcast_add(&self.positions.forward(&position_ids)?)?;
        let embedded = self.embedding_norm.forward(&embedded)?;
        // Padding positions get the most negative score before the softmax, as in BERT.
        let extended = mask.unsqueeze(1)?.unsqueeze(1)?.to_dtype(DType::F32)?;
        let extended = (extended.ones_like()? - &extended)?
            .broadcast_mul(&Tensor::new(f32::MIN, &self.device)?)?;

        // The hidden states are (rows, width, 384); padding positions are left out of the mean.
        let hidden = self.encoder.forward(&embedded, &extended)?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
        mean.broadcast_div(&norms)?.to_vec2()
    }
}

/// Cuts `order` (sorted by length, shortest first) into batches of at most [`BATCH`] texts
/// and [`BATCH_TOKENS`] tokens with padding; a text longer than the token bound goes alone.
fn batches(order: &[usize], length: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        // Sorted, so the batch's width is its last text's length.
        while end < order.len()
            && end - start < BATCH
            && (end + 1 - start) * length(order[end]) <= BATCH_TOKENS
        {
            end += 1;
        }
        batches.push(&order[start..end]);
        start = end;
    }
    batches
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
    fn batches_are_bounded_in_texts_and_tokens() {
        let lengths = [3, 5, 5, 9, 40, 40, 40, 300];
        let order: Vec<usize> = (0..lengths.len()).collect();
        let cut: Vec<&[usize]> = batches(&order, |i| lengths[i]);
        assert_eq!(cut.concat(), order, "every text once, in order");
        for batch in &cut {
            let width = batch.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(batch.len() == 1 || batch.len() * width <= BATCH_TOKENS, "{batch:?}");
            assert!(batch.len() <= BATCH);
        }
        assert_eq!(cut.last().unwrap(), &[7], "a text over the bound goes alone");
        let many: Vec<usize> = (0..100).collect();
        assert!(batches(&many, |_| 4).iter().all(|batch| batch.len() == BATCH || batch.len() == 4));
    }

    #[test]
    fn many_texts_of_mixed_lengths_equal_texts_one_by_one() {
        // Over the token bound of one pass: split into several, sorted by length.
        let texts: Vec<String> = (0..40)
            .map(|i| {
                let words: Vec<String> =
                    (0..(i * 7) % 60 + 1).map(|w| format!("w{}", w % 13)).collect();
                format!("memory {i}: {}", words.join(" "))
            })
            .collect();
        let batch = embedder().embed(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (text, batched) in texts.iter().zip(&batch).step_by(7) {
            assert!(max_difference(batched, &embed_one(text)) < 1e-5, "{text}");
        }
    }

    #[test]
    fn a_weights_file_without_the_word_table_is_a_clear_error() {
        let directory = tempfile::tempdir().unwrap();
        let source = crate::fetch::fetch_model(&crate::test_cache()).unwrap();
        for file in ["config.json", "tokenizer.json"] {
            std::fs::copy(source.join(file), directory.path().join(file)).unwrap();
        }
        std::fs::write(directory.path().join("model.safetensors"), b"\x02\0\0\0\0\0\0\0{}")
            .unwrap();
        let err = LocalEmbedder::load(directory.path()).unwrap_err();
        assert!(err.contains("has no embeddings.word_embeddings.weight"), "{err}");
        std::fs::write(directory.path().join("model.safetensors"), b"junk").unwrap();
        let err = LocalEmbedder::load(directory.path()).unwrap_err();
        assert!(err.starts_with("cannot load ") && err.contains("model.safetensors"), "{err}");
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
