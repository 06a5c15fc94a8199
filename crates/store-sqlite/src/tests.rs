//! Tests of the SQLite store: the conformance suite, the writer's durability and group
//! commits, batches stored as given, checkpoints, and reopening the file.

use std::sync::Arc;

use cairn_store::{MemoryChange, MemoryStore};
use cairn_types::Timestamp;
use rusqlite::params;

use super::*;
use crate::checkpoint::{RESTART_WAIT, checkpoint};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    cairn_store::conformance::run(fresh_stores(&directory, "conformance")).await;
}

/// What a conformance suite opens: each call a new, empty store, `<name>-<n>.db` in
/// `directory`.
pub(crate) fn fresh_stores<'a>(
    directory: &'a tempfile::TempDir,
    name: &'a str,
) -> impl FnMut() -> std::future::Ready<Arc<dyn cairn_store::Store>> + 'a {
    let mut n = 0;
    move || {
        n += 1;
        let path = directory.path().join(format!("{name}-{n}.db"));
        std::future::ready(
            Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn cairn_store::Store>
        )
    }
}

fn synchronous(store: &SqliteStore) -> impl Future<Output = Result<i64>> + '_ {
    store.write(|tx| tx.query_row("PRAGMA synchronous", [], |row| row.get(0)).map_err(sql))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_failure_of_a_relaxed_write_leaves_later_writes_unsynced() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
    const FULL: i64 = 2;
    assert_eq!(synchronous(&store).await.unwrap(), FULL);

    let failed = store
        .write_relaxed(|_| -> Result<()> { Err(StoreError::Corrupt("injected".into())) })
        .await;
    assert!(failed.is_err());
    assert_eq!(synchronous(&store).await.unwrap(), FULL, "after a failed relaxed write");

    let panicked = store.write_relaxed(|_| -> Result<()> { panic!("injected") }).await;
    assert!(panicked.is_err(), "a panic in a change is an error to its caller");
    assert_eq!(synchronous(&store).await.unwrap(), FULL, "after a panicking relaxed write");

    let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
    store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
    assert_eq!(store.get_memory(&memory.id).await.unwrap(), Some(memory));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_stops_waiting_is_still_counted() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
    let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
    // Polled once (the write starts), then dropped, as a server drops a request.
    let insert = store.insert_memories(std::slice::from_ref(&memory), "tester");
    let _ = tokio::time::timeout(Duration::ZERO, insert).await;
    while store.get_memory(&memory.id).await.unwrap().is_none() {
        tokio::task::yield_now().await;
    }
    // The writer is free again only once the dropped write's work is all done.
    store.write(|_| Ok(())).await.unwrap();
    assert_eq!(store.count_memories().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inserts_share_commits_and_a_failing_one_fails_alone() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
    let first = cairn_store::conformance::sample_memory("first", cairn_types::Scope::User, 1);
    store.insert_memories(std::slice::from_ref(&first), "tester").await.unwrap();
    // 40 callers at once, two memories each; caller 17 repeats an id already stored.
    let inserts = (0..40).map(|n| {
        let mut pair: Vec<Memory> = (0..2)
            .map(|k| {
                let text = format!("caller {n} memory {k}");
                cairn_store::conformance::sample_memory(&text, cairn_types::Scope::User, n)
            })
            .collect();
        if n == 17 {
            pair[1].id = first.id.clone();
        }
        let store = store.clone();
        tokio::spawn(async move { store.insert_memories(&pair, "tester").await })
    });
    let outcomes = futures_join_all(inserts).await;
    for (n, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome.is_ok(), n != 17, "caller {n}: {outcome:?}");
    }
    assert_eq!(store.count_memories().await.unwrap(), 1 + 39 * 2, "caller 17 stored nothing");
    let counted: i64 = store
        .read(|connection| {
            connection.query_row("SELECT count(*) FROM memories", [], |row| row.get(0)).map_err(sql)
        })
        .await
        .unwrap();
    assert_eq!(counted, 1 + 39 * 2);
}

async fn futures_join_all(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<Result<()>>>,
) -> Vec<Result<()>> {
    let mut outcomes = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_stored_exactly_as_given() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
    let texts = [
        "plain words",
        "quotes \" and \\ backslashes, a tab\tand a newline\n, emoji 🦀, accents é",
        "a memory that quotes \\u0000 as text",
        "a NUL \0 inside (the engine refuses it; the store keeps what it is given)",
        "",
    ];
    let mut memories: Vec<Memory> = texts
        .iter()
        .enumerate()
        .map(|(n, text)| {
            cairn_store::conformance::sample_memory(text, cairn_types::Scope::Repo, n as i64)
        })
        .collect();
    memories[1].tags = vec!["tag \"quoted\"".to_owned(), "🦀".to_owned()];
    memories[1].repo = None;
    memories[1].source = Some("src/lib.rs:1".to_owned());
    memories[1].metadata.insert("n".to_owned(), serde_json::json!({"deep": [1, 2.5, null]}));
    memories[1].last_recalled_at = Some(Timestamp::from_millis(-1));
    memories[1].recall_count = u64::from(u32::MAX) + 7;
    memories[1].archived_at = Some(Timestamp::from_millis(i64::MAX));
    // Without the NUL, the batch takes the one-statement path; with it, the other.
    for batch in [&memories[..3], &memories[3..]] {
        store.insert_memories(batch, "tester").await.unwrap();
        for memory in batch {
            assert_eq!(store.get_memory(&memory.id).await.unwrap().as_ref(), Some(memory));
        }
    }
    let listed = store.list_memories(&MemoryFilter::default(), 10, 0).await.unwrap();
    assert_eq!(listed.total, 4, "the archived one is left out");
    let found = store
        .search_memories(&["backslash".to_owned()], &MemoryFilter::default(), 10)
        .await
        .unwrap();
    assert!(found.is_empty(), "the archived memory is not in the full-text index");
    let found =
        store.search_memories(&["quote".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
}

/// Inserts `count` memories of about a kilobyte each (`fill` repeated), a large log, and
/// returns them.
async fn insert_large_memories(store: &SqliteStore, count: i64, fill: char) -> Vec<Memory> {
    let text = fill.to_string().repeat(1_000);
    let memories: Vec<Memory> = (0..count)
        .map(|n| {
            let content = format!("{n} {text}");
            cairn_store::conformance::sample_memory(&content, cairn_types::Scope::User, n)
        })
        .collect();
    store.insert_memories(&memories, "tester").await.unwrap();
    memories
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_keep_the_log_bounded() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let store = SqliteStore::open(&path).unwrap();
    insert_large_memories(&store, 3_000, 'x').await;
    let wal = directory.path().join("cairn.db-wal");
    let limit = 1024 * 1024;
    assert!(std::fs::metadata(&wal).unwrap().len() > limit, "the test writes a large log");

    // A reader in the middle of a transaction holds passive checkpoints back.
    let reader = Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN; SELECT count(*) FROM memories;").unwrap();
    let checkpointer = Connection::open(&path).unwrap();
    checkpointer.busy_timeout(Duration::from_millis(200)).unwrap();
    let _ = checkpoint(&checkpointer, &wal, u64::MAX, limit);
    reader.execute_batch("COMMIT").unwrap();
    checkpoint(&checkpointer, &wal, u64::MAX, limit).unwrap();
    assert!(std::fs::metadata(&wal).unwrap().len() <= limit);
    assert_eq!(store.count_memories().await.unwrap(), 3_000, "nothing is lost");
}

/// Past `restart_at`, a checkpoint restarts the log when no reader holds an older
/// snapshot, and gives up after a short wait when one does; the next commit writes the
/// log from its beginning, and everything written before is read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_log_restarts_when_the_readers_let_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let store = SqliteStore::open(&path).unwrap();
    let memories = insert_large_memories(&store, 2_000, 'y').await;
    let wal = directory.path().join("cairn.db-wal");
    let restart_at = 1024 * 1024;
    assert!(std::fs::metadata(&wal).unwrap().len() > restart_at);

    let reader = Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN; SELECT count(*) FROM memories;").unwrap();
    let checkpointer = Connection::open(&path).unwrap();
    checkpointer.busy_timeout(BUSY_TIMEOUT).unwrap();
    let started = std::time::Instant::now();
    let held = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
    assert_eq!(held.restart, Some(false), "a reader in the log holds the restart back");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "it waits {RESTART_WAIT:?}, not the busy timeout: {:?}",
        started.elapsed()
    );
    // Meanwhile the reader still reads, and writers still write.
    let counted: i64 =
        reader.query_row("SELECT count(*) FROM memories", [], |row| row.get(0)).unwrap();
    assert_eq!(counted, 2_000);
    reader.execute_batch("COMMIT").unwrap();

    let done = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
    assert_eq!(done.restart, Some(true), "{done:?}");
    let late = cairn_store::conformance::sample_memory("late", cairn_types::Scope::User, 1);
    store.insert_memories(std::slice::from_ref(&late), "tester").await.unwrap();
    let after = checkpoint(&checkpointer, &wal, restart_at, u64::MAX).unwrap();
    assert!(after.log_frames < 100, "the log started again: {after:?}");
    assert_eq!(store.count_memories().await.unwrap(), 2_001, "nothing is lost");
    assert_eq!(store.get_memory(&memories[7].id).await.unwrap().unwrap(), memories[7]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_reopening_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let memory = cairn_store::conformance::sample_memory("kept", cairn_types::Scope::User, 1);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.get_memory(&memory.id).await.unwrap(), Some(memory));
    assert_eq!(reopened.count_memories().await.unwrap(), 1, "the count is rebuilt at open");
}

/// `(id, score)` of FTS5's own ranking over every word (`bm25(memories_fts, 2.0, 1.0)`).
fn fts5_ranking(store: &SqliteStore, words: &str, limit: u32) -> Vec<(String, f64)> {
    let connection = store.readers.get().unwrap();
    let expression = words.split_whitespace().map(search::quote).collect::<Vec<_>>().join(" OR ");
    let mut statement = connection
        .prepare(
            "SELECT m.id, -bm25(memories_fts, 2.0, 1.0) FROM memories_fts \
             JOIN memories m ON m.rowid = memories_fts.rowid \
             WHERE memories_fts MATCH ?1 ORDER BY bm25(memories_fts, 2.0, 1.0) LIMIT ?2",
        )
        .unwrap();
    statement
        .query_map(params![expression, limit], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

async fn index_ranking(store: &SqliteStore, words: &str, limit: u32) -> Vec<(String, f64)> {
    let words: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
    let hits = store.search_memories(&words, &MemoryFilter::default(), limit).await.unwrap();
    hits.into_iter().map(|hit| (hit.memory.id, hit.relevance)).collect()
}

fn same_ranking(ours: &[(String, f64)], fts5: &[(String, f64)], words: &str) {
    assert_eq!(ours.len(), fts5.len(), "{words}: {ours:?} against {fts5:?}");
    for (a, b) in ours.iter().zip(fts5) {
        // Equal scores may come in either order; the scores themselves must agree.
        assert!((a.1 - b.1).abs() < 1e-9, "{words}: {ours:?} against FTS5's {fts5:?}");
    }
    // Equal scores at the last place may be cut either way: compare the ids above it.
    let cut = ours.last().map_or(0.0, |hit| hit.1) + 1e-9;
    let above = |hits: &[(String, f64)]| {
        let mut ids: Vec<String> =
            hits.iter().filter(|hit| hit.1 > cut).map(|hit| hit.0.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(above(ours), above(fts5), "{words}");
}

/// The index is built in the background while memories change, then answers as FTS5's own
/// BM25 ranks, and follows every later commit: edits, archiving, erasure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_index_is_built_beside_writes_and_ranks_as_fts5() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let words = ["parser", "flaky", "build", "deploy", "cache", "timeout", "lint", "docs"];
    let mut rng = cairn_test_support::rng::Rng::new(3);
    let memories: Vec<Memory> = (0..3_000)
        .map(|n| {
            let text: Vec<&str> =
                (0..3 + rng.below(8)).map(|_| words[rng.below(words.len())]).collect();
            cairn_store::conformance::sample_memory(&text.join(" "), cairn_types::Scope::Repo, n)
        })
        .collect();
    {
        let store = SqliteStore::open(&path).unwrap();
        store.insert_memories(&memories, "tester").await.unwrap();
    }
    let store = SqliteStore::open_with(&path, 0).unwrap();
    let audit = Audit { actor: "tester", action: "update" };
    let edit = MemoryChange { content: Some("zebra crossing".into()), ..MemoryChange::default() };
    let archive = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(9))),
        ..MemoryChange::default()
    };
    // Changes while the index may still be building.
    store.update_memory(&memories[0].id, &edit, Timestamp::from_millis(5), &audit).await.unwrap();
    store
        .update_memory(&memories[1].id, &archive, Timestamp::from_millis(5), &audit)
        .await
        .unwrap();
    store
        .erase_memories(std::slice::from_ref(&memories[2].id), Timestamp::from_millis(5), &audit)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    while store.text_index.cell.state() != cairn_store::fulltext::IndexState::Ready {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the index was never built"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let found = index_ranking(&store, "zebra", 5).await;
    assert_eq!(found.iter().map(|hit| &hit.0).collect::<Vec<_>>(), [&memories[0].id]);
    for query in ["parser", "flaky lint", "build deploy cache", "timeout docs parser flaky"] {
        let ours = index_ranking(&store, query, 20).await;
        assert!(!ours.iter().any(|hit| hit.0 == memories[1].id || hit.0 == memories[2].id));
        same_ranking(&ours, &fts5_ranking(&store, query, 20), query);
    }
    // And after the build, every commit reaches it.
    let more: Vec<Memory> = (0..50)
        .map(|n| {
            cairn_store::conformance::sample_memory(
                "flaky zebra",
                cairn_types::Scope::Repo,
                10_000 + n,
            )
        })
        .collect();
    store.insert_memories(&more, "tester").await.unwrap();
    store
        .update_memory(&memories[0].id, &archive, Timestamp::from_millis(50), &audit)
        .await
        .unwrap();
    let found = index_ranking(&store, "zebra", 100).await;
    assert_eq!(found.len(), 50);
    assert!(!found.iter().any(|hit| hit.0 == memories[0].id));
    for query in ["zebra flaky", "parser", "build deploy cache"] {
        same_ranking(
            &index_ranking(&store, query, 20).await,
            &fts5_ranking(&store, query, 20),
            query,
        );
    }
}
