"""RFC 9457 problem objects, shared by HTTP and MCP so both say the same thing."""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest, NotFound, Unsupported

__all__ = ["PROBLEM_TYPE", "invalid_problem", "problem", "problem_for"]

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


def problem_for(exc: BaseException) -> dict[str, Any]:
    """The problem object for any error: one table for HTTP and MCP."""
    if isinstance(exc, InvalidRequest):
        return invalid_problem(exc)
    if isinstance(exc, NotFound):
        return problem(404, "Not found", str(exc))
    if isinstance(exc, Unsupported):
        return problem(405, "Not supported", exc.reason)
    return problem(500, "Internal error", "the gateway could not answer")
