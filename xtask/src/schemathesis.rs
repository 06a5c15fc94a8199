//! `cargo xtask schemathesis`: fuzzes the real daemon with schemathesis (from PyPI) over the
//! whole OpenAPI document it serves, the memory API and the conversation runtime alike.
//!
//! The daemon runs from a fresh data directory with rate limits off (429 is documented, but
//! it would stop the fuzzer from reaching anything). Checks: no 5xx, and every status,
//! content type, header and body as documented. schemathesis installs into a virtualenv
//! under `target/`, so nothing is kept outside the clone.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context as _, bail};

/// The pinned version, so a run today and a run next month test the same way.
const VERSION: &str = "4.32.5";

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_headers_conformance,response_schema_conformance";

pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let st = install(root)?;
    crate::cargo(&["build", "--quiet", "-p", "cairn-cli", "--bin", "cairn"], &[])?;
    let data = root.join("target/schemathesis/data");
    let _ = std::fs::remove_dir_all(&data);
    let mut daemon = Daemon::start(&root.join("target/debug/cairn"), &data)?;
    let schema = format!("{}/openapi.json", daemon.url);
    eprintln!("$ st run {schema}");
    let config = root.join("xtask/schemathesis.toml");
    let status = Command::new(st)
        .arg("--config-file")
        .arg(config)
        .args(["run", &schema, "--checks", CHECKS])
        // Enough cases to reach every documented status; a minute or two on two cores.
        .args(["--max-examples", "30", "--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--request-timeout", "10", "--workers", "2", "--seed", "1"])
        .args(["--no-color", "--suppress-health-check", "all"])
        .args(args)
        .status()
        .context("cannot run schemathesis")?;
    daemon.stop();
    let _ = std::fs::remove_dir_all(&data);
    if !status.success() {
        bail!("schemathesis found responses that do not match docs/openapi.json ({status})");
    }
    Ok(())
}

/// `target/schemathesis/bin/st`, installed on first use.
fn install(root: &Path) -> anyhow::Result<std::path::PathBuf> {
    let venv = root.join("target/schemathesis");
    let st = venv.join("bin/st");
    let installed = Command::new(&st)
        .arg("--version")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).contains(VERSION));
    if installed {
        return Ok(st);
    }
    eprintln!("$ python3 -m venv {} && pip install schemathesis=={VERSION}", venv.display());
    let created = Command::new("python3").args(["-m", "venv"]).arg(&venv).status();
    if !created.is_ok_and(|status| status.success()) {
        bail!("cannot create a Python virtualenv at {} (python3 -m venv)", venv.display());
    }
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("schemathesis=={VERSION}"))
        .status()?;
    if !pip.success() {
        bail!("cannot install schemathesis {VERSION} from PyPI");
    }
    Ok(st)
}

/// The daemon under test; killed when dropped.
struct Daemon {
    child: Child,
    url: String,
}

impl Daemon {
    fn start(binary: &Path, data: &Path) -> anyhow::Result<Daemon> {
        let mut child = Command::new(binary)
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(data)
            .envs([
                ("SERVICE_RATE_LIMIT_READ", "0"),
                ("SERVICE_RATE_LIMIT_WRITE", "0"),
                ("SERVICE_RATE_LIMIT_CONTEXT", "0"),
                ("SERVICE_EMBEDDER", "none"),
                ("RUST_LOG", "warn"),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let url = lines
            .find_map(|line| line.ok()?.strip_prefix("cairn listening on ").map(str::to_owned));
        let Some(url) = url else {
            let _ = child.kill();
            bail!("the daemon exited before it listened");
        };
        // Keep reading, so a later line never meets a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Daemon { child, url })
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}
