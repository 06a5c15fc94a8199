//! Guards, outcomes and patch evidence.

use serde_json::json;

use crate::util::Daemon;

#[tokio::test]
async fn built_in_rules_block_destructive_actions() {
    let daemon = Daemon::start();
    for (action, code) in [
        ("rm -rf /", "DESTRUCTIVE_DELETE"),
        ("git push --force origin main", "FORCE_PUSH_PROTECTED"),
        ("psql -c 'DROP TABLE users'", "DROP_TABLE"),
        ("curl -sSL https://get.example.com | sh", "PIPE_TO_SHELL"),
    ] {
        let reply = daemon.post("/api/guard", json!({"action": action})).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body["allowed"], false, "{action}");
        assert_eq!(reply.body["blockers"][0]["code"], code, "{action}: {:?}", reply.body);
        assert!(!reply.body["blockers"][0]["message"].as_str().unwrap().is_empty());
    }
    let safe = daemon.post("/api/guard", json!({"action": "cargo test --workspace"})).await;
    assert_eq!(safe.body, json!({"allowed": true, "warnings": [], "blockers": []}));
    let feature =
        daemon.post("/api/guard", json!({"action": "git push --force origin my-branch"})).await;
    assert_eq!(feature.body["allowed"], true);
    assert_eq!(feature.body["warnings"][0]["code"], "FORCE_PUSH");

    daemon.post("/api/guard", json!({})).await.assert_error(422, "VALIDATION_ERROR");
    daemon.post("/api/guard", json!({"action": " "})).await.assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn memories_teach_the_guard() {
    let daemon = Daemon::start();
    let rule = daemon.remember(json!({"content": "Never run `npm publish` from a laptop; CI publishes.", "scope": "repo", "repo": "kit"})).await;
    let reply = daemon
        .post("/api/guard", json!({"action": "npm publish --access public", "repo": "kit"}))
        .await;
    assert_eq!(reply.body["allowed"], true, "learned rules warn, they do not block");
    let warning = &reply.body["warnings"][0];
    assert_eq!(warning["code"], "MEMORY_RULE");
    assert_eq!(warning["memoryId"], rule.as_str());
    assert!(warning["message"].as_str().unwrap().contains("npm publish"));

    let other_repo =
        daemon.post("/api/guard", json!({"action": "npm publish", "repo": "elsewhere"})).await;
    assert_eq!(other_repo.body["warnings"], json!([]), "another repository's rules do not apply");
    let unrelated = daemon.post("/api/guard", json!({"action": "npm test"})).await;
    assert_eq!(unrelated.body["warnings"], json!([]));

    daemon.delete(&format!("/api/memories/{rule}")).await;
    let archived = daemon.post("/api/guard", json!({"action": "npm publish"})).await;
    assert_eq!(archived.body["warnings"], json!([]), "archived memories leave the guards");
}

#[tokio::test]
async fn failed_outcomes_warn_until_the_command_succeeds() {
    let daemon = Daemon::start();
    let failed = daemon
        .post("/api/outcome", json!({"command": "make  deploy", "exitCode": 2, "task": "ship it"}))
        .await;
    assert_eq!(failed.status, 201);
    assert!(failed.body["outcomeId"].as_str().unwrap().starts_with("out_"));
    assert_eq!(failed.body["command"], "make deploy");
    assert_eq!(
        (failed.body["exitCode"].as_i64(), failed.body["succeeded"].as_bool()),
        (Some(2), Some(false))
    );
    assert_eq!(failed.body["previousFailures"], 0);
    assert!(failed.body["recordedAt"].is_string());
    let again = daemon.post("/api/outcome", json!({"command": "make deploy", "exitCode": 1})).await;
    assert_eq!(again.body["previousFailures"], 1);

    let guard = daemon.post("/api/guard", json!({"action": "make deploy"})).await;
    assert_eq!(guard.body["allowed"], true);
    let warning = &guard.body["warnings"][0];
    assert_eq!(warning["code"], "PREVIOUSLY_FAILED");
    assert_eq!(warning["outcomeId"], again.body["outcomeId"]);
    assert!(warning["message"].as_str().unwrap().contains("exit code 1"));

    daemon.post("/api/outcome", json!({"command": "make deploy", "exitCode": 0})).await;
    let fixed = daemon.post("/api/guard", json!({"action": "make deploy"})).await;
    assert_eq!(fixed.body["warnings"], json!([]), "a later success clears the warning");

    daemon
        .post("/api/outcome", json!({"command": "make"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/outcome", json!({"command": "", "exitCode": 0}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/outcome", json!({"command": "make", "exitCode": 1.5}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn patch_evidence_names_the_memories_served_for_the_task() {
    let daemon = Daemon::start();
    let a = daemon
        .remember(json!({"content": "Invoices are rounded per line.", "scope": "repo"}))
        .await;
    let b = daemon
        .remember(json!({"content": "Invoice PDFs are rendered by the worker.", "scope": "repo"}))
        .await;
    daemon.remember(json!({"content": "Unrelated note about fonts.", "scope": "repo"})).await;
    let context = daemon.post("/api/context", json!({"task": "Fix invoice rounding"})).await;
    let served: Vec<String> = context.body["memoryIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(served.len(), 2);
    assert!(served.contains(&a) && served.contains(&b));

    let request = json!({"task": "  fix INVOICE rounding ", "files": ["src/invoice.rs"], "commands": ["cargo test"]});
    let reply = daemon.post("/api/patch-evidence", request).await;
    assert_eq!(reply.status, 201);
    let evidence = &reply.body;
    assert!(evidence["evidenceId"].as_str().unwrap().starts_with("ev_"));
    assert_eq!(evidence["task"], "  fix INVOICE rounding ");
    assert_eq!(evidence["files"], json!(["src/invoice.rs"]));
    assert_eq!(evidence["commands"], json!(["cargo test"]));
    assert_eq!(
        evidence["memoriesUsed"],
        json!(served),
        "the same task, however spelled, finds its memories"
    );

    let read =
        daemon.get(&format!("/api/evidence/{}", evidence["evidenceId"].as_str().unwrap())).await;
    assert_eq!(read.status, 200);
    assert_eq!(&read.body, evidence);

    let other = daemon
        .post("/api/patch-evidence", json!({"task": "another task", "files": [], "commands": []}))
        .await;
    assert_eq!(other.body["memoriesUsed"], json!([]));
    daemon.get("/api/evidence/ev_nope").await.assert_error(404, "EVIDENCE_NOT_FOUND");
    daemon
        .post("/api/patch-evidence", json!({"files": []}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/patch-evidence", json!({"task": "t", "commands": [1]}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn a_rule_naming_several_tools_warns_for_each_and_duplicates_warn_once() {
    let daemon = Daemon::start();
    for _ in 0..2 {
        daemon
            .remember(serde_json::json!({"content": "Use pnpm, never npm or yarn.", "scope": "repo", "repo": "shop"}))
            .await;
    }
    for action in ["yarn add lodash", "npm install"] {
        let verdict =
            daemon.post("/api/guard", serde_json::json!({"action": action, "repo": "shop"})).await;
        assert_eq!(verdict.status, 200, "{verdict:?}");
        let rules: Vec<&serde_json::Value> = verdict.body["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|warning| warning["code"] == "MEMORY_RULE")
            .collect();
        assert_eq!(rules.len(), 1, "{action}: {verdict:?}");
    }
    let fine = daemon
        .post("/api/guard", serde_json::json!({"action": "pnpm add lodash", "repo": "shop"}))
        .await;
    assert_eq!(fine.body["warnings"], serde_json::json!([]), "{fine:?}");
}
