//! `POST /api/memories/batch` (issue 16): all or nothing, the faulty item named, the created
//! memories in the request's order, the limits, the rate it spends, and `cairn memories
//! import` on top of it; on SQLite and on PostgreSQL.

use cairn_test_support::postgres::TestCluster;
use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon};

fn memories(count: usize, prefix: &str) -> Vec<Value> {
    (0..count)
        .map(
            |i| json!({"content": format!("{prefix} memory {i}"), "scope": "repo", "repo": "shop"}),
        )
        .collect()
}

async fn total(daemon: &Daemon) -> u64 {
    let list = daemon.get("/api/memories?limit=1").await;
    assert_eq!(list.status, 200, "{list:?}");
    list.body["total"].as_u64().unwrap()
}

/// What a user sees of a batch, on whatever store `daemon` runs.
async fn a_batch_is_stored_whole_or_not_at_all(daemon: &Daemon) {
    let sent = memories(250, "imported");
    let created = daemon.post("/api/memories/batch", json!({ "memories": sent })).await;
    assert_eq!(created.status, 201, "{created:?}");
    let created = created.body["memories"].as_array().unwrap();
    assert_eq!(created.len(), 250);
    for (i, memory) in created.iter().enumerate() {
        assert_eq!(memory["content"], format!("imported memory {i}"), "in the request's order");
        assert_eq!(memory["status"], "active");
        assert!(memory["id"].as_str().unwrap().starts_with("mem_"));
        assert!(memory.get("lastRecalledAt").is_none(), "as the single create answers");
    }
    let read = daemon.get(&format!("/api/memories/{}", created[42]["id"].as_str().unwrap())).await;
    assert_eq!(read.body["content"], "imported memory 42");
    assert_eq!(total(daemon).await, 250);
    let found = daemon.get("/api/search?q=imported&repo=shop&limit=5").await;
    assert_eq!(found.status, 200, "{found:?}");
    assert_eq!(found.body["hits"].as_array().unwrap().len(), 5, "a batch is searchable");

    // One bad item among good ones: a 422 naming it, and nothing of the batch stored.
    let mut bad = memories(10, "refused");
    bad[7]["content"] = json!("   ");
    let refused = daemon.post("/api/memories/batch", json!({ "memories": bad })).await;
    let message = refused.assert_error(422, "VALIDATION_ERROR");
    assert_eq!(message, "memories[7].content: must not be empty");
    let mut wrong_type = memories(10, "refused");
    wrong_type[3]["scope"] = json!("team");
    let refused = daemon.post("/api/memories/batch", json!({ "memories": wrong_type })).await;
    let message = refused.assert_error(422, "VALIDATION_ERROR");
    assert!(message.starts_with("memories[3].scope: unknown variant `team`"), "{message}");
    assert_eq!(total(daemon).await, 250, "a refused batch stores nothing");
    let found = daemon.get("/api/search?q=refused").await;
    assert_eq!(found.body["hits"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_batch_is_stored_whole_or_not_at_all_on_sqlite() {
    a_batch_is_stored_whole_or_not_at_all(&Daemon::start()).await;
}

#[tokio::test]
async fn a_batch_is_stored_whole_or_not_at_all_on_postgres() {
    let (_cluster, url) = TestCluster::with_database();
    let daemon = Daemon::start_with(&["--database-url", &url, "--embedder", "none"], &[]);
    a_batch_is_stored_whole_or_not_at_all(&daemon).await;
}

#[tokio::test]
async fn batches_are_bounded_in_items_and_bytes() {
    let daemon = Daemon::start();
    let empty = daemon.post("/api/memories/batch", json!({ "memories": [] })).await;
    assert_eq!(
        empty.assert_error(422, "VALIDATION_ERROR"),
        "memories: at least one memory is required"
    );
    let full = daemon.post("/api/memories/batch", json!({ "memories": memories(1000, "m") })).await;
    assert_eq!(full.status, 201, "1,000 is the limit, included");
    let over = daemon.post("/api/memories/batch", json!({ "memories": memories(1001, "m") })).await;
    assert_eq!(
        over.assert_error(422, "VALIDATION_ERROR"),
        "memories: 1001 memories; the limit is 1000 a batch"
    );
    // Over 16 MiB: 300 memories of 60 KiB.
    let big = "x".repeat(60 * 1024);
    let large: Vec<Value> = (0..300).map(|_| json!({"content": big, "scope": "global"})).collect();
    let body = serde_json::to_vec(&json!({ "memories": large })).unwrap();
    let too_large = daemon.request(Method::POST, "/api/memories/batch", Body::Raw(&body)).await;
    too_large.assert_error(413, "PAYLOAD_TOO_LARGE");
    // Larger than the single create's 1 MiB, under 16 MiB: accepted.
    let large: Vec<Value> = (0..40).map(|_| json!({"content": big, "scope": "global"})).collect();
    let accepted = daemon.post("/api/memories/batch", json!({ "memories": large })).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    assert_eq!(total(&daemon).await, 1040);
    let get = daemon.get("/api/memories/batch").await;
    get.assert_error(405, "METHOD_NOT_ALLOWED");
}

#[tokio::test]
async fn a_batch_spends_one_bulk_unit_per_hundred_memories_and_one_write() {
    let daemon = Daemon::start_with(
        &[],
        &[("SERVICE_RATE_LIMIT_BULK", "12"), ("SERVICE_RATE_LIMIT_WRITE", "100")],
    );
    let first =
        daemon.post("/api/memories/batch", json!({ "memories": memories(1000, "a") })).await;
    assert_eq!(first.status, 201, "{first:?}");
    // 10 of 12 spent: a batch of 201 (3 requests) is refused whole, one of 200 is not.
    let refused =
        daemon.post("/api/memories/batch", json!({ "memories": memories(201, "b") })).await;
    refused.assert_error(429, "RATE_LIMITED");
    assert_eq!(total(&daemon).await, 1000, "a refused batch stores nothing");
    // The agent's own writes are another budget, which the import left whole.
    let note =
        daemon.post("/api/memories", json!({"content": "tests pass", "scope": "global"})).await;
    assert_eq!(note.status, 201, "{note:?}");
    assert_eq!(note.headers["ratelimit-remaining"], "97", "{note:?}");
}

#[tokio::test]
async fn cairn_memories_import_sends_a_json_lines_file_in_batches() {
    let daemon = Daemon::start();
    let lines: String = (0..25)
        .map(|i| format!("{}\n", json!({"content": format!("line {}", i + 1), "scope": "global"})))
        .collect();
    let imported =
        daemon.run_client_with_input(&["memories", "import", "-", "--batch-size", "10"], &lines);
    assert!(imported.status.success(), "{imported:?}");
    assert_eq!(String::from_utf8_lossy(&imported.stdout).trim(), "imported 25 memories");
    assert_eq!(total(&daemon).await, 25);

    // Line 14 is blank content: the first batch (lines 1–10) is stored, its own is not.
    let mut lines: Vec<String> = (0..25)
        .map(|i| json!({"content": format!("again {}", i + 1), "scope": "global"}).to_string())
        .collect();
    lines[13] = json!({"content": "", "scope": "global"}).to_string();
    let failed = daemon.run_client_with_input(
        &["memories", "import", "-", "--batch-size", "10"],
        &lines.join("\n"),
    );
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("line 14: memories[3].content: must not be empty"), "{stderr}");
    assert!(stderr.contains("10 memories were imported before its batch"), "{stderr}");
    assert_eq!(total(&daemon).await, 35);
}
