"""The daemon's answers as typed objects, generated from docs/openapi.json by
scripts/generate_models.py: do not edit by hand.

Attributes are the JSON fields in snake_case; `raw` holds the answer as the daemon sent it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._convert import Model

__all__ = [
    "AuditEntry",
    "AuditList",
    "ChannelEventInput",
    "ChannelEventResult",
    "ChannelSegment",
    "CloseBody",
    "CodingContext",
    "CodingContextRequest",
    "CompactBody",
    "CompactResult",
    "Conflict",
    "ConflictList",
    "ConflictResolution",
    "ConflictSide",
    "Connector",
    "ConnectorHealth",
    "ConnectorList",
    "ContactRef",
    "ContextPack",
    "ContextRequest",
    "Conversation",
    "ConversationChannel",
    "ConversationList",
    "ConversationResult",
    "ConversationToken",
    "ConversationTokenRequest",
    "CreateConversationInput",
    "CreatedMemories",
    "CreatedMemory",
    "CustomEventBody",
    "DreamReport",
    "DreamRequest",
    "ErasureReport",
    "ErasureRequest",
    "ErrorBody",
    "ErrorEnvelope",
    "EventFrame",
    "EventPage",
    "EventResult",
    "EventsResult",
    "EvidencePack",
    "EvidencePackRequest",
    "FileContext",
    "GuardFinding",
    "GuardRequest",
    "GuardResult",
    "HandoffBody",
    "Health",
    "ImportedMemories",
    "IntermediateMessageBody",
    "JourneyEventBody",
    "JourneyEventResult",
    "JourneyTarget",
    "LastMessage",
    "LifecycleResult",
    "Memory",
    "MemoryImport",
    "MemoryList",
    "MemoryPatch",
    "MergeGroup",
    "NewConnector",
    "NewMemory",
    "NewMemoryBatch",
    "OpenPrompt",
    "Outcome",
    "OutcomeRequest",
    "PatchEvidence",
    "PatchEvidenceRequest",
    "PreambleBody",
    "PreambleResult",
    "Probe",
    "RemovedConnector",
    "ReplayMessage",
    "ReplayResult",
    "ReplyFrame",
    "ResolveOutputInput",
    "ResumeBody",
    "RevokedToken",
    "RuntimeEvent",
    "SearchHit",
    "SearchResult",
    "SendMessageBody",
    "SendMessageResult",
    "Snapshot",
    "SnapshotResult",
    "StartVoiceConversationInput",
    "StartVoiceSegmentInput",
    "SubmitWidgetBody",
    "SyncProgress",
    "SyncReport",
    "VoiceConnection",
    "VoiceSocket",
    "VoiceStartResult",
]


@dataclass(frozen=True)
class AuditEntry(Model):
    """One change to one memory: who, when, what, and the memory before and after."""

    id: str
    at: Any
    actor: str
    action: str
    memory_id: str
    before: Optional[Dict[str, Any]] = None
    after: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class AuditList(Model):
    """A page of the audit log, newest first."""

    entries: List[AuditEntry]
    total: int
    limit: int
    offset: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ChannelEventInput(Model):
    """The body of `POST /channel-events`, after the envelope is merged."""

    actor: Any = None
    agent_id: Optional[str] = None
    app: Any = None
    attachments: Optional[List[Any]] = None
    binding: Any = None
    body: Optional[str] = None
    channel: Any = None
    conversation_context: Any = None
    conversation_id: Optional[str] = None
    create_conversation: Optional[CreateConversationInput] = None
    dedupe_key: Optional[str] = None
    delivery_id: Optional[str] = None
    direction: Any = None
    event_id: Optional[str] = None
    external_object_ids: Optional[Dict[str, Any]] = None
    handling: Any = None
    id: Optional[str] = None
    idempotency_key: Optional[str] = None
    identity: Any = None
    identity_key: Optional[str] = None
    identity_metadata: Optional[Dict[str, Any]] = None
    identity_stream_id: Optional[str] = None
    intent: Any = None
    kind: Any = None
    message: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    nature: Any = None
    occurred_at: Optional[str] = None
    payload: Any = None
    provider: Optional[str] = None
    provider_object: Any = None
    provider_package_id: Optional[str] = None
    raw_: Any = None
    received_at: Optional[str] = None
    sequence: Any = None
    source: Any = None
    source_id: Optional[str] = None
    source_type: Any = None
    status: Optional[str] = None
    stream_id: Optional[str] = None
    subject: Optional[str] = None
    summary: Optional[str] = None
    text: Optional[str] = None
    turn: Any = None
    verified: Optional[bool] = None
    transcript: Optional[str] = None
    from_channel: Any = None
    reason: Optional[str] = None
    reason_code: Optional[str] = None
    reason_label: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ChannelEventResult(Model):
    """The result of `POST /channel-events`."""

    conversation: Conversation
    events: List[RuntimeEvent]
    duplicate: bool
    created: bool
    text: Optional[str] = None
    active_journey_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ChannelSegment(Model):
    """A stretch of a conversation spent on one channel; a voice segment lasts as long as its"""

    id: str
    conversation_id: str
    channel: str
    started_at: Any
    ended_at: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CloseBody(Model):
    """The body of `POST /conversations/:id/close` (closeConversation)."""

    reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CodingContext(Model):
    """The result of `POST /api/coding-context`: a context pack, plus which memories speak of each file."""

    context: str
    memories_used: int
    token_count: int
    memory_ids: List[str]
    reasons: List[str]
    files: List[FileContext]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CodingContextRequest(Model):
    """The body of `POST /api/coding-context`."""

    task: str
    files: Optional[List[str]] = None
    repo: Optional[str] = None
    token_budget: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CompactBody(Model):
    """The body of `POST /conversations/:id/compact` (compactConversation)."""

    from_offset: Optional[int] = None
    to_offset: Optional[int] = None
    schema_version: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CompactResult(Model):
    """CompactResult"""

    events: List[RuntimeEvent]
    snapshot: Snapshot
    summary: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Conflict(Model):
    """Memories that contradict each other about one subject in one repository, grouped by the"""

    id: str
    subject: str
    sides: List[ConflictSide]
    memory_ids: List[str]
    memories: List[Memory]
    reason: str
    status: Any
    detected_at: Any
    repo: Optional[str] = None
    resolution: Optional[str] = None
    resolved_at: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConflictList(Model):
    """The result of `GET /api/conflicts`, newest first."""

    conflicts: List[Conflict]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConflictResolution(Model):
    """The body of `POST /api/conflicts/:id/resolve`."""

    action: Any
    memory_id: Optional[str] = None
    content: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConflictSide(Model):
    """One position in a conflict."""

    label: str
    memory_ids: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Connector(Model):
    """A connector."""

    id: str
    kind: Any
    name: str
    path: str
    scope: Any
    max_commits: int
    created_at: Any
    repo: Optional[str] = None
    last_sync: Optional[SyncReport] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConnectorHealth(Model):
    """The health of a connector."""

    id: str
    status: Any
    memories: int
    last_sync_at: Any = None
    last_sync: Optional[SyncReport] = None
    progress: Optional[SyncProgress] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConnectorList(Model):
    """The result of `GET /api/connectors`."""

    connectors: List[Connector]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ContactRef(Model):
    """A contact as a channel knows them: the channel's type and their address on it."""

    channel: str
    address: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ContextPack(Model):
    """A context pack."""

    context: str
    memories_used: int
    token_count: int
    memory_ids: List[str]
    reasons: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ContextRequest(Model):
    """The body of `POST /api/context`."""

    task: str
    repo: Optional[str] = None
    token_budget: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Conversation(Model):
    """A conversation record, as every operation returns it."""

    id: str
    agent_id: str
    context: Any
    lifecycle: Any
    created_at: Any
    updated_at: Any
    channel: Optional[ConversationChannel] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConversationChannel(Model):
    """The channel a conversation happens on: `web`, `voice`, `sms`, `email`, … with the"""

    type: str
    provider: Optional[str] = None
    id: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConversationList(Model):
    """A page of conversations."""

    conversations: List[Conversation]
    next_cursor: Optional[str] = None
    prev_cursor: Optional[str] = None
    last_messages: Optional[Dict[str, LastMessage]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConversationResult(Model):
    """`{"conversation": …}`: what creating, reading and closing a conversation return."""

    conversation: Conversation
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConversationToken(Model):
    """A conversation token, shown once: it allows that conversation's runtime operations and"""

    token: str
    token_id: str
    conversation_id: str
    expires_at: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ConversationTokenRequest(Model):
    """The body of `POST /api/conversation-tokens`."""

    conversation_id: str
    ttl_seconds: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CreateConversationInput(Model):
    """The body of `POST /conversations` (createConversation); every field is optional."""

    id: Optional[str] = None
    agent_id: Optional[str] = None
    channel: Any = None
    context: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CreatedMemories(Model):
    """The answer of `POST /api/memories/batch`: the memories as stored, in the request's order."""

    memories: List[CreatedMemory]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CreatedMemory(Model):
    """The create response: a memory as just stored, without `lastRecalledAt`."""

    id: str
    content: str
    scope: Any
    status: Any
    tags: List[str]
    metadata: Dict[str, Any]
    created_at: Any
    updated_at: Any
    repo: Optional[str] = None
    source: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class CustomEventBody(Model):
    """The body of `POST /conversations/:id/custom-events` (emitCustomEvent)."""

    event_name: str
    payload: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class DreamReport(Model):
    """What one run of the dream cycle did (or, in a dry run, would do)."""

    dry_run: bool
    started_at: Any
    finished_at: Any
    examined: int
    merged: List[MergeGroup]
    staled: List[str]
    conflicts: List[Conflict]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class DreamRequest(Model):
    """The body of `POST /api/dream-cycle`; every field is optional."""

    dry_run: Optional[bool] = None
    stale_after_days: Optional[float] = None
    similarity: Optional[float] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ErasureReport(Model):
    """What an erasure deleted."""

    memories: List[str]
    conversations: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ErasureRequest(Model):
    """The body of `POST /api/erase`: what to delete for good. Give any of the fields; all"""

    memory_ids: Optional[List[str]] = None
    conversation_ids: Optional[List[str]] = None
    contact: Optional[ContactRef] = None
    subject: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ErrorBody(Model):
    """What went wrong: a machine-readable `code`, a sentence for people, and the HTTP status."""

    code: str
    message: str
    status: int
    request_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ErrorEnvelope(Model):
    """The body of every error response."""

    error: ErrorBody
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EventFrame(Model):
    """One Server-Sent Event of a conversation's event stream, as an SSE parser reads it (the"""

    event: str
    data: str
    id: Optional[str] = None
    retry: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EventPage(Model):
    """A page of the log (listEvents): `{events, nextAfterOffset?}`."""

    events: List[RuntimeEvent]
    next_after_offset: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EventResult(Model):
    """`{"event": …}`: the one event an operation appended."""

    event: RuntimeEvent
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EventsResult(Model):
    """`{"events": […]}`: events in offset order."""

    events: List[RuntimeEvent]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EvidencePack(Model):
    """Everything recorded for a task, as one document to attach to a pull request."""

    task: str
    generated_at: Any
    evidence: List[PatchEvidence]
    memories: List[Memory]
    outcomes: List[Outcome]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class EvidencePackRequest(Model):
    """The body of `POST /api/evidence-pack`."""

    task: str
    format: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class FileContext(Model):
    """The memories in a coding context that name a file or one of its directories."""

    path: str
    memory_ids: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class GuardFinding(Model):
    """One reason for caution: a built-in rule, a memory, or an earlier failing outcome."""

    code: str
    message: str
    memory_id: Optional[str] = None
    outcome_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class GuardRequest(Model):
    """The body of `POST /api/guard`."""

    action: str
    repo: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class GuardResult(Model):
    """The verdict on an action. `allowed` is false exactly when there is a blocker."""

    allowed: bool
    warnings: List[GuardFinding]
    blockers: List[GuardFinding]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class HandoffBody(Model):
    """The body of `POST /conversations/:id/handoff` (requestHandoff)."""

    reason: str
    summary: Optional[str] = None
    payload: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Health(Model):
    """Health"""

    status: str
    memory_count: int
    uptime: float
    version: str
    retrieval: str
    embeddings_pending: int
    fulltext_index: str
    schema_version: int
    build: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ImportedMemories(Model):
    """The answer of `POST /api/memories/import`."""

    imported: List[str]
    skipped: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class IntermediateMessageBody(Model):
    """The body of `POST /conversations/:id/intermediate-messages` (emitIntermediateMessage)."""

    text: str
    visible_to_model: Optional[bool] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class JourneyEventBody(Model):
    """The body of `POST /conversations/:id/journey-events` (emitJourneyEvent)."""

    event_name: str
    app: Any = None
    payload: Any = None
    routing: Any = None
    target: Optional[JourneyTarget] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class JourneyEventResult(Model):
    """What a journey event did: its own event, everything the journeys then appended, and"""

    event: RuntimeEvent
    events: List[RuntimeEvent]
    snapshot: Snapshot
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class JourneyTarget(Model):
    """Where a targeted journey event goes."""

    journey_id: Optional[str] = None
    state_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class LastMessage(Model):
    """A conversation's newest message, as a list shows it."""

    role: str
    text: str
    offset: int
    created_at: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class LifecycleResult(Model):
    """A lifecycle change: the conversation after it and the event that records it."""

    conversation: Conversation
    event: RuntimeEvent
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Memory(Model):
    """A stored memory, as lists, reads and updates return it."""

    id: str
    content: str
    scope: Any
    status: Any
    tags: List[str]
    metadata: Dict[str, Any]
    created_at: Any
    updated_at: Any
    recall_count: int
    repo: Optional[str] = None
    source: Optional[str] = None
    last_recalled_at: Any = None
    archived_at: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class MemoryImport(Model):
    """The body of `POST /api/memories/import`: up to 1,000 memories as `GET /api/memories`"""

    memories: List[Memory]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class MemoryList(Model):
    """The result of `GET /api/memories`: newest first."""

    memories: List[Memory]
    total: int
    limit: int
    offset: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class MemoryPatch(Model):
    """The body of `PATCH /api/memories/:id`: every field is optional; at least one is required."""

    content: Optional[str] = None
    scope: Any = None
    status: Any = None
    tags: Optional[List[str]] = None
    metadata: Optional[Dict[str, Any]] = None
    archived: Optional[bool] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class MergeGroup(Model):
    """Near-duplicates merged into one memory."""

    kept_id: str
    merged_ids: List[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class NewConnector(Model):
    """The body of `POST /api/connectors`."""

    kind: Any
    path: str
    name: Optional[str] = None
    scope: Any = None
    repo: Optional[str] = None
    max_commits: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class NewMemory(Model):
    """The body of `POST /api/memories`."""

    content: str
    scope: Any
    repo: Optional[str] = None
    tags: Optional[List[str]] = None
    source: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class NewMemoryBatch(Model):
    """The body of `POST /api/memories/batch`: up to 1,000 memories ([`MAX_BATCH_MEMORIES`]),"""

    memories: List[NewMemory]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class OpenPrompt(Model):
    """A widget prompt the runtime opened and nobody has answered yet."""

    prompt_id: str
    widget_kind: str
    input: Any
    offset: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Outcome(Model):
    """A recorded outcome."""

    outcome_id: str
    command: str
    exit_code: int
    succeeded: bool
    recorded_at: Any
    previous_failures: int
    task: Optional[str] = None
    repo: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class OutcomeRequest(Model):
    """The body of `POST /api/outcome`."""

    command: str
    exit_code: int
    task: Optional[str] = None
    repo: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class PatchEvidence(Model):
    """A patch evidence record."""

    evidence_id: str
    task: str
    files: List[str]
    commands: List[str]
    memories_used: List[str]
    created_at: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class PatchEvidenceRequest(Model):
    """The body of `POST /api/patch-evidence`."""

    task: str
    files: Optional[List[str]] = None
    commands: Optional[List[str]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class PreambleBody(Model):
    """The body of `POST /conversations/:id/preambles` (emitGeneratedPreamble)."""

    max_words: Optional[int] = None
    purpose: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class PreambleResult(Model):
    """PreambleResult"""

    events: List[RuntimeEvent]
    text: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Probe(Model):
    """A probe's answer: `{"status": "live"}` or `{"status": "ready"}`."""

    status: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class RemovedConnector(Model):
    """The result of `DELETE /api/connectors/:id`."""

    id: str
    archived_memories: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ReplayMessage(Model):
    """A message as replay shows it, rebuilt from the `message` events."""

    id: str
    role: str
    text: str
    offset: int
    aborted: bool
    intermediate: bool
    reason: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ReplayResult(Model):
    """A conversation rebuilt from its log, a page of events at a time."""

    conversation: Conversation
    events: List[RuntimeEvent]
    messages: List[ReplayMessage]
    open_prompts: List[OpenPrompt]
    snapshot: Snapshot
    next_after_offset: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ReplyFrame(Model):
    """One Server-Sent Event of a streamed reply (`Accept: text/event-stream`)."""

    event: str
    data: str
    id: Optional[str] = None
    retry: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ResolveOutputInput(Model):
    """The body of `POST /channel-outputs/resolve`: what became of something the runtime sent"""

    conversation_id: str
    event_id: str
    status: str
    channel: Any = None
    delivery_id: Optional[str] = None
    provider: Optional[str] = None
    error: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class ResumeBody(Model):
    """The body of `POST /conversations/:id/resume` (resumeConversation)."""

    reason: Optional[str] = None
    payload: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class RevokedToken(Model):
    """The token a revocation revoked."""

    revoked: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class RuntimeEvent(Model):
    """One entry of a conversation's ordered log. Offsets start at 0 and have no gaps."""

    id: str
    conversation_id: str
    offset: int
    type: str
    created_at: Any
    data: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SearchHit(Model):
    """One ranked search hit."""

    memory: Memory
    score: float
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SearchResult(Model):
    """The result of `GET /api/search`, best hit first."""

    query: str
    hits: List[SearchHit]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SendMessageBody(Model):
    """The body of `POST /conversations/:id/messages` (sendMessage)."""

    message: str
    app: Any = None
    channel: Any = None
    turn: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SendMessageResult(Model):
    """The assistant's turn after a message."""

    text: str
    events: List[RuntimeEvent]
    active_journey_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class Snapshot(Model):
    """The journey state of a conversation."""

    conversation_id: str
    lifecycle: Any
    active_state_ids: List[str]
    updated_at: Any
    active_journey_id: Optional[str] = None
    compaction_summary: Any = None
    definition_hash: Optional[str] = None
    journey_context: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SnapshotResult(Model):
    """`{"snapshot": …}`: a conversation's journey state (getSnapshot)."""

    snapshot: Snapshot
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class StartVoiceConversationInput(Model):
    """The body of `POST /voice/conversations` (startVoiceConversation)."""

    agent_id: Optional[str] = None
    app: Any = None
    client: Any = None
    context: Any = None
    id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class StartVoiceSegmentInput(Model):
    """The body of `POST /conversations/{id}/voice-segments` (startVoiceSegment)."""

    app: Any = None
    client: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SubmitWidgetBody(Model):
    """The body of `POST /conversations/:id/widgets` (submitWidget): the answer to a prompt."""

    prompt_id: str
    widget_kind: str
    output: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SyncProgress(Model):
    """Progress of a sync under way."""

    done: int
    total: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class SyncReport(Model):
    """What one sync did."""

    started_at: Any
    finished_at: Any
    status: Any
    imported: int
    updated: int
    unchanged: int
    archived: int
    skipped: int
    error: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class VoiceConnection(Model):
    """One connection of a voice segment: the socket and what carries it."""

    id: str
    channel_segment_id: str
    adapter: str
    status: Any
    provider: Optional[str] = None
    provider_session_id: Optional[str] = None
    expires_at: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class VoiceSocket(Model):
    """Where and how to open the voice socket."""

    url: str
    token: str
    protocol: str
    expires_at: Any
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

@dataclass(frozen=True)
class VoiceStartResult(Model):
    """What startVoiceConversation and startVoiceSegment return."""

    conversation: Conversation
    channel_segment: ChannelSegment
    connection: VoiceConnection
    socket: VoiceSocket
    events: List[RuntimeEvent]
    events_url: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
