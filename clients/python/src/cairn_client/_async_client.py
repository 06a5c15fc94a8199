"""`AsyncClient`: every call of the memory API and the conversation runtime, with keyword
arguments in snake_case and typed results. `Client` (the blocking one) wraps it."""

from __future__ import annotations

from types import TracebackType
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Type
from urllib.parse import quote

import httpx

from . import models
from ._transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Transport

__all__ = ["AsyncClient"]

RUNTIME = "/api/runtime"


def _id(value: str) -> str:
    return quote(value, safe="")


def _conversation(conversation_id: str, rest: str = "") -> str:
    return f"{RUNTIME}/conversations/{_id(conversation_id)}{rest}"


class _Resource:
    def __init__(self, transport: Transport) -> None:
        self._t = transport


class AsyncMemories(_Resource):
    """`client.memories`: stored memories."""

    async def create(
        self,
        *,
        content: str,
        scope: str = "repo",
        repo: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        source: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> models.CreatedMemory:
        body = dict(content=content, scope=scope, repo=repo, tags=tags, source=source, metadata=metadata)
        return await self._t.call("POST", "/api/memories", models.CreatedMemory, body=body)

    async def create_many(self, memories: Sequence[Mapping[str, Any]]) -> models.CreatedMemories:
        """Stores up to 1,000 memories in one request (`POST /api/memories/batch`): all or none.
        Each is a mapping of `create`'s keyword arguments."""
        items = [{k: v for k, v in memory.items() if v is not None} for memory in memories]
        return await self._t.call("POST", "/api/memories/batch", models.CreatedMemories, body={"memories": items})

    async def get(self, memory_id: str) -> models.Memory:
        return await self._t.call("GET", f"/api/memories/{_id(memory_id)}", models.Memory)

    async def list(
        self,
        *,
        scope: Optional[str] = None,
        status: Optional[str] = None,
        repo: Optional[str] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
        include_archived: Optional[bool] = None,
    ) -> models.MemoryList:
        query = dict(scope=scope, status=status, repo=repo, limit=limit, offset=offset, include_archived=include_archived)
        return await self._t.call("GET", "/api/memories", models.MemoryList, query=query)

    async def update(
        self,
        memory_id: str,
        *,
        content: Optional[str] = None,
        scope: Optional[str] = None,
        status: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> models.Memory:
        body = dict(content=content, scope=scope, status=status, tags=tags, metadata=metadata)
        return await self._t.call("PATCH", f"/api/memories/{_id(memory_id)}", models.Memory, body=body)

    async def archive(self, memory_id: str) -> models.Memory:
        return await self._t.call("DELETE", f"/api/memories/{_id(memory_id)}", models.Memory)

    async def restore(self, memory_id: str) -> models.Memory:
        path = f"/api/memories/{_id(memory_id)}"
        return await self._t.call("PATCH", path, models.Memory, body={"archived": False})


class AsyncConflicts(_Resource):
    """`client.conflicts`: contradictions the dream cycle found."""

    async def list(self, *, status: Optional[str] = None) -> models.ConflictList:
        return await self._t.call("GET", "/api/conflicts", models.ConflictList, query={"status": status})

    async def resolve(
        self, conflict_id: str, *, action: str, memory_id: Optional[str] = None, content: Optional[str] = None
    ) -> models.Conflict:
        body = dict(action=action, memory_id=memory_id, content=content)
        return await self._t.call("POST", f"/api/conflicts/{_id(conflict_id)}/resolve", models.Conflict, body=body)


class AsyncReview(_Resource):
    """`client.review`: memories waiting for a person, and the audit log."""

    async def queue(self, *, limit: Optional[int] = None, offset: Optional[int] = None) -> models.MemoryList:
        query = dict(limit=limit, offset=offset)
        return await self._t.call("GET", "/api/governance/review", models.MemoryList, query=query)

    async def approve(self, memory_id: str) -> models.Memory:
        return await self._t.call("POST", f"/api/governance/review/{_id(memory_id)}/approve", models.Memory)

    async def reject(self, memory_id: str) -> models.Memory:
        return await self._t.call("POST", f"/api/governance/review/{_id(memory_id)}/reject", models.Memory)

    async def audit(
        self,
        *,
        memory_id: Optional[str] = None,
        actor: Optional[str] = None,
        limit: Optional[int] = None,
        offset: Optional[int] = None,
    ) -> models.AuditList:
        query = dict(memory_id=memory_id, actor=actor, limit=limit, offset=offset)
        return await self._t.call("GET", "/api/governance/audit", models.AuditList, query=query)


class AsyncConnectors(_Resource):
    """`client.connectors`: sources the daemon ingests (folders, git history)."""

    async def list(self) -> models.ConnectorList:
        return await self._t.call("GET", "/api/connectors", models.ConnectorList)

    async def add(
        self,
        *,
        kind: str,
        path: str,
        name: Optional[str] = None,
        scope: Optional[str] = None,
        repo: Optional[str] = None,
        max_commits: Optional[int] = None,
    ) -> models.Connector:
        body = dict(kind=kind, path=path, name=name, scope=scope, repo=repo, max_commits=max_commits)
        return await self._t.call("POST", "/api/connectors", models.Connector, body=body)

    async def get(self, connector_id: str) -> models.Connector:
        return await self._t.call("GET", f"/api/connectors/{_id(connector_id)}", models.Connector)

    async def remove(self, connector_id: str) -> models.RemovedConnector:
        return await self._t.call("DELETE", f"/api/connectors/{_id(connector_id)}", models.RemovedConnector)

    async def health(self, connector_id: str) -> models.ConnectorHealth:
        return await self._t.call("GET", f"/api/connectors/{_id(connector_id)}/health", models.ConnectorHealth)

    async def sync(self, connector_id: str) -> models.SyncReport:
        return await self._t.call("POST", f"/api/connectors/{_id(connector_id)}/sync", models.SyncReport)


class AsyncRuntime(_Resource):
    """`client.runtime`: the conversation runtime's operations, by the seed's names in
    snake_case, and `stream_events`."""

    async def create_conversation(
        self,
        *,
        id: Optional[str] = None,  # noqa: A002 - the runtime's field name
        agent_id: Optional[str] = None,
        channel: Any = None,
        context: Any = None,
    ) -> models.ConversationResult:
        body = dict(id=id, agent_id=agent_id, channel=channel, context=context)
        return await self._t.call("POST", f"{RUNTIME}/conversations", models.ConversationResult, body=body)

    async def list_conversations(
        self,
        *,
        after: Optional[str] = None,
        before: Optional[str] = None,
        after_updated_at: Optional[str] = None,
        before_updated_at: Optional[str] = None,
        agent_id: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> models.ConversationList:
        query = dict(
            after=after, before=before, after_updated_at=after_updated_at,
            before_updated_at=before_updated_at, agent_id=agent_id, limit=limit,
        )
        return await self._t.call("GET", f"{RUNTIME}/conversations", models.ConversationList, query=query)

    async def handle_channel_event(self, /, **event: Any) -> models.ChannelEventResult:
        """Any channel event (`POST /channel-events`): its fields as keyword arguments."""
        return await self._t.call("POST", f"{RUNTIME}/channel-events", models.ChannelEventResult, body=event)

    async def _variant(self, kind: str, event: Dict[str, Any], default_direction: Optional[str] = None) -> models.ChannelEventResult:
        given = event.pop("kind", None) or event.pop("nature", None)
        if given is not None and given != kind:
            raise ValueError(f"a `{kind}` channel event cannot have the kind `{given}`")
        if kind != "voice-turn" and event.get("channel") is None:
            raise ValueError(f"a `{kind}` channel event needs a `channel`")
        if default_direction is not None:
            event.setdefault("direction", default_direction)
        return await self.handle_channel_event(kind=kind, **event)

    async def receive_message(self, /, *, channel: Any, text: str, **event: Any) -> models.ChannelEventResult:
        """A message someone sent on a channel (`direction` `inbound` unless given)."""
        return await self._variant("message", dict(event, channel=channel, text=text), "inbound")

    async def record_provider_update(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("provider-object", dict(event, channel=channel))

    async def finalize_voice_turn(self, /, *, transcript: str, **event: Any) -> models.ChannelEventResult:
        return await self._variant("voice-turn", dict(event, transcript=transcript))

    async def request_outbound_contact(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("outbound-contact", dict(event, channel=channel), "outbound")

    async def submit_scheduled_event(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("scheduled", dict(event, channel=channel))

    async def record_channel_output_resolution(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("output-resolution", dict(event, channel=channel))

    async def request_channel_handoff(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("handoff", dict(event, channel=channel))

    async def request_channel_handoff_review(self, /, *, channel: Any, **event: Any) -> models.ChannelEventResult:
        return await self._variant("handoff-review", dict(event, channel=channel))

    async def resolve_channel_output(
        self, /, *, conversation_id: str, event_id: str, status: str, **fields: Any
    ) -> models.EventResult:
        body = dict(fields, conversation_id=conversation_id, event_id=event_id, status=status)
        return await self._t.call("POST", f"{RUNTIME}/channel-outputs/resolve", models.EventResult, body=body)

    async def start_voice_conversation(self, /, **input: Any) -> models.VoiceStartResult:
        """A voice conversation: its `socket.url` (with its single-use token) and protocol."""
        return await self._t.call("POST", f"{RUNTIME}/voice/conversations", models.VoiceStartResult, body=input)

    async def start_voice_segment(self, /, conversation_id: str, **input: Any) -> models.VoiceStartResult:
        path = _conversation(conversation_id, "/voice-segments")
        return await self._t.call("POST", path, models.VoiceStartResult, body=input)

    async def send_message(
        self,
        conversation_id: str,
        message: str,
        *,
        channel: Any = None,
        app: Any = None,
        turn: Any = None,
    ) -> models.SendMessageResult:
        body = dict(message=message, channel=channel, app=app, turn=turn)
        return await self._t.call("POST", _conversation(conversation_id, "/messages"), models.SendMessageResult, body=body)

    async def list_events(
        self, conversation_id: str, *, after_offset: Optional[int] = None, limit: Optional[int] = None
    ) -> models.EventPage:
        """With `limit`, one page and its `next_after_offset`; without, every event after
        `after_offset`, following the daemon's pages to the end."""
        path = _conversation(conversation_id, "/events")
        if limit is not None:
            return await self._t.call("GET", path, models.EventPage, query=dict(after_offset=after_offset, limit=limit))
        events: List[Dict[str, Any]] = []
        after = after_offset
        while True:
            page = await self._t.request("GET", path, query=dict(after_offset=after))
            events.extend(page["events"])
            after = page.get("nextAfterOffset")
            if after is None:
                return models.EventPage.from_json({"events": events})

    async def submit_widget(
        self, conversation_id: str, *, prompt_id: str, widget_kind: str, output: Any = None
    ) -> models.EventResult:
        body = dict(prompt_id=prompt_id, widget_kind=widget_kind, output=output)
        return await self._t.call("POST", _conversation(conversation_id, "/widgets"), models.EventResult, body=body)

    async def emit_custom_event(self, conversation_id: str, event_name: str, *, payload: Any = None) -> models.EventResult:
        body = dict(event_name=event_name, payload=payload)
        return await self._t.call("POST", _conversation(conversation_id, "/custom-events"), models.EventResult, body=body)

    async def emit_journey_event(
        self,
        conversation_id: str,
        event_name: str,
        *,
        payload: Any = None,
        app: Any = None,
        routing: Optional[str] = None,
        target: Any = None,
    ) -> models.JourneyEventResult:
        body = dict(event_name=event_name, payload=payload, app=app, routing=routing, target=target)
        path = _conversation(conversation_id, "/journey-events")
        return await self._t.call("POST", path, models.JourneyEventResult, body=body)

    async def emit_intermediate_message(
        self, conversation_id: str, text: str, *, visible_to_model: Optional[bool] = None
    ) -> models.EventsResult:
        body = dict(text=text, visible_to_model=visible_to_model)
        path = _conversation(conversation_id, "/intermediate-messages")
        return await self._t.call("POST", path, models.EventsResult, body=body)

    async def emit_generated_preamble(
        self, conversation_id: str, *, max_words: Optional[int] = None, purpose: Optional[str] = None
    ) -> models.PreambleResult:
        body = dict(max_words=max_words, purpose=purpose)
        return await self._t.call("POST", _conversation(conversation_id, "/preambles"), models.PreambleResult, body=body)

    async def compact_conversation(
        self,
        conversation_id: str,
        *,
        from_offset: Optional[int] = None,
        to_offset: Optional[int] = None,
        schema_version: Optional[str] = None,
    ) -> models.CompactResult:
        body = dict(from_offset=from_offset, to_offset=to_offset, schema_version=schema_version)
        return await self._t.call("POST", _conversation(conversation_id, "/compact"), models.CompactResult, body=body)

    async def close_conversation(self, conversation_id: str, *, reason: Optional[str] = None) -> models.ConversationResult:
        path = _conversation(conversation_id, "/close")
        return await self._t.call("POST", path, models.ConversationResult, body=dict(reason=reason))

    async def request_handoff(
        self, conversation_id: str, *, reason: str, summary: Optional[str] = None, payload: Any = None
    ) -> models.LifecycleResult:
        body = dict(reason=reason, summary=summary, payload=payload)
        return await self._t.call("POST", _conversation(conversation_id, "/handoff"), models.LifecycleResult, body=body)

    async def resume_conversation(
        self, conversation_id: str, *, reason: Optional[str] = None, payload: Any = None
    ) -> models.LifecycleResult:
        body = dict(reason=reason, payload=payload)
        return await self._t.call("POST", _conversation(conversation_id, "/resume"), models.LifecycleResult, body=body)

    async def get_snapshot(self, conversation_id: str) -> models.SnapshotResult:
        return await self._t.call("GET", _conversation(conversation_id, "/snapshot"), models.SnapshotResult)

    async def replay_conversation(
        self, conversation_id: str, *, after_offset: Optional[int] = None, limit: Optional[int] = None
    ) -> models.ReplayResult:
        query = dict(after_offset=after_offset, limit=limit)
        return await self._t.call("GET", _conversation(conversation_id, "/replay"), models.ReplayResult, query=query)

    async def stream_events(
        self, conversation_id: str, *, after_offset: Optional[int] = None
    ) -> AsyncIterator[models.RuntimeEvent]:
        """The conversation's events as they are appended (the log so far first), each once
        and in order; a dropped connection is opened again after the last one delivered.
        A refusal (unknown conversation, revoked credentials) raises `ServiceApiError`."""
        path = _conversation(conversation_id, "/events/stream")
        async for event in self._t.events(path, after_offset):
            yield models.RuntimeEvent.from_json(event)


class AsyncClient:
    """The asynchronous client of a Cairn daemon.

    `base_url` and `api_key` default to `CAIRN_URL` and `CAIRN_API_KEY` (as the CLI reads
    them), else `http://127.0.0.1:8787` and no key. Use it as an async context manager, or
    call `aclose()`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self._t = Transport(base_url, api_key, timeout, max_retries, http_client)
        self.base_url = self._t.base_url
        self.memories = AsyncMemories(self._t)
        self.conflicts = AsyncConflicts(self._t)
        self.review = AsyncReview(self._t)
        self.connectors = AsyncConnectors(self._t)
        self.runtime = AsyncRuntime(self._t)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._t.close()

    async def health(self) -> models.Health:
        return await self._t.call("GET", "/api/health", models.Health)

    async def search(
        self,
        q: str,
        *,
        scope: Optional[str] = None,
        repo: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        mode: Optional[str] = None,
    ) -> models.SearchResult:
        query = dict(q=q, scope=scope, repo=repo, status=status, limit=limit, mode=mode)
        return await self._t.call("GET", "/api/search", models.SearchResult, query=query)

    async def context(
        self, *, task: str, repo: Optional[str] = None, token_budget: Optional[int] = None
    ) -> models.ContextPack:
        body = dict(task=task, repo=repo, token_budget=token_budget)
        return await self._t.call("POST", "/api/context", models.ContextPack, body=body)

    async def coding_context(
        self,
        *,
        task: str,
        files: Optional[Sequence[str]] = None,
        repo: Optional[str] = None,
        token_budget: Optional[int] = None,
    ) -> models.CodingContext:
        body = dict(task=task, files=files, repo=repo, token_budget=token_budget)
        return await self._t.call("POST", "/api/coding-context", models.CodingContext, body=body)

    async def guard(self, action: str, *, repo: Optional[str] = None) -> models.GuardResult:
        return await self._t.call("POST", "/api/guard", models.GuardResult, body=dict(action=action, repo=repo))

    async def outcome(
        self, *, command: str, exit_code: int, task: Optional[str] = None, repo: Optional[str] = None
    ) -> models.Outcome:
        body = dict(command=command, exit_code=exit_code, task=task, repo=repo)
        return await self._t.call("POST", "/api/outcome", models.Outcome, body=body)

    async def patch_evidence(
        self,
        *,
        task: str,
        files: Optional[Sequence[str]] = None,
        commands: Optional[Sequence[str]] = None,
    ) -> models.PatchEvidence:
        body = dict(task=task, files=files, commands=commands)
        return await self._t.call("POST", "/api/patch-evidence", models.PatchEvidence, body=body)

    async def evidence_pack(self, *, task: str) -> models.EvidencePack:
        return await self._t.call("POST", "/api/evidence-pack", models.EvidencePack, body=dict(task=task, format="json"))

    async def dream_cycle(
        self,
        *,
        dry_run: Optional[bool] = None,
        stale_after_days: Optional[int] = None,
        similarity: Optional[float] = None,
    ) -> models.DreamReport:
        body = dict(dry_run=dry_run, stale_after_days=stale_after_days, similarity=similarity)
        return await self._t.call("POST", "/api/dream-cycle", models.DreamReport, body=body)

    async def erase(
        self,
        *,
        memory_ids: Optional[Sequence[str]] = None,
        conversation_ids: Optional[Sequence[str]] = None,
        contact: Any = None,
        subject: Optional[str] = None,
    ) -> models.ErasureReport:
        body = dict(memory_ids=memory_ids, conversation_ids=conversation_ids, contact=contact, subject=subject)
        return await self._t.call("POST", "/api/erase", models.ErasureReport, body=body)
