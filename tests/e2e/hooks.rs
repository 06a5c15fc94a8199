//! `cairn hook pre-tool-use|post-tool-use` fed real Claude Code hook payloads: a blocked
//! command exits 2 with the reason on stderr, a failed command warns the next time it is
//! about to run in the same repository, and a daemon that is down or never answers still
//! blocks what the built-in rules block.

use std::process::Command;
use std::time::{Duration, Instant};

use cairn_test_support::standin::{Answer, StandIn};
use serde_json::{Value, json};

use crate::util::{Daemon, run_with_input, unused_url};

fn hook(url: &str, event: &str, payload: &Value) -> std::process::Output {
    run_with_input(
        Command::new(env!("CARGO_BIN_EXE_cairn")).args(["hook", event]).env("CAIRN_URL", url),
        &payload.to_string(),
    )
}

/// A PreToolUse payload for a Bash command, as Claude Code sends it.
fn pre_tool_use(command: &str, cwd: &str) -> Value {
    json!({
        "session_id": "abc123",
        "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
        "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Run it", "timeout": 120000, "run_in_background": false},
        "tool_use_id": "toolu_01ABC123"
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn guards_block_before_and_outcomes_warn_after() {
    let daemon = Daemon::start();
    let url = daemon.base_url().to_owned();
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("shop");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("web/src")).unwrap();
    let cwd = repo.join("web/src").to_string_lossy().into_owned();

    // A destructive command is refused: exit 2, the reason on stderr.
    let blocked = hook(&url, "pre-tool-use", &pre_tool_use("rm -rf /", &cwd));
    assert_eq!(blocked.status.code(), Some(2), "{}", text(&blocked.stderr));
    assert!(
        text(&blocked.stderr).starts_with("Cairn blocked this command: "),
        "{}",
        text(&blocked.stderr)
    );

    // An ordinary one passes silently.
    let fine = hook(&url, "pre-tool-use", &pre_tool_use("make deploy", &cwd));
    assert_eq!((fine.status.code(), fine.stdout.is_empty()), (Some(0), true));

    // It fails (PostToolUseFailure carries `Exit code N` in `error`): the outcome is kept
    // for the repository the cwd is in.
    let failure = json!({
        "session_id": "abc123",
        "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": "make deploy", "description": "Deploy"},
        "tool_use_id": "toolu_01ABC124",
        "error": "Exit code 2\nmake: *** [deploy] Error 2",
        "is_interrupt": false,
        "duration_ms": 4187
    });
    let recorded = hook(&url, "post-tool-use", &failure);
    assert_eq!(recorded.status.code(), Some(0), "{}", text(&recorded.stderr));
    let guard = daemon.post("/api/guard", json!({"action": "make deploy", "repo": "shop"})).await;
    assert_eq!(guard.body["warnings"][0]["code"], "PREVIOUSLY_FAILED", "{:?}", guard.body);

    // Next time, the agent is told before it runs it again (allowed, with context).
    let warned = hook(&url, "pre-tool-use", &pre_tool_use("make deploy", &cwd));
    assert_eq!(warned.status.code(), Some(0));
    let output: Value = serde_json::from_slice(&warned.stdout).expect("a JSON decision");
    let context = output["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert_eq!(output["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert!(context.contains("PREVIOUSLY_FAILED") && context.contains("make deploy"), "{context}");

    // Other tools are not Cairn's business.
    let write = json!({"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": cwd,
        "tool_input": {"file_path": "/etc/passwd", "content": "x"}});
    let ignored = hook(&url, "pre-tool-use", &write);
    assert_eq!((ignored.status.code(), ignored.stdout.is_empty()), (Some(0), true));

    // Once it succeeds (PostToolUse), it stops warning.
    let success = json!({
        "session_id": "abc123", "cwd": cwd, "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "make deploy"},
        "tool_response": {"stdout": "deployed", "stderr": "", "interrupted": false, "isImage": false},
        "tool_use_id": "toolu_01ABC125"
    });
    assert_eq!(hook(&url, "post-tool-use", &success).status.code(), Some(0));
    let quiet = hook(&url, "pre-tool-use", &pre_tool_use("make deploy", &cwd));
    assert_eq!((quiet.status.code(), text(&quiet.stdout)), (Some(0), String::new()));
}

#[tokio::test]
async fn a_daemon_down_or_silent_never_lets_a_destructive_command_through() {
    // Down: the built-in rules are checked in the hook itself and still block.
    let closed = unused_url();
    let down = hook(&closed, "pre-tool-use", &pre_tool_use("rm -rf /", "/tmp"));
    assert_eq!(down.status.code(), Some(2), "{}", text(&down.stderr));
    let stderr = text(&down.stderr);
    assert!(stderr.starts_with("Cairn blocked this command: "), "{stderr}");
    assert!(stderr.contains("only the built-in rules were checked"), "{stderr}");
    // A harmless command passes, saying what was not consulted.
    let fine = hook(&closed, "pre-tool-use", &pre_tool_use("cargo test", "/tmp"));
    assert_eq!(fine.status.code(), Some(0), "{}", text(&fine.stderr));
    assert!(
        text(&fine.stderr).contains("not the rules learned from memories"),
        "{}",
        text(&fine.stderr)
    );

    // A daemon that accepts and never answers: the same, within the hook's time limit.
    let silent = StandIn::start(|_| Answer::silence(Duration::from_secs(60)));
    let started = Instant::now();
    let stuck = run_with_input(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["hook", "pre-tool-use", "--timeout", "1s"])
            .env("CAIRN_URL", silent.url()),
        &pre_tool_use("git push --force origin main", "/tmp").to_string(),
    );
    assert_eq!(stuck.status.code(), Some(2), "{}", text(&stuck.stderr));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let stuck = run_with_input(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["guard", "--timeout", "1s", "rm -rf ~"])
            .env("CAIRN_URL", silent.url()),
        "",
    );
    assert_eq!(stuck.status.code(), Some(2), "{}", text(&stuck.stderr));
    assert!(text(&stuck.stderr).contains("only the built-in rules"), "{}", text(&stuck.stderr));

    // What cannot be read has no command to check; an outcome that cannot be recorded is
    // no reason to stop the agent.
    let garbage = run_with_input(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["hook", "pre-tool-use"])
            .env("CAIRN_URL", &closed),
        "this is not json",
    );
    assert_eq!(garbage.status.code(), Some(0));
    let after = hook(
        &closed,
        "post-tool-use",
        &json!({"hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash", "tool_input": {"command": "make"}, "error": "Exit code 1"}),
    );
    assert_eq!(after.status.code(), Some(0));
}

#[tokio::test]
async fn session_start_and_prompt_hooks_hand_the_agent_its_memory() {
    let daemon = Daemon::start();
    let url = daemon.base_url().to_owned();
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("shop");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let cwd = repo.to_string_lossy().into_owned();
    daemon
        .remember(
            json!({"content": "Use pnpm, not npm, in this repo.", "scope": "repo", "repo": "shop"}),
        )
        .await;
    daemon
        .remember(json!({"content": "The checkout page talks to Stripe through web/src/pay.ts.", "scope": "repo", "repo": "shop"}))
        .await;

    let session = json!({"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": cwd,
        "hook_event_name": "SessionStart", "source": "startup"});
    let started = hook(&url, "session-start", &session);
    assert_eq!(started.status.code(), Some(0), "{}", text(&started.stderr));
    let output: Value = serde_json::from_slice(&started.stdout).expect("the hook's JSON output");
    assert_eq!(output["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = output["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.contains("repository shop"), "{context}");
    assert!(context.contains("Use pnpm, not npm"), "the standing rule: {context}");

    let prompt = json!({"session_id": "s1", "cwd": cwd, "hook_event_name": "UserPromptSubmit",
        "prompt": "fix the Stripe checkout bug"});
    let asked = hook(&url, "user-prompt-submit", &prompt);
    assert_eq!(asked.status.code(), Some(0), "{}", text(&asked.stderr));
    let output: Value = serde_json::from_slice(&asked.stdout).unwrap();
    assert_eq!(output["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let context = output["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.contains("web/src/pay.ts"), "{context}");

    // Nothing to add prints nothing; a daemon that is down is a line on stderr, exit 0.
    let elsewhere = work.path().join("other");
    std::fs::create_dir_all(elsewhere.join(".git")).unwrap();
    let other = json!({"cwd": elsewhere.to_string_lossy(), "hook_event_name": "UserPromptSubmit",
        "prompt": "zzqx wibble"});
    let nothing = hook(&url, "user-prompt-submit", &other);
    assert_eq!(
        (nothing.status.code(), nothing.stdout.is_empty()),
        (Some(0), true),
        "{}",
        text(&nothing.stdout)
    );
    let down = hook(&unused_url(), "user-prompt-submit", &prompt);
    assert_eq!((down.status.code(), down.stdout.is_empty()), (Some(0), true));
    assert!(text(&down.stderr).contains("no memory was added"), "{}", text(&down.stderr));
}

#[tokio::test]
async fn hook_install_merges_claude_settings_once_and_uninstall_removes_only_its_own() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    std::fs::create_dir_all(project.path().join(".claude")).unwrap();
    let theirs = json!({"permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "./lint.sh"}]}]}});
    let settings_file = project.path().join(".claude/settings.json");
    std::fs::write(&settings_file, theirs.to_string()).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["hook"])
            .args(args)
            .current_dir(project.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let said = run(&["install", "--claude"]);
    assert!(said.contains("hooks.PreToolUse (Bash): cairn hook pre-tool-use"), "{said}");
    assert!(said.contains("mcpServers.cairn"), "{said}");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_file).unwrap()).unwrap();
    assert_eq!(settings["permissions"], theirs["permissions"], "theirs kept");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{settings}");
    for event in ["PostToolUse", "PostToolUseFailure", "SessionStart", "UserPromptSubmit"] {
        assert!(settings["hooks"][event].is_array(), "{event}: {settings}");
    }
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(mcp["mcpServers"]["cairn"], json!({"command": "cairn", "args": ["mcp"]}));

    assert!(run(&["install", "--claude"]).contains("nothing to change"), "idempotent");
    let said = run(&["uninstall", "--claude"]);
    assert!(said.contains("removed"), "{said}");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_file).unwrap()).unwrap();
    assert_eq!(settings, theirs, "exactly what install added is gone");
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(project.path().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(mcp, json!({}));
}

#[tokio::test]
async fn one_repository_name_for_hooks_connectors_and_status() {
    let work = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(&["--connector-root", &work.path().to_string_lossy()], &[]);
    let url = daemon.base_url().to_owned();
    // A checkout whose folder is not its name: its origin says `shop`.
    let root = work.path().join("Shop-Checkout");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(
        root.join(".git/config"),
        "[remote \"origin\"]\n\turl = git@github.com:acme/Shop.git\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/CLAUDE.md"),
        "# Rules\n\nNever run `make deploy` from a laptop.\n",
    )
    .unwrap();

    // The project's docs, imported by their folder, land in the project's repository.
    let added = daemon
        .post(
            "/api/connectors",
            json!({"kind": "folder", "path": root.join("docs").to_string_lossy()}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    let connector = added.body;
    assert_eq!(connector["repo"], "shop", "{connector}");
    let id = connector["id"].as_str().unwrap();
    let synced = daemon.post(&format!("/api/connectors/{id}/sync"), json!({})).await;
    assert_eq!(synced.status, 200, "{synced:?}");

    // The hook, from anywhere in the checkout, names the same repository, and the rule warns.
    let cwd = root.join("docs").to_string_lossy().into_owned();
    let warned = hook(&url, "pre-tool-use", &pre_tool_use("make deploy", &cwd));
    assert_eq!(warned.status.code(), Some(0), "{}", text(&warned.stderr));
    assert!(
        text(&warned.stdout).contains("make deploy"),
        "the rule warned: {}",
        text(&warned.stdout)
    );

    let status = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("status")
        .current_dir(&root)
        .env("CAIRN_URL", &url)
        .env_remove("CAIRN_REPO")
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", text(&status.stderr));
    let said = text(&status.stdout);
    assert!(said.contains("repository  shop (the git repository at"), "{said}");
    assert!(said.contains("named by its origin remote"), "{said}");
    assert!(said.contains("retrieval:"), "{said}");
}
