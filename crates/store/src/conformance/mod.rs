//! The conformance suite: behaviour every [`MemoryStore`] backend must show.
//!
//! A backend's tests call [`run`] (and [`run_conversations`] for its [`ConversationStore`] side)
//! with a function that opens a fresh, empty store; each check gets its own store and panics with
//! a message naming what broke.

use std::future::Future;
use std::sync::Arc;

use cairn_types::{IdPrefix, JsonObject, Memory, Scope, Status, Timestamp, new_id};

use crate::Store;

/// Runs every check, each against a fresh store from `open_store`.
pub async fn run<F, Fut>(mut open_store: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    inserted_memories_read_back_unchanged(open_store().await).await;
    lists_are_newest_first_filtered_and_paged(open_store().await).await;
    updates_apply_atomically_and_archive(open_store().await).await;
    search_ranks_by_relevance_and_follows_edits(open_store().await).await;
    counts_leave_out_archived(open_store().await).await;
    recall_marks_memories_and_remembers_tasks(open_store().await).await;
    recalls_recorded_together_count_each_and_keep_the_latest(open_store().await).await;
    outcomes_count_previous_failures(open_store().await).await;
    evidence_reads_back(open_store().await).await;
    concurrent_writers_lose_nothing(open_store().await).await;
    keys_are_found_by_hash_until_revoked(open_store().await).await;
    every_change_is_audited(open_store().await).await;
    outcomes_and_evidence_are_found_by_task(open_store().await).await;
    connectors_keep_their_items_in_step(open_store().await).await;
    conflicts_are_recorded_once_and_resolved_once(open_store().await).await;
    guarded_changes_apply_whole_or_not_at_all(open_store().await).await;
    vectors_follow_their_memories_versions(open_store().await).await;
    erased_memories_leave_no_content_behind(open_store().await).await;
    conversation_tokens_open_until_expired_or_revoked(open_store().await).await;
    deleted_conversations_leave_nothing(open_store().await).await;
    text_with_nul_is_kept_or_refused(open_store().await).await;
    neighbours_are_the_live_memories_stored_next_to_each(open_store().await).await;
    live_memories_are_walked_in_storing_order(open_store().await).await;
    idempotency_keys_run_once_and_answer_again(open_store().await).await;
}

/// A memory for tests, created at `millis`.
pub fn sample_memory(content: &str, scope: Scope, millis: i64) -> Memory {
    let mut metadata = JsonObject::new();
    metadata.insert("origin".into(), serde_json::json!({"tool": "conformance", "n": 1}));
    Memory {
        id: new_id(IdPrefix::Memory),
        content: content.to_owned(),
        scope,
        status: Status::Active,
        repo: Some("cairn".to_owned()),
        tags: vec!["build".to_owned(), "tooling".to_owned()],
        source: Some("conformance".to_owned()),
        metadata,
        created_at: Timestamp::from_millis(millis),
        updated_at: Timestamp::from_millis(millis),
        last_recalled_at: None,
        recall_count: 0,
        archived_at: None,
    }
}

mod connectors;
mod conversations;
mod governance;
mod keys;
mod memories;
mod outcomes;
mod shared;
mod voice;
mod watched;

pub use connectors::run_connectors;
pub use conversations::{run_conversations, sample_conversation};
pub use shared::{run_shared, run_shared_conversations};
pub use watched::{FailingSync, FailingSyncStore, Hooks, InjectedFailure, Watched};

use connectors::connectors_keep_their_items_in_step;
use governance::{
    conflicts_are_recorded_once_and_resolved_once, deleted_conversations_leave_nothing,
    erased_memories_leave_no_content_behind, every_change_is_audited,
};
use keys::{
    conversation_tokens_open_until_expired_or_revoked, idempotency_keys_run_once_and_answer_again,
    keys_are_found_by_hash_until_revoked,
};
pub use memories::migrated_recalls_count_on;
use memories::{
    concurrent_writers_lose_nothing, counts_leave_out_archived,
    guarded_changes_apply_whole_or_not_at_all, inserted_memories_read_back_unchanged,
    lists_are_newest_first_filtered_and_paged, live_memories_are_walked_in_storing_order,
    neighbours_are_the_live_memories_stored_next_to_each,
    recall_marks_memories_and_remembers_tasks,
    recalls_recorded_together_count_each_and_keep_the_latest,
    search_ranks_by_relevance_and_follows_edits, text_with_nul_is_kept_or_refused,
    updates_apply_atomically_and_archive, vectors_follow_their_memories_versions,
};
use outcomes::{
    evidence_reads_back, outcomes_and_evidence_are_found_by_task, outcomes_count_previous_failures,
};
