//! Authentication, roles and rate limits: the production profile, API keys, JWTs.

use std::time::{SystemTime, UNIX_EPOCH};

use cairn_test_support::column;
use hyper::Method;
use serde_json::{Value, json};

use std::process::Command;

use crate::util::{Body, Daemon, run_cairn};

/// Creates a key with `cairn keys create` and returns (id, secret) from its output.
fn create_key(data_dir: &std::path::Path, role: &str) -> (String, String) {
    let output = run_cairn(data_dir, "keys", &["create", "--role", role], &[]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let secret = stdout.lines().last().unwrap().to_owned();
    assert!(secret.starts_with("cairn_"), "the key is alone on the last line: {stdout}");
    let id = stdout.split_whitespace().find(|word| word.starts_with("key_")).unwrap().to_owned();
    (id, secret)
}

async fn post_memory(daemon: &Daemon, headers: &[(&str, &str)]) -> crate::util::Reply {
    let body = Body::Json(json!({"content": "note", "scope": "user"}));
    daemon.request_with(Method::POST, "/api/memories", body, headers).await
}

#[tokio::test]
async fn production_refuses_to_start_without_credentials() {
    let directory = tempfile::tempdir().unwrap();
    let output =
        run_cairn(directory.path(), "serve", &["--port", "0", "--profile", "production"], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("production profile needs credentials"), "{stderr}");
    assert!(stderr.contains("cairn keys create"), "the message says what to do: {stderr}");

    let solo_elsewhere =
        run_cairn(directory.path(), "serve", &["--port", "0", "--host", "0.0.0.0"], &[]);
    assert!(!solo_elsewhere.status.success());
    assert!(String::from_utf8_lossy(&solo_elsewhere.stderr).contains("loopback"));
}

#[tokio::test]
async fn api_keys_authenticate_and_roles_authorize() {
    let directory = tempfile::tempdir().unwrap();
    let (_, admin) = create_key(directory.path(), "admin");
    let (read_id, read) = create_key(directory.path(), "read");
    let daemon = Daemon::start_in_with(directory.path(), &["--profile", "production"], &[]);

    let anonymous = daemon.get("/api/health").await;
    assert!(anonymous.assert_error(401, "UNAUTHORIZED").contains("credentials are required"));
    let wrong = daemon
        .request_with(Method::GET, "/api/health", Body::None, &[("x-api-key", "cairn_nope")])
        .await;
    wrong.assert_error(401, "UNAUTHORIZED");

    let reads = daemon
        .request_with(Method::GET, "/api/memories", Body::None, &[("x-api-key", &read)])
        .await;
    assert_eq!(reads.status, 200);
    let refused = post_memory(&daemon, &[("x-api-key", &read)]).await;
    assert!(refused.assert_error(403, "FORBIDDEN").contains("`write` role"));
    assert_eq!(post_memory(&daemon, &[("x-api-key", &admin)]).await.status, 201);

    // Keys created and revoked while the daemon runs take effect at once.
    let (_, writer) = create_key(directory.path(), "write");
    assert_eq!(post_memory(&daemon, &[("x-api-key", &writer)]).await.status, 201);
    let connector = Body::Json(json!({"kind": "folder", "path": directory.path()}));
    let admin_only = daemon
        .request_with(Method::POST, "/api/connectors", connector, &[("x-api-key", &writer)])
        .await;
    assert!(admin_only.assert_error(403, "FORBIDDEN").contains("`admin` role"));
    let audit = daemon
        .request_with(Method::GET, "/api/governance/audit", Body::None, &[("x-api-key", &writer)])
        .await;
    audit.assert_error(403, "FORBIDDEN");
    let by_admin = daemon
        .request_with(Method::GET, "/api/governance/audit", Body::None, &[("x-api-key", &admin)])
        .await;
    assert_eq!(by_admin.status, 200);
    let actors: Vec<&str> = column(&by_admin.body["entries"], "actor", Value::as_str);
    assert!(
        actors.iter().all(|actor| actor.starts_with("key:key_")),
        "the audit log names the key: {actors:?}"
    );
    let conflicts = daemon
        .request_with(Method::GET, "/api/conflicts", Body::None, &[("x-api-key", &read)])
        .await;
    assert_eq!(conflicts.status, 200, "readers see conflicts");
    let revoked = run_cairn(directory.path(), "keys", &["revoke", &read_id], &[]);
    assert!(revoked.status.success());
    let after = daemon
        .request_with(Method::GET, "/api/memories", Body::None, &[("x-api-key", &read)])
        .await;
    after.assert_error(401, "UNAUTHORIZED");

    let listed = run_cairn(directory.path(), "keys", &["list"], &[]);
    let listing = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(listing.lines().count(), 3);
    assert!(listing.contains(&read_id) && listing.contains("revoked"));
    assert!(!listing.contains(&read[12..]), "lists never show the secret");
    let count =
        daemon.request_with(Method::GET, "/api/health", Body::None, &[("x-api-key", &admin)]).await;
    assert_eq!(count.body["memoryCount"], 2, "refused requests changed nothing");
}

fn token(secret: &str, claims: serde_json::Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), &claims, &key)
        .unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn bearer_tokens_are_verified() {
    let secret = "a-test-secret-that-is-long-enough-for-hs256";
    let daemon =
        Daemon::start_with(&["--profile", "production"], &[("SERVICE_JWT_SECRET", secret)]);
    let bearer = |token: String| format!("Bearer {token}");

    let writer =
        bearer(token(secret, json!({"sub": "ci-bot", "role": "write", "exp": now() + 600})));
    assert_eq!(post_memory(&daemon, &[("authorization", &writer)]).await.status, 201);
    let reader =
        bearer(token(secret, json!({"sub": "dashboard", "role": "read", "exp": now() + 600})));
    post_memory(&daemon, &[("authorization", &reader)]).await.assert_error(403, "FORBIDDEN");

    let expired = bearer(token(secret, json!({"sub": "x", "role": "admin", "exp": now() - 3600})));
    let message = post_memory(&daemon, &[("authorization", &expired)])
        .await
        .assert_error(401, "UNAUTHORIZED")
        .to_owned();
    assert!(message.to_lowercase().contains("expired"), "{message}");
    assert!(!message.contains("ExpiredSignature"), "in the caller's terms: {message}");
    let forged = bearer(token(
        "another-secret-that-is-also-quite-long-yes",
        json!({"sub": "x", "role": "admin", "exp": now() + 600}),
    ));
    let forged = post_memory(&daemon, &[("authorization", &forged)]).await;
    assert!(forged.assert_error(401, "UNAUTHORIZED").contains("not signed with this daemon's key"));
    let no_role = bearer(token(secret, json!({"sub": "x", "exp": now() + 600})));
    post_memory(&daemon, &[("authorization", &no_role)]).await.assert_error(401, "UNAUTHORIZED");
    let not_yet = bearer(token(
        secret,
        json!({"sub": "x", "role": "admin", "exp": now() + 7200, "nbf": now() + 3600}),
    ));
    let message = post_memory(&daemon, &[("authorization", &not_yet)])
        .await
        .assert_error(401, "UNAUTHORIZED")
        .to_owned();
    assert!(message.contains("not valid yet"), "`nbf` is always enforced: {message}");
    let started = bearer(token(
        secret,
        json!({"sub": "x", "role": "write", "exp": now() + 600, "nbf": now() - 10}),
    ));
    assert_eq!(post_memory(&daemon, &[("authorization", &started)]).await.status, 201);
    let no_exp = bearer(token(secret, json!({"sub": "x", "role": "admin"})));
    post_memory(&daemon, &[("authorization", &no_exp)]).await.assert_error(401, "UNAUTHORIZED");
    let garbled = post_memory(&daemon, &[("authorization", "Bearer not.a.jwt")]).await;
    assert!(garbled.assert_error(401, "UNAUTHORIZED").contains("is not a JWT"), "{garbled:?}");
    post_memory(&daemon, &[("authorization", "Basic dXNlcjpwYXNz")])
        .await
        .assert_error(401, "UNAUTHORIZED");
}

/// An RSA key pair made with openssl: (private PEM path, public PEM path).
fn rsa_key_pair(directory: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let private = directory.join("private.pem");
    let public = directory.join("public.pem");
    let openssl = |args: &[&str]| {
        let status =
            std::process::Command::new("openssl").args(args).status().expect("openssl runs");
        assert!(status.success());
    };
    openssl(&[
        "genpkey",
        "-quiet",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        private.to_str().unwrap(),
    ]);
    openssl(&[
        "pkey",
        "-in",
        private.to_str().unwrap(),
        "-pubout",
        "-out",
        public.to_str().unwrap(),
    ]);
    (private, public)
}

fn rs256_token(private: &std::path::Path, claims: &serde_json::Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&std::fs::read(private).unwrap()).unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256), claims, &key)
        .unwrap()
}

#[tokio::test]
async fn rs256_tokens_are_verified_with_the_public_key() {
    let directory = tempfile::tempdir().unwrap();
    let (private, public) = rsa_key_pair(directory.path());
    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--jwt-public-key", public.to_str().unwrap()],
        &[],
    );
    let claims = json!({"sub": "deployer", "role": "admin", "exp": now() + 600});
    let signed = rs256_token(&private, &claims);
    let reply = post_memory(&daemon, &[("authorization", &format!("Bearer {signed}"))]).await;
    assert_eq!(reply.status, 201);
    let hs = token("whatever-secret-whatever-secret-whatever", claims);
    post_memory(&daemon, &[("authorization", &format!("Bearer {hs}"))])
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn tokens_the_identity_provider_minted_for_another_service_are_refused() {
    let directory = tempfile::tempdir().unwrap();
    let (private, public) = rsa_key_pair(directory.path());
    let public = public.to_str().unwrap();

    // A shared identity provider's key alone is not enough in production.
    for missing in [&["--jwt-audience", "cairn"][..], &["--jwt-issuer", "https://id.example"]] {
        let mut args = vec!["--port", "0", "--profile", "production", "--jwt-public-key", public];
        args.extend_from_slice(missing);
        let output = run_cairn(directory.path(), "serve", &args, &[]);
        assert!(!output.status.success(), "{missing:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("SERVICE_JWT_AUDIENCE and SERVICE_JWT_ISSUER"),
            "the message names what to set: {stderr}"
        );
    }
    let no_key =
        run_cairn(directory.path(), "serve", &["--port", "0", "--jwt-audience", "cairn"], &[]);
    assert!(!no_key.status.success());
    assert!(String::from_utf8_lossy(&no_key.stderr).contains("no JWT key"));

    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--profile", "production", "--jwt-public-key", public],
        &[
            ("SERVICE_JWT_AUDIENCE", "cairn,cairn-staging"),
            ("SERVICE_JWT_ISSUER", "https://id.example"),
        ],
    );
    let daemon = &daemon;
    let send = |claims: serde_json::Value| {
        let bearer = format!("Bearer {}", rs256_token(&private, &claims));
        async move { post_memory(daemon, &[("authorization", &bearer)]).await }
    };
    let base = json!({"sub": "deployer", "role": "admin", "exp": now() + 600, "iss": "https://id.example"});
    let with = |extra: serde_json::Value| {
        let mut claims = base.clone();
        claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        claims
    };

    assert_eq!(send(with(json!({"aud": "cairn"}))).await.status, 201);
    assert_eq!(
        send(with(json!({"aud": ["billing", "cairn-staging"]}))).await.status,
        201,
        "an audience list that names this service"
    );
    let other = send(with(json!({"aud": "billing"}))).await;
    let message = other.assert_error(401, "UNAUTHORIZED");
    assert!(message.contains("issued for another service"), "{message}");
    let no_audience = send(base.clone()).await;
    assert!(no_audience.assert_error(401, "UNAUTHORIZED").contains("no `aud` claim"));
    let foreign = send(with(json!({"aud": "cairn", "iss": "https://evil.example"}))).await;
    assert!(foreign.assert_error(401, "UNAUTHORIZED").contains("issuer"), "{foreign:?}");
    let mut no_issuer = with(json!({"aud": "cairn"}));
    no_issuer.as_object_mut().unwrap().remove("iss");
    assert!(send(no_issuer).await.assert_error(401, "UNAUTHORIZED").contains("no `iss` claim"));
    let early = send(with(json!({"aud": "cairn", "nbf": now() + 3600}))).await;
    assert!(early.assert_error(401, "UNAUTHORIZED").contains("not valid yet"));

    let admin_key = crate::util::create_key(directory.path(), "admin");
    let count = daemon
        .request_with(Method::GET, "/api/health", Body::None, &[("x-api-key", &admin_key)])
        .await;
    assert_eq!(count.body["memoryCount"], 2, "refused tokens changed nothing");
}

#[tokio::test]
async fn rate_limits_apply_per_principal_and_class() {
    let daemon = Daemon::start_with(
        &[],
        &[("SERVICE_RATE_LIMIT_WRITE", "3"), ("SERVICE_RATE_LIMIT_READ", "1000")],
    );
    for remaining in [2, 1, 0] {
        let reply = post_memory(&daemon, &[]).await;
        assert_eq!(reply.status, 201);
        assert_eq!(reply.headers["ratelimit-limit"], "3");
        assert_eq!(reply.headers["ratelimit-remaining"], remaining.to_string().as_str());
        assert!(reply.headers["ratelimit-reset"].to_str().unwrap().parse::<u64>().unwrap() <= 60);
    }
    let limited = post_memory(&daemon, &[]).await;
    limited.assert_error(429, "RATE_LIMITED");
    let retry_after: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=20).contains(&retry_after), "one write frees up every 20 s: {retry_after}");
    assert_eq!(limited.headers["ratelimit-remaining"], "0");

    let read = daemon.get("/api/memories").await;
    assert_eq!(read.status, 200, "reads have their own budget");
    assert_eq!(read.headers["ratelimit-limit"], "1000");
    assert_eq!(read.body["total"], 3, "the refused write changed nothing");
}

#[tokio::test]
async fn health_spends_no_rate_limit_so_a_probe_never_sees_429() {
    let daemon = Daemon::start_with(&[], &[("SERVICE_RATE_LIMIT_READ", "2")]);
    for _ in 0..2 {
        assert_eq!(daemon.get("/api/memories").await.status, 200);
    }
    daemon.get("/api/memories").await.assert_error(429, "RATE_LIMITED");
    for _ in 0..5 {
        let health = daemon.get("/api/health").await;
        assert_eq!(health.status, 200, "the read budget is spent, health still answers");
        assert!(!health.headers.contains_key("ratelimit-limit"), "{:?}", health.headers);
    }
}

/// The effective uid of this test process, from `/proc/self/status`.
fn own_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn solo_serves_its_owners_account_without_credentials_and_no_other() {
    use std::os::unix::process::CommandExt;

    let daemon = Daemon::start();
    // The owner: every client the tests run is the daemon's own account.
    assert_eq!(post_memory(&daemon, &[]).await.status, 201);
    let owner = daemon.run_client(&["search", "note"]);
    assert!(owner.status.success(), "{}", String::from_utf8_lossy(&owner.stderr));
    assert!(String::from_utf8_lossy(&owner.stdout).contains("note"));

    // Another local account, when this test may act as one (it runs as root).
    if own_uid() != Some(0) {
        eprintln!("not root: the other-account half of this test needs to switch uid");
        return;
    }
    let key = crate::util::create_key(daemon.data_dir(), "read");
    let as_nobody = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .env("CAIRN_URL", daemon.base_url())
            .env("HOME", "/")
            .uid(65534)
            .gid(65534)
            .output()
            .expect("cairn runs as nobody")
    };
    let refused = as_nobody(&["search", "note"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("FORBIDDEN"), "{stderr}");
    assert!(stderr.contains("another local account (uid 65534)"), "says why: {stderr}");
    assert!(stderr.contains("cairn keys create"), "says what to do: {stderr}");
    let with_key = as_nobody(&["search", "note", "--api-key", &key]);
    assert!(with_key.status.success(), "a key works from any account: {with_key:?}");
    let denied_write = as_nobody(&["memories", "add", "--scope", "user", "sneaky"]);
    assert!(!denied_write.status.success());
    assert_eq!(daemon.get("/api/health").await.body["memoryCount"], 1, "it changed nothing");
}

#[tokio::test]
async fn one_address_cannot_hold_every_connection() {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    let daemon = Daemon::start_with(&[], &[("SERVICE_MAX_CONNECTIONS_PER_ADDRESS", "4")]);
    let address = daemon.base_url().trim_start_matches("http://").to_owned();
    // Four connections that sent a request line and nothing more hold the address's slots.
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream.write_all(b"GET /api/health HTTP/1.1\r\n").unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut refused = TcpStream::connect(&address).unwrap();
    refused.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(refused, "GET /api/health HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
    let mut response = String::new();
    let mut reader = BufReader::new(&refused);
    while reader.read_line(&mut response).is_ok_and(|read| read > 0) {}
    assert!(response.starts_with("HTTP/1.1 429"), "{response}");
    assert!(response.contains("RATE_LIMITED"), "{response}");
    assert!(response.contains("at most 4 per client address"), "{response}");
    assert!(response.to_lowercase().contains("retry-after: 1"), "{response}");

    drop(held);
    // Closed connections give their slots back.
    let mut healthy = false;
    for _ in 0..50 {
        if daemon.get("/api/health").await.status == 200 {
            healthy = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(healthy, "the address may connect again");
}

#[tokio::test]
async fn a_key_created_with_an_expiry_stops_working_then_and_the_list_says_when_keys_were_used() {
    let dir = tempfile::tempdir().unwrap();
    let created = run_cairn(
        dir.path(),
        "keys",
        &["create", "--role", "write", "--name", "ci", "--expires-in", "3s"],
        &[],
    );
    assert!(created.status.success(), "{created:?}");
    let stdout = String::from_utf8(created.stdout).unwrap();
    assert!(stdout.contains(", until "), "{stdout}");
    let secret = stdout.lines().last().unwrap().to_owned();
    let (_, lasting) = create_key(dir.path(), "read");
    let daemon = Daemon::start_in_with(dir.path(), &["--profile", "production"], &[]);
    assert_eq!(post_memory(&daemon, &[("x-api-key", &secret)]).await.status, 201);
    let list = run_cairn(dir.path(), "keys", &["list"], &[]);
    let list = String::from_utf8(list.stdout).unwrap();
    let ci = list.lines().find(|line| line.ends_with("ci")).unwrap();
    assert!(ci.contains("active until") && ci.contains("last used"), "{list}");
    assert!(list.contains("never used"), "the other key: {list}");

    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    let refused = post_memory(&daemon, &[("x-api-key", &secret)]).await;
    let message = refused.assert_error(401, "UNAUTHORIZED");
    assert!(message.contains("expired"), "{message}");
    let reads = daemon
        .request_with(Method::GET, "/api/memories", Body::None, &[("x-api-key", &lasting)])
        .await;
    assert_eq!(reads.status, 200, "a key without an expiry goes on");
    let list = run_cairn(dir.path(), "keys", &["list"], &[]);
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(list.lines().any(|line| line.ends_with("ci") && line.contains("expired")), "{list}");
}
