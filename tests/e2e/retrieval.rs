//! Retrieval: ranked search, context packs within token budgets, coding context.

use serde_json::{Value, json};

use crate::util::Daemon;

fn ids(values: &Value) -> Vec<String> {
    values.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn search_ranks_hits_and_applies_filters() {
    let daemon = Daemon::start();
    let strong = daemon.remember(json!({"content": "The flaky integration test flakes when the test database is cold.", "scope": "repo", "repo": "api"})).await;
    let weak = daemon
        .remember(
            json!({"content": "Lunch is at noon; also one test was flaky.", "scope": "global"}),
        )
        .await;
    daemon
        .remember(json!({"content": "Use tabs in Makefiles.", "scope": "repo", "repo": "api"}))
        .await;

    let reply = daemon.get("/api/search?q=flaky%20integration%20test").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["query"], "flaky integration test");
    let hits = reply.body["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0]["memory"]["id"], strong.as_str());
    assert_eq!(hits[1]["memory"]["id"], weak.as_str());
    assert!(hits[0]["score"].as_f64().unwrap() > hits[1]["score"].as_f64().unwrap());

    let scoped = daemon.get("/api/search?q=flaky&scope=global").await;
    assert_eq!(scoped.body["hits"].as_array().unwrap().len(), 1);
    assert_eq!(scoped.body["hits"][0]["memory"]["id"], weak.as_str());
    // A repository's search: its memories and those of no repository, not another's.
    let elsewhere = daemon
        .remember(json!({"content": "A flaky test, long ago.", "scope": "task", "repo": "web"}))
        .await;
    let by_repo = daemon.get("/api/search?q=flaky&repo=api").await;
    let found: Vec<&str> = by_repo.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["memory"]["id"].as_str().unwrap())
        .collect();
    assert!(found.contains(&strong.as_str()) && found.contains(&weak.as_str()), "{found:?}");
    assert!(!found.contains(&elsewhere.as_str()), "{found:?}");
    let limited = daemon.get("/api/search?q=flaky&limit=1").await;
    assert_eq!(limited.body["hits"].as_array().unwrap().len(), 1);

    let searched = daemon.get(&format!("/api/memories/{strong}")).await;
    assert_eq!(searched.body["recallCount"], 0, "searching is not recall");

    daemon.get("/api/search").await.assert_error(422, "VALIDATION_ERROR");
    daemon.get("/api/search?q=%20").await.assert_error(422, "VALIDATION_ERROR");
    daemon.get("/api/search?q=x&status=gone").await.assert_error(422, "VALIDATION_ERROR");
}

#[tokio::test]
async fn context_packs_stay_within_the_token_budget() {
    let daemon = Daemon::start();
    let mut stored = Vec::new();
    for i in 0..40 {
        let content = format!(
            "Deploy note {i}: the deploy pipeline runs migrations, then the canary, then waits {i} minutes before the full deploy."
        );
        stored.push(
            daemon.remember(json!({"content": content, "scope": "repo", "repo": "shop"})).await,
        );
    }
    for budget in [1, 30, 100, 500, 5000] {
        let reply = daemon
            .post(
                "/api/context",
                json!({"task": "deploy the shop", "repo": "shop", "tokenBudget": budget}),
            )
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
        let pack = &reply.body;
        let context = pack["context"].as_str().unwrap();
        let tokens = pack["tokenCount"].as_u64().unwrap();
        assert!(tokens <= budget, "budget {budget}: {tokens} tokens");
        assert_eq!(
            tokens as usize,
            cairn_memory::count_tokens(context),
            "tokenCount is the real o200k count"
        );
        assert_eq!(pack["memoriesUsed"].as_u64().unwrap() as usize, ids(&pack["memoryIds"]).len());
        if budget >= 100 {
            assert!(pack["memoriesUsed"].as_u64().unwrap() >= 1);
        }
        if budget == 5000 {
            assert_eq!(pack["memoriesUsed"], 40, "a large budget takes every relevant memory");
        }
        for id in ids(&pack["memoryIds"]) {
            assert!(stored.contains(&id));
        }
    }
    let nothing =
        daemon.post("/api/context", json!({"task": "deploy the shop", "tokenBudget": 1})).await;
    assert_eq!(
        (nothing.body["context"].as_str(), nothing.body["memoriesUsed"].as_u64()),
        (Some(""), Some(0))
    );
}

#[tokio::test]
async fn context_ranks_relevance_scope_and_repo_and_marks_recall() {
    let daemon = Daemon::start();
    let pnpm = daemon.remember(json!({"content": "In the shop repo, install dependencies with pnpm install.", "scope": "repo", "repo": "shop"})).await;
    let other_repo = daemon.remember(json!({"content": "Install dependencies with yarn install.", "scope": "repo", "repo": "blog"})).await;
    let user = daemon
        .remember(json!({"content": "I prefer verbose install logs.", "scope": "user"}))
        .await;
    let unrelated =
        daemon.remember(json!({"content": "The office closes at six.", "scope": "global"})).await;

    let reply = daemon
        .post(
            "/api/context",
            json!({"task": "install dependencies", "repo": "shop", "tokenBudget": 500}),
        )
        .await;
    assert_eq!(reply.status, 200);
    let used = ids(&reply.body["memoryIds"]);
    assert_eq!(
        used,
        vec![pnpm.clone(), user.clone()],
        "relevant first; other repos and unrelated memories left out"
    );
    let context = reply.body["context"].as_str().unwrap();
    assert!(
        context.starts_with("- [repo] In the shop repo, install dependencies with pnpm install.\n"),
        "{context}"
    );

    let recalled = daemon.get(&format!("/api/memories/{pnpm}")).await.body;
    assert!(recalled["lastRecalledAt"].is_string(), "used memories get lastRecalledAt");
    assert_eq!(recalled["recallCount"], 1);
    assert_eq!(
        daemon.get(&format!("/api/memories/{other_repo}")).await.body["lastRecalledAt"],
        json!(null)
    );
    assert_eq!(
        daemon.get(&format!("/api/memories/{unrelated}")).await.body["lastRecalledAt"],
        json!(null)
    );

    let without_repo = daemon.post("/api/context", json!({"task": "install dependencies"})).await;
    assert_eq!(
        without_repo.body["memoriesUsed"], 3,
        "without a repo every repository's memories may serve"
    );

    for (body, field) in [
        (json!({"repo": "shop"}), "task"),
        (json!({"task": ""}), "task"),
        (json!({"task": "x", "tokenBudget": 0}), "tokenBudget"),
        (json!({"task": "x", "tokenBudget": -5}), "tokenBudget"),
        (json!({"task": "x", "tokenBudget": "many"}), "tokenBudget"),
        (json!({"task": "x", "tokenBudget": 2_000_000}), "tokenBudget"),
    ] {
        let message = daemon
            .post("/api/context", body.clone())
            .await
            .assert_error(422, "VALIDATION_ERROR")
            .to_owned();
        assert!(message.contains(field), "{body}: {message}");
    }
}

#[tokio::test]
async fn coding_context_weighs_the_files_a_task_touches() {
    let daemon = Daemon::start();
    let file_note = daemon.remember(json!({"content": "src/billing/invoice.rs rounds totals with banker's rounding; keep it.", "scope": "repo"})).await;
    let dir_note = daemon.remember(json!({"content": "Everything under src/billing/ must stay free of floating point.", "scope": "repo"})).await;
    let task_note = daemon
        .remember(json!({"content": "Refactors need a changelog entry.", "scope": "repo"}))
        .await;
    daemon.remember(json!({"content": "The logo is blue.", "scope": "global"})).await;

    let reply = daemon
        .post(
            "/api/coding-context",
            json!({"task": "refactor invoice totals", "files": ["src/billing/invoice.rs", "README.md"], "tokenBudget": 800}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let used = ids(&reply.body["memoryIds"]);
    assert_eq!(used[0], file_note, "the memory naming the file ranks first");
    assert!(used.contains(&dir_note) && used.contains(&task_note), "{used:?}");
    assert_eq!(used.len(), 3);
    assert_eq!(reply.body["files"][0]["path"], "src/billing/invoice.rs");
    assert_eq!(
        ids(&reply.body["files"][0]["memoryIds"]),
        vec![file_note.clone(), dir_note.clone()]
    );
    assert_eq!(reply.body["files"][1], json!({"path": "README.md", "memoryIds": []}));
    assert!(reply.body["tokenCount"].as_u64().unwrap() <= 800);

    daemon
        .post("/api/coding-context", json!({"task": "x", "files": "a.rs"}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
    daemon
        .post("/api/coding-context", json!({"task": "x", "files": [""]}))
        .await
        .assert_error(422, "VALIDATION_ERROR");
}
