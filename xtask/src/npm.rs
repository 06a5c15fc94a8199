//! The browser packages in CI: one npm workspace at `clients/` holding `clients/typescript`
//! (`@cairn/client`), `clients/react` (`@cairn/react`, which depends on the client by
//! version) and `clients/console` (the web console): `npm ci` once at the workspace's root,
//! then `npm run build` and `npm test` in each, in that order since each builds on the one
//! before it, against the debug `cairn` binary the workspace tests built (`CAIRN_BIN`).
//! Then the console's drift check: its
//! build writes `crates/console/assets`, which is committed (the daemon embeds it, so a
//! cargo build needs no Node), and must not differ from what was committed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// The packages, in build order.
const PACKAGES: &[&str] = &["clients/typescript", "clients/react", "clients/console"];

/// Where the console's build writes the files the daemon embeds.
pub(crate) const CONSOLE_ASSETS: &str = "crates/console/assets";

/// The npm workspace's root.
const WORKSPACE: &str = "clients";

/// `npm ci` at the workspace's root, `npm run build` and `npm test` in every package, then
/// the drift check.
pub(crate) fn ci(root: &Path) -> anyhow::Result<()> {
    let cairn = build_cairn(root)?;
    npm(&root.join(WORKSPACE), &["ci", "--no-audit", "--no-fund"], &cairn)?;
    for package in PACKAGES {
        let directory = root.join(package);
        if !directory.join("package.json").exists() {
            bail!("{package}/package.json is missing");
        }
        npm(&directory, &["run", "build"], &cairn)?;
        npm(&directory, &["test"], &cairn)?;
    }
    console_drift(root)
}

/// Rebuilds the console's committed assets (`cargo xtask console`).
pub(crate) fn console(root: &Path) -> anyhow::Result<()> {
    let cairn = PathBuf::new();
    npm(&root.join(WORKSPACE), &["ci", "--no-audit", "--no-fund"], &cairn)?;
    for package in PACKAGES {
        npm(&root.join(package), &["run", "build"], &cairn)?;
    }
    println!("{CONSOLE_ASSETS} rebuilt; commit it with the console's sources");
    Ok(())
}

/// Fails when the console's build output differs from the committed assets, or added files.
fn console_drift(root: &Path) -> anyhow::Result<()> {
    eprintln!("$ git diff --exit-code -- {CONSOLE_ASSETS}");
    let diff = Command::new("git")
        .args(["diff", "--exit-code", "--stat", "--", CONSOLE_ASSETS])
        .current_dir(root)
        .status()
        .context("cannot run git")?;
    let untracked = Command::new("git")
        .args(["ls-files", "--others", "--exclude-standard", "--", CONSOLE_ASSETS])
        .current_dir(root)
        .output()
        .context("cannot run git")?;
    let untracked = String::from_utf8_lossy(&untracked.stdout).trim().to_owned();
    if !diff.success() || !untracked.is_empty() {
        bail!(
            "{CONSOLE_ASSETS} is out of date with clients/console{}: run `cargo xtask console` \
             and commit it",
            if untracked.is_empty() { String::new() } else { format!(" (new: {untracked})") }
        );
    }
    Ok(())
}

fn npm(directory: &Path, args: &[&str], cairn: &Path) -> anyhow::Result<()> {
    eprintln!("$ (cd {} && npm {})", directory.display(), args.join(" "));
    let mut command = Command::new("npm");
    command.args(args).current_dir(directory);
    if !cairn.as_os_str().is_empty() {
        command.env("CAIRN_BIN", cairn);
    }
    let status = command.status().context("cannot run npm: install Node.js 20.19+ with npm")?;
    if !status.success() {
        bail!("`npm {}` failed in {} ({status})", args.join(" "), directory.display());
    }
    Ok(())
}

/// The debug `cairn` binary, as the workspace tests build it (already built after them), in
/// `CARGO_TARGET_DIR` when that is set.
pub(crate) fn build_cairn(root: &Path) -> anyhow::Result<PathBuf> {
    crate::cargo(&["build", "--quiet", "-p", "cairn-cli", "--bin", "cairn"], &[])?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|target| if target.is_relative() { root.join(target) } else { target })
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("debug/cairn"))
}
