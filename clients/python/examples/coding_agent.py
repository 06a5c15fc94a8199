"""A coding agent's loop around one shell command: the context pack for the task, the guard
before the command runs, the outcome after. The daemon: CAIRN_URL (and CAIRN_API_KEY).

    python examples/coding_agent.py "run the tests" "python -c 'print(42)'" [repo]
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from cairn_client import Client


def main() -> int:
    task, command = sys.argv[1], sys.argv[2]
    repo = sys.argv[3] if len(sys.argv) > 3 else None
    with Client() as cairn:
        pack = cairn.context(task=task, repo=repo, token_budget=800)
        print(f"context: {pack.memories_used} memories, {pack.token_count} tokens")
        if pack.context:
            print(pack.context)
        verdict = cairn.guard(command, repo=repo)
        for warning in verdict.warnings:
            print(f"warning: {warning}")
        if not verdict.allowed:
            for blocker in verdict.blockers:
                print(f"blocked: {blocker}")
            return 2
        ran = subprocess.run(shlex.split(command))
        cairn.outcome(command=command, exit_code=ran.returncode, task=task, repo=repo)
        print(f"outcome recorded: exit code {ran.returncode}")
        return ran.returncode


if __name__ == "__main__":
    sys.exit(main())
