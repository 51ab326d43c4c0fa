"""What the command line says when something goes wrong: one line in the user's words.

Every error a command raises on purpose becomes one line on stderr (``fedsearch:
invalid files: …``, ``fedsearch: cannot reach http://…: connection refused``) and an
exit code; with ``--json`` the same thing is problem JSON (RFC 9457, as HTTP answers)
on stdout. Nothing here names an exception class. A bug is not an error the user made:
it keeps its traceback.
"""

from __future__ import annotations

import sys

from gateway.errors import BackendError, ConfigError, GatewayError, InvalidRequest, NotFound, Overloaded, Unsupported

TYPE_CHECKING = False  # typing itself not imported (a listing's start never loads it)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ServerUnreachable", "hint", "report", "warn"]

EXIT_BAD_INPUT, EXIT_ALL_FAILED = 2, 3


class ServerUnreachable(GatewayError):
    """The gateway named by ``--server`` could not be asked, or did not answer as one."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"{why} at {url}" if why.startswith(("connection ", "no answer")) else f"{url}: {why}")
        self.url = url


def warn(text: str) -> None:
    """A warning on stderr (the answer, on stdout, stays clean)."""
    sys.stderr.write(f"fedsearch: warning: {text}\n")


def hint(text: str) -> None:
    sys.stderr.write(f"fedsearch: hint: {text}\n")


def _problem(status: int, title: str, detail: str, field: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if field:
        body["field"] = field
    return body


def describe(exc: BaseException) -> tuple[str, dict[str, Any], int] | None:
    """(the line for stderr, the problem JSON, the exit code) of an error, or None for a bug."""
    if isinstance(exc, InvalidRequest):
        return f"invalid {exc.field}: {exc.message}", _problem(400, "Invalid request", exc.message, exc.field), 2
    if isinstance(exc, ConfigError):
        problem = _problem(400, "Invalid config", exc.message, exc.key or None)
        return f"config error: {exc}", problem, EXIT_BAD_INPUT
    if isinstance(exc, Overloaded):
        import math

        seconds = max(1, math.ceil(exc.retry_after))
        problem = _problem(exc.status, exc.title, exc.detail)
        problem["retry_after"] = seconds
        what = "the server is at capacity" if exc.status == 503 else "too many requests from this caller"
        return f"{what}, retry in {seconds} s ({exc.detail})", problem, EXIT_ALL_FAILED
    if isinstance(exc, ServerUnreachable):
        return f"cannot reach the server: {exc}", _problem(502, "Server unreachable", str(exc)), EXIT_ALL_FAILED
    if isinstance(exc, NotFound):
        return str(exc), _problem(404, "Not found", str(exc)), EXIT_BAD_INPUT
    if isinstance(exc, Unsupported):
        return exc.reason, _problem(405, "Not supported", exc.reason), EXIT_BAD_INPUT
    if isinstance(exc, BackendError):
        return exc.reason, _problem(502, "Backend failed", exc.reason), EXIT_ALL_FAILED
    if isinstance(exc, GatewayError):
        return str(exc), _problem(400, "Bad request", str(exc)), EXIT_BAD_INPUT
    return None


def report(exc: Exception, json: bool = False) -> int:
    """Say what went wrong (stderr, or problem JSON on stdout with ``json``) and return the exit code."""
    described = describe(exc)
    if described is None:
        raise exc
    line, problem, code = described
    if json:
        import json as jsonlib

        sys.stdout.write(jsonlib.dumps(problem, ensure_ascii=False) + "\n")
    else:
        sys.stderr.write(f"fedsearch: {line}\n")
    return code
