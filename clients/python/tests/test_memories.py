"""The memory API through both clients, against the real daemon."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path

from cairn_client import AsyncClient, Client, models

from conftest import Daemon


def test_every_memory_call_with_the_blocking_client(daemon: Daemon) -> None:
    with Client(daemon.url) as cairn:
        health = cairn.health()
        assert isinstance(health, models.Health) and health.status == "healthy"

        created = cairn.memories.create(
            content="Use pnpm, not npm, in this repo.", scope="repo", repo="shop", tags=["tooling"]
        )
        assert created.id.startswith("mem_") and created.repo == "shop" and created.tags == ["tooling"]
        assert created.raw["content"] == "Use pnpm, not npm, in this repo."

        batch = cairn.memories.create_many(
            [
                {"content": "The staging database is read-only on Fridays.", "scope": "global"},
                {"content": "Run cargo test before pushing.", "scope": "repo", "repo": "shop"},
            ]
        )
        assert [memory.content for memory in batch.memories][1] == "Run cargo test before pushing."

        got = cairn.memories.get(created.id)
        assert got.content == created.content and got.recall_count == 0
        listed = cairn.memories.list(scope="repo", repo="shop", limit=10)
        assert {memory.id for memory in listed.memories} >= {created.id, batch.memories[1].id}
        assert listed.limit == 10 and listed.total >= 2

        updated = cairn.memories.update(created.id, tags=["tooling", "npm"])
        assert updated.tags == ["tooling", "npm"]
        archived = cairn.memories.archive(created.id)
        assert archived.archived_at is not None
        assert created.id not in {m.id for m in cairn.memories.list(scope="repo", repo="shop").memories}
        restored = cairn.memories.restore(created.id)
        assert restored.archived_at is None

        hits = cairn.search("pnpm", repo="shop")
        assert hits.hits[0].memory.id == created.id and hits.hits[0].score > 0

        pack = cairn.context(task="add a dependency with npm", repo="shop", token_budget=400)
        assert created.id in pack.memory_ids
        assert pack.memories_used >= 1 and 0 < pack.token_count <= 400
        coding = cairn.coding_context(task="add a dependency", files=["package.json"], repo="shop")
        assert [entry.path for entry in coding.files] == ["package.json"]

        verdict = cairn.guard("git push --force origin main", repo="shop")
        assert verdict.allowed is False and verdict.blockers

        outcome = cairn.outcome(command="cargo test", exit_code=1, task="fix the build", repo="shop")
        assert outcome.raw
        evidence = cairn.patch_evidence(task="fix the build", files=["src/lib.rs"], commands=["cargo test"])
        assert evidence.task == "fix the build"
        pack = cairn.evidence_pack(task="fix the build")
        assert pack.raw

        dream = cairn.dream_cycle(dry_run=True)
        assert dream.raw and dream.dry_run is True
        assert isinstance(cairn.conflicts.list().conflicts, list)
        assert isinstance(cairn.review.queue().memories, list)
        assert cairn.review.audit(memory_id=created.id).entries

        with tempfile.TemporaryDirectory(dir=daemon.sources) as folder:
            (Path(folder) / "notes.md").write_text("# Deploys\n\nDeploys happen on Tuesdays.\n")
            connector = cairn.connectors.add(kind="folder", path=folder, scope="global")
            assert connector.id in {c.id for c in cairn.connectors.list().connectors}
            report = cairn.connectors.sync(connector.id)
            assert report.raw
            assert cairn.connectors.health(connector.id).raw
            assert cairn.connectors.get(connector.id).id == connector.id
            assert cairn.connectors.remove(connector.id).raw

        erased = cairn.erase(memory_ids=[batch.memories[0].id])
        assert erased.raw
        assert batch.memories[0].id not in {m.id for m in cairn.memories.list(limit=200).memories}


def test_the_async_client_has_the_same_surface(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.url) as cairn:
            created = await cairn.memories.create(content="Deploy with make release.", scope="global")
            assert (await cairn.memories.get(created.id)).content == "Deploy with make release."
            found = await cairn.search("make release")
            assert found.hits[0].memory.id == created.id
            pack = await cairn.context(task="how do we deploy")
            assert created.id in pack.memory_ids
            assert (await cairn.guard("ls")).allowed is True
            assert (await cairn.health()).memory_count >= 1

    asyncio.run(scenario())


def test_url_and_key_come_from_the_environment_as_the_cli_reads_them() -> None:
    production = Daemon(["--profile", "production"], keys=["write"])
    try:
        key = production.keys["write"]
        env = {"CAIRN_URL": production.url, "CAIRN_API_KEY": key}
        script = (
            "from cairn_client import Client\n"
            "with Client() as cairn:\n"
            "    print(cairn.memories.create(content='from the environment', scope='global').content)\n"
        )
        import os
        import sys

        ran = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "from the environment"
    finally:
        production.remove()
