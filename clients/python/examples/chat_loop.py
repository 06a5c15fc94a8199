"""A small chat over the conversation runtime: each line you type (or pass as arguments) is
sent to the agent, and every event of the conversation is printed as it streams.
The daemon: CAIRN_URL (and CAIRN_API_KEY).

    python examples/chat_loop.py "hello" "I'd like to book a demo"
"""

from __future__ import annotations

import asyncio
import sys
from typing import List

from cairn_client import AsyncClient


async def main(lines: List[str]) -> None:
    async with AsyncClient() as cairn:
        conversation = (await cairn.runtime.create_conversation(channel="web")).conversation
        print(f"conversation {conversation.id}")

        async def show_events() -> None:
            async for event in cairn.runtime.stream_events(conversation.id):
                detail = event.data.get("text") or event.data.get("label") or ""
                print(f"  [{event.offset}] {event.type} {detail}".rstrip())

        printer = asyncio.create_task(show_events())
        for line in lines:
            print(f"> {line}")
            reply = await cairn.runtime.send_message(conversation.id, line)
            print(f"< {reply.text}")
            await asyncio.sleep(0.2)
        printer.cancel()


if __name__ == "__main__":
    given = sys.argv[1:] or [line.strip() for line in sys.stdin if line.strip()]
    asyncio.run(main(given))
