"""The two examples, run as a user runs them, against the real daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cairn_client import Client

from conftest import Daemon

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAIRN_URL": daemon.url}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_coding_agent_asks_for_context_and_the_guard_and_records_the_outcome(daemon: Daemon) -> None:
    with Client(daemon.url) as cairn:
        cairn.memories.create(content="Run the example tests with python -c in the demo repo.", scope="repo", repo="demo")
    ran = run(daemon, str(EXAMPLES / "coding_agent.py"), "run the example tests", "python3 -c 'print(42)'", "demo")
    assert ran.returncode == 0, ran.stderr
    assert "context: 1 memories" in ran.stdout and "42" in ran.stdout
    assert "outcome recorded: exit code 0" in ran.stdout

    blocked = run(daemon, str(EXAMPLES / "coding_agent.py"), "clean up", "git push --force origin main", "demo")
    assert blocked.returncode == 2, blocked.stdout + blocked.stderr
    assert "blocked:" in blocked.stdout


def test_the_chat_loop_prints_the_replies_and_the_streamed_events(daemon: Daemon) -> None:
    ran = run(daemon, str(EXAMPLES / "chat_loop.py"), "hello", "I'd like to book a demo")
    assert ran.returncode == 0, ran.stderr
    assert "< Hi! I can book a demo for you, or put you through to a person." in ran.stdout
    assert "< Happy to set that up. Where can we reach you?" in ran.stdout
    assert "prompt.opened" in ran.stdout and "] conversation.created" in ran.stdout
