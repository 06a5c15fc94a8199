//! The dream cycle and conflicts: consolidation of memories, and contradictions surfaced for
//! a person to settle.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{Memory, Timestamp};

/// The body of `POST /api/dream-cycle`; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DreamRequest {
    /// Report what would change, and change nothing. Default false.
    #[serde(default)]
    pub dry_run: bool,
    /// Active memories neither updated nor recalled for this many days become `stale`.
    /// Default 90; fractions are allowed (0.5 is twelve hours); above 0, at most 36,500.
    #[serde(default)]
    pub stale_after_days: Option<f64>,
    /// How alike two memories must be (Jaccard similarity of their word pairs) to merge.
    /// Default 0.8 (one word changed in twenty), from 0.5 to 1.
    #[serde(default)]
    pub similarity: Option<f64>,
}

/// What one run of the dream cycle did (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DreamReport {
    pub dry_run: bool,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// Memories looked at: every one that is not archived and no conversation or contact
    /// owns (those are never merged or weighed against others).
    pub examined: u64,
    pub merged: Vec<MergeGroup>,
    /// Memories marked `stale`.
    pub staled: Vec<String>,
    /// Conflicts found in this run; both memories of each move to `review`.
    pub conflicts: Vec<Conflict>,
}

/// Near-duplicates merged into one memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MergeGroup {
    /// The memory kept; its metadata's `mergedFrom` lists the others with their sources.
    pub kept_id: String,
    /// The memories archived into it.
    pub merged_ids: Vec<String>,
}

/// Two memories that contradict each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// `cfl_` followed by a lower-case ULID.
    pub id: String,
    pub memory_ids: Vec<String>,
    /// Both memories as they are now (a memory that no longer exists is left out).
    pub memories: Vec<Memory>,
    /// What both speak of, e.g. `package manager`.
    pub subject: String,
    pub reason: String,
    /// `open` or `resolved`.
    pub status: String,
    pub detected_at: Timestamp,
    /// How it was settled: `keep <id>`, `keepBoth` or `merge <new id>`.
    pub resolution: Option<String>,
    pub resolved_at: Option<Timestamp>,
}

/// The query of `GET /api/conflicts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ConflictQuery {
    /// `open` (the default), `resolved` or `all`.
    pub status: Option<String>,
}

/// The result of `GET /api/conflicts`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConflictList {
    pub conflicts: Vec<Conflict>,
}

/// How to settle a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ResolutionAction {
    /// Keep `memoryId` (it becomes active); archive the other.
    Keep,
    /// Both are right (in their contexts): both become active.
    KeepBoth,
    /// Replace both with one new memory of `content` (default: both texts joined).
    Merge,
}

/// The body of `POST /api/conflicts/:id/resolve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConflictResolution {
    pub action: ResolutionAction,
    /// With `keep`: which of the two memories to keep.
    #[serde(default)]
    pub memory_id: Option<String>,
    /// With `merge`: the text of the merged memory.
    #[serde(default)]
    pub content: Option<String>,
}
