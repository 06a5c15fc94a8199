//! Checks of governance: the audit trail, erasure of memories and conversations, conflicts.

use std::sync::Arc;

use cairn_types::{ConflictSide, ConflictStatus, Memory, Scope, Status, Timestamp};

use super::conversations::{create, sample_conversation};
use super::sample_memory;
use crate::{
    Audit, AuditFilter, ConflictRecord, MemoryChange, MemoryFilter, NewEvent, Settlement, Store,
};

pub(super) async fn erased_memories_leave_no_content_behind(store: Arc<dyn Store>) {
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

pub(super) async fn deleted_conversations_leave_nothing(store: Arc<dyn Store>) {
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

pub(super) async fn every_change_is_audited(store: Arc<dyn Store>) {
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

pub(super) async fn conflicts_are_recorded_once_and_resolved_once(store: Arc<dyn Store>) {
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
