//! One open voice socket: audio in, turns detected and committed, replies spoken and cut
//! short when the caller barges in.
//!
//! The session's loop only reads client events and keeps the input buffer, so it is always
//! ready to hear a barge-in. Each committed turn runs as a task of its own (transcription,
//! the runtime's step, speech), chained after the turn before it so turns stay in order.
//! Reply audio is paced: sent at most [`VoiceConfig::playback_lead`] ahead of real time, so
//! the session knows at any moment how much of a reply the caller has heard, and the reply
//! is committed to the log when it ends, with only that much of its text.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cairn_runtime::{VoiceSession, VoiceSocketIo, error_event, server_event};
use cairn_store::VoiceSegmentRecord;
use cairn_types::runtime::{ChannelSegment, VoiceClientEvent};
use cairn_types::{IdPrefix, RuntimeEvent, new_id};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::{Heard, PendingReply};
use crate::runtime::DefaultRuntime;
use crate::voice::spoken::{SentenceSplitter, SpokenPiece, heard_text};
use crate::voice::vad::{Detector, VadEvent};
use crate::voice::{
    TurnDetection, TurnDetectionKind, VoiceConfig, decode_pcm16, encode_pcm16, ms_to_samples,
    samples_to_ms,
};

/// Audio the input buffer holds at most: Whisper hears 30 seconds at a time.
const MAX_TURN_MS: u64 = 30_000;
/// The shortest audio a commit accepts.
const MIN_TURN_MS: u64 = 100;
/// Reply audio goes out in pieces of this many milliseconds.
const CHUNK_MS: u64 = 100;
/// Replies remembered after they end, for a late `conversation.item.truncate`.
const REMEMBERED_REPLIES: usize = 16;
/// Silence after speech at which the turn so far is transcribed early, while server VAD
/// still waits to be sure the turn has ended: when it has, the transcript is (nearly) ready,
/// and the wait for it is taken off the time to the reply.
const EARLY_TRANSCRIPT_AFTER_MS: u64 = 150;

/// A transcription of the turn so far, started before the turn ended.
struct EarlyTranscript {
    /// Where the speech it heard ends: speech after it makes it stale.
    voiced_until_ms: u64,
    transcript: JoinHandle<Result<String, crate::voice::SpeechError>>,
}

/// Why a reply stopped early, and where playback stood when the client knows it.
#[derive(Debug, Clone)]
struct Cancel {
    reason: String,
    /// Milliseconds of the reply the caller heard, as the client reports it.
    heard_ms: Option<u64>,
    /// A `conversation.item.truncate` asked for it: answer `conversation.item.truncated`.
    truncate: Option<u64>,
}

/// The turn being answered: what the loop needs to cancel its reply.
struct TurnControl {
    cancel: watch::Sender<Option<Cancel>>,
    /// Set while its reply is in progress: the response id and the reply's item id.
    response: Arc<Mutex<Option<(String, String)>>>,
}

/// A reply that has ended, for a late truncation.
struct SpokenReply {
    item_id: String,
    pieces: Vec<SpokenPiece>,
    audio_ms: u64,
}

/// An open voice socket of the default runtime.
pub(crate) struct Session {
    runtime: DefaultRuntime,
    config: Arc<VoiceConfig>,
    record: VoiceSegmentRecord,
}

impl Session {
    pub(crate) fn new(runtime: DefaultRuntime, record: VoiceSegmentRecord) -> Session {
        let config = runtime.shared.voice.clone();
        Session { runtime, config, record }
    }
}

#[async_trait]
impl VoiceSession for Session {
    async fn run(self: Box<Self>, io: VoiceSocketIo) {
        let segment_id = self.record.segment.id.clone();
        let runtime = self.runtime.clone();
        Loop::new(*self, io.send).run(io.events).await;
        if let Err(error) = runtime.end_voice_segment(&segment_id, "socket_closed").await {
            tracing::warn!(%error, segment = %segment_id, "could not record the end of a voice segment");
        }
    }
}

/// The session's state between client events.
struct Loop {
    runtime: DefaultRuntime,
    config: Arc<VoiceConfig>,
    segment: Arc<ChannelSegment>,
    connection_id: String,
    send: mpsc::Sender<Value>,
    turn_detection: TurnDetection,
    detector: Detector,
    /// Audio since the last commit (trimmed to the prefix padding while nobody speaks).
    buffer: Vec<i16>,
    /// The item id of the turn being spoken, from speech start to its commit.
    speech_item: Option<String>,
    /// When speech began over a playing reply that it has not cut yet (it cuts the reply
    /// once it lasts `interrupt_min_speech_ms`; shorter, it is a backchannel and dropped).
    barge_in_from_ms: Option<u64>,
    /// The turn in progress transcribed early (see [`EARLY_TRANSCRIPT_AFTER_MS`]).
    early: Option<EarlyTranscript>,
    last_item: Option<String>,
    warned_no_speech_to_text: bool,
    /// The newest turn's task: the next turn waits for it.
    pipeline: Option<JoinHandle<()>>,
    active: Option<TurnControl>,
    /// Every unfinished turn's cancel (the socket's close cuts them all).
    unfinished: Vec<watch::Sender<Option<Cancel>>>,
    /// Set when the socket closes: turns still waiting are dropped, not answered.
    closed: Arc<std::sync::atomic::AtomicBool>,
    spoken: Arc<Mutex<VecDeque<SpokenReply>>>,
}

impl Loop {
    fn new(session: Session, send: mpsc::Sender<Value>) -> Loop {
        let turn_detection = session.config.turn_detection;
        Loop {
            runtime: session.runtime,
            detector: Detector::new(turn_detection),
            turn_detection,
            config: session.config,
            connection_id: session.record.connection.id.clone(),
            segment: Arc::new(session.record.segment),
            send,
            buffer: Vec::new(),
            speech_item: None,
            barge_in_from_ms: None,
            early: None,
            last_item: None,
            warned_no_speech_to_text: false,
            pipeline: None,
            active: None,
            unfinished: Vec::new(),
            closed: Arc::default(),
            spoken: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    async fn emit(&self, event: Value) {
        // A closed socket ends the loop through its events; nothing to do here.
        let _ = self.send.send(event).await;
    }

    async fn error(&self, code: &str, message: impl Into<String>, client_event: Option<&str>) {
        self.emit(error_event(code, message, client_event)).await;
    }

    fn session_json(&self) -> Value {
        let detection = match self.turn_detection.kind {
            TurnDetectionKind::ServerVad => json!(self.turn_detection),
            TurnDetectionKind::None => Value::Null,
        };
        let mut session = json!({
            "id": self.connection_id,
            "object": "realtime.session",
            "conversation_id": self.segment.conversation_id,
            "channel_segment_id": self.segment.id,
            "modalities": ["audio", "text"],
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "sample_rate": crate::voice::SAMPLE_RATE,
            "turn_detection": detection,
            "input_audio_transcription": self.config.speech_to_text.as_ref()
                .map(|stt| json!({ "model": stt.model() })),
            "voice": self.config.text_to_speech.as_ref().map(|tts| tts.voice()),
        });
        let mut warnings = Vec::new();
        if self.config.speech_to_text.is_none() {
            warnings.push(self.config.missing_speech_to_text.clone());
        }
        if self.config.text_to_speech.is_none() {
            warnings.push(
                "speech synthesis is not installed on this server (install espeak-ng): \
                 replies come as transcript events only"
                    .to_owned(),
            );
        }
        if !warnings.is_empty() {
            session["warnings"] = json!(warnings);
        }
        session
    }

    async fn run(mut self, mut events: mpsc::Receiver<VoiceClientEvent>) {
        if let Some(speech_to_text) = self.config.speech_to_text.clone() {
            tokio::spawn(async move { speech_to_text.warm_up().await });
        }
        self.emit(server_event("session.created", json!({ "session": self.session_json() }))).await;
        while let Some(event) = events.recv().await {
            self.handle(event).await;
        }
        // The socket closed: the reply being spoken was heard up to now, and is committed as
        // heard (as a barge-in is); turns still waiting are dropped, so nothing more is added
        // to a conversation nobody is on.
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        for cancel in &self.unfinished {
            let _ = cancel.send(Some(Cancel {
                reason: "socket_closed".to_owned(),
                heard_ms: None,
                truncate: None,
            }));
        }
        if let Some(pipeline) = self.pipeline.take() {
            let _ = pipeline.await;
        }
    }

    async fn handle(&mut self, event: VoiceClientEvent) {
        let event_id = event.event_id().map(str::to_owned);
        let event_id = event_id.as_deref();
        match event {
            VoiceClientEvent::SessionUpdate { session, .. } => {
                self.update_session(session.unwrap_or_default(), event_id).await;
            }
            VoiceClientEvent::InputAudioBufferAppend { audio, .. } => {
                self.append(&audio, event_id).await;
            }
            VoiceClientEvent::InputAudioBufferCommit { .. } => {
                if self.config.speech_to_text.is_none() {
                    let message = self.config.missing_speech_to_text.clone();
                    return self.error("speech_recognition_unavailable", message, event_id).await;
                }
                let ms = samples_to_ms(self.buffer.len());
                if self.turn_detection.enabled() && self.speech_item.is_none() {
                    // The server's VAD committed the turn already (a push-to-talk client
                    // commits after it): the buffer holds only the padding before a next
                    // turn. Nothing changes; the reply in progress goes on.
                    let message = "the input audio buffer holds no speech since the last \
                        commit (server VAD commits turns by itself)";
                    return self.error("input_audio_buffer_commit_empty", message, event_id).await;
                }
                if ms < MIN_TURN_MS {
                    let message = format!(
                        "the input audio buffer holds {ms} ms of audio; a commit needs at least {MIN_TURN_MS} ms"
                    );
                    return self.error("input_audio_buffer_commit_empty", message, event_id).await;
                }
                self.detector.interrupt();
                let item = self.speech_item.take().unwrap_or_else(|| new_id(IdPrefix::Message));
                self.barge_in_from_ms = None;
                self.commit_turn(item).await;
            }
            VoiceClientEvent::InputAudioBufferClear { .. } => {
                self.buffer.clear();
                self.detector.interrupt();
                self.speech_item = None;
                self.barge_in_from_ms = None;
                self.early = None;
                self.emit(server_event("input_audio_buffer.cleared", json!({}))).await;
            }
            VoiceClientEvent::ResponseCancel {
                response_id,
                reason,
                audio_end_ms,
                played_until_ms,
                ..
            } => {
                let active = self.active.as_ref().and_then(|control| {
                    control.response.lock().expect("response slot poisoned").clone()
                });
                let Some((active_id, _)) = active else {
                    return self
                        .error("response_cancel_not_active", "no response is in progress", event_id)
                        .await;
                };
                if response_id.as_ref().is_some_and(|id| *id != active_id) {
                    let message = format!("response_id: the response in progress is {active_id}");
                    return self.error("response_not_found", message, event_id).await;
                }
                let heard = played_until_ms.or(audio_end_ms).map(to_ms);
                let reason = reason.unwrap_or_else(|| "client_cancelled".to_owned());
                self.cancel_active(&reason, heard, None);
            }
            VoiceClientEvent::ConversationItemTruncate { item_id, audio_end_ms, .. } => {
                self.truncate(item_id, audio_end_ms.map(to_ms), event_id).await;
            }
        }
    }

    async fn update_session(&mut self, session: cairn_types::JsonObject, event_id: Option<&str>) {
        for (key, value) in &session {
            let expected = match key.as_str() {
                "input_audio_format" | "output_audio_format" => Some("pcm16"),
                _ => None,
            };
            if let Some(expected) = expected
                && value.as_str() != Some(expected)
            {
                let message = format!("session.{key}: only \"{expected}\" (24 kHz mono) is served");
                return self.error("invalid_value", message, event_id).await;
            }
        }
        if let Some(detection) = session.get("turn_detection") {
            let updated = match detection {
                Value::Null => {
                    TurnDetection { kind: TurnDetectionKind::None, ..self.turn_detection }
                }
                Value::Object(fields) => {
                    // Fields left out keep their values.
                    let mut merged = serde_json::to_value(self.turn_detection).unwrap_or_default();
                    for (key, value) in fields {
                        merged[key] = value.clone();
                    }
                    match serde_json::from_value::<TurnDetection>(merged) {
                        Ok(updated) => updated,
                        Err(error) => {
                            let message = format!("session.turn_detection: {error}");
                            return self.error("invalid_value", message, event_id).await;
                        }
                    }
                }
                _ => {
                    let message = "session.turn_detection: an object, or null to turn it off";
                    return self.error("invalid_value", message, event_id).await;
                }
            };
            if let Err(message) = updated.validate() {
                return self.error("invalid_value", message, event_id).await;
            }
            if !updated.enabled() {
                self.detector.interrupt();
                self.speech_item = None;
            }
            self.turn_detection = updated;
            self.detector.set_settings(updated);
        }
        self.emit(server_event("session.updated", json!({ "session": self.session_json() }))).await;
    }

    async fn append(&mut self, audio: &str, event_id: Option<&str>) {
        let samples = match decode_pcm16(audio) {
            Ok(samples) => samples,
            Err(message) => return self.error("invalid_audio", message, event_id).await,
        };
        if self.config.speech_to_text.is_none() {
            if !self.warned_no_speech_to_text {
                self.warned_no_speech_to_text = true;
                let message = self.config.missing_speech_to_text.clone();
                self.error("speech_recognition_unavailable", message, event_id).await;
            }
            return;
        }
        if !self.turn_detection.enabled() {
            if samples_to_ms(self.buffer.len() + samples.len()) > MAX_TURN_MS {
                let message = format!(
                    "the input audio buffer is full ({} s): commit or clear it",
                    MAX_TURN_MS / 1000
                );
                return self.error("input_audio_buffer_full", message, event_id).await;
            }
            self.buffer.extend_from_slice(&samples);
            return;
        }
        // Server VAD: the buffer's last sample is the detector's clock.
        self.buffer.extend_from_slice(&samples);
        let vad_events = self.detector.push(&samples);
        // The buffer ends where the detector's clock is.
        let buffer_end_ms = self.detector.heard_ms();
        for vad_event in vad_events {
            match vad_event {
                VadEvent::SpeechStarted { at_ms } => {
                    // Keep the prefix padding before the speech, and nothing older.
                    let keep_from_ms =
                        at_ms.saturating_sub(u64::from(self.turn_detection.prefix_padding_ms));
                    let buffer_start_ms =
                        buffer_end_ms.saturating_sub(samples_to_ms(self.buffer.len()));
                    let drop = ms_to_samples(keep_from_ms.saturating_sub(buffer_start_ms));
                    self.buffer.drain(..drop.min(self.buffer.len()));
                    let item = new_id(IdPrefix::Message);
                    self.speech_item = Some(item.clone());
                    self.emit(server_event(
                        "input_audio_buffer.speech_started",
                        json!({ "audio_start_ms": at_ms, "item_id": item }),
                    ))
                    .await;
                    // Barge-in: the caller speaks over the reply, which stops once the
                    // speech has lasted long enough to be more than a backchannel.
                    if self.replying() && self.turn_detection.interrupt_min_speech_ms > 0 {
                        self.barge_in_from_ms = Some(at_ms);
                    } else {
                        self.cancel_active("turn_detected", None, None);
                    }
                }
                VadEvent::SpeechStopped { at_ms } => {
                    let item = self.speech_item.take().unwrap_or_else(|| new_id(IdPrefix::Message));
                    self.emit(server_event(
                        "input_audio_buffer.speech_stopped",
                        json!({ "audio_end_ms": at_ms, "item_id": item }),
                    ))
                    .await;
                    if self.barge_in_from_ms.take().is_some() && self.replying() {
                        // Too short to cut the reply: a backchannel, not a turn.
                        self.buffer.clear();
                        self.early = None;
                        let cleared = json!({ "item_id": item, "reason": "backchannel" });
                        self.emit(server_event("input_audio_buffer.cleared", cleared)).await;
                    } else {
                        self.commit_turn(item).await;
                    }
                }
            }
        }
        if let Some(from_ms) = self.barge_in_from_ms {
            // Speech heard, not the trailing silence the detector waits through.
            let lasted = self.detector.voiced_until_ms().saturating_sub(from_ms);
            if !self.replying() {
                // The reply ended while the caller spoke: this is a turn like any other.
                self.barge_in_from_ms = None;
            } else if lasted >= u64::from(self.turn_detection.interrupt_min_speech_ms) {
                self.barge_in_from_ms = None;
                self.cancel_active("turn_detected", None, None);
            }
        }
        self.transcribe_early();
        if self.detector.speaking() {
            if samples_to_ms(self.buffer.len()) >= MAX_TURN_MS {
                // A turn as long as Whisper can hear ends here.
                self.detector.interrupt();
                let item = self.speech_item.take().unwrap_or_else(|| new_id(IdPrefix::Message));
                self.commit_turn(item).await;
            }
        } else {
            // Nobody speaks: keep only what a turn starting now would need.
            let keep = ms_to_samples(u64::from(self.turn_detection.prefix_padding_ms));
            if self.buffer.len() > keep {
                let drop = self.buffer.len() - keep;
                self.buffer.drain(..drop);
            }
        }
    }

    /// Server VAD: once the caller has been silent [`EARLY_TRANSCRIPT_AFTER_MS`] in a turn
    /// (not a possible backchannel), transcribes the turn so far; speech after that drops it.
    fn transcribe_early(&mut self) {
        let voiced_until_ms = self.detector.voiced_until_ms();
        if self.early.as_ref().is_some_and(|early| early.voiced_until_ms != voiced_until_ms) {
            self.early = None;
        }
        let silent_ms = self.detector.heard_ms().saturating_sub(voiced_until_ms);
        let Some(speech_to_text) = self.config.speech_to_text.clone() else { return };
        if self.early.is_none()
            && self.detector.speaking()
            && self.barge_in_from_ms.is_none()
            && silent_ms >= EARLY_TRANSCRIPT_AFTER_MS
        {
            let audio = self.buffer.clone();
            let transcript = tokio::spawn(async move { speech_to_text.transcribe(audio).await });
            self.early = Some(EarlyTranscript { voiced_until_ms, transcript });
        }
    }

    /// Ends the turn in the buffer: `committed`, the user item, and its task queued; or, when
    /// the socket has as many turns waiting as it may, an `error` and the audio dropped.
    async fn commit_turn(&mut self, item_id: String) {
        let audio = std::mem::take(&mut self.buffer);
        // The early transcript stands for the turn when no speech came after it (only the
        // silence that ended the turn).
        let early = self
            .early
            .take()
            .filter(|early| early.voiced_until_ms == self.detector.voiced_until_ms())
            .map(|early| early.transcript);
        self.unfinished.retain(|cancel| !cancel.is_closed());
        if self.unfinished.len() >= self.config.max_queued_turns {
            let message = format!(
                "{} turns are waiting for their replies on this socket, as many as it may \
                 have; this turn's audio was dropped: wait for a reply before committing more",
                self.unfinished.len()
            );
            return self.error("turn_queue_full", message, None).await;
        }
        let previous = self.last_item.replace(item_id.clone());
        self.emit(server_event(
            "input_audio_buffer.committed",
            json!({ "previous_item_id": previous, "item_id": item_id }),
        ))
        .await;
        self.emit(server_event(
            "conversation.item.created",
            json!({
                "previous_item_id": previous,
                "item": {
                    "id": item_id, "object": "realtime.item", "type": "message",
                    "status": "completed", "role": "user",
                    "content": [{ "type": "input_audio", "transcript": null }],
                },
            }),
        ))
        .await;
        let (cancel, cancelled) = watch::channel(None);
        let response = Arc::new(Mutex::new(None));
        let turn = Turn {
            runtime: self.runtime.clone(),
            config: self.config.clone(),
            segment: self.segment.clone(),
            send: self.send.clone(),
            item_id,
            cancelled,
            response: response.clone(),
            spoken: self.spoken.clone(),
        };
        let previous = self.pipeline.take();
        let closed = self.closed.clone();
        self.pipeline = Some(tokio::spawn(async move {
            if let Some(previous) = previous {
                let _ = previous.await;
            }
            if closed.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            turn.run(audio, early).await;
        }));
        self.unfinished.push(cancel.clone());
        self.active = Some(TurnControl { cancel, response });
    }

    /// Stops the newest turn's reply (at once if it is playing, before it starts if not).
    /// Whether a reply is being spoken now.
    fn replying(&self) -> bool {
        self.active.as_ref().is_some_and(|control| {
            control.response.lock().expect("response slot poisoned").is_some()
        })
    }

    fn cancel_active(&mut self, reason: &str, heard_ms: Option<u64>, truncate: Option<u64>) {
        if let Some(control) = &self.active {
            control.cancel.send_if_modified(|current| {
                if current.is_some() {
                    return false;
                }
                *current = Some(Cancel { reason: reason.to_owned(), heard_ms, truncate });
                true
            });
        }
    }

    async fn truncate(
        &mut self,
        item_id: Option<String>,
        audio_end_ms: Option<u64>,
        event_id: Option<&str>,
    ) {
        let Some(audio_end_ms) = audio_end_ms else {
            return self.error("missing_field", "audio_end_ms: required", event_id).await;
        };
        let active = self
            .active
            .as_ref()
            .and_then(|control| control.response.lock().expect("response slot poisoned").clone());
        // The reply in progress, named or not, is cut as it plays.
        if let Some((_, active_item)) = active
            && item_id.as_ref().is_none_or(|item| *item == active_item)
        {
            return self.cancel_active("truncated", Some(audio_end_ms), Some(audio_end_ms));
        }
        let Some(item_id) = item_id else {
            return self
                .error("missing_field", "item_id: no reply is playing; name the item", event_id)
                .await;
        };
        let heard = {
            let spoken = self.spoken.lock().expect("spoken replies poisoned");
            spoken.iter().find(|reply| reply.item_id == item_id).map(|reply| {
                let heard_ms = audio_end_ms.min(reply.audio_ms);
                Heard {
                    text: heard_text(&reply.pieces, heard_ms),
                    aborted: true,
                    reason: Some("truncated".to_owned()),
                    audio_ms: reply.audio_ms,
                    heard_ms,
                }
            })
        };
        let Some(heard) = heard else {
            let message = format!("item_id: no spoken reply `{item_id}` in this session");
            return self.error("item_not_found", message, event_id).await;
        };
        match self.runtime.truncate_reply(&self.segment, &item_id, &heard).await {
            Ok(_) => {
                self.emit(server_event(
                    "conversation.item.truncated",
                    json!({ "item_id": item_id, "content_index": 0, "audio_end_ms": heard.heard_ms }),
                ))
                .await;
            }
            Err(error) => self.error("truncate_failed", error.to_string(), event_id).await,
        }
    }
}

/// A client's milliseconds, as a whole non-negative number.
fn to_ms(value: f64) -> u64 {
    if value.is_finite() && value > 0.0 { value as u64 } else { 0 }
}

/// One committed turn: transcribed, answered by the runtime, and spoken.
struct Turn {
    runtime: DefaultRuntime,
    config: Arc<VoiceConfig>,
    segment: Arc<ChannelSegment>,
    send: mpsc::Sender<Value>,
    item_id: String,
    cancelled: watch::Receiver<Option<Cancel>>,
    response: Arc<Mutex<Option<(String, String)>>>,
    spoken: Arc<Mutex<VecDeque<SpokenReply>>>,
}

impl Turn {
    async fn emit(&self, event: Value) {
        let _ = self.send.send(event).await;
    }

    async fn run(
        mut self,
        audio: Vec<i16>,
        early: Option<JoinHandle<Result<String, crate::voice::SpeechError>>>,
    ) {
        let audio_ms = samples_to_ms(audio.len());
        let Some(speech_to_text) = self.config.speech_to_text.clone() else { return };
        let transcribed = match early {
            Some(early) => match early.await {
                Ok(transcribed) => transcribed,
                Err(_) => speech_to_text.transcribe(audio).await,
            },
            None => speech_to_text.transcribe(audio).await,
        };
        let transcript = match transcribed {
            Ok(transcript) => transcript.trim().to_owned(),
            Err(error) => return self.transcription_failed("transcription_failed", &error.0).await,
        };
        if transcript.is_empty() {
            return self.transcription_failed("no_speech", "no speech was recognised").await;
        }
        self.emit(server_event(
            "conversation.item.input_audio_transcription.completed",
            json!({ "item_id": self.item_id, "content_index": 0, "transcript": transcript }),
        ))
        .await;
        let response_id = new_id(IdPrefix::Response);
        self.emit(server_event(
            "response.created",
            json!({ "response": {
                "id": response_id, "object": "realtime.response", "status": "in_progress",
                "output": [],
            }}),
        ))
        .await;
        // The runtime's step runs on its own task while its reply is spoken: with a language
        // model, the first sentence is heard while the rest is still being written.
        let reply_id = new_id(IdPrefix::Message);
        let (deltas, written) = mpsc::unbounded_channel();
        let step = {
            let (runtime, segment) = (self.runtime.clone(), self.segment.clone());
            let (item_id, reply_id) = (self.item_id.clone(), reply_id.clone());
            tokio::spawn(async move {
                runtime
                    .voice_turn(&segment, &item_id, &transcript, audio_ms, &reply_id, Some(deltas))
                    .await
            })
        };
        self.speak(response_id, reply_id, written, step).await;
    }

    async fn transcription_failed(&self, code: &str, message: &str) {
        self.emit(server_event(
            "conversation.item.input_audio_transcription.failed",
            json!({
                "item_id": self.item_id, "content_index": 0,
                "error": { "type": "transcription_error", "code": code, "message": message },
            }),
        ))
        .await;
    }

    /// Announces the reply's item, once it has something to say.
    async fn item_created(&self, item_id: &str) {
        self.emit(server_event(
            "conversation.item.created",
            json!({
                "previous_item_id": self.item_id,
                "item": {
                    "id": item_id, "object": "realtime.item", "type": "message",
                    "status": "in_progress", "role": "assistant",
                    "content": [{ "type": "audio", "transcript": "" }],
                },
            }),
        ))
        .await;
    }

    async fn response_done(
        &self,
        response_id: &str,
        status: &str,
        reason: Option<&str>,
        item: Option<Value>,
    ) {
        let details = reason.map(|reason| json!({ "type": status, "reason": reason }));
        self.emit(server_event(
            "response.done",
            json!({ "response": {
                "id": response_id, "object": "realtime.response", "status": status,
                "status_details": details, "output": item.into_iter().collect::<Vec<_>>(),
            }}),
        ))
        .await;
    }

    /// Speaks the reply as the step writes it, paced, until it ends or is cancelled; then,
    /// once the step is done, commits what was heard.
    async fn speak(
        &mut self,
        response_id: String,
        item_id: String,
        mut written: mpsc::UnboundedReceiver<String>,
        step: JoinHandle<cairn_runtime::Result<(Vec<RuntimeEvent>, Option<PendingReply>)>>,
    ) {
        *self.response.lock().expect("response slot poisoned") =
            Some((response_id.clone(), item_id.clone()));
        let ids = json!({ "response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0 });

        // Sentences are synthesised one ahead of playback, on their own task, as the
        // step's text arrives. Without a voice, a piece is its transcript alone.
        let (audio_tx, mut audio_rx) = mpsc::channel::<(String, Result<Vec<i16>, String>)>(1);
        let tts = self.config.text_to_speech.clone();
        let synthesis = tokio::spawn(async move {
            let mut splitter = SentenceSplitter::default();
            let mut finished = false;
            while !finished {
                let texts = match written.recv().await {
                    Some(delta) => splitter.push(&delta),
                    None => {
                        finished = true;
                        std::mem::take(&mut splitter).finish()
                    }
                };
                for text in texts {
                    let audio = match &tts {
                        Some(tts) => tts.synthesize(&text).await.map_err(|error| error.0),
                        None => Ok(Vec::new()),
                    };
                    if audio_tx.send((text, audio)).await.is_err() {
                        return;
                    }
                }
            }
        });

        let lead_ms = self.config.playback_lead.as_millis() as u64;
        let mut clock: Option<Instant> = None;
        let elapsed_ms =
            |clock: &Option<Instant>| clock.map_or(0, |start| start.elapsed().as_millis() as u64);
        let mut pieces: Vec<SpokenPiece> = Vec::new();
        let mut sent_ms = 0u64;
        let mut failure: Option<String> = None;
        let mut cancel: Option<Cancel> = self.cancelled.borrow().clone();
        let mut announced = false;

        'pieces: while cancel.is_none() {
            let next = tokio::select! {
                next = audio_rx.recv() => next,
                _ = self.cancelled.changed() => { cancel = self.cancelled.borrow().clone(); break 'pieces; }
            };
            let Some((text, audio)) = next else { break };
            let audio = match audio {
                Ok(audio) => audio,
                Err(message) => {
                    failure = Some(message);
                    break;
                }
            };
            if !announced {
                announced = true;
                self.item_created(&item_id).await;
            }
            let piece_ms = samples_to_ms(audio.len());
            pieces.push(SpokenPiece {
                text: text.clone(),
                start_ms: sent_ms,
                end_ms: sent_ms + piece_ms,
            });
            let mut delta = ids.clone();
            delta["delta"] = json!(format!("{text} "));
            self.emit(server_event("response.audio_transcript.delta", delta)).await;
            for chunk in audio.chunks(ms_to_samples(CHUNK_MS)) {
                let ahead = sent_ms.saturating_sub(elapsed_ms(&clock));
                if ahead > lead_ms {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ahead - lead_ms)) => {}
                        _ = self.cancelled.changed() => { cancel = self.cancelled.borrow().clone(); break 'pieces; }
                    }
                }
                let mut delta = ids.clone();
                delta["delta"] = json!(encode_pcm16(chunk));
                self.emit(server_event("response.audio.delta", delta)).await;
                clock.get_or_insert_with(Instant::now);
                sent_ms += samples_to_ms(chunk.len());
            }
            // Pieces end where their audio ends, rounding included.
            if let Some(last) = pieces.last_mut() {
                last.end_ms = sent_ms;
            }
        }
        synthesis.abort();
        // All sent: the response lasts until the caller has heard it.
        if cancel.is_none() && failure.is_none() {
            let remaining = sent_ms.saturating_sub(elapsed_ms(&clock));
            if remaining > 0 {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(remaining)) => {}
                    _ = self.cancelled.changed() => { cancel = self.cancelled.borrow().clone(); }
                }
            }
        }
        *self.response.lock().expect("response slot poisoned") = None;

        // The step ends after its text does; a cancelled reply waits for it too, since its
        // message is committed (cut to what was heard) after the step's own events.
        let reply = match step.await {
            Ok(Ok((_, Some(reply)))) => reply,
            Ok(Ok((_, None))) => {
                // A person has the conversation: nothing was said.
                return self.response_done(&response_id, "completed", None, None).await;
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "a voice turn failed");
                self.emit(error_event("turn_failed", error.to_string(), None)).await;
                return self.response_done(&response_id, "failed", None, None).await;
            }
            Err(error) => {
                tracing::error!(%error, "a voice turn's step panicked");
                self.emit(error_event("turn_failed", "the turn failed", None)).await;
                return self.response_done(&response_id, "failed", None, None).await;
            }
        };
        if !announced {
            self.item_created(&item_id).await;
        }

        let played_ms = elapsed_ms(&clock).min(sent_ms);
        let (status, heard) = match (&cancel, &failure) {
            (Some(cancel), _) => {
                let heard_ms = cancel.heard_ms.unwrap_or(played_ms).min(sent_ms);
                let text = if sent_ms == 0 { String::new() } else { heard_text(&pieces, heard_ms) };
                let heard = Heard {
                    text,
                    aborted: true,
                    reason: Some(cancel.reason.clone()),
                    audio_ms: sent_ms,
                    heard_ms,
                };
                ("cancelled", heard)
            }
            (None, Some(_)) => {
                let text = heard_text(&pieces, sent_ms);
                let heard = Heard {
                    text,
                    aborted: true,
                    reason: Some("speech_failed".to_owned()),
                    audio_ms: sent_ms,
                    heard_ms: sent_ms,
                };
                ("failed", heard)
            }
            (None, None) => {
                let heard = Heard {
                    text: reply.text.clone(),
                    aborted: false,
                    reason: None,
                    audio_ms: sent_ms,
                    heard_ms: sent_ms,
                };
                ("completed", heard)
            }
        };
        if let Some(message) = &failure {
            tracing::warn!(error = %message, "speech synthesis failed");
            self.emit(error_event(
                "speech_synthesis_failed",
                "speech synthesis failed; the reply stopped",
                None,
            ))
            .await;
        }
        let mut done = ids.clone();
        done["transcript"] = json!(heard.text);
        self.emit(server_event("response.audio_transcript.done", done)).await;
        self.emit(server_event("response.audio.done", ids.clone())).await;

        if let Err(error) = self.runtime.commit_reply(&self.segment, reply, &heard).await {
            tracing::warn!(%error, "could not record a spoken reply");
        }
        {
            let mut spoken = self.spoken.lock().expect("spoken replies poisoned");
            if spoken.len() == REMEMBERED_REPLIES {
                spoken.pop_front();
            }
            spoken.push_back(SpokenReply { item_id: item_id.clone(), pieces, audio_ms: sent_ms });
        }
        if let Some(Cancel { truncate: Some(_), .. }) = &cancel {
            self.emit(server_event(
                "conversation.item.truncated",
                json!({ "item_id": item_id, "content_index": 0, "audio_end_ms": heard.heard_ms }),
            ))
            .await;
        }
        let item = json!({
            "id": item_id, "object": "realtime.item", "type": "message",
            "status": if status == "completed" { "completed" } else { "incomplete" },
            "role": "assistant",
            "content": [{ "type": "audio", "transcript": heard.text }],
        });
        let reason = cancel.as_ref().map(|cancel| cancel.reason.as_str());
        self.response_done(&response_id, status, reason, Some(item)).await;
    }
}
