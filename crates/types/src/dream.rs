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
    /// Conflicts found in this run; both memories of each move to `review`. In a dry run
    /// nothing is recorded: a conflict not recorded before has an id no other call knows.
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

/// Memories that contradict each other about one subject in one repository, grouped by the
/// position they take: one conflict however many memories say each thing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// `cfl_` followed by a lower-case ULID.
    pub id: String,
    /// What they speak of, e.g. `package manager`.
    pub subject: String,
    /// The repository the conflict is in; null when none of its memories has one.
    pub repo: Option<String>,
    /// Each position and the memories taking it, e.g. `pnpm` and `npm`, or `yarn` and
    /// `not yarn`; two or more.
    pub sides: Vec<ConflictSide>,
    /// Every memory of the conflict, side after side.
    pub memory_ids: Vec<String>,
    /// Those memories as they are now (a memory that no longer exists is left out).
    pub memories: Vec<Memory>,
    /// One sentence a person reads, e.g. "package manager in `shop`: pnpm (700 memories)
    /// against npm (700 memories)", or, for two memories, both quoted.
    pub reason: String,
    pub status: ConflictStatus,
    pub detected_at: Timestamp,
    /// How it was settled: `keep <id>`, `keepBoth` or `merge <new id>`.
    pub resolution: Option<String>,
    pub resolved_at: Option<Timestamp>,
}

/// One position in a conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConflictSide {
    /// What the side holds, e.g. `pnpm` or `not yarn`.
    pub label: String,
    pub memory_ids: Vec<String>,
}

/// Whether a conflict awaits a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ConflictStatus {
    Open,
    Resolved,
}

impl ConflictStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictStatus::Open => "open",
            ConflictStatus::Resolved => "resolved",
        }
    }

    /// `open` or `resolved`; `None` for anything else.
    pub fn parse(text: &str) -> Option<ConflictStatus> {
        match text {
            "open" => Some(ConflictStatus::Open),
            "resolved" => Some(ConflictStatus::Resolved),
            _ => None,
        }
    }
}

impl std::fmt::Display for ConflictStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// Keep `memoryId` and the memories on its side (they become active); archive the
    /// others.
    Keep,
    /// Every side is right (in its context): all the memories become active.
    KeepBoth,
    /// Replace them all with one new memory of `content` (for a conflict of two memories,
    /// the default is both texts joined; with more, `content` is required).
    Merge,
}

/// The body of `POST /api/conflicts/:id/resolve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConflictResolution {
    pub action: ResolutionAction,
    /// With `keep`: a memory of the side to keep.
    #[serde(default)]
    pub memory_id: Option<String>,
    /// With `merge`: the text of the merged memory.
    #[serde(default)]
    pub content: Option<String>,
}
