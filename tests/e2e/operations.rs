//! What an operator sees and relies on (issue 30): metrics in Prometheus's format, request
//! ids, the access log, probes for load balancers, and 404 for unknown paths.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon, Reply, create_key};

/// The samples of a Prometheus text exposition: `name{labels}` to value. Panics on a line
/// that is neither a comment nor a sample, so a malformed exposition fails the test.
fn samples(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    for line in text.lines().filter(|line| !line.is_empty() && !line.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "a metric name: {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')));
        }
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            value => value.parse().unwrap_or_else(|_| panic!("a value: {line:?}")),
        };
        samples.insert(series.to_owned(), value);
    }
    samples
}

/// The daemon's log as it is now.
fn log(daemon: &Daemon) -> String {
    std::fs::read_to_string(daemon.data_dir().join("daemon.log")).unwrap()
}

/// Waits until the daemon's log holds `needle` (lines are written as requests end).
async fn log_with(daemon: &Daemon, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = log(daemon);
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "no {needle:?} in the log:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn metrics_count_requests_by_route_and_show_the_process() {
    let daemon = Daemon::start();
    let id = daemon.remember(json!({"content": "Use pnpm.", "scope": "global"})).await;
    daemon.get(&format!("/api/memories/{id}")).await;
    daemon.get("/api/memories/mem_nothere").await;
    daemon.get("/healthz").await;

    let reply = daemon.get("/metrics").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(
        reply.headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4")
    );
    let text = &reply.text;
    assert!(text.contains("# TYPE cairn_http_requests_total counter"), "{text}");
    assert!(text.contains("# TYPE cairn_http_request_duration_seconds histogram"), "{text}");
    let samples = samples(text);
    let requests = |method: &str, route: &str, status: u16| {
        let series = format!(
            "cairn_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}}"
        );
        samples.get(&series).copied().unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    assert_eq!(requests("POST", "/api/memories", 201), 1.0);
    // Ids are folded into the route's pattern; unknown paths into one label.
    assert_eq!(requests("GET", "/api/memories/{id}", 200), 1.0);
    assert_eq!(requests("GET", "/api/memories/{id}", 404), 1.0);
    assert_eq!(requests("GET", "unmatched", 404), 1.0);
    let bucket = "cairn_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/memories\",le=\"+Inf\"}";
    assert_eq!(samples.get(bucket), Some(&1.0), "{text}");
    assert_eq!(samples.get("cairn_memories{status=\"active\"}"), Some(&1.0), "{text}");
    assert!(samples.get("process_resident_memory_bytes").is_some_and(|bytes| *bytes > 1e6));
    assert!(samples.contains_key("process_open_fds"), "{text}");
    assert!(samples.contains_key("process_cpu_seconds_total"), "{text}");
    assert!(samples.contains_key("cairn_http_requests_in_flight"), "{text}");
    assert!(samples.contains_key("cairn_embeddings_pending"), "{text}");
}

#[tokio::test]
async fn refusals_and_streams_are_counted() {
    let daemon = Daemon::start_with(&["--rate-limit-write", "1"], &[]);
    daemon.remember(json!({"content": "one", "scope": "global"})).await;
    let refused = daemon.post("/api/memories", json!({"content": "two", "scope": "global"})).await;
    assert_eq!(refused.status, 429);
    // Starting a conversation spends `start`; a message in it is a write, which shares the
    // budget with the memory API's.
    let created = daemon.post("/api/runtime/conversations", json!({})).await;
    assert_eq!(created.status, 201, "starting a visitor has a budget of its own: {created:?}");
    let id = created.body["conversation"]["id"].as_str().unwrap();
    let sent = daemon
        .post(&format!("/api/runtime/conversations/{id}/messages"), json!({"message": "hi"}))
        .await;
    assert_eq!(sent.status, 429, "runtime writes share the budget: {sent:?}");
    let samples = samples(&daemon.get("/metrics").await.text);
    assert_eq!(samples.get("cairn_rate_limited_total{class=\"write\"}"), Some(&2.0));
}

#[tokio::test]
async fn production_metrics_need_a_key_unless_served_on_their_own_address() {
    let dir = tempfile::tempdir().unwrap();
    let key = create_key(dir.path(), "read");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = free.local_addr().unwrap().to_string();
    drop(free);

    let daemon = Daemon::start_in_with(dir.path(), &["--profile", "production"], &[]);
    daemon.get("/metrics").await.assert_error(401, "UNAUTHORIZED");
    let keyed =
        daemon.request_with(Method::GET, "/metrics", Body::None, &[("x-api-key", &key)]).await;
    assert_eq!(keyed.status, 200);
    assert!(keyed.text.contains("cairn_http_requests_total"));
    drop(daemon);

    let daemon = Daemon::start_in_with(
        dir.path(),
        &["--profile", "production", "--metrics-addr", &metrics_addr],
        &[],
    );
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let scraped = client
        .get(format!("http://{metrics_addr}/metrics").parse().unwrap())
        .await
        .expect("the metrics address answers");
    assert_eq!(scraped.status(), 200);
    let other = client.get(format!("http://{metrics_addr}/api/memories").parse().unwrap()).await;
    assert_eq!(other.unwrap().status(), 404, "the metrics address serves metrics alone");
    // Beside the API they are gone: the API's 401 for a path it does not know.
    let beside =
        daemon.request_with(Method::GET, "/metrics", Body::None, &[("x-api-key", &key)]).await;
    beside.assert_error(404, "NOT_FOUND");
}

#[tokio::test]
async fn every_answer_names_its_request_and_the_log_line_says_the_same() {
    let daemon = Daemon::start();
    let mine = daemon
        .request_with(Method::GET, "/api/health", Body::None, &[("x-request-id", "trace-42.a")])
        .await;
    assert_eq!(mine.headers["x-request-id"], "trace-42.a");

    let odd = daemon
        .request_with(Method::GET, "/api/health", Body::None, &[("x-request-id", "no spaces")])
        .await;
    let given = odd.headers["x-request-id"].to_str().unwrap();
    assert!(given.starts_with("req_") && given.len() == 30, "{given}");

    let failed = daemon.post("/api/memories", json!({"scope": "global"})).await;
    failed.assert_error(422, "VALIDATION_ERROR");
    let id = failed.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(failed.body["error"]["requestId"], id.as_str(), "{failed:?}");

    let line = log_with(&daemon, &id).await;
    let line = line.lines().find(|line| line.contains(&id)).unwrap();
    for part in ["method=\"POST\"", "route=\"/api/memories\"", "status=422", "client=127.0.0.1"] {
        assert!(line.contains(part), "{part} in {line}");
    }
    assert!(line.contains("principal=\"local:"), "{line}");
    // A probe that passed is a DEBUG line, not INFO: written after it, the failed write's
    // line is there and the probe's is not.
    assert!(!log(&daemon).contains("trace-42.a"), "a passing probe at INFO");
}

#[tokio::test]
async fn the_json_log_has_one_object_a_line_and_no_secrets_or_content() {
    let dir = tempfile::tempdir().unwrap();
    let key = create_key(dir.path(), "write");
    let daemon = Daemon::start_in_with(
        dir.path(),
        &["--profile", "production", "--log-format", "json"],
        &[("RUST_LOG", "debug")],
    );
    let secret = "The staging password is hunter2-zebra.";
    let stored = daemon
        .request_with(
            Method::POST,
            "/api/memories",
            Body::Json(json!({"content": secret, "scope": "global"})),
            &[("x-api-key", &key), ("x-request-id", "stored-1")],
        )
        .await;
    assert_eq!(stored.status, 201);
    let refused = daemon
        .request_with(Method::GET, "/api/memories", Body::None, &[("x-request-id", "refused-1")])
        .await;
    assert_eq!(refused.status, 401);
    log_with(&daemon, "refused-1").await;
    let text = log(&daemon);
    assert!(!text.contains("hunter2"), "memory content reached the log");
    assert!(!text.contains(&key), "a key reached the log");

    let lines: Vec<Value> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let access = |id: &str| {
        lines
            .iter()
            .find(|line| line["target"] == "cairn::access" && line["fields"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no access line for {id}"))
            .clone()
    };
    let stored = access("stored-1");
    assert_eq!(stored["level"], "INFO");
    assert_eq!(stored["fields"]["route"], "/api/memories");
    assert_eq!(stored["fields"]["status"], 201);
    assert!(stored["fields"]["principal"].as_str().unwrap().starts_with("key:"), "{stored}");
    assert!(stored["fields"]["latency_ms"].as_f64().is_some());
    let refused = access("refused-1");
    assert_eq!(refused["fields"]["status"], 401);
    assert_eq!(refused["fields"]["principal"], "-");
}

#[tokio::test]
async fn probes_answer_without_credentials_and_health_names_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let key = create_key(dir.path(), "read");
    let daemon = Daemon::start_in_with(dir.path(), &["--profile", "production"], &[]);
    for (path, status) in [("/api/health/live", "live"), ("/api/health/ready", "ready")] {
        let probe = daemon.get(path).await;
        assert_eq!((probe.status, &probe.body), (200, &json!({"status": status})), "{path}");
    }
    daemon.get("/api/health").await.assert_error(401, "UNAUTHORIZED");
    let health =
        daemon.request_with(Method::GET, "/api/health", Body::None, &[("x-api-key", &key)]).await;
    assert_eq!(health.status, 200);
    assert!(health.body["schemaVersion"].as_u64().unwrap() >= 14, "{health:?}");
    // A store this small builds its full-text index before the daemon listens.
    assert_eq!(health.body["fulltextIndex"], "ready", "{health:?}");
    let build = health.body["build"].as_str().unwrap();
    assert!(build.starts_with(env!("CARGO_PKG_VERSION")), "{build}");
    assert_eq!(health.body["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn only_the_consoles_pages_are_html() {
    let daemon = Daemon::start();
    for path in ["/healthz", "/metricz", "/status", "/memoriesx", "/wp-login.php"] {
        daemon.get(path).await.assert_error(404, "NOT_FOUND");
    }
    for path in ["/", "/memories", "/conversations/conv_1", "/guards"] {
        let page = daemon.get(path).await;
        assert_eq!(page.status, 200, "{path}");
        assert_eq!(page.headers["content-type"], "text/html; charset=utf-8", "{path}");
    }
}

/// A write with an `Idempotency-Key`.
async fn keyed(daemon: &Daemon, method: Method, path: &str, body: Value, key: &str) -> Reply {
    daemon.request_with(method, path, Body::Json(body), &[("idempotency-key", key)]).await
}

#[tokio::test]
async fn a_retried_write_runs_once_and_answers_the_same() {
    let daemon = Daemon::start();
    let memory = json!({"content": "Deploys go through the release script.", "scope": "global"});
    let first = keyed(&daemon, Method::POST, "/api/memories", memory.clone(), "k-1").await;
    assert_eq!(first.status, 201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = keyed(&daemon, Method::POST, "/api/memories", memory.clone(), "k-1").await;
    assert_eq!(again.status, 201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, first.body, "the first answer, again");
    assert_eq!(daemon.get("/api/memories").await.body["total"], 1, "stored once");

    let other = json!({"content": "Another memory.", "scope": "global"});
    keyed(&daemon, Method::POST, "/api/memories", other.clone(), "k-1")
        .await
        .assert_error(409, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(keyed(&daemon, Method::POST, "/api/memories", other, "k-2").await.status, 201);

    // PATCH and DELETE alike.
    let id = first.body["id"].as_str().unwrap();
    let path = format!("/api/memories/{id}");
    let patched = keyed(&daemon, Method::PATCH, &path, json!({"status": "stale"}), "k-3").await;
    assert_eq!(patched.status, 200);
    let replayed = keyed(&daemon, Method::PATCH, &path, json!({"status": "stale"}), "k-3").await;
    assert_eq!((replayed.status, &replayed.body), (200, &patched.body));
    let archived =
        daemon.request_with(Method::DELETE, &path, Body::None, &[("idempotency-key", "k-4")]).await;
    let again =
        daemon.request_with(Method::DELETE, &path, Body::None, &[("idempotency-key", "k-4")]).await;
    assert_eq!((archived.status, again.status), (200, 200), "{again:?}");
    assert_eq!(again.headers["idempotent-replayed"], "true");

    // The runtime's writes too: one message, however often it is sent.
    let created =
        keyed(&daemon, Method::POST, "/api/runtime/conversations", json!({}), "c-1").await;
    let conversation = created.body["conversation"]["id"].as_str().unwrap().to_owned();
    let again = keyed(&daemon, Method::POST, "/api/runtime/conversations", json!({}), "c-1").await;
    assert_eq!(again.body["conversation"]["id"], conversation.as_str());
    let messages = format!("/api/runtime/conversations/{conversation}/messages");
    let message = json!({"message": "Where is my order?"});
    for _ in 0..3 {
        let sent = keyed(&daemon, Method::POST, &messages, message.clone(), "m-1").await;
        assert!(sent.status < 300, "{sent:?}");
    }
    let events = daemon.get(&format!("/api/runtime/conversations/{conversation}/events")).await;
    let received = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "message" && event["data"]["role"] == "user")
        .count();
    assert_eq!(received, 1, "{events:?}");

    // A key of no sane shape is refused, and nothing is stored.
    keyed(&daemon, Method::POST, "/api/memories", memory, "has space")
        .await
        .assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn concurrent_retries_run_once() {
    let daemon = Daemon::start();
    let memories: Vec<Value> = (0..300)
        .map(|i| json!({"content": format!("Batch memory number {i} about deploys."), "scope": "global"}))
        .collect();
    let batch = json!({"memories": memories});
    let sends =
        (0..8).map(|_| keyed(&daemon, Method::POST, "/api/memories/batch", batch.clone(), "b-1"));
    let replies = futures_util::future::join_all(sends).await;
    let mut created = 0;
    for reply in &replies {
        match reply.status {
            201 => created += 1,
            409 => assert_eq!(reply.body["error"]["code"], "IDEMPOTENCY_KEY_IN_USE", "{reply:?}"),
            other => panic!("{other}: {reply:?}"),
        }
    }
    assert!(created >= 1);
    assert_eq!(daemon.get("/api/memories").await.body["total"], 300, "one batch stored");
}

#[tokio::test]
async fn keys_belong_to_their_caller() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob) = (create_key(dir.path(), "write"), create_key(dir.path(), "write"));
    let daemon = Daemon::start_in_with(dir.path(), &["--profile", "production"], &[]);
    let daemon = &daemon;
    let send = |key: &str, content: &str| {
        let key = key.to_owned();
        let body = json!({"content": content, "scope": "global"});
        async move {
            let headers = [("x-api-key", key.as_str()), ("idempotency-key", "same")];
            daemon.request_with(Method::POST, "/api/memories", Body::Json(body), &headers).await
        }
    };
    assert_eq!(send(&alice, "Alice's memory.").await.status, 201);
    let bobs = send(&bob, "Bob's memory.").await;
    assert_eq!(bobs.status, 201, "another caller's key is another key: {bobs:?}");
    assert!(bobs.headers.get("idempotent-replayed").is_none());
    // Without credentials: the API's refusal, not a replay.
    let anonymous = daemon
        .request_with(
            Method::POST,
            "/api/memories",
            Body::Json(json!({"content": "Alice's memory.", "scope": "global"})),
            &[("idempotency-key", "same")],
        )
        .await;
    anonymous.assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_limited_and_logged() {
    let daemon =
        Daemon::start_with(&["--trusted-proxy", "127.0.0.0/8", "--rate-limit-read", "2"], &[]);
    let from = |client: &'static str, id: &'static str| {
        let daemon = &daemon;
        async move {
            daemon
                .request_with(
                    Method::GET,
                    "/api/memories",
                    Body::None,
                    &[("x-forwarded-for", client), ("x-request-id", id)],
                )
                .await
                .status
        }
    };
    assert_eq!(from("203.0.113.9", "a1").await, 200);
    assert_eq!(from("203.0.113.9", "a2").await, 200);
    assert_eq!(from("203.0.113.9", "a3").await, 429, "the forwarded client's budget is spent");
    assert_eq!(from("198.51.100.4", "b1").await, 200, "another client behind the same proxy");
    let text = log_with(&daemon, "b1").await;
    let line = text.lines().find(|line| line.contains("\"b1\"")).unwrap();
    assert!(line.contains("client=198.51.100.4:0"), "{line}");
}

#[tokio::test]
async fn forwarding_headers_from_an_untrusted_peer_change_nothing() {
    let daemon = Daemon::start_with(&["--rate-limit-read", "2"], &[]);
    for (client, status) in [("203.0.113.9", 200), ("198.51.100.4", 200), ("192.0.2.1", 429)] {
        let reply = daemon
            .request_with(Method::GET, "/api/memories", Body::None, &[("x-forwarded-for", client)])
            .await;
        assert_eq!(reply.status, status, "one budget: the connection's own address");
    }
}
