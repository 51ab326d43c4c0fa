"""RFC 9457 problem objects, shared by HTTP and MCP so both say the same thing."""

from __future__ import annotations

import math
from typing import Any

from gateway.errors import CallerLimited, InvalidRequest, NotFound, Overloaded, Unsupported

__all__ = ["PROBLEM_TYPE", "invalid_problem", "overloaded_problem", "problem", "problem_for"]

PROBLEM_TYPE = "application/problem+json"


def problem(status: int, title: str, detail: str, field: str | None = None) -> dict[str, Any]:
    """An RFC 9457 problem object; ``field`` names the offending input."""
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if field:
        body["field"] = field
    return body


def invalid_problem(exc: InvalidRequest) -> dict[str, Any]:
    """The 400 problem for an invalid request: the same on HTTP and MCP."""
    return problem(400, "Invalid request", exc.message, exc.field)


def overloaded_problem(exc: Overloaded) -> dict[str, Any]:
    """The 503 problem for a request refused beyond capacity (429 for one caller past its share or
    quota, ``reason`` saying which): ``retry_after`` (whole seconds, at least 1) is what HTTP also
    sends as ``Retry-After``, for callers that see no headers (MCP)."""
    body = problem(exc.status, exc.title, exc.detail)
    if isinstance(exc, CallerLimited):
        body["reason"] = exc.reason
    body["retry_after"] = max(1, math.ceil(exc.retry_after))
    return body


def problem_for(exc: BaseException) -> dict[str, Any]:
    """The problem object for any error: one table for HTTP and MCP."""
    if isinstance(exc, InvalidRequest):
        return invalid_problem(exc)
    if isinstance(exc, Overloaded):
        return overloaded_problem(exc)
    if isinstance(exc, NotFound):
        return problem(404, "Not found", str(exc))
    if isinstance(exc, Unsupported):
        return problem(405, "Not supported", exc.reason)
    return problem(500, "Internal error", "the gateway could not answer")
