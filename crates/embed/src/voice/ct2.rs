//! Reads a CTranslate2 Whisper model (`model.bin`) and renames its tensors to the Hugging Face
//! names that candle's Whisper loads.
//!
//! The file is little-endian: a `u32` format version, the spec's name (a `u16` length that
//! counts a closing NUL, the bytes, the NUL), a `u32` spec revision (not needed: the
//! tensors' names and shapes are checked) and a `u32` count of
//! variables; then for each variable its name, a `u8` rank, `rank` `u32` dimensions, a `u8`
//! type (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), a `u32` byte count and the data; then a
//! `u32` count of aliases, each a name and the name it stands for.
//!
//! CTranslate2 fuses some projections that Hugging Face keeps apart: a self-attention's
//! `linear_0` is q, k and v stacked by rows, and a cross-attention's `linear_1` is k and v.
//! Keys have no bias in Whisper, so the k part of a fused bias is zero; the conversion checks
//! that rather than dropping numbers silently. The tensors keep their type (float16 for the
//! published tiny.en), so the conversion is exact.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The format version this reader was written against.
const BINARY_VERSION: u32 = 6;

/// The spec a Whisper model is saved with.
const SPEC: &str = "WhisperSpec";

/// CTranslate2's code for GELU in the `activation` scalar.
const GELU: i64 = 3;

/// The element types of CTranslate2 variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    F32,
    I8,
    I16,
    I32,
    F16,
    BF16,
}

impl Dtype {
    fn from_code(code: u8) -> Option<Dtype> {
        Some(match code {
            0 => Dtype::F32,
            1 => Dtype::I8,
            2 => Dtype::I16,
            3 => Dtype::I32,
            4 => Dtype::F16,
            5 => Dtype::BF16,
            _ => return None,
        })
    }

    /// The size of one element in bytes.
    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::I8 => 1,
            Dtype::I16 | Dtype::F16 | Dtype::BF16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
        }
    }

    /// The same type in safetensors, for the floating-point types a model's weights use.
    fn safetensors(self) -> Option<safetensors::Dtype> {
        match self {
            Dtype::F32 => Some(safetensors::Dtype::F32),
            Dtype::F16 => Some(safetensors::Dtype::F16),
            Dtype::BF16 => Some(safetensors::Dtype::BF16),
            _ => None,
        }
    }
}

/// One variable of the model: a tensor or a scalar, borrowing the file's bytes.
#[derive(Debug, Clone)]
pub(crate) struct Variable<'a> {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

impl<'a> Variable<'a> {
    /// The value of an integer scalar (a variable of rank 0), sign-extended.
    fn integer(&self) -> Option<i64> {
        if !self.shape.is_empty() {
            return None;
        }
        match (self.dtype, self.data) {
            (Dtype::I8, &[a]) => Some(i64::from(a as i8)),
            (Dtype::I16, &[a, b]) => Some(i64::from(i16::from_le_bytes([a, b]))),
            (Dtype::I32, &[a, b, c, d]) => Some(i64::from(i32::from_le_bytes([a, b, c, d]))),
            _ => None,
        }
    }

    /// The rows `start..start + count` of a matrix or vector, as a variable of its own.
    fn rows(&self, start: usize, count: usize) -> Variable<'a> {
        let row_bytes = self.data.len() / self.shape[0];
        let mut shape = self.shape.clone();
        shape[0] = count;
        Variable {
            dtype: self.dtype,
            shape,
            data: &self.data[start * row_bytes..(start + count) * row_bytes],
        }
    }
}

/// A parsed `model.bin`.
#[derive(Debug)]
pub(crate) struct Model<'a> {
    pub spec: String,
    pub variables: BTreeMap<String, Variable<'a>>,
    pub aliases: BTreeMap<String, String>,
}

/// A cursor over the file's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| format!("model.bin ends early, at byte {}", self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let bytes = self.take(2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = usize::from(self.u16()?);
        let bytes = self.take(len)?;
        let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        String::from_utf8(text.to_vec())
            .map_err(|_| "model.bin holds a name that is not UTF-8".into())
    }
}

/// Parses a CTranslate2 model file of format version 6.
pub(crate) fn parse(bytes: &[u8]) -> Result<Model<'_>, String> {
    let mut reader = Reader { bytes, at: 0 };
    let version = reader.u32()?;
    if version != BINARY_VERSION {
        return Err(format!(
            "model.bin has CTranslate2 format version {version}; Cairn reads version {BINARY_VERSION}"
        ));
    }
    let spec = reader.string()?;
    let _revision = reader.u32()?;
    let count = reader.u32()?;
    let mut variables = BTreeMap::new();
    for _ in 0..count {
        let name = reader.string()?;
        let rank = reader.u8()?;
        let shape = (0..rank)
            .map(|_| reader.u32().map(|dim| dim as usize))
            .collect::<Result<Vec<_>, _>>()?;
        let code = reader.u8()?;
        let dtype = Dtype::from_code(code)
            .ok_or_else(|| format!("the variable {name} of model.bin has unknown type {code}"))?;
        let size = reader.u32()? as usize;
        let elements: usize = shape.iter().product();
        if elements * dtype.size() != size {
            return Err(format!(
                "the variable {name} of model.bin has shape {shape:?} but {size} bytes"
            ));
        }
        let data = reader.take(size)?;
        variables.insert(name, Variable { dtype, shape, data });
    }
    let count = reader.u32()?;
    let mut aliases = BTreeMap::new();
    for _ in 0..count {
        let alias = reader.string()?;
        let target = reader.string()?;
        aliases.insert(alias, target);
    }
    if reader.at != bytes.len() {
        return Err(format!("model.bin has {} bytes after its aliases", bytes.len() - reader.at));
    }
    Ok(Model { spec, variables, aliases })
}

/// A Whisper model renamed for candle: the tensors by their Hugging Face names, and the
/// `config.json` that `candle_transformers::models::whisper::Config` reads.
#[derive(Debug)]
pub(crate) struct Converted<'a> {
    pub tensors: BTreeMap<String, Variable<'a>>,
    pub config: Value,
}

impl Converted<'_> {
    /// The tensors as a safetensors file.
    pub(crate) fn safetensors(&self) -> Result<Vec<u8>, String> {
        let views = self
            .tensors
            .iter()
            .map(|(name, variable)| {
                let dtype = variable.dtype.safetensors().ok_or_else(|| {
                    format!("{name} has type {:?}, not a floating-point type", variable.dtype)
                })?;
                let view = safetensors::tensor::TensorView::new(
                    dtype,
                    variable.shape.clone(),
                    variable.data,
                )
                .map_err(|e| format!("cannot store {name}: {e}"))?;
                Ok((name.as_str(), view))
            })
            .collect::<Result<Vec<_>, String>>()?;
        safetensors::tensor::serialize(views, None)
            .map_err(|e| format!("cannot write the safetensors file: {e}"))
    }
}

/// Renames the tensors of a CTranslate2 Whisper model to candle's names, splitting the fused
/// projections, and derives candle's config from the shapes. `suppress_tokens` comes from the
/// CTranslate2 `config.json` (`suppress_ids`).
///
/// Every tensor of the model must find a place; the scalars must describe the Whisper that
/// candle implements (GELU, pre-norm, unscaled embeddings). The encoder's position encodings
/// are left out: candle computes the same sinusoids itself.
pub(crate) fn convert<'a>(
    model: &Model<'a>,
    suppress_tokens: &[u32],
) -> Result<Converted<'a>, String> {
    if model.spec != SPEC {
        return Err(format!("model.bin holds a {}, not a {SPEC}", model.spec));
    }
    let variables = &model.variables;
    let scalar = |name: &str| variables.get(name).and_then(Variable::integer);
    for (name, expected) in [
        ("decoder/activation", GELU),
        ("decoder/pre_norm", 1),
        ("decoder/scale_embeddings", 0),
        ("decoder/alibi", 0),
    ] {
        if let Some(value) = scalar(name)
            && value != expected
        {
            return Err(format!("model.bin has {name} = {value}; Whisper has {expected}"));
        }
    }
    let heads = |side: &str| {
        scalar(&format!("{side}/num_heads"))
            .filter(|&heads| heads > 0)
            .ok_or_else(|| format!("model.bin has no {side}/num_heads"))
    };
    let (encoder_heads, decoder_heads) = (heads("encoder")?, heads("decoder")?);

    // Candle's decoder projects onto the token embeddings: the model's projection must be
    // them, as the alias says.
    let projection = "decoder/projection/weight";
    if model.aliases.get(projection).map(String::as_str) != Some("decoder/embeddings/weight") {
        return Err(format!("model.bin's {projection} is not the token embeddings"));
    }

    let mut converter = Converter { variables, out: BTreeMap::new(), used: Vec::new() };
    for conv in ["conv1", "conv2"] {
        converter.linear(&format!("encoder/{conv}"), &format!("model.encoder.{conv}"))?;
    }
    let encoder_layers = count_layers(variables, "encoder");
    let decoder_layers = count_layers(variables, "decoder");
    for i in 0..encoder_layers {
        let (from, to) = (format!("encoder/layer_{i}"), format!("model.encoder.layers.{i}"));
        converter.self_attention(&from, &to)?;
        converter.ffn(&from, &to)?;
    }
    converter.norm("encoder/layer_norm", "model.encoder.layer_norm")?;
    converter.copy("decoder/embeddings/weight", "model.decoder.embed_tokens.weight")?;
    converter
        .copy("decoder/position_encodings/encodings", "model.decoder.embed_positions.weight")?;
    for i in 0..decoder_layers {
        let (from, to) = (format!("decoder/layer_{i}"), format!("model.decoder.layers.{i}"));
        converter.self_attention(&from, &to)?;
        converter.cross_attention(&format!("{from}/attention"), &format!("{to}.encoder_attn"))?;
        converter.norm(
            &format!("{from}/attention/layer_norm"),
            &format!("{to}.encoder_attn_layer_norm"),
        )?;
        converter.ffn(&from, &to)?;
    }
    converter.norm("decoder/layer_norm", "model.decoder.layer_norm")?;
    converter.used.push("encoder/position_encodings/encodings".into());

    let unused: Vec<&String> = variables
        .iter()
        .filter(|(name, variable)| !variable.shape.is_empty() && !converter.used.contains(name))
        .map(|(name, _)| name)
        .collect();
    if !unused.is_empty() {
        return Err(format!("model.bin has tensors a Whisper model does not: {unused:?}"));
    }

    let shape = |name: &str, rank: usize| {
        variables.get(name).map(|variable| variable.shape.clone()).filter(|s| s.len() == rank)
    };
    let (Some(embeddings), Some(conv1), Some(encoder_positions), Some(decoder_positions)) = (
        shape("decoder/embeddings/weight", 2),
        shape("encoder/conv1/weight", 3),
        shape("encoder/position_encodings/encodings", 2),
        shape("decoder/position_encodings/encodings", 2),
    ) else {
        return Err("model.bin lacks the embeddings, conv1 or position encodings".into());
    };
    let config = json!({
        "num_mel_bins": conv1[1],
        "max_source_positions": encoder_positions[0],
        "d_model": embeddings[1],
        "encoder_attention_heads": encoder_heads,
        "encoder_layers": encoder_layers,
        "vocab_size": embeddings[0],
        "max_target_positions": decoder_positions[0],
        "decoder_attention_heads": decoder_heads,
        "decoder_layers": decoder_layers,
        "suppress_tokens": suppress_tokens,
    });
    Ok(Converted { tensors: converter.out, config })
}

/// How many `{side}/layer_N/…` layers the model has.
fn count_layers(variables: &BTreeMap<String, Variable<'_>>, side: &str) -> usize {
    (0..)
        .take_while(|i| {
            let prefix = format!("{side}/layer_{i}/");
            variables
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(name, _)| name.starts_with(&prefix))
        })
        .count()
}

/// Collects renamed tensors and remembers which variables were taken.
struct Converter<'m, 'a> {
    variables: &'m BTreeMap<String, Variable<'a>>,
    out: BTreeMap<String, Variable<'a>>,
    used: Vec<String>,
}

impl<'a> Converter<'_, 'a> {
    fn get(&mut self, name: &str) -> Result<&Variable<'a>, String> {
        let variable =
            self.variables.get(name).ok_or_else(|| format!("model.bin has no {name}"))?;
        self.used.push(name.to_owned());
        Ok(variable)
    }

    fn copy(&mut self, from: &str, to: &str) -> Result<(), String> {
        let variable = self.get(from)?.clone();
        self.out.insert(to.to_owned(), variable);
        Ok(())
    }

    /// A layer with a weight and a bias (a linear layer or a convolution).
    fn linear(&mut self, from: &str, to: &str) -> Result<(), String> {
        self.copy(&format!("{from}/weight"), &format!("{to}.weight"))?;
        self.copy(&format!("{from}/bias"), &format!("{to}.bias"))
    }

    /// A layer norm: CTranslate2's gamma and beta are the weight and the bias.
    fn norm(&mut self, from: &str, to: &str) -> Result<(), String> {
        self.copy(&format!("{from}/gamma"), &format!("{to}.weight"))?;
        self.copy(&format!("{from}/beta"), &format!("{to}.bias"))
    }

    /// Splits a fused projection into `parts` equal blocks of rows, naming them `targets`; the
    /// bias of a `k_proj` must be zero and is left out.
    fn split(&mut self, from: &str, to: &str, targets: &[&str]) -> Result<(), String> {
        let weight = self.get(&format!("{from}/weight"))?.clone();
        let bias = self.get(&format!("{from}/bias"))?.clone();
        let parts = targets.len();
        let rows = weight.shape.first().copied().unwrap_or(0);
        if weight.shape.len() != 2 || rows % parts != 0 || bias.shape != [rows] {
            return Err(format!(
                "{from} has shape {:?} and bias {:?}; expected {parts} fused projections",
                weight.shape, bias.shape
            ));
        }
        let size = rows / parts;
        for (i, target) in targets.iter().enumerate() {
            let name = format!("{to}.{target}");
            self.out.insert(format!("{name}.weight"), weight.rows(i * size, size));
            let part = bias.rows(i * size, size);
            if *target == "k_proj" {
                if part.data.iter().any(|&byte| byte != 0) {
                    return Err(format!("{from} has a key bias; Whisper's keys have none"));
                }
            } else {
                self.out.insert(format!("{name}.bias"), part);
            }
        }
        Ok(())
    }

    fn self_attention(&mut self, from: &str, to: &str) -> Result<(), String> {
        let (from, attention) = (format!("{from}/self_attention"), format!("{to}.self_attn"));
        self.split(&format!("{from}/linear_0"), &attention, &["q_proj", "k_proj", "v_proj"])?;
        self.linear(&format!("{from}/linear_1"), &format!("{attention}.out_proj"))?;
        self.norm(&format!("{from}/layer_norm"), &format!("{to}.self_attn_layer_norm"))
    }

    fn cross_attention(&mut self, from: &str, to: &str) -> Result<(), String> {
        self.linear(&format!("{from}/linear_0"), &format!("{to}.q_proj"))?;
        self.split(&format!("{from}/linear_1"), to, &["k_proj", "v_proj"])?;
        self.linear(&format!("{from}/linear_2"), &format!("{to}.out_proj"))
    }

    fn ffn(&mut self, from: &str, to: &str) -> Result<(), String> {
        self.linear(&format!("{from}/ffn/linear_0"), &format!("{to}.fc1"))?;
        self.linear(&format!("{from}/ffn/linear_1"), &format!("{to}.fc2"))?;
        self.norm(&format!("{from}/ffn/layer_norm"), &format!("{to}.final_layer_norm"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a CTranslate2 file by hand: the format, not the model, is under test here.
    struct Writer(Vec<u8>);

    impl Writer {
        fn string(&mut self, text: &str) {
            self.0.extend(((text.len() + 1) as u16).to_le_bytes());
            self.0.extend(text.as_bytes());
            self.0.push(0);
        }

        fn variable(&mut self, name: &str, shape: &[u32], code: u8, data: &[u8]) {
            self.string(name);
            self.0.push(shape.len() as u8);
            for dim in shape {
                self.0.extend(dim.to_le_bytes());
            }
            self.0.push(code);
            self.0.extend((data.len() as u32).to_le_bytes());
            self.0.extend(data);
        }
    }

    fn file() -> Vec<u8> {
        let mut writer = Writer(Vec::new());
        writer.0.extend(6u32.to_le_bytes());
        writer.string("WhisperSpec");
        writer.0.extend(3u32.to_le_bytes());
        writer.0.extend(2u32.to_le_bytes());
        writer.variable("encoder/num_heads", &[], 2, &6i16.to_le_bytes());
        let weights: Vec<u8> = (0..12u8).collect();
        writer.variable("w", &[3, 2], 4, &weights);
        writer.0.extend(1u32.to_le_bytes());
        writer.string("alias");
        writer.string("w");
        writer.0
    }

    #[test]
    fn parses_the_format() {
        let bytes = file();
        let model = parse(&bytes).unwrap();
        assert_eq!(model.spec, "WhisperSpec");
        assert_eq!(model.variables["encoder/num_heads"].integer(), Some(6));
        let w = &model.variables["w"];
        assert_eq!((w.dtype, w.shape.as_slice(), w.data.len()), (Dtype::F16, &[3, 2][..], 12));
        assert_eq!(w.rows(1, 2).data, &[4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(model.aliases["alias"], "w");
    }

    #[test]
    fn rejects_damaged_files() {
        let bytes = file();
        for cut in [3, 10, 40, bytes.len() - 1] {
            assert!(parse(&bytes[..cut]).unwrap_err().contains("ends early"), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(parse(&longer).unwrap_err(), "model.bin has 1 bytes after its aliases");
        let mut other = bytes;
        other[0] = 5;
        assert!(parse(&other).unwrap_err().contains("format version 5"));
    }

    #[test]
    fn a_model_of_another_kind_is_refused() {
        let bytes = file();
        let model = parse(&bytes).unwrap();
        let err = convert(&model, &[]).unwrap_err();
        assert_eq!(err, "model.bin has no decoder/num_heads");
    }
}
