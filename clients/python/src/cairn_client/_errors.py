"""The two errors a call raises: the daemon refused it, or the daemon could not be reached."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["CairnError", "ServiceApiError", "ConnectionError"]


class CairnError(Exception):
    """Every error this package raises."""


class ServiceApiError(CairnError):
    """The daemon answered with an error: its envelope's `code` and `message`, the HTTP
    `status`, the parsed `body`, and the `request_id` the daemon gave the request."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: Any = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.request_id = request_id


class ConnectionError(CairnError):  # noqa: A001 - the name users expect, in our namespace
    """The daemon could not be reached (refused, reset, timed out), after the retries."""

    def __init__(self, message: str, cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.cause = cause
