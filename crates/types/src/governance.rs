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

/// The body of `POST /api/erase`: what to delete for good. Give any of the fields; all
/// that they name is erased in one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErasureRequest {
    /// Memories, by id.
    #[serde(default)]
    pub memory_ids: Vec<String>,
    /// Conversations, by id, with their events, prompts and snapshots.
    #[serde(default)]
    pub conversation_ids: Vec<String>,
    /// Everything a contact left: the memories the runtime keeps for them and their
    /// conversations on that channel.
    #[serde(default)]
    pub contact: Option<ContactRef>,
    /// Everything that mentions a subject (e.g. an e-mail address): memories whose text and
    /// conversations whose events contain it (case folded; at least 3 characters).
    #[serde(default)]
    pub subject: Option<String>,
}

/// A contact as a channel knows them: the channel's type and their address on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContactRef {
    /// The channel's type, e.g. `sms`.
    pub channel: String,
    /// The contact's address on it (the conversation channel's `id`), e.g. `+15550100`.
    pub address: String,
}

/// What an erasure deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErasureReport {
    pub memories: Vec<String>,
    pub conversations: Vec<String>,
}
