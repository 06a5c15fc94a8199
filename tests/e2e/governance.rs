//! Governance and evidence packs: the audit log, the review queue, evidence for a task.

use cairn_test_support::column;
use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon};

#[tokio::test]
async fn every_change_is_in_the_audit_log() {
    let daemon = Daemon::start();
    let id = daemon.remember(json!({"content": "first words", "scope": "user"})).await;
    let path = format!("/api/memories/{id}");
    daemon.patch(&path, json!({"content": "second words"})).await;
    daemon.delete(&path).await;
    daemon.patch(&path, json!({"archived": false})).await;
    daemon
        .patch("/api/memories/mem_nope", json!({"status": "stale"}))
        .await
        .assert_error(404, "MEMORY_NOT_FOUND");

    let reply = daemon.get(&format!("/api/governance/audit?memoryId={id}")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["total"], 4);
    let entries = reply.body["entries"].as_array().unwrap();
    let actions: Vec<&str> =
        entries.iter().map(|entry| entry["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["restore", "archive", "update", "create"], "newest first");
    assert!(entries.iter().all(|entry| entry["actor"] == "local:127.0.0.1"), "{entries:?}");
    assert!(entries.iter().all(|entry| entry["id"].as_str().unwrap().starts_with("aud_")));
    assert_eq!(entries[2]["before"]["content"], "first words");
    assert_eq!(entries[2]["after"]["content"], "second words");
    assert_eq!(entries[3]["before"], json!(null));
    assert!(entries[1]["after"]["archivedAt"].is_string());

    let everything = daemon.get("/api/governance/audit?limit=2").await;
    assert_eq!(
        (everything.body["total"].as_u64(), everything.body["entries"].as_array().unwrap().len()),
        (Some(4), 2)
    );
    daemon.get("/api/governance/audit?limit=x").await.assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn the_review_queue_takes_decisions() {
    let daemon = Daemon::start();
    let first = daemon.remember(json!({"content": "Use pnpm.", "scope": "repo"})).await;
    let second = daemon.remember(json!({"content": "Use npm.", "scope": "repo"})).await;
    let active = daemon.remember(json!({"content": "Tabs.", "scope": "repo"})).await;
    for id in [&first, &second] {
        daemon.patch(&format!("/api/memories/{id}"), json!({"status": "review"})).await;
    }
    let queue = daemon.get("/api/governance/review").await;
    assert_eq!(queue.body["total"], 2);
    let queued: Vec<&str> = column(&queue.body["memories"], "id", Value::as_str);
    assert_eq!(queued, [second.as_str(), first.as_str()]);

    let approved = daemon
        .request(Method::POST, &format!("/api/governance/review/{first}/approve"), Body::None)
        .await;
    assert_eq!(approved.status, 200);
    assert_eq!(approved.body["status"], "active");
    let rejected = daemon
        .request(Method::POST, &format!("/api/governance/review/{second}/reject"), Body::None)
        .await;
    assert_eq!(rejected.status, 200);
    assert!(rejected.body["archivedAt"].is_string());
    assert_eq!(daemon.get("/api/governance/review").await.body["total"], 0);

    let again = daemon
        .request(Method::POST, &format!("/api/governance/review/{first}/approve"), Body::None)
        .await;
    assert!(again.assert_error(409, "CONFLICT").contains("not awaiting review"));
    daemon
        .request(Method::POST, &format!("/api/governance/review/{active}/reject"), Body::None)
        .await
        .assert_error(409, "CONFLICT");
    daemon
        .request(Method::POST, "/api/governance/review/mem_nope/approve", Body::None)
        .await
        .assert_error(404, "MEMORY_NOT_FOUND");
    let audit = daemon.get(&format!("/api/governance/audit?memoryId={second}")).await;
    assert_eq!(audit.body["entries"][0]["action"], "reject");
}

#[tokio::test]
async fn evidence_packs_gather_a_task() {
    let daemon = Daemon::start();
    let memory =
        daemon.remember(json!({"content": "Invoices round half to even.", "scope": "repo"})).await;
    daemon.post("/api/context", json!({"task": "Fix invoice rounding"})).await;
    daemon
        .post(
            "/api/outcome",
            json!({"command": "cargo test", "exitCode": 101, "task": "fix invoice rounding"}),
        )
        .await;
    daemon
        .post(
            "/api/outcome",
            json!({"command": "cargo test", "exitCode": 0, "task": "Fix invoice rounding"}),
        )
        .await;
    daemon
        .post(
            "/api/outcome",
            json!({"command": "cargo test", "exitCode": 0, "task": "another task"}),
        )
        .await;
    let evidence = daemon
        .post("/api/patch-evidence", json!({"task": "Fix invoice rounding", "files": ["src/invoice.rs"], "commands": ["cargo test"]}))
        .await;

    let pack = daemon.post("/api/evidence-pack", json!({"task": "fix invoice rounding"})).await;
    assert_eq!(pack.status, 200);
    assert_eq!(pack.body["task"], "fix invoice rounding");
    assert_eq!(pack.body["evidence"], json!([evidence.body]));
    assert_eq!(pack.body["memories"][0]["id"], memory.as_str());
    let exit_codes: Vec<i64> = column(&pack.body["outcomes"], "exitCode", Value::as_i64);
    assert_eq!(exit_codes, [101, 0]);

    let markdown = daemon
        .post("/api/evidence-pack", json!({"task": "Fix invoice rounding", "format": "markdown"}))
        .await;
    assert_eq!(markdown.status, 200);
    assert_eq!(markdown.headers["content-type"], "text/markdown; charset=utf-8");
    assert!(markdown.text.starts_with("# Evidence: Fix invoice rounding"), "{}", markdown.text);
    for expected in [
        memory.as_str(),
        "`src/invoice.rs`",
        "| `cargo test` | 101 |",
        "Invoices round half to even.",
    ] {
        assert!(markdown.text.contains(expected), "{expected} in {}", markdown.text);
    }
    let accepted = daemon
        .request_with(
            Method::POST,
            "/api/evidence-pack",
            Body::Json(json!({"task": "Fix invoice rounding"})),
            &[("accept", "text/markdown")],
        )
        .await;
    assert_eq!(accepted.headers["content-type"], "text/markdown; charset=utf-8");

    let empty = daemon.post("/api/evidence-pack", json!({"task": "never done"})).await;
    assert_eq!(
        (
            empty.body["evidence"].as_array().unwrap().len(),
            empty.body["outcomes"].as_array().unwrap().len()
        ),
        (0, 0)
    );
    daemon.post("/api/evidence-pack", json!({})).await.assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/evidence-pack", json!({"task": "x", "format": "pdf"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
}
