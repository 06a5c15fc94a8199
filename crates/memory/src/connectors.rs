//! Connectors: importing a folder's documents or a repository's history as memories, and
//! keeping them in step on every sync (new pieces imported, changed ones updated, removed
//! ones archived, nothing duplicated).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cairn_store::{ItemUpdate, SyncBatch};
use cairn_types::{
    Connector, ConnectorHealth, ConnectorKind, ConnectorList, IdPrefix, JsonObject, Memory,
    NewConnector, RemovedConnector, Scope, Status, SyncProgress, SyncReport, Timestamp, new_id,
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
        let checked = blocking(move || {
            let path = PathBuf::from(&path);
            match kind {
                ConnectorKind::Folder => sources::check_folder(&path)?,
                ConnectorKind::Git => sources::check_git(&path)?,
            }
            Ok(std::fs::canonicalize(&path).unwrap_or(path))
        })
        .await;
        let path = checked.map_err(|error: sources::SourceError| Error::Invalid {
            field: "path",
            reason: error.to_string(),
        })?;
        let last_component = path.file_name().map(|name| name.to_string_lossy().into_owned());
        let name = validate::optional_text("name", input.name, validate::MAX_NAME_BYTES)?
            .or_else(|| last_component.clone())
            .unwrap_or_else(|| path.display().to_string());
        let repo = validate::optional_text("repo", input.repo, validate::MAX_NAME_BYTES)?
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
            (Some(_), _) => "syncing",
            (None, None) => "never_synced",
            (None, Some(report)) => report.status.as_str(),
        };
        Ok(ConnectorHealth {
            id: connector.id.clone(),
            status: status.to_owned(),
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
        let removals = self.store.connector_items(id).await?;
        let archived = self.store.connector_memory_count(id).await?;
        for chunk in removals.chunks(BATCH) {
            let batch = SyncBatch { removals: chunk.to_vec(), ..SyncBatch::default() };
            self.store.apply_sync_batch(id, &batch, Timestamp::now(), actor).await?;
        }
        self.store.delete_connector(id).await?;
        Ok(RemovedConnector { id: id.to_owned(), archived_memories: archived })
    }

    /// Reads the source and brings the connector's memories in step with it. A failure to read
    /// the source is reported (and kept for the health check), not raised.
    pub async fn sync_connector(&self, id: &str, actor: &str) -> Result<SyncReport> {
        let _claim = self.syncs.claim(id)?;
        // Read after claiming: a removal that finished first leaves nothing to sync.
        let connector = self.get_connector(id).await?;
        let started_at = Timestamp::now();
        let mut report = SyncReport {
            started_at,
            finished_at: started_at,
            status: "ok".to_owned(),
            imported: 0,
            updated: 0,
            unchanged: 0,
            archived: 0,
            skipped: 0,
            error: None,
        };
        if let Err(error) = self.run_sync(&connector, actor, &mut report).await {
            match error {
                Error::Store(_) => return Err(error),
                other => {
                    report.status = "error".to_owned();
                    report.error = Some(other.to_string());
                }
            }
        }
        report.finished_at = Timestamp::now();
        self.store.record_sync(id, &report).await?;
        Ok(report)
    }

    async fn run_sync(
        &self,
        connector: &Connector,
        actor: &str,
        report: &mut SyncReport,
    ) -> Result<()> {
        let (kind, path, max_commits) =
            (connector.kind, PathBuf::from(&connector.path), connector.max_commits);
        let read = blocking(move || match kind {
            ConnectorKind::Folder => sources::read_folder_with_skips(&path),
            ConnectorKind::Git => {
                sources::read_git(&path, max_commits as usize).map(|items| (items, 0))
            }
        })
        .await;
        let (items, skipped) = read.map_err(|error| Error::Source(error.to_string()))?;
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
                Some(existing) if existing.content_hash != item.content_hash => {
                    updates.push(ItemUpdate {
                        key: item.key,
                        memory_id: existing.memory_id.clone(),
                        content: item.content,
                        content_hash: item.content_hash,
                    })
                }
                Some(_) => report.unchanged += 1,
            }
        }
        let removals: Vec<_> =
            known.into_values().filter(|item| !seen.contains(&item.key)).collect();
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
            self.store.apply_sync_batch(&connector.id, &batch, Timestamp::now(), actor).await?;
            for (memory, _, _) in &batch.inserts {
                self.entry_tokens
                    .insert(memory, tokens::count_tokens(&context::format_entry(memory)));
            }
            self.wake_embedder(batch.inserts.len() + batch.updates.len());
            report.imported += batch.inserts.len() as u64;
            report.updated += batch.updates.len() as u64;
            report.archived += batch.removals.len() as u64;
            done += (batch.inserts.len() + batch.updates.len() + batch.removals.len()) as u64;
            self.syncs.set(&connector.id, SyncProgress { done, total });
        }
        Ok(())
    }
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
