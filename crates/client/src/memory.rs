//! The memory API: one method per route.

use cairn_types::{
    AuditList, AuditQuery, CodingContext, CodingContextRequest, Conflict, ConflictList,
    ConflictQuery, ConflictResolution, Connector, ConnectorHealth, ConnectorList, ContextPack,
    ContextRequest, CreatedMemories, CreatedMemory, DreamReport, DreamRequest, ErasureReport,
    ErasureRequest, EvidencePack, EvidencePackRequest, GuardRequest, GuardResult, Health, Memory,
    MemoryList, MemoryListQuery, MemoryPatch, NewConnector, NewMemory, NewMemoryBatch, Outcome,
    OutcomeRequest, PatchEvidence, PatchEvidenceRequest, RemovedConnector, SearchQuery,
    SearchResult, SyncReport,
};
use http::Method;
use serde::Serialize;

use crate::{Body, Call, Client, Error, query, segment};

/// No body.
const NONE: Body<'static, ()> = Body::None;

impl Client {
    /// `POST /api/memories`: stores a memory; it starts `active`.
    pub async fn create_memory(&self, memory: &NewMemory) -> Result<CreatedMemory, Error> {
        self.call(Method::POST, "/api/memories", None, Body::Json(memory)).await
    }

    /// `POST /api/memories/batch`: stores up to 1,000 memories in one transaction, all or
    /// none; the answer lists them as stored, in `batch`'s order. A memory that breaks a
    /// rule fails the whole batch with a `VALIDATION_ERROR` naming it
    /// (`memories[3].content: …`).
    pub async fn create_memories(&self, batch: &NewMemoryBatch) -> Result<CreatedMemories, Error> {
        self.call(Method::POST, "/api/memories/batch", None, Body::Json(batch)).await
    }

    /// `POST /api/memories/import`: restores exported memories as they were (admin); ids
    /// stored already are skipped.
    pub async fn import_memories(
        &self,
        import: &crate::types::MemoryImport,
    ) -> Result<crate::types::ImportedMemories, Error> {
        self.call(Method::POST, "/api/memories/import", None, Body::Json(import)).await
    }

    /// `GET /api/memories`: a page of memories, newest first.
    pub async fn list_memories(&self, filter: &MemoryListQuery) -> Result<MemoryList, Error> {
        self.call(Method::GET, "/api/memories", Some(query(filter)?), NONE).await
    }

    /// `GET /api/memories/:id`: one memory, archived or not.
    pub async fn get_memory(&self, id: &str) -> Result<Memory, Error> {
        self.call(Method::GET, &memory_path(id), None, NONE).await
    }

    /// `PATCH /api/memories/:id`: changes content, scope, status, tags or metadata, or
    /// archives or restores (`archived`).
    pub async fn update_memory(&self, id: &str, patch: &MemoryPatch) -> Result<Memory, Error> {
        self.call(Method::PATCH, &memory_path(id), None, Body::Json(patch)).await
    }

    /// `DELETE /api/memories/:id`: archives a memory (restore it with
    /// [`restore_memory`](Client::restore_memory)).
    pub async fn archive_memory(&self, id: &str) -> Result<Memory, Error> {
        self.call(Method::DELETE, &memory_path(id), None, NONE).await
    }

    /// Restores an archived memory (`PATCH` with `archived: false`).
    pub async fn restore_memory(&self, id: &str) -> Result<Memory, Error> {
        let patch = MemoryPatch { archived: Some(false), ..MemoryPatch::default() };
        self.update_memory(id, &patch).await
    }

    /// `GET /api/search`: ranked hits with scores.
    pub async fn search(&self, search: &SearchQuery) -> Result<SearchResult, Error> {
        self.call(Method::GET, "/api/search", Some(query(search)?), NONE).await
    }

    /// `POST /api/context`: a context pack for a task within a token budget.
    pub async fn context(&self, request: &ContextRequest) -> Result<ContextPack, Error> {
        self.call(Method::POST, "/api/context", None, Body::Json(request)).await
    }

    /// `POST /api/coding-context`: context for the files a change touches.
    pub async fn coding_context(
        &self,
        request: &CodingContextRequest,
    ) -> Result<CodingContext, Error> {
        self.call(Method::POST, "/api/coding-context", None, Body::Json(request)).await
    }

    /// `POST /api/guard`: checks an action before it runs.
    pub async fn guard(&self, request: &GuardRequest) -> Result<GuardResult, Error> {
        self.call(Method::POST, "/api/guard", None, Body::Json(request)).await
    }

    /// `POST /api/outcome`: records how a command went.
    pub async fn record_outcome(&self, outcome: &OutcomeRequest) -> Result<Outcome, Error> {
        self.call(Method::POST, "/api/outcome", None, Body::Json(outcome)).await
    }

    /// `POST /api/patch-evidence`: records the evidence behind a patch.
    pub async fn record_patch_evidence(
        &self,
        evidence: &PatchEvidenceRequest,
    ) -> Result<PatchEvidence, Error> {
        self.call(Method::POST, "/api/patch-evidence", None, Body::Json(evidence)).await
    }

    /// `GET /api/evidence/:id`: patch evidence, read back.
    pub async fn get_evidence(&self, id: &str) -> Result<PatchEvidence, Error> {
        self.call(Method::GET, &format!("/api/evidence/{}", segment(id)), None, NONE).await
    }

    /// `POST /api/evidence-pack`: the evidence for a task, as JSON.
    pub async fn evidence_pack(
        &self,
        request: &EvidencePackRequest,
    ) -> Result<EvidencePack, Error> {
        self.call(Method::POST, "/api/evidence-pack", None, Body::Json(request)).await
    }

    /// `POST /api/evidence-pack` with `Accept: text/markdown`: the evidence as Markdown.
    pub async fn evidence_pack_markdown(
        &self,
        request: &EvidencePackRequest,
    ) -> Result<String, Error> {
        let path = "/api/evidence-pack";
        let call = Call { method: Method::POST, path, query: None, body: Body::Json(request) };
        let (url, bytes) = self.exchange(call, "text/markdown").await?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Error::Decode { url, message: "the Markdown is not UTF-8".into() })
    }

    /// `GET /api/governance/review`: memories awaiting a decision, newest first.
    pub async fn review_queue(
        &self,
        limit: Option<u32>,
        offset: Option<u64>,
    ) -> Result<MemoryList, Error> {
        #[derive(Serialize)]
        struct Page {
            limit: Option<u32>,
            offset: Option<u64>,
        }
        let page = query(&Page { limit, offset })?;
        self.call(Method::GET, "/api/governance/review", Some(page), NONE).await
    }

    /// `POST /api/governance/review/:id/approve`: the memory becomes `active`.
    pub async fn approve(&self, id: &str) -> Result<Memory, Error> {
        let path = format!("/api/governance/review/{}/approve", segment(id));
        self.call(Method::POST, &path, None, NONE).await
    }

    /// `POST /api/governance/review/:id/reject`: the memory is archived.
    pub async fn reject(&self, id: &str) -> Result<Memory, Error> {
        let path = format!("/api/governance/review/{}/reject", segment(id));
        self.call(Method::POST, &path, None, NONE).await
    }

    /// `GET /api/governance/audit`: the audit log, newest first.
    pub async fn audit_log(&self, filter: &AuditQuery) -> Result<AuditList, Error> {
        self.call(Method::GET, "/api/governance/audit", Some(query(filter)?), NONE).await
    }

    /// `GET /api/connectors`.
    pub async fn list_connectors(&self) -> Result<ConnectorList, Error> {
        self.call(Method::GET, "/api/connectors", None, NONE).await
    }

    /// `POST /api/connectors`: a folder or git repository to import.
    pub async fn add_connector(&self, connector: &NewConnector) -> Result<Connector, Error> {
        self.call(Method::POST, "/api/connectors", None, Body::Json(connector)).await
    }

    /// `GET /api/connectors/:id`.
    pub async fn get_connector(&self, id: &str) -> Result<Connector, Error> {
        self.call(Method::GET, &connector_path(id, ""), None, NONE).await
    }

    /// `DELETE /api/connectors/:id`: removes it; its memories are archived.
    pub async fn remove_connector(&self, id: &str) -> Result<RemovedConnector, Error> {
        self.call(Method::DELETE, &connector_path(id, ""), None, NONE).await
    }

    /// `POST /api/connectors/:id/sync`: syncs now (long for large sources: mind the
    /// client's timeout).
    pub async fn sync_connector(&self, id: &str) -> Result<SyncReport, Error> {
        self.call(Method::POST, &connector_path(id, "/sync"), None, NONE).await
    }

    /// `GET /api/connectors/:id/health`.
    pub async fn connector_health(&self, id: &str) -> Result<ConnectorHealth, Error> {
        self.call(Method::GET, &connector_path(id, "/health"), None, NONE).await
    }

    /// `POST /api/dream-cycle`: consolidates memories and surfaces conflicts.
    pub async fn dream_cycle(&self, request: &DreamRequest) -> Result<DreamReport, Error> {
        self.call(Method::POST, "/api/dream-cycle", None, Body::Json(request)).await
    }

    /// `GET /api/conflicts`.
    pub async fn list_conflicts(&self, filter: &ConflictQuery) -> Result<ConflictList, Error> {
        self.call(Method::GET, "/api/conflicts", Some(query(filter)?), NONE).await
    }

    /// `POST /api/conflicts/:id/resolve`.
    pub async fn resolve_conflict(
        &self,
        id: &str,
        resolution: &ConflictResolution,
    ) -> Result<Conflict, Error> {
        let path = format!("/api/conflicts/{}/resolve", segment(id));
        self.call(Method::POST, &path, None, Body::Json(resolution)).await
    }

    /// `POST /api/erase` (admin): deletes memories, conversations, or everything a contact
    /// or subject left, for good.
    pub async fn erase(&self, request: &ErasureRequest) -> Result<ErasureReport, Error> {
        self.call(Method::POST, "/api/erase", None, Body::Json(request)).await
    }

    /// `GET /api/health`.
    pub async fn health(&self) -> Result<Health, Error> {
        self.call(Method::GET, "/api/health", None, NONE).await
    }
}

fn memory_path(id: &str) -> String {
    format!("/api/memories/{}", segment(id))
}

fn connector_path(id: &str, rest: &str) -> String {
    format!("/api/connectors/{}{rest}", segment(id))
}
