//! One function per operation. The `#[utoipa::path]` attributes are the OpenAPI document's
//! source: they sit on the code that answers, so the two cannot drift apart unnoticed.

use cairn_memory::Engine;
use cairn_types::{
    AuditList, AuditQuery, CodingContext, CodingContextRequest, Conflict, ConflictList,
    ConflictQuery, ConflictResolution, Connector, ConnectorHealth, ConnectorList, ContextPack,
    ContextRequest, ConversationToken, ConversationTokenRequest, CreatedMemories, CreatedMemory,
    DreamReport, DreamRequest, ErasureReport, ErasureRequest, ErrorCode, ErrorEnvelope,
    EvidenceFormat, EvidencePack, EvidencePackRequest, GuardRequest, GuardResult, Health,
    MAX_BATCH_MEMORIES, Memory, MemoryList, MemoryListQuery, MemoryPatch, NewConnector, NewMemory,
    NewMemoryBatch, Outcome, OutcomeRequest, PatchEvidence, PatchEvidenceRequest, RemovedConnector,
    SearchQuery, SearchResult, SyncReport,
};
use http::{Request, Response, StatusCode};
use serde::de::DeserializeOwned;

use cairn_http::{
    ApiError, ResponseBody, bytes_response, json_response, parse_json, parse_query, read_body,
};

use crate::error::Failure;
use crate::limits::RateClass;
use crate::routes::Operation;
use crate::{Inner, Principal};

pub(crate) type Reply = Result<Response<ResponseBody>, Failure>;

pub(crate) async fn dispatch<B>(
    inner: &Inner,
    operation: Operation,
    id: Option<&str>,
    principal: &Principal,
    request: Request<B>,
) -> Reply
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let engine = &inner.engine;
    let id = id.unwrap_or_default();
    let actor = principal.id.as_str();
    let (parts, body) = request.into_parts();
    let query = query_of(operation, &parts.uri)?;
    // Reads and parses the body; only operations that take one call it.
    let input = async |body: B| -> Result<_, ApiError> {
        read_body(&parts.headers, body, inner.config.max_body_bytes).await
    };
    match operation {
        Operation::ListMemories => list_memories(engine, parse_query(query)?).await,
        Operation::CreateMemory => create_memory(engine, actor, json(input(body).await?)?).await,
        Operation::CreateMemories => {
            let batch: NewMemoryBatch = read_bulk(inner, principal, &parts.headers, body).await?;
            check_batch_size(batch.memories.len())?;
            spend_bulk_rest(inner, principal, batch.memories.len(), &parts.headers)?;
            create_memories(engine, actor, batch).await
        }
        Operation::ImportMemories => {
            let import: cairn_types::MemoryImport =
                read_bulk(inner, principal, &parts.headers, body).await?;
            check_batch_size(import.memories.len())?;
            spend_bulk_rest(inner, principal, import.memories.len(), &parts.headers)?;
            import_memories(engine, actor, import).await
        }
        Operation::GetMemory => get_memory(engine, id).await,
        Operation::UpdateMemory => {
            update_memory(engine, actor, id, json(input(body).await?)?).await
        }
        Operation::ArchiveMemory => archive_memory(engine, actor, id).await,
        Operation::Search => search(engine, parse_query(query)?).await,
        Operation::Context => context(engine, json(input(body).await?)?).await,
        Operation::CodingContext => coding_context(engine, json(input(body).await?)?).await,
        Operation::Guard => guard(engine, json(input(body).await?)?).await,
        Operation::Outcome => outcome(engine, json(input(body).await?)?).await,
        Operation::PatchEvidence => patch_evidence(engine, json(input(body).await?)?).await,
        Operation::GetEvidence => get_evidence(engine, id).await,
        Operation::EvidencePack => {
            let markdown_accepted = parts
                .headers
                .get(http::header::ACCEPT)
                .and_then(|accept| accept.to_str().ok())
                .is_some_and(|accept| accept.contains("text/markdown"));
            evidence_pack(engine, json(input(body).await?)?, markdown_accepted).await
        }
        Operation::ReviewQueue => review_queue(engine, parse_query(query)?).await,
        Operation::Approve => approve(engine, actor, id).await,
        Operation::Reject => reject(engine, actor, id).await,
        Operation::AuditLog => audit_log(engine, parse_query(query)?).await,
        Operation::ListConnectors => list_connectors(engine).await,
        Operation::AddConnector => add_connector(engine, json(input(body).await?)?).await,
        Operation::GetConnector => get_connector(engine, id).await,
        Operation::RemoveConnector => remove_connector(engine, actor, id).await,
        Operation::SyncConnector => sync_connector(engine, actor, id).await,
        Operation::ConnectorHealth => connector_health(engine, id).await,
        Operation::DreamCycle => {
            let bytes = input(body).await?;
            // An empty body runs with the defaults.
            let request = if bytes.iter().all(u8::is_ascii_whitespace) {
                DreamRequest::default()
            } else {
                json(bytes)?
            };
            dream_cycle(engine, actor, request).await
        }
        Operation::ListConflicts => list_conflicts(engine, parse_query(query)?).await,
        Operation::ResolveConflict => {
            resolve_conflict(engine, actor, id, json(input(body).await?)?).await
        }
        Operation::Erase => erase(engine, actor, json(input(body).await?)?).await,
        Operation::CreateConversationToken => {
            create_conversation_token(engine, json(input(body).await?)?).await
        }
        Operation::RevokeConversationToken => revoke_conversation_token(engine, id).await,
        Operation::Health => health(inner).await,
        Operation::OpenApi => {
            Ok(bytes_response(StatusCode::OK, "application/json", inner.config.openapi.clone()))
        }
    }
}

/// `GET /api/health`, the most frequent request, apart from [`dispatch`]: its future is as
/// large as the largest operation's, and hyper moves a request's future into place for
/// every request.
pub(crate) async fn dispatch_health(inner: &Inner, uri: &http::Uri) -> Reply {
    query_of(Operation::Health, uri)?;
    health(inner).await
}

/// [`dispatch_health`] with the memory count at hand.
pub(crate) fn dispatch_health_counted(inner: &Inner, uri: &http::Uri, memory_count: u64) -> Reply {
    query_of(Operation::Health, uri)?;
    Ok(health_answer(inner, memory_count))
}

/// The request's query string, refused for operations that take none.
fn query_of(operation: Operation, uri: &http::Uri) -> Result<Option<&str>, ApiError> {
    let query = uri.query().filter(|query| !query.is_empty());
    let takes_query = matches!(
        operation,
        Operation::ListMemories
            | Operation::Search
            | Operation::ReviewQueue
            | Operation::AuditLog
            | Operation::ListConflicts
    );
    match (query, takes_query) {
        (Some(query), false) => Err(ApiError::validation(format!(
            "query: this operation takes no query parameters, got `{query}`"
        ))),
        _ => Ok(query),
    }
}

fn json<T: DeserializeOwned>(body: bytes::Bytes) -> Result<T, ApiError> {
    parse_json(&body)
}

/// Lists memories, newest first.
#[utoipa::path(get, path = "/api/memories", tag = "memories", params(MemoryListQuery),
    responses(
        (status = 200, description = "A page of memories", body = MemoryList),
        (status = 422, description = "A filter is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn list_memories(engine: &Engine, query: MemoryListQuery) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.list_memories(query).await?))
}

/// Stores a memory; it starts `active`.
#[utoipa::path(post, path = "/api/memories", tag = "memories", request_body = NewMemory,
    responses(
        (status = 201, description = "The memory as stored", body = CreatedMemory),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The body is not a valid memory", body = ErrorEnvelope),
    ))]
pub(crate) async fn create_memory(engine: &Engine, actor: &str, input: NewMemory) -> Reply {
    let memory = engine.create_memory(input, actor).await?;
    Ok(json_response(StatusCode::CREATED, &CreatedMemory::from(memory)))
}

/// Stores up to 1,000 memories in one transaction: all of them, or, when one breaks a rule,
/// none (the error names it as `memories[index].field`). They start `active`. A batch spends
/// one `write` request, and one unit of the `bulk` budget per 100 memories, rounded up.
#[utoipa::path(post, path = "/api/memories/batch", tag = "memories", request_body = NewMemoryBatch,
    responses(
        (status = 201, description = "The memories as stored, in the request's order", body = CreatedMemories),
        (status = 413, description = "The body is over 16 MiB", body = ErrorEnvelope),
        (status = 422, description = "The body is not a valid batch, or one of its memories is not valid \
            (`memories[3].content: must not be empty`); nothing was stored", body = ErrorEnvelope),
    ))]
pub(crate) async fn create_memories(engine: &Engine, actor: &str, batch: NewMemoryBatch) -> Reply {
    let memories = engine.create_memories(batch.memories, actor).await?;
    let created =
        CreatedMemories { memories: memories.into_iter().map(CreatedMemory::from).collect() };
    Ok(json_response(StatusCode::CREATED, &created))
}

/// Restores exported memories (`cairn memories export`) as they were: ids, statuses, times,
/// archived ones. Up to 1,000 a request, all or none; ids stored here already are skipped,
/// so an import may run again. Recall counts start anew. Spends as a batch does.
#[utoipa::path(post, path = "/api/memories/import", tag = "memories", request_body = cairn_types::MemoryImport,
    responses(
        (status = 201, description = "What was stored and what was there already", body = cairn_types::ImportedMemories),
        (status = 413, description = "The body is over 16 MiB", body = ErrorEnvelope),
        (status = 422, description = "A memory is not valid (`memories[3].id: …`); nothing was stored", body = ErrorEnvelope),
    ))]
pub(crate) async fn import_memories(
    engine: &Engine,
    actor: &str,
    import: cairn_types::MemoryImport,
) -> Reply {
    let imported = engine.import_memories(import.memories, actor).await?;
    Ok(json_response(StatusCode::CREATED, &imported))
}

// A batch's or an import's memories spend the `bulk` budget, one unit per
// `MEMORIES_PER_WRITE_REQUEST` (the request itself spent a `write` when it arrived, so an
// import leaves the agent's writes alone). What its declared size implies is spent before
// its body is read, so a caller over its limit cannot have large bodies read and parsed;
// the rest once its memories are counted.

/// Spends what a bulk body's declared `Content-Length` implies, then reads and parses it.
async fn read_bulk<B, T>(
    inner: &Inner,
    principal: &Principal,
    headers: &http::HeaderMap,
    body: B,
) -> Result<T, ApiError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T: DeserializeOwned,
{
    spend_bulk(inner, principal, bulk_units_for_bytes(declared_length(headers)))?;
    json(read_body(headers, body, crate::MAX_BATCH_BODY_BYTES).await?)
}

/// Spends the rest of what `memories` cost beyond what [`read_bulk`] spent.
fn spend_bulk_rest(
    inner: &Inner,
    principal: &Principal,
    memories: usize,
    headers: &http::HeaderMap,
) -> Result<(), ApiError> {
    let owed = memories.div_ceil(crate::MEMORIES_PER_WRITE_REQUEST);
    let spent = bulk_units_for_bytes(declared_length(headers));
    spend_bulk(inner, principal, owed.saturating_sub(spent))
}

fn spend_bulk(inner: &Inner, principal: &Principal, units: usize) -> Result<(), ApiError> {
    match std::num::NonZeroU32::new(units as u32) {
        Some(units) => inner.limiter.check_n(RateClass::Bulk, &principal.id, units).map(drop),
        None => Ok(()),
    }
}

fn declared_length(headers: &http::HeaderMap) -> u64 {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .unwrap_or(0)
}

/// The bulk units a body of `bytes` spends before it is read: one per the bytes of
/// `MEMORIES_PER_WRITE_REQUEST` memories of the largest batch's average size, at least one
/// and at most what the largest batch spends.
fn bulk_units_for_bytes(bytes: u64) -> usize {
    let most = MAX_BATCH_MEMORIES.div_ceil(crate::MEMORIES_PER_WRITE_REQUEST);
    let bytes_per_unit = (crate::MAX_BATCH_BODY_BYTES / most) as u64;
    (bytes.div_ceil(bytes_per_unit) as usize).clamp(1, most)
}

fn check_batch_size(items: usize) -> Result<(), ApiError> {
    if items == 0 {
        return Err(ApiError::validation("memories: at least one memory is required"));
    }
    if items > MAX_BATCH_MEMORIES {
        return Err(ApiError::validation(format!(
            "memories: {items} memories; the limit is {MAX_BATCH_MEMORIES} a batch"
        )));
    }
    Ok(())
}

/// Reads one memory, archived or not.
#[utoipa::path(get, path = "/api/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "A memory id (`mem_…`)")),
    responses(
        (status = 200, description = "The memory", body = Memory),
        (status = 404, description = "No such memory (`MEMORY_NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn get_memory(engine: &Engine, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.get_memory(id).await?))
}

/// Changes a memory's content, scope, status, tags or metadata, or archives or restores it.
#[utoipa::path(patch, path = "/api/memories/{id}", tag = "memories", request_body = MemoryPatch,
    params(("id" = String, Path, description = "A memory id (`mem_…`)")),
    responses(
        (status = 200, description = "The memory after the change", body = Memory),
        (status = 404, description = "No such memory (`MEMORY_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The change is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn update_memory(
    engine: &Engine,
    actor: &str,
    id: &str,
    patch: MemoryPatch,
) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.update_memory(id, patch, actor).await?))
}

/// Archives a memory: it leaves lists, retrieval and guards; PATCH `{"archived": false}` restores it.
#[utoipa::path(delete, path = "/api/memories/{id}", tag = "memories",
    params(("id" = String, Path, description = "A memory id (`mem_…`)")),
    responses(
        (status = 200, description = "The archived memory", body = Memory),
        (status = 404, description = "No such memory (`MEMORY_NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn archive_memory(engine: &Engine, actor: &str, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.archive_memory(id, actor).await?))
}

/// Ranked full-text search over memories that are not archived.
#[utoipa::path(get, path = "/api/search", tag = "retrieval", params(SearchQuery),
    responses(
        (status = 200, description = "Hits, best first", body = SearchResult),
        (status = 422, description = "`q` is missing or a filter is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn search(engine: &Engine, query: SearchQuery) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.search(query).await?))
}

/// A context pack: the memories relevant to a task within a token budget.
#[utoipa::path(post, path = "/api/context", tag = "retrieval", request_body = ContextRequest,
    responses(
        (status = 200, description = "The context pack", body = ContextPack),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn context(engine: &Engine, request: ContextRequest) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.context(request).await?))
}

/// A context pack for a coding task, weighing memories that name the files it touches.
#[utoipa::path(post, path = "/api/coding-context", tag = "retrieval", request_body = CodingContextRequest,
    responses(
        (status = 200, description = "The coding context", body = CodingContext),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn coding_context(engine: &Engine, request: CodingContextRequest) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.coding_context(request).await?))
}

/// Checks an action against built-in rules, rules learned from memories, and earlier failures.
#[utoipa::path(post, path = "/api/guard", tag = "guards", request_body = GuardRequest,
    responses(
        (status = 200, description = "The verdict", body = GuardResult),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn guard(engine: &Engine, request: GuardRequest) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.guard(request).await?))
}

/// Records how a command ended; failures feed the guards.
#[utoipa::path(post, path = "/api/outcome", tag = "evidence", request_body = OutcomeRequest,
    responses(
        (status = 201, description = "The recorded outcome", body = Outcome),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn outcome(engine: &Engine, request: OutcomeRequest) -> Reply {
    Ok(json_response(StatusCode::CREATED, &engine.record_outcome(request).await?))
}

/// Records the evidence for a patch, with the memories context packs served for its task.
#[utoipa::path(post, path = "/api/patch-evidence", tag = "evidence", request_body = PatchEvidenceRequest,
    responses(
        (status = 201, description = "The evidence record", body = PatchEvidence),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn patch_evidence(engine: &Engine, request: PatchEvidenceRequest) -> Reply {
    Ok(json_response(StatusCode::CREATED, &engine.record_patch_evidence(request).await?))
}

/// Reads a patch evidence record back.
#[utoipa::path(get, path = "/api/evidence/{id}", tag = "evidence",
    params(("id" = String, Path, description = "An evidence id (`ev_…`)")),
    responses(
        (status = 200, description = "The evidence record", body = PatchEvidence),
        (status = 404, description = "No such record (`EVIDENCE_NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn get_evidence(engine: &Engine, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.get_evidence(id).await?))
}

/// Gathers a task's patch evidence, the memories it used and its outcomes into one
/// document, as JSON or (with `format: markdown` or `Accept: text/markdown`) Markdown.
#[utoipa::path(post, path = "/api/evidence-pack", tag = "evidence", request_body = EvidencePackRequest,
    responses(
        (status = 200, description = "The evidence pack", content(
            (EvidencePack = "application/json"),
            (String = "text/markdown"),
        )),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn evidence_pack(
    engine: &Engine,
    request: EvidencePackRequest,
    markdown_accepted: bool,
) -> Reply {
    let pack = engine.evidence_pack(request.task).await?;
    let markdown = match request.format {
        Some(format) => format == EvidenceFormat::Markdown,
        None => markdown_accepted,
    };
    if markdown {
        let body = bytes::Bytes::from(pack.to_markdown());
        return Ok(bytes_response(StatusCode::OK, "text/markdown; charset=utf-8", body));
    }
    Ok(json_response(StatusCode::OK, &pack))
}

/// Memories awaiting a decision (`status: review`), newest first.
#[utoipa::path(get, path = "/api/governance/review", tag = "governance", params(PageQuery),
    responses(
        (status = 200, description = "The review queue", body = MemoryList),
        (status = 422, description = "A parameter is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn review_queue(engine: &Engine, page: PageQuery) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.review_queue(page.limit, page.offset).await?))
}

/// Approves a memory in review: it becomes `active`.
#[utoipa::path(post, path = "/api/governance/review/{id}/approve", tag = "governance",
    params(("id" = String, Path, description = "A memory id (`mem_…`)")),
    responses(
        (status = 200, description = "The approved memory", body = Memory),
        (status = 404, description = "No such memory (`MEMORY_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 409, description = "The memory is not in review (`CONFLICT`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn approve(engine: &Engine, actor: &str, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.approve(id, actor).await?))
}

/// Rejects a memory in review: it is archived, and can be restored with PATCH.
#[utoipa::path(post, path = "/api/governance/review/{id}/reject", tag = "governance",
    params(("id" = String, Path, description = "A memory id (`mem_…`)")),
    responses(
        (status = 200, description = "The rejected (archived) memory", body = Memory),
        (status = 404, description = "No such memory (`MEMORY_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 409, description = "The memory is not in review (`CONFLICT`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn reject(engine: &Engine, actor: &str, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.reject(id, actor).await?))
}

/// The audit log of every change to a memory, newest first.
#[utoipa::path(get, path = "/api/governance/audit", tag = "governance", params(AuditQuery),
    responses(
        (status = 200, description = "A page of the audit log", body = AuditList),
        (status = 422, description = "A parameter is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn audit_log(engine: &Engine, query: AuditQuery) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.audit_log(query).await?))
}

/// Lists connectors, oldest first.
#[utoipa::path(get, path = "/api/connectors", tag = "connectors",
    responses((status = 200, description = "Every connector", body = ConnectorList)))]
pub(crate) async fn list_connectors(engine: &Engine) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.list_connectors().await?))
}

/// Adds a connector: a folder of Markdown and text files, or a git repository. The path is
/// checked now, symbolic links resolved, and must lie under the daemon's connector roots
/// (`--connector-root`, default its owner's home directory); nothing is imported until the
/// first sync.
#[utoipa::path(post, path = "/api/connectors", tag = "connectors", request_body = NewConnector,
    responses(
        (status = 201, description = "The connector", body = Connector),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "Unknown kind, a path that does not exist or lies outside the connector roots, a folder that is not a git repository…", body = ErrorEnvelope),
    ))]
pub(crate) async fn add_connector(engine: &Engine, input: NewConnector) -> Reply {
    Ok(json_response(StatusCode::CREATED, &engine.add_connector(input).await?))
}

/// Reads one connector.
#[utoipa::path(get, path = "/api/connectors/{id}", tag = "connectors",
    params(("id" = String, Path, description = "A connector id (`conn_…`)")),
    responses(
        (status = 200, description = "The connector", body = Connector),
        (status = 404, description = "No such connector (`CONNECTOR_NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn get_connector(engine: &Engine, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.get_connector(id).await?))
}

/// Removes a connector; its memories are archived, not deleted.
#[utoipa::path(delete, path = "/api/connectors/{id}", tag = "connectors",
    params(("id" = String, Path, description = "A connector id (`conn_…`)")),
    responses(
        (status = 200, description = "The connector is gone", body = RemovedConnector),
        (status = 404, description = "No such connector (`CONNECTOR_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 409, description = "A sync is running (`CONFLICT`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn remove_connector(engine: &Engine, actor: &str, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.remove_connector(id, actor).await?))
}

/// Syncs a connector: imports new pieces, updates changed ones, archives removed ones. A
/// source that cannot be read gives a report with `status: error`, also kept for the health check.
/// A sync that storage stops part way keeps what it applied (the health check says so) and
/// the next sync applies the rest, never importing a piece twice.
#[utoipa::path(post, path = "/api/connectors/{id}/sync", tag = "connectors",
    params(("id" = String, Path, description = "A connector id (`conn_…`)")),
    responses(
        (status = 200, description = "What the sync did", body = SyncReport),
        (status = 404, description = "No such connector (`CONNECTOR_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 409, description = "A sync is running already (`CONFLICT`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn sync_connector(engine: &Engine, actor: &str, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.sync_connector(id, actor).await?))
}

/// A connector's health: its last sync, its counts and error, and progress while it syncs.
#[utoipa::path(get, path = "/api/connectors/{id}/health", tag = "connectors",
    params(("id" = String, Path, description = "A connector id (`conn_…`)")),
    responses(
        (status = 200, description = "The connector's health", body = ConnectorHealth),
        (status = 404, description = "No such connector (`CONNECTOR_NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn connector_health(engine: &Engine, id: &str) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.connector_health(id).await?))
}

/// Runs the dream cycle: merges near-duplicates (keeping provenance in `mergedFrom`), marks
/// memories stale that were neither recalled nor changed for `staleAfterDays`, and moves
/// contradicting memories to `review` as conflicts. `dryRun` reports without changing anything.
#[utoipa::path(post, path = "/api/dream-cycle", tag = "dream", request_body(content = DreamRequest, description = "Optional; an empty body takes the defaults"),
    responses(
        (status = 200, description = "What the cycle did, or would do", body = DreamReport),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn dream_cycle(engine: &Engine, actor: &str, request: DreamRequest) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.dream(request, actor).await?))
}

/// Detected conflicts, with both memories and the reason, newest first.
#[utoipa::path(get, path = "/api/conflicts", tag = "dream", params(ConflictQuery),
    responses(
        (status = 200, description = "Conflicts", body = ConflictList),
        (status = 422, description = "`status` is not open, resolved or all", body = ErrorEnvelope),
    ))]
pub(crate) async fn list_conflicts(engine: &Engine, query: ConflictQuery) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.list_conflicts(query.status).await?))
}

/// Settles a conflict: `keep` one memory (the other is archived), `keepBoth` (both become
/// active), or `merge` them into a new memory (both are archived).
#[utoipa::path(post, path = "/api/conflicts/{id}/resolve", tag = "dream", request_body = ConflictResolution,
    params(("id" = String, Path, description = "A conflict id (`cfl_…`)")),
    responses(
        (status = 200, description = "The resolved conflict", body = Conflict),
        (status = 404, description = "No such conflict (`CONFLICT_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 409, description = "The conflict is resolved already (`CONFLICT`)", body = ErrorEnvelope),
        (status = 422, description = "The resolution is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn resolve_conflict(
    engine: &Engine,
    actor: &str,
    id: &str,
    resolution: ConflictResolution,
) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.resolve_conflict(id, resolution, actor).await?))
}

/// A page of a list.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PageQuery {
    /// Default 50, at most 500.
    limit: Option<u32>,
    offset: Option<u64>,
}

/// Deletes for good: memories, conversations, or everything a contact or a subject left.
/// Memories go with their full-text entries, vectors and the content of their audit
/// entries (the audit keeps that each was erased, by whom and when); conversations with
/// their events, prompts and snapshots.
#[utoipa::path(post, path = "/api/erase", tag = "governance", request_body = ErasureRequest,
    responses(
        (status = 200, description = "What was erased", body = ErasureReport),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn erase(engine: &Engine, actor: &str, request: ErasureRequest) -> Reply {
    Ok(json_response(StatusCode::OK, &engine.erase(request, actor).await?))
}

/// Opens one conversation to a browser: a short-lived token (`cvt_…`, shown once) that
/// allows that conversation's runtime operations and its event stream, and nothing else.
/// The server side of a chat widget asks for it after creating the conversation, with a
/// `runtime` API key (which may call this too) or a `write` one; a conversation token cannot.
#[utoipa::path(post, path = "/api/conversation-tokens", tag = "governance",
    request_body = ConversationTokenRequest,
    responses(
        (status = 201, description = "The token, shown this once", body = ConversationToken),
        (status = 404, description = "No such conversation (`CONVERSATION_NOT_FOUND`)", body = ErrorEnvelope),
        (status = 413, description = "The body is over the size limit", body = ErrorEnvelope),
        (status = 422, description = "The request is not valid", body = ErrorEnvelope),
    ))]
pub(crate) async fn create_conversation_token(
    engine: &Engine,
    request: ConversationTokenRequest,
) -> Reply {
    let ttl = request.ttl_seconds.unwrap_or(3600);
    if !(1..=86_400).contains(&ttl) {
        return Err(ApiError::validation("ttlSeconds: must be between 1 and 86400").into());
    }
    let store = engine.store();
    let conversation = store
        .get_conversation(&request.conversation_id)
        .await
        .map_err(cairn_memory::Error::from)?;
    if conversation.is_none() {
        let message = format!("conversation `{}` was not found", request.conversation_id);
        return Err(ApiError::new(ErrorCode::ConversationNotFound, message).into());
    }
    let ttl = std::time::Duration::from_secs(u64::from(ttl));
    let (token, record) = crate::auth::new_conversation_token(&request.conversation_id, ttl);
    let stored =
        store.insert_conversation_token(&record).await.map_err(cairn_memory::Error::from)?;
    if !stored {
        // Erased between the check above and the insert.
        let message = format!("conversation `{}` was not found", request.conversation_id);
        return Err(ApiError::new(ErrorCode::ConversationNotFound, message).into());
    }
    let created = ConversationToken {
        token,
        token_id: record.id,
        conversation_id: record.conversation_id,
        expires_at: record.expires_at,
    };
    Ok(json_response(StatusCode::CREATED, &created))
}

/// Revokes a conversation token at once (a `runtime` API key may call this too).
#[utoipa::path(delete, path = "/api/conversation-tokens/{id}", tag = "governance",
    params(("id" = String, Path, description = "A token id (`tok_…`)")),
    responses(
        (status = 200, description = "Revoked", body = RevokedToken),
        (status = 404, description = "No such token, or revoked already (`NOT_FOUND`)", body = ErrorEnvelope),
    ))]
pub(crate) async fn revoke_conversation_token(engine: &Engine, id: &str) -> Reply {
    let store = engine.store();
    let revoked = store
        .revoke_conversation_token(id, cairn_types::Timestamp::now())
        .await
        .map_err(cairn_memory::Error::from)?;
    if !revoked {
        let message = format!("no conversation token `{id}` is in force");
        return Err(ApiError::new(ErrorCode::NotFound, message).into());
    }
    Ok(json_response(StatusCode::OK, &RevokedToken { revoked: id.to_owned() }))
}

/// The token a revocation revoked.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct RevokedToken {
    revoked: String,
}

/// The service's health.
#[utoipa::path(get, path = "/api/health", tag = "system",
    responses((status = 200, description = "The service is healthy", body = Health)))]
pub(crate) async fn health(inner: &Inner) -> Reply {
    // The schema's version is read once (and again by every readiness probe): health is
    // polled, and on PostgreSQL every read is a round trip.
    if inner.schema_applied.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        let schema =
            inner.engine.store().schema_version().await.map_err(cairn_memory::Error::from)?;
        inner.schema_applied.store(schema.applied, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(health_answer(inner, inner.engine.memory_count().await?))
}

fn health_answer(inner: &Inner, memory_count: u64) -> Response<ResponseBody> {
    let uptime = (inner.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    let health = HealthAnswer {
        status: "healthy",
        memory_count,
        uptime,
        version: env!("CARGO_PKG_VERSION"),
        retrieval: inner.engine.retrieval().as_str(),
        embeddings_pending: inner.engine.embeddings_pending(),
        fulltext_index: inner.engine.fulltext_index(),
        schema_version: inner.schema_applied.load(std::sync::atomic::Ordering::Relaxed),
        build: &inner.config.build,
    };
    bytes_response(StatusCode::OK, "application/json", health.to_json())
}

/// [`Health`] with borrowed text, as it is written: health is the most frequent request,
/// and this saves its three allocations. A test checks that it reads back as a `Health`,
/// and that [`HealthAnswer::to_json`] writes what serde writes.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HealthAnswer<'a> {
    status: &'a str,
    memory_count: u64,
    uptime: f64,
    version: &'a str,
    retrieval: &'a str,
    embeddings_pending: u64,
    fulltext_index: &'a str,
    schema_version: u32,
    build: &'a str,
}

impl HealthAnswer<'_> {
    /// The answer as serde_json writes it, written directly: the fixed parts as they are,
    /// the numbers with itoa and serde_json's own float format, into one buffer of the
    /// exact size (which `Bytes` then takes without another allocation).
    fn to_json(&self) -> bytes::Bytes {
        let plain =
            |text: &str| text.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if !(plain(self.status)
            && plain(self.version)
            && plain(self.retrieval)
            && plain(self.fulltext_index)
            && plain(self.build))
        {
            return serde_json::to_vec(self).expect("the health answer serializes").into();
        }
        let mut uptime = [0u8; 32];
        let uptime_len = write_seconds(self.uptime, &mut uptime);
        let (mut count, mut pending) = (itoa::Buffer::new(), itoa::Buffer::new());
        let mut schema = itoa::Buffer::new();
        let parts: [&[u8]; 19] = [
            br#"{"status":""#,
            self.status.as_bytes(),
            br#"","memoryCount":"#,
            count.format(self.memory_count).as_bytes(),
            br#","uptime":"#,
            &uptime[..uptime_len],
            br#","version":""#,
            self.version.as_bytes(),
            br#"","retrieval":""#,
            self.retrieval.as_bytes(),
            br#"","embeddingsPending":"#,
            pending.format(self.embeddings_pending).as_bytes(),
            br#","fulltextIndex":""#,
            self.fulltext_index.as_bytes(),
            br#"","schemaVersion":"#,
            schema.format(self.schema_version).as_bytes(),
            br#","build":""#,
            self.build.as_bytes(),
            br#""}"#,
        ];
        let mut json = Vec::with_capacity(parts.iter().map(|part| part.len()).sum());
        for part in parts {
            json.extend_from_slice(part);
        }
        json.into()
    }
}

/// Writes `seconds` into `buffer` as serde_json does, and answers its length. Whole
/// milliseconds (the uptime is rounded to them) are written as integers, which is what
/// serde_json's shortest form gives them: `12.345`, `12.5`, `12.0`; other values go through
/// serde_json itself.
fn write_seconds(seconds: f64, buffer: &mut [u8; 32]) -> usize {
    let millis = (seconds * 1000.0).round();
    // Below 10^15 ms, three decimals are the shortest text that reads back as this f64.
    if (0.0..1e15).contains(&millis) && millis / 1000.0 == seconds {
        let millis = millis as u64;
        let mut whole = itoa::Buffer::new();
        let whole = whole.format(millis / 1000).as_bytes();
        let fraction = millis % 1000;
        let digits = [
            b'0' + (fraction / 100) as u8,
            b'0' + (fraction / 10 % 10) as u8,
            b'0' + (fraction % 10) as u8,
        ];
        let kept = match fraction {
            _ if fraction.is_multiple_of(100) => 1,
            _ if fraction.is_multiple_of(10) => 2,
            _ => 3,
        };
        let length = whole.len() + 1 + kept;
        buffer[..whole.len()].copy_from_slice(whole);
        buffer[whole.len()] = b'.';
        buffer[whole.len() + 1..length].copy_from_slice(&digits[..kept]);
        return length;
    }
    let mut cursor = &mut buffer[..];
    serde_json::to_writer(&mut cursor, &seconds).expect("a float fits in 32 bytes");
    32 - cursor.len()
}

/// The liveness probe, for load balancers and supervisors: the process answers. Without
/// credentials in every profile, and without details.
#[utoipa::path(get, path = "/api/health/live", tag = "system", security(()),
    responses((status = 200, description = "The process answers", body = Probe)))]
#[allow(dead_code)] // Exists for its attribute: the answer is `probe`.
pub(crate) fn health_live() {}

/// The readiness probe, for load balancers: storage answers and its migrations are
/// current. Without credentials in every profile, and without details.
#[utoipa::path(get, path = "/api/health/ready", tag = "system", security(()),
    responses(
        (status = 200, description = "Ready to serve", body = Probe),
        (status = 503, description = "Storage does not answer, or its schema is behind", body = ErrorEnvelope),
    ))]
pub(crate) async fn health_ready(inner: &Inner) -> Response<ResponseBody> {
    match inner.engine.store().schema_version().await {
        Ok(schema) => {
            inner.schema_applied.store(schema.applied, std::sync::atomic::Ordering::Relaxed);
            match schema.current() {
                true => probe("ready"),
                false => ApiError::new(ErrorCode::Unavailable, "not ready").into_response(),
            }
        }
        Err(_) => ApiError::new(ErrorCode::Unavailable, "not ready").into_response(),
    }
}

/// A probe's answer: `{"status": "live"}` or `{"status": "ready"}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct Probe {
    #[schema(example = "ready")]
    status: &'static str,
}

pub(crate) fn probe(status: &'static str) -> Response<ResponseBody> {
    json_response(StatusCode::OK, &Probe { status })
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI 3.1 description of this API", content_type = "application/json")))]
#[allow(dead_code)] // Exists for its attribute: the handler is `crate::openapi_json`.
pub(crate) fn openapi() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_answer_is_a_health() {
        let answer = HealthAnswer {
            status: "healthy",
            memory_count: 12,
            uptime: 3.25,
            version: "0.1.0",
            retrieval: "fulltext",
            embeddings_pending: 4,
            fulltext_index: "building",
            schema_version: 14,
            build: "0.1.0+3f2a1bc",
        };
        let written = serde_json::to_value(&answer).unwrap();
        let read: Health = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), written, "the same fields, no more");
        assert_eq!((read.memory_count, read.embeddings_pending), (12, 4));
        assert_eq!((read.status.as_str(), read.retrieval.as_str()), ("healthy", "fulltext"));
    }

    #[test]
    fn seconds_are_written_as_serde_writes_them() {
        let mut uptimes: Vec<f64> = (0..200_000u64).map(|millis| millis as f64 / 1000.0).collect();
        for millis in [86_400_001u64, 31_536_000_000, 999_999_999_999_999, 1_000_000_000_000_000] {
            uptimes.push(millis as f64 / 1000.0);
        }
        uptimes.extend([0.0005, 1.0 / 3.0, 1e21, f64::MAX, -1.5, 123_456.789_5]);
        for uptime in uptimes {
            let mut buffer = [0u8; 32];
            let length = write_seconds(uptime, &mut buffer);
            let written = std::str::from_utf8(&buffer[..length]).unwrap();
            assert_eq!(written, serde_json::to_string(&uptime).unwrap(), "{uptime}");
        }
    }

    #[test]
    fn the_health_answer_is_written_as_serde_writes_it() {
        for (uptime, memory_count, retrieval, pending) in [
            (0.0, 0, "fulltext", 0),
            (3.25, 12, "hybrid", 4),
            (12.5, u64::MAX, "fulltext", u64::MAX),
            (86_400.001, 100_000, "hybrid", 1),
            (1e21, 7, "fulltext", 0),
        ] {
            for version in [env!("CARGO_PKG_VERSION"), "1.0.0-rc.1+\"odd\""] {
                let answer = HealthAnswer {
                    status: "healthy",
                    memory_count,
                    uptime,
                    schema_version: 14,
                    build: version,
                    version,
                    retrieval,
                    embeddings_pending: pending,
                    fulltext_index: "ready",
                };
                let written = answer.to_json();
                assert_eq!(
                    std::str::from_utf8(&written).unwrap(),
                    serde_json::to_string(&answer).unwrap()
                );
            }
        }
    }
}
