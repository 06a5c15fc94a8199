//! Checks of memories: storing, listing, updating, searching, recalls, guarded changes and vectors.

use std::sync::Arc;

use cairn_types::{Memory, Scope, Status, Timestamp};

use super::sample_memory;
use crate::{
    Adjacent, Audit, GuardedChange, MemoryChange, MemoryFilter, PendingEmbedding, Recall, Store,
    Version,
};

const TEST_AUDIT: Audit<'static> = Audit { actor: "tester", action: "update" };

/// `adjacent_memories`: the live memories stored just before and after each asked one, in
/// the order of storing (not of `createdAt`: one batch shares its time), archived ones
/// stepped over; none past either end; an unknown id has none.
pub(super) async fn neighbours_are_the_live_memories_stored_next_to_each(store: Arc<dyn Store>) {
    let turns: Vec<Memory> = ["first", "second", "third", "fourth"]
        .map(|text| sample_memory(text, Scope::User, 7))
        .into();
    store.insert_memories(&turns[..3], "tester").await.unwrap();
    store.insert_memories(&turns[3..], "tester").await.unwrap();
    let contents = |found: Vec<Adjacent>| -> Vec<(String, &'static str, String)> {
        let name = |id: &str| turns.iter().find(|turn| turn.id == id).unwrap().content.clone();
        let side = |after: bool| if after { "after" } else { "before" };
        found
            .into_iter()
            .map(|near| (name(&near.of), side(near.after), near.memory.content))
            .collect()
    };
    let pair =
        |asked: &str, side: &'static str, near: &str| (asked.to_owned(), side, near.to_owned());
    let ids = |indices: &[usize]| -> Vec<String> {
        indices.iter().map(|&index| turns[index].id.clone()).collect()
    };

    let adjacent = store.adjacent_memories(&ids(&[1, 0, 3])).await.unwrap();
    assert_eq!(adjacent[0].memory, turns[0], "neighbours are whole memories");
    assert_eq!(
        contents(adjacent),
        [
            pair("second", "before", "first"),
            pair("second", "after", "third"),
            pair("first", "after", "second"),
            pair("fourth", "before", "third"),
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
        [
            pair("second", "before", "first"),
            pair("second", "after", "fourth"),
            pair("fourth", "before", "second")
        ],
        "an archived memory is stepped over"
    );
    let unknown = store.adjacent_memories(&["mem_unknown".to_owned()]).await.unwrap();
    assert!(unknown.is_empty());
    assert!(store.adjacent_memories(&[]).await.unwrap().is_empty());
}

/// `live_memories_after`: pages of the live memories in the order of storing, each once,
/// archived ones left out, a memory stored during the walk met at its end.
pub(super) async fn live_memories_are_walked_in_storing_order(store: Arc<dyn Store>) {
    let stored: Vec<Memory> =
        (0..5).map(|n| sample_memory(&format!("memory {n}"), Scope::User, 7)).collect();
    store.insert_memories(&stored, "tester").await.unwrap();
    let archive =
        MemoryChange { archived_at: Some(Some(Timestamp::from_millis(8))), ..Default::default() };
    store
        .update_memory(&stored[1].id, &archive, Timestamp::from_millis(8), &TEST_AUDIT)
        .await
        .unwrap();
    let (mut walked, mut after, mut pages) = (Vec::new(), 0, 0);
    loop {
        let page = store.live_memories_after(after, 2).await.unwrap();
        pages += 1;
        if pages == 2 {
            let late = sample_memory("stored during the walk", Scope::User, 9);
            store.insert_memories(&[late], "tester").await.unwrap();
        }
        assert!(page.windows(2).all(|pair| pair[0].0 < pair[1].0), "positions ascend");
        let Some(&(last, _)) = page.last() else { break };
        assert!(last > after);
        after = last;
        walked.extend(page.into_iter().map(|(_, memory)| memory.content));
    }
    assert_eq!(
        walked,
        ["memory 0", "memory 2", "memory 3", "memory 4", "stored during the walk"],
        "every live memory once, in the order stored"
    );
    assert_eq!(store.live_memories_after(after, 2).await.unwrap(), []);
}

/// Text holding U+0000 (SQLite keeps it; PostgreSQL's `text` cannot) is either stored and read
/// back unchanged or refused with an error that changes nothing: never cut short.
pub(super) async fn text_with_nul_is_kept_or_refused(store: Arc<dyn Store>) {
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

pub(super) async fn inserted_memories_read_back_unchanged(store: Arc<dyn Store>) {
    let memory =
        sample_memory("Use pnpm, not npm, in this repo.\nSecond line.", Scope::Repo, 1_000);
    store.insert_memories(std::slice::from_ref(&memory), "tester").await.unwrap();
    let read = store.get_memory(&memory.id).await.unwrap();
    assert_eq!(read.as_ref(), Some(&memory), "a stored memory must read back field for field");
    assert_eq!(store.get_memory("mem_missing").await.unwrap(), None, "unknown ids read as None");
}

pub(super) async fn lists_are_newest_first_filtered_and_paged(store: Arc<dyn Store>) {
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

    // Totals by label (which a store may keep rather than count) follow every change.
    let total = |filter: MemoryFilter| {
        let store = store.clone();
        async move { store.list_memories(&filter, 1, 0).await.unwrap().total }
    };
    assert_eq!(total(review.clone()).await, 1);
    assert_eq!(total(other_repo.clone()).await, 1);
    let none = MemoryFilter { status: Some(Status::Stale), ..Default::default() };
    assert_eq!(total(none.clone()).await, 0);
    let to_stale = MemoryChange { status: Some(Status::Stale), ..Default::default() };
    store
        .update_memory(&memories[1].id, &to_stale, Timestamp::from_millis(9_500), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(
        (total(review).await, total(none.clone()).await),
        (0, 1),
        "a status change moves its count"
    );
    let stale_archived = MemoryFilter { include_archived: true, ..none };
    assert_eq!(total(stale_archived).await, 1);
    let archive = MemoryChange {
        archived_at: Some(Some(Timestamp::from_millis(9_600))),
        ..Default::default()
    };
    store
        .update_memory(&memories[2].id, &archive, Timestamp::from_millis(9_600), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(total(other_repo).await, 0, "an archived memory leaves its label's count");
    assert_eq!(total(MemoryFilter::default()).await, 3);
}

pub(super) async fn updates_apply_atomically_and_archive(store: Arc<dyn Store>) {
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

pub(super) async fn search_ranks_by_relevance_and_follows_edits(store: Arc<dyn Store>) {
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

pub(super) async fn counts_leave_out_archived(store: Arc<dyn Store>) {
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

pub(super) async fn recall_marks_memories_and_remembers_tasks(store: Arc<dyn Store>) {
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
pub(super) async fn recalls_recorded_together_count_each_and_keep_the_latest(
    store: Arc<dyn Store>,
) {
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

pub(super) async fn concurrent_writers_lose_nothing(store: Arc<dyn Store>) {
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
pub(super) async fn rows(store: &Arc<dyn Store>) -> u64 {
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

pub(super) async fn guarded_changes_apply_whole_or_not_at_all(store: Arc<dyn Store>) {
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
    // The full-text index has what the changes wrote, archives included.
    let archive = GuardedChange {
        id: memories[0].id.clone(),
        change: MemoryChange {
            archived_at: Some(Some(Timestamp::from_millis(60))),
            ..Default::default()
        },
        expected: Version::of(&read(0).await),
    };
    let retag = GuardedChange {
        id: memories[1].id.clone(),
        change: MemoryChange { tags: Some(vec!["merged".to_owned()]), ..Default::default() },
        expected: Version::of(&read(1).await),
    };
    let applied = store
        .apply_guarded(&[vec![archive, retag]], Timestamp::from_millis(60), &TEST_AUDIT)
        .await
        .unwrap();
    assert_eq!(applied, [true]);
    let search = |word: &str| {
        let (store, terms) = (store.clone(), vec![word.to_owned()]);
        async move {
            let found = store.search_memories(&terms, &MemoryFilter::default(), 10).await.unwrap();
            let mut ids: Vec<String> = found.into_iter().map(|hit| hit.memory.id).collect();
            ids.sort();
            ids
        }
    };
    let mut merged = vec![memories[1].id.clone(), memories[2].id.clone()];
    merged.sort();
    assert_eq!(search("merged").await, merged, "re-tagged memories are found by their tags");
    assert_eq!(search("edited").await, Vec::<String>::new(), "a replaced tag is not");
    assert!(search("memory").await.iter().all(|id| *id != memories[0].id), "archived: gone");
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

pub(super) async fn vectors_follow_their_memories_versions(store: Arc<dyn Store>) {
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
