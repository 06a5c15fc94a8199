//! Governance: the audit log of every change to a memory.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::Timestamp;

/// One change to one memory: who, when, what, and the memory before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// `aud_` followed by a lower-case ULID.
    pub id: String,
    pub at: Timestamp,
    /// The principal: `key:<id>`, `jwt:<sub>`, `local:<address>`, or `system:<job>`.
    pub actor: String,
    /// `create`, `update`, `archive`, `restore`, `approve`, `reject`, `merge`, `stale`,
    /// `review`, `resolve`, `import`.
    pub action: String,
    pub memory_id: String,
    /// The memory before the change (absent for `create`).
    #[schema(value_type = Option<Object>)]
    pub before: Option<serde_json::Value>,
    /// The memory after the change.
    #[schema(value_type = Option<Object>)]
    pub after: Option<serde_json::Value>,
}

/// The query of `GET /api/governance/audit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only changes to this memory.
    pub memory_id: Option<String>,
    /// Only changes by this principal.
    pub actor: Option<String>,
    /// Default 50, at most 500.
    pub limit: Option<u32>,
    pub offset: Option<u64>,
}

/// A page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    pub total: u64,
    pub limit: u32,
    pub offset: u64,
}
