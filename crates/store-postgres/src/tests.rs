//! The store on a real PostgreSQL: the conformance suites, and what several daemons on one
//! database rely on (migrations run once, offsets across stores, the listener and the pools
//! recovering from dropped connections and a restarted server).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_store::conformance::sample_conversation;
use cairn_store::{
    Commit, CommitOutcome, ConversationStore, ExternalChange, KeyStore, MemoryStore, NewEvent,
    Store,
};
use cairn_types::{ApiKey, Role, Scope, Snapshot, Timestamp};

use crate::{PgOptions, PgStore};
use cairn_test_support::postgres::TestCluster;

/// Options for tests: small pools, the schema given.
pub(crate) fn options(url: &str, schema: &str) -> PgOptions {
    PgOptions {
        schema: schema.to_owned(),
        pool_size: 4,
        lock_connections: 4,
        application_name: "cairn-test".to_owned(),
        ..PgOptions::new(url)
    }
}

async fn open(url: &str, schema: &str) -> PgStore {
    PgStore::open(options(url, schema)).await.unwrap()
}

fn event(n: u64) -> NewEvent {
    NewEvent { kind: "said".to_owned(), data: serde_json::json!({"n": n}) }
}

/// A server with two stores on one database, as two daemons would share it.
async fn two_stores() -> (TestCluster, PgStore, PgStore) {
    let (cluster, url) = TestCluster::with_database();
    (cluster, open(&url, "public").await, open(&url, "public").await)
}

/// Creates a conversation with no events; its id.
async fn conversation(store: &PgStore) -> String {
    let conversation = sample_conversation("agent-a", 1_000);
    let snapshot = Snapshot::empty(&conversation);
    store.create_conversation(&conversation, &snapshot, &[]).await.unwrap().unwrap();
    conversation.id
}

/// Asserts the log holds offsets 0..n exactly; returns n.
async fn assert_gapless(store: &PgStore, id: &str) -> u64 {
    let log = store.list_events(id, None, u32::MAX).await.unwrap();
    let offsets: Vec<u64> = log.iter().map(|event| event.offset).collect();
    assert_eq!(offsets, (0..log.len() as u64).collect::<Vec<_>>(), "gapless");
    log.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_conversation_conformance_suite() {
    let (_cluster, url) = TestCluster::with_database();
    cairn_store::conformance::run_conversations(fresh_stores(&url, "conv")).await;
}

/// What a conformance suite opens: each call a new, empty store on its own schema,
/// `<name>_<n>` of the database at `url`.
pub(crate) fn fresh_stores<'a>(
    url: &'a str,
    name: &'a str,
) -> impl FnMut() -> futures_util::future::BoxFuture<'a, Arc<dyn Store>> + 'a {
    let mut n = 0;
    move || {
        n += 1;
        let options = options(url, &format!("{name}_{n}"));
        Box::pin(async move { Arc::new(PgStore::open(options).await.unwrap()) as Arc<dyn Store> })
    }
}

/// Two stores (two daemons) on one fresh schema.
async fn two(url: &str, schema: &str) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let (a, b) =
        tokio::join!(PgStore::open(options(url, schema)), PgStore::open(options(url, schema)));
    (Arc::new(a.unwrap()) as Arc<dyn Store>, Arc::new(b.unwrap()) as Arc<dyn Store>)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_database_behave_as_one() {
    let (_cluster, url) = TestCluster::with_database();
    let mut n = 0;
    cairn_store::conformance::run_shared(|| {
        n += 1;
        let url = url.clone();
        async move { two(&url, &format!("shared_{n}")).await }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tokens_are_found_by_hash_until_revoked() {
    let cluster = TestCluster::start();
    let store = open(&cluster.create_database(), "public").await;
    let key = |id: &str, at: i64| ApiKey {
        id: id.to_owned(),
        name: Some(format!("{id} key")),
        role: Role::Admin,
        prefix: "cairn_ab".to_owned(),
        hash: format!("{id}-hash"),
        created_at: Timestamp::from_millis(at),
        revoked_at: None,
        expires_at: None,
        last_used_at: None,
    };
    store.insert_key(&key("k2", 2)).await.unwrap();
    store.insert_key(&key("k1", 1)).await.unwrap();
    assert_eq!(store.find_active_key("k1-hash").await.unwrap(), Some(key("k1", 1)));
    assert!(store.insert_key(&key("k1", 3)).await.is_err(), "ids and hashes are unique");
    let listed: Vec<String> =
        store.list_keys().await.unwrap().into_iter().map(|key| key.id).collect();
    assert_eq!(listed, ["k1", "k2"], "oldest first");
    assert!(store.revoke_key("k1", Timestamp::from_millis(5)).await.unwrap());
    assert!(!store.revoke_key("k1", Timestamp::from_millis(6)).await.unwrap(), "once");
    assert!(!store.revoke_key("nope", Timestamp::from_millis(6)).await.unwrap());
    assert_eq!(store.find_active_key("k1-hash").await.unwrap(), None);
    let revoked = store.list_keys().await.unwrap();
    assert_eq!(revoked[0].revoked_at, Some(Timestamp::from_millis(5)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_opening_at_once_migrate_once() {
    let (cluster, url) = TestCluster::with_database();
    let database = url.rsplit('/').next().unwrap().to_owned();
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgStore::open(options(&url, "fresh")).await })
        })
        .collect();
    for open in opens {
        open.await.unwrap().expect("every store opens");
    }
    assert_eq!(
        cluster
            .psql(&database, "SELECT string_agg(version::text, ',') FROM fresh.cairn_migrations"),
        "1,2,3,4,5",
        "each migration applied once"
    );
    // And it is in that schema only.
    assert_eq!(
        cluster.psql(&database, "SELECT count(*) FROM pg_tables WHERE tablename = 'conversations'"),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_migration_refuses_to_start_and_a_newer_one_is_tolerated() {
    let (cluster, url) = TestCluster::with_database();
    let database = url.rsplit('/').next().unwrap().to_owned();
    drop(open(&url, "public").await);

    cluster.psql(
        &database,
        "INSERT INTO cairn_migrations (version, name, checksum) VALUES (99, 'from the future', 'x')",
    );
    drop(open(&url, "public").await);

    cluster.psql(&database, "UPDATE cairn_migrations SET checksum = 'edited' WHERE version = 1");
    let error = PgStore::open(options(&url, "public")).await.unwrap_err();
    assert!(error.to_string().contains("changed after it shipped"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_through_two_stores_get_offsets_in_commit_order() {
    let (_cluster, a, b) = two_stores().await;
    let id = conversation(&a).await;
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let store = if task % 2 == 0 { a.clone() } else { b.clone() };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut offsets = Vec::new();
            for n in 0..200 {
                let commit = Commit::events(&id, vec![event(n)], Timestamp::from_millis(2));
                let CommitOutcome::Committed { events, .. } = store.commit(&commit).await.unwrap()
                else {
                    panic!("the commit applies");
                };
                offsets.push(events[0].offset);
            }
            offsets
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        let offsets = task.await.unwrap();
        assert!(offsets.windows(2).all(|pair| pair[0] < pair[1]), "each task's in its order");
        all.extend(offsets);
    }
    assert_eq!(all, (0..1_600).collect(), "offsets 0..1599, each once");
    assert_eq!(assert_gapless(&b, &id).await, 1_600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_stop_waiting_leave_consistent_conversations() {
    let cluster = TestCluster::start();
    let store = open(&cluster.create_database(), "public").await;
    let id = conversation(&store).await;
    let mut acknowledged = 0u64;
    for n in 0..200u64 {
        let commit = Commit::events(&id, vec![event(n), event(n)], Timestamp::from_millis(2));
        // Give up after a few microseconds to a few milliseconds: some commits are cut off.
        let patience = Duration::from_micros(50 + (n * 37) % 3_000);
        if tokio::time::timeout(patience, store.commit(&commit)).await.is_ok() {
            acknowledged += 1;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let logged = assert_gapless(&store, &id).await;
    assert!(logged >= acknowledged * 2, "no acknowledged commit is lost");
    assert_eq!(logged % 2, 0, "every commit whole or not at all");
    let commit = Commit::events(&id, vec![event(0)], Timestamp::from_millis(3));
    let CommitOutcome::Committed { events, .. } = store.commit(&commit).await.unwrap() else {
        panic!("the commit applies");
    };
    assert_eq!(events[0].offset, logged, "the counter and the log agree");
}

/// A listener that keeps what it hears.
fn recorder(store: &PgStore) -> Arc<Mutex<Vec<ExternalChange>>> {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = heard.clone();
    store
        .listen(Arc::new(move |change: &ExternalChange| kept.lock().unwrap().push(change.clone())));
    heard
}

async fn wait_for(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < within, "{what} did not happen within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn heard_append(heard: &Mutex<Vec<ExternalChange>>, id: &str, next: u64) -> bool {
    heard.lock().unwrap().iter().any(|change| {
        matches!(change, ExternalChange::Appended { conversation_id, next_offset }
            if conversation_id == id && *next_offset == next)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_recovers_from_dropped_connections_by_itself() {
    let (cluster, a, b) = two_stores().await;
    let heard = recorder(&a);
    let id = conversation(&b).await;
    b.commit(&Commit::events(&id, vec![event(1)], Timestamp::from_millis(2))).await.unwrap();
    wait_for("the first append is heard", Duration::from_secs(1), async || {
        heard_append(&heard, &id, 1)
    })
    .await;

    assert!(a.get_conversation(&id).await.unwrap().is_some(), "a pooled connection is open");
    // Every session of store `a` (its pools and its listener) ends, as in a network cut.
    let ended = cluster.terminate_sessions(&format!("%/{}", a.instance()));
    assert!(ended >= 2, "the listener and a pooled connection: {ended}");
    wait_for("the listener says it is down, then back", Duration::from_secs(5), async || {
        let heard = heard.lock().unwrap();
        let poll = heard.iter().position(|change| *change == ExternalChange::Poll);
        let resync = heard.iter().rposition(|change| *change == ExternalChange::Resync);
        matches!((poll, resync), (Some(poll), Some(resync)) if poll < resync)
    })
    .await;
    wait_for("store `a` answers again", Duration::from_secs(5), async || {
        a.get_conversation(&id).await.is_ok()
    })
    .await;
    b.commit(&Commit::events(&id, vec![event(2)], Timestamp::from_millis(3))).await.unwrap();
    wait_for("appends are heard again", Duration::from_secs(2), async || {
        heard_append(&heard, &id, 2)
    })
    .await;
    let commit = Commit::events(&id, vec![event(3)], Timestamp::from_millis(4));
    assert!(matches!(a.commit(&commit).await.unwrap(), CommitOutcome::Committed { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_carries_on_after_the_server_restarts() {
    let (cluster, a, b) = two_stores().await;
    let heard = recorder(&a);
    let id = conversation(&a).await;
    heard.lock().unwrap().clear();
    cluster.restart();
    wait_for("both stores commit again", Duration::from_secs(10), async || {
        let commit = Commit::events(&id, vec![event(1)], Timestamp::from_millis(2));
        a.commit(&commit).await.is_ok() && b.commit(&commit).await.is_ok()
    })
    .await;
    wait_for("the listener resyncs", Duration::from_secs(5), async || {
        heard.lock().unwrap().contains(&ExternalChange::Resync)
    })
    .await;
    let before = assert_gapless(&a, &id).await;
    b.commit(&Commit::events(&id, vec![event(9)], Timestamp::from_millis(3))).await.unwrap();
    wait_for("appends are heard after the restart", Duration::from_secs(2), async || {
        heard_append(&heard, &id, before + 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_keep_text_that_jsonb_would_refuse() {
    let cluster = TestCluster::start();
    let store = open(&cluster.create_database(), "public").await;
    let conversation = sample_conversation("agent-a", 1_000);
    store.create_conversation(&conversation, &Snapshot::empty(&conversation), &[]).await.unwrap();
    let snapshot = Snapshot {
        journey_context: Some(serde_json::json!({
            "said": "nul \u{0} here",
            "nested": {"lifecycle": "active", "updatedAt": "x"},
        })),
        ..Snapshot::empty(&conversation)
    };
    let commit = Commit {
        lifecycle: Some(cairn_types::Lifecycle::Handoff),
        snapshot: Some(snapshot.clone()),
        ..Commit::events(&conversation.id, vec![event(1)], Timestamp::from_millis(2_000))
    };
    assert!(matches!(store.commit(&commit).await.unwrap(), CommitOutcome::Committed { .. }));
    let expected = Snapshot {
        lifecycle: cairn_types::Lifecycle::Handoff,
        updated_at: Timestamp::from_millis(2_000),
        ..snapshot.clone()
    };
    assert_eq!(store.get_snapshot(&conversation.id).await.unwrap(), Some(expected.clone()));

    // A lifecycle change without a snapshot rewrites the stored one.
    let close = Commit {
        lifecycle: Some(cairn_types::Lifecycle::Closed),
        ..Commit::events(&conversation.id, vec![], Timestamp::from_millis(3_000))
    };
    assert!(matches!(store.commit(&close).await.unwrap(), CommitOutcome::Committed { .. }));
    let closed = Snapshot {
        lifecycle: cairn_types::Lifecycle::Closed,
        updated_at: Timestamp::from_millis(3_000),
        ..expected
    };
    assert_eq!(store.get_snapshot(&conversation.id).await.unwrap(), Some(closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_verified_against_the_given_ca() {
    let cluster = TestCluster::start_tls();
    let url = cluster.create_database();
    let database = url.rsplit('/').next().unwrap().to_owned();
    let with = |mode: &str, ca: Option<std::path::PathBuf>| PgOptions {
        ca_file: ca,
        listen: false,
        ..options(&format!("{url}?sslmode={mode}"), "public")
    };

    for mode in ["require", "verify-full"] {
        let store = PgStore::open(with(mode, Some(cluster.ca_file()))).await.unwrap();
        store.list_conversations(&Default::default()).await.unwrap();
        let sql = format!(
            "SELECT bool_and(s.ssl)::text FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'cairn-test/{}'",
            store.instance()
        );
        assert_eq!(cluster.psql(&database, &sql), "true", "{mode}: every session is encrypted");
    }

    // Not signed by a CA the platform trusts: refused, not accepted blindly.
    let error = PgStore::open(with("require", None)).await.unwrap_err();
    assert!(format!("{error:?}").to_lowercase().contains("certificate"), "{error:?}");

    // Without TLS when asked for none.
    let plain = PgStore::open(with("disable", None)).await.unwrap();
    plain.list_conversations(&Default::default()).await.unwrap();
    let sql = format!(
        "SELECT bool_or(s.ssl)::text FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.application_name = 'cairn-test/{}'",
        plain.instance()
    );
    assert_eq!(cluster.psql(&database, &sql), "false");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_an_error_not_a_hang() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/cairn");
    let started = Instant::now();
    let error = PgStore::open(options(&url, "public")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
    assert!(error.to_string().contains("storage backend failed"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packs_recalling_overlapping_memories_at_once_queue_without_deadlock() {
    let cluster = TestCluster::start();
    let store = Arc::new(open(&cluster.create_database(), "public").await);
    let memories: Vec<_> = (0..24)
        .map(|n| {
            cairn_store::conformance::sample_memory(&format!("memory {n}"), Scope::Repo, 1_000 + n)
        })
        .collect();
    store.insert_memories(&memories, "test").await.unwrap();
    let ids: Vec<String> = memories.iter().map(|memory| memory.id.clone()).collect();
    // Sixteen packs at once, each recording the same memories in its own order, ten times.
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let (store, mut ids) = (store.clone(), ids.clone());
            let len = ids.len();
            ids.rotate_left(n * 3 % len);
            if n % 2 == 1 {
                ids.reverse();
            }
            tokio::spawn(async move {
                for round in 0..10 {
                    let task = format!("task-{n}-{round}");
                    store.record_recall(&ids, &task, Timestamp::from_millis(5_000)).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for id in &ids {
        let memory = store.get_memory(id).await.unwrap().unwrap();
        assert_eq!(memory.recall_count, 160, "{id}: every recording counted once");
    }
    let log = cluster.log();
    assert!(!log.contains("deadlock detected"), "PostgreSQL detected deadlocks:\n{log}");
}

/// A database of the release before `memory_recalls` opens with its recall counts where reads
/// find them, and recalls go on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_counts_of_an_earlier_release_are_kept() {
    let (cluster, url) = TestCluster::with_database();
    let database = url.rsplit('/').next().unwrap().to_owned();
    {
        let (mut client, connection) =
            tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let earlier = &crate::migrations::MIGRATIONS[..1];
        crate::migrations::apply(&mut client, "public", earlier).await.unwrap();
        drop(client);
        let _ = connection.await;
    }
    cluster.psql(
        &database,
        "INSERT INTO memories (id, content, scope, status, created_at, updated_at, \
         last_recalled_at, recall_count) VALUES \
         ('mem_recalled', 'Deploys go through the release script.', 'repo', 'active', \
          1000, 1000, 5000, 7), \
         ('mem_never', 'Use pnpm, not npm.', 'repo', 'active', 2000, 2000, NULL, 0)",
    );
    let store = open(&url, "public").await;
    cairn_store::conformance::migrated_recalls_count_on(&store).await;
}

/// An erasure and an append racing on one conversation, both waiting on its row while a
/// third session holds it: whichever goes first, nothing of the conversation is left, and a
/// conversation created again with its id starts empty and takes appends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_racing_an_append_leaves_nothing_behind() {
    let (_cluster, url) = TestCluster::with_database();
    let store = open(&url, "public").await;
    let conversation = sample_conversation("agent-a", 1_000);
    let snapshot = Snapshot::empty(&conversation);
    store.create_conversation(&conversation, &snapshot, &[event(0)]).await.unwrap().unwrap();
    let id = conversation.id.clone();

    let (holder, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    holder.batch_execute("BEGIN").await.unwrap();
    holder.execute("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE", &[&id]).await.unwrap();

    // The append queues on the row first, then the erasure: the append gets it first.
    let append = tokio::spawn({
        let (store, id) = (store.clone(), id.clone());
        async move {
            store.commit(&Commit::events(&id, vec![event(1)], Timestamp::from_millis(2))).await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let erase = tokio::spawn({
        let (store, id) = (store.clone(), id.clone());
        async move { store.delete_conversations(&[id]).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.batch_execute("COMMIT").await.unwrap();

    let appended = append.await.unwrap();
    assert!(appended.is_ok(), "the append committed or found no conversation: {appended:?}");
    assert_eq!(erase.await.unwrap().unwrap(), std::slice::from_ref(&id));
    let left: i64 = holder
        .query_one("SELECT count(*) FROM runtime_events WHERE conversation_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "no event of the erased conversation is left");

    // Created again with the same id: empty, and appends number from 0 without a clash.
    store.create_conversation(&conversation, &snapshot, &[]).await.unwrap().unwrap();
    assert!(store.list_events(&id, None, 10).await.unwrap().is_empty());
    let commit = Commit::events(&id, vec![event(2)], Timestamp::from_millis(3));
    let CommitOutcome::Committed { events, .. } = store.commit(&commit).await.unwrap() else {
        panic!("the append applies");
    };
    assert_eq!(events[0].offset, 0);
}

/// Locks held through the store's one lock session: many at once with a pool of 4
/// connections, each excluding a second holder of its name in the same store as another
/// store, and released with the guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_locks_are_held_at_once_without_a_connection_each() {
    let (_cluster, a, b) = two_stores().await;
    let mut held = Vec::new();
    for n in 0..64 {
        held.push(a.lock(&format!("conversation-{n}")).await.unwrap().unwrap());
    }
    for store in [&a, &b] {
        let attempt = store.try_lock("conversation-7").await.unwrap();
        assert!(matches!(attempt, cairn_store::LockAttempt::Busy), "held, in either store");
    }
    // A waiter gets the lock once it is released, however long it was held.
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("conversation-3").await.unwrap().is_some() }
    });
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!waiter.is_finished(), "still waiting past a pool's 5 s");
    held.clear();
    assert!(tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap());
    let sessions: i64 = a
        .lock_session()
        .client(&a)
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cairn-test'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(sessions <= 12, "{sessions} sessions: the locks did not take one each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_says_what_postgres_said() {
    let (_cluster, url) = TestCluster::with_database();
    let options = PgOptions::new(&url);
    let config = crate::config::pg_config(&options, crate::config::Purpose::Admin).unwrap();
    let client = crate::connect(&config, crate::config::tls(&options).unwrap()).await.unwrap();
    let error = client.batch_execute("SELECT * FROM nowhere_at_all").await.map_err(crate::pg);
    let message = error.unwrap_err().to_string();
    assert!(
        message.contains("relation \"nowhere_at_all\" does not exist (SQLSTATE 42P01)"),
        "{message}"
    );
    // And the schema's version is what the migrations applied.
    let store = open(&url, "public").await;
    let version = cairn_store::MemoryStore::schema_version(&store).await.unwrap();
    assert!(version.current() && version.applied == version.known, "{version:?}");
}

/// Each daemon's full-text index takes its own writes before they return and the other
/// daemons' as they hear of them, ranks as the SQL does (one word: the plan is exact), and
/// keeps nothing of an erased memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_daemons_text_index_follows_every_daemons_writes() {
    let (_cluster, url) = TestCluster::with_database();
    let (a, b) = tokio::join!(open(&url, "public"), open(&url, "public"));
    for store in [&a, &b] {
        assert!(store.text_index().is_some_and(|index| {
            index.cell.state() == cairn_store::fulltext::IndexState::Ready
        }));
    }
    let words = |text: &str| text.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let ids = |hits: Vec<cairn_store::TextMatch>| {
        hits.into_iter().map(|hit| hit.memory.id).collect::<BTreeSet<_>>()
    };
    let any = cairn_store::MemoryFilter::default();
    let memories: Vec<_> = (0..40)
        .map(|n| {
            let text = format!("zebra crossing number {n} {}", "near the school ".repeat(n % 4));
            cairn_store::conformance::sample_memory(&text, Scope::Repo, n as i64)
        })
        .collect();
    a.insert_memories(&memories, "tester").await.unwrap();
    assert_eq!(ids(a.search_memories(&words("zebra"), &any, 100).await.unwrap()).len(), 40);
    // A search reads what any daemon acknowledged before it began: no waiting.
    assert_eq!(ids(b.search_memories(&words("zebra"), &any, 100).await.unwrap()).len(), 40);
    for n in 0..20 {
        let text = format!("okapi{n} sighting");
        let one = cairn_store::conformance::sample_memory(&text, Scope::Repo, 100 + n);
        let (writer, reader) = if n % 2 == 0 { (&a, &b) } else { (&b, &a) };
        writer.insert_memories(std::slice::from_ref(&one), "tester").await.unwrap();
        // From the index, not SQL: the barrier came back and the index is ready.
        let index = reader.text_index().unwrap();
        assert!(index.caught_up().await, "write {n}: the barrier did not come back");
        let found =
            ids(reader.search_memories(&words(&format!("okapi{n}")), &any, 5).await.unwrap());
        assert_eq!(found, BTreeSet::from([one.id.clone()]), "write {n}");
    }
    // The index's scores are the SQL's BM25.
    let client = a.client().await.unwrap();
    let frequencies = crate::search::frequencies_of(&a);
    for query in ["zebra", "school", "crossing"] {
        let sql =
            crate::search::search(&client, &frequencies, &words(query), &any, 10).await.unwrap();
        let index = a.search_memories(&words(query), &any, 10).await.unwrap();
        let scores = |hits: &[cairn_store::TextMatch]| {
            hits.iter().map(|hit| hit.relevance).collect::<Vec<_>>()
        };
        for (ours, theirs) in scores(&index).iter().zip(scores(&sql)) {
            assert!(
                (ours - theirs).abs() < 1e-9,
                "{query}: {:?} against {:?}",
                scores(&index),
                scores(&sql)
            );
        }
        assert_eq!(index.len(), sql.len());
    }
    let audit = cairn_store::Audit { actor: "tester", action: "update" };
    let archive = cairn_store::MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(9))),
        ..Default::default()
    };
    a.update_memory(&memories[0].id, &archive, Timestamp::from_millis(9), &audit).await.unwrap();
    b.erase_memories(std::slice::from_ref(&memories[1].id), Timestamp::from_millis(9), &audit)
        .await
        .unwrap();
    let gone = |found: &BTreeSet<String>| {
        !found.contains(&memories[0].id) && !found.contains(&memories[1].id) && found.len() == 38
    };
    assert!(
        !ids(a.search_memories(&words("zebra"), &any, 100).await.unwrap())
            .contains(&memories[0].id)
    );
    assert!(
        !ids(b.search_memories(&words("zebra"), &any, 100).await.unwrap())
            .contains(&memories[1].id)
    );
    for store in [&a, &b] {
        assert!(gone(&ids(store.search_memories(&words("zebra"), &any, 100).await.unwrap())));
    }
}
