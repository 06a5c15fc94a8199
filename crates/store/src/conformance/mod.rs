//! The conformance suite: behaviour every [`MemoryStore`] backend must show.
//!
//! A backend's tests call [`run`] (and [`run_conversations`] for a [`ConversationStore`]) with
//! a function that opens a fresh, empty store; each check gets its own store and panics with
//! a message naming what broke.

use std::future::Future;
use std::sync::Arc;

use cairn_types::{
    ApiKey, ConflictSide, ConflictStatus, Connector, ConnectorKind, IdPrefix, JsonObject, Memory,
    Outcome, PatchEvidence, Role, Scope, Status, SyncReport, SyncStatus, Timestamp, new_id,
};

use crate::{
    Audit, AuditFilter, ConflictRecord, ConnectorItem, GuardedChange, ItemUpdate, MemoryChange,
    MemoryFilter, NewEvent, PendingEmbedding, Recall, Settlement, Store, SyncBatch, Version,
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
    idempotency_keys_run_once_and_answer_again(open_store().await).await;
}

/// An idempotency key is claimed once; its answer is given again for a day; another request
/// under it is refused; a claim whose answer never came lapses after its lease.
async fn idempotency_keys_run_once_and_answer_again(store: Arc<dyn Store>) {
    use crate::{Claim, IDEMPOTENCY_LEASE_MILLIS, IDEMPOTENCY_TTL_MILLIS, StoredAnswer};
    let at = Timestamp::from_millis;
    let t0 = 1_000_000_000_000;
    let claim = |key: &'static str, fingerprint: &'static str, now: i64| {
        let store = store.clone();
        async move { store.claim_idempotency("scope-a", key, fingerprint, at(now)).await.unwrap() }
    };
    assert_eq!(claim("k1", "post /a body1", t0).await, Claim::Claimed);
    assert_eq!(claim("k1", "post /a body1", t0 + 1).await, Claim::Running);
    assert_eq!(claim("k1", "post /a body2", t0 + 1).await, Claim::Reused);
    // Keys are per scope.
    let other = store.claim_idempotency("scope-b", "k1", "x", at(t0)).await.unwrap();
    assert_eq!(other, Claim::Claimed);

    let answer = StoredAnswer {
        status: 201,
        content_type: Some("application/json".to_owned()),
        body: b"{\"id\":\"mem_1\"}".to_vec(),
    };
    store.complete_idempotency("scope-a", "k1", &answer).await.unwrap();
    // A release after the answer changes nothing.
    store.release_idempotency("scope-a", "k1").await.unwrap();
    assert_eq!(claim("k1", "post /a body1", t0 + 5).await, Claim::Replay(answer.clone()));
    assert_eq!(claim("k1", "post /a body2", t0 + 5).await, Claim::Reused);
    let day_later = t0 + IDEMPOTENCY_TTL_MILLIS;
    assert_eq!(claim("k1", "post /a body2", day_later).await, Claim::Claimed, "a day later");

    assert_eq!(claim("k2", "f", t0).await, Claim::Claimed);
    store.release_idempotency("scope-a", "k2").await.unwrap();
    assert_eq!(claim("k2", "f", t0 + 1).await, Claim::Claimed, "released: runs again");
    assert_eq!(claim("k2", "f", t0 + IDEMPOTENCY_LEASE_MILLIS - 1).await, Claim::Running);
    assert_eq!(claim("k2", "f", t0 + IDEMPOTENCY_LEASE_MILLIS + 1).await, Claim::Claimed);

    // What lapsed is purged: `scope-b`'s claim (never answered) and nothing else yet.
    let purged = store.purge_idempotency(at(t0 + IDEMPOTENCY_LEASE_MILLIS)).await.unwrap();
    assert_eq!(purged, 1);
    assert_eq!(store.purge_idempotency(at(day_later + IDEMPOTENCY_TTL_MILLIS)).await.unwrap(), 2);
}

/// `adjacent_memories`: the live memories stored just before and after each asked one, in
/// the order of storing (not of `createdAt`: one batch shares its time), archived ones
/// stepped over; none past either end; an unknown id has none.
async fn neighbours_are_the_live_memories_stored_next_to_each(store: Arc<dyn Store>) {
    let turns: Vec<Memory> = ["first", "second", "third", "fourth"]
        .map(|text| sample_memory(text, Scope::User, 7))
        .into();
    store.insert_memories(&turns[..3], "tester").await.unwrap();
    store.insert_memories(&turns[3..], "tester").await.unwrap();
    let contents = |pairs: Vec<(String, Memory)>| -> Vec<(String, String)> {
        let name = |id: &str| turns.iter().find(|turn| turn.id == id).unwrap().content.clone();
        pairs.into_iter().map(|(asked, memory)| (name(&asked), memory.content)).collect()
    };
    let pair = |asked: &str, near: &str| (asked.to_owned(), near.to_owned());
    let ids = |indices: &[usize]| -> Vec<String> {
        indices.iter().map(|&index| turns[index].id.clone()).collect()
    };

    let adjacent = store.adjacent_memories(&ids(&[1, 0, 3])).await.unwrap();
    assert_eq!(adjacent[0].1, turns[0], "neighbours are whole memories");
    assert_eq!(
        contents(adjacent),
        [
            pair("second", "first"),
            pair("second", "third"),
            pair("first", "second"),
            pair("fourth", "third"),
        ]
    );

    let archive =
        MemoryChange { archived_at: Some(Some(Timestamp::from_millis(8))), ..Default::default() };
    store
        .update_memory(&turns[2].id, &archive, Timestamp::from_millis(8), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(
        contents(store.adjacent_memories(&ids(&[1, 3])).await.unwrap()),
        [pair("second", "first"), pair("second", "fourth"), pair("fourth", "second")],
        "an archived memory is stepped over"
    );
    let unknown = store.adjacent_memories(&["mem_unknown".to_owned()]).await.unwrap();
    assert!(unknown.is_empty());
    assert!(store.adjacent_memories(&[]).await.unwrap().is_empty());
}

/// Text holding U+0000 (SQLite keeps it; PostgreSQL's `text` cannot) is either stored and read
/// back unchanged or refused with an error that changes nothing: never cut short.
async fn text_with_nul_is_kept_or_refused(store: Arc<dyn Store>) {
    let plain = sample_memory("plain text", Scope::User, 1);
    let with_nul = sample_memory("before\0after", Scope::User, 2);
    match store.insert_memories(&[plain.clone(), with_nul.clone()], "tester").await {
        Ok(()) => {
            assert_eq!(store.get_memory(&with_nul.id).await.unwrap(), Some(with_nul.clone()));
            assert_eq!(store.count_memories().await.unwrap(), 2);
        }
        Err(_) => {
            assert_eq!(store.get_memory(&plain.id).await.unwrap(), None, "all or nothing");
            assert_eq!(store.count_memories().await.unwrap(), 0);
        }
    }

    let base = sample_memory("base text", Scope::User, 3);
    store.insert_memories(std::slice::from_ref(&base), "tester").await.unwrap();
    let change = MemoryChange {
        content: Some("x\0y".to_owned()),
        tags: Some(vec!["t\0g".to_owned()]),
        ..Default::default()
    };
    match store.update_memory(&base.id, &change, Timestamp::from_millis(10), &TEST_AUDIT).await {
        Ok(after) => {
            let after = after.unwrap();
            assert_eq!(after.content, "x\0y");
            assert_eq!(store.get_memory(&base.id).await.unwrap(), Some(after));
        }
        Err(_) => {
            assert_eq!(store.get_memory(&base.id).await.unwrap(), Some(base.clone()), "unchanged");
        }
    }
    let hits =
        store.search_memories(&["base".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert!(hits.len() <= 1);
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
    let unicode = sample_memory("Call JÖRG SCHMIDT about the invoice", Scope::Task, 3);
    store.insert_memories(std::slice::from_ref(&unicode), "key:alice").await.unwrap();
    let containing = store.memory_ids_containing(&"Jörg Schmidt".to_lowercase()).await.unwrap();
    assert_eq!(containing, std::slice::from_ref(&unicode.id), "Unicode case folded");

    let audit = Audit { actor: "key:admin", action: "erase" };
    let ids = [memory.id.clone(), "mem_nope".to_owned()];
    let erased = store.erase_memories(&ids, Timestamp::from_millis(4), &audit).await.unwrap();
    assert_eq!(erased, std::slice::from_ref(&memory.id), "only what existed");
    assert!(store.get_memories(std::slice::from_ref(&memory.id)).await.unwrap().is_empty());
    let found =
        store.search_memories(&["number".to_owned()], &MemoryFilter::default(), 10).await.unwrap();
    assert!(found.is_empty(), "no full-text entry is left");
    assert_eq!(store.count_memories().await.unwrap(), 2, "the neighbour and Jörg's stay");
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
    assert!(
        !store.insert_conversation_token(&token).await.unwrap(),
        "no token for a conversation that does not exist"
    );
    assert_eq!(
        store.find_conversation_token(&token.hash, Timestamp::from_millis(1_500)).await.unwrap(),
        None
    );
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[]).await;
    let token = cairn_types::ConversationTokenRecord { conversation_id: conversation.id, ..token };
    assert!(store.insert_conversation_token(&token).await.unwrap());
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
    // Beyond ASCII too: an erasure by "Özlem Ünal" finds "ÖZLEM ÜNAL".
    let third = sample_conversation("agent-a", 1_002);
    create(&store, &third, &[said("Please call ÖZLEM ÜNAL back")]).await;
    let mentioning = store.conversations_mentioning(&"Özlem Ünal".to_lowercase()).await.unwrap();
    assert_eq!(mentioning, std::slice::from_ref(&third.id), "Unicode case folded");
    let deleted = store
        .delete_conversations(&[conversation.id.clone(), "conv_nope".to_owned()])
        .await
        .unwrap();
    assert_eq!(deleted, std::slice::from_ref(&conversation.id));
    assert!(store.get_conversation(&conversation.id).await.unwrap().is_none());
    assert!(store.list_events(&conversation.id, None, 10).await.unwrap().is_empty());
    assert!(store.get_conversation(&other.id).await.unwrap().is_some(), "the other stays");
}

/// After a migration from the schema before `memory_recalls`, of a database holding
/// `mem_recalled` (recalled 7 times, last at 5 s) and `mem_never` (never recalled): reads find
/// their recall bookkeeping, and a recall at 6 s counts on from it.
pub async fn migrated_recalls_count_on(store: &dyn Store) {
    let recalled = store.get_memory("mem_recalled").await.unwrap().unwrap();
    assert_eq!(
        (recalled.recall_count, recalled.last_recalled_at),
        (7, Some(Timestamp::from_millis(5_000)))
    );
    let never = store.get_memory("mem_never").await.unwrap().unwrap();
    assert_eq!((never.recall_count, never.last_recalled_at), (0, None));
    let ids = ["mem_recalled".to_owned(), "mem_never".to_owned()];
    store.record_recall(&ids, "ship it", Timestamp::from_millis(6_000)).await.unwrap();
    let page = store.list_memories(&Default::default(), 10, 0).await.unwrap();
    let counts: Vec<_> = page
        .memories
        .iter()
        .map(|memory| (memory.id.as_str(), memory.recall_count, memory.last_recalled_at))
        .collect();
    let at = Some(Timestamp::from_millis(6_000));
    assert_eq!(counts, [("mem_never", 1, at), ("mem_recalled", 8, at)]);
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
            memory.repo = Some("Other".to_owned());
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
    // Repository names compare without case, and keep the case they were stored with.
    let other_repo = MemoryFilter { repo: Some("other".to_owned()), ..Default::default() };
    let others = store.list_memories(&other_repo, 10, 0).await.unwrap().memories;
    assert_eq!(others.len(), 1);
    assert_eq!(
        (others[0].id.as_str(), others[0].repo.as_deref()),
        (memories[2].id.as_str(), Some("Other"))
    );
    let search = store.search_memories(&["memory".to_owned()], &other_repo, 10).await.unwrap();
    assert_eq!(search.iter().map(|hit| &hit.memory.id).collect::<Vec<_>>(), [&memories[2].id]);
    let rules = store.newest_repo_memories("CAIRN", 10).await.unwrap();
    assert_eq!(
        rules.iter().map(|memory| &memory.id).collect::<Vec<_>>(),
        [&memories[4].id, &memories[0].id],
        "the standing rules of `cairn`, asked as `CAIRN`"
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

/// `record_recalls`: many packs' recalls in one call count as each would alone; the latest
/// time wins whatever the order; a memory erased before its recall landed is passed over;
/// counts survive archiving and reading in every way (get, list, search, guarded versions),
/// and an erased memory's recalls go with it.
async fn recalls_recorded_together_count_each_and_keep_the_latest(store: Arc<dyn Store>) {
    let a = sample_memory("alpha deploy notes", Scope::Repo, 1);
    let b = sample_memory("beta deploy notes", Scope::Repo, 2);
    let mut imported = sample_memory("gamma deploy notes", Scope::Repo, 3);
    imported.recall_count = 41;
    imported.last_recalled_at = Some(Timestamp::from_millis(9_000));
    store.insert_memories(&[a.clone(), b.clone(), imported.clone()], "tester").await.unwrap();
    let recall = |ids: &[&Memory], task: &str, millis: i64| Recall {
        memory_ids: ids.iter().map(|memory| memory.id.clone()).collect(),
        task_key: task.to_owned(),
        at: Timestamp::from_millis(millis),
    };
    let gone = Recall {
        memory_ids: vec!["mem_never_stored".to_owned(), a.id.clone()],
        task_key: "deploy".to_owned(),
        at: Timestamp::from_millis(7_500),
    };
    let recalls = [
        recall(&[&a, &b], "deploy", 7_000),
        recall(&[&b, &imported], "rollback", 8_000),
        // Landed out of order: an earlier time never moves `lastRecalledAt` back.
        recall(&[&b], "deploy", 6_000),
        gone,
    ];
    store.record_recalls(&recalls).await.unwrap();
    let read = |memory: &Memory| {
        let (store, id) = (store.clone(), memory.id.clone());
        async move {
            let memory = store.get_memory(&id).await.unwrap().unwrap();
            (memory.recall_count, memory.last_recalled_at.map(Timestamp::as_millis))
        }
    };
    assert_eq!(read(&a).await, (2, Some(7_500)));
    assert_eq!(read(&b).await, (3, Some(8_000)));
    assert_eq!(read(&imported).await, (42, Some(9_000)), "an imported count goes on");
    assert_eq!(store.recalled_for_task("deploy").await.unwrap(), [a.id.clone(), b.id.clone()]);
    assert_eq!(
        store.recalled_for_task("rollback").await.unwrap(),
        [b.id.clone(), imported.id.clone()]
    );
    store.record_recalls(&[]).await.unwrap();

    let archive = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(9_500))),
        ..Default::default()
    };
    store.update_memory(&b.id, &archive, Timestamp::from_millis(9_500), &TEST_AUDIT).await.unwrap();
    assert_eq!(read(&b).await, (3, Some(8_000)), "archiving keeps the count");
    let filter = MemoryFilter { include_archived: true, ..Default::default() };
    let page = store.list_memories(&filter, 10, 0).await.unwrap();
    let counts: Vec<u64> = page.memories.iter().map(|memory| memory.recall_count).collect();
    assert_eq!(counts, [42, 3, 2], "newest first");
    let hits = store.search_memories(&["alpha".to_owned()], &filter, 10).await.unwrap();
    assert_eq!(hits[0].memory.recall_count, 2);

    let erase = Audit { actor: "tester", action: "erase" };
    store
        .erase_memories(std::slice::from_ref(&a.id), Timestamp::from_millis(10_000), &erase)
        .await
        .unwrap();
    assert_eq!(
        store.recalled_for_task("deploy").await.unwrap(),
        [b.id.as_str()],
        "an erased memory left the per-task recall log"
    );
    store.insert_memories(std::slice::from_ref(&a), "tester").await.unwrap();
    assert_eq!(read(&a).await, (0, None), "an erased memory's recalls went with it");
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
    assert_eq!(rows(&store).await, 200, "every acknowledged write is kept");
    assert_eq!(store.count_memories().await.unwrap(), 200, "the live count follows the rows");
}

/// The memories stored, counted row by row (not by the backend's running count).
async fn rows(store: &Arc<dyn Store>) -> u64 {
    let mut ids = std::collections::HashSet::new();
    let mut offset = 0;
    loop {
        let page = store.list_memories(&MemoryFilter::default(), 100, offset).await.unwrap();
        if page.memories.is_empty() {
            return ids.len() as u64;
        }
        offset += page.memories.len() as u64;
        ids.extend(page.memories.into_iter().map(|memory| memory.id));
    }
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
        expires_at: Some(Timestamp::from_millis(86_400_000)),
        last_used_at: None,
    };
    store.insert_key(&key).await.unwrap();
    assert_eq!(store.find_active_key(&key.hash).await.unwrap(), Some(key.clone()));
    store.mark_key_used(&key.id, Timestamp::from_millis(5)).await.unwrap();
    let used = store.find_active_key(&key.hash).await.unwrap().unwrap();
    assert_eq!(used.last_used_at, Some(Timestamp::from_millis(5)), "its last use is noted");
    let key = used;
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
            memory_id: Some(first.id.clone()),
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
        status: SyncStatus::Ok,
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
    let memories: Vec<Memory> =
        (0..5).map(|i| sample_memory(&format!("memory {i}"), Scope::Repo, i)).collect();
    store.insert_memories(&memories, "tester").await.unwrap();
    let id = |i: usize| memories[i].id.clone();
    // A side's memories are in id order.
    let side = |label: &str, ids: &[usize]| {
        let mut memory_ids: Vec<String> = ids.iter().map(|&i| id(i)).collect();
        memory_ids.sort();
        ConflictSide { label: label.to_owned(), memory_ids }
    };
    let record = |conflict: &str, subject: &str, sides: Vec<ConflictSide>| ConflictRecord {
        id: conflict.to_owned(),
        subject: subject.to_owned(),
        repo: Some("shop".to_owned()),
        sides,
        reason: format!("{subject} in `shop`"),
        status: ConflictStatus::Open,
        detected_at: Timestamp::from_millis(10),
        resolution: None,
        resolved_at: None,
    };
    let found = [
        record("cfl_1", "package manager", vec![side("pnpm", &[0]), side("npm", &[1])]),
        record("cfl_2", "yarn", vec![side("yarn", &[2]), side("not yarn", &[3])]),
    ];
    let dry = store.record_conflicts(&found, "tester", true).await.unwrap();
    assert_eq!(dry.len(), 2, "a dry run reports what would be recorded");
    assert!(store.list_conflicts(None).await.unwrap().is_empty(), "a dry run records nothing");
    assert_eq!(store.get_memory(&id(0)).await.unwrap().unwrap().status, Status::Active);

    let stored = store.record_conflicts(&found, "tester", false).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].sides, found[0].sides);
    for i in 0..4 {
        let memory = store.get_memory(&id(i)).await.unwrap().unwrap();
        assert_eq!(memory.status, Status::Review, "the memories of a conflict await review");
    }
    let again = store.record_conflicts(&found[..1], "tester", false).await.unwrap();
    assert!(again.is_empty(), "memories already in a conflict of the subject are not again");

    // A new memory on a side joins the open conflict of its subject and repository.
    let grown = record("cfl_3", "package manager", vec![side("pnpm", &[0]), side("npm", &[1, 4])]);
    let grown = store.record_conflicts(&[grown], "tester", false).await.unwrap();
    assert_eq!(grown.len(), 1);
    assert_eq!(grown[0].id, "cfl_1");
    assert_eq!(grown[0].sides, [side("pnpm", &[0]), side("npm", &[1, 4])]);
    let listed = store.list_conflicts(Some(ConflictStatus::Open)).await.unwrap();
    assert_eq!(listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["cfl_2", "cfl_1"]);

    // Settling: the memories change and the conflict closes, together, once.
    let merged = sample_memory("use pnpm", Scope::Repo, 20);
    let archive =
        MemoryChange { archived_at: Some(Some(Timestamp::from_millis(20))), ..Default::default() };
    let settlement = Settlement {
        resolution: format!("merge {}", merged.id),
        insert: Some(merged.clone()),
        changes: [0, 1, 4].iter().map(|&i| (id(i), archive.clone())).collect(),
        at: Timestamp::from_millis(20),
    };
    let audit = Audit { actor: "tester", action: "resolve" };
    // A settlement that fails part way (its new memory's id is taken) changes nothing.
    let failing = Settlement { insert: Some(memories[3].clone()), ..settlement.clone() };
    assert!(store.settle_conflict("cfl_1", &failing, &audit).await.is_err());
    assert_eq!(store.get_conflict("cfl_1").await.unwrap().unwrap().status, ConflictStatus::Open);
    assert_eq!(store.count_memories().await.unwrap(), 5, "no memory was archived");
    assert!(store.settle_conflict("cfl_1", &settlement, &audit).await.unwrap());
    assert_eq!(store.count_memories().await.unwrap(), 3, "three archived, one created");
    assert!(store.get_memory(&merged.id).await.unwrap().is_some());
    let other = Settlement { insert: Some(sample_memory("again", Scope::Repo, 21)), ..settlement };
    assert!(!store.settle_conflict("cfl_1", &other, &audit).await.unwrap());
    assert_eq!(store.count_memories().await.unwrap(), 3, "a settled conflict changes nothing");
    let resolved = store.get_conflict("cfl_1").await.unwrap().unwrap();
    assert_eq!(resolved.status, ConflictStatus::Resolved);
    assert_eq!(resolved.resolution, Some(format!("merge {}", merged.id)));
    assert_eq!(resolved.resolved_at, Some(Timestamp::from_millis(20)));
    assert_eq!(store.list_conflicts(Some(ConflictStatus::Open)).await.unwrap().len(), 1);
    assert_eq!(store.list_conflicts(None).await.unwrap().len(), 2);
    assert_eq!(store.get_conflict("cfl_nope").await.unwrap(), None);

    // A conflict quotes its memories: erasing one of them erases it.
    let erasure = Audit { actor: "tester", action: "erase" };
    store.erase_memories(&[id(2)], Timestamp::from_millis(30), &erasure).await.unwrap();
    assert_eq!(store.get_conflict("cfl_2").await.unwrap(), None);
    assert_eq!(store.list_conflicts(None).await.unwrap().len(), 1);
}

async fn guarded_changes_apply_whole_or_not_at_all(store: Arc<dyn Store>) {
    let memories: Vec<Memory> =
        (0..3).map(|i| sample_memory(&format!("memory {i}"), Scope::User, i)).collect();
    store.insert_memories(&memories, "tester").await.unwrap();
    // Someone edits memory 1 after the reader saw it.
    let edit = MemoryChange { tags: Some(vec!["edited".to_owned()]), ..Default::default() };
    store.update_memory(&memories[1].id, &edit, memories[1].updated_at, &TEST_AUDIT).await.unwrap();
    let tag = |i: usize| GuardedChange {
        id: memories[i].id.clone(),
        change: MemoryChange { tags: Some(vec!["merged".to_owned()]), ..Default::default() },
        expected: Version::of(&memories[i]),
    };
    let stale = |i: usize| GuardedChange {
        id: memories[i].id.clone(),
        change: MemoryChange { status: Some(Status::Stale), ..Default::default() },
        expected: Version::of(&memories[i]),
    };
    let applied = store
        .apply_guarded(
            &[vec![tag(0), tag(1)], vec![tag(2)], vec![stale(0)], vec![stale(2)]],
            Timestamp::from_millis(50),
            &TEST_AUDIT,
        )
        .await
        .unwrap();
    assert_eq!(applied, [false, true, true, false]);
    let read = |i: usize| {
        let store = store.clone();
        let id = memories[i].id.clone();
        async move { store.get_memory(&id).await.unwrap().unwrap() }
    };
    assert_eq!(
        read(0).await.tags,
        memories[0].tags,
        "a group with a changed memory changes nothing"
    );
    assert_eq!(read(1).await.tags, ["edited"], "the edit is kept");
    assert_eq!(read(2).await.tags, ["merged"]);
    assert_eq!(read(0).await.status, Status::Stale, "an untouched active memory goes stale");
    assert_eq!(read(2).await.status, Status::Active, "a memory changed since is not stale");
    let seen = read(2).await;
    store
        .record_recall(&[memories[2].id.clone()], "task", Timestamp::from_millis(150))
        .await
        .unwrap();
    let stale_as_seen = GuardedChange { expected: Version::of(&seen), ..stale(2) };
    let recalled = store
        .apply_guarded(&[vec![stale_as_seen]], Timestamp::from_millis(160), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(recalled, [false], "a memory recalled since it was read is left alone");
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
    store.store_embeddings("m1", &[(pending[1].clone(), vec![0.5, 0.5])]).await.unwrap();
    let page = store.embeddings_page("m1", 0, 1).await.unwrap();
    assert_eq!(page.len(), 1, "a page holds at most its limit");
    assert_eq!((page[0].1.as_str(), page[0].2.as_slice()), (first.id.as_str(), &[1.0, 0.0][..]));
    let next = store.embeddings_page("m1", page[0].0, 10).await.unwrap();
    assert_eq!(
        next.iter().map(|(_, id, vector)| (id.as_str(), vector.clone())).collect::<Vec<_>>(),
        [(second.id.as_str(), vec![0.5, 0.5])],
        "the next page starts after the last position"
    );
    assert!(store.embeddings_page("m1", next[0].0, 10).await.unwrap().is_empty());
    assert!(store.embeddings_page("m2", 0, 10).await.unwrap().is_empty(), "models are apart");
    let wanted = [second.id.clone(), "no-such-memory".to_owned()];
    assert_eq!(
        store.load_embeddings_of("m1", &wanted).await.unwrap(),
        vec![(second.id.clone(), vec![0.5, 0.5])],
        "only the vectors asked for"
    );

    let change = MemoryChange { content: Some("first, changed".to_owned()), ..Default::default() };
    store.update_memory(&first.id, &change, Timestamp::from_millis(9), &TEST_AUDIT).await.unwrap();
    assert_eq!(
        store.load_embeddings("m1").await.unwrap(),
        vec![(second.id.clone(), vec![0.5, 0.5])],
        "a changed memory's vector is stale"
    );
    let stale = PendingEmbedding {
        position: pending[0].position,
        memory_id: first.id.clone(),
        content: "first".to_owned(),
        version: first.updated_at,
    };
    store.store_embeddings("m1", &[(stale, vec![0.0, 1.0])]).await.unwrap();
    assert_eq!(
        store.load_embeddings("m1").await.unwrap().len(),
        1,
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

mod connectors;
mod conversations;
mod shared;
mod voice;
mod watched;

pub use connectors::run_connectors;
use conversations::create;
pub use conversations::{run_conversations, sample_conversation};
pub use shared::{run_shared, run_shared_conversations};
pub use watched::{FailingSync, FailingSyncStore, Hooks, InjectedFailure, Watched};
