"""The HTTP side of the clients: one async transport (httpx) that sends JSON, retries what
is safe to retry with an idempotency key, turns failures into this package's errors, and
reads event streams."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import uuid
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Tuple, Type, TypeVar

import httpx

from ._convert import Model
from ._errors import ConnectionError, ServiceApiError

M = TypeVar("M", bound=Model)

DEFAULT_BASE_URL = "http://127.0.0.1:8787"
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 2
#: Statuses another try may answer differently: the daemon or a proxy before it was busy.
RETRY_STATUSES = frozenset({502, 503, 504})
#: A stream is opened again after a drop, waiting this long at first, doubled up to the most.
STREAM_RETRY_FIRST = 0.25
STREAM_RETRY_MAX = 5.0


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_json(value: Any) -> Any:
    """Keyword arguments as the daemon's JSON: snake_case keys in camelCase, `None` left out
    (nested dictionaries are passed as given)."""
    if isinstance(value, Mapping):
        return {camel(str(key)): item for key, item in value.items() if item is not None}
    return value


def credentials(api_key: Optional[str]) -> Dict[str, str]:
    """The header a credential goes in: API keys (`cairn_…`) as `X-API-Key`, conversation
    tokens and JWTs as a bearer."""
    if not api_key:
        return {}
    if api_key.startswith("cairn_"):
        return {"X-API-Key": api_key}
    return {"Authorization": f"Bearer {api_key}"}


def settings(
    base_url: Optional[str], api_key: Optional[str]
) -> Tuple[str, Optional[str]]:
    """The base URL and key, from the arguments, else `CAIRN_URL` and `CAIRN_API_KEY`."""
    url = base_url or os.environ.get("CAIRN_URL") or DEFAULT_BASE_URL
    key = api_key if api_key is not None else os.environ.get("CAIRN_API_KEY") or None
    return url.rstrip("/"), key


class Transport:
    def __init__(
        self,
        base_url: Optional[str],
        api_key: Optional[str],
        timeout: float,
        max_retries: int,
        http_client: Optional[httpx.AsyncClient],
    ) -> None:
        self.base_url, key = settings(base_url, api_key)
        self.max_retries = max_retries
        headers = {"User-Agent": "cairn-client-python", **credentials(key)}
        self.http = http_client or httpx.AsyncClient(timeout=timeout)
        self.headers = headers

    async def close(self) -> None:
        await self.http.aclose()

    async def call(
        self,
        method: str,
        path: str,
        model: Type[M],
        *,
        body: Any = None,
        query: Optional[Mapping[str, Any]] = None,
    ) -> M:
        data = await self.request(method, path, body=body, query=query)
        return model.from_json(data if isinstance(data, dict) else {})

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Optional[Mapping[str, Any]] = None,
    ) -> Any:
        """Sends one request, retrying connection failures and 502/503/504 with backoff. A
        write carries one `Idempotency-Key` for all its tries, so a retried write is applied
        once."""
        headers = dict(self.headers)
        if method != "GET":
            headers["Idempotency-Key"] = f"py-{uuid.uuid4().hex}"
        params = {camel(k): _query_value(v) for k, v in (query or {}).items() if v is not None}
        content = None if body is None else json.dumps(to_json(body))
        if content is not None:
            headers["Content-Type"] = "application/json"
        url = self.base_url + path
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = await self.http.request(
                    method, url, params=params, content=content, headers=headers
                )
            except httpx.TransportError as error:
                if last:
                    raise ConnectionError(f"cannot reach the daemon at {self.base_url}: {error}", error) from None
                await asyncio.sleep(_backoff(attempt, None))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                await asyncio.sleep(_backoff(attempt, response.headers.get("retry-after")))
                continue
            return _answer(response)
        raise AssertionError("unreachable")

    async def events(self, path: str, after_offset: Optional[int]) -> AsyncIterator[Dict[str, Any]]:
        """The events of an SSE stream, each once and in order: after a dropped connection
        the stream is opened again with `Last-Event-ID` set to the last offset delivered."""
        last = after_offset
        delay = STREAM_RETRY_FIRST
        url = self.base_url + path
        while True:
            headers = dict(self.headers, Accept="text/event-stream")
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                async with self.http.stream(
                    "GET", url, headers=headers, timeout=httpx.Timeout(None, connect=10.0)
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        error = _error(response)
                        if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                            raise error
                    else:
                        delay = STREAM_RETRY_FIRST
                        async for frame in _frames(response):
                            event = json.loads(frame)
                            offset = event.get("offset")
                            if not isinstance(offset, int) or (last is not None and offset <= last):
                                continue
                            last = offset
                            yield event
            except httpx.TransportError:
                pass
            await asyncio.sleep(delay)
            delay = min(delay * 2, STREAM_RETRY_MAX)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _backoff(attempt: int, retry_after: Optional[str]) -> float:
    if retry_after is not None and retry_after.isdigit():
        return min(float(retry_after), 10.0)
    return min(0.2 * 2.0**attempt, 2.0) * (0.5 + random.random() / 2)


def _answer(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    if not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        return response.json()
    return response.text


def _error(response: httpx.Response) -> ServiceApiError:
    request_id = response.headers.get("x-request-id")
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    envelope = body.get("error") if isinstance(body, dict) else None
    if isinstance(envelope, dict):
        code = str(envelope.get("code") or "ERROR")
        message = str(envelope.get("message") or response.reason_phrase)
    else:
        code, message = "HTTP_ERROR", f"the daemon answered {response.status_code} {response.reason_phrase}"
    return ServiceApiError(response.status_code, code, message, body, request_id)


async def _frames(response: httpx.Response) -> AsyncIterator[str]:
    """The `data` of each event of a `text/event-stream` body (fields joined by newlines)."""
    data: List[str] = []
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(re.sub(r"^ ", "", line[5:]))
    if data:
        yield "\n".join(data)
