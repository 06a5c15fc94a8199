//! Context packs: the memories relevant to a task, assembled within a token budget.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /api/context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextRequest {
    /// What the agent is about to do; required, non-empty.
    pub task: String,
    /// The repository the task is in: its memories rank higher, other repositories' are left out.
    #[serde(default)]
    pub repo: Option<String>,
    /// The most tokens (o200k BPE) the context may take; default 2000, from 1 to 1,000,000.
    #[serde(default)]
    pub token_budget: Option<u32>,
}

/// A context pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextPack {
    /// The memories, best first, one Markdown list item each.
    pub context: String,
    /// How many memories the context holds.
    pub memories_used: usize,
    /// The size of `context` in o200k BPE tokens; never above the budget.
    pub token_count: usize,
    /// The identifiers of the memories used, in the order they appear.
    pub memory_ids: Vec<String>,
    /// Why each memory is in the pack, in the order of `memoryIds`: `matches the task`, or
    /// `a standing rule of repository <repo>` (a rule or preference of the task's
    /// repository, included after what matches while the budget allows).
    pub reasons: Vec<String>,
}

/// The body of `POST /api/coding-context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodingContextRequest {
    pub task: String,
    /// Paths of the files the agent will touch, relative to the repository root.
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub repo: Option<String>,
    /// Default 2000, from 1 to 1,000,000.
    #[serde(default)]
    pub token_budget: Option<u32>,
}

/// The result of `POST /api/coding-context`: a context pack, plus which memories speak of each file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodingContext {
    #[serde(flatten)]
    pub pack: ContextPack,
    /// One entry per requested file, in request order.
    pub files: Vec<FileContext>,
}

/// The memories in a coding context that name a file or one of its directories.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileContext {
    pub path: String,
    pub memory_ids: Vec<String>,
}
