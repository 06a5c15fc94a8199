//! Tells the binary the git commit it is built from (`CAIRN_GIT_COMMIT`, empty outside a
//! git checkout), for health's `build` and `cairn --version`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=CAIRN_GIT_COMMIT={commit}");
    // Built again when HEAD moves: a commit, a checkout.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{reference}");
        }
        let packed = format!("{dir}/packed-refs");
        if std::path::Path::new(&packed).exists() {
            println!("cargo:rerun-if-changed={packed}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
