//! Embeds every file under `assets/` (the console as `npm run build` in `clients/console`
//! writes it, committed): generates a table of paths, `include_bytes!` and ETags, so a
//! rebuilt console needs no change here and a cargo build never needs Node.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let relative = file.strip_prefix(&root).expect("under assets");
        if relative == Path::new(STYLE_HASHES) {
            continue; // read by the crate for its policy, not served
        }
        let path: Vec<String> =
            relative.components().map(|part| part.as_os_str().to_string_lossy().into()).collect();
        let bytes = std::fs::read(file).expect("an asset can be read");
        writeln!(
            table,
            "    (\"/{}\", include_bytes!({:?}), \"\\\"{:016x}\\\"\"),",
            path.join("/"),
            file.display().to_string(),
            fnv1a(&bytes)
        )
        .expect("writing to a string");
    }
    table.push(']');
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("assets.rs"), table).expect("OUT_DIR is writable");
}

/// The hashes of the inline styles the console may use (written by its build).
const STYLE_HASHES: &str = "csp-style-hashes.txt";

fn collect(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// The ETag: FNV-1a over the bytes (a change detector, not a security measure).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
