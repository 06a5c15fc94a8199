//! Tests of the runtime's event streams: what wakes them, once, and what does not.

use serde_json::json;

use super::*;

#[tokio::test]
async fn other_daemons_appends_wake_streams_once_and_polls_wake_them_all() {
    let directory = tempfile::tempdir().unwrap();
    let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
    let runtime = DefaultRuntime::new(Arc::new(store.unwrap()), None, RuntimeConfig::default());
    let conversation =
        runtime.create_conversation(CreateConversationInput::default()).await.unwrap();
    let id = conversation.id.clone();
    let mut stream = runtime.subscribe(&id).unwrap();
    stream.borrow_and_update();
    let appended =
        |next_offset| ExternalChange::Appended { conversation_id: id.clone(), next_offset };

    let custom = CustomEventInput {
        conversation_id: id.clone(),
        event: "ping".to_owned(),
        payload: json!({}),
    };
    runtime.emit_custom_event(custom).await.unwrap();
    assert!(stream.has_changed().unwrap(), "a local append wakes the stream");
    assert_eq!(*stream.borrow_and_update(), 2);
    runtime.external_change(&appended(2));
    assert!(!stream.has_changed().unwrap(), "the store's notice of the same append: no wake");
    runtime.external_change(&appended(1));
    assert!(!stream.has_changed().unwrap(), "never back to an offset the stream passed");

    runtime.external_change(&appended(5));
    assert!(stream.has_changed().unwrap(), "another daemon's append wakes the stream");
    assert_eq!(*stream.borrow_and_update(), 5);

    for change in [ExternalChange::Poll, ExternalChange::Resync] {
        runtime.external_change(&change);
        assert!(stream.has_changed().unwrap(), "{change:?} makes every stream read again");
        assert_eq!(*stream.borrow_and_update(), 5, "without moving its offset");
    }
    for change in [
        ExternalChange::Memories { ids: vec![] },
        ExternalChange::Vectors { model: "m".to_owned(), ids: vec![] },
        ExternalChange::Appended { conversation_id: "conv_other".to_owned(), next_offset: 9 },
    ] {
        runtime.external_change(&change);
        assert!(!stream.has_changed().unwrap(), "{change:?} is not this stream's");
    }
}
