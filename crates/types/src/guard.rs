//! Guards: whether an action may run, with the warnings and blockers that say why not.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /api/guard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GuardRequest {
    /// The action about to run, usually a shell command or an SQL statement.
    #[schema(example = "git push --force origin main")]
    pub action: String,
    /// The repository the action runs in; memories of other repositories are not consulted.
    #[serde(default)]
    pub repo: Option<String>,
}

/// The verdict on an action. `allowed` is false exactly when there is a blocker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardResult {
    pub allowed: bool,
    pub warnings: Vec<GuardFinding>,
    pub blockers: Vec<GuardFinding>,
}

/// One reason for caution: a built-in rule, a memory, or an earlier failing outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardFinding {
    /// For example `FORCE_PUSH_PROTECTED`, `MEMORY_RULE`, `PREVIOUSLY_FAILED`.
    #[schema(example = "FORCE_PUSH_PROTECTED")]
    pub code: String,
    pub message: String,
    /// The memory the finding comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
    /// The recorded outcome the finding comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome_id: Option<String>,
}
