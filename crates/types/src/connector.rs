//! Connectors: sources whose content is imported as memories (a folder of Markdown and text
//! files, a git repository's history), kept in step by syncs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Scope, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConnectorKind {
    /// Markdown and text files (docs, AGENTS.md, CLAUDE.md, .cursorrules…), one memory per section.
    Folder,
    /// A git repository's commits, one memory per commit, with the files it touched.
    Git,
}

impl ConnectorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorKind::Folder => "folder",
            ConnectorKind::Git => "git",
        }
    }
}

/// The body of `POST /api/connectors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewConnector {
    pub kind: ConnectorKind,
    /// An absolute path on the daemon's machine.
    pub path: String,
    /// Default: the last component of the path.
    #[serde(default)]
    pub name: Option<String>,
    /// The scope of imported memories; default `repo`.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// The repository of imported memories; default: the last component of the path.
    #[serde(default)]
    pub repo: Option<String>,
    /// Git only: how many of the newest commits to import; default 500, at most 10,000.
    #[serde(default)]
    pub max_commits: Option<u32>,
}

/// A connector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connector {
    /// `conn_` followed by a lower-case ULID.
    pub id: String,
    pub kind: ConnectorKind,
    pub name: String,
    /// The canonical absolute path.
    pub path: String,
    pub scope: Scope,
    pub repo: Option<String>,
    pub max_commits: u32,
    pub created_at: Timestamp,
    /// The last finished sync, if any.
    pub last_sync: Option<SyncReport>,
}

/// What one sync did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub status: SyncStatus,
    /// New pieces stored as memories.
    pub imported: u64,
    /// Pieces whose text changed; their memories were updated.
    pub updated: u64,
    pub unchanged: u64,
    /// Pieces gone from the source; their memories were archived.
    pub archived: u64,
    /// Files passed over (too large, not UTF-8).
    pub skipped: u64,
    pub error: Option<String>,
}

/// How a sync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyncStatus {
    /// The source was read and every change applied.
    Ok,
    /// The source could not be read, or the sync stopped part way; `error` says why. What
    /// was applied stays, and the next sync applies the rest.
    Error,
}

impl SyncStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncStatus::Ok => "ok",
            SyncStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A connector's state, as its health check reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConnectorStatus {
    /// Added and never synced.
    NeverSynced,
    /// A sync is under way (see `progress`).
    Syncing,
    /// The last sync applied every change.
    Ok,
    /// The last sync failed or stopped part way.
    Error,
}

impl ConnectorStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectorStatus::NeverSynced => "never_synced",
            ConnectorStatus::Syncing => "syncing",
            ConnectorStatus::Ok => "ok",
            ConnectorStatus::Error => "error",
        }
    }
}

impl From<SyncStatus> for ConnectorStatus {
    fn from(status: SyncStatus) -> ConnectorStatus {
        match status {
            SyncStatus::Ok => ConnectorStatus::Ok,
            SyncStatus::Error => ConnectorStatus::Error,
        }
    }
}

impl std::fmt::Display for ConnectorStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Progress of a sync under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncProgress {
    pub done: u64,
    pub total: u64,
}

/// The health of a connector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorHealth {
    pub id: String,
    pub status: ConnectorStatus,
    pub last_sync_at: Option<Timestamp>,
    pub last_sync: Option<SyncReport>,
    /// Present while a sync runs.
    pub progress: Option<SyncProgress>,
    /// How many memories the connector has imported and not archived.
    pub memories: u64,
}

/// The result of `GET /api/connectors`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorList {
    pub connectors: Vec<Connector>,
}

/// The result of `DELETE /api/connectors/:id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemovedConnector {
    pub id: String,
    /// The connector's memories, archived (restorable) rather than deleted.
    pub archived_memories: u64,
}
