//! Tidy checks: every crate is in docs/architecture.md, every Rust file opens with a `//!`
//! line, dependencies point down the layers, and the embeddable runtime stays small.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// Each crate's layer; a crate may depend only on crates in lower layers.
/// Tools (`cli`, `bench`, `xtask`) sit on top.
const LAYERS: &[(&str, u8)] = &[
    ("cairn-types", 0),
    ("cairn-console", 0),
    ("cairn-test-support", 0),
    ("cairn-http", 1),
    ("cairn-store", 1),
    ("cairn-runtime", 2),
    ("cairn-client", 2),
    ("cairn-store-sqlite", 2),
    ("cairn-store-postgres", 2),
    ("cairn-memory", 2),
    ("cairn-api", 3),
    ("cairn-embed", 3),
    ("cairn-agents", 3),
    ("cairn-mcp", 3),
    ("cairn-server", 5),
    ("cairn-cli", 6),
    ("cairn-bench", 6),
];

/// Crates whose Cairn dependencies are limited further than by layer: the runtime is
/// embedded in other servers and must pull no storage, engine or API; the client is the
/// wire types and HTTP.
const CAIRN_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("cairn-types", &[]),
    ("cairn-console", &[]),
    ("cairn-test-support", &[]),
    ("cairn-http", &["cairn-types"]),
    ("cairn-runtime", &["cairn-types", "cairn-http"]),
    ("cairn-client", &["cairn-types"]),
    ("cairn-mcp", &["cairn-client"]),
];

/// The most crates `cargo tree -p cairn-runtime -e normal` may list (default features).
const RUNTIME_CRATE_BUDGET: usize = 150;

/// External crates only some crates may know.
const CONFINED: &[(&str, &[&str])] = &[
    ("rusqlite", &["cairn-store-sqlite"]),
    ("r2d2_sqlite", &["cairn-store-sqlite"]),
    ("tokio-postgres", &["cairn-store-postgres"]),
    ("deadpool-postgres", &["cairn-store-postgres"]),
    ("postgres-types", &["cairn-store-postgres"]),
    ("hyper", &["cairn-server", "cairn-cli", "cairn-bench", "cairn-client", "cairn-test-support"]),
    (
        "hyper-util",
        &["cairn-server", "cairn-cli", "cairn-bench", "cairn-client", "cairn-test-support"],
    ),
    // Tests' scaffolding: a dev-dependency everywhere else, never in a release build.
    ("cairn-test-support", &["cairn-bench"]),
    ("ureq", &["cairn-agents", "cairn-embed"]),
    ("candle-core", &["cairn-embed"]),
    ("jsonwebtoken", &["cairn-api"]),
    ("rmcp", &["cairn-mcp"]),
];

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    let architecture = fs::read_to_string(root.join("docs/architecture.md")).unwrap_or_default();

    for entry in fs::read_dir(root.join("crates"))? {
        let directory = entry?.path();
        let manifest = fs::read_to_string(directory.join("Cargo.toml"))?;
        let name = package_name(&manifest).unwrap_or_default();
        let Some(layer) = layer_of(&name) else {
            problems.push(format!("{name}: not in xtask's layer table (xtask/src/tidy.rs)"));
            continue;
        };
        if !architecture.contains(&format!("`{name}`")) {
            problems.push(format!("{name}: not described in docs/architecture.md"));
        }
        for dependency in dependencies(&manifest) {
            if layer_of(&dependency).is_some_and(|dependency_layer| dependency_layer >= layer) {
                problems.push(format!("{name} depends on {dependency}, which is not below it"));
            }
            let limited = CAIRN_DEPENDENCIES.iter().find(|(crate_name, _)| *crate_name == name);
            if let Some((_, allowed)) = limited
                && dependency.starts_with("cairn-")
                && !allowed.contains(&dependency.as_str())
            {
                problems
                    .push(format!("{name} depends on {dependency}; it may know only {allowed:?}"));
            }
            let confined = CONFINED.iter().find(|(confined, _)| *confined == dependency);
            if let Some((_, allowed)) =
                confined.filter(|(_, allowed)| !allowed.contains(&name.as_str()))
            {
                problems.push(format!(
                    "{name} depends on {dependency}, which only {allowed:?} may know"
                ));
            }
        }
    }

    let mut files = Vec::new();
    for directory in ["crates", "xtask", "tests"] {
        rust_files(&root.join(directory), &mut files)?;
    }
    for file in files {
        let text = fs::read_to_string(&file)?;
        if !text.trim_start().starts_with("//!") {
            problems.push(format!(
                "{}: does not start with a `//!` line saying what it is for",
                file.display()
            ));
        }
    }

    match runtime_crate_count(root) {
        Ok(count) if count > RUNTIME_CRATE_BUDGET => problems.push(format!(
            "cairn-runtime pulls {count} crates (`cargo tree -p cairn-runtime -e normal`); \
             the budget is {RUNTIME_CRATE_BUDGET}"
        )),
        Ok(count) => {
            println!("tidy: cairn-runtime pulls {count} crates (budget {RUNTIME_CRATE_BUDGET})")
        }
        Err(error) => problems.push(format!("cannot count cairn-runtime's crates: {error}")),
    }

    if problems.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    bail!("tidy found problems:\n  {}", problems.join("\n  "))
}

/// The unique crates (name and version) in cairn-runtime's normal dependency tree, itself
/// included.
fn runtime_crate_count(root: &Path) -> anyhow::Result<usize> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .args(["tree", "--locked", "-p", "cairn-runtime", "-e", "normal", "--prefix", "none"])
        .arg("--format={p}")
        .current_dir(root)
        .output()?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let text = String::from_utf8(output.stdout)?;
    let unique: std::collections::BTreeSet<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect();
    Ok(unique.len())
}

fn layer_of(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(crate_name, _)| *crate_name == name).map(|(_, layer)| *layer)
}

fn package_name(manifest: &str) -> Option<String> {
    let package = section(manifest, "[package]");
    package.lines().find_map(|line| {
        let value = line.trim().strip_prefix("name")?.trim_start().strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}

/// The names under `[dependencies]` (not dev- or build-dependencies).
fn dependencies(manifest: &str) -> Vec<String> {
    section(manifest, "[dependencies]")
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            let name = line.split(['=', '.', ' ']).next()?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// The lines of a TOML section, up to the next header.
fn section<'a>(manifest: &'a str, header: &str) -> &'a str {
    let Some(start) =
        manifest.find(&format!("\n{header}")).or(manifest.starts_with(header).then_some(0))
    else {
        return "";
    };
    let body = &manifest[start + header.len() + 1..];
    let end = body.find("\n[").unwrap_or(body.len());
    &body[..end]
}

fn rust_files(directory: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !directory.exists() {
        return Ok(());
    }
    for entry in fs::read_dir(directory)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, files)?;
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    Ok(())
}
