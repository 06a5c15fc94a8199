"""The conversation runtime through both clients, against the real daemon: messages,
widgets, a handoff, the variant channel events, and the event stream across a restart."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import pytest

from cairn_client import AsyncClient, Client, ServiceApiError, models

from conftest import Daemon


def test_a_conversation_with_messages_a_widget_and_a_handoff(daemon: Daemon) -> None:
    with Client(daemon.url) as cairn:
        runtime = cairn.runtime
        conversation = runtime.create_conversation(channel="web", context={"page": "/pricing"}).conversation
        assert conversation.id.startswith("conv_") and conversation.lifecycle == "active"

        hello = runtime.send_message(conversation.id, "hello")
        assert hello.text == "Hi! I can book a demo for you, or put you through to a person."
        booking = runtime.send_message(conversation.id, "I would like to book a demo")
        assert booking.active_journey_id == "book_demo"
        prompt = next(event for event in booking.events if event.type == "prompt.opened")
        submitted = runtime.submit_widget(
            conversation.id,
            prompt_id=prompt.data["promptId"],
            widget_kind="form",
            output={"name": "Ada", "email": "ada@example.com"},
        )
        assert submitted.event.type == "prompt.submitted"
        replay = runtime.replay_conversation(conversation.id)
        assert replay.messages[-1].text.startswith("Thanks Ada, we will write to ada@example.com")
        assert replay.open_prompts == []

        page = runtime.list_events(conversation.id, limit=2)
        assert [event.offset for event in page.events] == [0, 1] and page.next_after_offset == 1
        everything = runtime.list_events(conversation.id)
        assert [event.offset for event in everything.events] == list(range(len(everything.events)))

        assert runtime.emit_custom_event(conversation.id, "page.viewed", payload={"url": "https://example.com/pricing"}).event.type == "custom"
        note = runtime.emit_intermediate_message(conversation.id, "Checking the calendar…")
        assert note.events[0].data["intermediate"] is True
        preamble = runtime.emit_generated_preamble(conversation.id, purpose="check the calendar", max_words=3)
        assert len(preamble.text.split()) <= 3
        journey = runtime.emit_journey_event(conversation.id, "feedback.requested")
        assert journey.snapshot.active_journey_id == "feedback"
        compacted = runtime.compact_conversation(conversation.id)
        assert compacted.summary["schemaVersion"] == "1"

        handed = runtime.request_handoff(conversation.id, reason="billing question", summary="wants a refund")
        assert handed.conversation.lifecycle == "handoff" and handed.event.type == "conversation.handoff"
        quiet = runtime.send_message(conversation.id, "hello?")
        assert quiet.text == ""
        assert runtime.resume_conversation(conversation.id).conversation.lifecycle == "active"
        assert runtime.get_snapshot(conversation.id).snapshot.lifecycle == "active"
        closed = runtime.close_conversation(conversation.id, reason="solved")
        assert closed.conversation.lifecycle == "closed"

        listed = runtime.list_conversations(limit=50)
        assert conversation.id in {c.id for c in listed.conversations}
        assert listed.last_messages[conversation.id].role == "user"


def test_channel_events_of_each_kind(daemon: Daemon) -> None:
    with Client(daemon.url) as cairn:
        runtime = cairn.runtime
        first = runtime.receive_message(channel={"type": "sms", "id": "+15550100"}, text="hello", conversation_id="sms-py-1")
        assert first.created is True and first.text is not None
        conversation_id = first.conversation.id
        for result, kind in [
            (runtime.record_provider_update(conversation_id=conversation_id, channel="sms", provider="twilio", provider_object={"sid": "SM1"}), "provider-object"),
            (runtime.request_outbound_contact(conversation_id=conversation_id, channel="sms", text="We called you back"), "outbound-contact"),
            (runtime.submit_scheduled_event(conversation_id=conversation_id, channel="sms", payload={"name": "reminder"}), "scheduled"),
            (runtime.record_channel_output_resolution(conversation_id=conversation_id, channel="sms", status="delivered"), "output-resolution"),
            (runtime.request_channel_handoff_review(conversation_id=conversation_id, channel="sms", reason="check"), "handoff-review"),
        ]:
            assert result.events[0].data["nature"] == kind, result.raw
        voice = runtime.finalize_voice_turn(conversation_id=conversation_id, transcript="thanks")
        assert voice.events[0].data["nature"] == "voice-turn"
        handoff = runtime.request_channel_handoff(conversation_id=conversation_id, channel="sms", reason="asked for a person")
        assert handoff.conversation.lifecycle == "handoff"
        with pytest.raises(ValueError, match="needs a `channel`"):
            runtime.submit_scheduled_event(channel=None)

        started = runtime.start_voice_conversation()
        assert started.socket.url.startswith("ws://") and "token=vst_" in started.socket.url
        assert started.socket.protocol == "service.voice.v1" and started.socket.token.startswith("vst_")
        segment = runtime.start_voice_segment(started.conversation.id)
        assert segment.channel_segment.channel == "voice"


def test_the_event_stream_reconnects_after_a_restart_and_never_repeats_an_event(own_daemon: Daemon) -> None:
    with Client(own_daemon.url) as cairn:
        conversation = cairn.runtime.create_conversation().conversation
        cairn.runtime.send_message(conversation.id, "hello")
        seen: List[models.RuntimeEvent] = []
        done = threading.Event()

        def follow() -> None:
            with Client(own_daemon.url) as reader:
                for event in reader.runtime.stream_events(conversation.id):
                    seen.append(event)
                    if event.type == "message" and event.data.get("text") == "Of course. I'll pass this conversation to a person on the team.":
                        done.set()
                        return

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while len(seen) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        own_daemon.restart()
        cairn.runtime.send_message(conversation.id, "Can I talk to a human please?")
        assert done.wait(30), [event.type for event in seen]
        thread.join(10)
        offsets = [event.offset for event in seen]
        assert offsets == list(range(len(offsets))), offsets
        assert [event.id for event in seen] == [e.id for e in cairn.runtime.list_events(conversation.id).events][: len(seen)]


def test_the_async_stream_yields_the_log_then_new_events(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.url) as cairn:
            conversation = (await cairn.runtime.create_conversation()).conversation
            await cairn.runtime.send_message(conversation.id, "hello")
            seen: List[int] = []

            async def follow() -> None:
                async for event in cairn.runtime.stream_events(conversation.id, after_offset=1):
                    seen.append(event.offset)
                    if event.type == "message" and event.data.get("text") == "You're welcome!":
                        return

            task = asyncio.create_task(follow())
            await asyncio.sleep(0.3)
            await cairn.runtime.send_message(conversation.id, "thanks")
            await asyncio.wait_for(task, 15)
            assert seen[0] == 2 and seen == list(range(2, seen[-1] + 1))

    asyncio.run(scenario())


def test_an_unknown_conversations_stream_raises(daemon: Daemon) -> None:
    with Client(daemon.url) as cairn:
        with pytest.raises(ServiceApiError) as refused:
            next(iter(cairn.runtime.stream_events("conv_nobody")))
        assert refused.value.status == 404 and refused.value.code == "CONVERSATION_NOT_FOUND"
