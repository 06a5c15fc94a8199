"""A real daemon for the tests: `cairn serve` (`$CAIRN_BIN`, else the workspace's release,
else debug build) on a free loopback port with a temporary data directory, rate limits off.
The tests fail, never skip, without one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[3]


def cairn_bin() -> str:
    given = os.environ.get("CAIRN_BIN")
    candidates = [given] if given else [str(ROOT / "target/release/cairn"), str(ROOT / "target/debug/cairn")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise RuntimeError(
        f"no cairn binary at {candidates}: build it (cargo build --release -p cairn-cli) or set "
        "CAIRN_BIN. These tests run against the real daemon and are never skipped."
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Daemon:
    """A `cairn serve` process; `restart()` brings it back on the same port and data."""

    def __init__(self, args: Optional[List[str]] = None, keys: Sequence[str] = ()) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="cairn-python-")
        # Where connectors may read: the daemon refuses folders outside its roots.
        self.sources = Path(self.data_dir) / "sources"
        self.sources.mkdir()
        self.port = free_port()
        self.args = [*(args or []), "--connector-root", str(self.sources)]
        self.process: Optional[subprocess.Popen[str]] = None
        # API keys made before the start, by role (the production profile needs one).
        self.keys = {role: self.key(role) for role in keys}
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ, RUST_LOG="warn")
        env.setdefault("SERVICE_EMBEDDER", "none")
        for limit in ("READ", "WRITE", "CONTEXT", "BULK", "START"):
            env.setdefault(f"SERVICE_RATE_LIMIT_{limit}", "0")
        log = open(Path(self.data_dir) / "daemon.log", "a")
        self.process = subprocess.Popen(
            [cairn_bin(), "serve", "--port", str(self.port), "--data-dir", self.data_dir, *self.args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("cairn listening on"):
            raise RuntimeError(f"cairn serve did not start: {line!r}; {self.log()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self) -> None:
        self.stop()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.start()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def key(self, role: str) -> str:
        made = subprocess.run(
            [cairn_bin(), "keys", "create", "--role", role, "--data-dir", self.data_dir],
            capture_output=True, text=True, check=True,
        )
        return made.stdout.strip().splitlines()[-1].strip()

    def log(self) -> str:
        path = Path(self.data_dir) / "daemon.log"
        return path.read_text()[-3000:] if path.exists() else "(no log)"

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    started = Daemon()
    yield started
    started.remove()


@pytest.fixture()
def own_daemon() -> Iterator[Daemon]:
    """A daemon of the test's own (one it may restart or stop)."""
    started = Daemon()
    yield started
    started.remove()
