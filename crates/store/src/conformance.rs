//! The conformance suite: behaviour every [`MemoryStore`] backend must show.
//!
//! A backend's tests call [`run`] (and [`run_conversations`] for a [`ConversationStore`]) with
//! a function that opens a fresh, empty store; each check gets its own store and panics with
//! a message naming what broke.

use std::future::Future;
use std::sync::Arc;

use cairn_types::{
    ApiKey, Connector, ConnectorKind, Conversation, ConversationChannel, IdPrefix, JsonObject,
    Lifecycle, Memory, Outcome, PatchEvidence, Role, RuntimeEvent, Scope, Snapshot, Status,
    SyncReport, Timestamp, new_id,
};

use crate::{
    Audit, AuditFilter, Commit, CommitOutcome, ConflictRecord, ConnectorItem, ConversationCursor,
    ConversationQuery, ConversationStore, IdempotencyRecord, ItemUpdate, MemoryChange,
    MemoryFilter, NewEvent, NewPrompt, PendingEmbedding, PromptRecord, Store, SyncBatch,
};

const TEST_AUDIT: Audit<'static> = Audit { actor: "tester", action: "update" };

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
    outcomes_count_previous_failures(open_store().await).await;
    evidence_reads_back(open_store().await).await;
    concurrent_writers_lose_nothing(open_store().await).await;
    keys_are_found_by_hash_until_revoked(open_store().await).await;
    every_change_is_audited(open_store().await).await;
    outcomes_and_evidence_are_found_by_task(open_store().await).await;
    connectors_keep_their_items_in_step(open_store().await).await;
    conflicts_are_recorded_once_and_resolved_once(open_store().await).await;
    vectors_follow_their_memories_versions(open_store().await).await;
    erased_memories_leave_no_content_behind(open_store().await).await;
    conversation_tokens_open_until_expired_or_revoked(open_store().await).await;
    deleted_conversations_leave_nothing(open_store().await).await;
}

async fn erased_memories_leave_no_content_behind(store: Arc<dyn Store>) {
    let mut memory = sample_memory("Ada's number is 555-0100", Scope::Task, 1);
    memory.tags = vec!["contact:sms:+15550100".to_owned()];
    let kept = sample_memory("Ada's unrelated neighbour", Scope::Task, 2);
    store.insert_memories(&[memory.clone(), kept.clone()], "key:alice").await.unwrap();
    let change =
        MemoryChange { content: Some("Ada's number is 555-0199".to_owned()), ..Default::default() };
    let audit = Audit { actor: "key:alice", action: "update" };
    store.update_memory(&memory.id, &change, Timestamp::from_millis(3), &audit).await.unwrap();
    assert_eq!(
        store.memory_ids_tagged("contact:sms:+15550100").await.unwrap(),
        [memory.id.clone()]
    );
    let mut containing = store.memory_ids_containing("ADA'S").await.unwrap();
    containing.sort();
    let mut both = vec![memory.id.clone(), kept.id.clone()];
    both.sort();
    assert_eq!(containing, both, "case folded");

    let audit = Audit { actor: "key:admin", action: "erase" };
    let ids = [memory.id.clone(), "mem_nope".to_owned()];
    let erased = store.erase_memories(&ids, Timestamp::from_millis(4), &audit).await.unwrap();
    assert_eq!(erased, std::slice::from_ref(&memory.id), "only what existed");
    assert!(store.get_memories(std::slice::from_ref(&memory.id)).await.unwrap().is_empty());
    let found =
        store.search_memories(&["number".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert!(found.is_empty(), "no full-text entry is left");
    assert_eq!(store.count_memories().await.unwrap(), 1);
    let by_memory = AuditFilter { memory_id: Some(memory.id.clone()), actor: None };
    let (entries, _) = store.list_audit(&by_memory, 10, 0).await.unwrap();
    assert_eq!(entries[0].action, "erase", "newest first");
    assert_eq!(entries[0].actor, "key:admin");
    assert!(
        entries.iter().all(|entry| entry.before.is_none() && entry.after.is_none()),
        "{entries:?}"
    );
    assert_eq!(entries.len(), 3, "create, update and erase are still recorded");
}

async fn conversation_tokens_open_until_expired_or_revoked(store: Arc<dyn Store>) {
    let token = cairn_types::ConversationTokenRecord {
        id: "tok_1".to_owned(),
        conversation_id: "conv_1".to_owned(),
        hash: "ef".repeat(32),
        created_at: Timestamp::from_millis(1_000),
        expires_at: Timestamp::from_millis(2_000),
        revoked_at: None,
    };
    store.insert_conversation_token(&token).await.unwrap();
    let find = |at: i64| store.find_conversation_token(&token.hash, Timestamp::from_millis(at));
    assert_eq!(find(1_500).await.unwrap(), Some(token.clone()));
    assert_eq!(find(2_000).await.unwrap(), None, "expired at its expiry");
    assert!(store.revoke_conversation_token("tok_1", Timestamp::from_millis(1_600)).await.unwrap());
    assert_eq!(find(1_700).await.unwrap(), None, "revoked");
    assert!(
        !store.revoke_conversation_token("tok_1", Timestamp::from_millis(1_800)).await.unwrap()
    );
}

async fn deleted_conversations_leave_nothing(store: Arc<dyn Store>) {
    let said = |text: &str| NewEvent {
        kind: "message".to_owned(),
        data: serde_json::json!({"text": text}),
    };
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[said("I am Ada Lovelace")]).await;
    let other = sample_conversation("agent-a", 1_001);
    create(&store, &other, &[said("I am Grace")]).await;
    let contact = store.conversations_with_contact("sms", "+15550100").await.unwrap();
    assert_eq!(contact.len(), 2, "both are with the sample contact");
    let mentioning = store.conversations_mentioning("ada LOVELACE").await.unwrap();
    assert_eq!(mentioning, std::slice::from_ref(&conversation.id), "case folded");
    let deleted = store
        .delete_conversations(&[conversation.id.clone(), "conv_nope".to_owned()])
        .await
        .unwrap();
    assert_eq!(deleted, std::slice::from_ref(&conversation.id));
    assert!(store.get_conversation(&conversation.id).await.unwrap().is_none());
    assert!(store.list_events(&conversation.id, None, 10).await.unwrap().is_empty());
    assert!(store.get_conversation(&other.id).await.unwrap().is_some(), "the other stays");
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

async fn inserted_memories_read_back_unchanged(store: Arc<dyn Store>) {
    let memory =
        sample_memory("Use pnpm, not npm, in this repo.\nSecond line.", Scope::Repo, 1_000);
    store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
    let read = store.get_memory(&memory.id).await.unwrap();
    assert_eq!(read.as_ref(), Some(&memory), "a stored memory must read back field for field");
    assert_eq!(store.get_memory("mem_missing").await.unwrap(), None, "unknown ids read as None");
}

async fn lists_are_newest_first_filtered_and_paged(store: Arc<dyn Store>) {
    let mut memories = Vec::new();
    for (i, scope) in
        [Scope::Repo, Scope::User, Scope::Global, Scope::Task, Scope::Repo].iter().enumerate()
    {
        let mut memory = sample_memory(&format!("memory number {i}"), *scope, 1_000 + i as i64);
        if i == 1 {
            memory.status = Status::Review;
        }
        if i == 2 {
            memory.repo = Some("other".to_owned());
        }
        memories.push(memory);
    }
    store.insert_memories(&memories, "tester").await.unwrap();
    let archived_change = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(9_000))),
        ..Default::default()
    };
    store
        .update_memory(
            &memories[3].id,
            &archived_change,
            Timestamp::from_millis(9_000),
            &TEST_AUDIT,
        )
        .await
        .unwrap();

    let all = store.list_memories(&MemoryFilter::default(), 10, 0).await.unwrap();
    let ids: Vec<&str> = all.memories.iter().map(|m| m.id.as_str()).collect();
    let expected: Vec<&str> = [4, 2, 1, 0].iter().map(|&i| memories[i].id.as_str()).collect();
    assert_eq!(ids, expected, "lists are newest first and leave archived memories out");
    assert_eq!(all.total, 4);

    let page = store.list_memories(&MemoryFilter::default(), 2, 1).await.unwrap();
    assert_eq!(page.total, 4, "total counts every match, not the page");
    assert_eq!(page.memories.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), expected[1..3]);

    let with_archived = MemoryFilter { include_archived: true, ..Default::default() };
    assert_eq!(store.list_memories(&with_archived, 10, 0).await.unwrap().total, 5);

    let repo_scope = MemoryFilter { scope: Some(Scope::Repo), ..Default::default() };
    assert_eq!(store.list_memories(&repo_scope, 10, 0).await.unwrap().total, 2);
    let review = MemoryFilter { status: Some(Status::Review), ..Default::default() };
    let review_page = store.list_memories(&review, 10, 0).await.unwrap();
    assert_eq!(review_page.memories.len(), 1);
    assert_eq!(review_page.memories[0].id, memories[1].id);
    let other_repo = MemoryFilter { repo: Some("other".to_owned()), ..Default::default() };
    assert_eq!(
        store.list_memories(&other_repo, 10, 0).await.unwrap().memories[0].id,
        memories[2].id
    );
    let past_end = store.list_memories(&MemoryFilter::default(), 10, 50).await.unwrap();
    assert!(past_end.memories.is_empty());
    assert_eq!(past_end.total, 4);
}

async fn updates_apply_atomically_and_archive(store: Arc<dyn Store>) {
    let memory = sample_memory("original text", Scope::User, 1_000);
    store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
    let change = MemoryChange {
        content: Some("changed text".to_owned()),
        status: Some(Status::Stale),
        tags: Some(vec!["x".to_owned()]),
        ..Default::default()
    };
    let updated = store
        .update_memory(&memory.id, &change, Timestamp::from_millis(2_000), &TEST_AUDIT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.content, "changed text");
    assert_eq!(updated.status, Status::Stale);
    assert_eq!(updated.tags, vec!["x".to_owned()]);
    assert_eq!(updated.scope, Scope::User, "fields not in the change stay as they were");
    assert_eq!(updated.metadata, memory.metadata);
    assert_eq!(updated.updated_at, Timestamp::from_millis(2_000));
    assert_eq!(updated.created_at, memory.created_at);
    assert_eq!(store.get_memory(&memory.id).await.unwrap(), Some(updated));

    let archive = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(3_000))),
        ..Default::default()
    };
    let archived = store
        .update_memory(&memory.id, &archive, Timestamp::from_millis(3_000), &TEST_AUDIT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(archived.archived_at, Some(Timestamp::from_millis(3_000)));
    let restore = MemoryChange { archived_at: Some(None), ..Default::default() };
    let restored = store
        .update_memory(&memory.id, &restore, Timestamp::from_millis(4_000), &TEST_AUDIT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(restored.archived_at, None);

    let missing = store
        .update_memory("mem_missing", &change, Timestamp::from_millis(5_000), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(missing, None, "updating an unknown id changes nothing and says so");
}

async fn search_ranks_by_relevance_and_follows_edits(store: Arc<dyn Store>) {
    let strong = sample_memory(
        "The deploy script deploys to staging; deploy with care.",
        Scope::Repo,
        1_000,
    );
    let weak = sample_memory(
        "Coffee is in the kitchen. Someone mentioned a deploy once.",
        Scope::Global,
        1_001,
    );
    let unrelated = sample_memory("Tabs, not spaces, in Makefiles.", Scope::Repo, 1_002);
    let archived = sample_memory("deploy deploy deploy archived", Scope::Repo, 1_003);
    store
        .insert_memories(
            &[strong.clone(), weak.clone(), unrelated.clone(), archived.clone()],
            "tester",
        )
        .await
        .unwrap();
    let archive = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(2_000))),
        ..Default::default()
    };
    store
        .update_memory(&archived.id, &archive, Timestamp::from_millis(2_000), &TEST_AUDIT)
        .await
        .unwrap();

    let terms = vec!["deploy".to_owned()];
    let hits = store.search_memories(&terms, &MemoryFilter::default(), 10).await.unwrap();
    let ids: Vec<&str> = hits.iter().map(|h| h.memory.id.as_str()).collect();
    assert_eq!(ids, vec![strong.id.as_str(), weak.id.as_str()], "relevant first; archived never");
    assert!(hits[0].relevance > hits[1].relevance && hits[1].relevance > 0.0);

    let stemmed = store
        .search_memories(&["deploying".to_owned()], &MemoryFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(stemmed.len(), 2, "word forms match (stemming)");

    let only_global = MemoryFilter { scope: Some(Scope::Global), ..Default::default() };
    let global_hits = store.search_memories(&terms, &only_global, 10).await.unwrap();
    assert_eq!(global_hits.len(), 1);
    assert_eq!(global_hits[0].memory.id, weak.id);

    let by_tag =
        store.search_memories(&["tooling".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(by_tag.len(), 3, "tags are searchable");

    let odd = store
        .search_memories(
            &["\"quote\" OR (NEAR".to_owned(), "AND".to_owned()],
            &MemoryFilter::default(),
            10,
        )
        .await;
    assert!(odd.is_ok(), "search terms are data, never query syntax: {odd:?}");

    let edit =
        MemoryChange { content: Some("Kitchen has tea now.".to_owned()), ..Default::default() };
    store.update_memory(&weak.id, &edit, Timestamp::from_millis(3_000), &TEST_AUDIT).await.unwrap();
    let after_edit = store.search_memories(&terms, &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(after_edit.len(), 1, "an edited memory is found by its new text only");
    let tea =
        store.search_memories(&["tea".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(tea.len(), 1);
    assert!(store.search_memories(&[], &MemoryFilter::default(), 10).await.unwrap().is_empty());

    let restore = MemoryChange { archived_at: Some(None), ..Default::default() };
    store
        .update_memory(&archived.id, &restore, Timestamp::from_millis(3_500), &TEST_AUDIT)
        .await
        .unwrap();
    let restored = store.search_memories(&terms, &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(restored[0].memory.id, archived.id, "a restored memory is searchable again");
    store
        .update_memory(&archived.id, &archive, Timestamp::from_millis(3_600), &TEST_AUDIT)
        .await
        .unwrap();

    let unseen = vec!["zeppelin".to_owned()];
    assert!(store.search_memories(&unseen, &MemoryFilter::default(), 10).await.unwrap().is_empty());
    store
        .insert_memories(&[sample_memory("A zeppelin overhead.", Scope::User, 4_000)], "tester")
        .await
        .unwrap();
    let seen = store.search_memories(&unseen, &MemoryFilter::default(), 10).await.unwrap();
    assert_eq!(seen.len(), 1, "a word searched before anyone wrote it is found once written");
}

async fn counts_leave_out_archived(store: Arc<dyn Store>) {
    let memories: Vec<Memory> = (0..3).map(|i| sample_memory("x", Scope::Task, i)).collect();
    store.insert_memories(&memories, "tester").await.unwrap();
    let archive =
        MemoryChange { archived_at: Some(Some(Timestamp::from_millis(10))), ..Default::default() };
    store
        .update_memory(&memories[0].id, &archive, Timestamp::from_millis(10), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(store.count_memories().await.unwrap(), 2);
    store
        .update_memory(&memories[0].id, &archive, Timestamp::from_millis(11), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(store.count_memories().await.unwrap(), 2, "archiving twice counts once");
    let restore = MemoryChange { archived_at: Some(None), ..Default::default() };
    store
        .update_memory(&memories[1].id, &restore, Timestamp::from_millis(12), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(store.count_memories().await.unwrap(), 2, "restoring a live memory changes nothing");
    store
        .update_memory(&memories[0].id, &restore, Timestamp::from_millis(13), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(store.count_memories().await.unwrap(), 3);
}

async fn recall_marks_memories_and_remembers_tasks(store: Arc<dyn Store>) {
    let a = sample_memory("a", Scope::Repo, 1);
    let b = sample_memory("b", Scope::Repo, 2);
    store.insert_memories(&[a.clone(), b.clone()], "tester").await.unwrap();
    let at = Timestamp::from_millis(5_000);
    store.record_recall(&[b.id.clone(), a.id.clone()], "fix the build", at).await.unwrap();
    store
        .record_recall(std::slice::from_ref(&a.id), "fix the build", Timestamp::from_millis(6_000))
        .await
        .unwrap();
    let a_after = store.get_memory(&a.id).await.unwrap().unwrap();
    assert_eq!(a_after.recall_count, 2);
    assert_eq!(a_after.last_recalled_at, Some(Timestamp::from_millis(6_000)));
    let b_after = store.get_memory(&b.id).await.unwrap().unwrap();
    assert_eq!((b_after.recall_count, b_after.last_recalled_at), (1, Some(at)));
    assert_eq!(
        store.recalled_for_task("fix the build").await.unwrap(),
        vec![b.id.clone(), a.id.clone()]
    );
    assert!(store.recalled_for_task("another task").await.unwrap().is_empty());
}

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

async fn outcomes_count_previous_failures(store: Arc<dyn Store>) {
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

async fn evidence_reads_back(store: Arc<dyn Store>) {
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

async fn concurrent_writers_lose_nothing(store: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let memory = sample_memory(&format!("writer {writer} item {i}"), Scope::Task, i);
                store.insert_memories(&[memory], "tester").await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(store.count_memories().await.unwrap(), 200, "every acknowledged write is kept");
}

async fn keys_are_found_by_hash_until_revoked(store: Arc<dyn Store>) {
    let key = ApiKey {
        id: new_id(IdPrefix::ApiKey),
        name: Some("ci".to_owned()),
        role: Role::Write,
        prefix: "cairn_ab12".to_owned(),
        hash: "ab".repeat(32),
        created_at: Timestamp::from_millis(1),
        revoked_at: None,
    };
    store.insert_key(&key).await.unwrap();
    assert_eq!(store.find_active_key(&key.hash).await.unwrap(), Some(key.clone()));
    assert_eq!(store.find_active_key(&"cd".repeat(32)).await.unwrap(), None);
    assert_eq!(store.list_keys().await.unwrap(), vec![key.clone()]);
    assert!(store.revoke_key(&key.id, Timestamp::from_millis(2)).await.unwrap());
    assert!(
        !store.revoke_key(&key.id, Timestamp::from_millis(3)).await.unwrap(),
        "revoking twice says so"
    );
    assert_eq!(store.find_active_key(&key.hash).await.unwrap(), None, "revoked keys stop working");
    assert_eq!(store.list_keys().await.unwrap()[0].revoked_at, Some(Timestamp::from_millis(2)));
}

async fn every_change_is_audited(store: Arc<dyn Store>) {
    let memory = sample_memory("before", Scope::User, 1);
    store.insert_memories(std::slice::from_ref(&memory), "key:alice").await.unwrap();
    let change = MemoryChange { content: Some("after".to_owned()), ..Default::default() };
    let audit = Audit { actor: "jwt:bob", action: "update" };
    store.update_memory(&memory.id, &change, Timestamp::from_millis(2), &audit).await.unwrap();
    let other = sample_memory("other", Scope::User, 3);
    store.insert_memories(std::slice::from_ref(&other), "key:alice").await.unwrap();

    let (entries, total) = store.list_audit(&AuditFilter::default(), 10, 0).await.unwrap();
    assert_eq!(total, 3);
    let actions: Vec<(&str, &str)> =
        entries.iter().map(|e| (e.action.as_str(), e.actor.as_str())).collect();
    assert_eq!(
        actions,
        [("create", "key:alice"), ("update", "jwt:bob"), ("create", "key:alice")],
        "newest first"
    );
    let update = &entries[1];
    assert_eq!(update.memory_id, memory.id);
    assert_eq!(update.before.as_ref().unwrap()["content"], "before");
    assert_eq!(update.after.as_ref().unwrap()["content"], "after");
    assert_eq!(update.at, Timestamp::from_millis(2));
    assert!(entries[2].before.is_none());

    let by_memory = AuditFilter { memory_id: Some(memory.id.clone()), actor: None };
    assert_eq!(store.list_audit(&by_memory, 10, 0).await.unwrap().1, 2);
    let by_actor = AuditFilter { memory_id: None, actor: Some("jwt:bob".to_owned()) };
    assert_eq!(store.list_audit(&by_actor, 10, 0).await.unwrap().1, 1);
    let paged = store.list_audit(&AuditFilter::default(), 1, 1).await.unwrap();
    assert_eq!((paged.0.len(), paged.0[0].action.as_str(), paged.1), (1, "update", 3));

    let missing = store
        .update_memory("mem_missing", &change, Timestamp::from_millis(4), &audit)
        .await
        .unwrap();
    assert!(missing.is_none());
    assert_eq!(
        store.list_audit(&AuditFilter::default(), 10, 0).await.unwrap().1,
        3,
        "no entry for no change"
    );
    let both = store
        .get_memories(&[other.id.clone(), "mem_missing".to_owned(), memory.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        both.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [other.id.as_str(), memory.id.as_str()]
    );
}

async fn outcomes_and_evidence_are_found_by_task(store: Arc<dyn Store>) {
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

async fn connectors_keep_their_items_in_step(store: Arc<dyn Store>) {
    let connector = Connector {
        id: new_id(IdPrefix::Connector),
        kind: ConnectorKind::Folder,
        name: "docs".to_owned(),
        path: "/srv/docs".to_owned(),
        scope: Scope::Repo,
        repo: Some("docs".to_owned()),
        max_commits: 500,
        created_at: Timestamp::from_millis(1),
        last_sync: None,
    };
    store.insert_connector(&connector).await.unwrap();
    assert_eq!(store.get_connector(&connector.id).await.unwrap(), Some(connector.clone()));
    assert_eq!(store.list_connectors().await.unwrap(), vec![connector.clone()]);

    let first = sample_memory("Install with make.", Scope::Repo, 2);
    let second = sample_memory("Deploy on Fridays never.", Scope::Repo, 2);
    let inserts = vec![
        (first.clone(), "setup.md#Install".to_owned(), "h1".to_owned()),
        (second.clone(), "deploy.md".to_owned(), "h2".to_owned()),
    ];
    let batch = SyncBatch { inserts, ..SyncBatch::default() };
    store
        .apply_sync_batch(&connector.id, &batch, Timestamp::from_millis(3), "system:sync")
        .await
        .unwrap();
    assert_eq!(store.connector_memory_count(&connector.id).await.unwrap(), 2);
    assert_eq!(store.count_memories().await.unwrap(), 2);
    let mut items = store.connector_items(&connector.id).await.unwrap();
    items.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        items[1],
        ConnectorItem {
            key: "setup.md#Install".to_owned(),
            memory_id: first.id.clone(),
            content_hash: "h1".to_owned()
        }
    );

    let update = ItemUpdate {
        key: "setup.md#Install".to_owned(),
        memory_id: first.id.clone(),
        content: "Install with just.".to_owned(),
        content_hash: "h3".to_owned(),
    };
    let removal = items[0].clone();
    let batch =
        SyncBatch { updates: vec![update], removals: vec![removal], ..SyncBatch::default() };
    store
        .apply_sync_batch(&connector.id, &batch, Timestamp::from_millis(4), "system:sync")
        .await
        .unwrap();
    assert_eq!(store.get_memory(&first.id).await.unwrap().unwrap().content, "Install with just.");
    assert!(store.get_memory(&second.id).await.unwrap().unwrap().archived_at.is_some());
    assert_eq!(store.connector_memory_count(&connector.id).await.unwrap(), 1);
    assert_eq!(store.count_memories().await.unwrap(), 1);
    let items = store.connector_items(&connector.id).await.unwrap();
    assert_eq!((items.len(), items[0].content_hash.as_str()), (1, "h3"));
    let (audit, _) = store
        .list_audit(&AuditFilter { memory_id: None, actor: Some("system:sync".to_owned()) }, 10, 0)
        .await
        .unwrap();
    let actions: Vec<&str> = audit.iter().map(|entry| entry.action.as_str()).collect();
    assert_eq!(actions, ["archive", "import", "import", "import"]);

    let report = SyncReport {
        started_at: Timestamp::from_millis(3),
        finished_at: Timestamp::from_millis(4),
        status: "ok".to_owned(),
        imported: 2,
        updated: 1,
        unchanged: 0,
        archived: 1,
        skipped: 0,
        error: None,
    };
    store.record_sync(&connector.id, &report).await.unwrap();
    assert_eq!(store.get_connector(&connector.id).await.unwrap().unwrap().last_sync, Some(report));
    assert!(store.delete_connector(&connector.id).await.unwrap());
    assert!(!store.delete_connector(&connector.id).await.unwrap());
    assert!(store.connector_items(&connector.id).await.unwrap().is_empty());
    assert_eq!(store.get_connector(&connector.id).await.unwrap(), None);
}

async fn conflicts_are_recorded_once_and_resolved_once(store: Arc<dyn Store>) {
    let record = |id: &str, first: &str, second: &str| ConflictRecord {
        id: id.to_owned(),
        first_id: first.to_owned(),
        second_id: second.to_owned(),
        subject: "package manager".to_owned(),
        reason: "pnpm against npm".to_owned(),
        status: "open".to_owned(),
        detected_at: Timestamp::from_millis(1),
        resolution: None,
        resolved_at: None,
    };
    let stored = store
        .insert_conflicts(&[record("cfl_1", "mem_a", "mem_b"), record("cfl_2", "mem_a", "mem_c")])
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    let again = store.insert_conflicts(&[record("cfl_3", "mem_a", "mem_b")]).await.unwrap();
    assert!(again.is_empty(), "a pair is recorded once");
    assert!(store.conflict_exists("mem_a", "mem_b").await.unwrap());
    assert!(!store.conflict_exists("mem_b", "mem_c").await.unwrap());
    let listed = store.list_conflicts(Some("open")).await.unwrap();
    assert_eq!(
        listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["cfl_2", "cfl_1"],
        "newest first"
    );
    assert!(store.resolve_conflict("cfl_1", "keepBoth", Timestamp::from_millis(2)).await.unwrap());
    assert!(!store.resolve_conflict("cfl_1", "keepBoth", Timestamp::from_millis(3)).await.unwrap());
    let resolved = store.get_conflict("cfl_1").await.unwrap().unwrap();
    assert_eq!(
        (resolved.status.as_str(), resolved.resolution.as_deref()),
        ("resolved", Some("keepBoth"))
    );
    assert_eq!(resolved.resolved_at, Some(Timestamp::from_millis(2)));
    assert_eq!(store.list_conflicts(Some("open")).await.unwrap().len(), 1);
    assert_eq!(store.list_conflicts(None).await.unwrap().len(), 2);
    assert_eq!(store.get_conflict("cfl_nope").await.unwrap(), None);
}

async fn vectors_follow_their_memories_versions(store: Arc<dyn Store>) {
    let first = sample_memory("first", Scope::User, 1);
    let second = sample_memory("second", Scope::User, 2);
    store.insert_memories(&[first.clone(), second.clone()], "tester").await.unwrap();
    let pending = store.pending_embeddings("m1", 0, 10).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.memory_id.as_str()).collect::<Vec<_>>(),
        [first.id.as_str(), second.id.as_str()]
    );
    assert_eq!(store.count_pending_embeddings("m1").await.unwrap(), 2);
    let rest = store.pending_embeddings("m1", pending[0].position, 10).await.unwrap();
    assert_eq!(
        rest.iter().map(|p| p.memory_id.as_str()).collect::<Vec<_>>(),
        [second.id.as_str()],
        "paging goes on after a position"
    );

    store.store_embeddings("m1", &[(pending[0].clone(), vec![1.0, 0.0])]).await.unwrap();
    assert_eq!(store.count_pending_embeddings("m1").await.unwrap(), 1);
    assert_eq!(store.count_pending_embeddings("m2").await.unwrap(), 2, "models are apart");
    assert_eq!(
        store.load_embeddings("m1").await.unwrap(),
        vec![(first.id.clone(), vec![1.0, 0.0])]
    );

    let change = MemoryChange { content: Some("first, changed".to_owned()), ..Default::default() };
    store.update_memory(&first.id, &change, Timestamp::from_millis(9), &TEST_AUDIT).await.unwrap();
    assert!(
        store.load_embeddings("m1").await.unwrap().is_empty(),
        "a changed memory's vector is stale"
    );
    let stale = PendingEmbedding {
        position: pending[0].position,
        memory_id: first.id.clone(),
        content: "first".to_owned(),
        version: first.updated_at,
    };
    store.store_embeddings("m1", &[(stale, vec![0.0, 1.0])]).await.unwrap();
    assert!(
        store.load_embeddings("m1").await.unwrap().is_empty(),
        "a vector of an old version is dropped"
    );
    let pending = store.pending_embeddings("m1", 0, 10).await.unwrap();
    assert_eq!(pending[0].content, "first, changed");
    assert_eq!(pending[0].version, Timestamp::from_millis(9));

    let archive =
        MemoryChange { archived_at: Some(Some(Timestamp::from_millis(10))), ..Default::default() };
    store
        .update_memory(&second.id, &archive, Timestamp::from_millis(10), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(
        store.count_pending_embeddings("m1").await.unwrap(),
        1,
        "archived memories wait for nothing"
    );
}

/// Runs every conversation check, each against a fresh store from `open_store`.
pub async fn run_conversations<F, Fut>(mut open_store: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn ConversationStore>>,
{
    conversations_are_created_once_and_read_back(open_store().await).await;
    conversation_pages_never_skip_or_repeat(open_store().await).await;
    conversations_filter_by_agent_and_update_time(open_store().await).await;
    commits_append_gapless_and_move_the_conversation(open_store().await).await;
    lifecycle_and_snapshot_follow_commits(open_store().await).await;
    prompts_open_and_close_with_commits(open_store().await).await;
    idempotent_commits_apply_once(open_store().await).await;
    commits_to_unknown_conversations_change_nothing(open_store().await).await;
    concurrent_committers_get_gapless_offsets(open_store().await).await;
}

/// A conversation for tests, created and last updated at `millis`.
pub fn sample_conversation(agent_id: &str, millis: i64) -> Conversation {
    Conversation {
        id: new_id(IdPrefix::Conversation),
        agent_id: agent_id.to_owned(),
        channel: Some(ConversationChannel {
            kind: "sms".to_owned(),
            provider: Some("twilio".to_owned()),
            id: Some("+15550100".to_owned()),
            metadata: None,
        }),
        context: serde_json::json!({"customer": "c-1", "tier": ["gold"]}),
        lifecycle: Lifecycle::Active,
        created_at: Timestamp::from_millis(millis),
        updated_at: Timestamp::from_millis(millis),
    }
}

fn new_event(kind: &str, n: u64) -> NewEvent {
    NewEvent { kind: kind.to_owned(), data: serde_json::json!({"n": n}) }
}

/// Creates `conversation` with an empty snapshot; the events as stored.
async fn create<S: ConversationStore + ?Sized>(
    store: &Arc<S>,
    conversation: &Conversation,
    events: &[NewEvent],
) -> Vec<RuntimeEvent> {
    let snapshot = Snapshot::empty(conversation);
    store
        .create_conversation(conversation, &snapshot, events)
        .await
        .unwrap()
        .expect("a conversation with a new id is stored")
}

fn committed(outcome: CommitOutcome) -> (Conversation, Vec<RuntimeEvent>) {
    match outcome {
        CommitOutcome::Committed { conversation, events } => (conversation, events),
        other => panic!("expected the commit to apply, got {other:?}"),
    }
}

fn offsets(events: &[RuntimeEvent]) -> Vec<u64> {
    events.iter().map(|event| event.offset).collect()
}

async fn all_events(store: &Arc<dyn ConversationStore>, id: &str) -> Vec<RuntimeEvent> {
    store.list_events(id, None, 10_000).await.unwrap()
}

fn ids(conversations: &[Conversation]) -> Vec<&str> {
    conversations.iter().map(|conversation| conversation.id.as_str()).collect()
}

async fn conversations_are_created_once_and_read_back(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    let events =
        create(&store, &conversation, &[new_event("user.message", 0), new_event("x", 1)]).await;
    assert_eq!(offsets(&events), [0, 1], "the first events get offsets from 0");
    for (event, kind) in events.iter().zip(["user.message", "x"]) {
        assert!(event.id.starts_with("evt_"), "events get event ids, not {}", event.id);
        assert_eq!(event.conversation_id, conversation.id);
        assert_eq!(event.kind, kind);
        assert_eq!(event.created_at, conversation.created_at, "first events carry createdAt");
    }
    assert_ne!(events[0].id, events[1].id);
    assert_eq!(events[1].data, serde_json::json!({"n": 1}));

    assert_eq!(
        store.get_conversation(&conversation.id).await.unwrap().as_ref(),
        Some(&conversation),
        "a stored conversation must read back field for field"
    );
    assert_eq!(
        store.get_snapshot(&conversation.id).await.unwrap(),
        Some(Snapshot::empty(&conversation))
    );
    assert_eq!(all_events(&store, &conversation.id).await, events, "events read back as returned");

    let mut bare = sample_conversation("agent-b", 2_000);
    bare.channel = None;
    bare.context = serde_json::Value::Null;
    assert!(create(&store, &bare, &[]).await.is_empty());
    assert_eq!(store.get_conversation(&bare.id).await.unwrap(), Some(bare));

    let mut again = sample_conversation("agent-z", 3_000);
    again.id = conversation.id.clone();
    let duplicate = store
        .create_conversation(&again, &Snapshot::empty(&again), &[new_event("late", 9)])
        .await
        .unwrap();
    assert_eq!(duplicate, None, "a taken id is refused");
    assert_eq!(
        store.get_conversation(&conversation.id).await.unwrap(),
        Some(conversation.clone()),
        "a refused create changes nothing"
    );
    assert_eq!(all_events(&store, &conversation.id).await, events, "nor adds events");

    assert_eq!(store.get_conversation("conv_missing").await.unwrap(), None);
    assert_eq!(store.get_snapshot("conv_missing").await.unwrap(), None);
    assert!(all_events(&store, "conv_missing").await.is_empty());
}

async fn conversation_pages_never_skip_or_repeat(store: Arc<dyn ConversationStore>) {
    // Ids of the caller's choosing, some made in the same millisecond: the list runs by
    // creation, then by id, whatever the ids say.
    let mut created = Vec::new();
    for (i, id) in [
        "conv_zulu",
        "conv_alpha",
        "conv_mike",
        "conv_bravo",
        "conv_yankee",
        "conv_echo",
        "conv_delta",
    ]
    .into_iter()
    .enumerate()
    {
        let conversation = Conversation {
            id: id.to_owned(),
            ..sample_conversation("agent-a", 1_000 + (i as i64 / 2))
        };
        create(&store, &conversation, &[]).await;
        created.push(conversation);
    }
    let mut newest_first = created.clone();
    newest_first.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let newest_first: Vec<String> = newest_first.into_iter().map(|c| c.id).collect();
    assert_eq!(newest_first[0], "conv_delta", "the last made comes first");
    let cursor_of = |id: &String| {
        created.iter().find(|c| &c.id == id).map(ConversationCursor::of).expect("a created id")
    };
    let query = |after: Option<&String>, before: Option<&String>, limit: u32| ConversationQuery {
        after: after.map(cursor_of),
        before: before.map(cursor_of),
        limit,
        ..ConversationQuery::default()
    };

    let everything = store.list_conversations(&query(None, None, 100)).await.unwrap();
    assert_eq!(ids(&everything), newest_first, "lists are newest first, by creation then id");
    let first_page = store.list_conversations(&query(None, None, 3)).await.unwrap();
    assert_eq!(ids(&first_page), newest_first[..3], "a limit keeps the newest");

    // Older and older pages, each starting after the last one seen.
    let mut walked = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = store.list_conversations(&query(cursor.as_ref(), None, 3)).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        cursor = page.last().map(|conversation| conversation.id.clone());
        walked.extend(page.into_iter().map(|conversation| conversation.id));
    }
    assert_eq!(walked, newest_first, "paging with `after` sees every conversation once");

    // Newer and newer pages from the oldest, each ending before the first one seen.
    let oldest = newest_first.last().unwrap().clone();
    let mut walked = vec![oldest.clone()];
    let mut cursor = Some(oldest);
    for _ in 0..10 {
        let page = store.list_conversations(&query(None, cursor.as_ref(), 3)).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        let page = ids(&page).into_iter().map(str::to_owned).collect::<Vec<_>>();
        let expected: Vec<String> =
            newest_first.iter().filter(|id| page.contains(id)).cloned().collect();
        assert_eq!(page, expected, "a page before a cursor is newest first too");
        cursor = page.first().cloned();
        walked.splice(0..0, page);
    }
    assert_eq!(walked, newest_first, "paging with `before` sees every conversation once");

    let nearest = store.list_conversations(&query(None, Some(&newest_first[5]), 2)).await.unwrap();
    assert_eq!(ids(&nearest), newest_first[3..5], "a page before a cursor is the nearest to it");
    let between = store
        .list_conversations(&query(Some(&newest_first[0]), Some(&newest_first[4]), 10))
        .await
        .unwrap();
    assert_eq!(ids(&between), newest_first[1..4], "both cursors bound the page");
    let past_end = store.list_conversations(&query(newest_first.last(), None, 10)).await.unwrap();
    assert!(past_end.is_empty(), "nothing is older than the oldest");
}

async fn conversations_filter_by_agent_and_update_time(store: Arc<dyn ConversationStore>) {
    let mut conversations = Vec::new();
    for i in 0..6 {
        let agent = if i % 2 == 0 { "agent-even" } else { "agent-odd" };
        let conversation = sample_conversation(agent, 1_000 + 100 * i);
        create(&store, &conversation, &[]).await;
        conversations.push(conversation);
    }
    // Made in order, a tenth of a second apart: newest first is the reverse.
    let sorted_ids = |pick: &dyn Fn(usize) -> bool| {
        (0..conversations.len())
            .rev()
            .filter(|&i| pick(i))
            .map(|i| conversations[i].id.clone())
            .collect::<Vec<String>>()
    };
    let list = |query: ConversationQuery| {
        let store = store.clone();
        async move {
            let page = store.list_conversations(&query).await.unwrap();
            ids(&page).into_iter().map(str::to_owned).collect::<Vec<_>>()
        }
    };

    let even = ConversationQuery {
        agent_id: Some("agent-even".to_owned()),
        limit: 100,
        ..ConversationQuery::default()
    };
    assert_eq!(list(even.clone()).await, sorted_ids(&|i| i % 2 == 0), "only the agent's");
    let even_ids = sorted_ids(&|i| i % 2 == 0);
    let first = conversations.iter().find(|c| c.id == even_ids[0]).expect("listed");
    let after_first =
        ConversationQuery { after: Some(ConversationCursor::of(first)), ..even.clone() };
    assert_eq!(list(after_first).await, even_ids[1..], "the agent filter holds across pages");
    let nobody = ConversationQuery { agent_id: Some("agent-none".to_owned()), ..even };
    assert!(list(nobody).await.is_empty());

    let updated = |after: Option<i64>, before: Option<i64>| ConversationQuery {
        updated_after: after.map(Timestamp::from_millis),
        updated_before: before.map(Timestamp::from_millis),
        limit: 100,
        ..ConversationQuery::default()
    };
    assert_eq!(
        list(updated(Some(1_200), None)).await,
        sorted_ids(&|i| i > 2),
        "updated_after is strictly after"
    );
    assert_eq!(
        list(updated(None, Some(1_200))).await,
        sorted_ids(&|i| i < 2),
        "updated_before is strictly before"
    );
    assert_eq!(list(updated(Some(1_000), Some(1_400))).await, sorted_ids(&|i| (1..4).contains(&i)));

    let commit = Commit::events(&conversations[0].id, vec![], Timestamp::from_millis(9_000));
    committed(store.commit(&commit).await.unwrap());
    assert_eq!(
        list(updated(Some(5_000), None)).await,
        [conversations[0].id.clone()],
        "a commit moves updatedAt, and the filters follow"
    );
}

async fn commits_append_gapless_and_move_the_conversation(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[new_event("created", 0)]).await;

    let at = Timestamp::from_millis(2_000);
    let commit = Commit::events(&conversation.id, vec![new_event("a", 1), new_event("b", 2)], at);
    let (after, events) = committed(store.commit(&commit).await.unwrap());
    assert_eq!(offsets(&events), [1, 2], "offsets go on from the last one");
    assert!(events.iter().all(|event| event.created_at == at && event.id.starts_with("evt_")));
    assert_eq!(events[1].kind, "b");
    assert_eq!(events[1].data, serde_json::json!({"n": 2}));
    let expected = Conversation { updated_at: at, ..conversation.clone() };
    assert_eq!(after, expected, "the commit returns the conversation as after");
    assert_eq!(store.get_conversation(&conversation.id).await.unwrap(), Some(expected));

    let empty = Commit::events(&conversation.id, vec![], Timestamp::from_millis(3_000));
    let (after, events) = committed(store.commit(&empty).await.unwrap());
    assert!(events.is_empty());
    assert_eq!(after.updated_at, Timestamp::from_millis(3_000), "even an empty commit touches");
    let more = Commit::events(&conversation.id, vec![new_event("c", 3)], at);
    let (_, events) = committed(store.commit(&more).await.unwrap());
    assert_eq!(offsets(&events), [3], "an empty commit leaves no gap");

    let log = all_events(&store, &conversation.id).await;
    assert_eq!(offsets(&log), [0, 1, 2, 3]);
    assert_eq!(log[3], events[0], "events read back as the commit returned them");
    let page = store.list_events(&conversation.id, Some(0), 2).await.unwrap();
    assert_eq!(offsets(&page), [1, 2], "after_offset is exclusive, limit holds");
    assert!(store.list_events(&conversation.id, Some(3), 10).await.unwrap().is_empty());
    let between = store.events_between(&conversation.id, 1, 3).await.unwrap();
    assert_eq!(between, log[1..3], "events_between is half-open");
    assert!(store.events_between(&conversation.id, 2, 2).await.unwrap().is_empty());
    assert_eq!(offsets(&store.events_between(&conversation.id, 2, 99).await.unwrap()), [2, 3]);

    let other = sample_conversation("agent-a", 1_500);
    let other_events = create(&store, &other, &[new_event("created", 0)]).await;
    assert_eq!(offsets(&other_events), [0], "each conversation has offsets of its own");
    assert_eq!(all_events(&store, &conversation.id).await.len(), 4);
}

async fn lifecycle_and_snapshot_follow_commits(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[]).await;

    let handoff = Commit {
        lifecycle: Some(Lifecycle::Handoff),
        ..Commit::events(&conversation.id, vec![], Timestamp::from_millis(2_000))
    };
    let (after, _) = committed(store.commit(&handoff).await.unwrap());
    assert_eq!(after.lifecycle, Lifecycle::Handoff);
    assert_eq!(
        store.get_conversation(&conversation.id).await.unwrap().unwrap().lifecycle,
        Lifecycle::Handoff
    );
    let snapshot = store.get_snapshot(&conversation.id).await.unwrap().unwrap();
    let expected = Snapshot {
        lifecycle: Lifecycle::Handoff,
        updated_at: Timestamp::from_millis(2_000),
        ..Snapshot::empty(&conversation)
    };
    assert_eq!(snapshot, expected, "the stored snapshot follows a lifecycle change");

    let journey = Snapshot {
        conversation_id: conversation.id.clone(),
        lifecycle: Lifecycle::Closed,
        active_journey_id: Some("journey-1".to_owned()),
        active_state_ids: vec!["greet".to_owned(), "ask".to_owned()],
        compaction_summary: Some(serde_json::json!({"summary": "asked for a refund"})),
        definition_hash: Some("abc123".to_owned()),
        journey_context: Some(serde_json::json!({"order": 42})),
        updated_at: Timestamp::from_millis(1),
    };
    let resume = Commit {
        lifecycle: Some(Lifecycle::Active),
        snapshot: Some(journey.clone()),
        ..Commit::events(&conversation.id, vec![], Timestamp::from_millis(3_000))
    };
    committed(store.commit(&resume).await.unwrap());
    let stored = store.get_snapshot(&conversation.id).await.unwrap().unwrap();
    let expected = Snapshot {
        lifecycle: Lifecycle::Active,
        updated_at: Timestamp::from_millis(3_000),
        ..journey.clone()
    };
    assert_eq!(stored, expected, "a new snapshot replaces the old, with the store's lifecycle");

    let snapshot_only = Commit {
        snapshot: Some(Snapshot { active_state_ids: vec!["done".to_owned()], ..journey.clone() }),
        ..Commit::events(&conversation.id, vec![], Timestamp::from_millis(4_000))
    };
    let (after, _) = committed(store.commit(&snapshot_only).await.unwrap());
    assert_eq!(after.lifecycle, Lifecycle::Active, "no lifecycle in the commit keeps it");
    let stored = store.get_snapshot(&conversation.id).await.unwrap().unwrap();
    assert_eq!(stored.lifecycle, Lifecycle::Active, "the snapshot takes the conversation's");
    assert_eq!(stored.updated_at, Timestamp::from_millis(4_000));
    assert_eq!(stored.active_state_ids, ["done"]);

    let events_only = Commit::events(&conversation.id, vec![], Timestamp::from_millis(5_000));
    committed(store.commit(&events_only).await.unwrap());
    assert_eq!(
        store.get_snapshot(&conversation.id).await.unwrap(),
        Some(stored),
        "a commit without snapshot or lifecycle leaves the snapshot alone"
    );
}

async fn prompts_open_and_close_with_commits(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[new_event("created", 0)]).await;
    let prompt = |id: &str, event_index: usize| NewPrompt {
        prompt_id: id.to_owned(),
        widget_kind: "choice".to_owned(),
        input: serde_json::json!({"options": ["yes", "no"], "id": id}),
        event_index,
    };
    let opening = Commit {
        open_prompts: vec![prompt("prm_second", 2), prompt("prm_first", 1)],
        ..Commit::events(
            &conversation.id,
            vec![new_event("agent.message", 1), new_event("prompt.opened", 2), new_event("p", 3)],
            Timestamp::from_millis(2_000),
        )
    };
    let (_, events) = committed(store.commit(&opening).await.unwrap());
    let open = store.open_prompts(&conversation.id).await.unwrap();
    assert_eq!(
        open.iter().map(|p| (p.prompt_id.as_str(), p.offset)).collect::<Vec<_>>(),
        [("prm_first", events[1].offset), ("prm_second", events[2].offset)],
        "open prompts are oldest first and keep the offset of the event that opened them"
    );
    assert_eq!(open[0].widget_kind, "choice");
    assert_eq!(open[0].input, serde_json::json!({"options": ["yes", "no"], "id": "prm_first"}));
    let record = store.get_prompt(&conversation.id, "prm_first").await.unwrap().unwrap();
    assert_eq!(record, PromptRecord { prompt: open[0].clone(), output: None });

    let answer = serde_json::json!({"choice": "yes"});
    let closing = Commit {
        close_prompts: vec![("prm_first".to_owned(), answer.clone())],
        ..Commit::events(
            &conversation.id,
            vec![new_event("prompt.answered", 4)],
            Timestamp::from_millis(3_000),
        )
    };
    committed(store.commit(&closing).await.unwrap());
    let still_open = store.open_prompts(&conversation.id).await.unwrap();
    assert_eq!(still_open, open[1..], "an answered prompt is no longer open");
    let record = store.get_prompt(&conversation.id, "prm_first").await.unwrap().unwrap();
    assert_eq!(record, PromptRecord { prompt: open[0].clone(), output: Some(answer) });
    assert_eq!(store.get_prompt(&conversation.id, "prm_missing").await.unwrap(), None);
    assert_eq!(store.get_prompt("conv_missing", "prm_first").await.unwrap(), None);

    let before = all_events(&store, &conversation.id).await;
    let out_of_range = Commit {
        open_prompts: vec![prompt("prm_broken", 1)],
        ..Commit::events(&conversation.id, vec![new_event("x", 5)], Timestamp::from_millis(4_000))
    };
    assert!(
        store.commit(&out_of_range).await.is_err(),
        "a prompt opened by an event the commit lacks is refused"
    );
    assert_eq!(all_events(&store, &conversation.id).await, before, "a refused commit adds nothing");
    assert_eq!(store.get_prompt(&conversation.id, "prm_broken").await.unwrap(), None);
    assert_eq!(
        store.get_conversation(&conversation.id).await.unwrap().unwrap().updated_at,
        Timestamp::from_millis(3_000)
    );
}

async fn idempotent_commits_apply_once(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[new_event("created", 0)]).await;
    let first = Commit {
        idempotency_key: Some("request-1".to_owned()),
        idempotency_fingerprint: Some("sha256:abc".to_owned()),
        ..Commit::events(
            &conversation.id,
            vec![new_event("a", 1), new_event("b", 2)],
            Timestamp::from_millis(2_000),
        )
    };
    committed(store.commit(&first).await.unwrap());
    let record = IdempotencyRecord {
        key: "request-1".to_owned(),
        conversation_id: conversation.id.clone(),
        first_offset: 1,
        end_offset: 3,
        created_at: Timestamp::from_millis(2_000),
        fingerprint: Some("sha256:abc".to_owned()),
    };
    assert_eq!(store.find_idempotency("request-1").await.unwrap(), Some(record.clone()));

    let retry = Commit {
        events: vec![new_event("c", 3)],
        at: Timestamp::from_millis(3_000),
        lifecycle: Some(Lifecycle::Closed),
        open_prompts: vec![NewPrompt {
            prompt_id: "prm_retry".to_owned(),
            widget_kind: "choice".to_owned(),
            input: serde_json::Value::Null,
            event_index: 0,
        }],
        ..first.clone()
    };
    assert_eq!(
        store.commit(&retry).await.unwrap(),
        CommitOutcome::Duplicate(record.clone()),
        "a used key returns its first record"
    );
    assert_eq!(all_events(&store, &conversation.id).await.len(), 3, "a duplicate adds nothing");
    let unchanged = Conversation { updated_at: Timestamp::from_millis(2_000), ..conversation };
    assert_eq!(store.get_conversation(&unchanged.id).await.unwrap().as_ref(), Some(&unchanged));
    assert!(store.open_prompts(&unchanged.id).await.unwrap().is_empty());
    assert_eq!(store.find_idempotency("request-1").await.unwrap(), Some(record.clone()));

    let other = sample_conversation("agent-b", 1_000);
    create(&store, &other, &[]).await;
    let elsewhere = Commit { conversation_id: other.id.clone(), ..first.clone() };
    assert_eq!(
        store.commit(&elsewhere).await.unwrap(),
        CommitOutcome::Duplicate(record),
        "keys are shared by all conversations"
    );
    assert!(all_events(&store, &other.id).await.is_empty());

    let empty = Commit {
        idempotency_key: Some("request-2".to_owned()),
        ..Commit::events(&unchanged.id, vec![], Timestamp::from_millis(4_000))
    };
    committed(store.commit(&empty).await.unwrap());
    let empty_record = store.find_idempotency("request-2").await.unwrap().unwrap();
    assert_eq!(
        (empty_record.first_offset, empty_record.end_offset),
        (3, 3),
        "a commit without events records an empty range at the next offset"
    );
    assert_eq!(store.find_idempotency("request-missing").await.unwrap(), None);
}

async fn commits_to_unknown_conversations_change_nothing(store: Arc<dyn ConversationStore>) {
    let commit = Commit {
        idempotency_key: Some("request-lost".to_owned()),
        lifecycle: Some(Lifecycle::Closed),
        ..Commit::events("conv_missing", vec![new_event("a", 1)], Timestamp::from_millis(1))
    };
    assert_eq!(store.commit(&commit).await.unwrap(), CommitOutcome::NotFound);
    assert_eq!(store.find_idempotency("request-lost").await.unwrap(), None, "no key is kept");
    assert!(all_events(&store, "conv_missing").await.is_empty());
    assert_eq!(store.get_conversation("conv_missing").await.unwrap(), None);
}

async fn concurrent_committers_get_gapless_offsets(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[]).await;
    let mut tasks = Vec::new();
    for writer in 0..8u64 {
        let (store, id) = (store.clone(), conversation.id.clone());
        tasks.push(tokio::spawn(async move {
            let mut appended = Vec::new();
            for i in 0..25u64 {
                // One or two events a commit, so a commit's events must stay together.
                let events = (0..1 + i % 2)
                    .map(|part| NewEvent {
                        kind: "load".to_owned(),
                        data: serde_json::json!({"writer": writer, "i": i, "part": part}),
                    })
                    .collect();
                let commit = Commit::events(&id, events, Timestamp::from_millis(2_000));
                let (_, events) = committed(store.commit(&commit).await.unwrap());
                let first = events[0].offset;
                assert_eq!(
                    offsets(&events),
                    (first..first + events.len() as u64).collect::<Vec<_>>(),
                    "a commit's events are consecutive"
                );
                appended.extend(events);
            }
            appended
        }));
    }
    let mut appended = Vec::new();
    for task in tasks {
        appended.extend(task.await.unwrap());
    }
    appended.sort_by_key(|event| event.offset);
    let total = appended.len() as u64;
    assert_eq!(total, 8 * (13 + 2 * 12), "every acknowledged event is kept");
    assert_eq!(offsets(&appended), (0..total).collect::<Vec<_>>(), "offsets have no gaps");
    let log = all_events(&store, &conversation.id).await;
    assert_eq!(log, appended, "the log holds what each committer was told, at its offsets");
    let mut event_ids: Vec<&str> = log.iter().map(|event| event.id.as_str()).collect();
    event_ids.sort_unstable();
    event_ids.dedup();
    assert_eq!(event_ids.len() as u64, total, "event ids are unique");
}
