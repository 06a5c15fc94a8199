//! Checks of outcomes and patch evidence: recorded, counted and found by task.

use std::sync::Arc;

use cairn_types::{IdPrefix, Outcome, PatchEvidence, Timestamp, new_id};

use crate::Store;

fn sample_outcome(command: &str, exit_code: i32, millis: i64) -> Outcome {
    Outcome {
        outcome_id: new_id(IdPrefix::Outcome),
        command: command.to_owned(),
        exit_code,
        succeeded: exit_code == 0,
        task: Some("t".to_owned()),
        repo: None,
        recorded_at: Timestamp::from_millis(millis),
        previous_failures: 0,
    }
}

pub(super) async fn outcomes_count_previous_failures(store: Arc<dyn Store>) {
    let first = store.insert_outcome(&sample_outcome("make test", 2, 1), Some("t")).await.unwrap();
    assert_eq!(first.previous_failures, 0);
    store.insert_outcome(&sample_outcome("make build", 1, 2), Some("t")).await.unwrap();
    store.insert_outcome(&sample_outcome("make test", 0, 3), Some("t")).await.unwrap();
    let third = store.insert_outcome(&sample_outcome("make test", 1, 4), Some("t")).await.unwrap();
    assert_eq!(third.previous_failures, 1, "counts failures of the same command only");
    let listed = store.outcomes_for_command("make test", 10).await.unwrap();
    let exit_codes: Vec<i32> = listed.iter().map(|o| o.exit_code).collect();
    assert_eq!(exit_codes, vec![1, 0, 2], "newest first");
    assert_eq!(listed[0], third);
}

pub(super) async fn evidence_reads_back(store: Arc<dyn Store>) {
    let evidence = PatchEvidence {
        evidence_id: new_id(IdPrefix::Evidence),
        task: "fix the build".to_owned(),
        files: vec!["src/main.rs".to_owned()],
        commands: vec!["cargo test".to_owned()],
        memories_used: vec!["mem_a".to_owned()],
        created_at: Timestamp::from_millis(7),
    };
    store.insert_evidence(&evidence, "fix the build").await.unwrap();
    assert_eq!(store.get_evidence(&evidence.evidence_id).await.unwrap(), Some(evidence));
    assert_eq!(store.get_evidence("ev_missing").await.unwrap(), None);
}

pub(super) async fn outcomes_and_evidence_are_found_by_task(store: Arc<dyn Store>) {
    store.insert_outcome(&sample_outcome("make", 1, 1), Some("ship")).await.unwrap();
    store.insert_outcome(&sample_outcome("make", 0, 2), Some("ship")).await.unwrap();
    store.insert_outcome(&sample_outcome("make", 0, 3), None).await.unwrap();
    let outcomes = store.outcomes_for_task("ship").await.unwrap();
    assert_eq!(outcomes.iter().map(|o| o.exit_code).collect::<Vec<_>>(), [1, 0], "oldest first");
    let evidence = PatchEvidence {
        evidence_id: new_id(IdPrefix::Evidence),
        task: "Ship".to_owned(),
        files: vec![],
        commands: vec![],
        memories_used: vec![],
        created_at: Timestamp::from_millis(5),
    };
    store.insert_evidence(&evidence, "ship").await.unwrap();
    assert_eq!(store.evidence_for_task("ship").await.unwrap(), vec![evidence]);
    assert!(store.evidence_for_task("other").await.unwrap().is_empty());
}
