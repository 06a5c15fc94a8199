//! The daemon's speech: `cairn-embed`'s engines behind the default runtime's speech traits.
//!
//! Speech to text is Whisper tiny.en when `cairn model fetch --voice` installed it (loaded
//! on first use, so a daemon that never hears a voice never pays for the model), or an
//! OpenAI-compatible `/v1/audio/transcriptions` endpoint when one is configured. Text to
//! speech is espeak-ng when it is on the PATH, or an OpenAI-compatible `/v1/audio/speech`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cairn_agents::voice::{SpeechError, SpeechToText, TextToSpeech, VoiceConfig};
use cairn_embed::{Espeak, OpenAiSynthesizer, OpenAiTranscriber, Whisper};
use tokio::sync::OnceCell;

/// The speech options of `cairn serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct VoiceArgs {
    /// How long a voice socket token is accepted after a voice start, e.g. `2m`.
    #[arg(long, env = "SERVICE_VOICE_TOKEN_TTL", default_value = "2m", value_parser = humantime::parse_duration)]
    voice_token_ttl: std::time::Duration,
    /// Turns a voice socket may have committed and not yet answered (the one being answered
    /// included); a commit past it gets an `error` event and its audio is dropped.
    #[arg(long, env = "SERVICE_VOICE_MAX_QUEUED_TURNS", default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    voice_max_queued_turns: u16,
    /// The voice socket's public base URL when a proxy terminates TLS, e.g.
    /// `wss://cairn.example.com/api/runtime`; default: from the request's Host.
    #[arg(long, env = "SERVICE_VOICE_PUBLIC_URL")]
    pub(crate) voice_public_url: Option<String>,
    /// An OpenAI-compatible transcription endpoint (base URL, e.g. `https://api.openai.com`)
    /// used instead of the local Whisper model.
    #[arg(long, env = "SERVICE_TRANSCRIPTION_URL")]
    transcription_url: Option<String>,
    #[arg(long, env = "SERVICE_TRANSCRIPTION_MODEL", default_value = "whisper-1")]
    transcription_model: String,
    #[arg(long, env = "SERVICE_TRANSCRIPTION_API_KEY", hide_env_values = true)]
    transcription_api_key: Option<String>,
    /// An OpenAI-compatible speech endpoint (base URL) used instead of espeak-ng.
    #[arg(long, env = "SERVICE_SPEECH_URL")]
    speech_url: Option<String>,
    #[arg(long, env = "SERVICE_SPEECH_MODEL", default_value = "tts-1")]
    speech_model: String,
    /// The voice: an OpenAI voice name with `--speech-url`, else an espeak-ng voice.
    #[arg(long, env = "SERVICE_SPEECH_VOICE")]
    speech_voice: Option<String>,
    #[arg(long, env = "SERVICE_SPEECH_API_KEY", hide_env_values = true)]
    speech_api_key: Option<String>,
}

impl VoiceArgs {
    /// The runtime's voice configuration, saying in the log what speaks and listens.
    pub(crate) fn config(&self, data_dir: &Path) -> anyhow::Result<VoiceConfig> {
        let speech_to_text: Option<Arc<dyn SpeechToText>> = match &self.transcription_url {
            Some(url) => Some(Arc::new(RemoteTranscriber {
                model: self.transcription_model.clone(),
                inner: OpenAiTranscriber::new(
                    url,
                    &self.transcription_model,
                    self.transcription_api_key.clone(),
                ),
            })),
            None => {
                let dir = cairn_embed::voice_model_dir(data_dir);
                cairn_embed::voice_model_installed(&dir)
                    .then(|| Arc::new(LocalWhisper::new(dir)) as Arc<dyn SpeechToText>)
            }
        };
        let text_to_speech: Option<Arc<dyn TextToSpeech>> = match &self.speech_url {
            Some(url) => {
                let voice = self.speech_voice.clone().unwrap_or_else(|| "alloy".to_owned());
                Some(Arc::new(RemoteSynthesizer {
                    name: format!("{}:{voice}", self.speech_model),
                    inner: OpenAiSynthesizer::new(
                        url,
                        &self.speech_model,
                        &voice,
                        self.speech_api_key.clone(),
                    ),
                }))
            }
            None => match Espeak::detect() {
                Some(espeak) => {
                    let espeak = match &self.speech_voice {
                        Some(voice) => espeak.with_voice(voice).map_err(anyhow::Error::msg)?,
                        None => espeak,
                    };
                    let name =
                        format!("espeak-ng:{}", self.speech_voice.as_deref().unwrap_or("en"));
                    Some(Arc::new(LocalEspeak { name, inner: espeak }) as Arc<dyn TextToSpeech>)
                }
                None => None,
            },
        };
        tracing::info!(
            speech_to_text = speech_to_text
                .as_ref()
                .map_or("not installed (cairn model fetch --voice)", |stt| stt.model()),
            text_to_speech =
                text_to_speech.as_ref().map_or("not installed (espeak-ng)", |tts| tts.voice()),
            "voice"
        );
        Ok(VoiceConfig {
            speech_to_text,
            text_to_speech,
            token_ttl: self.voice_token_ttl,
            max_queued_turns: usize::from(self.voice_max_queued_turns),
            ..VoiceConfig::default()
        })
    }
}

/// Runs a blocking speech call on tokio's blocking threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, SpeechError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| SpeechError("the speech engine stopped unexpectedly".to_owned()))?
        .map_err(SpeechError)
}

/// Whisper tiny.en from the data directory, loaded the first time it is needed.
struct LocalWhisper {
    dir: PathBuf,
    model: OnceCell<Arc<Whisper>>,
}

impl LocalWhisper {
    fn new(dir: PathBuf) -> LocalWhisper {
        LocalWhisper { dir, model: OnceCell::new() }
    }

    async fn model(&self) -> Result<Arc<Whisper>, SpeechError> {
        let dir = self.dir.clone();
        self.model
            .get_or_try_init(|| async move {
                blocking(move || Whisper::load(&dir).map(Arc::new)).await.map_err(|error| {
                    tracing::error!(%error, "cannot load the Whisper model");
                    SpeechError("speech recognition could not load its model".to_owned())
                })
            })
            .await
            .cloned()
    }
}

#[async_trait]
impl SpeechToText for LocalWhisper {
    fn model(&self) -> &str {
        "whisper-tiny.en"
    }

    async fn warm_up(&self) {
        let _ = self.model().await;
    }

    async fn transcribe(&self, audio: Vec<i16>) -> Result<String, SpeechError> {
        let model = self.model().await?;
        blocking(move || {
            let audio = cairn_embed::pcm16_to_f32(&audio);
            let audio = cairn_embed::resample(
                &audio,
                cairn_embed::VOICE_SAMPLE_RATE,
                cairn_embed::WHISPER_SAMPLE_RATE,
            );
            model.transcribe(&audio).map_err(|error| {
                tracing::error!(%error, "transcription failed");
                "speech recognition failed".to_owned()
            })
        })
        .await
    }
}

struct RemoteTranscriber {
    model: String,
    inner: OpenAiTranscriber,
}

#[async_trait]
impl SpeechToText for RemoteTranscriber {
    fn model(&self) -> &str {
        &self.model
    }

    async fn transcribe(&self, audio: Vec<i16>) -> Result<String, SpeechError> {
        let inner = self.inner.clone();
        blocking(move || inner.transcribe(&audio)).await
    }
}

struct LocalEspeak {
    name: String,
    inner: Espeak,
}

#[async_trait]
impl TextToSpeech for LocalEspeak {
    fn voice(&self) -> &str {
        &self.name
    }

    async fn synthesize(&self, text: &str) -> Result<Vec<i16>, SpeechError> {
        let (inner, text) = (self.inner.clone(), text.to_owned());
        blocking(move || {
            inner.synthesize(&text).map_err(|error| {
                tracing::error!(%error, "espeak-ng failed");
                "speech synthesis failed".to_owned()
            })
        })
        .await
    }
}

struct RemoteSynthesizer {
    name: String,
    inner: OpenAiSynthesizer,
}

#[async_trait]
impl TextToSpeech for RemoteSynthesizer {
    fn voice(&self) -> &str {
        &self.name
    }

    async fn synthesize(&self, text: &str) -> Result<Vec<i16>, SpeechError> {
        let (inner, text) = (self.inner.clone(), text.to_owned());
        blocking(move || inner.synthesize(&text)).await
    }
}
