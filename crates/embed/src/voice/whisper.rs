//! Speech to text with Whisper tiny.en, run in process on the CPU with candle.
//!
//! Whisper was trained on 30-second windows, and encoding one costs most of a second on two
//! cores whatever the utterance's length. This encodes only the utterance, with half a
//! second of silence after it (at least a second in all): candle's encoder narrows its
//! position embedding to the input, so a two-second utterance takes about a tenth of its
//! duration. On a window that short the model sometimes starts the utterance over instead of
//! ending it ("Hello? Hello? Hello? …", seen on one-word utterances and short phrases, with
//! or without more padding up to five seconds); a transcript that repeats itself is
//! therefore decoded again from a ten-second window, and failing that from the full 30
//! seconds, the last word. Longer audio is cut into 30-second windows.
//!
//! Decoding is greedy, with the English-only model's prompt (start of transcript, no
//! timestamps), the tokens its CTranslate2 config suppresses plus every special token but
//! the end of text, no blank or end of text as the first token, and at most ten tokens plus
//! six a second of audio (fast speech makes about four).

use std::path::Path;
use std::sync::Mutex;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{Config, model};
use tokenizers::Tokenizer;

use crate::voice::mel::{HOP, LogMel, SAMPLE_RATE};

/// `<|endoftext|>`: the transcript is complete.
const EOT: u32 = 50256;

/// `<|startoftranscript|>`: the first token of the English-only model's prompt.
const SOT: u32 = 50257;

/// `<|notimestamps|>`: the second token of the prompt; text without timestamps follows.
const NO_TIMESTAMPS: u32 = 50362;

/// The space token and end of text, which may not come first (`suppress_ids_begin`).
const SUPPRESS_AT_BEGIN: [u32; 2] = [220, EOT];

/// The vocabulary of the English-only Whisper models; the special tokens above are theirs.
const ENGLISH_VOCABULARY: usize = 51864;

/// The longest window Whisper takes: 30 seconds.
const WINDOW_SAMPLES: usize = 30 * SAMPLE_RATE;

/// Audio shorter than this (one second) is padded with silence to this length.
const MIN_SAMPLES: usize = SAMPLE_RATE;

/// Silence added after the audio (half a second): without it the model was seen to repeat a
/// one-word utterance rather than end it.
const TRAILING_SAMPLES: usize = SAMPLE_RATE / 2;

/// The window tried when the utterance's own gives a transcript that repeats itself (ten
/// seconds); the full 30 seconds come after it.
const FALLBACK_SAMPLES: usize = 10 * SAMPLE_RATE;

/// The most tokens decoded for a second of audio (plus [`BASE_TOKENS`]); fast speech makes
/// about four. The bound stops a model that repeats itself.
const TOKENS_PER_SECOND: f32 = 6.0;

/// The tokens allowed beyond [`TOKENS_PER_SECOND`], for very short utterances.
const BASE_TOKENS: usize = 10;

/// The most tokens of one window; openai-whisper's `sample_len` (half the text context).
const MAX_TOKENS: usize = 224;

/// Audio whose loudest sample is below this (about -60 dBFS) is silence: it is not run
/// through the model, which invents text for silence.
const SILENCE_PEAK: f32 = 1e-3;

/// A Whisper speech-to-text model on the CPU: load it once, share it between threads.
///
/// One transcription runs at a time (the decoder keeps a cache of the audio's keys and
/// values between steps); a concurrent call waits for the running one.
pub struct Whisper {
    model: Mutex<model::Whisper>,
    tokenizer: Tokenizer,
    mel: LogMel,
    /// `(vocabulary)`: 0, or minus infinity for a token that may never be chosen.
    suppress: Tensor,
    /// `(vocabulary)`: minus infinity for the tokens that may not come first.
    suppress_at_begin: Tensor,
    device: Device,
}

impl std::fmt::Debug for Whisper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whisper").field("model", &"tiny.en").field("device", &self.device).finish()
    }
}

impl Whisper {
    /// Loads `model.safetensors`, `config.json` and `tokenizer.json` from `dir` (see
    /// [`crate::fetch_voice_model`] and [`crate::voice_model_dir`]): about 0.3 s, and 200 MB
    /// of memory (the weights as f32).
    pub fn load(dir: &Path) -> Result<Whisper, String> {
        let device = Device::Cpu;
        let config_path = dir.join("config.json");
        let config = std::fs::read_to_string(&config_path)
            .map_err(|e| format!("cannot read {}: {e}", config_path.display()))?;
        let config: Config = serde_json::from_str(&config)
            .map_err(|e| format!("{} is not a Whisper config: {e}", config_path.display()))?;
        if config.vocab_size != ENGLISH_VOCABULARY {
            return Err(format!(
                "{} describes a model with {} tokens; Cairn runs the English-only Whisper \
                 models ({ENGLISH_VOCABULARY})",
                config_path.display(),
                config.vocab_size
            ));
        }

        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| format!("cannot load {}: {e}", tokenizer_path.display()))?;

        let weights_path = dir.join("model.safetensors");
        let tensors = candle_core::safetensors::load(&weights_path, &device)
            .map_err(|e| format!("cannot load {}: {e}", weights_path.display()))?;
        let weights = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let whisper = model::Whisper::load(&weights, config.clone())
            .map_err(|e| format!("{} does not hold Whisper: {e}", weights_path.display()))?;

        let failed = |e: candle_core::Error| format!("cannot prepare Whisper: {e}");
        let mask = |tokens: &mut dyn Iterator<Item = u32>| {
            let mut mask = vec![0f32; config.vocab_size];
            for token in tokens {
                if let Some(slot) = mask.get_mut(token as usize) {
                    *slot = f32::NEG_INFINITY;
                }
            }
            Tensor::from_vec(mask, config.vocab_size, &device)
        };
        // Past the end of text come the special tokens and the timestamps: never text.
        let suppress = mask(
            &mut config.suppress_tokens.iter().copied().chain(EOT + 1..config.vocab_size as u32),
        )
        .map_err(failed)?;
        let suppress_at_begin = mask(&mut SUPPRESS_AT_BEGIN.into_iter()).map_err(failed)?;
        let mel = LogMel::new(config.num_mel_bins, &device).map_err(failed)?;
        Ok(Whisper {
            model: Mutex::new(whisper),
            tokenizer,
            mel,
            suppress,
            suppress_at_begin,
            device,
        })
    }

    /// Transcribes mono 16 kHz audio (samples in -1..1) to text; an empty string for silence.
    ///
    /// Blocking and CPU-bound (candle uses every core): call it from a blocking thread in
    /// async code. Audio at another rate must be brought to 16 kHz first (see
    /// [`crate::resample`]).
    pub fn transcribe(&self, pcm_16k_mono: &[f32]) -> Result<String, String> {
        let mut texts = Vec::new();
        for window in pcm_16k_mono.chunks(WINDOW_SAMPLES) {
            let text = self
                .transcribe_window(window)
                .map_err(|e| format!("Whisper failed on the audio: {e}"))?;
            if !text.is_empty() {
                texts.push(text);
            }
        }
        Ok(texts.join(" "))
    }

    /// Transcribes at most 30 seconds.
    fn transcribe_window(&self, samples: &[f32]) -> candle_core::Result<String> {
        let peak = samples.iter().fold(0f32, |peak, sample| peak.max(sample.abs()));
        if peak < SILENCE_PEAK {
            return Ok(String::new());
        }
        let seconds = samples.len() as f32 / SAMPLE_RATE as f32;
        let limit = (BASE_TOKENS + (seconds * TOKENS_PER_SECOND).ceil() as usize).min(MAX_TOKENS);
        let utterance = (samples.len() + TRAILING_SAMPLES).max(MIN_SAMPLES);
        let mut tokens = Vec::new();
        for (attempt, window) in
            [utterance, FALLBACK_SAMPLES, WINDOW_SAMPLES].into_iter().enumerate()
        {
            // A window no longer than the last one tried would decode the same way.
            if attempt > 0 && window <= utterance {
                continue;
            }
            let last = window >= WINDOW_SAMPLES;
            if let Some(decoded) = self.decode(samples, window, limit, !last)? {
                tokens = decoded;
                break;
            }
        }
        let text = self
            .tokenizer
            .decode(&tokens, true)
            .map_err(|e| candle_core::Error::Msg(format!("cannot decode the tokens: {e}")))?;
        Ok(text.trim().to_owned())
    }

    /// Greedy decoding of `samples` padded with silence to `len` samples, at most `limit`
    /// tokens. When `give_up` is set, gives up (`None`) on a transcript that repeats itself
    /// or does not end within `limit` tokens.
    fn decode(
        &self,
        samples: &[f32],
        len: usize,
        limit: usize,
        give_up: bool,
    ) -> candle_core::Result<Option<Vec<u32>>> {
        // An even number of frames: the encoder's second convolution halves them.
        let len = len.next_multiple_of(2 * HOP).min(WINDOW_SAMPLES);
        let mut audio = samples.to_vec();
        audio.resize(len, 0.0);
        let mel = self.mel.compute(&audio)?;

        let mut model = self.model.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let features = model.encoder.forward(&mel, true)?;
        let mut tokens = vec![SOT, NO_TIMESTAMPS];
        for step in 0..limit {
            let input = Tensor::new(tokens.as_slice(), &self.device)?.unsqueeze(0)?;
            // The decoder runs over every token each step; it caches only the audio's keys
            // and values, computed on the first step.
            let hidden = model.decoder.forward(&input, &features, step == 0)?;
            let last = hidden.narrow(1, tokens.len() - 1, 1)?;
            let mut logits = (model.decoder.final_linear(&last)?.flatten_all()? + &self.suppress)?;
            if step == 0 {
                logits = (logits + &self.suppress_at_begin)?;
            }
            let next = logits.argmax(0)?.to_scalar::<u32>()?;
            if next == EOT {
                return Ok(Some(tokens.split_off(2)));
            }
            tokens.push(next);
            if give_up && ends_in_a_repeat(&tokens[2..]) {
                return Ok(None);
            }
        }
        Ok((!give_up).then(|| tokens.split_off(2)))
    }
}

/// Whether `tokens` end with the same run of tokens twice in a row. Greedy decoding of a
/// short window tends to start the utterance over rather than end it; a run said twice on
/// purpose ("very very") only costs a second, full-window decoding.
fn ends_in_a_repeat(tokens: &[u32]) -> bool {
    let n = tokens.len();
    (1..=n / 2).any(|k| tokens[n - k..] == tokens[n - 2 * k..n - k])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::test_support;

    #[test]
    fn can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Whisper>();
    }

    #[test]
    fn a_missing_folder_is_a_clear_error() {
        let missing = std::env::temp_dir().join("cairn-no-such-voice-model");
        let err = Whisper::load(&missing).unwrap_err();
        assert!(err.starts_with("cannot read ") && err.contains("config.json"), "{err}");
    }

    #[test]
    fn the_special_tokens_are_the_tokenizers() {
        let dir = test_support::model_dir();
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
        for (token, id) in [
            ("<|endoftext|>", EOT),
            ("<|startoftranscript|>", SOT),
            ("<|notimestamps|>", NO_TIMESTAMPS),
            ("Ġ", SUPPRESS_AT_BEGIN[0]),
        ] {
            assert_eq!(tokenizer.token_to_id(token), Some(id), "{token}");
        }
    }

    /// Speaks `text` with eSpeak NG and brings it to 16 kHz as a voice turn goes: 16-bit
    /// audio at 24 kHz (what a client sends), then floating point at 16 kHz.
    fn spoken(text: &str) -> Vec<f32> {
        let espeak = crate::Espeak::detect().expect("espeak-ng is not on PATH");
        let pcm = espeak.synthesize(text).unwrap();
        crate::resample(&crate::pcm16_to_f32(&pcm), 24_000, 16_000)
    }

    #[test]
    fn transcribes_speech() {
        let transcript =
            test_support::whisper().transcribe(&spoken("I would like to book a demo")).unwrap();
        assert!(transcript.to_lowercase().contains("demo"), "{transcript:?}");

        let transcript = test_support::whisper()
            .transcribe(&spoken("Can you move my meeting to Thursday afternoon?"))
            .unwrap();
        let lower = transcript.to_lowercase();
        assert!(lower.contains("meeting") && lower.contains("thursday"), "{transcript:?}");
    }

    #[test]
    fn a_short_word_is_not_repeated() {
        // On its own window the model says "Hello? Hello? Hello? …"; the longer window ends.
        let transcript = test_support::whisper().transcribe(&spoken("Hello")).unwrap();
        assert_eq!(transcript.trim_end_matches(['?', '.', '!']).to_lowercase(), "hello");
    }

    #[test]
    fn long_audio_goes_in_windows() {
        // The sentence, silence to 31 s, and the sentence again: once in each 30-s window.
        let sentence = spoken("I would like to book a demo");
        let mut audio = sentence.clone();
        audio.resize(31 * SAMPLE_RATE, 0.0);
        audio.extend(&sentence);
        let transcript = test_support::whisper().transcribe(&audio).unwrap().to_lowercase();
        assert_eq!(transcript.matches("demo").count(), 2, "{transcript:?}");
    }

    #[test]
    fn repeats_are_seen() {
        assert!(ends_in_a_repeat(&[5, 6, 7, 6, 7]));
        assert!(ends_in_a_repeat(&[1, 9, 9]));
        assert!(!ends_in_a_repeat(&[1, 2, 3, 1, 2]));
        assert!(!ends_in_a_repeat(&[4]));
        assert!(!ends_in_a_repeat(&[]));
    }

    #[test]
    fn silence_is_an_empty_transcript() {
        let whisper = test_support::whisper();
        assert_eq!(whisper.transcribe(&[]).unwrap(), "");
        assert_eq!(whisper.transcribe(&vec![0.0; 2 * SAMPLE_RATE]).unwrap(), "");
    }
}
