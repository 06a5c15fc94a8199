"""Cairn's MCP tools through the official MCP Python SDK (`mcp` on PyPI), over stdio
(`cairn mcp`) and over streamable HTTP (the daemon's `/mcp`), against real daemons.

Run by `cargo xtask mcp` as: python check.py PATH_TO_CAIRN_BINARY
"""

import asyncio
import os
import subprocess
import sys
import tempfile

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOOLS = {
    "memory_store", "memory_get", "memory_update", "memory_archive", "memory_list",
    "memory_search", "context_pack", "coding_context", "guard_check", "outcome_record",
    "patch_evidence", "evidence_pack", "review_queue", "review_decide", "conflicts_list",
    "conflict_resolve", "dream_cycle", "connectors_list", "connector_sync", "health",
}
READ_ONLY = {
    "memory_get", "memory_list", "memory_search", "context_pack", "coding_context",
    "guard_check", "evidence_pack", "review_queue", "conflicts_list", "connectors_list", "health",
}


class Daemon:
    """`cairn serve` on a free port with a data directory of its own."""

    def __init__(self, cairn, *args, env=None):
        self.data = tempfile.mkdtemp(prefix="cairn-mcp-")
        self.cairn = cairn
        environment = dict(os.environ, RUST_LOG="warn", **(env or {}))
        self.process = subprocess.Popen(
            [cairn, "serve", "--port", "0", "--data-dir", self.data, *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment,
        )
        line = self.process.stdout.readline().strip()
        prefix = "cairn listening on "
        assert line.startswith(prefix), f"unexpected first line: {line!r}"
        self.url = line[len(prefix):]

    def stop(self):
        self.process.kill()
        self.process.wait()


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


async def exercise(client, label):
    """Lists the tools and uses them as an agent would."""
    listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS, f"{label}: tools are {sorted(tools)}"
    for name, tool in tools.items():
        assert tool.input_schema["type"] == "object", (name, tool.input_schema)
        assert tool.annotations is not None, name
        assert bool(tool.annotations.read_only_hint) == (name in READ_ONLY), (name, tool.annotations)
    assert tools["memory_archive"].annotations.destructive_hint is True
    assert "content" in tools["memory_store"].input_schema["required"]

    stored = await client.call_tool(
        "memory_store", {"content": f"Use pnpm, not npm, in the shop repo ({label}).", "repo": "shop"}
    )
    assert not stored.is_error, text_of(stored)
    memory_id = stored.structured_content["id"]
    assert memory_id.startswith("mem_") and memory_id in text_of(stored)

    found = await client.call_tool("memory_search", {"query": "pnpm", "repo": "shop"})
    assert not found.is_error, text_of(found)
    assert memory_id in [hit["memory"]["id"] for hit in found.structured_content["hits"]]

    pack = await client.call_tool(
        "context_pack", {"task": "install dependencies with pnpm", "repo": "shop", "tokenBudget": 500}
    )
    assert not pack.is_error, text_of(pack)
    assert memory_id in pack.structured_content["memoryIds"]
    assert "pnpm" in text_of(pack)

    guard = await client.call_tool("guard_check", {"action": "rm -rf /"})
    assert not guard.is_error, text_of(guard)
    assert guard.structured_content["allowed"] is False
    assert text_of(guard).startswith("Blocked.")

    missing = await client.call_tool("memory_get", {"id": "mem_nope"})
    assert missing.is_error, text_of(missing)
    assert missing.structured_content["error"]["code"] == "MEMORY_NOT_FOUND"
    assert "MEMORY_NOT_FOUND" in text_of(missing)

    bad_scope = await client.call_tool("memory_store", {"content": "x", "scope": "team"})
    assert bad_scope.is_error, text_of(bad_scope)

    health = await client.call_tool("health", {})
    assert not health.is_error and health.structured_content["memoryCount"] >= 1

    # What the model reads: descriptions of every parameter, schemas as the API checks them,
    # unknown arguments refused, and results that carry the content, not only counts.
    for name, tool in tools.items():
        for parameter, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{parameter} has no description"
    budget = tools["context_pack"].input_schema["properties"]["tokenBudget"]
    assert budget.get("minimum") == 1, budget
    unknown = await client.call_tool("guard_check", {"action": "ls", "colour": "blue"})
    assert unknown.is_error, text_of(unknown)
    task = f"switch the shop to pnpm ({label})"
    await client.call_tool("outcome_record", {"command": "pnpm install", "exitCode": 0, "task": task})
    await client.call_tool("patch_evidence", {"task": task, "files": ["package.json"], "commands": ["pnpm install"]})
    evidence = await client.call_tool("evidence_pack", {"task": task})
    assert not evidence.is_error, text_of(evidence)
    assert "package.json" in text_of(evidence) and "pnpm install" in text_of(evidence), text_of(evidence)
    await client.call_tool("memory_store", {"content": f"Use npm in the shop repo ({label}).", "repo": "shop"})
    await client.call_tool("dream_cycle", {})
    conflicts = await client.call_tool("conflicts_list", {})
    assert not conflicts.is_error, text_of(conflicts)
    if "No conflicts." not in text_of(conflicts):
        assert "Use npm" in text_of(conflicts) and "Use pnpm" in text_of(conflicts), text_of(conflicts)


async def main(cairn):
    daemon = Daemon(cairn)
    try:
        stdio = StdioServerParameters(command=cairn, args=["mcp", "--url", daemon.url])
        async with Client(stdio) as client:
            await exercise(client, "stdio")
        async with Client(f"{daemon.url}/mcp") as client:
            await exercise(client, "http")
        async with Client(stdio, mode="legacy") as client:
            await exercise(client, "stdio, initialize handshake")
    finally:
        daemon.stop()

    # In the production profile, /mcp needs credentials like every route; tools act with
    # the caller's role.
    data = tempfile.mkdtemp(prefix="cairn-mcp-keys-")
    key = subprocess.run(
        [cairn, "keys", "create", "--role", "read", "--data-dir", data],
        check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]
    production = subprocess.Popen(
        [cairn, "serve", "--port", "0", "--data-dir", data, "--profile", "production"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, RUST_LOG="warn"),
    )
    try:
        url = production.stdout.readline().strip().removeprefix("cairn listening on ")
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "check", "version": "1"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as http:
            refused = await http.post(f"{url}/mcp", json=initialize, headers=accept)
            assert refused.status_code == 401, refused.status_code
            assert refused.json()["error"]["code"] == "UNAUTHORIZED"
        keyed = httpx2.AsyncClient(headers={"X-API-Key": key})
        async with Client(streamable_http_client(f"{url}/mcp", http_client=keyed)) as client:
            health = await client.call_tool("health", {})
            assert not health.is_error, text_of(health)
            # A read key may not write: the API's 403 is a tool error, not a protocol failure.
            denied = await client.call_tool("memory_store", {"content": "Deploy on Fridays."})
            assert denied.is_error and denied.structured_content["error"]["code"] == "FORBIDDEN", text_of(denied)
    finally:
        production.kill()
        production.wait()
    print("mcp: 4 passed, 0 failed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
