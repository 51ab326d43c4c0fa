"""A small client for a running gateway (``--server URL``): the standard library's http.client.

One request a call (a one-shot command makes one, or one a page), so no event loop and
no aiohttp to import. The request goes as it was given: the server validates it, and
its 400 problem names the field exactly as a local search would. ``http://`` is assumed
when the URL has no scheme; every failure is a sentence (``connection refused at
http://127.0.0.1:8080``), never an exception's name.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.cli.messages import ServerUnreachable
from gateway.errors import CallerLimited, InvalidRequest, NotFound, Overloaded

__all__ = ["TIMEOUT_S", "Client", "server_url"]

#: The longest a gateway may take to answer (its own deadline is at most 60 s).
TIMEOUT_S = 70.0


def server_url(given: str) -> str:
    """``given`` with ``http://`` when it has no scheme, without a trailing slash; InvalidRequest if it is no URL."""
    url = given.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise InvalidRequest("server", f"{given!r} is not an http:// or https:// URL")
    try:
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError:
        raise InvalidRequest("server", f"{given!r} has a port that is not a number") from None
    if not parts.hostname:
        raise InvalidRequest("server", f"{given!r} names no host")
    return url.rstrip("/")


def _why(exc: BaseException) -> str:
    """What went wrong talking to the server, in words."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "no such host"
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_S:.0f} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or 'handshake'})"
    if isinstance(exc, ConnectionResetError | BrokenPipeError | http.client.RemoteDisconnected):
        return "the connection was closed before an answer"
    if isinstance(exc, http.client.HTTPException):
        return "the answer was not HTTP"
    if isinstance(exc, OSError) and exc.strerror:
        return f"connection failed ({exc.strerror.lower()})"
    return "connection failed"


def _retry_after(body: Any, header: str | None) -> float | None:
    """A 503's retry time: the problem's ``retry_after``, else the ``Retry-After`` seconds."""
    given = body.get("retry_after") if isinstance(body, dict) else None
    if isinstance(given, int | float) and not isinstance(given, bool):
        return float(given)
    if header is not None and header.strip().isdigit():
        return float(header.strip())
    return None


class Client:
    """Calls to one gateway, on one connection kept open between them."""

    def __init__(self, server: str) -> None:
        self.url = server_url(server)
        parts = urlsplit(self.url)
        self._base = parts.path.rstrip("/")
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn = cls(parts.hostname or "", parts.port, timeout=TIMEOUT_S)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self._conn.close()

    def _call(self, method: str, route: str, body: Any = None) -> tuple[int, bytes, http.client.HTTPMessage]:
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            self._conn.request(method, self._base + route, body=payload, headers=headers)
            resp = self._conn.getresponse()
            return resp.status, resp.read(), resp.headers
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise ServerUnreachable(self.url, _why(exc)) from None

    def _json(self, answered: tuple[int, bytes, http.client.HTTPMessage], what: str) -> Any:
        status, raw, headers = answered
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = None
        if status == 200 and data is not None:
            return data
        detail = data.get("detail") if isinstance(data, dict) else None
        if status == 400 and isinstance(data, dict):
            raise InvalidRequest(str(data.get("field") or "request"), str(detail or "invalid request"))
        if status == 404 and detail:
            raise NotFound(str(detail))
        if status == 401:
            raise ServerUnreachable(self.url, "the server asks for a token (401)")
        if status == 503 and (retry := _retry_after(data, headers.get("Retry-After"))) is not None:
            raise Overloaded(str(detail or "the server is at capacity"), retry)
        if status == 429 and (retry := _retry_after(data, headers.get("Retry-After"))) is not None:
            reason = data.get("reason") if isinstance(data, dict) else None
            raise CallerLimited(str(detail or "too many requests"), retry, str(reason or "share"))
        if status == 404:
            raise ServerUnreachable(self.url, f"no {what} here (404): is it a fedsearch server?")
        if status == 200:
            raise ServerUnreachable(self.url, f"the {what} answer is not JSON: is it a fedsearch server?")
        raise ServerUnreachable(self.url, f"HTTP {status}" + (f": {detail}" if detail else ""))

    def search(self, data: dict[str, Any]) -> dict[str, Any]:
        """The server's answer to a request (POST /v1/search)."""
        answer: dict[str, Any] = self._json(self._call("POST", "/v1/search", data), "search")
        return answer

    def namespaces(self) -> list[dict[str, Any]]:
        """The namespaces the server lets us see (GET /v1/namespaces)."""
        data = self._json(self._call("GET", "/v1/namespaces"), "namespace list")
        items: list[dict[str, Any]] = data["namespaces"] if isinstance(data, dict) else data
        return items

    def read(self, namespace: str, path: str, start: int | None, end: int | None) -> dict[str, Any]:
        """Lines of a file (GET /v1/files/NS/PATH), as :meth:`SearchService.read_file` gives them."""
        query = "&".join(f"{k}={v}" for k, v in (("start_line", start), ("end_line", end)) if v is not None)
        route = f"/v1/files/{quote(namespace)}/{quote(path)}" + (f"?{query}" if query else "")
        answered = self._call("GET", route)
        status, raw, headers = answered
        if status != 200:
            self._json(answered, "file")
        lines = raw.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first = int(headers.get("X-Start-Line") or start or 1)
        result: dict[str, Any] = {
            "namespace": namespace,
            "path": path,
            "start_line": first,
            "end_line": int(headers.get("X-End-Line") or first + len(lines) - 1),
            "total_lines": int(headers.get("X-Total-Lines") or 0),
            "lines": lines,
        }
        if headers.get("X-Next-Start-Line"):  # a slice: where the next one starts
            result["next_start_line"] = int(headers["X-Next-Start-Line"])
        return result
