//! The `cairn` client subcommands against the real daemon: the forms the README gives,
//! `--json` for scripts, exit codes, errors on stderr, and `cairn chat` answering a form.

use serde_json::Value;

use crate::util::{Daemon, unused_url};

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command that must succeed and returns its standard output.
fn ok(daemon: &Daemon, args: &[&str]) -> String {
    let output = daemon.run_client(args);
    assert!(output.status.success(), "cairn {args:?}: {}{}", stdout(&output), stderr(&output));
    stdout(&output)
}

fn json(daemon: &Daemon, args: &[&str]) -> Value {
    let text = ok(daemon, args);
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("cairn {args:?}: {error}: {text}"))
}

#[tokio::test]
async fn memories_search_and_context_from_the_command_line() {
    let daemon = Daemon::start();
    let created = json(
        &daemon,
        &[
            "memories",
            "add",
            "Use pnpm, not npm, in this repo.",
            "--scope",
            "repo",
            "--repo",
            "shop",
            "--tag",
            "tooling",
            "--tag",
            "js",
            "--json",
        ],
    );
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["scope"], "repo");
    assert_eq!(created["tags"], serde_json::json!(["tooling", "js"]));

    let list = json(&daemon, &["memories", "list", "--scope", "repo", "--limit", "10", "--json"]);
    assert_eq!((list["total"].as_u64(), list["limit"].as_u64()), (Some(1), Some(10)));
    assert_eq!(list["memories"][0]["id"], id.as_str());
    let human = ok(&daemon, &["memories", "list"]);
    assert!(human.contains(&id) && human.contains("Use pnpm"), "{human}");
    assert_eq!(
        json(&daemon, &["memories", "get", &id, "--json"])["content"],
        "Use pnpm, not npm, in this repo."
    );
    assert!(ok(&daemon, &["memories", "get", &id]).contains("repo shop"));

    let edited = json(&daemon, &["memories", "edit", &id, "--status", "stale", "--json"]);
    assert_eq!(edited["status"], "stale");
    ok(&daemon, &["memories", "archive", &id]);
    assert_eq!(json(&daemon, &["memories", "list", "--json"])["total"], 0);
    assert!(json(&daemon, &["memories", "restore", &id, "--json"])["archivedAt"].is_null());
    ok(&daemon, &["memories", "edit", &id, "--status", "active"]);

    let found = json(&daemon, &["search", "pnpm", "--repo", "shop", "--json"]);
    assert_eq!(found["hits"][0]["memory"]["id"], id.as_str());
    let context = ok(
        &daemon,
        &["context", "install dependencies with pnpm", "--repo", "shop", "--budget", "200"],
    );
    assert!(context.starts_with("- ") && context.contains("Use pnpm"), "{context}");
}

#[tokio::test]
async fn guard_exit_codes_and_errors_on_stderr() {
    let daemon = Daemon::start();
    let allowed = daemon.run_client(&["guard", "ls -la"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let blocked = daemon.run_client(&["guard", "rm -rf /"]);
    assert_eq!(blocked.status.code(), Some(2));
    assert!(stderr(&blocked).starts_with("blocked: "), "{}", stderr(&blocked));

    ok(&daemon, &["outcome", "make deploy", "--exit-code", "2", "--repo", "shop"]);
    let warned = daemon.run_client(&["guard", "make deploy", "--repo", "shop"]);
    assert_eq!(warned.status.code(), Some(0));
    assert!(
        stderr(&warned).contains("warning: ") && stderr(&warned).contains("PREVIOUSLY_FAILED"),
        "{}",
        stderr(&warned)
    );

    let missing = daemon.run_client(&["memories", "get", "mem_nope"]);
    assert_eq!(missing.status.code(), Some(1));
    let message = stderr(&missing);
    assert!(message.starts_with("error: MEMORY_NOT_FOUND: "), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");

    let closed = unused_url();
    let down = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["search", "anything", "--url", &closed])
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(1));
    let message = stderr(&down);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.contains(&format!("cannot reach the Cairn daemon at {closed}")), "{message}");
}

#[tokio::test]
async fn review_conflicts_dream_evidence_and_conversations() {
    let daemon = Daemon::start();
    assert!(ok(&daemon, &["review", "list"]).contains("nothing to review"));
    assert!(
        json(&daemon, &["conflicts", "list", "--json"])["conflicts"].as_array().unwrap().is_empty()
    );
    assert_eq!(json(&daemon, &["dream", "--dry-run", "--json"])["dryRun"], true);
    let evidence = json(
        &daemon,
        &["evidence", "record", "switch to pnpm", "--file", "package.json", "--json"],
    );
    let pack = ok(&daemon, &["evidence", "pack", "switch to pnpm"]);
    assert!(pack.contains(evidence["evidenceId"].as_str().unwrap()), "{pack}");

    let conversation = ok(&daemon, &["conversations", "create"]).trim().to_owned();
    assert!(conversation.starts_with("conv_"), "{conversation}");
    assert!(ok(&daemon, &["conversations", "list"]).contains(&conversation));
    let events = ok(&daemon, &["conversations", "events", &conversation, "--json"]);
    assert_eq!(serde_json::from_str::<Value>(events.lines().next().unwrap()).unwrap()["offset"], 0);
    ok(&daemon, &["conversations", "close", &conversation]);
    assert!(ok(&daemon, &["conversations", "show", &conversation]).contains("closed"));
}

#[tokio::test]
async fn chat_streams_replies_and_asks_open_prompts_as_questions() {
    let daemon = Daemon::start();
    let input = "I would like to book a demo\nAda\nada@example.com\n/quit\n";
    let output = daemon.run_client_with_input(&["chat"], input);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(text.contains("agent: Happy to set that up"), "{text}");
    assert!(text.contains("name:") && text.contains("email:"), "{text}");
    assert!(text.contains("Thanks Ada, we will write to ada@example.com"), "{text}");
    let list = json(&daemon, &["conversations", "list", "--json"]);
    let id = list["conversations"][0]["id"].as_str().unwrap();
    let replay = json(&daemon, &["conversations", "show", id, "--json"]);
    assert!(replay["openPrompts"].as_array().unwrap().is_empty(), "{replay}");
}

#[tokio::test]
async fn a_closed_pipe_ends_a_listing_quietly() {
    use std::io::Read as _;
    use std::process::Stdio;
    let daemon = Daemon::start();
    for n in 0..200 {
        // 200 memories of 600 bytes: more than a pipe's buffer (64 KiB) holds.
        let content = format!("note number {n} about the build: {}", "details ".repeat(70));
        daemon.remember(serde_json::json!({"content": content, "scope": "user"})).await;
    }
    // `cairn memories list | head -c 10`: the reader goes away after a few bytes.
    let mut child = std::process::Command::new(crate::util::cairn_bin())
        .args(["memories", "list", "--limit", "200"])
        .env("CAIRN_URL", daemon.base_url())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_ne!(output.status.code(), Some(101), "{stderr}");
}

#[tokio::test]
async fn an_import_over_the_write_rate_waits_its_turn_and_finishes() {
    let daemon = Daemon::start_with(&["--rate-limit-bulk", "30"], &[]);
    let lines: String = (0..320)
        .map(|n| format!("{{\"content\": \"imported note {n}\", \"scope\": \"user\"}}\n"))
        .collect();
    // 32 batches of 10: the first 30 spend the minute's bulk budget, the last two wait.
    let output = crate::util::run_with_input(
        std::process::Command::new(crate::util::cairn_bin())
            .args(["memories", "import", "-", "--batch-size", "10"])
            .env("CAIRN_URL", daemon.base_url()),
        &lines,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("the write rate is spent, waiting"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("imported 320 memories"));
    assert_eq!(daemon.get("/api/health").await.body["memoryCount"], 320);
}

#[tokio::test]
async fn an_export_imports_into_another_daemon_unchanged() {
    let (a, b) = (Daemon::start(), Daemon::start());
    let kept = a
        .remember(
            serde_json::json!({"content": "Use pnpm, not npm.", "scope": "repo", "repo": "shop",
            "tags": ["tooling"], "source": "CLAUDE.md", "metadata": {"line": 3}}),
        )
        .await;
    let stale = a
        .remember(serde_json::json!({"content": "Deploys go through Jenkins.", "scope": "global"}))
        .await;
    assert_eq!(
        a.patch(&format!("/api/memories/{stale}"), serde_json::json!({"status": "stale"}))
            .await
            .status,
        200
    );
    let archived = a
        .remember(
            serde_json::json!({"content": "The old API lived on port 9000.", "scope": "user"}),
        )
        .await;
    assert_eq!(a.delete(&format!("/api/memories/{archived}")).await.status, 200);
    // A pack recalls `kept`; its count and time travel with it.
    let pack = a.post("/api/context", serde_json::json!({"task": "pnpm", "repo": "shop"})).await;
    assert_eq!(pack.status, 200, "{pack:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while a.get(&format!("/api/memories/{kept}")).await.body["recallCount"] != 1 {
        assert!(std::time::Instant::now() < deadline, "the pack's recall never landed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_string_lossy().into_owned();
    let exported = a.run_client(&["memories", "export", &path, "--include-archived"]);
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    assert_eq!(std::fs::read_to_string(file.path()).unwrap().lines().count(), 3);

    let imported = b.run_client(&["memories", "import", &path]);
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    assert!(String::from_utf8_lossy(&imported.stdout).contains("imported 3 memories"));
    for id in [&kept, &stale, &archived] {
        let (before, after) = (
            a.get(&format!("/api/memories/{id}")).await,
            b.get(&format!("/api/memories/{id}")).await,
        );
        assert_eq!(after.status, 200, "{after:?}");
        assert_eq!(before.body, after.body, "{id} came back unchanged");
    }
    let found = b.get("/api/search?q=pnpm").await;
    assert_eq!(found.body["hits"][0]["memory"]["id"], kept.as_str(), "searchable: {found:?}");
    // Again: nothing new, nothing changed.
    let again = b.run_client(&["memories", "import", &path]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("imported 0 memories"), "{again:?}");
}
