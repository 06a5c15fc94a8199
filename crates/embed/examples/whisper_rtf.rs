//! Measures Whisper tiny.en on this machine: how long the model takes to load, how much
//! memory it holds, and the real-time factor of transcription (time taken / audio duration;
//! below 1 is faster than speech).
//!
//! The utterances are spoken by eSpeak NG and go the way a voice turn goes: 24 kHz 16-bit
//! audio, resampled to 16 kHz, transcribed.
//!
//! ```text
//! cargo run --release -p cairn-embed --example whisper_rtf [-- MODELS_DIR [TEXT…]]
//! ```
//!
//! `MODELS_DIR` defaults to the tests' cache (`target/test-models`); the model is
//! fetched into it when missing.

use std::path::PathBuf;
use std::time::Instant;

use cairn_embed::{
    Espeak, VOICE_SAMPLE_RATE, WHISPER_SAMPLE_RATE, Whisper, fetch_voice_model, pcm16_to_f32,
    resample,
};

/// How many times each utterance is transcribed after a first, unmeasured run.
const RUNS: u32 = 5;

const TEXTS: [&str; 3] = [
    "I would like to book a demo",
    "Can you move my meeting to Thursday afternoon?",
    "Please send the invoice to the finance team by the end of the week, and copy me on it.",
];

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let models = args.next().map_or_else(|| workspace_target().join("test-models"), PathBuf::from);
    let texts: Vec<String> = args.collect();
    let texts: Vec<&str> =
        if texts.is_empty() { TEXTS.to_vec() } else { texts.iter().map(String::as_str).collect() };

    let dir = fetch_voice_model(&models)?;
    let before = memory("VmRSS");
    let start = Instant::now();
    let whisper = Whisper::load(&dir)?;
    let load = start.elapsed();
    let loaded = memory("VmRSS");
    println!("model: {}", dir.display());
    println!(
        "load: {:.2} s; resident memory {} -> {} MB",
        load.as_secs_f64(),
        before.map_or("?".into(), |kb| (kb / 1024).to_string()),
        loaded.map_or("?".into(), |kb| (kb / 1024).to_string()),
    );

    let espeak = Espeak::detect().ok_or("espeak-ng is not on PATH")?;
    for text in texts {
        let pcm = espeak.synthesize(text)?;
        let start = Instant::now();
        let audio = resample(&pcm16_to_f32(&pcm), VOICE_SAMPLE_RATE, WHISPER_SAMPLE_RATE);
        let resampled = start.elapsed();
        let seconds = audio.len() as f64 / f64::from(WHISPER_SAMPLE_RATE);
        let transcript = whisper.transcribe(&audio)?;
        let start = Instant::now();
        for _ in 0..RUNS {
            whisper.transcribe(&audio)?;
        }
        let taken = start.elapsed().as_secs_f64() / f64::from(RUNS);
        println!(
            "{seconds:.2} s of audio in {:.0} ms: real-time factor {:.3} (resampling from 24 kHz: \
             {:.1} ms)\n  said:  {text}\n  heard: {transcript}",
            taken * 1000.0,
            taken / seconds,
            resampled.as_secs_f64() * 1000.0,
        );
    }
    if let Some(peak) = memory("VmHWM") {
        println!("peak resident memory: {} MB", peak / 1024);
    }
    Ok(())
}

/// A line of `/proc/self/status` in kB (Linux only).
fn memory(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The workspace's `target/` directory.
fn workspace_target() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}
