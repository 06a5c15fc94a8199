//! Moving a whole store to another backend (`cairn migrate --from sqlite:… --to postgres://…`):
//! the logical tables every backend can export and import, row by row, in key order.
//!
//! Rows travel as JSON values: integers, strings and nulls as themselves, JSON columns as
//! JSON, a vector blob as a hex string. Column names are SQLite's (`rowid`, `offset`); a
//! backend maps them to its own (`pk`, `event_offset`).

use async_trait::async_trait;

use crate::Result;

/// One logical table: its columns in transfer order, and the columns of its key (rows are
/// read in key order, and a chunk continues after the last key seen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    pub key: &'static [&'static str],
}

/// Every table, parents before the tables that refer to them.
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        name: "memories",
        columns: &[
            "rowid",
            "id",
            "content",
            "scope",
            "status",
            "repo",
            "tags",
            "source",
            "metadata",
            "created_at",
            "updated_at",
            "archived_at",
        ],
        key: &["rowid"],
    },
    TableSpec {
        name: "memory_recalls",
        columns: &["memory_id", "recall_count", "last_recalled_at"],
        key: &["memory_id"],
    },
    TableSpec {
        name: "task_recalls",
        columns: &["seq", "task_key", "memory_id", "first_recalled_at"],
        key: &["seq"],
    },
    TableSpec {
        name: "outcomes",
        columns: &[
            "rowid",
            "id",
            "command",
            "exit_code",
            "task",
            "task_key",
            "repo",
            "recorded_at",
            "previous_failures",
        ],
        key: &["rowid"],
    },
    TableSpec {
        name: "evidence",
        columns: &[
            "rowid",
            "id",
            "task",
            "task_key",
            "files",
            "commands",
            "memories_used",
            "created_at",
        ],
        key: &["rowid"],
    },
    TableSpec {
        name: "api_keys",
        columns: &["id", "name", "role", "prefix", "hash", "created_at", "revoked_at"],
        key: &["id"],
    },
    TableSpec {
        name: "audit_log",
        columns: &["rowid", "id", "at", "actor", "action", "memory_id", "before", "after"],
        key: &["rowid"],
    },
    TableSpec {
        name: "connectors",
        columns: &[
            "rowid",
            "id",
            "kind",
            "name",
            "path",
            "scope",
            "repo",
            "max_commits",
            "created_at",
            "last_sync",
        ],
        key: &["rowid"],
    },
    TableSpec {
        name: "connector_items",
        columns: &["connector_id", "key", "memory_id", "content_hash"],
        key: &["connector_id", "key"],
    },
    TableSpec {
        name: "embeddings",
        columns: &["memory_rowid", "model", "version", "vector"],
        key: &["memory_rowid", "model"],
    },
    TableSpec {
        name: "conversations",
        columns: &[
            "id",
            "agent_id",
            "channel",
            "context",
            "lifecycle",
            "created_at",
            "updated_at",
            "next_offset",
            "snapshot",
        ],
        key: &["id"],
    },
    TableSpec {
        name: "runtime_events",
        columns: &["conversation_id", "offset", "id", "kind", "created_at", "data"],
        key: &["conversation_id", "offset"],
    },
    TableSpec {
        name: "runtime_prompts",
        columns: &["conversation_id", "prompt_id", "widget_kind", "input", "offset", "output"],
        key: &["conversation_id", "prompt_id"],
    },
    TableSpec {
        name: "runtime_idempotency",
        columns: &[
            "key",
            "conversation_id",
            "first_offset",
            "end_offset",
            "created_at",
            "fingerprint",
        ],
        key: &["key"],
    },
    TableSpec {
        name: "conversation_tokens",
        columns: &["id", "conversation_id", "hash", "created_at", "expires_at", "revoked_at"],
        key: &["id"],
    },
    TableSpec {
        name: "conflict_sets",
        columns: &[
            "rowid",
            "id",
            "subject",
            "repo",
            "reason",
            "status",
            "detected_at",
            "resolution",
            "resolved_at",
        ],
        key: &["rowid"],
    },
    TableSpec {
        name: "conflict_members",
        columns: &["conflict_id", "memory_id", "side", "label"],
        key: &["conflict_id", "memory_id"],
    },
    TableSpec {
        name: "voice_segments",
        columns: &[
            "id",
            "conversation_id",
            "channel",
            "started_at",
            "ended_at",
            "connection_id",
            "adapter",
            "status",
            "provider",
            "provider_session_id",
            "expires_at",
            "token_hash",
            "token_used_at",
            "app",
            "client",
        ],
        key: &["id"],
    },
];

/// The table called `name`.
pub fn table(name: &str) -> Option<&'static TableSpec> {
    TABLES.iter().find(|table| table.name == name)
}

impl TableSpec {
    /// The key of `row` (a row of this table, with its [`TableSpec::columns`]), where the
    /// next chunk after it starts; `None` when the row lacks a key column.
    pub fn key_of(&self, row: &[serde_json::Value]) -> Option<Vec<serde_json::Value>> {
        self.key
            .iter()
            .map(|key| {
                let at = self.columns.iter().position(|column| column == key)?;
                row.get(at).cloned()
            })
            .collect()
    }
}

/// Copies `table` from `export` into the empty store `to`, `chunk` rows at a time (one
/// import transaction each); `copied` hears how many rows each chunk moved.
pub async fn copy_table(
    export: &mut dyn Export,
    to: &dyn Transfer,
    table: &TableSpec,
    chunk: u32,
    copied: &mut (dyn FnMut(usize) + Send),
) -> Result<()> {
    let mut after: Option<Vec<serde_json::Value>> = None;
    loop {
        let rows = export.rows(table.name, after.as_deref(), chunk).await?;
        let Some(last) = rows.last() else { return Ok(()) };
        to.import_rows(table.name, &rows).await?;
        copied(rows.len());
        if rows.len() < chunk as usize {
            return Ok(());
        }
        let key = table.key_of(last).ok_or_else(|| {
            crate::StoreError::Backend(
                format!("table {}: a row without its key", table.name).into(),
            )
        })?;
        after = Some(key);
    }
}

/// A store that can be copied out of and into.
#[async_trait]
pub trait Transfer: Send + Sync {
    /// A consistent read of the whole store: every table as of one moment, until dropped.
    async fn export(&self) -> Result<Box<dyn Export>>;

    /// Whether the store holds nothing a transfer would overwrite or mix with.
    async fn is_empty(&self) -> Result<bool>;

    /// Inserts rows (as an [`Export`] gives them, columns of [`TableSpec::columns`]) into an
    /// empty store, in one transaction.
    async fn import_rows(&self, table: &str, rows: &[Vec<serde_json::Value>]) -> Result<()>;

    /// After the last table: identities moved past the imported keys, derived data (the
    /// full-text index, counts) rebuilt, statistics refreshed.
    async fn finish_import(&self) -> Result<()>;
}

/// One consistent read of a store; see [`Transfer::export`].
#[async_trait]
pub trait Export: Send {
    /// Up to `limit` rows of `table` after key `after` (from the start when `None`), in key
    /// order, each with the columns of [`TableSpec::columns`].
    async fn rows(
        &mut self,
        table: &str,
        after: Option<&[serde_json::Value]>,
        limit: u32,
    ) -> Result<Vec<Vec<serde_json::Value>>>;
}
