//! The dream cycle and conflicts: merging near-duplicates, marking stale memories, surfacing
//! contradictions, settling them, and the schedule.

use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon};

async fn dream(daemon: &Daemon, body: Value) -> Value {
    let reply = daemon.post("/api/dream-cycle", body).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

#[tokio::test]
async fn near_duplicates_merge_with_provenance_and_dry_runs_change_nothing() {
    let daemon = Daemon::start();
    let text = "The staging database is reset every night at two so never keep test data there longer than a day";
    let kept = daemon.remember(json!({"content": text, "scope": "repo", "repo": "shop", "source": "agent-a", "tags": ["db"]})).await;
    let twin = daemon.remember(json!({"content": text.replace("two", "2am"), "scope": "repo", "repo": "shop", "source": "agent-b", "tags": ["ops"]})).await;
    let other_repo =
        daemon.remember(json!({"content": text, "scope": "repo", "repo": "blog"})).await;
    daemon.remember(json!({"content": "Unrelated: the logo is blue.", "scope": "global"})).await;
    daemon
        .post(
            "/api/context",
            json!({"task": "staging database reset", "repo": "shop", "tokenBudget": 40}),
        )
        .await;

    let preview = dream(&daemon, json!({"dryRun": true})).await;
    assert_eq!(preview["dryRun"], true);
    assert_eq!(preview["examined"], 4);
    assert_eq!(preview["merged"].as_array().unwrap().len(), 1, "{preview}");
    assert_eq!(daemon.get("/api/memories").await.body["total"], 4, "a dry run changes nothing");

    let report = dream(&daemon, json!({})).await;
    let group = &report["merged"][0];
    let (kept_id, merged_id) =
        (group["keptId"].as_str().unwrap(), group["mergedIds"][0].as_str().unwrap());
    assert_eq!(group["mergedIds"].as_array().unwrap().len(), 1);
    assert!([kept.as_str(), twin.as_str()].contains(&kept_id) && kept_id != merged_id);
    assert_ne!(kept_id, other_repo, "other repositories are never merged");
    let survivor = daemon.get(&format!("/api/memories/{kept_id}")).await.body;
    assert_eq!(survivor["archivedAt"], json!(null));
    assert_eq!(survivor["metadata"]["mergedFrom"][0]["id"], merged_id);
    assert!(
        survivor["metadata"]["mergedFrom"][0]["source"].is_string(),
        "provenance keeps the source"
    );
    assert_eq!(survivor["tags"].as_array().unwrap().len(), 2, "tags are united: {survivor}");
    let gone = daemon.get(&format!("/api/memories/{merged_id}")).await.body;
    assert!(gone["archivedAt"].is_string());
    assert_eq!(gone["metadata"]["mergedInto"], kept_id);
    assert_eq!(daemon.get("/api/memories").await.body["total"], 3);
    let audit = daemon.get(&format!("/api/governance/audit?memoryId={merged_id}")).await;
    assert_eq!(audit.body["entries"][0]["action"], "merge");

    for (body, field) in [
        (json!({"similarity": 0.2}), "similarity"),
        (json!({"staleAfterDays": 0}), "staleAfterDays"),
        (json!({"dryrun": true}), "dryrun"),
    ] {
        let message = daemon
            .post("/api/dream-cycle", body)
            .await
            .assert_error(422, "VALIDATION_ERROR")
            .to_owned();
        assert!(message.contains(field), "{message}");
    }
}

// Staleness depends on time: tested with an injected clock in cairn-memory's consolidate
// tests, not with sleeps here.

#[tokio::test]
async fn conflicts_go_to_review_and_are_settled() {
    let daemon = Daemon::start();
    let pnpm = daemon
        .remember(json!({"content": "Use pnpm in this repo.", "scope": "repo", "repo": "shop"}))
        .await;
    let npm = daemon
        .remember(
            json!({"content": "Always use npm for installs.", "scope": "repo", "repo": "shop"}),
        )
        .await;
    let tabs = daemon
        .remember(json!({"content": "Indent with tabs.", "scope": "repo", "repo": "shop"}))
        .await;
    let spaces = daemon.remember(json!({"content": "Use spaces for indentation, never tabs.", "scope": "repo", "repo": "shop"})).await;
    daemon.remember(json!({"content": "Use yarn.", "scope": "repo", "repo": "blog"})).await;

    let report = dream(&daemon, json!({})).await;
    let conflicts = report["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 2, "{report}");
    for id in [&pnpm, &npm, &tabs, &spaces] {
        assert_eq!(daemon.get(&format!("/api/memories/{id}")).await.body["status"], "review");
    }
    let listed = daemon.get("/api/conflicts").await.body;
    let open = listed["conflicts"].as_array().unwrap();
    assert_eq!(open.len(), 2);
    let manager = open.iter().find(|c| c["subject"] == "package manager").unwrap().clone();
    assert_eq!(manager["status"], "open");
    assert_eq!(manager["memories"].as_array().unwrap().len(), 2);
    assert!(manager["reason"].as_str().unwrap().contains("pnpm"));
    assert!(manager["id"].as_str().unwrap().starts_with("cfl_"));
    let indentation = open.iter().find(|c| c["subject"] != "package manager").unwrap().clone();

    assert!(
        dream(&daemon, json!({})).await["conflicts"].as_array().unwrap().is_empty(),
        "a pair is reported once"
    );

    let resolve = |id: &str| format!("/api/conflicts/{id}/resolve");
    let manager_id = manager["id"].as_str().unwrap();
    daemon
        .post(&resolve(manager_id), json!({"action": "keep"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&resolve(manager_id), json!({"action": "keep", "memoryId": "mem_other"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post(&resolve(manager_id), json!({"action": "flip"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    let kept = daemon.post(&resolve(manager_id), json!({"action": "keep", "memoryId": pnpm})).await;
    assert_eq!(kept.status, 200);
    assert_eq!(kept.body["status"], "resolved");
    assert_eq!(kept.body["resolution"], format!("keep {pnpm}"));
    assert_eq!(daemon.get(&format!("/api/memories/{pnpm}")).await.body["status"], "active");
    assert!(daemon.get(&format!("/api/memories/{npm}")).await.body["archivedAt"].is_string());
    daemon
        .post(&resolve(manager_id), json!({"action": "keepBoth"}))
        .await
        .assert_error(409, "CONFLICT");

    let merged = daemon
        .post(&resolve(indentation["id"].as_str().unwrap()), json!({"action": "merge", "content": "Indent with tabs in Makefiles, spaces elsewhere."}))
        .await;
    assert_eq!(merged.status, 200);
    let new_id =
        merged.body["resolution"].as_str().unwrap().strip_prefix("merge ").unwrap().to_owned();
    let new_memory = daemon.get(&format!("/api/memories/{new_id}")).await.body;
    assert_eq!(new_memory["content"], "Indent with tabs in Makefiles, spaces elsewhere.");
    assert_eq!(new_memory["metadata"]["mergedFrom"].as_array().unwrap().len(), 2);
    assert!(daemon.get(&format!("/api/memories/{tabs}")).await.body["archivedAt"].is_string());

    assert!(daemon.get("/api/conflicts").await.body["conflicts"].as_array().unwrap().is_empty());
    assert_eq!(
        daemon.get("/api/conflicts?status=resolved").await.body["conflicts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    daemon.get("/api/conflicts?status=maybe").await.assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/conflicts/cfl_nope/resolve", json!({"action": "keepBoth"}))
        .await
        .assert_error(404, "CONFLICT_NOT_FOUND");
    let empty_body = daemon.request(Method::POST, "/api/dream-cycle", Body::None).await;
    assert_eq!(empty_body.status, 200, "an empty body takes the defaults");
}

#[tokio::test]
async fn the_daemon_dreams_on_a_schedule() {
    let daemon = Daemon::start_with(&["--dream-every", "300ms"], &[]);
    daemon.remember(json!({"content": "Use pnpm.", "scope": "repo", "repo": "app"})).await;
    daemon.remember(json!({"content": "Use npm.", "scope": "repo", "repo": "app"})).await;
    let mut found = Value::Null;
    for _ in 0..50 {
        let listed = daemon.get("/api/conflicts").await.body;
        if !listed["conflicts"].as_array().unwrap().is_empty() {
            found = listed;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let memory_id = found["conflicts"][0]["memoryIds"][0]
        .as_str()
        .expect("the scheduled cycle found the conflict")
        .to_owned();
    let audit = daemon.get(&format!("/api/governance/audit?memoryId={memory_id}")).await;
    assert_eq!(audit.body["entries"][0]["actor"], "system:dream");
}

#[tokio::test]
async fn approving_one_side_of_a_conflict_leaves_the_other_stale() {
    let daemon = Daemon::start();
    let pnpm =
        daemon.remember(json!({"content": "Use pnpm.", "scope": "repo", "repo": "app"})).await;
    let npm = daemon.remember(json!({"content": "Use npm.", "scope": "repo", "repo": "app"})).await;
    // A dry run names what it would record, and records nothing.
    let dry = dream(&daemon, json!({"dryRun": true})).await;
    assert_eq!(dry["conflicts"].as_array().unwrap().len(), 1, "{dry}");
    assert!(daemon.get("/api/conflicts").await.body["conflicts"].as_array().unwrap().is_empty());
    let cli = daemon.run_client(&["dream", "--dry-run"]);
    let said = String::from_utf8_lossy(&cli.stdout);
    assert!(said.contains("a dry run records nothing"), "{said}");
    assert!(!said.contains("cfl_"), "no id a later call cannot find: {said}");

    dream(&daemon, json!({})).await;
    let approved = daemon.post(&format!("/api/governance/review/{pnpm}/approve"), json!({})).await;
    assert_eq!(approved.status, 200, "{approved:?}");
    let other = daemon.get(&format!("/api/memories/{npm}")).await;
    assert_eq!(other.body["status"], "stale", "{other:?}");
    assert!(other.body["archivedAt"].is_string(), "{other:?}");
}
