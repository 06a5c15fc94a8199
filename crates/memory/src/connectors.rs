//! Connectors: importing a folder's documents or a repository's history as memories, and
//! keeping them in step on every sync (new pieces imported, changed ones updated, removed
//! ones archived, nothing duplicated).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cairn_store::{ItemUpdate, LockAttempt, SharedLock, SyncBatch};
use cairn_types::{
    Connector, ConnectorHealth, ConnectorKind, ConnectorList, ConnectorStatus, IdPrefix,
    JsonObject, Memory, NewConnector, RemovedConnector, Scope, Status, SyncProgress, SyncReport,
    SyncStatus, Timestamp, new_id,
};

use crate::sources::{self, SourceItem};
use crate::{Engine, Error, Result, context, tokens, validate};

/// How many pieces one transaction applies; progress is reported between batches.
const BATCH: usize = 250;
const DEFAULT_MAX_COMMITS: u32 = 500;
const MAX_MAX_COMMITS: u32 = 10_000;

/// Syncs under way, by connector id.
#[derive(Default)]
pub(crate) struct RunningSyncs {
    progress: Mutex<HashMap<String, SyncProgress>>,
}

impl RunningSyncs {
    fn get(&self, id: &str) -> Option<SyncProgress> {
        self.progress.lock().expect("sync progress lock").get(id).copied()
    }

    fn set(&self, id: &str, progress: SyncProgress) {
        self.progress.lock().expect("sync progress lock").insert(id.to_owned(), progress);
    }

    /// Claims the connector for a sync or a removal; one at a time.
    fn claim(&self, id: &str) -> Result<SyncGuard<'_>> {
        let mut running = self.progress.lock().expect("sync progress lock");
        if running.contains_key(id) {
            return Err(Error::SyncRunning(id.to_owned()));
        }
        running.insert(id.to_owned(), SyncProgress { done: 0, total: 0 });
        Ok(SyncGuard { running: self, id: id.to_owned() })
    }
}

/// Marks a sync as running for as long as it lives.
struct SyncGuard<'a> {
    running: &'a RunningSyncs,
    id: String,
}

impl Drop for SyncGuard<'_> {
    fn drop(&mut self) {
        self.running.progress.lock().expect("sync progress lock").remove(&self.id);
    }
}

impl Engine {
    pub async fn add_connector(&self, input: NewConnector) -> Result<Connector> {
        let path = validate::required_text("path", Some(input.path), validate::MAX_NAME_BYTES)?;
        if !Path::new(&path).is_absolute() {
            return Err(Error::Invalid {
                field: "path",
                reason: format!("`{path}` is not an absolute path"),
            });
        }
        let max_commits = input.max_commits.unwrap_or(DEFAULT_MAX_COMMITS);
        if max_commits == 0 || max_commits > MAX_MAX_COMMITS {
            return Err(Error::Invalid {
                field: "maxCommits",
                reason: format!("must be from 1 to {MAX_MAX_COMMITS}"),
            });
        }
        let kind = input.kind;
        let roots = self.connector_roots.clone();
        let checked = blocking(move || open_source(kind, Path::new(&path), roots.as_deref())).await;
        let path = checked.map_err(|error| {
            tracing::info!(%error, "a connector's path was refused");
            Error::Invalid { field: "path", reason: error.public_message() }
        })?;
        let last_component = path.file_name().map(|name| name.to_string_lossy().into_owned());
        let name = validate::optional_text("name", input.name, validate::MAX_NAME_BYTES)?
            .or_else(|| last_component.clone())
            .unwrap_or_else(|| path.display().to_string());
        // The repository the folder is in, named as hooks and the CLI name it (its origin,
        // else its root folder), so a project's docs land in the project's repository; a
        // folder in no repository is named after itself.
        let repo = validate::optional_text("repo", input.repo, validate::MAX_NAME_BYTES)?
            .or_else(|| crate::repo_identity(&path).map(|(name, _, _)| name))
            .or(last_component);
        let connector = Connector {
            id: new_id(IdPrefix::Connector),
            kind,
            name,
            path: path.display().to_string(),
            scope: input.scope.unwrap_or(Scope::Repo),
            repo,
            max_commits,
            created_at: Timestamp::now(),
            last_sync: None,
        };
        self.store.insert_connector(&connector).await?;
        Ok(connector)
    }

    pub async fn list_connectors(&self) -> Result<ConnectorList> {
        Ok(ConnectorList { connectors: self.store.list_connectors().await? })
    }

    pub async fn get_connector(&self, id: &str) -> Result<Connector> {
        self.store.get_connector(id).await?.ok_or_else(|| Error::ConnectorNotFound(id.to_owned()))
    }

    pub async fn connector_health(&self, id: &str) -> Result<ConnectorHealth> {
        let connector = self.get_connector(id).await?;
        let progress = self.syncs.get(id);
        let status = match (&progress, &connector.last_sync) {
            (Some(_), _) => ConnectorStatus::Syncing,
            (None, None) => ConnectorStatus::NeverSynced,
            (None, Some(report)) => report.status.into(),
        };
        Ok(ConnectorHealth {
            id: connector.id.clone(),
            status,
            last_sync_at: connector.last_sync.as_ref().map(|report| report.finished_at),
            last_sync: connector.last_sync,
            progress,
            memories: self.store.connector_memory_count(id).await?,
        })
    }

    /// Removes a connector. Its memories are archived, not deleted, so they can be restored.
    pub async fn remove_connector(&self, id: &str, actor: &str) -> Result<RemovedConnector> {
        self.get_connector(id).await?;
        let _claim = self.syncs.claim(id)?;
        let _shared = self.claim_shared(id).await?;
        let removals = self.store.connector_items(id).await?;
        let archived = self.store.connector_memory_count(id).await?;
        for chunk in removals.chunks(BATCH) {
            let batch = SyncBatch { removals: chunk.to_vec(), ..SyncBatch::default() };
            self.store.apply_sync_batch(id, &batch, Timestamp::now(), actor).await?;
        }
        // A removal that fails part way leaves the connector with the items not yet archived;
        // removing it again archives the rest.
        self.store.delete_connector(id).await?;
        Ok(RemovedConnector { id: id.to_owned(), archived_memories: archived })
    }

    /// Reads the source and brings the connector's memories in step with it. A failure to read
    /// the source is reported (and kept for the health check), not raised.
    ///
    /// The changes are applied in batches of [`BATCH`], each in one transaction, and every
    /// batch is idempotent (see `ConnectorStore::apply_sync_batch`): a sync that fails part
    /// way keeps the batches it applied, reports `error`, and the next sync applies the rest,
    /// with no piece imported twice.
    pub async fn sync_connector(&self, id: &str, actor: &str) -> Result<SyncReport> {
        let _claim = self.syncs.claim(id)?;
        let _shared = self.claim_shared(id).await?;
        // Read after claiming: a removal that finished first leaves nothing to sync.
        let connector = self.get_connector(id).await?;
        let started_at = Timestamp::now();
        let mut report = SyncReport {
            started_at,
            finished_at: started_at,
            status: SyncStatus::Ok,
            imported: 0,
            updated: 0,
            unchanged: 0,
            archived: 0,
            skipped: 0,
            error: None,
        };
        let outcome = self.run_sync(&connector, actor, &mut report).await;
        report.finished_at = Timestamp::now();
        match outcome {
            Ok(()) => {}
            Err(Error::Store(error)) => {
                // Storage failed part way: say so in the health check (if storage lets us),
                // and fail the request. The next sync picks up where this one stopped.
                tracing::error!(connector = id, %error, "a sync stopped part way");
                report.status = SyncStatus::Error;
                report.error = Some(format!(
                    "the sync stopped part way, after {} changes, because storage failed (the \
                     daemon's log says why); what was applied stays, and the next sync applies \
                     the rest",
                    report.imported + report.updated + report.archived
                ));
                if let Err(record) = self.store.record_sync(id, &report).await {
                    tracing::error!(connector = id, error = %record, "cannot record the failed sync");
                }
                return Err(Error::Store(error));
            }
            Err(other) => {
                report.status = SyncStatus::Error;
                report.error = Some(other.to_string());
            }
        }
        self.store.record_sync(id, &report).await?;
        Ok(report)
    }

    /// Claims the connector among the daemons sharing the store (the claim in this process
    /// is taken first): a sync or removal running on another daemon is answered as one
    /// running here would be.
    async fn claim_shared(&self, id: &str) -> Result<Option<SharedLock>> {
        match self.store.try_lock(&format!("connector/{id}")).await? {
            LockAttempt::Unshared => Ok(None),
            LockAttempt::Held(lock) => Ok(Some(lock)),
            LockAttempt::Busy => Err(Error::SyncRunning(id.to_owned())),
        }
    }

    async fn run_sync(
        &self,
        connector: &Connector,
        actor: &str,
        report: &mut SyncReport,
    ) -> Result<()> {
        let (kind, path, max_commits) =
            (connector.kind, PathBuf::from(&connector.path), connector.max_commits);
        let roots = self.connector_roots.clone();
        let read = blocking(move || {
            // Checked again on every sync: a folder may have become a link out of the roots,
            // and the roots may have changed since the connector was added.
            let path = open_source(kind, &path, roots.as_deref())?;
            match kind {
                ConnectorKind::Folder => sources::read_folder_with_skips(&path),
                ConnectorKind::Git => {
                    sources::read_git(&path, max_commits as usize).map(|items| (items, 0))
                }
            }
        })
        .await;
        let (items, skipped) = read.map_err(|error| {
            tracing::warn!(connector = %connector.id, %error, "a connector's source cannot be read");
            Error::Source(error.public_message())
        })?;
        report.skipped = skipped as u64;

        let known: HashMap<String, cairn_store::ConnectorItem> = self
            .store
            .connector_items(&connector.id)
            .await?
            .into_iter()
            .map(|item| (item.key.clone(), item))
            .collect();
        let now = Timestamp::now();
        let mut inserts = Vec::new();
        let mut updates = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for item in items {
            seen.insert(item.key.clone());
            match known.get(&item.key) {
                None => inserts.push(imported_memory(connector, item, now)),
                // Erased: never imported again.
                Some(existing) if existing.memory_id.is_none() => report.skipped += 1,
                Some(existing) if existing.content_hash != item.content_hash => {
                    updates.push(ItemUpdate {
                        key: item.key,
                        memory_id: existing.memory_id.clone().unwrap_or_default(),
                        content: item.content,
                        content_hash: item.content_hash,
                    })
                }
                Some(_) => report.unchanged += 1,
            }
        }
        let removals: Vec<_> = known
            .into_values()
            .filter(|item| item.memory_id.is_some() && !seen.contains(&item.key))
            .collect();
        let total = (inserts.len() + updates.len() + removals.len()) as u64;
        self.syncs.set(&connector.id, SyncProgress { done: 0, total });

        let mut done = 0;
        let mut inserts = inserts.into_iter().peekable();
        let mut updates = updates.into_iter().peekable();
        let mut removals = removals.into_iter().peekable();
        while inserts.peek().is_some() || updates.peek().is_some() || removals.peek().is_some() {
            let batch = SyncBatch {
                inserts: inserts.by_ref().take(BATCH).collect(),
                updates: updates.by_ref().take(BATCH).collect(),
                removals: removals.by_ref().take(BATCH).collect(),
            };
            let applied =
                self.store.apply_sync_batch(&connector.id, &batch, Timestamp::now(), actor).await?;
            report.imported += applied.imported;
            report.updated += applied.updated;
            report.archived += applied.archived;
            done += (batch.inserts.len() + batch.updates.len() + batch.removals.len()) as u64;
            self.syncs.set(&connector.id, SyncProgress { done, total });
            self.wake_embedder((applied.imported + applied.updated) as usize);
            // Count each new memory's context entry now, on a blocking thread: tokenizing
            // is CPU work that would hold up the async workers.
            let memories: Vec<Memory> =
                batch.inserts.into_iter().map(|(memory, _, _)| memory).collect();
            let entry_tokens = self.entry_tokens.clone();
            blocking(move || {
                for memory in &memories {
                    entry_tokens
                        .insert(memory, tokens::count_tokens(&context::format_entry(memory)));
                }
            })
            .await;
        }
        Ok(())
    }
}

/// Checks that `path` is a source of `kind` and lies under one of `roots` (all of them when
/// there are none), once symbolic links are resolved: its canonical path.
fn open_source(
    kind: ConnectorKind,
    path: &Path,
    roots: Option<&[PathBuf]>,
) -> Result<PathBuf, sources::SourceError> {
    // The roots first: a path outside them is refused whatever it is.
    let canonical = sources::canonical(path)?;
    if let Some(roots) = roots
        && !roots.iter().any(|root| canonical.starts_with(root))
    {
        return Err(sources::SourceError::OutsideRoots(path.to_path_buf(), canonical));
    }
    match kind {
        ConnectorKind::Folder => sources::check_folder(&canonical)?,
        ConnectorKind::Git => {
            sources::check_git(&canonical)?;
            // The history may live elsewhere (a `.git` file, alternates): there too.
            if let Some(roots) = roots {
                for location in sources::git_locations(&canonical)? {
                    if !roots.iter().any(|root| location.starts_with(root)) {
                        return Err(sources::SourceError::OutsideRoots(
                            path.to_path_buf(),
                            location,
                        ));
                    }
                }
            }
        }
    }
    Ok(canonical)
}

fn imported_memory(
    connector: &Connector,
    item: SourceItem,
    now: Timestamp,
) -> (Memory, String, String) {
    let mut metadata = JsonObject::new();
    metadata.insert("connectorId".to_owned(), connector.id.clone().into());
    metadata.insert("key".to_owned(), item.key.clone().into());
    if let Some(path) = &item.path {
        metadata.insert("path".to_owned(), path.clone().into());
    }
    let memory = Memory {
        id: new_id(IdPrefix::Memory),
        content: item.content,
        scope: connector.scope,
        status: Status::Active,
        repo: connector.repo.clone(),
        tags: vec!["connector".to_owned(), connector.kind.as_str().to_owned()],
        source: Some(item.origin),
        metadata,
        created_at: now,
        updated_at: now,
        last_recalled_at: None,
        recall_count: 0,
        archived_at: None,
    };
    (memory, item.key, item.content_hash)
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.expect("blocking source reads do not panic")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use cairn_store::conformance::{FailingSyncStore, InjectedFailure};
    use cairn_store::{MemoryFilter, Store};
    use cairn_store_sqlite::SqliteStore;
    use cairn_types::{ConnectorKind, ConnectorStatus, MemoryListQuery, NewConnector, SyncStatus};

    use super::BATCH;
    use crate::{Engine, Error};

    /// A folder of `count` Markdown files, one section each: `count` pieces.
    fn folder_of_notes(count: usize) -> tempfile::TempDir {
        let folder = tempfile::tempdir().unwrap();
        for n in 0..count {
            let text = format!("# Note {n}\nRemember item number {n}.\n");
            std::fs::write(folder.path().join(format!("{n:04}.md")), text).unwrap();
        }
        folder
    }

    fn new_folder(path: &std::path::Path) -> NewConnector {
        NewConnector {
            kind: ConnectorKind::Folder,
            path: path.display().to_string(),
            name: None,
            scope: None,
            repo: Some("notes".to_owned()),
            max_commits: None,
        }
    }

    /// Every live memory's content, checked to hold no copies.
    async fn live_contents(engine: &Engine) -> HashSet<String> {
        let query = MemoryListQuery { limit: Some(500), ..MemoryListQuery::default() };
        let mut contents = Vec::new();
        let mut offset = 0;
        loop {
            let query = MemoryListQuery { offset: Some(offset), ..query.clone() };
            let page = engine.list_memories(query).await.unwrap();
            if page.memories.is_empty() {
                break;
            }
            offset += page.memories.len() as u64;
            contents.extend(page.memories.into_iter().map(|memory| memory.content));
        }
        let unique: HashSet<String> = contents.iter().cloned().collect();
        assert_eq!(unique.len(), contents.len(), "no piece is imported twice");
        unique
    }

    fn expected_contents(count: usize) -> HashSet<String> {
        (0..count).map(|n| format!("Note {n}\n\nRemember item number {n}.")).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sync_that_fails_part_way_is_finished_by_the_next_without_copies() {
        for failure in [InjectedFailure::BeforeCommit, InjectedFailure::AfterCommit] {
            let count = 2 * BATCH + 100;
            let notes = folder_of_notes(count);
            let directory = tempfile::tempdir().unwrap();
            let sqlite: Arc<dyn Store> =
                Arc::new(SqliteStore::open(&directory.path().join("cairn.db")).unwrap());
            let failing = Arc::new(FailingSyncStore::failing_sync(sqlite.clone(), 2, failure));
            let engine = Engine::new(failing.clone());
            let connector = engine.add_connector(new_folder(notes.path())).await.unwrap();

            let failed = engine.sync_connector(&connector.id, "system:test").await;
            assert!(matches!(failed, Err(Error::Store(_))), "{failure:?}: {failed:?}");
            let applied = match failure {
                InjectedFailure::BeforeCommit => BATCH,
                InjectedFailure::AfterCommit => 2 * BATCH,
            };
            assert_eq!(live_contents(&engine).await.len(), applied, "{failure:?}");
            let health = engine.connector_health(&connector.id).await.unwrap();
            assert_eq!(health.status, ConnectorStatus::Error);
            let report = health.last_sync.expect("the failed sync is reported");
            assert_eq!(report.status, SyncStatus::Error);
            assert_eq!(report.imported, BATCH as u64, "what the first batch imported");
            let error = report.error.unwrap();
            assert!(error.contains("stopped part way"), "{error}");
            assert!(!error.contains("injected"), "storage's words stay in the log: {error}");

            let retried = engine.sync_connector(&connector.id, "system:test").await.unwrap();
            assert_eq!(retried.status, SyncStatus::Ok);
            assert_eq!(
                (retried.imported, retried.unchanged),
                ((count - applied) as u64, applied as u64),
                "{failure:?}: the retry imports the rest alone"
            );
            assert_eq!(live_contents(&engine).await, expected_contents(count), "{failure:?}");
            assert_eq!(sqlite.count_memories().await.unwrap(), count as u64);
            assert_eq!(sqlite.connector_items(&connector.id).await.unwrap().len(), count);
            let health = engine.connector_health(&connector.id).await.unwrap();
            assert_eq!((health.status, health.memories), (ConnectorStatus::Ok, count as u64));
            let batches = match failure {
                // Two batches before the failure; the retry's 350 pieces take two more.
                InjectedFailure::BeforeCommit => 4,
                // The second batch was applied: the retry's 100 pieces take one more.
                InjectedFailure::AfterCommit => 3,
            };
            assert_eq!(failing.batches(), batches, "{failure:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_removal_that_fails_part_way_is_finished_by_the_next() {
        let count = BATCH + 10;
        let notes = folder_of_notes(count);
        let directory = tempfile::tempdir().unwrap();
        let sqlite: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&directory.path().join("cairn.db")).unwrap());
        // Batches 1 and 2 are the sync's; 3 and 4 the removal's.
        let failing = Arc::new(FailingSyncStore::failing_sync(
            sqlite.clone(),
            4,
            InjectedFailure::BeforeCommit,
        ));
        let engine = Engine::new(failing);
        let connector = engine.add_connector(new_folder(notes.path())).await.unwrap();
        engine.sync_connector(&connector.id, "system:test").await.unwrap();

        let failed = engine.remove_connector(&connector.id, "system:test").await;
        assert!(matches!(failed, Err(Error::Store(_))), "{failed:?}");
        assert_eq!(sqlite.count_memories().await.unwrap(), 10, "the first batch was archived");
        engine.get_connector(&connector.id).await.expect("the connector is still there");
        let removed = engine.remove_connector(&connector.id, "system:test").await.unwrap();
        assert_eq!(removed.archived_memories, 10);
        assert_eq!(sqlite.count_memories().await.unwrap(), 0);
        let archived = MemoryFilter { include_archived: true, ..MemoryFilter::default() };
        let all = sqlite.list_memories(&archived, 500, 0).await.unwrap();
        assert_eq!(all.total, count as u64, "archived, not deleted, and none twice");
        assert!(matches!(
            engine.get_connector(&connector.id).await,
            Err(Error::ConnectorNotFound(_))
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_erased_piece_is_not_imported_again_while_its_source_has_it() {
        let notes = folder_of_notes(3);
        let directory = tempfile::tempdir().unwrap();
        let engine =
            Engine::new(Arc::new(SqliteStore::open(&directory.path().join("cairn.db")).unwrap()));
        let connector = engine.add_connector(new_folder(notes.path())).await.unwrap();
        engine.sync_connector(&connector.id, "system:test").await.unwrap();
        let request = cairn_types::ErasureRequest {
            subject: Some("item number 1".to_owned()),
            ..cairn_types::ErasureRequest::default()
        };
        let erased = engine.erase(request, "key:admin").await.unwrap();
        assert_eq!(erased.memories.len(), 1, "{erased:?}");

        let report = engine.sync_connector(&connector.id, "system:test").await.unwrap();
        assert_eq!((report.imported, report.unchanged, report.skipped), (0, 2, 1));
        // Changed in the source, it stays erased too.
        std::fs::write(notes.path().join("0001.md"), "# Note 1\nItem number 1, edited.\n").unwrap();
        let report = engine.sync_connector(&connector.id, "system:test").await.unwrap();
        assert_eq!((report.imported, report.updated, report.skipped), (0, 0, 1));
        let mut expected = expected_contents(3);
        expected.remove("Note 1\n\nRemember item number 1.");
        assert_eq!(live_contents(&engine).await, expected);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connectors_read_only_under_the_roots_whatever_links_say() {
        let roots = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(roots.path()).unwrap();
        std::fs::create_dir(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/a.md"), "# A\nInside.\n").unwrap();
        std::fs::write(outside.path().join("secret.md"), "# Secret\nOutside.\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();

        let directory = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&directory.path().join("cairn.db")).unwrap());
        let engine = Engine::new(store.clone()).with_connector_roots(vec![root.clone()]);

        for refused in [outside.path().to_path_buf(), root.join("link"), root.join("docs/../link")]
        {
            let error = engine.add_connector(new_folder(&refused)).await.unwrap_err();
            let Error::Invalid { field, reason } = &error else { panic!("{error:?}") };
            assert_eq!(*field, "path");
            assert!(reason.contains("outside the folders"), "{reason}");
            assert!(reason.contains("--connector-root"), "says how to allow it: {reason}");
        }
        assert!(store.list_connectors().await.unwrap().is_empty(), "nothing was added");

        let docs = engine.add_connector(new_folder(&root.join("docs"))).await.unwrap();
        assert_eq!(docs.path, root.join("docs").display().to_string());
        // The folder becomes a link out of the roots after it was added: the sync refuses it.
        std::fs::rename(root.join("docs"), root.join("docs-old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("docs")).unwrap();
        let report = engine.sync_connector(&docs.id, "system:test").await.unwrap();
        assert_eq!(report.status, SyncStatus::Error);
        assert!(report.error.unwrap().contains("outside the folders"));
        assert_eq!(store.count_memories().await.unwrap(), 0, "nothing outside was read");
    }

    /// A git repository with one commit, in `dir`.
    fn git_repository(dir: &std::path::Path, message: &str) {
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("README.md"), "hello\n").unwrap();
        git(&["add", "README.md"]);
        git(&["commit", "-q", "-m", message]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_git_connector_cannot_borrow_a_history_outside_the_roots() {
        let roots = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(roots.path()).unwrap();
        let secret = outside.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        git_repository(&secret, "Secret plans outside the roots");

        // A worktree whose `.git` file points at the repository outside.
        let pointer = root.join("pointer");
        std::fs::create_dir(&pointer).unwrap();
        let gitdir = std::fs::canonicalize(secret.join(".git")).unwrap();
        std::fs::write(pointer.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        // A repository inside whose objects come from the one outside (alternates).
        let borrower = root.join("borrower");
        std::fs::create_dir(&borrower).unwrap();
        git_repository(&borrower, "Inside");
        let objects = gitdir.join("objects");
        std::fs::write(
            borrower.join(".git/objects/info/alternates"),
            format!("{}\n", objects.display()),
        )
        .unwrap();

        let directory = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&directory.path().join("cairn.db")).unwrap());
        let engine = Engine::new(store.clone()).with_connector_roots(vec![root.clone()]);
        for refused in [&pointer, &borrower] {
            let mut input = new_folder(refused);
            input.kind = ConnectorKind::Git;
            let error = engine.add_connector(input).await.unwrap_err();
            let Error::Invalid { reason, .. } = &error else { panic!("{error:?}") };
            assert!(reason.contains("outside the folders"), "{}: {reason}", refused.display());
        }
        assert!(store.list_connectors().await.unwrap().is_empty(), "nothing was added");

        // Inside the roots, with its own history, it is fine.
        let own = root.join("own");
        std::fs::create_dir(&own).unwrap();
        git_repository(&own, "Our own history");
        let mut input = new_folder(&own);
        input.kind = ConnectorKind::Git;
        let connector = engine.add_connector(input).await.unwrap();
        let report = engine.sync_connector(&connector.id, "system:test").await.unwrap();
        assert_eq!((report.status, report.imported), (SyncStatus::Ok, 1));
    }
}
