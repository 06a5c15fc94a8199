//! The daemon as a whole: health, OpenAPI, routing errors, persistence, concurrency, shutdown.

use std::path::Path;

use hyper::Method;
use serde_json::json;

use crate::util::{Body, Daemon};

#[tokio::test]
async fn health_reports_the_service() {
    let daemon = Daemon::start();
    daemon.remember(json!({"content": "one", "scope": "user"})).await;
    let reply = daemon.get("/api/health").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["status"], "healthy");
    assert_eq!(reply.body["memoryCount"], 1);
    assert!(reply.body["uptime"].as_f64().unwrap() >= 0.0);
    assert_eq!(reply.body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(reply.headers["content-type"], "application/json");
}

#[tokio::test]
async fn openapi_document_is_served_and_matches_the_committed_file() {
    let daemon = Daemon::start();
    let reply = daemon.get("/openapi.json").await;
    assert_eq!(reply.status, 200);
    assert!(reply.body["openapi"].as_str().unwrap().starts_with("3.1"));
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json"),
    )
    .unwrap();
    let committed: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert!(
        reply.body == committed,
        "the served document differs from docs/openapi.json; run `cargo xtask openapi`"
    );
    for path in ["/api/memories", "/api/memories/{id}", "/api/context", "/api/guard", "/api/health"]
    {
        assert!(reply.body["paths"].get(path).is_some(), "{path} is documented");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_get_the_envelope() {
    let daemon = Daemon::start();
    daemon.get("/api/nothing").await.assert_error(404, "NOT_FOUND");
    // `/` is the web console (docs/console.md); a missing file is still the API's 404.
    daemon.get("/favicon.ico").await.assert_error(404, "NOT_FOUND");
    daemon.get("/assets/missing.js").await.assert_error(404, "NOT_FOUND");
    let console = daemon.get("/").await;
    assert_eq!(console.status, 200);
    assert_eq!(console.headers["content-type"], "text/html; charset=utf-8");
    assert!(console.text.contains("/assets/console.js"), "{}", console.text);
    daemon.request(Method::DELETE, "/", Body::None).await.assert_error(404, "NOT_FOUND");
    let wrong = daemon.request(Method::PUT, "/api/memories", Body::None).await;
    wrong.assert_error(405, "METHOD_NOT_ALLOWED");
    assert_eq!(wrong.headers["allow"], "GET, POST");
    daemon.get("/api/context").await.assert_error(405, "METHOD_NOT_ALLOWED");
}

#[tokio::test]
async fn acknowledged_writes_survive_restarts_and_kills() {
    let directory = tempfile::tempdir().unwrap();
    let first = Daemon::start_in(directory.path());
    let id =
        first.remember(json!({"content": "Survives a graceful restart.", "scope": "global"})).await;
    let evidence = first
        .post("/api/patch-evidence", json!({"task": "t", "files": ["a"], "commands": ["b"]}))
        .await;
    assert!(first.terminate().success(), "SIGTERM shuts down cleanly");

    let second = Daemon::start_in(directory.path());
    assert_eq!(
        second.get(&format!("/api/memories/{id}")).await.body["content"],
        "Survives a graceful restart."
    );
    let evidence_id = evidence.body["evidenceId"].as_str().unwrap();
    assert_eq!(second.get(&format!("/api/evidence/{evidence_id}")).await.body, evidence.body);
    let killed_id =
        second.remember(json!({"content": "Survives SIGKILL.", "scope": "global"})).await;
    second.kill_hard();

    let third = Daemon::start_in(directory.path());
    assert_eq!(
        third.get(&format!("/api/memories/{killed_id}")).await.body["content"],
        "Survives SIGKILL."
    );
    assert_eq!(third.get("/api/health").await.body["memoryCount"], 2);
    assert_eq!(third.data_dir(), directory.path());
}

#[tokio::test]
async fn concurrent_writers_lose_nothing() {
    let daemon = std::sync::Arc::new(Daemon::start());
    let mut writers = Vec::new();
    for writer in 0..8 {
        let daemon = daemon.clone();
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..25 {
                ids.push(daemon.remember(json!({"content": format!("writer {writer} note {i}"), "scope": "task"})).await);
            }
            ids
        }));
    }
    let mut all = std::collections::BTreeSet::new();
    for writer in writers {
        all.extend(writer.await.unwrap());
    }
    assert_eq!(all.len(), 200, "every id is distinct");
    assert_eq!(daemon.get("/api/memories?limit=500").await.body["total"], 200);
    assert_eq!(daemon.get("/api/health").await.body["memoryCount"], 200);
}

#[tokio::test]
async fn the_solo_profile_refuses_web_pages_of_other_sites() {
    let daemon = Daemon::start();
    let post = |headers: &'static [(&'static str, &'static str)]| {
        let body = Body::Json(json!({"content": "planted by a web page", "scope": "global"}));
        daemon.request_with(Method::POST, "/api/memories", body, headers)
    };
    let cross_site = post(&[("origin", "https://attacker.example")]).await;
    assert!(cross_site.assert_error(403, "FORBIDDEN").contains("Origin"));
    post(&[("origin", "null")]).await.assert_error(403, "FORBIDDEN");
    let rebound = post(&[("host", "attacker.example:8787")]).await;
    assert!(rebound.assert_error(403, "FORBIDDEN").contains("localhost"));
    assert_eq!(
        post(&[("origin", "http://localhost:3000")]).await.status,
        201,
        "local pages may call"
    );
    assert_eq!(daemon.get("/api/memories").await.body["total"], 1);
    let stray = daemon.get("/api/health?verbose=1").await;
    assert!(stray.assert_error(422, "VALIDATION_ERROR").contains("no query parameters"));
}
