"""`Client`: the blocking client. It is `AsyncClient` run on an event loop of its own (a
daemon thread), so both have one implementation and the same surface: every method here is
the async one, called and waited for. It works where an event loop already runs too (a
notebook, an async framework's sync handler)."""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Coroutine, Iterator, Optional, Type, TypeVar

from typing_extensions import Concatenate, ParamSpec

from . import models
from ._async_client import (
    AsyncClient,
    AsyncConflicts,
    AsyncConnectors,
    AsyncMemories,
    AsyncReview,
    AsyncRuntime,
)
from ._transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT

__all__ = ["Client"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class _Loop:
    """An event loop on a daemon thread, for running the async client's coroutines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cairn-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def _blocking(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], R]:
    """The async `method` of a resource, as a blocking method of its blocking twin."""

    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._loop.run(method(self._async, *args, **kwargs))
        return result

    call.__name__ = method.__name__
    call.__qualname__ = method.__qualname__
    call.__doc__ = method.__doc__
    return call


class _Blocking:
    def __init__(self, loop: _Loop, resource: Any) -> None:
        self._loop = loop
        self._async = resource


class Memories(_Blocking):
    """`client.memories`: stored memories."""

    create = _blocking(AsyncMemories.create)
    create_many = _blocking(AsyncMemories.create_many)
    get = _blocking(AsyncMemories.get)
    list = _blocking(AsyncMemories.list)
    update = _blocking(AsyncMemories.update)
    archive = _blocking(AsyncMemories.archive)
    restore = _blocking(AsyncMemories.restore)


class Conflicts(_Blocking):
    """`client.conflicts`: contradictions the dream cycle found."""

    list = _blocking(AsyncConflicts.list)
    resolve = _blocking(AsyncConflicts.resolve)


class Review(_Blocking):
    """`client.review`: memories waiting for a person, and the audit log."""

    queue = _blocking(AsyncReview.queue)
    approve = _blocking(AsyncReview.approve)
    reject = _blocking(AsyncReview.reject)
    audit = _blocking(AsyncReview.audit)


class Connectors(_Blocking):
    """`client.connectors`: sources the daemon ingests."""

    list = _blocking(AsyncConnectors.list)
    add = _blocking(AsyncConnectors.add)
    get = _blocking(AsyncConnectors.get)
    remove = _blocking(AsyncConnectors.remove)
    health = _blocking(AsyncConnectors.health)
    sync = _blocking(AsyncConnectors.sync)


class Runtime(_Blocking):
    """`client.runtime`: the conversation runtime."""

    create_conversation = _blocking(AsyncRuntime.create_conversation)
    list_conversations = _blocking(AsyncRuntime.list_conversations)
    handle_channel_event = _blocking(AsyncRuntime.handle_channel_event)
    receive_message = _blocking(AsyncRuntime.receive_message)
    record_provider_update = _blocking(AsyncRuntime.record_provider_update)
    finalize_voice_turn = _blocking(AsyncRuntime.finalize_voice_turn)
    request_outbound_contact = _blocking(AsyncRuntime.request_outbound_contact)
    submit_scheduled_event = _blocking(AsyncRuntime.submit_scheduled_event)
    record_channel_output_resolution = _blocking(AsyncRuntime.record_channel_output_resolution)
    request_channel_handoff = _blocking(AsyncRuntime.request_channel_handoff)
    request_channel_handoff_review = _blocking(AsyncRuntime.request_channel_handoff_review)
    resolve_channel_output = _blocking(AsyncRuntime.resolve_channel_output)
    start_voice_conversation = _blocking(AsyncRuntime.start_voice_conversation)
    start_voice_segment = _blocking(AsyncRuntime.start_voice_segment)
    send_message = _blocking(AsyncRuntime.send_message)
    list_events = _blocking(AsyncRuntime.list_events)
    submit_widget = _blocking(AsyncRuntime.submit_widget)
    emit_custom_event = _blocking(AsyncRuntime.emit_custom_event)
    emit_journey_event = _blocking(AsyncRuntime.emit_journey_event)
    emit_intermediate_message = _blocking(AsyncRuntime.emit_intermediate_message)
    emit_generated_preamble = _blocking(AsyncRuntime.emit_generated_preamble)
    compact_conversation = _blocking(AsyncRuntime.compact_conversation)
    close_conversation = _blocking(AsyncRuntime.close_conversation)
    request_handoff = _blocking(AsyncRuntime.request_handoff)
    resume_conversation = _blocking(AsyncRuntime.resume_conversation)
    get_snapshot = _blocking(AsyncRuntime.get_snapshot)
    replay_conversation = _blocking(AsyncRuntime.replay_conversation)

    def stream_events(
        self, conversation_id: str, *, after_offset: Optional[int] = None
    ) -> Iterator[models.RuntimeEvent]:
        """The conversation's events as they are appended, each once and in order,
        reconnecting after a drop (see `AsyncRuntime.stream_events`). Stop by leaving the
        loop; the connection closes."""
        stream: AsyncIterator[models.RuntimeEvent] = self._async.stream_events(
            conversation_id, after_offset=after_offset
        )

        async def next_event() -> models.RuntimeEvent:
            return await stream.__anext__()

        try:
            while True:
                try:
                    yield self._loop.run(next_event())
                except StopAsyncIteration:
                    return
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                self._loop.run(close())


class Client:
    """The blocking client of a Cairn daemon; the same surface as `AsyncClient`.

    `base_url` and `api_key` default to `CAIRN_URL` and `CAIRN_API_KEY`, else
    `http://127.0.0.1:8787` and no key. Use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
    ) -> None:
        self._loop = _Loop()

        async def make() -> AsyncClient:
            return AsyncClient(base_url, api_key, timeout=timeout, max_retries=max_retries)

        self._async = self._loop.run(make())
        self.base_url = self._async.base_url
        self.memories = Memories(self._loop, self._async.memories)
        self.conflicts = Conflicts(self._loop, self._async.conflicts)
        self.review = Review(self._loop, self._async.review)
        self.connectors = Connectors(self._loop, self._async.connectors)
        self.runtime = Runtime(self._loop, self._async.runtime)

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.loop.is_closed():
            return
        self._loop.run(self._async.aclose())
        self._loop.stop()

    health = _blocking(AsyncClient.health)
    search = _blocking(AsyncClient.search)
    context = _blocking(AsyncClient.context)
    coding_context = _blocking(AsyncClient.coding_context)
    guard = _blocking(AsyncClient.guard)
    outcome = _blocking(AsyncClient.outcome)
    patch_evidence = _blocking(AsyncClient.patch_evidence)
    evidence_pack = _blocking(AsyncClient.evidence_pack)
    dream_cycle = _blocking(AsyncClient.dream_cycle)
    erase = _blocking(AsyncClient.erase)

