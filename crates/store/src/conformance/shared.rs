//! Checks for a store shared by several processes: two handles on one database behave as
//! one store (offsets, idempotency, single-use tokens, locks) and each hears what the other
//! changed.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_types::{Scope, Timestamp};

use super::conversations::{create, sample_conversation};
use super::voice::{hash, sample_segment};
use crate::{
    ChangeListener, Commit, CommitOutcome, ExternalChange, LockAttempt, NewEvent, PendingEmbedding,
    Store,
};

/// How long a change may take to reach the other handle.
const HEARD_WITHIN: Duration = Duration::from_secs(1);

/// Runs every check, each against a fresh pair of handles on one fresh database from
/// `open_two`. Only backends shared by several processes run it.
pub async fn run_shared<F, Fut>(mut open_two: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = (Arc<dyn Store>, Arc<dyn Store>)>,
{
    run_shared_conversations(&mut open_two).await;
    memory_writes_are_heard_by_the_other(open_two().await).await;
    vectors_stored_are_heard_by_the_other(open_two().await).await;
}

/// The checks of [`run_shared`] that need only the conversation store and locks.
pub async fn run_shared_conversations<F, Fut>(open_two: &mut F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = (Arc<dyn Store>, Arc<dyn Store>)>,
{
    commits_through_both_handles_stay_gapless(open_two().await).await;
    a_key_committed_through_one_is_a_duplicate_through_the_other(open_two().await).await;
    racing_commits_with_one_key_apply_once(open_two().await).await;
    a_voice_token_claimed_through_both_has_one_winner(open_two().await).await;
    appends_through_one_are_heard_by_the_other(open_two().await).await;
    locks_exclude_across_handles(open_two().await).await;
}

fn event(kind: &str, n: u64) -> NewEvent {
    NewEvent { kind: kind.to_owned(), data: serde_json::json!({"n": n}) }
}

/// A listener that keeps what it hears.
fn recorder() -> (ChangeListener, Arc<Mutex<Vec<ExternalChange>>>) {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = heard.clone();
    let listener: ChangeListener = Arc::new(move |change: &ExternalChange| {
        kept.lock().unwrap().push(change.clone());
    });
    (listener, heard)
}

/// Waits until `heard` holds a change `wanted` accepts; panics after [`HEARD_WITHIN`].
async fn hear(
    heard: &Mutex<Vec<ExternalChange>>,
    what: &str,
    wanted: impl Fn(&ExternalChange) -> bool,
) {
    let started = std::time::Instant::now();
    while started.elapsed() < HEARD_WITHIN {
        if heard.lock().unwrap().iter().any(&wanted) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} was not heard within {HEARD_WITHIN:?}; heard {:?}", heard.lock().unwrap());
}

async fn commits_through_both_handles_stay_gapless((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&a, &conversation, &[event("created", 0)]).await;
    let (tasks, commits) = (8u64, 40u64);
    let mut handles = Vec::new();
    for task in 0..tasks {
        let store = if task % 2 == 0 { a.clone() } else { b.clone() };
        let id = conversation.id.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..commits {
                let events = vec![event("a", task * 1_000 + n), event("b", task * 1_000 + n)];
                let commit = Commit::events(&id, events, Timestamp::from_millis(2_000));
                match store.commit(&commit).await.unwrap() {
                    CommitOutcome::Committed { events, .. } => {
                        assert_eq!(events[1].offset, events[0].offset + 1, "one commit's events");
                        ids.extend(events.into_iter().map(|event| event.id));
                    }
                    other => panic!("expected the commit to apply, got {other:?}"),
                }
            }
            ids
        }));
    }
    let mut acknowledged = BTreeSet::new();
    for handle in handles {
        acknowledged.extend(handle.await.unwrap());
    }
    let total = 1 + tasks * commits * 2;
    for store in [&a, &b] {
        let log = store.list_events(&conversation.id, None, u32::MAX).await.unwrap();
        let offsets: Vec<u64> = log.iter().map(|event| event.offset).collect();
        assert_eq!(offsets, (0..total).collect::<Vec<_>>(), "gapless, in order, seen by both");
        let stored: BTreeSet<String> = log.into_iter().skip(1).map(|event| event.id).collect();
        assert_eq!(stored, acknowledged, "every acknowledged event once");
    }
}

async fn a_key_committed_through_one_is_a_duplicate_through_the_other(
    (a, b): (Arc<dyn Store>, Arc<dyn Store>),
) {
    let first = sample_conversation("agent-a", 1_000);
    let second = sample_conversation("agent-a", 1_001);
    create(&a, &first, &[]).await;
    create(&a, &second, &[]).await;
    let keyed = |conversation: &str, key: &str| Commit {
        idempotency_key: Some(key.to_owned()),
        idempotency_fingerprint: Some(format!("digest of {conversation}")),
        ..Commit::events(conversation, vec![event("said", 1)], Timestamp::from_millis(2_000))
    };
    assert!(matches!(
        a.commit(&keyed(&first.id, "key-1")).await.unwrap(),
        CommitOutcome::Committed { .. }
    ));
    let record = a.find_idempotency("key-1").await.unwrap().expect("the key is stored");
    for (conversation, store) in [(&first.id, &b), (&second.id, &b), (&second.id, &a)] {
        assert_eq!(
            store.commit(&keyed(conversation, "key-1")).await.unwrap(),
            CommitOutcome::Duplicate(record.clone()),
            "the first use wins, through either handle, for any conversation"
        );
    }
    assert_eq!(b.list_events(&first.id, None, 10).await.unwrap().len(), 1);
    assert!(b.list_events(&second.id, None, 10).await.unwrap().is_empty());
}

async fn racing_commits_with_one_key_apply_once((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let first = sample_conversation("agent-a", 1_000);
    let second = sample_conversation("agent-a", 1_001);
    create(&a, &first, &[]).await;
    create(&a, &second, &[]).await;
    for round in 0..5 {
        let key = format!("race-{round}");
        let mut handles = Vec::new();
        for n in 0..8 {
            let store = if n % 2 == 0 { a.clone() } else { b.clone() };
            let conversation = if n % 4 < 2 { first.id.clone() } else { second.id.clone() };
            let commit = Commit {
                idempotency_key: Some(key.clone()),
                ..Commit::events(&conversation, vec![event("said", n)], Timestamp::from_millis(2))
            };
            handles.push(tokio::spawn(async move { store.commit(&commit).await.unwrap() }));
        }
        let mut applied = 0;
        let mut duplicates = Vec::new();
        for handle in handles {
            match handle.await.unwrap() {
                CommitOutcome::Committed { .. } => applied += 1,
                CommitOutcome::Duplicate(record) => duplicates.push(record),
                CommitOutcome::NotFound => panic!("both conversations exist"),
            }
        }
        assert_eq!(applied, 1, "one of 8 racing commits with key {key} applies");
        let record = a.find_idempotency(&key).await.unwrap().expect("the key is stored");
        assert!(duplicates.iter().all(|duplicate| *duplicate == record), "{duplicates:?}");
    }
    let logged = a.list_events(&first.id, None, 100).await.unwrap().len()
        + a.list_events(&second.id, None, 100).await.unwrap().len();
    assert_eq!(logged, 5, "one set of events per key");
}

async fn a_voice_token_claimed_through_both_has_one_winner(
    (a, b): (Arc<dyn Store>, Arc<dyn Store>),
) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&a, &conversation, &[]).await;
    for n in 0..5u8 {
        let record = sample_segment(&conversation.id, &hash(n));
        assert!(a.create_voice_segment(&record).await.unwrap());
        let mut handles = Vec::new();
        for claimant in 0..8 {
            let store = if claimant % 2 == 0 { a.clone() } else { b.clone() };
            let token = record.token_hash.clone();
            handles.push(tokio::spawn(async move {
                store.claim_voice_token(&token, Timestamp::from_millis(2_000)).await.unwrap()
            }));
        }
        let mut winners = 0;
        for handle in handles {
            winners += usize::from(handle.await.unwrap().is_some());
        }
        assert_eq!(winners, 1, "a token opens one socket, whichever daemon is asked");
    }
}

async fn appends_through_one_are_heard_by_the_other((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let (listener, heard) = recorder();
    b.listen(listener);
    let conversation = sample_conversation("agent-a", 1_000);
    create(&a, &conversation, &[event("created", 0)]).await;
    let id = conversation.id.clone();
    hear(&heard, "the creation's first event", |change| {
        matches!(change, ExternalChange::Appended { conversation_id, next_offset: 1 }
            if *conversation_id == id)
    })
    .await;
    let commit = Commit::events(&id, vec![event("a", 1), event("b", 2)], Timestamp::from_millis(2));
    a.commit(&commit).await.unwrap();
    hear(&heard, "an append through the other handle", |change| {
        matches!(change, ExternalChange::Appended { conversation_id, next_offset: 3 }
            if *conversation_id == id)
    })
    .await;
}

async fn locks_exclude_across_handles((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let held = a.lock("step/conv_1").await.unwrap().expect("a shared store shares locks");
    assert!(matches!(b.try_lock("step/conv_1").await.unwrap(), LockAttempt::Busy));
    assert!(matches!(a.try_lock("step/conv_1").await.unwrap(), LockAttempt::Busy), "not reentrant");
    let other = b.try_lock("step/conv_2").await.unwrap();
    assert!(matches!(other, LockAttempt::Held(_)), "another name is another lock");

    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("step/conv_1").await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the other handle waits while the lock is held");
    drop(held);
    let taken = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the lock passes on once released")
        .unwrap();
    assert!(taken.is_some());
    assert!(matches!(a.try_lock("step/conv_1").await.unwrap(), LockAttempt::Busy));
    drop(taken);
    let started = std::time::Instant::now();
    loop {
        if let LockAttempt::Held(_) = a.try_lock("step/conv_1").await.unwrap() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "a dropped lock is released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A caller that stops waiting takes no lock with it.
    let held = a.lock("step/conv_3").await.unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(100), b.lock("step/conv_3")).await;
    assert!(gave_up.is_err(), "still held");
    drop(held);
    let started = std::time::Instant::now();
    loop {
        if let LockAttempt::Held(_) = a.try_lock("step/conv_3").await.unwrap() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "an abandoned wait keeps no lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn memory_writes_are_heard_by_the_other((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let (listener, heard) = recorder();
    b.listen(listener);
    let memory = super::sample_memory("Deploys go through the staging cluster", Scope::Repo, 1);
    a.insert_memories(std::slice::from_ref(&memory), "key:alice").await.unwrap();
    let id = memory.id.clone();
    hear(&heard, "a memory written through the other handle", |change| {
        matches!(change, ExternalChange::Memories { ids } if ids.is_empty() || ids.contains(&id))
    })
    .await;
    assert_eq!(b.count_memories().await.unwrap(), 1, "counts are the database's");
    let (own, heard_own) = recorder();
    a.listen(own);
    a.insert_memories(&[super::sample_memory("another", Scope::Repo, 2)], "key:alice")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !heard_own
            .lock()
            .unwrap()
            .iter()
            .any(|change| matches!(change, ExternalChange::Memories { .. })),
        "a handle is not told of its own memory writes"
    );
}

async fn vectors_stored_are_heard_by_the_other((a, b): (Arc<dyn Store>, Arc<dyn Store>)) {
    let (listener, heard) = recorder();
    b.listen(listener);
    let memory = super::sample_memory("Vectors travel by doorbell", Scope::Repo, 1);
    a.insert_memories(std::slice::from_ref(&memory), "key:alice").await.unwrap();
    let pending: Vec<PendingEmbedding> = a.pending_embeddings("model-a", 0, 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    let vectors = vec![(pending[0].clone(), vec![0.5_f32, -0.25, 1.0])];
    a.store_embeddings("model-a", &vectors).await.unwrap();
    let id = memory.id.clone();
    hear(&heard, "vectors stored through the other handle", |change| {
        matches!(change, ExternalChange::Vectors { model, ids }
            if model == "model-a" && (ids.is_empty() || ids.contains(&id)))
    })
    .await;
    let loaded = b.load_embeddings_of("model-a", std::slice::from_ref(&id)).await.unwrap();
    assert_eq!(loaded, vec![(id, vec![0.5_f32, -0.25, 1.0])]);
}
