//! Memories: create, read, list with filters and pages, change, archive and restore, and
//! every kind of bad input.

use cairn_test_support::column;
use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon};

#[tokio::test]
async fn create_returns_an_active_memory_without_last_recalled_at() {
    let daemon = Daemon::start();
    let reply = daemon
        .post(
            "/api/memories",
            json!({"content": "Run `cargo xtask ci` before pushing.", "scope": "repo", "repo": "cairn",
                   "tags": ["ci", "ci", " workflow "], "source": "test", "metadata": {"pr": 12}}),
        )
        .await;
    assert_eq!(reply.status, 201);
    let memory = &reply.body;
    assert!(memory["id"].as_str().unwrap().starts_with("mem_"));
    assert_eq!(memory["content"], "Run `cargo xtask ci` before pushing.");
    assert_eq!(memory["scope"], "repo");
    assert_eq!(memory["status"], "active");
    assert_eq!(memory["repo"], "cairn");
    assert_eq!(memory["tags"], json!(["ci", "workflow"]), "tags are trimmed and repeats dropped");
    assert_eq!(memory["metadata"], json!({"pr": 12}));
    assert!(memory["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(memory.get("lastRecalledAt").is_none(), "the create response has no lastRecalledAt");

    let read = daemon.get(&format!("/api/memories/{}", memory["id"].as_str().unwrap())).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["content"], memory["content"]);
    assert_eq!(read.body["lastRecalledAt"], json!(null));
    assert_eq!(read.body["archivedAt"], json!(null));
}

#[tokio::test]
async fn lists_page_and_filter() {
    let daemon = Daemon::start();
    let mut ids = Vec::new();
    for (i, scope) in ["repo", "user", "global", "task", "repo", "user", "repo"].iter().enumerate()
    {
        ids.push(daemon.remember(json!({"content": format!("memory {i}"), "scope": scope})).await);
    }
    let review =
        daemon.patch(&format!("/api/memories/{}", ids[1]), json!({"status": "review"})).await;
    assert_eq!(review.status, 200);

    let all = daemon.get("/api/memories").await;
    assert_eq!(all.status, 200);
    assert_eq!(
        (all.body["total"].as_u64(), all.body["limit"].as_u64(), all.body["offset"].as_u64()),
        (Some(7), Some(50), Some(0))
    );
    let listed: Vec<&str> = column(&all.body["memories"], "id", Value::as_str);
    let newest_first: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, newest_first);
    assert!(
        all.body["memories"][0].get("lastRecalledAt").is_some(),
        "list items carry lastRecalledAt"
    );

    let page = daemon.get("/api/memories?limit=2&offset=2").await;
    assert_eq!(page.body["total"], 7);
    assert_eq!((page.body["limit"].as_u64(), page.body["offset"].as_u64()), (Some(2), Some(2)));
    let page_ids: Vec<&str> = column(&page.body["memories"], "id", Value::as_str);
    assert_eq!(page_ids, newest_first[2..4]);

    let clamped = daemon.get("/api/memories?limit=100000").await;
    assert_eq!(clamped.body["limit"], 500, "the applied limit is reported");

    let repo = daemon.get("/api/memories?scope=repo").await;
    assert_eq!(repo.body["total"], 3);
    assert!(repo.body["memories"].as_array().unwrap().iter().all(|m| m["scope"] == "repo"));
    let in_review = daemon.get("/api/memories?status=review").await;
    assert_eq!(in_review.body["total"], 1);
    assert_eq!(in_review.body["memories"][0]["id"], ids[1].as_str());
    let both = daemon.get("/api/memories?scope=user&status=active").await;
    assert_eq!(both.body["total"], 1);

    let bad_scope = daemon.get("/api/memories?scope=team").await;
    assert!(bad_scope.assert_error(422, "VALIDATION_ERROR").contains("scope"));
    let bad_limit = daemon.get("/api/memories?limit=-1").await;
    assert!(bad_limit.assert_error(422, "VALIDATION_ERROR").contains("limit"));
    let unknown = daemon.get("/api/memories?colour=blue").await;
    assert!(unknown.assert_error(422, "VALIDATION_ERROR").contains("colour"));
}

#[tokio::test]
async fn archive_hides_a_memory_and_patch_restores_it() {
    let daemon = Daemon::start();
    let id = daemon
        .remember(
            json!({"content": "Deploys go through the staging cluster first.", "scope": "global"}),
        )
        .await;
    let path = format!("/api/memories/{id}");

    let archived = daemon.delete(&path).await;
    assert_eq!(archived.status, 200);
    assert!(archived.body["archivedAt"].is_string());
    assert_eq!(archived.body["status"], "active", "archiving is not a status");

    assert_eq!(daemon.get("/api/memories").await.body["total"], 0);
    assert_eq!(daemon.get("/api/memories?includeArchived=true").await.body["total"], 1);
    assert_eq!(daemon.get(&path).await.status, 200, "an archived memory can still be read by id");
    let search = daemon.get("/api/search?q=staging").await;
    assert_eq!(search.body["hits"], json!([]), "archived memories leave retrieval");
    let context = daemon.post("/api/context", json!({"task": "deploy to staging"})).await;
    assert_eq!(context.body["memoriesUsed"], 0);
    assert_eq!(daemon.get("/api/health").await.body["memoryCount"], 0);

    let restored = daemon.patch(&path, json!({"archived": false})).await;
    assert_eq!(restored.status, 200);
    assert_eq!(restored.body["archivedAt"], json!(null));
    assert_eq!(daemon.get("/api/memories").await.body["total"], 1);
    assert_eq!(daemon.get("/api/search?q=staging").await.body["hits"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn patch_changes_only_the_named_fields() {
    let daemon = Daemon::start();
    let id = daemon
        .remember(
            json!({"content": "old text", "scope": "user", "tags": ["a"], "metadata": {"k": 1}}),
        )
        .await;
    let path = format!("/api/memories/{id}");
    let before = daemon.get(&path).await.body;

    let changed = daemon
        .patch(&path, json!({"content": "new text", "scope": "task", "tags": ["b", "c"]}))
        .await;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.body["content"], "new text");
    assert_eq!(changed.body["scope"], "task");
    assert_eq!(changed.body["tags"], json!(["b", "c"]));
    assert_eq!(changed.body["metadata"], json!({"k": 1}));
    assert_eq!(changed.body["status"], "active");
    assert_eq!(changed.body["createdAt"], before["createdAt"]);
    assert!(changed.body["updatedAt"].as_str().unwrap() >= before["updatedAt"].as_str().unwrap());
    assert_eq!(daemon.get("/api/search?q=new").await.body["hits"][0]["memory"]["id"], id.as_str());
    assert_eq!(daemon.get("/api/search?q=old").await.body["hits"], json!([]));

    let stale =
        daemon.patch(&path, json!({"status": "stale", "metadata": {"reviewed": true}})).await;
    assert_eq!(stale.body["status"], "stale");
    assert_eq!(stale.body["metadata"], json!({"reviewed": true}));
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let daemon = Daemon::start();
    let id = daemon.remember(json!({"content": "kept as is", "scope": "user"})).await;
    let path = format!("/api/memories/{id}");
    let before = daemon.get(&path).await.body;

    let cases: Vec<(serde_json::Value, &str)> = vec![
        (json!({"scope": "repo"}), "content"),
        (json!({"content": "x"}), "scope"),
        (json!({"content": "   ", "scope": "repo"}), "content"),
        (json!({"content": 5, "scope": "repo"}), "content"),
        (json!({"content": "x", "scope": "team"}), "scope"),
        (json!({"content": "x", "scope": "repo", "tags": "one"}), "tags"),
        (json!({"content": "x", "scope": "repo", "tags": [""]}), "tags"),
        (json!({"content": "x", "scope": "repo", "repo": ""}), "repo"),
        (json!({"content": "x", "scope": "repo", "colour": "blue"}), "colour"),
        (json!({"content": "x".repeat(64 * 1024 + 1), "scope": "repo"}), "content"),
        (json!(["content", "scope"]), "body"),
    ];
    for (body, field) in cases {
        let reply = daemon.post("/api/memories", body.clone()).await;
        let message = reply.assert_error(422, "VALIDATION_ERROR");
        assert!(message.contains(field), "the message for {body} should name `{field}`: {message}");
    }
    let exactly_64k = daemon
        .post("/api/memories", json!({"content": "y".repeat(64 * 1024), "scope": "repo"}))
        .await;
    assert_eq!(exactly_64k.status, 201, "64 KiB is allowed");

    let malformed =
        daemon.request(Method::POST, "/api/memories", Body::Raw(b"{\"content\": ")).await;
    assert!(malformed.assert_error(422, "VALIDATION_ERROR").contains("not valid JSON"));
    let empty = daemon.request(Method::POST, "/api/memories", Body::Raw(b"")).await;
    assert!(empty.assert_error(422, "VALIDATION_ERROR").contains("empty"));
    let huge = vec![b' '; 2 * 1024 * 1024];
    daemon
        .request(Method::POST, "/api/memories", Body::Raw(&huge))
        .await
        .assert_error(413, "PAYLOAD_TOO_LARGE");

    daemon.patch(&path, json!({})).await.assert_error(422, "VALIDATION_ERROR");
    daemon.patch(&path, json!({"status": "archived"})).await.assert_error(422, "VALIDATION_ERROR");
    daemon.patch(&path, json!({"content": ""})).await.assert_error(422, "VALIDATION_ERROR");
    daemon
        .patch("/api/memories/mem_nope", json!({"status": "stale"}))
        .await
        .assert_error(404, "MEMORY_NOT_FOUND");
    daemon.get("/api/memories/mem_nope").await.assert_error(404, "MEMORY_NOT_FOUND");
    daemon.delete("/api/memories/mem_nope").await.assert_error(404, "MEMORY_NOT_FOUND");

    assert_eq!(daemon.get(&path).await.body, before, "failed requests change nothing");
    assert_eq!(daemon.get("/api/memories").await.body["total"], 2);
}
