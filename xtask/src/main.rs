//! Cairn's development tasks (the cargo-xtask pattern): `cargo xtask <task>`, listed by `help`.

mod npm;
mod python;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

const HELP: &str = "\
cargo xtask <task>

tasks:
  ci                 everything CI checks: fmt, clippy -D warnings, tests, OpenAPI drift, tidy,
                     the browser packages (npm ci, build, test) and the console's drift,
                     the MCP SDK check, schemathesis
  npm                the browser packages alone: clients/typescript, clients/react and
                     clients/console (npm ci, build, test in a real Chromium), console drift
  console            rebuild the console's committed assets (crates/console/assets)
  openapi [--check]  regenerate docs/openapi.json from the code (--check: fail if it drifted)
  bench [ARGS]       release-build and run the benchmarks against DESIGN.md's budgets
                     (ARGS go to cairn-bench, e.g. --quick)
  eval --data FILE   retrieval quality (recall@5/10, MRR) on LoCoMo-format conversations,
                     full text, semantic and fused (options go to `cairn-bench eval`;
                     --http: also over HTTP against release daemons, with latency and RSS;
                     --conversations 1-3: tune on some, check on the others); a LongMemEval
                     file (longmemeval_s.json) gives session recall@5 and turn recall@10
  tidy               layering, docs and file-header checks, the runtime's crate budget
  schemathesis [ARGS] fuzz the real daemon over its whole OpenAPI document (schemathesis
                     from PyPI, into target/python; ARGS go to `st run`)
  mcp                the official MCP Python SDK against `cairn mcp` and the daemon's /mcp
  fuzz [CASES]       the property tests of every parser of outside input (bodies, queries,
                     the channel-event envelope, routes, Last-Event-ID, the guard's shell
                     parser), CASES each (default 20000; `cargo test` runs 256)
";

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let task = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    match task.as_str() {
        "ci" => ci(),
        "openapi" => openapi(rest.iter().any(|arg| arg == "--check")),
        "bench" => bench(&rest),
        "eval" => {
            if rest.iter().any(|arg| arg == "--http") {
                // The HTTP eval runs the release daemon beside the eval's binary.
                cargo(&["build", "--release", "-p", "cairn-cli"], &[])?;
            }
            let mut command =
                vec!["run", "--release", "--quiet", "-p", "cairn-bench", "--", "eval"];
            command.extend(rest.iter().map(String::as_str));
            cargo(&command, &[])
        }
        "tidy" => tidy::run(&root),
        "npm" => npm::ci(&root),
        "console" => npm::console(&root),
        "schemathesis" => python::schemathesis(&root, &rest),
        "mcp" => python::mcp(&root),
        "python" => python::client(&root),
        "fuzz" => {
            let cases = rest.first().map_or("20000", String::as_str);
            let packages = ["-p", "cairn-http", "-p", "cairn-runtime", "-p", "cairn-memory"];
            let mut command = vec!["test", "--release", "--lib"];
            command.extend(packages);
            command.push("fuzz_");
            cargo(&command, &[("PROPTEST_CASES", cases)])
        }
        "" | "help" | "--help" | "-h" => {
            print!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{HELP}"),
    }
}

fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"], &[])
        .context("formatting differs: run `cargo fmt --all`")?;
    cargo(&["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"], &[])?;
    cargo(&["test", "--workspace", "--locked"], &[])?;
    openapi(true)?;
    tidy::run(&workspace_root())?;
    npm::ci(&workspace_root())?;
    python::mcp(&workspace_root())?;
    python::client(&workspace_root())?;
    python::schemathesis(&workspace_root(), &[])?;
    println!("xtask ci: all checks passed");
    Ok(())
}

/// The committed document is checked (or rewritten) by a test in cairn-server, so the check
/// and the generator can never disagree.
fn openapi(check: bool) -> anyhow::Result<()> {
    let update: &[(&str, &str)] = if check { &[] } else { &[("UPDATE_OPENAPI", "1")] };
    cargo(&["test", "--quiet", "-p", "cairn-server", "--lib", "openapi::"], update)
        .context("docs/openapi.json is out of date: run `cargo xtask openapi` and commit it")?;
    if !check {
        println!("docs/openapi.json regenerated");
    }
    Ok(())
}

fn bench(args: &[String]) -> anyhow::Result<()> {
    cargo(&["build", "--release", "-p", "cairn-cli", "-p", "cairn-bench"], &[])?;
    let mut command: Vec<&str> = vec!["run", "--release", "--quiet", "-p", "cairn-bench", "--"];
    command.extend(args.iter().map(String::as_str));
    cargo(&command, &[])
}

pub(crate) fn cargo(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(cargo).args(args).envs(env.iter().copied()).status()?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace root")
        .to_owned()
}
