//! Memories: text with a scope and a status, and the requests that create, change and find them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{JsonObject, Timestamp};

/// The largest `content` accepted, in bytes of UTF-8.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// Where a memory applies. Narrower scopes rank higher: task > repo > user > global.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Repo,
    User,
    Global,
    Task,
}

/// Whether a memory is trusted: `active`, `stale` (not confirmed for a long time) or `review`
/// (awaiting a person's decision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    Stale,
    Review,
}

macro_rules! string_enum {
    ($ty:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),+ }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $($text => Ok($ty::$variant),)+
                    _ => Err(format!("unknown {} `{text}`", stringify!($ty).to_lowercase())),
                }
            }
        }
    };
}

string_enum!(Scope { Repo => "repo", User => "user", Global => "global", Task => "task" });
string_enum!(Status { Active => "active", Stale => "stale", Review => "review" });

/// A stored memory, as lists, reads and updates return it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// `mem_` followed by a lower-case ULID.
    #[schema(example = "mem_01jd5z8k3v6q2w9x7y4t1r0p8n")]
    pub id: String,
    #[schema(example = "This repo uses pnpm, never npm.")]
    pub content: String,
    pub scope: Scope,
    pub status: Status,
    /// The repository the memory belongs to, when it belongs to one.
    pub repo: Option<String>,
    pub tags: Vec<String>,
    /// Where the memory came from (a tool, a file, a connector).
    pub source: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: JsonObject,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When a context pack last used this memory; `null` until then.
    pub last_recalled_at: Option<Timestamp>,
    /// How many context packs have used this memory.
    pub recall_count: u64,
    /// Set when the memory is archived (DELETE); archived memories leave lists and retrieval.
    pub archived_at: Option<Timestamp>,
}

/// The create response: a memory as just stored, without `lastRecalledAt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedMemory {
    #[schema(example = "mem_01jd5z8k3v6q2w9x7y4t1r0p8n")]
    pub id: String,
    pub content: String,
    pub scope: Scope,
    pub status: Status,
    pub repo: Option<String>,
    pub tags: Vec<String>,
    pub source: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: JsonObject,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<Memory> for CreatedMemory {
    fn from(memory: Memory) -> CreatedMemory {
        CreatedMemory {
            id: memory.id,
            content: memory.content,
            scope: memory.scope,
            status: memory.status,
            repo: memory.repo,
            tags: memory.tags,
            source: memory.source,
            metadata: memory.metadata,
            created_at: memory.created_at,
            updated_at: memory.updated_at,
        }
    }
}

/// The body of `POST /api/memories`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMemory {
    /// Non-empty, at most 64 KiB.
    pub content: String,
    pub scope: Scope,
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: JsonObject,
}

/// The most memories one `POST /api/memories/batch` may create.
pub const MAX_BATCH_MEMORIES: usize = 1000;

/// The body of `POST /api/memories/batch`: up to 1,000 memories ([`MAX_BATCH_MEMORIES`]),
/// stored all together or not at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMemoryBatch {
    /// At least one and at most 1,000 memories, each as `POST /api/memories` takes it.
    pub memories: Vec<NewMemory>,
}

/// The body of `POST /api/memories/import`: up to 1,000 memories as `GET /api/memories`
/// shows them (`cairn memories export` writes them), restored as they were: ids, statuses,
/// times, archived ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryImport {
    pub memories: Vec<Memory>,
}

/// The answer of `POST /api/memories/import`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportedMemories {
    /// The ids stored.
    pub imported: Vec<String>,
    /// The ids already stored here, left as they are (an import may run again).
    pub skipped: Vec<String>,
}

/// The answer of `POST /api/memories/batch`: the memories as stored, in the request's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedMemories {
    pub memories: Vec<CreatedMemory>,
}

/// The body of `PATCH /api/memories/:id`: every field is optional; at least one is required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryPatch {
    pub content: Option<String>,
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    pub tags: Option<Vec<String>>,
    /// Replaces the whole metadata object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<JsonObject>,
    /// `true` archives the memory, `false` restores it.
    pub archived: Option<bool>,
}

impl MemoryPatch {
    pub fn is_empty(&self) -> bool {
        *self == MemoryPatch::default()
    }
}

/// The query of `GET /api/memories`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MemoryListQuery {
    pub scope: Option<Scope>,
    pub status: Option<Status>,
    /// Only memories of this repository.
    pub repo: Option<String>,
    /// Page size; default 50, at most 500 (larger values are clamped).
    pub limit: Option<u32>,
    /// How many matching memories to skip; default 0.
    pub offset: Option<u64>,
    /// Include archived memories; default false.
    pub include_archived: Option<bool>,
}

/// The result of `GET /api/memories`: newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryList {
    pub memories: Vec<Memory>,
    /// How many memories match the filters, over all pages.
    pub total: u64,
    /// The page size applied.
    pub limit: u32,
    /// The offset applied.
    pub offset: u64,
}

/// The query of `GET /api/search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// The words to look for; required.
    pub q: Option<String>,
    pub scope: Option<Scope>,
    /// This repository's memories, ranked first, and those of no repository; never another
    /// repository's (the rule context packs and guards follow too).
    pub repo: Option<String>,
    pub status: Option<Status>,
    /// How many hits; default 20, at most 100.
    pub limit: Option<u32>,
    /// `hybrid` (the default when an embedder is configured), `fulltext` or `semantic`.
    pub mode: Option<RetrievalMode>,
}

/// How memories are found: by their words, by their meaning, or both fused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    Fulltext,
    Semantic,
    Hybrid,
}

impl RetrievalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Fulltext => "fulltext",
            RetrievalMode::Semantic => "semantic",
            RetrievalMode::Hybrid => "hybrid",
        }
    }
}

/// One ranked search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub memory: Memory,
    /// Higher is better; comparable within one result only.
    pub score: f64,
}

/// The result of `GET /api/search`, best hit first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub query: String,
    pub hits: Vec<SearchHit>,
}
