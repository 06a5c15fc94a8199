"""Errors of each kind, and writes retried once with one idempotency key, against the real
daemon (a flaky proxy in front of it answers 503 to the first try)."""

from __future__ import annotations

import http.client
import http.server
import threading
from typing import Dict, Iterator, List
from urllib.parse import urlsplit

import pytest

from cairn_client import Client, ConnectionError, ServiceApiError

from conftest import Daemon, free_port


def test_failed_answers_raise_service_api_errors_with_the_envelope(daemon: Daemon) -> None:
    with Client(daemon.url, max_retries=0) as cairn:
        with pytest.raises(ServiceApiError) as missing:
            cairn.memories.get("mem_nothing_here")
        assert missing.value.status == 404 and missing.value.code == "MEMORY_NOT_FOUND"
        assert "mem_nothing_here" in missing.value.message
        assert missing.value.request_id is not None and missing.value.request_id.startswith("req_")
        assert missing.value.body["error"]["code"] == "MEMORY_NOT_FOUND"

        with pytest.raises(ServiceApiError) as invalid:
            cairn.memories.create(content="", scope="repo")
        assert invalid.value.status == 422 and invalid.value.code == "VALIDATION_ERROR"

        conversation = cairn.runtime.create_conversation().conversation
        cairn.runtime.close_conversation(conversation.id)
        with pytest.raises(ServiceApiError) as closed:
            cairn.runtime.send_message(conversation.id, "hello?")
        assert closed.value.status == 409


def test_credentials_refused_are_401_and_403() -> None:
    production = Daemon(["--profile", "production"], keys=["read"])
    try:
        with Client(production.url, max_retries=0) as anonymous:
            with pytest.raises(ServiceApiError) as refused:
                anonymous.memories.list()
            assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED"
        with Client(production.url, api_key=production.keys["read"], max_retries=0) as reader:
            assert reader.memories.list().total == 0
            with pytest.raises(ServiceApiError) as forbidden:
                reader.memories.create(content="a reader may not write", scope="global")
            assert forbidden.value.status == 403 and forbidden.value.code == "FORBIDDEN"
    finally:
        production.remove()


def test_an_unreachable_daemon_is_a_connection_error() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", max_retries=1) as cairn:
        with pytest.raises(ConnectionError) as failed:
            cairn.health()
        assert "cannot reach the daemon" in str(failed.value)


class FlakyProxy:
    """Forwards requests to the daemon, answering 503 to the first try of each write; it
    records each request's method, path and Idempotency-Key."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.seen: List[Dict[str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                key = self.headers.get("idempotency-key") or ""
                proxy.seen.append({"method": self.command, "path": self.path, "key": key})
                tries = [seen for seen in proxy.seen if seen["key"] == key]
                if self.command != "GET" and len(tries) == 1:
                    self.send_response(503)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture()
def flaky(daemon: Daemon) -> Iterator[FlakyProxy]:
    proxy = FlakyProxy(daemon.url)
    yield proxy
    proxy.server.shutdown()


def test_a_write_refused_with_503_is_retried_with_the_same_key_and_applied_once(daemon: Daemon, flaky: FlakyProxy) -> None:
    with Client(flaky.url) as cairn:
        created = cairn.memories.create(content="Retried writes are applied once.", scope="global")
    writes = [seen for seen in flaky.seen if seen["method"] == "POST"]
    assert len(writes) == 2 and writes[0]["key"] == writes[1]["key"] and writes[0]["key"]
    with Client(daemon.url) as direct:
        same = [m for m in direct.memories.list(limit=200).memories if m.content == created.content]
        assert [m.id for m in same] == [created.id]
