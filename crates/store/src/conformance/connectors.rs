//! Conformance checks of [`ConnectorStore`]: sync batches are idempotent, so a sync retried
//! after a failure part way (or one that read the items before another sync finished)
//! never imports a piece twice, and a sync's report and statuses read back as written.

use std::future::Future;
use std::sync::Arc;

use cairn_types::{
    Connector, ConnectorKind, IdPrefix, Scope, SyncReport, SyncStatus, Timestamp, new_id,
};

use super::sample_memory;
use crate::*;

/// Runs every connector check, each against a fresh store from `open_store`.
pub async fn run_connectors<F, Fut>(mut open_store: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    a_batch_applied_twice_imports_each_piece_once(open_store().await).await;
    stale_updates_and_removals_change_nothing(open_store().await).await;
    failed_sync_reports_read_back(open_store().await).await;
    an_erased_piece_stays_erased(open_store().await).await;
}

fn sample_connector() -> Connector {
    Connector {
        id: new_id(IdPrefix::Connector),
        kind: ConnectorKind::Folder,
        name: "docs".to_owned(),
        path: "/srv/docs".to_owned(),
        scope: Scope::Repo,
        repo: Some("docs".to_owned()),
        max_commits: 500,
        created_at: Timestamp::from_millis(1),
        last_sync: None,
    }
}

/// How many live memories hold `content`, whoever stored them.
async fn live_copies(store: &Arc<dyn Store>, content: &str) -> usize {
    let page = store.list_memories(&MemoryFilter::default(), 500, 0).await.unwrap();
    page.memories.iter().filter(|memory| memory.content == content).count()
}

async fn a_batch_applied_twice_imports_each_piece_once(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let install = sample_memory("Install with make.", Scope::Repo, 2);
    let deploy = sample_memory("Deploy on Tuesdays.", Scope::Repo, 2);
    let batch = SyncBatch {
        inserts: vec![
            (install.clone(), "setup.md#Install".to_owned(), "h1".to_owned()),
            (deploy.clone(), "deploy.md".to_owned(), "h2".to_owned()),
        ],
        ..SyncBatch::default()
    };
    let at = Timestamp::from_millis(3);
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first, BatchApplied { imported: 2, updated: 0, archived: 0 });

    // The same batch again, as a retry would send it (with the memories' ids of the first
    // attempt, or with new ones, as a sync that read the items earlier would): no copies.
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(
        again,
        BatchApplied::default(),
        "a batch applied twice changes nothing the second time"
    );
    let mut renamed = batch.clone();
    for (memory, _, _) in &mut renamed.inserts {
        memory.id = new_id(IdPrefix::Memory);
    }
    let stale = store.apply_sync_batch(&connector.id, &renamed, at, "system:sync").await.unwrap();
    assert_eq!(stale, BatchApplied::default());
    assert_eq!(live_copies(&store, "Install with make.").await, 1);
    assert_eq!(live_copies(&store, "Deploy on Tuesdays.").await, 1);
    assert_eq!(store.count_memories().await.unwrap(), 2);
    assert_eq!(store.connector_memory_count(&connector.id).await.unwrap(), 2);

    // An insert of a piece imported already, whose text changed since, updates its memory.
    let mut changed = sample_memory("Install with just.", Scope::Repo, 4);
    changed.id = new_id(IdPrefix::Memory);
    let batch = SyncBatch {
        inserts: vec![(changed, "setup.md#Install".to_owned(), "h3".to_owned())],
        ..SyncBatch::default()
    };
    let applied = store
        .apply_sync_batch(&connector.id, &batch, Timestamp::from_millis(4), "system:sync")
        .await
        .unwrap();
    assert_eq!(applied, BatchApplied { imported: 0, updated: 1, archived: 0 });
    let memory = store.get_memory(&install.id).await.unwrap().expect("the same memory");
    assert_eq!(memory.content, "Install with just.");
    assert_eq!(store.count_memories().await.unwrap(), 2);
    let mut items = store.connector_items(&connector.id).await.unwrap();
    items.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        items,
        [
            ConnectorItem {
                key: "deploy.md".to_owned(),
                memory_id: Some(deploy.id.clone()),
                content_hash: "h2".to_owned()
            },
            ConnectorItem {
                key: "setup.md#Install".to_owned(),
                memory_id: Some(install.id.clone()),
                content_hash: "h3".to_owned()
            },
        ]
    );
}

async fn an_erased_piece_stays_erased(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let ada = sample_memory("Ada's phone is 555-0100.", Scope::Repo, 2);
    let insert = (ada.clone(), "people.md".to_owned(), "h1".to_owned());
    let batch = SyncBatch { inserts: vec![insert.clone()], ..SyncBatch::default() };
    let at = Timestamp::from_millis(3);
    store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    let audit = crate::Audit { actor: "key:admin", action: "erase" };
    let erased = store.erase_memories(std::slice::from_ref(&ada.id), at, &audit).await.unwrap();
    assert_eq!(erased, std::slice::from_ref(&ada.id));
    let items = store.connector_items(&connector.id).await.unwrap();
    assert_eq!(
        items,
        [ConnectorItem {
            key: "people.md".to_owned(),
            memory_id: None,
            content_hash: String::new()
        }],
        "the piece is remembered as erased, without its memory or a hash of its text"
    );

    // A sync that read the items before the erasure, with the same text, a new text or
    // the piece gone: nothing comes back, and the mark stays.
    let again = SyncBatch { inserts: vec![insert], ..SyncBatch::default() };
    let update = ItemUpdate {
        key: "people.md".to_owned(),
        memory_id: ada.id.clone(),
        content: "Ada's phone is 555-0199.".to_owned(),
        content_hash: "h2".to_owned(),
    };
    let changed = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let removal = ConnectorItem {
        key: "people.md".to_owned(),
        memory_id: Some(ada.id.clone()),
        content_hash: "h1".to_owned(),
    };
    let gone = SyncBatch { removals: vec![removal], ..SyncBatch::default() };
    for batch in [again, changed, gone] {
        let applied =
            store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
        assert_eq!(applied, BatchApplied::default());
    }
    assert_eq!(store.count_memories().await.unwrap(), 0);
    assert!(store.get_memory(&ada.id).await.unwrap().is_none());
    assert_eq!(store.connector_items(&connector.id).await.unwrap(), items);
}

async fn stale_updates_and_removals_change_nothing(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let notes = sample_memory("Notes v1.", Scope::Repo, 2);
    let batch = SyncBatch {
        inserts: vec![(notes.clone(), "notes.md".to_owned(), "h1".to_owned())],
        ..SyncBatch::default()
    };
    let at = Timestamp::from_millis(3);
    store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();

    let update = ItemUpdate {
        key: "notes.md".to_owned(),
        memory_id: notes.id.clone(),
        content: "Notes v2.".to_owned(),
        content_hash: "h2".to_owned(),
    };
    let batch = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first.updated, 1);
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(again, BatchApplied::default(), "an update whose text is stored already is skipped");

    let removal = ConnectorItem {
        key: "notes.md".to_owned(),
        memory_id: Some(notes.id.clone()),
        content_hash: "h2".to_owned(),
    };
    let gone = ConnectorItem { key: "never-imported.md".to_owned(), ..removal.clone() };
    let batch = SyncBatch { removals: vec![removal, gone], ..SyncBatch::default() };
    let first = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(first, BatchApplied { imported: 0, updated: 0, archived: 1 });
    let again = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(again, BatchApplied::default(), "a removal of a forgotten piece is skipped");
    assert!(store.get_memory(&notes.id).await.unwrap().unwrap().archived_at.is_some());
    assert_eq!(store.count_memories().await.unwrap(), 0);
    assert!(store.connector_items(&connector.id).await.unwrap().is_empty());

    // A stale update of the removed piece does not bring it back.
    let update = ItemUpdate {
        key: "notes.md".to_owned(),
        memory_id: notes.id.clone(),
        content: "Notes v3.".to_owned(),
        content_hash: "h3".to_owned(),
    };
    let batch = SyncBatch { updates: vec![update], ..SyncBatch::default() };
    let stale = store.apply_sync_batch(&connector.id, &batch, at, "system:sync").await.unwrap();
    assert_eq!(stale, BatchApplied::default());
    assert_eq!(store.get_memory(&notes.id).await.unwrap().unwrap().content, "Notes v2.");
}

async fn failed_sync_reports_read_back(store: Arc<dyn Store>) {
    let connector = sample_connector();
    store.insert_connector(&connector).await.unwrap();
    let report = SyncReport {
        started_at: Timestamp::from_millis(3),
        finished_at: Timestamp::from_millis(4),
        status: SyncStatus::Error,
        imported: 250,
        updated: 0,
        unchanged: 0,
        archived: 0,
        skipped: 1,
        error: Some("the sync stopped part way".to_owned()),
    };
    store.record_sync(&connector.id, &report).await.unwrap();
    let read = store.get_connector(&connector.id).await.unwrap().unwrap();
    assert_eq!(read.last_sync, Some(report));
}

pub(super) async fn connectors_keep_their_items_in_step(store: Arc<dyn Store>) {
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
