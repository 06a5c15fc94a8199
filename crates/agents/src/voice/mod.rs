//! Voice for the default runtime: what speaks and listens ([`SpeechToText`],
//! [`TextToSpeech`], implemented by `cairn-embed` in the daemon), how a voice session is
//! configured ([`VoiceConfig`], [`TurnDetection`]), and the pieces of a spoken turn that need
//! no model: detecting the end of a turn ([`vad`]) and cutting a reply at what was heard
//! ([`spoken`]).
//!
//! Audio everywhere in this module is what the `service.voice.v1` protocol carries: pcm16,
//! mono, 24 kHz.

pub mod spoken;
pub mod vad;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The sample rate of every audio buffer the protocol and these traits carry.
pub const SAMPLE_RATE: u32 = 24_000;

/// A speech engine failed. The message is said to the caller as it is, so it names no URL,
/// path or upstream answer (those go to the log where the engine failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpeechError(pub String);

/// Speech recognition: a whole utterance in, its text out.
#[async_trait]
pub trait SpeechToText: Send + Sync + 'static {
    /// What recognises speech, for `session.created` (e.g. `whisper-tiny.en`).
    fn model(&self) -> &str;

    /// Gets ready to listen (loads a model), so the first turn does not wait for it.
    /// Called when a voice socket opens.
    async fn warm_up(&self) {}

    /// The text of `audio` (pcm16, mono, 24 kHz); empty when nothing was said.
    async fn transcribe(&self, audio: Vec<i16>) -> Result<String, SpeechError>;
}

/// Speech synthesis: text in, audio (pcm16, mono, 24 kHz) out.
#[async_trait]
pub trait TextToSpeech: Send + Sync + 'static {
    /// The voice it speaks with, for `session.created` (e.g. `espeak-ng:en-us`).
    fn voice(&self) -> &str;

    async fn synthesize(&self, text: &str) -> Result<Vec<i16>, SpeechError>;
}

/// How the default runtime holds voice conversations.
#[derive(Clone)]
pub struct VoiceConfig {
    /// Recognises the caller's speech; without it, audio gets an `error` that says how to
    /// install a model, and text voice turns still work.
    pub speech_to_text: Option<Arc<dyn SpeechToText>>,
    /// Speaks the replies; without it, replies come as transcript events only.
    pub text_to_speech: Option<Arc<dyn TextToSpeech>>,
    /// How long a socket token is accepted after a voice start (default 2 minutes).
    pub token_ttl: Duration,
    /// Voice activity detection, as a session starts (`session.update` changes it).
    pub turn_detection: TurnDetection,
    /// How far ahead of real time reply audio is sent (default 500 ms). The runtime paces
    /// the audio, so it knows at any moment how much of a reply the caller has heard.
    pub playback_lead: Duration,
    /// What the error on the first audio says when no speech recognition is installed.
    pub missing_speech_to_text: String,
    /// Turns a socket may have committed and not yet answered, the one being answered
    /// included (default 3); a commit past it gets an `error` (`turn_queue_full`) and its
    /// audio is dropped. With the 30 s input buffer, this bounds the audio a socket holds.
    pub max_queued_turns: usize,
}

impl Default for VoiceConfig {
    fn default() -> VoiceConfig {
        VoiceConfig {
            speech_to_text: None,
            text_to_speech: None,
            token_ttl: Duration::from_secs(120),
            turn_detection: TurnDetection::default(),
            playback_lead: Duration::from_millis(500),
            missing_speech_to_text: "speech recognition is not installed on this server: run \
                `cairn model fetch --voice` and restart the daemon (or configure a \
                transcription endpoint); text voice turns (finalizeVoiceTurn) still work"
                .to_owned(),
            max_queued_turns: 3,
        }
    }
}

impl fmt::Debug for VoiceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VoiceConfig")
            .field("speech_to_text", &self.speech_to_text.as_ref().map(|stt| stt.model()))
            .field("text_to_speech", &self.text_to_speech.as_ref().map(|tts| tts.voice()))
            .field("token_ttl", &self.token_ttl)
            .field("turn_detection", &self.turn_detection)
            .field("playback_lead", &self.playback_lead)
            .finish()
    }
}

/// Server voice activity detection, in the OpenAI Realtime API's terms: a turn starts when
/// speech is heard (keeping `prefix_padding_ms` of audio before it, so the first word is
/// not lost) and ends after `silence_duration_ms` of silence. Speech over a reply cuts it
/// only once it has lasted `interrupt_min_speech_ms`: a backchannel ("mm-hmm", "yeah") or a
/// cough shorter than that leaves the reply playing and is dropped, not taken as a turn.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TurnDetection {
    /// `server_vad`, or `none` when only `input_audio_buffer.commit` ends a turn.
    #[serde(rename = "type")]
    pub kind: TurnDetectionKind,
    /// How sure the detector must be that a frame is speech, 0 to 1 (default 0.5).
    pub threshold: f32,
    pub prefix_padding_ms: u32,
    pub silence_duration_ms: u32,
    /// How long speech over a playing reply must last before it cuts the reply (default
    /// 600 ms; 0 cuts at the first word, as before).
    #[serde(default = "default_interrupt_min_speech_ms")]
    pub interrupt_min_speech_ms: u32,
}

fn default_interrupt_min_speech_ms() -> u32 {
    600
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnDetectionKind {
    ServerVad,
    None,
}

impl Default for TurnDetection {
    fn default() -> TurnDetection {
        TurnDetection {
            kind: TurnDetectionKind::ServerVad,
            threshold: 0.5,
            prefix_padding_ms: 300,
            // 400, not OpenAI's 500: with the turn transcribed early the silence wait is most
            // of the time to the reply (docs/voice.md, "Turns").
            silence_duration_ms: 400,
            interrupt_min_speech_ms: default_interrupt_min_speech_ms(),
        }
    }
}

impl TurnDetection {
    pub fn enabled(&self) -> bool {
        self.kind == TurnDetectionKind::ServerVad
    }

    /// Checks values a client sent; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.threshold) || self.threshold.is_nan() {
            return Err("session.turn_detection.threshold: a number from 0 to 1".to_owned());
        }
        if self.prefix_padding_ms > 5_000 {
            return Err("session.turn_detection.prefix_padding_ms: at most 5000".to_owned());
        }
        if !(100..=10_000).contains(&self.silence_duration_ms) {
            return Err("session.turn_detection.silence_duration_ms: 100 to 10000".to_owned());
        }
        if self.interrupt_min_speech_ms > 5_000 {
            return Err("session.turn_detection.interrupt_min_speech_ms: at most 5000".to_owned());
        }
        Ok(())
    }
}

/// Milliseconds of audio in `samples` samples at 24 kHz.
pub fn samples_to_ms(samples: usize) -> u64 {
    samples as u64 * 1000 / u64::from(SAMPLE_RATE)
}

/// Samples of 24 kHz audio in `ms` milliseconds.
pub fn ms_to_samples(ms: u64) -> usize {
    (ms * u64::from(SAMPLE_RATE) / 1000) as usize
}

/// Decodes the `audio` of `input_audio_buffer.append`: base64 of little-endian pcm16.
pub fn decode_pcm16(audio: &str) -> Result<Vec<i16>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(audio.trim())
        .map_err(|_| "audio: not base64".to_owned())?;
    if bytes.len() % 2 != 0 {
        return Err("audio: pcm16 has two bytes a sample; this has an odd length".to_owned());
    }
    Ok(bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect())
}

/// Encodes audio for `response.audio.delta`: base64 of little-endian pcm16.
pub fn encode_pcm16(samples: &[i16]) -> String {
    let bytes: Vec<u8> = samples.iter().flat_map(|sample| sample.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcm16_round_trips_through_base64() {
        let samples = vec![0, 1, -1, i16::MAX, i16::MIN, 12345];
        assert_eq!(decode_pcm16(&encode_pcm16(&samples)).unwrap(), samples);
        assert!(decode_pcm16("AA==").unwrap_err().contains("odd length"));
        assert_eq!(decode_pcm16("not base64!").unwrap_err(), "audio: not base64");
    }

    #[test]
    fn durations_convert_both_ways() {
        assert_eq!(samples_to_ms(24_000), 1000);
        assert_eq!(ms_to_samples(300), 7200);
    }

    #[test]
    fn turn_detection_values_are_checked() {
        assert!(TurnDetection::default().validate().is_ok());
        let bad = TurnDetection { threshold: 1.5, ..TurnDetection::default() };
        assert!(bad.validate().unwrap_err().contains("threshold"));
        let bad = TurnDetection { silence_duration_ms: 10, ..TurnDetection::default() };
        assert!(bad.validate().unwrap_err().contains("silence_duration_ms"));
    }
}
