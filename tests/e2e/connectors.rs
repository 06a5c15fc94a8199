//! Connectors over HTTP: folders and git repositories imported, re-synced without
//! duplicates, their health, removal, and bad input.

use std::path::Path;
use std::process::Command;

use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon};

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(repository: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(repository)
        .args([
            "-c",
            "user.name=Ada",
            "-c",
            "user.email=ada@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repository)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A daemon whose connectors may read the temporary directories the tests make.
fn daemon() -> Daemon {
    let temp = std::env::temp_dir();
    Daemon::start_with(&[], &[("SERVICE_CONNECTOR_ROOTS", temp.to_str().unwrap())])
}

async fn add(daemon: &Daemon, body: Value) -> String {
    let reply = daemon.post("/api/connectors", body).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["id"].as_str().unwrap().to_owned()
}

async fn sync(daemon: &Daemon, id: &str) -> Value {
    let reply =
        daemon.request(Method::POST, &format!("/api/connectors/{id}/sync"), Body::None).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body
}

#[tokio::test]
async fn folders_import_sections_and_resync_without_duplicates() {
    let daemon = daemon();
    let docs = tempfile::tempdir().unwrap();
    let root = docs.path();
    write(
        root,
        "AGENTS.md",
        "# Build\nRun `make build`.\n\n# Tests\nRun `make test` before pushing.\n",
    );
    write(root, "docs/setup.md", "Intro text.\n\n## Linux\nInstall libfoo.\n");
    write(root, "notes.txt", "Deploys happen on Tuesdays.");
    write(root, "node_modules/pkg/README.md", "# Ignored\nnever imported");
    write(root, "image.png", "not text");

    let id =
        add(&daemon, json!({"kind": "folder", "path": root.to_str().unwrap(), "repo": "shop"}))
            .await;
    let connector = daemon.get(&format!("/api/connectors/{id}")).await;
    assert_eq!(connector.body["kind"], "folder");
    assert_eq!(connector.body["scope"], "repo");
    assert_eq!(connector.body["lastSync"], json!(null));
    assert_eq!(
        daemon.get(&format!("/api/connectors/{id}/health")).await.body["status"],
        "never_synced"
    );

    let first = sync(&daemon, &id).await;
    assert_eq!(
        (first["status"].as_str(), first["imported"].as_u64(), first["unchanged"].as_u64()),
        (Some("ok"), Some(5), Some(0))
    );
    let memories = daemon.get("/api/memories?repo=shop").await;
    assert_eq!(memories.body["total"], 5);
    let tests_section = daemon.get("/api/search?q=pushing").await.body["hits"][0]["memory"].clone();
    assert!(tests_section["content"].as_str().unwrap().contains("make test"));
    assert_eq!(tests_section["source"], "AGENTS.md § Tests");
    assert_eq!(tests_section["metadata"]["connectorId"], id.as_str());
    assert!(daemon.get("/api/search?q=ignored").await.body["hits"].as_array().unwrap().is_empty());

    let again = sync(&daemon, &id).await;
    assert_eq!(
        (again["imported"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(5)),
        "{again}"
    );
    assert_eq!(
        daemon.get("/api/memories?repo=shop").await.body["total"],
        5,
        "a re-sync never duplicates"
    );

    write(
        root,
        "AGENTS.md",
        "# Build\nRun `just build`.\n\n# Tests\nRun `make test` before pushing.\n",
    );
    std::fs::remove_file(root.join("notes.txt")).unwrap();
    write(root, "CLAUDE.md", "# Style\nPrefer small functions.\n");
    let third = sync(&daemon, &id).await;
    let counts: Vec<u64> = ["imported", "updated", "unchanged", "archived"]
        .iter()
        .map(|k| third[*k].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 1, 3, 1], "{third}");
    assert_eq!(daemon.get("/api/memories?repo=shop").await.body["total"], 5);
    let build = daemon.get("/api/search?q=build").await.body["hits"][0]["memory"].clone();
    assert!(build["content"].as_str().unwrap().contains("just build"));
    assert!(daemon.get("/api/search?q=tuesdays").await.body["hits"].as_array().unwrap().is_empty());

    let health = daemon.get(&format!("/api/connectors/{id}/health")).await.body;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["memories"], 5);
    assert_eq!(health["lastSync"]["updated"], 1);
    assert!(health["lastSyncAt"].is_string());
    let audit = daemon
        .get(&format!("/api/governance/audit?memoryId={}", build["id"].as_str().unwrap()))
        .await;
    assert_eq!(audit.body["entries"][0]["action"], "import");

    let removed = daemon.delete(&format!("/api/connectors/{id}")).await;
    assert_eq!(removed.body, json!({"id": id, "archivedMemories": 5}));
    assert_eq!(
        daemon.get("/api/memories?repo=shop").await.body["total"],
        0,
        "its memories are archived"
    );
    daemon.get(&format!("/api/connectors/{id}")).await.assert_error(404, "CONNECTOR_NOT_FOUND");
}

#[tokio::test]
async fn git_repositories_import_commits_with_their_files() {
    let daemon = daemon();
    let repository = tempfile::tempdir().unwrap();
    let root = repository.path();
    git(root, &["init", "-q"]);
    write(root, "src/lib.rs", "pub fn add() {}");
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "Add the adder", "-m", "It adds."]);
    write(root, "README.md", "# Adder");
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "Document the adder"]);

    let id = add(&daemon, json!({"kind": "git", "path": root.to_str().unwrap()})).await;
    let first = sync(&daemon, &id).await;
    assert_eq!(first["imported"], 2, "{first}");
    let hit = daemon.get("/api/search?q=adds").await.body["hits"][0]["memory"].clone();
    assert!(hit["content"].as_str().unwrap().contains("Files: src/lib.rs"), "{hit}");
    assert!(hit["source"].as_str().unwrap().starts_with("commit "));
    assert_eq!(hit["tags"], json!(["connector", "git"]));

    write(root, "src/lib.rs", "pub fn add(a: i32) {}");
    git(root, &["commit", "-q", "-am", "Take an argument"]);
    let second = sync(&daemon, &id).await;
    assert_eq!((second["imported"].as_u64(), second["unchanged"].as_u64()), (Some(1), Some(2)));
}

#[tokio::test]
async fn bad_connectors_are_refused_and_failed_syncs_reported() {
    let daemon = daemon();
    let plain = tempfile::tempdir().unwrap();
    let plain_path = plain.path().to_str().unwrap().to_owned();
    let file = plain.path().join("file.md");
    std::fs::write(&file, "# x").unwrap();

    for (body, needle) in [
        (json!({"kind": "svn", "path": plain_path}), "kind"),
        (json!({"kind": "folder", "path": "relative/docs"}), "absolute"),
        (json!({"kind": "folder", "path": "/no/such/place"}), "does not exist"),
        (json!({"kind": "folder", "path": file.to_str().unwrap()}), "not a directory"),
        (json!({"kind": "git", "path": plain_path}), "not a git repository"),
        (json!({"kind": "git", "path": plain_path, "maxCommits": 0}), "maxCommits"),
        (json!({"path": plain_path}), "kind"),
    ] {
        let reply = daemon.post("/api/connectors", body.clone()).await;
        let message = reply.assert_error(422, "VALIDATION_ERROR").to_owned();
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(
        daemon.get("/api/connectors").await.body,
        json!({"connectors": []}),
        "nothing was created"
    );

    let gone = tempfile::tempdir().unwrap();
    let id = add(&daemon, json!({"kind": "folder", "path": gone.path().to_str().unwrap()})).await;
    drop(gone);
    let report = sync(&daemon, &id).await;
    assert_eq!(report["status"], "error");
    assert!(report["error"].as_str().unwrap().contains("does not exist"), "{report}");
    let health = daemon.get(&format!("/api/connectors/{id}/health")).await.body;
    assert_eq!(health["status"], "error");
    assert_eq!(health["lastSync"]["error"], report["error"]);

    daemon
        .request(Method::POST, "/api/connectors/conn_nope/sync", Body::None)
        .await
        .assert_error(404, "CONNECTOR_NOT_FOUND");
    daemon.get("/api/connectors/conn_nope/health").await.assert_error(404, "CONNECTOR_NOT_FOUND");
    daemon.delete("/api/connectors/conn_nope").await.assert_error(404, "CONNECTOR_NOT_FOUND");
}

#[tokio::test]
async fn the_cli_adds_syncs_and_lists_connectors() {
    let daemon = daemon();
    let docs = tempfile::tempdir().unwrap();
    for i in 0..30 {
        write(
            docs.path(),
            &format!("notes/{i:02}.md"),
            &format!("# Note {i}\nRemember item {i}.\n"),
        );
    }
    let cli = |args: &[&str]| {
        let args: Vec<&str> = ["connectors"].iter().chain(args).copied().collect();
        let output = daemon.run_client(&args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let added = cli(&["add", "folder", docs.path().to_str().unwrap(), "--repo", "notes"]);
    let id = added.split_whitespace().find(|word| word.starts_with("conn_")).unwrap().to_owned();
    let synced = cli(&["sync", &id]);
    assert!(synced.contains("imported 30"), "{synced}");
    let listed = cli(&["list"]);
    assert!(listed.contains(&id) && listed.contains("ok"), "{listed}");
    assert_eq!(daemon.get("/api/memories?repo=notes").await.body["total"], 30);
    let removed = cli(&["remove", &id]);
    assert!(removed.contains("archived 30"), "{removed}");
}

#[tokio::test]
async fn connectors_read_only_under_the_owners_roots() {
    // By default the roots are the home directory of the daemon's account.
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    write(&home_path, "notes/a.md", "# Inside\nKept.\n");
    write(elsewhere.path(), "secret.md", "# Secret\nThe owner's eyes only.\n");
    std::os::unix::fs::symlink(elsewhere.path(), home_path.join("shortcut")).unwrap();
    let daemon = Daemon::start_with(&[], &[("HOME", home_path.to_str().unwrap())]);

    for path in [elsewhere.path().to_path_buf(), home_path.join("shortcut"), "/etc".into()] {
        let reply = daemon.post("/api/connectors", json!({"kind": "folder", "path": path})).await;
        let message = reply.assert_error(422, "VALIDATION_ERROR");
        assert!(message.starts_with("path: "), "names the field: {message}");
        assert!(message.contains("outside the folders"), "{message}");
        assert!(message.contains("SERVICE_CONNECTOR_ROOTS"), "says how to allow it: {message}");
        if path.ends_with("shortcut") {
            assert!(message.contains("shortcut"), "{message}");
            let target = elsewhere.path().to_str().unwrap();
            assert!(!message.contains(target), "never where a link leads: {message}");
        }
    }
    assert_eq!(daemon.get("/api/connectors").await.body, json!({"connectors": []}));
    let id = add(&daemon, json!({"kind": "folder", "path": home_path.join("notes")})).await;
    assert_eq!(sync(&daemon, &id).await["imported"], 1);
    assert!(daemon.get("/api/search?q=eyes").await.body["hits"].as_array().unwrap().is_empty());

    // The roots are set on the command line, and must exist.
    let bad = crate::util::run_cairn(
        home.path(),
        "serve",
        &["--port", "0", "--connector-root", "/no/such/root"],
        &[],
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("connector root `/no/such/root`"), "{stderr}");
    let other = Daemon::start_with(
        &["--connector-root", elsewhere.path().to_str().unwrap()],
        &[("HOME", home_path.to_str().unwrap())],
    );
    add(&other, json!({"kind": "folder", "path": elsewhere.path()})).await;
    let home_refused =
        other.post("/api/connectors", json!({"kind": "folder", "path": home_path})).await;
    home_refused.assert_error(422, "VALIDATION_ERROR");
}
