//! Outcomes of commands and patch evidence: what agents report after they act.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;

/// The body of `POST /api/outcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutcomeRequest {
    #[schema(example = "cargo test --workspace")]
    pub command: String,
    pub exit_code: i32,
    /// The task the command served, if any.
    #[serde(default)]
    pub task: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
}

/// A recorded outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// `out_` followed by a lower-case ULID.
    pub outcome_id: String,
    pub command: String,
    pub exit_code: i32,
    /// `exitCode == 0`.
    pub succeeded: bool,
    pub task: Option<String>,
    pub repo: Option<String>,
    pub recorded_at: Timestamp,
    /// How many failures of the same command were recorded before this one.
    pub previous_failures: u64,
}

/// The body of `POST /api/patch-evidence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchEvidenceRequest {
    pub task: String,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub commands: Vec<String>,
}

/// A patch evidence record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchEvidence {
    /// `ev_` followed by a lower-case ULID.
    pub evidence_id: String,
    pub task: String,
    pub files: Vec<String>,
    pub commands: Vec<String>,
    /// The memories that context packs for the same task served.
    pub memories_used: Vec<String>,
    pub created_at: Timestamp,
}
