//! Tidy checks: every crate is in docs/architecture.md, every Rust file opens with a `//!`
//! line, and dependencies point down the layers.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// Each crate's layer; a crate may depend only on crates in lower layers.
/// Tools (`cli`, `bench`, `xtask`) sit on top.
const LAYERS: &[(&str, u8)] = &[
    ("cairn-types", 0),
    ("cairn-store", 1),
    ("cairn-store-sqlite", 2),
    ("cairn-memory", 2),
    ("cairn-api", 3),
    ("cairn-embed", 3),
    ("cairn-runtime", 4),
    ("cairn-server", 5),
    ("cairn-client", 5),
    ("cairn-cli", 6),
    ("cairn-bench", 6),
];

/// External crates only some crates may know.
const CONFINED: &[(&str, &[&str])] = &[
    ("rusqlite", &["cairn-store-sqlite"]),
    ("r2d2_sqlite", &["cairn-store-sqlite"]),
    ("hyper", &["cairn-server", "cairn-cli", "cairn-bench", "cairn-client"]),
    ("hyper-util", &["cairn-server", "cairn-cli", "cairn-bench", "cairn-client"]),
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

    if problems.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    bail!("tidy found problems:\n  {}", problems.join("\n  "))
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
