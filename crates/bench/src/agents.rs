//! The coding agent's loop (issue 29): the guard's own time in process over the commands of
//! its verdict table, and a hook's round trip (`cairn hook pre-tool-use`, a process started
//! for each tool call as an agent starts it) beside `cairn --version`'s own start-up.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::stats::Latencies;

/// The guard's coverage table (`crates/memory/tests/data/guard-verdicts.tsv`).
const VERDICTS: &str = include_str!("../../memory/tests/data/guard-verdicts.tsv");

/// The commands of the verdict table.
fn commands() -> Vec<&'static str> {
    VERDICTS
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.splitn(3, '\t').nth(2))
        .collect()
}

/// The built-in rules' time for each command of the table, `rounds` times over.
pub fn guard_latencies(rounds: usize) -> Latencies {
    let commands = commands();
    let mut samples = Vec::with_capacity(commands.len() * rounds);
    for _ in 0..rounds {
        for command in &commands {
            let started = Instant::now();
            std::hint::black_box(cairn_memory::built_in_verdict(command));
            samples.push(started.elapsed());
        }
    }
    Latencies::new(samples)
}

/// Runs `binary` with `args`, `input` on its standard input, and times it to its exit.
fn timed_run(binary: &Path, args: &[&str], url: &str, input: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .env("CAIRN_URL", url)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    child.stdin.take().expect("piped").write_all(input.as_bytes())?;
    let status = child.wait()?;
    anyhow::ensure!(status.success() || status.code() == Some(2), "{args:?} exited with {status}");
    Ok(started.elapsed())
}

/// A hook's round trip against the daemon at `url` and `cairn --version`'s, `runs` each,
/// in turn.
pub fn hook_latencies(
    binary: &Path,
    url: &str,
    runs: usize,
) -> anyhow::Result<(Latencies, Latencies)> {
    let payload = serde_json::json!({
        "session_id": "bench", "cwd": "/tmp", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "cargo test --workspace"},
    })
    .to_string();
    let (mut hooks, mut versions) = (Vec::new(), Vec::new());
    for run in 0..runs + 5 {
        let hook = timed_run(binary, &["hook", "pre-tool-use"], url, &payload)?;
        let version = timed_run(binary, &["--version"], url, "")?;
        if run >= 5 {
            hooks.push(hook);
            versions.push(version);
        }
    }
    Ok((Latencies::new(hooks), Latencies::new(versions)))
}
