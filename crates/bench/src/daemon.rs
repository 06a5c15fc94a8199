//! The `cairn` daemon as a child process: finding its binary, starting it on a seeded data
//! directory, reading its memory use, and stopping it.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use hyper::StatusCode;

use crate::http::Connection;

/// The release `cairn` binary beside this executable (`<target>/release/cairn`). When it is
/// missing, or `rebuild` is set, it is built with the same target directory this benchmark
/// was built with. Returns the binary, and a warning when it is older than the sources.
pub fn binary(rebuild: bool) -> anyhow::Result<(PathBuf, Option<String>)> {
    let exe = std::env::current_exe().context("cannot find the benchmark's own executable")?;
    let profile_dir = exe.parent().context("the executable has no directory")?;
    let binary = profile_dir.join(format!("cairn{}", std::env::consts::EXE_SUFFIX));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if rebuild || !binary.exists() {
        let target_dir =
            profile_dir.parent().context("the executable is not in a target directory")?;
        let release = profile_dir.file_name().is_some_and(|name| name == "release");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        eprintln!(
            "building the daemon: cargo build{} -p cairn-cli (CARGO_TARGET_DIR={})",
            if release { " --release" } else { "" },
            target_dir.display()
        );
        let mut build = Command::new(cargo);
        build.arg("build").args(["-p", "cairn-cli"]).current_dir(&workspace);
        build.env("CARGO_TARGET_DIR", target_dir);
        if release {
            build.arg("--release");
        }
        let status = build.status().context("cannot run cargo")?;
        if !status.success() {
            bail!("cargo build -p cairn-cli failed: {status}");
        }
        if !binary.exists() {
            bail!("cargo built cairn-cli, yet {} does not exist", binary.display());
        }
    }
    let built = std::fs::metadata(&binary)?.modified()?;
    let stale =
        newest_source(&workspace).filter(|(_, changed)| *changed > built).map(|(path, _)| {
            format!(
                "{} is older than {}: the daemon figures may be of old code; pass --rebuild-daemon",
                binary.display(),
                path.display()
            )
        });
    Ok((binary, stale))
}

/// The most recently changed source of the workspace (`crates/*/src/**`, manifests, lock).
fn newest_source(workspace: &Path) -> Option<(PathBuf, SystemTime)> {
    fn visit(path: &Path, newest: &mut Option<(PathBuf, SystemTime)>) {
        let Ok(metadata) = std::fs::metadata(path) else { return };
        if metadata.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                visit(&entry.path(), newest);
            }
        } else if let Ok(modified) = metadata.modified()
            && newest.as_ref().is_none_or(|(_, time)| modified > *time)
        {
            *newest = Some((path.to_owned(), modified));
        }
    }
    let mut newest = None;
    visit(&workspace.join("Cargo.toml"), &mut newest);
    visit(&workspace.join("Cargo.lock"), &mut newest);
    for entry in std::fs::read_dir(workspace.join("crates")).ok()?.flatten() {
        // The benchmark itself is not part of the daemon.
        if entry.file_name() == "bench" {
            continue;
        }
        visit(&entry.path().join("src"), &mut newest);
        visit(&entry.path().join("Cargo.toml"), &mut newest);
    }
    newest
}

/// Creates an API key with `cairn keys create` (straight into the database, so it works at
/// once, even while a daemon runs) and returns it.
pub fn create_key(
    binary: &Path,
    data_dir: &Path,
    role: &str,
    name: &str,
) -> anyhow::Result<String> {
    let stdout = run(binary, &["keys", "create", "--role", role, "--name", name], data_dir)?;
    let key = stdout.lines().last().map(str::trim).unwrap_or_default();
    anyhow::ensure!(!key.is_empty(), "cairn keys create printed no key");
    Ok(key.to_owned())
}

/// Runs `cairn <args> --data-dir <data_dir>` to the end; its output, or why it failed.
pub fn run(binary: &Path, args: &[&str], data_dir: &Path) -> anyhow::Result<String> {
    let output = Command::new(binary)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} {}", binary.display(), args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "cairn {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// A running daemon.
pub struct Daemon {
    child: Child,
    pub address: SocketAddr,
    /// From spawn to the `cairn listening on …` line.
    pub to_listening: Duration,
    /// From spawn to the first `GET /api/health` answered 200.
    pub to_healthy: Duration,
    /// Kept open so the daemon never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
    binary: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    /// The arguments given after `--data-dir`, for a restart.
    args: Vec<String>,
    stopped: bool,
}

/// What the daemon has read and how much processor time it has used, from `/proc`.
#[derive(Debug, Clone, Copy)]
pub struct Activity {
    /// Read system calls (`syscr` of `/proc/<pid>/io`): SQLite's page reads among them.
    pub read_calls: u64,
    /// Bytes read by those calls (`rchar`), whether from the page cache or the disk.
    pub read_bytes: u64,
    /// User and system time of all its threads.
    pub cpu: Duration,
    /// Context switches of all its threads, voluntary or not: how often they slept or were
    /// put aside, so about how often they woke.
    pub switches: u64,
    pub at: Instant,
}

/// [`Activity`] per second of wall time.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub read_calls: f64,
    pub read_bytes: f64,
    /// Processor time per second: 1 s is one core busy.
    pub cpu: Duration,
    pub switches: f64,
}

impl Activity {
    /// What happened per second of wall time since `earlier`.
    pub fn rates_since(&self, earlier: &Activity) -> Rates {
        let seconds = self.at.saturating_duration_since(earlier.at).as_secs_f64().max(1e-9);
        Rates {
            read_calls: self.read_calls.saturating_sub(earlier.read_calls) as f64 / seconds,
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes) as f64 / seconds,
            cpu: self.cpu.saturating_sub(earlier.cpu).div_f64(seconds),
            switches: self.switches.saturating_sub(earlier.switches) as f64 / seconds,
        }
    }
}

impl Daemon {
    /// Starts `cairn serve --port 0 --data-dir <data_dir>` and waits until it is healthy.
    /// Its log goes to `log`.
    pub async fn start(binary: &Path, data_dir: &Path, log: &Path) -> anyhow::Result<Daemon> {
        Daemon::start_with(binary, data_dir, log, &[]).await
    }

    /// [`Daemon::start`] with more arguments to `cairn serve` (`--database-url …`).
    pub async fn start_with(
        binary: &Path,
        data_dir: &Path,
        log: &Path,
        args: &[&str],
    ) -> anyhow::Result<Daemon> {
        let log_file = std::fs::File::create(log)?;
        let started = Instant::now();
        let mut child = Command::new(binary)
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .env_remove("SERVICE_PORT")
            .env_remove("SERVICE_DATA_DIR")
            .env_remove("SERVICE_DATABASE_URL")
            // The limiter stays on its path, with limits no load generator reaches: the
            // throughput figure measures the HTTP stack, not the limits.
            .env("SERVICE_RATE_LIMIT_READ", "1000000000")
            .env("SERVICE_RATE_LIMIT_WRITE", "1000000000")
            .env("SERVICE_RATE_LIMIT_CONTEXT", "1000000000")
            .env("SERVICE_RATE_LIMIT_BULK", "1000000000")
            // Every client of the bench is on loopback: a thousand event streams come from
            // one address, and the connector syncs a folder under the temporary directory.
            .env("SERVICE_MAX_CONNECTIONS_PER_ADDRESS", "0")
            .env("SERVICE_CONNECTOR_ROOTS", std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let reading = tokio::task::spawn_blocking(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line);
            (stdout, line, read)
        });
        let (stdout, line, read) =
            match tokio::time::timeout(Duration::from_secs(30), reading).await {
                Ok(joined) => joined?,
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("the daemon printed nothing for 30 s; log:\n{}", tail(log));
                }
            };
        let to_listening = started.elapsed();
        read?;
        let address = line
            .trim()
            .strip_prefix("cairn listening on http://")
            .and_then(|address| address.parse::<SocketAddr>().ok());
        let Some(address) = address else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("unexpected first line from the daemon: {line:?}; log:\n{}", tail(log));
        };
        let to_healthy = loop {
            if let Ok(mut connection) = Connection::open(address).await
                && let Ok((StatusCode::OK, _)) = connection.get("/api/health").await
            {
                break started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the daemon was not healthy within 30 s; log:\n{}", tail(log));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        Ok(Daemon {
            child,
            address,
            to_listening,
            to_healthy,
            _stdout: stdout,
            binary: binary.to_owned(),
            data_dir: data_dir.to_owned(),
            log: log.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            stopped: false,
        })
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident and peak resident memory, in bytes, from `/proc/<pid>/status`.
    pub fn memory(&self) -> anyhow::Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .context("cannot read /proc/<pid>/status (this measure needs Linux)")?;
        let field = |name: &str| -> anyhow::Result<u64> {
            let line = status
                .lines()
                .find(|line| line.starts_with(name))
                .with_context(|| format!("no {name} in /proc/<pid>/status"))?;
            let kib: u64 = line[name.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .with_context(|| format!("cannot parse {line:?}"))?;
            Ok(kib * 1024)
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// Resets the peak resident memory (`VmHWM`) to the current resident memory, so the next
    /// peak read is of what happens from now on. False where the kernel does not allow it.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").is_ok()
    }

    /// Read calls, bytes read and processor time so far.
    pub fn activity(&self) -> anyhow::Result<Activity> {
        let at = Instant::now();
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid()))
            .context("cannot read /proc/<pid>/io")?;
        let field = |name: &str| -> anyhow::Result<u64> {
            io.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse().ok())
                .with_context(|| format!("no {name} in /proc/<pid>/io"))
        };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .context("cannot read /proc/<pid>/stat")?;
        // After the command name, which is in parentheses and may hold spaces: utime and
        // stime are fields 14 and 15 of the line, the 12th and 13th after the name.
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let ticks: Vec<u64> =
            after_name.split_whitespace().skip(11).take(2).filter_map(|n| n.parse().ok()).collect();
        anyhow::ensure!(ticks.len() == 2, "cannot parse /proc/<pid>/stat");
        // USER_HZ is 100 on every Linux architecture (it is part of the ABI).
        let cpu = Duration::from_millis((ticks[0] + ticks[1]) * 10);
        let mut switches = 0;
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .context("cannot read /proc/<pid>/task")?;
        for task in tasks.flatten() {
            // A thread that ended since the listing has nothing to add.
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else { continue };
            switches += status
                .lines()
                .filter(|line| line.contains("ctxt_switches:"))
                .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
        Ok(Activity {
            read_calls: field("syscr:")?,
            read_bytes: field("rchar:")?,
            cpu,
            switches,
            at,
        })
    }

    /// Waits until `/api/health` says full-text search runs on the in-memory index (built
    /// in the background at start on a large store); how long that took from now.
    pub async fn fulltext_index_ready(&self, within: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut connection = Connection::open(self.address).await?;
        loop {
            let (_, body) = connection.get("/api/health").await?;
            let health: serde_json::Value = serde_json::from_slice(&body)?;
            if health["fulltextIndex"] == "ready" {
                return Ok(started.elapsed());
            }
            if started.elapsed() > within {
                bail!("the full-text index was not ready within {within:?}: {health}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the daemon at once (SIGKILL), for one busy with work that will not end in time,
    /// and starts it again on the same data directory.
    pub async fn restart_killed(&mut self) -> anyhow::Result<()> {
        self.stopped = true;
        self.child.kill()?;
        self.child.wait()?;
        let log = self.log.with_extension("restarted.log");
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let restarted = Daemon::start_with(&self.binary, &self.data_dir, &log, &args).await?;
        *self = restarted;
        Ok(())
    }

    /// Sends SIGTERM and waits for the daemon to exit; kills it after 15 s.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    eprintln!("note: the daemon exited with {status}; log:\n{}", tail(&self.log));
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                eprintln!("note: the daemon ignored SIGTERM for 15 s; killing it");
                self.child.kill()?;
                self.child.wait()?;
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    /// A daemon left running by an early error is killed, never orphaned.
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last lines of a log file, for error messages.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
