//! Keeping the data (issue 30): `cairn backup` of a SQLite daemon while it serves writes,
//! `cairn restore` into an empty data directory, what refuses to run beside a daemon, and the
//! PostgreSQL backup and restore commands docs/deploy.md gives.

use std::process::Command;

use cairn_test_support::postgres::TestCluster;
use serde_json::json;

use crate::util::{Daemon, cairn_bin, run_cairn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_writes_restores_into_a_working_daemon() {
    let daemon = Daemon::start();
    for i in 0..50 {
        daemon
            .remember(
                json!({"content": format!("Rule {i}: deploy on weekdays."), "scope": "global"}),
            )
            .await;
    }
    // Writes go on while the backup runs.
    let writer = {
        let url = daemon.base_url().to_owned();
        tokio::spawn(async move {
            let client = cairn_client::Client::new(cairn_client::ClientOptions::new(url)).unwrap();
            for i in 0..200 {
                let memory: cairn_client::types::NewMemory = serde_json::from_value(
                    json!({"content": format!("Written during the backup {i}."), "scope": "user"}),
                )
                .unwrap();
                client.create_memory(&memory).await.unwrap();
            }
        })
    };
    let copy = tempfile::tempdir().unwrap();
    let file = copy.path().join("cairn-backup.db");
    let file_arg = file.to_string_lossy().into_owned();
    let data_dir = daemon.data_dir().to_owned();
    let backed_up = tokio::task::spawn_blocking(move || {
        run_cairn(&data_dir, "backup", &["--to", &file_arg], &[])
    })
    .await
    .unwrap();
    assert!(backed_up.status.success(), "{backed_up:?}");
    assert!(String::from_utf8_lossy(&backed_up.stdout).contains("backed up"));
    writer.await.unwrap();

    let restored_dir = tempfile::tempdir().unwrap();
    let restored =
        run_cairn(restored_dir.path(), "restore", &["--from", &file.to_string_lossy()], &[]);
    assert!(restored.status.success(), "{restored:?}");
    let again = Daemon::start_in(restored_dir.path());
    let total = again.get("/api/memories").await.body["total"].as_u64().unwrap();
    assert!((50..=250).contains(&total), "a snapshot taken between the writes: {total}");
    let found = again.get("/api/search?q=weekdays").await;
    assert_eq!(found.status, 200);
    assert!(!found.body["hits"].as_array().unwrap().is_empty(), "searchable: {found:?}");
    let health = again.get("/api/health").await;
    assert_eq!(health.body["memoryCount"].as_u64(), Some(total));

    // Into a data directory that holds data: refused, nothing changed.
    drop(again);
    let refused =
        run_cairn(restored_dir.path(), "restore", &["--from", &file.to_string_lossy()], &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("holds data already"), "{refused:?}");
    // Not a Cairn database: refused.
    let junk = copy.path().join("junk.db");
    std::fs::write(&junk, b"not a database at all, just text").unwrap();
    let empty = tempfile::tempdir().unwrap();
    let refused = run_cairn(empty.path(), "restore", &["--from", &junk.to_string_lossy()], &[]);
    assert!(!refused.status.success(), "{refused:?}");
}

#[tokio::test]
async fn a_restore_or_a_migration_refuses_while_a_daemon_serves_the_data() {
    let daemon = Daemon::start();
    let backup = tempfile::tempdir().unwrap();
    let file = backup.path().join("copy.db");
    let backed_up = run_cairn(daemon.data_dir(), "backup", &["--to", &file.to_string_lossy()], &[]);
    assert!(backed_up.status.success(), "{backed_up:?}");

    let restore =
        run_cairn(daemon.data_dir(), "restore", &["--from", &file.to_string_lossy()], &[]);
    assert!(!restore.status.success());
    let message = String::from_utf8_lossy(&restore.stderr);
    assert!(message.contains("a daemon serves"), "{message}");

    let database = daemon.data_dir().join("cairn.db");
    let from = format!("sqlite:{}", database.display());
    let migrate = Command::new(cairn_bin())
        .args(["migrate", "--from", &from, "--to", "postgres://nobody@127.0.0.1:1/none"])
        .output()
        .unwrap();
    assert!(!migrate.status.success());
    let message = String::from_utf8_lossy(&migrate.stderr);
    assert!(message.contains("a daemon serves"), "{message}");
}

/// The commands of docs/deploy.md's "Backups", as written there.
const PG_DUMP_FLAGS: &[&str] = &["--format=custom", "--no-owner"];
const PG_RESTORE_FLAGS: &[&str] = &["--clean", "--if-exists", "--no-owner"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_postgres_backup_and_restore_exit_zero_and_bring_everything_back() {
    let deploy = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/deploy.md"),
    )
    .unwrap();
    for flag in PG_DUMP_FLAGS.iter().chain(PG_RESTORE_FLAGS) {
        assert!(deploy.contains(flag), "deploy.md's backup commands use {flag}");
    }
    let cluster = TestCluster::start();
    for schema in ["public", "cairn"] {
        let source = cluster.create_database();
        let daemon = Daemon::start_with(
            &["--database-url", &source, "--database-schema", schema, "--embedder", "none"],
            &[],
        );
        let id = daemon
            .remember(json!({"content": "Releases are cut on Tuesdays.", "scope": "global"}))
            .await;
        let conversation = daemon.post("/api/runtime/conversations", json!({})).await;
        assert_eq!(conversation.status, 201);
        drop(daemon);

        let dir = tempfile::tempdir().unwrap();
        let dump = dir.path().join("cairn.dump");
        let dumped = Command::new(cluster.bin_dir().join("pg_dump"))
            .args(PG_DUMP_FLAGS)
            .arg(format!("--schema={schema}"))
            .arg(format!("--file={}", dump.display()))
            .arg(&source)
            .output()
            .unwrap();
        assert!(dumped.status.success(), "pg_dump: {dumped:?}");
        let target = cluster.create_database();
        let restored = Command::new(cluster.bin_dir().join("pg_restore"))
            .args(PG_RESTORE_FLAGS)
            .arg(format!("--dbname={target}"))
            .arg(&dump)
            .output()
            .unwrap();
        assert!(restored.status.success(), "pg_restore ({schema}): {restored:?}");

        let daemon = Daemon::start_with(
            &["--database-url", &target, "--database-schema", schema, "--embedder", "none"],
            &[],
        );
        let memory = daemon.get(&format!("/api/memories/{id}")).await;
        assert_eq!(memory.status, 200, "{memory:?}");
        let found = daemon.get("/api/search?q=tuesdays").await;
        assert_eq!(found.body["hits"][0]["memory"]["id"], id.as_str());
        let conversations = daemon.get("/api/runtime/conversations").await;
        assert_eq!(conversations.body["conversations"].as_array().unwrap().len(), 1);
        assert_eq!(daemon.get("/api/health/ready").await.status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_by_a_role_that_is_not_a_superuser_warns_of_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_in(dir.path());
    daemon.remember(json!({"content": "Staging deploys need a ticket.", "scope": "global"})).await;
    drop(daemon);
    let data_dir = dir.path();
    let cluster = TestCluster::start();
    cluster.psql("postgres", "CREATE ROLE mover LOGIN");
    cluster.psql("postgres", "CREATE DATABASE moved OWNER mover");
    let url = format!("postgres://mover@127.0.0.1:{}/moved", cluster.port());
    let from = format!("sqlite:{}", data_dir.join("cairn.db").display());
    let moved = Command::new(cairn_bin())
        .args(["migrate", "--from", &from, "--to", &url])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&moved.stderr);
    assert!(moved.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&moved.stdout).contains("moved and verified"));
    assert!(!stderr.to_lowercase().contains("superuser"), "{stderr}");
    assert!(!stderr.contains("WARN"), "{stderr}");
}
