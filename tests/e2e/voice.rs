//! Voice over the real daemon: a voice conversation started over HTTP, real speech made by
//! espeak-ng sent over a real WebSocket, transcribed by Whisper tiny.en (installed with
//! `cairn model fetch --voice`), answered, spoken back and cut short by a barge-in.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_test_support::standin::{Answer, StandIn, openai};
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::util::{Daemon, run_cairn};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A daemon with the Whisper model installed in its data directory.
fn daemon_with_speech() -> (tempfile::TempDir, Daemon) {
    let directory = tempfile::tempdir().unwrap();
    let fetched = run_cairn(directory.path(), "model", &["fetch", "--voice"], &[]);
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    let daemon = Daemon::start_in(directory.path());
    (directory, daemon)
}

async fn start(daemon: &Daemon) -> Value {
    let started = daemon.post("/api/runtime/voice/conversations", json!({})).await;
    assert_eq!(started.status, 201, "{started:?}");
    started.body
}

async fn connect(url: &str) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "service.voice.v1".parse().unwrap());
    Ok(tokio_tungstenite::connect_async(request).await?.0)
}

async fn send(socket: &mut Socket, event: Value) {
    socket.send(Message::text(event.to_string())).await.unwrap();
}

/// The next server event, within a minute.
async fn next(socket: &mut Socket) -> Value {
    cairn_test_support::ws::next_json(socket, Duration::from_secs(60)).await
}

/// Reads events until one of type `kind`, returning it and every event before it.
async fn until(socket: &mut Socket, kind: &str) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let event = next(socket).await;
        if event["type"] == kind {
            return (event, seen);
        }
        seen.push(event);
    }
}

/// Real speech: espeak-ng's voice, as pcm16 at 24 kHz.
fn speech(text: &str) -> Vec<i16> {
    let espeak = cairn_embed::Espeak::detect().expect("espeak-ng is installed");
    espeak.synthesize(text).unwrap()
}

/// Sends audio as a browser would, in 100 ms appends, followed by `silence_ms` of silence.
async fn say(socket: &mut Socket, audio: &[i16], silence_ms: usize) {
    let mut audio = audio.to_vec();
    audio.extend(vec![0i16; silence_ms * 24]);
    for chunk in audio.chunks(2400) {
        let audio = cairn_agents::voice::encode_pcm16(chunk);
        send(socket, json!({"type": "input_audio_buffer.append", "audio": audio})).await;
    }
}

#[tokio::test]
async fn a_spoken_request_is_transcribed_answered_spoken_and_cut_by_a_barge_in() {
    let (_directory, daemon) = daemon_with_speech();
    let started = start(&daemon).await;
    let conversation_id = started["conversation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(started["channelSegment"]["channel"], "voice");
    assert_eq!(started["connection"]["status"], "pending");
    assert_eq!(started["socket"]["protocol"], "service.voice.v1");
    let url = started["socket"]["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("ws://") && url.contains("token=vst_"), "{url}");

    let mut socket = connect(&url).await.unwrap();
    let created = next(&mut socket).await;
    assert_eq!(created["type"], "session.created", "{created}");
    assert_eq!(created["session"]["input_audio_transcription"]["model"], "whisper-tiny.en");

    // The token was single-use.
    let reused = connect(&url).await.unwrap_err().to_string();
    assert!(reused.contains("401"), "{reused}");

    // A bad frame gets an error, and the socket carries on.
    send(&mut socket, json!({"type": "input_audio_buffer.append", "event_id": "bad_1"})).await;
    let error = next(&mut socket).await;
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["event_id"], "bad_1");

    // Speech, then silence: server VAD ends the turn by itself.
    say(&mut socket, &speech("I would like to book a demo."), 1200).await;
    let (transcribed, before) =
        until(&mut socket, "conversation.item.input_audio_transcription.completed").await;
    let kinds: Vec<&str> = before.iter().filter_map(|event| event["type"].as_str()).collect();
    for kind in [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.created",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let transcript = transcribed["transcript"].as_str().unwrap().to_lowercase();
    assert!(transcript.contains("demo"), "{transcript}");
    let (first_audio, _) = until(&mut socket, "response.audio.delta").await;
    let response_id = first_audio["response_id"].as_str().unwrap().to_owned();
    assert!(first_audio["delta"].as_str().unwrap().len() > 100);

    // The caller interrupts after hearing 300 ms of the reply.
    send(
        &mut socket,
        json!({"type": "response.cancel", "response_id": response_id, "playedUntilMs": 300}),
    )
    .await;
    let (done, _) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    let heard = done["response"]["output"][0]["content"][0]["transcript"].as_str().unwrap();

    // The log holds the voice turn and the reply as heard; replay marks it aborted.
    let replay = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/replay")).await;
    assert_eq!(replay.status, 200, "{replay:?}");
    let messages = replay.body["messages"].as_array().unwrap();
    let user = messages.iter().find(|message| message["role"] == "user").unwrap();
    assert!(user["text"].as_str().unwrap().to_lowercase().contains("demo"), "{user}");
    let reply = messages.iter().rev().find(|message| message["role"] == "assistant").unwrap();
    assert_eq!(reply["aborted"], true, "{reply}");
    assert_eq!(reply["text"], heard);
    let events = replay.body["events"].as_array().unwrap();
    let voice_turn = events
        .iter()
        .find(|event| event["type"] == "message" && event["data"]["role"] == "user")
        .unwrap();
    assert_eq!(voice_turn["data"]["nature"], "voice-turn", "{voice_turn}");
    assert!(events.iter().any(|event| event["type"] == "voice.segment.started"));

    // Closing the socket ends the segment, in the log.
    socket.close(None).await.unwrap();
    let mut ended = false;
    for _ in 0..100 {
        let events =
            daemon.get(&format!("/api/runtime/conversations/{conversation_id}/events")).await;
        ended = events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["type"] == "voice.segment.ended");
        if ended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended, "the segment's end is recorded");
}

#[tokio::test]
async fn without_speech_models_voice_starts_and_says_how_to_install_them() {
    let daemon = Daemon::start();
    let started = start(&daemon).await;
    let mut socket = connect(started["socket"]["url"].as_str().unwrap()).await.unwrap();
    let created = next(&mut socket).await;
    assert_eq!(created["type"], "session.created");
    let warnings = created["session"]["warnings"].to_string();
    assert!(warnings.contains("cairn model fetch --voice"), "{warnings}");
    let silence = cairn_agents::voice::encode_pcm16(&[0; 2400]);
    send(
        &mut socket,
        json!({"type": "input_audio_buffer.append", "audio": silence, "event_id": "a1"}),
    )
    .await;
    let error = next(&mut socket).await;
    assert_eq!(error["error"]["code"], "speech_recognition_unavailable", "{error}");
    assert_eq!(error["error"]["event_id"], "a1");
    assert!(error["error"]["message"].as_str().unwrap().contains("cairn model fetch --voice"));
}

#[tokio::test]
async fn wrong_and_expired_tokens_are_refused_before_the_upgrade() {
    let daemon = Daemon::start_with(&["--voice-token-ttl", "1ms"], &[]);
    let started = start(&daemon).await;
    let url = started["socket"]["url"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let expired = connect(&url).await.unwrap_err().to_string();
    assert!(expired.contains("401"), "{expired}");
    let (base, _) = url.split_once("token=").unwrap();
    let wrong = connect(&format!("{base}token=vst_{}", "0".repeat(64))).await.unwrap_err();
    assert!(wrong.to_string().contains("401"), "{wrong}");
}

#[tokio::test]
async fn a_hundred_open_sockets_stay_healthy() {
    let daemon = Daemon::start();
    let mut sockets = Vec::new();
    for _ in 0..100 {
        let started = start(&daemon).await;
        let mut socket = connect(started["socket"]["url"].as_str().unwrap()).await.unwrap();
        assert_eq!(next(&mut socket).await["type"], "session.created");
        sockets.push(socket);
    }
    let health = daemon.get("/api/health").await;
    assert_eq!(health.status, 200, "{health:?}");
    for socket in &mut sockets {
        send(socket, json!({"type": "session.update", "session": {"turn_detection": null}})).await;
    }
    for socket in &mut sockets {
        let updated = next(socket).await;
        assert_eq!(updated["type"], "session.updated", "{updated}");
        assert!(updated["session"]["turn_detection"].is_null());
    }
}

#[tokio::test]
async fn speaking_over_the_reply_stops_it_and_the_log_keeps_what_was_heard() {
    let (_directory, daemon) = daemon_with_speech();
    let started = start(&daemon).await;
    let conversation_id = started["conversation"]["id"].as_str().unwrap().to_owned();
    let mut socket = connect(started["socket"]["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(next(&mut socket).await["type"], "session.created");

    say(&mut socket, &speech("I would like to book a demo."), 1200).await;
    let (first_audio, _) = until(&mut socket, "response.audio.delta").await;
    let item_id = first_audio["item_id"].as_str().unwrap().to_owned();

    // The caller speaks over the reply: server VAD hears it and the reply stops.
    say(&mut socket, &speech("Actually, put me through to a person please."), 0).await;
    let (done, before) = until(&mut socket, "response.done").await;
    assert!(
        before.iter().any(|event| event["type"] == "input_audio_buffer.speech_started"),
        "{before:?}"
    );
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(done["response"]["status_details"]["reason"], "turn_detected", "{done}");

    let replay = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/replay")).await;
    let messages = replay.body["messages"].as_array().unwrap();
    let reply = messages.iter().find(|message| message["id"] == item_id.as_str()).unwrap();
    assert_eq!(reply["aborted"], true, "{reply}");
    assert_eq!(reply["reason"], "turn_detected", "{reply}");
}

/// A language model (a stand-in for a paid endpoint) that writes its first sentence at once
/// and the second only after three seconds, noting when it sent it.
fn slow_chat_model() -> (String, Arc<Mutex<Option<Instant>>>) {
    let second_sent = Arc::new(Mutex::new(None));
    let noted = second_sent.clone();
    let stand_in = StandIn::start(move |_| {
        let noted = noted.clone();
        Answer::streaming("200 OK", "text/event-stream")
            .write(openai::chat_chunk("Sure, I can book a demo for you. "))
            .pause(Duration::from_secs(3))
            .then(move || *noted.lock().unwrap() = Some(Instant::now()))
            .write(openai::chat_chunk("Which day suits you?"))
            .write("data: [DONE]\n\n")
    });
    (format!("{}/v1", stand_in.url()), second_sent)
}

#[tokio::test]
async fn with_a_language_model_the_first_sentence_is_spoken_while_the_rest_is_written() {
    let directory = tempfile::tempdir().unwrap();
    let fetched = run_cairn(directory.path(), "model", &["fetch", "--voice"], &[]);
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    let (model_url, second_sent) = slow_chat_model();
    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--chat-url", &model_url, "--chat-model", "stand-in-1"],
        &[],
    );
    let started = start(&daemon).await;
    let conversation_id = started["conversation"]["id"].as_str().unwrap().to_owned();
    let mut socket = connect(started["socket"]["url"].as_str().unwrap()).await.unwrap();
    until(&mut socket, "session.created").await;
    say(&mut socket, &speech("I would like to book a demo."), 1200).await;

    let (first_audio, _) = until(&mut socket, "response.audio.delta").await;
    assert!(
        second_sent.lock().unwrap().is_none(),
        "the first sentence's audio came only after the model had written the whole reply"
    );
    let item_id = first_audio["item_id"].as_str().unwrap().to_owned();
    let (done, _) = until(&mut socket, "response.audio_transcript.done").await;
    assert_eq!(done["transcript"], "Sure, I can book a demo for you. Which day suits you?");
    let (done, _) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // The log's reply is the whole text, under the id the socket announced.
    let events = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/events")).await;
    let reply = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|event| event["type"] == "message" && event["data"]["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(reply["data"]["messageId"], item_id.as_str(), "{reply}");
    assert_eq!(reply["data"]["text"], "Sure, I can book a demo for you. Which day suits you?");
    assert!(reply["data"]["aborted"].is_null() || reply["data"]["aborted"] == false, "{reply}");
}

/// A daemon whose speech recognition is a stand-in for a paid transcription endpoint that
/// hears `text`, answering after `delay`; speech synthesis is espeak-ng's.
fn daemon_with_transcription(text: &'static str, delay: Duration) -> (StandIn, Daemon) {
    let transcriber = StandIn::start(move |_| openai::transcription(text).delayed(delay));
    let url = format!("{}/v1", transcriber.url());
    let daemon = Daemon::start_with(&["--transcription-url", &url], &[]);
    (transcriber, daemon)
}

/// Opens a voice conversation's socket; its conversation id and the socket, past
/// `session.created`.
async fn open_socket(daemon: &Daemon) -> (String, Socket) {
    let started = start(daemon).await;
    let conversation_id = started["conversation"]["id"].as_str().unwrap().to_owned();
    let mut socket = connect(started["socket"]["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(next(&mut socket).await["type"], "session.created");
    (conversation_id, socket)
}

#[tokio::test]
async fn a_commit_after_the_server_vad_committed_is_an_error_and_the_reply_is_still_spoken() {
    let (_transcriber, daemon) =
        daemon_with_transcription("I would like to book a demo.", Duration::ZERO);
    let (_, mut socket) = open_socket(&daemon).await;
    say(&mut socket, &speech("I would like to book a demo."), 1200).await;
    // A push-to-talk client commits when its button is released, after the VAD did.
    send(&mut socket, json!({"type": "input_audio_buffer.commit", "event_id": "ptt_1"})).await;
    let (error, before) = until(&mut socket, "error").await;
    assert_eq!(error["error"]["code"], "input_audio_buffer_commit_empty", "{error}");
    assert_eq!(error["error"]["event_id"], "ptt_1");
    let commits = |events: &[Value]| {
        events.iter().filter(|event| event["type"] == "input_audio_buffer.committed").count()
    };
    assert_eq!(commits(&before), 1, "the VAD's commit: {before:#?}");
    let (done, during) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert!(
        during.iter().any(|event| event["type"] == "response.audio.delta"),
        "the reply is spoken: {during:#?}"
    );
    assert_eq!(commits(&during), 0, "no empty turn was committed");
}

#[tokio::test]
async fn a_flood_of_commits_queues_a_few_turns_and_closing_the_socket_drops_the_rest() {
    let (transcriber, daemon) = daemon_with_transcription("Hello there.", Duration::from_secs(2));
    let (conversation_id, mut socket) = open_socket(&daemon).await;
    send(&mut socket, json!({"type": "session.update", "session": {"turn_detection": null}})).await;
    assert_eq!(
        until(&mut socket, "session.updated").await.0["session"]["turn_detection"],
        Value::Null
    );
    // 150 commits of a second of audio each, as fast as the socket takes them.
    let second = cairn_agents::voice::encode_pcm16(&vec![1_000i16; 24_000]);
    for n in 0..150 {
        send(&mut socket, json!({"type": "input_audio_buffer.append", "audio": second})).await;
        send(
            &mut socket,
            json!({"type": "input_audio_buffer.commit", "event_id": format!("c{n}")}),
        )
        .await;
    }
    let (mut committed, mut refused) = (0, 0);
    while committed + refused < 150 {
        let event = next(&mut socket).await;
        match event["type"].as_str().unwrap() {
            "input_audio_buffer.committed" => committed += 1,
            "error" if event["error"]["code"] == "turn_queue_full" => refused += 1,
            "error" => panic!("{event}"),
            _ => {}
        }
    }
    assert!(committed <= 3, "{committed} turns were queued");
    assert_eq!(refused, 150 - committed);
    socket.close(None).await.unwrap();
    drop(socket);
    // The turn being transcribed goes on; the waiting ones never start.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(transcriber.requests().len() <= 1, "{} transcriptions", transcriber.requests().len());
    let events = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/events")).await;
    let users = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "message" && event["data"]["role"] == "user")
        .count();
    assert!(users <= 1, "{users} user messages were added after the socket closed");
}

#[tokio::test]
async fn a_backchannel_over_the_reply_leaves_it_playing_and_is_no_turn() {
    let (_directory, daemon) = daemon_with_speech();
    let (conversation_id, mut socket) = open_socket(&daemon).await;
    say(&mut socket, &speech("I would like to book a demo."), 1200).await;
    let (first_audio, _) = until(&mut socket, "response.audio.delta").await;
    let item_id = first_audio["item_id"].as_str().unwrap().to_owned();

    // "Yeah" while the reply plays: shorter than interrupt_min_speech_ms (600 ms).
    say(&mut socket, &speech("yeah"), 800).await;
    let (done, before) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "completed", "the reply played to its end: {done}");
    let kinds: Vec<&str> = before.iter().filter_map(|event| event["type"].as_str()).collect();
    assert!(kinds.contains(&"input_audio_buffer.speech_started"), "{kinds:?}");
    let cleared = before
        .iter()
        .find(|event| event["type"] == "input_audio_buffer.cleared")
        .unwrap_or_else(|| panic!("the backchannel is dropped: {kinds:?}"));
    assert_eq!(cleared["reason"], "backchannel", "{cleared}");
    assert!(!kinds.contains(&"input_audio_buffer.committed"), "no turn: {kinds:?}");

    // The log: one caller turn, the reply whole.
    let replay = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/replay")).await;
    let messages = replay.body["messages"].as_array().unwrap();
    assert_eq!(
        messages.iter().filter(|message| message["role"] == "user").count(),
        1,
        "{messages:?}"
    );
    let reply = messages.iter().find(|message| message["id"] == item_id.as_str()).unwrap();
    assert_eq!(reply["aborted"], false, "{reply}");

    // A longer interruption still cuts a reply: set the minimum at 100 ms and speak over.
    send(&mut socket, json!({"type": "session.update", "session": {"turn_detection": {"interrupt_min_speech_ms": 100}}}))
        .await;
    let (updated, _) = until(&mut socket, "session.updated").await;
    assert_eq!(updated["session"]["turn_detection"]["interrupt_min_speech_ms"], 100, "{updated}");
    say(&mut socket, &speech("What time is it?"), 1200).await;
    until(&mut socket, "response.audio.delta").await;
    say(&mut socket, &speech("yeah"), 800).await;
    let (done, _) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(done["response"]["status_details"]["reason"], "turn_detected", "{done}");
}

/// Audio as a microphone gives it: 100 ms appends, each sent when it would have been heard.
async fn say_in_real_time(socket: &mut Socket, audio: &[i16], silence_ms: usize) {
    let mut audio = audio.to_vec();
    audio.extend(vec![0i16; silence_ms * 24]);
    let start = tokio::time::Instant::now();
    for (index, chunk) in audio.chunks(2400).enumerate() {
        tokio::time::sleep_until(start + Duration::from_millis(100 * index as u64)).await;
        let audio = cairn_agents::voice::encode_pcm16(chunk);
        send(socket, json!({"type": "input_audio_buffer.append", "audio": audio})).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_busy_machine_server_vad_hears_the_whole_turn_and_a_handoff_is_spoken() {
    let (_directory, daemon) = daemon_with_speech();
    let (conversation_id, mut socket) = open_socket(&daemon).await;
    // Every core busy while the caller speaks in real time.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let burners: Vec<_> = (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                x
            })
        })
        .collect();
    say_in_real_time(&mut socket, &speech("I would like to book a demo."), 1200).await;
    let (transcribed, _) =
        until(&mut socket, "conversation.item.input_audio_transcription.completed").await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for burner in burners {
        burner.join().unwrap();
    }
    let transcript = transcribed["transcript"].as_str().unwrap().to_lowercase();
    assert!(transcript.contains("book a demo"), "every word of the turn: {transcript}");
    let (done, _) = until(&mut socket, "response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // Asking for a person: the agent says a person takes over, and after the handoff the
    // caller still hears that someone is coming, never silence.
    say(&mut socket, &speech("I want to talk to a human."), 1200).await;
    let (done, heard) = until(&mut socket, "response.done").await;
    let heard: Vec<&Value> = heard
        .iter()
        .filter(|event| event["type"] == "conversation.item.input_audio_transcription.completed")
        .collect();
    let said = done["response"]["output"][0]["content"][0]["transcript"].as_str().unwrap();
    assert!(said.contains("pass this conversation to a person"), "{said} (heard {heard:?})");
    say(&mut socket, &speech("Hello? Is anyone there?"), 1200).await;
    let (done, _) = until(&mut socket, "response.done").await;
    let said = done["response"]["output"][0]["content"][0]["transcript"].as_str().unwrap();
    assert!(said.contains("A person from the team will take over"), "{said}");
    let snapshot =
        daemon.get(&format!("/api/runtime/conversations/{conversation_id}/snapshot")).await;
    assert_eq!(snapshot.body["snapshot"]["lifecycle"], "handoff", "{snapshot:?}");
}

#[tokio::test]
async fn a_pause_shorter_than_the_silence_wait_keeps_one_turn_with_every_word() {
    let (_directory, daemon) = daemon_with_speech();
    let (_conversation_id, mut socket) = open_socket(&daemon).await;
    // The pause is espeak-ng's own 300 ms of silence after "to": long enough for the turn so
    // far to be transcribed early, too short to end the turn (500 ms). The speech after it
    // makes that early transcript stale.
    let mut audio = speech("I would like to");
    audio.extend(speech("book a demo."));
    say_in_real_time(&mut socket, &audio, 1200).await;
    let (transcribed, before) =
        until(&mut socket, "conversation.item.input_audio_transcription.completed").await;
    let commits = before.iter().filter(|event| event["type"] == "input_audio_buffer.committed");
    assert_eq!(commits.count(), 1, "one turn: {before:?}");
    let transcript = transcribed["transcript"].as_str().unwrap().to_lowercase();
    assert!(transcript.contains("like") && transcript.contains("demo"), "{transcript}");
}

/// The `audioMs` of the caller's newest voice turn in the conversation's log.
async fn last_turn_audio_ms(daemon: &Daemon, conversation_id: &str) -> u64 {
    let events = daemon.get(&format!("/api/runtime/conversations/{conversation_id}/events")).await;
    let events = events.body["events"].as_array().unwrap().clone();
    let turn = events
        .iter()
        .rev()
        .find(|event| event["type"] == "message" && event["data"]["role"] == "user")
        .unwrap_or_else(|| panic!("a voice turn in {events:?}"));
    turn["data"]["audioMs"].as_u64().unwrap()
}

#[tokio::test]
async fn the_turn_keeps_the_prefix_padding_before_the_detected_speech() {
    let (_directory, daemon) = daemon_with_speech();
    let (conversation_id, mut socket) = open_socket(&daemon).await;
    let mut audio = vec![0i16; 1000 * 24];
    audio.extend(speech("I would like to book a demo."));
    let mut heard = Vec::new();
    for padding in [0, 300] {
        let update = json!({"type": "session.update", "session": {"turn_detection": {"prefix_padding_ms": padding}}});
        send(&mut socket, update).await;
        let (updated, _) = until(&mut socket, "session.updated").await;
        assert_eq!(updated["session"]["turn_detection"]["prefix_padding_ms"], padding);
        say(&mut socket, &audio, 1200).await;
        let (transcribed, _) =
            until(&mut socket, "conversation.item.input_audio_transcription.completed").await;
        until(&mut socket, "response.done").await;
        let transcript = transcribed["transcript"].as_str().unwrap().to_lowercase();
        heard.push((last_turn_audio_ms(&daemon, &conversation_id).await, transcript));
    }
    // The same speech, 300 ms more of the audio before its detected start.
    let (without, with) = (heard[0].0, heard[1].0);
    assert!((260..=340).contains(&(with - without)), "{heard:?}");
    assert!(heard[1].1.contains("would like"), "the first words are heard: {heard:?}");
}
