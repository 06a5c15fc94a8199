//! A throwaway PostgreSQL server for tests (`initdb` into a temporary directory, started with
//! `pg_ctl` on a free port, run as the `postgres` user when we are root), stopped and removed
//! when dropped. Missing binaries are an error that says how to install them, never a skip.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// A PostgreSQL server of its own in a temporary directory, for one test.
///
/// Started with settings for tests (`fsync=off`, `synchronous_commit=off`): the tests kill
/// daemons and drop connections, never the server itself, so durability of the server is not
/// what they check.
#[derive(Debug)]
pub struct TestCluster {
    dir: tempfile::TempDir,
    port: u16,
    bin: PathBuf,
    /// The user the server runs as when we are root (initdb and postgres refuse root).
    run_as: Option<&'static str>,
    databases: AtomicU32,
    /// Server settings given at start (`-c name=value`).
    settings: String,
}

/// Settings for tests: fast, not durable against a crash of the server's machine.
const FAST: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";
/// PostgreSQL's own defaults: every commit flushed to disk before it is acknowledged.
const DURABLE: &str = "-c fsync=on -c synchronous_commit=on -c full_page_writes=on";

/// Where PostgreSQL's server binaries are: `CAIRN_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`; the error says how to install them.
pub fn server_binaries() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("CAIRN_PG_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    if let Ok(output) = Command::new("pg_config").arg("--bindir").output()
        && output.status.success()
    {
        let bin = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if bin.join("initdb").exists() {
            return Ok(bin);
        }
    }
    Err("PostgreSQL's server binaries (initdb, pg_ctl, postgres) were not found in \
         /usr/lib/postgresql/*/bin nor by pg_config: install them \
         (`apt-get install -y postgresql` on Debian/Ubuntu) or set CAIRN_PG_BIN to their \
         directory"
        .to_owned())
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|metadata| metadata.uid() == 0).unwrap_or(false)
}

fn describe(output: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

impl TestCluster {
    /// Creates and starts a server with settings for tests (`fsync=off`,
    /// `synchronous_commit=off`). Panics, saying why, when PostgreSQL is not installed or
    /// does not start.
    pub fn start() -> TestCluster {
        TestCluster::start_with(FAST, false)
    }

    /// Like [`TestCluster::start`], with TLS on (`ssl=on`): a fresh CA signs the server's
    /// certificate for `127.0.0.1` and `localhost`; [`TestCluster::ca_file`] is the CA's PEM.
    /// Plain connections are still accepted. Needs the `openssl` command.
    pub fn start_tls() -> TestCluster {
        TestCluster::start_with(FAST, true)
    }

    /// The PEM of the CA that signed the server's certificate (of [`TestCluster::start_tls`]).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("tls/ca.pem")
    }

    /// Creates and starts a server with PostgreSQL's durable defaults (`fsync=on`,
    /// `synchronous_commit=on`), for measurements an operator would see.
    pub fn start_durable() -> TestCluster {
        TestCluster::start_with(DURABLE, false)
    }

    fn start_with(settings: &str, tls: bool) -> TestCluster {
        let bin = server_binaries().unwrap_or_else(|message| panic!("{message}"));
        let run_as = is_root().then_some("postgres");
        let dir = tempfile::Builder::new().prefix("cairn-pg-").tempdir().expect("a temporary dir");
        if let Some(user) = run_as {
            let chown = Command::new("chown")
                .arg(format!("{user}:{user}"))
                .arg(dir.path())
                .output()
                .expect("run chown");
            assert!(chown.status.success(), "chown of the cluster dir: {}", describe(&chown));
        }
        std::fs::create_dir(dir.path().join("sock")).expect("the socket dir");
        if let Some(user) = run_as {
            Command::new("chown")
                .arg(format!("{user}:{user}"))
                .arg(dir.path().join("sock"))
                .output()
                .expect("run chown");
        }
        let mut settings = settings.to_owned();
        if tls {
            let (certificate, key) = make_certificates(&dir.path().join("tls"), run_as);
            settings.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                certificate.display(),
                key.display()
            ));
        }
        let mut cluster =
            TestCluster { dir, port: 0, bin, run_as, databases: AtomicU32::new(0), settings };
        let data = cluster.data_dir();
        let initdb = cluster
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8"])
            .args(["--no-sync", "--no-instructions"])
            .output()
            .expect("run initdb");
        assert!(initdb.status.success(), "initdb failed: {}", describe(&initdb));
        let mut last = String::new();
        for _ in 0..3 {
            cluster.port = crate::free_port();
            let started = cluster.pg_ctl_start();
            if started.status.success() {
                return cluster;
            }
            last = describe(&started);
        }
        panic!("PostgreSQL did not start: {last}\nlog: {}", cluster.log());
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// A command running one of PostgreSQL's binaries, as the server's user.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn pg_ctl_start(&self) -> Output {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 {} -c max_connections=300 \
             -c shared_buffers=128MB",
            self.port,
            self.socket_dir().display(),
            self.settings
        );
        self.command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-t", "30", "start", "-o", &options])
            .output()
            .expect("run pg_ctl")
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` as the superuser `postgres` (trusted, no password).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A running cluster and a fresh database on it (its URL): the usual start of a test.
    pub fn with_database() -> (TestCluster, String) {
        let cluster = TestCluster::start();
        let url = cluster.create_database();
        (cluster, url)
    }

    /// Creates a fresh, empty database and returns its URL.
    pub fn create_database(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let name = format!("t_{n}");
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs `sql` with psql on `database` and returns its unaligned, tuples-only output.
    /// Panics when it fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", database, "-c", sql])
            .output()
            .expect("run psql");
        assert!(output.status.success(), "psql `{sql}` failed: {}", describe(&output));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Ends every session whose `application_name` is LIKE `pattern` (as a server restart
    /// or a network cut would); returns how many there were.
    pub fn terminate_sessions(&self, pattern: &str) -> u32 {
        let sql = format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name LIKE '{}' AND pid <> pg_backend_pid()",
            pattern.replace('\'', "''")
        );
        self.psql("postgres", &sql).parse().expect("a count")
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every session ends.
    pub fn restart(&self) {
        let output = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "-t", "30", "stop"])
            .output()
            .expect("run pg_ctl stop");
        assert!(output.status.success(), "pg_ctl stop: {}", describe(&output));
        let started = self.pg_ctl_start();
        assert!(started.status.success(), "pg_ctl start: {}", describe(&started));
    }

    /// The directory of PostgreSQL's binaries in use.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }
}

/// A CA and a server certificate it signed for `127.0.0.1` and `localhost`, in `dir`; the
/// server's certificate and key (readable by `run_as` only).
fn make_certificates(dir: &Path, run_as: Option<&str>) -> (PathBuf, PathBuf) {
    std::fs::create_dir(dir).expect("the TLS dir");
    let extensions = dir.join("server.ext");
    std::fs::write(
        &extensions,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write the extensions");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let steps: [Vec<&str>; 3] = [
        [&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"]]
            .concat()
            .into_iter()
            .chain(["-subj", "/CN=cairn test CA", "-addext", "basicConstraints=critical,CA:true"])
            .chain(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .collect(),
        [&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr"]]
            .concat()
            .into_iter()
            .chain(["-subj", "/CN=127.0.0.1"])
            .collect(),
        vec![
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for step in steps {
        let output = Command::new("openssl")
            .args(&step)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|error| panic!("TLS tests need the `openssl` command: {error}"));
        assert!(output.status.success(), "openssl {step:?}: {}", describe(&output));
    }
    let key = dir.join("server.key");
    if let Some(user) = run_as {
        Command::new("chown").arg(format!("{user}:{user}")).arg(&key).output().expect("chown");
    }
    Command::new("chmod").arg("600").arg(&key).output().expect("chmod");
    (dir.join("server.pem"), key)
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

#[cfg(test)]
mod tests {
    use super::TestCluster;

    #[test]
    fn a_cluster_starts_answers_and_is_removed() {
        let (cluster, url) = TestCluster::with_database();
        let database = url.rsplit('/').next().unwrap().to_owned();
        assert_eq!(cluster.psql(&database, "SELECT 40 + 2"), "42");
        let dir = cluster.dir.path().to_owned();
        drop(cluster);
        assert!(!dir.exists(), "the cluster's directory is removed");
    }
}
