//! The report's figures of the local model, PostgreSQL, hooks, voice and the conversation runtime.

use std::time::{Duration, Instant};

use crate::corpus::{Corpus, Rng};
use crate::options::Options;
use crate::report::Report;
use crate::stats::{Latencies, count, duration, megabytes};
use crate::{SSE_HOLD, SSE_KEYS, SSE_SAMPLES, SSE_WARM_UP, WARM_UP_CALLS};
use crate::{agents, budget, daemon, eval, postgres, runtime, voice};

/// Embedding throughput and query latency of the local model, when it is installed
/// (`cairn model fetch`; `CAIRN_MODEL_DIR` points elsewhere).
pub(crate) async fn local_model_figures(
    report: &mut Report,
    corpus: &Corpus,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let directory = eval::default_model_dir().unwrap_or_default();
    if !cairn_embed::model_installed(&directory) {
        report.note(format!(
            "the local model is not installed in {}; its figures are left out",
            directory.display()
        ));
        return Ok(());
    }
    eprintln!("local model…");
    let model = cairn_embed::LocalModel::load(&directory).map_err(anyhow::Error::msg)?;
    let texts: Vec<String> = (0..512).map(|_| corpus.memory(rng).content).collect();
    let started = Instant::now();
    for batch in texts.chunks(32) {
        cairn_memory::embed::Embedder::embed(&model, batch).await?;
    }
    let per_second = texts.len() as f64 / started.elapsed().as_secs_f64();
    report.info(
        "embedding throughput, all-MiniLM-L6-v2".to_owned(),
        format!("{}/s", count(per_second)),
    );
    let mut samples = Vec::new();
    for _ in 0..100 {
        let query = vec![corpus.query(rng)];
        let started = Instant::now();
        cairn_memory::embed::Embedder::embed(&model, &query).await?;
        samples.push(started.elapsed());
    }
    let lat = Latencies::new(samples);
    report.info(
        "query embedding p50 / p99, all-MiniLM-L6-v2".to_owned(),
        format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
    );
    Ok(())
}

/// Daemons on one PostgreSQL database (issue 15). A failure costs only these figures.
pub(crate) async fn postgres_figures(options: &Options, report: &mut Report, corpus: &Corpus) {
    let Some(target) = &options.postgres else {
        report.note("the PostgreSQL figures were left out (--no-postgres)".into());
        return;
    };
    let plan = postgres::Plan {
        daemons: 3,
        connections: 48,
        conversations: 64,
        duration: if options.quick { Duration::from_millis(1500) } else { Duration::from_secs(3) },
        sse_warm_up: SSE_WARM_UP,
        sse_samples: if options.quick { 100 } else { SSE_SAMPLES },
        memories: *options.sizes.last().expect("at least one size"),
        warm_up: WARM_UP_CALLS,
        calls: options.calls,
        seed: options.seed,
    };
    let figures = async {
        let (binary, stale) = daemon::binary(options.rebuild_daemon)?;
        if let Some(stale) = stale {
            report.note(stale);
        }
        postgres::figures(target, &plan, &binary, corpus, report).await
    };
    if let Err(error) = figures.await {
        report.stopped_short("PostgreSQL", &error);
    }
}

/// A hook's round trip against an idle daemon, beside `cairn --version`'s start-up.
pub(crate) async fn hook_figures(report: &mut Report) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let dir = tempfile::Builder::new().prefix("cairn-bench-hook-").tempdir()?;
    let log = dir.path().join("daemon.log");
    let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
    let url = format!("http://{}", daemon.address);
    let measured =
        tokio::task::spawn_blocking(move || agents::hook_latencies(&binary, &url, 100)).await?;
    daemon.stop()?;
    let (hooks, versions) = measured?;
    let over = hooks.p50().saturating_sub(versions.p50());
    report.check(
        "hook round trip p50, less `cairn --version`'s start-up".to_owned(),
        duration(over),
        format!("≤ {}", duration(budget::HOOK_OVER_START_P50)),
        over <= budget::HOOK_OVER_START_P50,
    );
    report.info(
        "  hook pre-tool-use p50 / p99; cairn --version p50".to_owned(),
        format!(
            "{} / {}; {}",
            duration(hooks.p50()),
            duration(hooks.p99()),
            duration(versions.p50())
        ),
    );
    Ok(())
}

/// Voice over the daemon's WebSocket: from the end of a spoken turn to the reply's first
/// audio, Whisper's real-time factor, and the memory of open sockets.
pub(crate) async fn voice_figures(options: &Options, report: &mut Report) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let dir = tempfile::Builder::new().prefix("cairn-bench-voice-").tempdir()?;
    eprintln!("voice: installing Whisper tiny.en…");
    voice::install_model(&binary, dir.path())?;
    let plan = if options.quick {
        voice::Plan { warm_up: 2, turns: 10, transcriptions: 5, sockets: 100, vad_turns: 5 }
    } else {
        voice::Plan { warm_up: 3, turns: 40, transcriptions: 20, sockets: 100, vad_turns: 15 }
    };
    let log = dir.path().join("daemon.log");
    let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
    eprintln!("voice: {} turns, {} sockets…", plan.turns, plan.sockets);
    let figures = voice::figures(&daemon, dir.path(), &plan).await;
    daemon.stop()?;
    let figures = figures?;
    let utterance = format!("{:.1} s utterance", figures.utterance.as_secs_f64());
    let lat = &figures.to_first_audio;
    for (name, value) in [("p50", lat.p50()), ("p99", lat.p99())] {
        report.check(
            format!("voice: commit → first reply audio {name}, {utterance}"),
            duration(value),
            format!("≤ {}", duration(budget::VOICE_FIRST_AUDIO)),
            value <= budget::VOICE_FIRST_AUDIO,
        );
    }
    let lat = &figures.speech_end_to_first_audio;
    report.check(
        "voice: server VAD, end of speech → first reply audio p50".into(),
        duration(lat.p50()),
        format!("≤ {}", duration(budget::VOICE_SPEECH_END_TO_AUDIO)),
        lat.p50() <= budget::VOICE_SPEECH_END_TO_AUDIO,
    );
    report.info(
        "  voice: server VAD, end of speech → first reply audio p99".into(),
        duration(lat.p99()),
    );
    let lat = &figures.to_transcript;
    report.info(
        "  voice: commit → transcript p50 / p99".into(),
        format!("{} / {}", duration(lat.p50()), duration(lat.p99())),
    );
    let rtf = &figures.real_time_factor;
    report.info(
        format!("voice: Whisper tiny.en real-time factor p50 / p99, {utterance}"),
        format!("{:.3} / {:.3}", rtf.p50().as_secs_f64(), rtf.p99().as_secs_f64()),
    );
    report.info(
        "voice: daemon RSS after the turns, no socket open".into(),
        megabytes(figures.rss_idle),
    );
    report.info(
        format!("voice: daemon RSS with {} open sockets", plan.sockets),
        megabytes(figures.rss_with_sockets),
    );
    report.info(
        format!("  voice: GET /api/health with {} open sockets", plan.sockets),
        duration(figures.health_with_sockets),
    );
    report.notes.push(format!(
        "Voice: each turn starts a voice conversation over HTTP, connects its socket, turns \
         server VAD off, sends {:?} (espeak-ng, pcm16 24 kHz) in 100 ms appends as fast as the \
         socket takes them, then `input_audio_buffer.commit`; measured from sending the commit \
         to reading the transcript and the reply's first `response.audio.delta` (Whisper \
         tiny.en transcribes, the bundled agent answers, espeak-ng speaks the first sentence). \
         {} turns after {} warm-up turns (the first loads the model). The real-time factor is \
         transcription time over the utterance's length, in this process, as the daemon does \
         it. The sockets are each past `session.created`. With server VAD (the session's \
         defaults), {} turns each send the utterance in 40 ms appends at a microphone's pace \
         and then silence, measured from sending the utterance's last sample above the noise \
         floor to reading the first reply audio: the silence wait is part of it.",
        voice::UTTERANCE,
        plan.turns,
        plan.warm_up,
        plan.vad_turns,
    ));
    Ok(())
}

/// The conversation runtime: appends per second in process, and the SSE delivery measured
/// on the daemon (`None` without the daemon).
pub(crate) async fn runtime_figures(
    options: &Options,
    report: &mut Report,
    sse: Option<anyhow::Result<runtime::StreamFigures>>,
) -> anyhow::Result<()> {
    eprintln!("runtime appends…");
    let plan = if options.quick {
        runtime::AppendPlan { warm_up: 50, one: 500, conversations: 100, tasks: 16, many: 1_000 }
    } else {
        runtime::AppendPlan { warm_up: 100, one: 2_000, conversations: 100, tasks: 16, many: 5_000 }
    };
    let appends = runtime::appends(&plan).await?;
    report.info(
        format!("runtime appends, 1 conversation, sequential ({})", count(plan.one as f64)),
        format!("{}/s", count(appends.one)),
    );
    report.info(
        format!(
            "runtime appends, {} conversations, {} tasks ({})",
            plan.conversations,
            plan.tasks,
            count(plan.many as f64)
        ),
        format!("{}/s", count(appends.many)),
    );
    match sse {
        Some(Ok(figures)) => {
            let idle = |idle: &Option<daemon::Rates>| {
                idle.map_or_else(
                    || "—".to_owned(),
                    |idle| {
                        format!(
                            "{} reads/s ({}/s), {} switches/s, CPU {:.1} %",
                            count(idle.read_calls),
                            megabytes(idle.read_bytes as u64),
                            count(idle.switches),
                            idle.cpu.as_secs_f64() * 100.0
                        )
                    },
                )
            };
            if let Some(rss) = figures.rss_before {
                report.info("daemon RSS before the event streams".into(), megabytes(rss));
            }
            report.info("  daemon idle, no event streams".into(), idle(&figures.idle_before));
            for delivery in figures.deliveries {
                let streams = count(delivery.streams as f64);
                if delivery.streams < delivery.requested {
                    report.note(format!(
                        "the daemon accepted {} of {} event streams ({SSE_KEYS} keys); the \
                         others were refused with 429",
                        delivery.streams, delivery.requested
                    ));
                }
                report.info(
                    format!("daemon idle with {streams} open event streams"),
                    idle(&delivery.idle),
                );
                let lat = &delivery.latencies;
                report.check(
                    format!("SSE delivery (append request → receipt) p99, {streams} streams"),
                    duration(lat.p99()),
                    format!("≤ {}", duration(budget::SSE_DELIVERY_P99)),
                    lat.p99() <= budget::SSE_DELIVERY_P99,
                );
                report.info(
                    format!("  SSE delivery (append request → receipt) p50, {streams} streams"),
                    duration(lat.p50()),
                );
                if let Some(rss) = delivery.rss {
                    report
                        .info(format!("  daemon RSS with {streams} open streams"), megabytes(rss));
                }
            }
            report.notes.push(format!(
                "Idle event streams: held {} s with nothing appended, opened in turn with \
                 {SSE_KEYS} `runtime` keys; reads/s counts the daemon's read system calls \
                 (`syscr` of /proc/<pid>/io, SQLite's page reads among them, whether the page \
                 cache or the disk serves them), switches/s its threads' context switches \
                 (about how often they woke), CPU its user and system time, in % of one core.",
                if options.quick { SSE_HOLD / 2 } else { SSE_HOLD }.as_secs_f64()
            ));
            report.notes.push(format!(
                "SSE delivery: {SSE_SAMPLES} appends (`POST …/intermediate-messages`, one at a \
                 time, each to the next conversation) while one event stream per conversation is \
                 open, each on its own connection; measured from sending the append to the \
                 stream's client reading the event, so it includes the append's own handling."
            ));
        }
        Some(Err(error)) => report.note(format!("SSE delivery was not measured: {error:#}")),
        None => report.note("SSE delivery needs the daemon; --no-daemon leaves it out".into()),
    }
    Ok(())
}
