//! Conversation checks: behaviour every [`ConversationStore`] backend must show.

use std::future::Future;
use std::sync::Arc;

use cairn_types::{
    Conversation, ConversationChannel, IdPrefix, Lifecycle, RuntimeEvent, Snapshot, Timestamp,
    new_id,
};

use crate::{
    Commit, CommitOutcome, ConversationCursor, ConversationQuery, ConversationStore, EventRange,
    IdempotencyRecord, NewEvent, NewPrompt, PromptRecord, Store,
};

/// Runs every conversation check, each against a fresh store from `open_store`.
pub async fn run_conversations<F, Fut>(mut open_store: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    conversations_are_created_once_and_read_back(open_store().await).await;
    conversation_pages_never_skip_or_repeat(open_store().await).await;
    conversations_filter_by_agent_and_update_time(open_store().await).await;
    commits_append_gapless_and_move_the_conversation(open_store().await).await;
    bounded_reads_return_only_what_they_ask_for(open_store().await).await;
    lifecycle_and_snapshot_follow_commits(open_store().await).await;
    prompts_open_and_close_with_commits(open_store().await).await;
    idempotent_commits_apply_once(open_store().await).await;
    commits_to_unknown_conversations_change_nothing(open_store().await).await;
    concurrent_committers_get_gapless_offsets(open_store().await).await;
    super::voice::run_voice(&mut open_store).await;
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
pub(super) async fn create<S: ConversationStore + ?Sized>(
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

/// `read_events`, `count_events` and `get_event`: the bounded reads the runtime's hot paths
/// use instead of reading whole logs.
async fn bounded_reads_return_only_what_they_ask_for(store: Arc<dyn ConversationStore>) {
    let conversation = sample_conversation("agent-a", 1_000);
    // Offsets 0..10: messages at even offsets, activities at odd ones.
    let kinds = |n: u64| if n.is_multiple_of(2) { "message" } else { "activity" };
    let log =
        create(&store, &conversation, &(0..10).map(|n| new_event(kinds(n), n)).collect::<Vec<_>>())
            .await;
    let other = sample_conversation("agent-a", 2_000);
    let other_log =
        create(&store, &other, &(0..3).map(|n| new_event("message", n)).collect::<Vec<_>>()).await;

    let read = |range: EventRange| {
        let store = store.clone();
        let id = conversation.id.clone();
        async move { offsets(&store.read_events(&id, &range).await.unwrap()) }
    };
    let kind = |kind: &str| Some(kind.to_owned());
    assert_eq!(
        read(EventRange { limit: 3, ..EventRange::default() }).await,
        [0, 1, 2],
        "the oldest by default"
    );
    assert_eq!(
        read(EventRange { limit: 3, newest: true, ..EventRange::default() }).await,
        [7, 8, 9],
        "newest keeps the newest, in offset order"
    );
    assert_eq!(read(EventRange::newest_of_kind("message", 2)).await, [6, 8], "of one kind");
    assert_eq!(
        read(EventRange { before: Some(6), ..EventRange::newest_of_kind("message", 2) }).await,
        [2, 4],
        "before is exclusive"
    );
    assert_eq!(
        read(EventRange {
            after: Some(3),
            before: Some(9),
            kind: kind("activity"),
            limit: 10,
            newest: false
        })
        .await,
        [5, 7],
        "after and before are exclusive, and the kind filters"
    );
    assert!(
        read(EventRange { limit: 0, ..EventRange::default() }).await.is_empty(),
        "a limit of 0 reads nothing"
    );
    assert!(
        read(EventRange { after: Some(9), limit: 10, ..EventRange::default() }).await.is_empty()
    );
    assert!(read(EventRange::newest_of_kind("nothing", 10)).await.is_empty());
    let full = store
        .read_events(&conversation.id, &EventRange { limit: 100, ..EventRange::default() })
        .await
        .unwrap();
    assert_eq!(full, log, "events read back as created, and never another conversation's");

    let count = |range: EventRange| {
        let store = store.clone();
        let id = conversation.id.clone();
        async move { store.count_events(&id, &range).await.unwrap() }
    };
    assert_eq!(count(EventRange::default()).await, 10, "a count ignores the limit");
    assert_eq!(count(EventRange::newest_of_kind("message", 1)).await, 5);
    assert_eq!(
        count(EventRange { after: Some(3), kind: kind("message"), ..EventRange::default() }).await,
        3
    );
    assert_eq!(
        count(EventRange { after: Some(2), before: Some(5), ..EventRange::default() }).await,
        2
    );
    assert_eq!(store.count_events("conv_missing", &EventRange::default()).await.unwrap(), 0);

    for event in [&log[0], &log[4], &log[9]] {
        assert_eq!(
            store.get_event(&conversation.id, &event.id).await.unwrap().as_ref(),
            Some(event)
        );
    }
    assert_eq!(
        store.get_event(&conversation.id, &other_log[0].id).await.unwrap(),
        None,
        "an event of another conversation is not found"
    );
    assert_eq!(store.get_event(&conversation.id, "evt_missing").await.unwrap(), None);
    assert_eq!(store.get_event("conv_missing", &log[0].id).await.unwrap(), None);
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
    let open = store.open_prompts(&conversation.id, None, None, 100).await.unwrap();
    assert_eq!(
        open.iter().map(|p| (p.prompt_id.as_str(), p.offset)).collect::<Vec<_>>(),
        [("prm_first", events[1].offset), ("prm_second", events[2].offset)],
        "open prompts are oldest first and keep the offset of the event that opened them"
    );
    assert_eq!(open[0].widget_kind, "choice");
    let (first, second) = (events[1].offset, events[2].offset);
    let open_between = |after, before, limit| {
        let store = store.clone();
        let id = conversation.id.clone();
        async move { store.open_prompts(&id, after, before, limit).await.unwrap() }
    };
    assert_eq!(open_between(Some(first), None, 100).await, open[1..], "after is exclusive");
    assert_eq!(open_between(None, Some(second), 100).await, open[..1], "before is exclusive");
    assert_eq!(open_between(None, None, 1).await, open[..1], "the limit keeps the oldest");
    assert!(open_between(Some(first), Some(second), 100).await.is_empty());
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
    let still_open = store.open_prompts(&conversation.id, None, None, 100).await.unwrap();
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
    assert!(store.open_prompts(&unchanged.id, None, None, 100).await.unwrap().is_empty());
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
