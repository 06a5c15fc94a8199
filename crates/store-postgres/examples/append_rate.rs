//! Measures commits per second to the event log on a throwaway PostgreSQL with its durable
//! defaults: to one conversation and across 64, from 16 tasks spread over 1 and 2 stores,
//! with `synchronous_commit` on and off. Prints a Markdown table.
//!
//! `cargo run --release -p cairn-store-postgres --example append_rate`

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_store::conformance::sample_conversation;
use cairn_store::{Commit, CommitOutcome, ConversationStore, NewEvent};
use cairn_store_postgres::{PgOptions, PgStore};
use cairn_test_support::postgres::TestCluster;
use cairn_types::{Snapshot, Timestamp};

const TASKS: usize = 16;
const RUN: Duration = Duration::from_secs(4);

async fn measure(stores: &[PgStore], conversations: usize) -> f64 {
    let mut ids = Vec::new();
    for _ in 0..conversations {
        let conversation = sample_conversation("bench", 1_000);
        let snapshot = Snapshot::empty(&conversation);
        stores[0].create_conversation(&conversation, &snapshot, &[]).await.unwrap();
        ids.push(conversation.id);
    }
    let ids = Arc::new(ids);
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let store = stores[task % stores.len()].clone();
            let ids = ids.clone();
            tokio::spawn(async move {
                let mut done = 0u64;
                while started.elapsed() < RUN {
                    let id = &ids[(task + done as usize) % ids.len()];
                    let event = NewEvent {
                        kind: "custom".to_owned(),
                        data: serde_json::json!({"task": task, "n": done, "text": "hello there"}),
                    };
                    let commit = Commit::events(id, vec![event], Timestamp::now());
                    let outcome = store.commit(&commit).await.unwrap();
                    assert!(matches!(outcome, CommitOutcome::Committed { .. }));
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The logs are whole: offsets 0..n-1 in every conversation.
    let mut logged = 0;
    for id in ids.iter() {
        let log = stores[0].list_events(id, None, u32::MAX).await.unwrap();
        assert!(log.iter().enumerate().all(|(n, event)| event.offset == n as u64));
        logged += log.len() as u64;
    }
    assert_eq!(logged, total);
    total as f64 / elapsed
}

#[tokio::main]
async fn main() {
    let cluster = TestCluster::start_durable();
    println!("| synchronous_commit | stores | conversations | commits/s |");
    println!("|---|---|---|---|");
    for synchronous in ["on", "off"] {
        let url = cluster.create_database();
        let database = url.rsplit('/').next().unwrap();
        cluster.psql(
            "postgres",
            &format!("ALTER DATABASE {database} SET synchronous_commit = {synchronous}"),
        );
        let options =
            |_: usize| PgOptions { pool_size: TASKS, listen: false, ..PgOptions::new(&url) };
        let one = vec![PgStore::open(options(0)).await.unwrap()];
        let two = vec![one[0].clone(), PgStore::open(options(1)).await.unwrap()];
        for (stores, label) in [(&one, 1), (&two, 2)] {
            for conversations in [1, 64] {
                let rate = measure(stores, conversations).await;
                println!("| {synchronous} | {label} | {conversations} | {rate:.0} |");
            }
        }
    }
}
