//! The checks that run outside clients from PyPI against the real daemon, from a
//! virtualenv under `target/python` (nothing is kept outside the clone; the pinned versions
//! are in `xtask/requirements.txt`):
//!
//! - `cargo xtask schemathesis`: schemathesis over the whole OpenAPI document the daemon
//!   serves, the memory API and the conversation runtime alike. The daemon runs from a fresh
//!   data directory with rate limits off (429 is documented, but it would stop the fuzzer
//!   from reaching anything). Checks: no 5xx, and every status, content type, header and
//!   body as documented.
//! - `cargo xtask mcp`: the official MCP Python SDK against `cairn mcp` (stdio) and the
//!   daemon's `/mcp` (streamable HTTP): `tests/mcp/check.py`.
//! - `cargo xtask python`: the Python client (`clients/python`) as a user gets it: a fresh
//!   virtualenv under `target/python-client`, `pip install ./clients/python`, `mypy --strict`
//!   on the package and its examples, and its pytest suite against the real daemon.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context as _, bail};

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_headers_conformance,response_schema_conformance";

pub(crate) fn schemathesis(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let st = install(root)?.join("bin/st");
    let cairn = crate::npm::build_cairn(root)?;
    let data = root.join("target/python/data");
    let _ = std::fs::remove_dir_all(&data);
    let mut daemon = Daemon::start(&cairn, &data)?;
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

/// `tests/mcp/check.py` with the official MCP Python SDK.
pub(crate) fn mcp(root: &Path) -> anyhow::Result<()> {
    let python = install(root)?.join("bin/python");
    let cairn = crate::npm::build_cairn(root)?;
    eprintln!("$ python tests/mcp/check.py {}", cairn.display());
    let status = Command::new(python).arg(root.join("tests/mcp/check.py")).arg(&cairn).status()?;
    if !status.success() {
        bail!("the MCP check failed ({status})");
    }
    Ok(())
}

/// `clients/python` installed into a fresh virtualenv, type-checked and tested.
pub(crate) fn client(root: &Path) -> anyhow::Result<()> {
    let package = root.join("clients/python");
    let venv = root.join("target/python-client");
    let _ = std::fs::remove_dir_all(&venv);
    let cairn = crate::npm::build_cairn(root)?;
    let step = |program: &Path, args: &[&str], what: &str| -> anyhow::Result<()> {
        eprintln!("$ {} {}", program.display(), args.join(" "));
        let status = Command::new(program)
            .args(args)
            .current_dir(&package)
            .env("CAIRN_BIN", &cairn)
            .status()
            .with_context(|| format!("cannot run {}", program.display()))?;
        if !status.success() {
            bail!("{what} failed ({status})");
        }
        Ok(())
    };
    step(Path::new("python3"), &["-m", "venv", &venv.to_string_lossy()], "python3 -m venv")?;
    let bin = venv.join("bin");
    let pip =
        ["install", "--quiet", "--disable-pip-version-check", ".", "-r", "requirements-test.txt"];
    step(&bin.join("pip"), &pip, "pip install ./clients/python")?;
    step(&bin.join("mypy"), &["--strict", "src/cairn_client", "examples"], "mypy --strict")?;
    step(&bin.join("pytest"), &["-q"], "the Python client's tests")
}

/// The virtualenv with `xtask/requirements.txt` installed, made or brought up to date.
fn install(root: &Path) -> anyhow::Result<PathBuf> {
    let venv = root.join("target/python");
    let requirements = root.join("xtask/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements)?;
    let marker = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&marker).is_ok_and(|installed| installed == wanted) {
        return Ok(venv);
    }
    if !venv.join("bin/pip").exists() {
        eprintln!("$ python3 -m venv {}", venv.display());
        let created = Command::new("python3").args(["-m", "venv"]).arg(&venv).status();
        if !created.is_ok_and(|status| status.success()) {
            bail!("cannot create a Python virtualenv at {} (python3 -m venv)", venv.display());
        }
    }
    eprintln!("$ pip install -r xtask/requirements.txt");
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .status()?;
    if !pip.success() {
        bail!("cannot install xtask/requirements.txt from PyPI");
    }
    std::fs::write(&marker, wanted)?;
    Ok(venv)
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
