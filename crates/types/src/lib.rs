//! Cairn's domain and wire types: the shapes every layer and every client agree on.
//!
//! This crate does no I/O. Field names are the seed's (`camelCase` on the wire), and every
//! type that crosses the HTTP API derives `utoipa::ToSchema` so the OpenAPI document is
//! generated from the same definitions the code uses.

mod auth;
mod connector;
mod context;
mod dream;
mod error;
mod governance;
mod guard;
mod health;
mod id;
mod memory;
mod outcome;
pub mod runtime;
mod timestamp;

pub use auth::{
    ApiKey, ConversationToken, ConversationTokenRecord, ConversationTokenRequest, Role,
};
pub use connector::{
    Connector, ConnectorHealth, ConnectorKind, ConnectorList, ConnectorStatus, NewConnector,
    RemovedConnector, SyncProgress, SyncReport, SyncStatus,
};
pub use context::{CodingContext, CodingContextRequest, ContextPack, ContextRequest, FileContext};
pub use dream::{
    Conflict, ConflictList, ConflictQuery, ConflictResolution, ConflictSide, ConflictStatus,
    DreamReport, DreamRequest, MergeGroup, ResolutionAction,
};
pub use error::{ErrorBody, ErrorCode, ErrorEnvelope};
pub use governance::{
    AuditEntry, AuditList, AuditQuery, ContactRef, ErasureReport, ErasureRequest,
};
pub use guard::{GuardFinding, GuardRequest, GuardResult};
pub use health::Health;
pub use id::{IdPrefix, new_id};
pub use memory::{
    CreatedMemories, CreatedMemory, ImportedMemories, MAX_BATCH_MEMORIES, MAX_CONTENT_BYTES,
    Memory, MemoryImport, MemoryList, MemoryListQuery, MemoryPatch, NewMemory, NewMemoryBatch,
    RetrievalMode, Scope, SearchHit, SearchQuery, SearchResult, Status,
};
pub use outcome::{
    EvidenceFormat, EvidencePack, EvidencePackRequest, Outcome, OutcomeRequest, PatchEvidence,
    PatchEvidenceRequest,
};
pub use runtime::{
    Conversation, ConversationChannel, Lifecycle, OpenPrompt, RuntimeEvent, Snapshot,
};
pub use timestamp::Timestamp;

/// A free-form JSON object, as carried by `metadata` fields.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
