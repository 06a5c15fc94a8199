//! The default runtime reads what a step needs, not the whole log: on a conversation of
//! 10,000 events, a turn with a language model, compaction, resolveChannelOutput, replay
//! and listEvents each read a bounded number of rows. The store is real SQLite, wrapped to
//! count the rows every read returns; the model is a stand-in over loopback HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_agents::llm::ChatConfig;
use cairn_agents::{DefaultRuntime, RuntimeConfig};
use cairn_runtime::{
    CompactInput, CreateConversationInput, ReplayInput, ResolveOutputInput, Runtime,
    UserMessageInput,
};
use cairn_store::conformance::{Hooks, Watched};
use cairn_store::{Commit, CommitOutcome, ConversationStore, NewEvent};
use cairn_store_sqlite::SqliteStore;
use cairn_test_support::standin::{Request, StandIn, openai};
use cairn_types::Timestamp;
use serde_json::{Value, json};

/// Counts the rows (events and prompts) the store's reads return.
#[derive(Default)]
struct RowCounter(AtomicU64);

impl Hooks for RowCounter {
    fn rows_read(&self, rows: usize) {
        self.0.fetch_add(rows as u64, Ordering::SeqCst);
    }
}

/// A real store, wrapped to count the rows its reads return.
type CountingStore = Watched<RowCounter>;

/// The rows read since the last call.
fn take(store: &CountingStore) -> u64 {
    store.hooks.0.swap(0, Ordering::SeqCst)
}

/// A chat-completions stand-in: answers every request with a plain JSON completion and
/// keeps the requests.
fn chat_stand_in() -> (String, StandIn) {
    let stand_in = StandIn::start(|_| openai::chat("Noted."));
    (format!("{}/v1", stand_in.url()), stand_in)
}

const LOG_EVENTS: u64 = 10_000;

/// A runtime with a model over a counting store, and a conversation of 10,000 events:
/// every fifth a message (`m<offset>`, users and assistants in turn), the rest activities.
async fn long_conversation(
    directory: &tempfile::TempDir,
) -> (Arc<CountingStore>, DefaultRuntime, String, StandIn) {
    let inner = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
    let store = Arc::new(Watched::new(Arc::new(inner), RowCounter::default()));
    let (url, model) = chat_stand_in();
    let chat =
        ChatConfig { url, model: "m".into(), api_key: None, timeout: Duration::from_secs(60) };
    let config = RuntimeConfig { chat: Some(chat), ..RuntimeConfig::default() };
    let runtime = DefaultRuntime::new(store.clone(), None, config);
    let conversation =
        runtime.create_conversation(CreateConversationInput::default()).await.unwrap();
    let event = |offset: u64| match offset % 10 {
        0 => {
            json!({"messageId": format!("msg_{offset}"), "role": "user", "text": format!("m{offset}"), "intermediate": false})
        }
        5 => {
            json!({"messageId": format!("msg_{offset}"), "role": "assistant", "text": format!("m{offset}"), "intermediate": false})
        }
        _ => json!({"activityId": "act_1", "kind": "tool", "label": "work", "status": "done"}),
    };
    for batch in 0..10 {
        let events = (batch * 1_000 + 1..=batch * 1_000 + 1_000)
            .take_while(|offset| *offset < LOG_EVENTS)
            .map(|offset| {
                let kind = if offset % 5 == 0 { "message" } else { "activity" };
                NewEvent { kind: kind.to_owned(), data: event(offset) }
            })
            .collect();
        let commit = Commit::events(&conversation.id, events, Timestamp::now());
        assert!(matches!(store.commit(&commit).await.unwrap(), CommitOutcome::Committed { .. }));
    }
    take(&store);
    (store, runtime, conversation.id, model)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_a_long_conversation_reads_only_its_newest_messages() {
    let directory = tempfile::tempdir().unwrap();
    let (store, runtime, id, model) = long_conversation(&directory).await;

    for (turn, question) in ["What did we say?", "And then?"].into_iter().enumerate() {
        let input = UserMessageInput {
            conversation_id: id.clone(),
            text: question.to_owned(),
            ..UserMessageInput::default()
        };
        let reply = runtime.handle_user_message(input).await.unwrap();
        assert_eq!(reply.text, "Noted.");
        let rows = take(&store);
        assert!(rows <= 40, "turn {turn} read {rows} rows of a {LOG_EVENTS}-event log");
    }

    // The model still saw the newest 20 messages, oldest first, and the question.
    let requests: Vec<Value> = model.requests().iter().map(Request::json).collect();
    let messages = requests[0]["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages[1..].iter().map(|m| m["content"].as_str().unwrap()).collect();
    let newest: Vec<String> = (0..20).rev().map(|n| format!("m{}", 9_995 - 5 * n)).collect();
    assert_eq!(texts[..20], newest, "the last 20 messages of the log");
    assert_eq!(texts[20], "What did we say?");
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second.len(), 22, "the system prompt, 20 messages and the question");
    assert_eq!(second[19]["content"], "What did we say?");
    assert_eq!(second[20]["content"], "Noted.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_resolution_replay_and_listing_read_bounded_pages() {
    let directory = tempfile::tempdir().unwrap();
    let (store, runtime, id, _) = long_conversation(&directory).await;
    let newest = store.inner.list_events(&id, Some(9_990), 10).await.unwrap();
    let output = newest.iter().find(|event| event.offset == 9_995).unwrap();

    let resolved = runtime
        .resolve_channel_output(ResolveOutputInput {
            conversation_id: id.clone(),
            event_id: output.id.clone(),
            status: "delivered".into(),
            channel: None,
            delivery_id: None,
            provider: None,
            error: None,
            metadata: None,
        })
        .await
        .unwrap();
    assert_eq!(resolved.event.data["outputOffset"], 9_995);
    assert_eq!(take(&store), 1, "resolveChannelOutput reads the one event, by id");

    let compacted = runtime
        .compact_conversation(CompactInput {
            conversation_id: id.clone(),
            from_offset: None,
            to_offset: None,
            schema_version: None,
        })
        .await
        .unwrap();
    let rows = take(&store);
    assert!(rows <= 501, "compaction read {rows} rows");
    assert_eq!(compacted.summary["messageCount"], 1_999, "every message is counted");
    assert_eq!(compacted.summary["toOffset"], LOG_EVENTS, "the whole log, up to the resolution");
    let text = compacted.summary["text"].as_str().unwrap();
    assert!(text.starts_with("assistant: m5 user: m10 assistant: m15"), "{text}");
    assert!(text.chars().count() <= 4_001, "{}", text.len());

    let replay = runtime
        .replay_conversation(ReplayInput {
            conversation_id: id.clone(),
            after_offset: None,
            limit: 1_000,
        })
        .await
        .unwrap();
    assert_eq!(replay.events.len(), 1_000);
    assert_eq!(replay.next_after_offset, Some(999));
    assert_eq!(replay.messages.len(), 199);
    assert_eq!(take(&store), 1_001, "a page and the one that says more follow");

    let tail = runtime
        .replay_conversation(ReplayInput {
            conversation_id: id.clone(),
            after_offset: Some(9_990),
            limit: 1_000,
        })
        .await
        .unwrap();
    assert_eq!(tail.events.len(), 11, "up to the compaction's event");
    assert_eq!(tail.next_after_offset, None);

    take(&store);
    let page = runtime.list_events(&id, Some(5_000), 11).await.unwrap();
    assert_eq!(page.first().map(|event| event.offset), Some(5_001));
    assert_eq!(take(&store), 11);
}
