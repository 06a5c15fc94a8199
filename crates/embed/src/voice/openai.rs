//! Speech to text and text to speech through an OpenAI-compatible API, for users with
//! better models than the local ones.
//!
//! `POST {url}/v1/audio/transcriptions` takes a multipart form with the audio as a WAV
//! `file` and the `model`, and answers `{"text": …}`; `POST {url}/v1/audio/speech` takes
//! `{"model", "voice", "input", "response_format": "pcm"}` and answers raw 16-bit
//! little-endian mono samples at 24 kHz. What the provider says when it fails (which may
//! quote the API key or the request) is logged with `tracing` and never returned: callers get
//! a short message fit for a client.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Endpoint;
use crate::voice::espeak::VOICE_SAMPLE_RATE;
use crate::voice::wav::encode_wav;

/// The largest speech answer read: 64 MiB, about 23 minutes at 24 kHz.
const MAX_SPEECH_BYTES: u64 = 64 * 1024 * 1024;

/// The most of a failed answer that is logged.
const MAX_LOGGED_BYTES: u64 = 4 * 1024;

/// `{url}/v1/{path}`; a `url` that already ends in `/v1` is taken as it is.
fn endpoint(url: &str, path: &str) -> String {
    let base = url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/{path}")
}

/// Sends `request`, returning the answer of a success; anything else is logged in full and
/// returned as `failed` and the HTTP status.
fn call(
    label: &str,
    failed: &str,
    send: impl FnOnce() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<ureq::http::Response<ureq::Body>, String> {
    let mut response = match send() {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(endpoint = label, %error, "{failed}");
            return Err(format!("{failed}: the provider cannot be reached"));
        }
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_LOGGED_BYTES)
        .read_to_vec()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    tracing::warn!(endpoint = label, status = status.as_u16(), body, "{failed}");
    Err(format!("{failed}: the provider answered HTTP {}", status.as_u16()))
}

/// Speech to text through `POST {url}/v1/audio/transcriptions`.
#[derive(Clone, Debug)]
pub struct OpenAiTranscriber {
    endpoint: crate::Endpoint,
    model: String,
}

impl OpenAiTranscriber {
    /// A transcriber for the API at `url` (`https://api.openai.com`; a trailing `/v1` is
    /// accepted) with `model` (`whisper-1`, `gpt-4o-transcribe`, …), sending `api_key` as a
    /// bearer token when there is one. Nothing is sent until [`transcribe`](Self::transcribe).
    pub fn new(url: &str, model: &str, api_key: Option<String>) -> OpenAiTranscriber {
        let endpoint = Endpoint::new(endpoint(url, "audio/transcriptions"), api_key);
        OpenAiTranscriber { endpoint, model: model.to_owned() }
    }

    /// Transcribes 16-bit mono audio at 24 kHz ([`VOICE_SAMPLE_RATE`]), sent as a WAV file.
    /// Blocking: call it from a blocking thread in async code.
    pub fn transcribe(&self, pcm16_24k: &[i16]) -> Result<String, String> {
        const FAILED: &str = "speech to text failed";
        let wav = encode_wav(pcm16_24k, VOICE_SAMPLE_RATE);
        let (content_type, body) = multipart(&[
            Part { name: "model", file: None, bytes: self.model.as_bytes() },
            Part { name: "response_format", file: None, bytes: b"json" },
            Part { name: "file", file: Some(("audio.wav", "audio/wav")), bytes: &wav },
        ]);
        let request = self.endpoint.post().header("Content-Type", &content_type);
        let mut response = call(&self.endpoint.label, FAILED, || request.send(&body[..]))?;
        let answer: Result<Value, _> = response.body_mut().read_json();
        match answer.as_ref().ok().and_then(|answer| answer["text"].as_str()) {
            Some(text) => Ok(text.trim().to_owned()),
            None => {
                tracing::warn!(endpoint = self.endpoint.label, answer = ?answer, "{FAILED}: no text");
                Err(format!("{FAILED}: the provider's answer has no text"))
            }
        }
    }
}

/// Text to speech through `POST {url}/v1/audio/speech`.
#[derive(Clone, Debug)]
pub struct OpenAiSynthesizer {
    endpoint: crate::Endpoint,
    model: String,
    voice: String,
}

impl OpenAiSynthesizer {
    /// A synthesizer for the API at `url` (`https://api.openai.com`; a trailing `/v1` is
    /// accepted) with `model` (`tts-1`, `gpt-4o-mini-tts`, …) and `voice` (`alloy`, …),
    /// sending `api_key` as a bearer token when there is one.
    pub fn new(url: &str, model: &str, voice: &str, api_key: Option<String>) -> OpenAiSynthesizer {
        let endpoint = Endpoint::new(endpoint(url, "audio/speech"), api_key);
        OpenAiSynthesizer { endpoint, model: model.to_owned(), voice: voice.to_owned() }
    }

    /// Speaks `text`: 16-bit mono samples at 24 kHz ([`VOICE_SAMPLE_RATE`]), the format of
    /// OpenAI's `pcm` answers; none for an empty text. Blocking: call it from a blocking
    /// thread in async code.
    pub fn synthesize(&self, text: &str) -> Result<Vec<i16>, String> {
        const FAILED: &str = "text to speech failed";
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let request = self.endpoint.post();
        let body = json!({
            "model": self.model,
            "voice": self.voice,
            "input": text,
            "response_format": "pcm",
        });
        let mut response = call(&self.endpoint.label, FAILED, || request.send_json(body))?;
        let bytes = response.body_mut().with_config().limit(MAX_SPEECH_BYTES).read_to_vec();
        let bytes = bytes.map_err(|error| {
            tracing::warn!(endpoint = self.endpoint.label, %error, "{FAILED}: the audio could not be read");
            format!("{FAILED}: the provider's audio could not be read")
        })?;
        Ok(bytes.chunks_exact(2).map(|pair| i16::from_le_bytes([pair[0], pair[1]])).collect())
    }
}

/// One part of a `multipart/form-data` body: a field, or a file with its name and type.
struct Part<'a> {
    name: &'a str,
    file: Option<(&'a str, &'a str)>,
    bytes: &'a [u8],
}

/// The `Content-Type` and body of a `multipart/form-data` request. The boundary is made from
/// the parts' hash, so it does not occur in them.
fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.bytes);
    }
    let boundary = format!("cairn-{}", &hex::encode(hasher.finalize())[..32]);
    let mut body = Vec::new();
    for part in parts {
        body.extend(format!("--{boundary}\r\n").as_bytes());
        match part.file {
            Some((filename, content_type)) => body.extend(
                format!(
                    "Content-Disposition: form-data; name=\"{}\"; filename=\"{filename}\"\r\n\
                     Content-Type: {content_type}\r\n\r\n",
                    part.name
                )
                .as_bytes(),
            ),
            None => body.extend(
                format!("Content-Disposition: form-data; name=\"{}\"\r\n\r\n", part.name)
                    .as_bytes(),
            ),
        }
        body.extend(part.bytes);
        body.extend(b"\r\n");
    }
    body.extend(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::wav::parse_wav;

    use std::time::Duration;

    use cairn_test_support::standin::{Answer, Request, StandIn};

    /// A stand-in for the paid provider on loopback: answers one request with `status`,
    /// `content_type` and `body`.
    fn provider(status: &str, content_type: &str, body: Vec<u8>) -> (String, StandIn) {
        let stand_in = StandIn::answering([Answer::new(status, content_type, body)]);
        (stand_in.url(), stand_in)
    }

    /// The one request the provider received, which came with a Content-Length.
    fn only_request(provider: &StandIn) -> Request {
        let received = provider.wait_for(1, Duration::from_secs(60)).swap_remove(0);
        received.header("content-length").expect("a Content-Length");
        received
    }

    /// The parts of a multipart body: their headers and contents, by field name.
    fn parts(content_type: &str, body: &[u8]) -> Vec<(String, String, Vec<u8>)> {
        let boundary = content_type.split_once("boundary=").unwrap().1;
        let delimiter = format!("\r\n--{boundary}");
        // A leading CRLF makes the first delimiter look like the others.
        let body = [b"\r\n".as_slice(), body].concat();
        let mut found = Vec::new();
        let mut rest = &body[..];
        while let Some(at) = find(rest, delimiter.as_bytes()) {
            rest = &rest[at + delimiter.len()..];
            if rest.starts_with(b"--") {
                break;
            }
            let end = find(rest, delimiter.as_bytes()).unwrap();
            let part = &rest[2..end];
            let split = find(part, b"\r\n\r\n").unwrap();
            let head = String::from_utf8(part[..split].to_vec()).unwrap();
            let name = head.split("name=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
            found.push((name, head, part[split + 4..].to_vec()));
        }
        found
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|window| window == needle)
    }

    #[test]
    fn transcribes_through_the_provider() {
        let (url, server) = provider(
            "200 OK",
            "application/json",
            br#"{"text": " I would like to book a demo. "}"#.to_vec(),
        );
        let audio: Vec<i16> = (0..4_800).map(|i| ((i * 37) % 2_000 - 1_000) as i16).collect();
        let transcriber = OpenAiTranscriber::new(&url, "whisper-1", Some("sk-test".into()));
        assert_eq!(transcriber.transcribe(&audio).unwrap(), "I would like to book a demo.");

        let received = only_request(&server);
        assert_eq!(received.line(), "POST /v1/audio/transcriptions HTTP/1.1");
        assert_eq!(received.header("authorization"), Some("Bearer sk-test"));
        let content_type = received.header("content-type").unwrap();
        assert!(content_type.starts_with("multipart/form-data; boundary="), "{content_type}");
        let parts = parts(content_type, &received.body);
        let names: Vec<&str> = parts.iter().map(|(name, _, _)| name.as_str()).collect();
        assert_eq!(names, ["model", "response_format", "file"]);
        assert_eq!(parts[0].2, b"whisper-1");
        let (_, head, wav) = &parts[2];
        assert!(
            head.contains("filename=\"audio.wav\"") && head.contains("Content-Type: audio/wav"),
            "{head}"
        );
        let wav = parse_wav(wav).unwrap();
        assert_eq!((wav.sample_rate, wav.samples), (24_000, audio));
    }

    #[test]
    fn synthesizes_through_the_provider() {
        let samples = [1i16, -2, 300, i16::MIN, i16::MAX];
        let pcm: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let (url, server) = provider("200 OK", "audio/pcm", pcm);
        // A URL given with its /v1 still reaches /v1/audio/speech.
        let synthesizer =
            OpenAiSynthesizer::new(&format!("{url}/v1/"), "tts-1", "alloy", Some("sk-test".into()));
        assert_eq!(synthesizer.synthesize("Hello there").unwrap(), samples);
        assert!(synthesizer.synthesize(" ").unwrap().is_empty());

        let received = only_request(&server);
        assert_eq!(received.line(), "POST /v1/audio/speech HTTP/1.1");
        assert_eq!(received.header("authorization"), Some("Bearer sk-test"));
        let body: Value = serde_json::from_slice(&received.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "tts-1", "voice": "alloy", "input": "Hello there", "response_format": "pcm"})
        );
    }

    #[test]
    fn the_providers_errors_stay_in_the_log() {
        let secret = br#"{"error": {"message": "Incorrect API key provided: sk-s3cret"}}"#.to_vec();
        let (url, server) = provider("401 Unauthorized", "application/json", secret.clone());
        let transcriber = OpenAiTranscriber::new(&url, "whisper-1", Some("sk-s3cret".into()));
        let (result, logged) = logs(|| transcriber.transcribe(&[0; 240]));
        assert_eq!(result.unwrap_err(), "speech to text failed: the provider answered HTTP 401");
        // The provider's own words are in the log, for the operator.
        assert!(
            logged.contains("Incorrect API key provided") && logged.contains("401"),
            "{logged}"
        );
        only_request(&server);

        let (url, server) = provider("500 Internal Server Error", "application/json", secret);
        let err =
            OpenAiSynthesizer::new(&url, "tts-1", "alloy", None).synthesize("hi").unwrap_err();
        assert_eq!(err, "text to speech failed: the provider answered HTTP 500");
        let received = only_request(&server);
        assert_eq!(received.header("authorization"), None);

        let (url, server) =
            provider("200 OK", "application/json", br#"{"detail": "sk-s3cret"}"#.to_vec());
        let err = OpenAiTranscriber::new(&url, "m", None).transcribe(&[0; 240]).unwrap_err();
        assert_eq!(err, "speech to text failed: the provider's answer has no text");
        only_request(&server);

        // Nothing listens on a port just freed.
        let port = cairn_test_support::free_port();
        let err = OpenAiSynthesizer::new(
            &format!("http://user:pw@127.0.0.1:{port}"),
            "tts-1",
            "alloy",
            None,
        )
        .synthesize("hi")
        .unwrap_err();
        assert_eq!(err, "text to speech failed: the provider cannot be reached");
    }

    /// Runs `f`, returning its result and the events it logged on this thread, one a line.
    fn logs<T>(f: impl FnOnce() -> T) -> (T, String) {
        use std::sync::{Arc, Mutex};
        use tracing::field::{Field, Visit};

        #[derive(Default)]
        struct Collector(Arc<Mutex<String>>);

        struct Line<'a>(&'a mut String);

        impl Visit for Line<'_> {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }

        impl tracing::Subscriber for Collector {
            fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
                tracing::span::Id::from_u64(1)
            }
            fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
            fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
            fn event(&self, event: &tracing::Event<'_>) {
                let mut line = String::new();
                event.record(&mut Line(&mut line));
                let mut log = self.0.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
            fn enter(&self, _: &tracing::span::Id) {}
            fn exit(&self, _: &tracing::span::Id) {}
        }

        let collector = Collector::default();
        let log = collector.0.clone();
        let result = tracing::subscriber::with_default(collector, f);
        let logged = log.lock().unwrap().clone();
        (result, logged)
    }

    #[test]
    fn the_boundary_is_not_in_the_parts() {
        let (content_type, body) = multipart(&[Part { name: "a", file: None, bytes: b"x" }]);
        let boundary = content_type.split_once("boundary=").unwrap().1;
        assert_eq!(
            String::from_utf8(body).unwrap(),
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--{boundary}--\r\n"
            )
        );
    }
}
