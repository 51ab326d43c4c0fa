"""``GET|POST /v1/search/stream``: one search as Server-Sent Events (SPEC §8).

The request is exactly that of ``/v1/search`` (a JSON body, or the same query
parameters), validated and planned before anything is sent: bad input is the usual
400 problem, never an event. Then, in Sourcegraph's vocabulary:

* ``namespace``: a ``NamespaceStatus`` as each namespace settles;
* ``files``: the provisional first page, ``{"files": [...], "file_count": n}``, each
  replacing the one before;
* ``progress``: ``{"done": n, "total": n, "file_count": n}``;
* ``done``: the answer, byte for byte the body ``POST /v1/search`` returns (timing
  aside); always last, and the stream closes;
* ``error``: a problem JSON if the search fails after the stream began; then it ends.

The first namespace to answer is sent at once; after that the events are coalesced,
at most one batch every :data:`COALESCE_S`. A ``: ping`` comment every
:data:`PING_S` keeps proxies from closing a quiet stream. A client that goes away is
noticed within :data:`POLL_S` even while nothing is being written, and the search is
cancelled (its backends reaped, ``rg`` killed) before the handler returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
import structlog
from aiohttp import web

from gateway.http.middleware import ACCESS
from gateway.http.params import parameter_names, search_data
from gateway.http.problems import problem_for
from gateway.http.reload import service_of
from gateway.log import get_logger
from gateway.models import Outcome
from gateway.query.request import parse_request
from gateway.streaming import SearchStream

__all__ = ["COALESCE_S", "PING_S", "POLL_S", "event", "stream_search"]

#: After the first ``files``, at most one batch of events per this many seconds.
COALESCE_S = 0.1
#: A comment line this often keeps a quiet stream open through proxies.
PING_S = 15.0
#: How often a quiet stream looks whether its client is still there.
POLL_S = 0.25

PING = b": ping\n\n"

log = get_logger("fedsearch.stream")


def event(name: str, data: Any) -> bytes:
    """One SSE event; ``data`` is JSON (already serialised when bytes)."""
    body = data if isinstance(data, bytes) else orjson.dumps(data)
    return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"


class _Gone(Exception):
    """The client went away."""


class _Writer:
    """Writes events to the client, noticing when it has gone."""

    def __init__(self, request: web.Request, response: web.StreamResponse) -> None:
        self._request = request
        self._response = response
        self.sent: set[str] = set()  # namespaces whose event went out

    def gone(self) -> bool:
        transport = self._request.transport
        return transport is None or transport.is_closing()

    async def write(self, data: bytes) -> None:
        if self.gone():
            raise _Gone
        try:
            await self._response.write(data)
        except (ConnectionError, RuntimeError) as exc:  # reset, or aiohttp's "closing transport"
            raise _Gone from exc

    async def statuses(self, statuses: list[dict[str, Any]]) -> None:
        for status in statuses:
            if status["name"] not in self.sent:
                self.sent.add(status["name"])
                await self.write(event("namespace", status))


async def _batch(writer: _Writer, search: SearchStream) -> None:
    """The namespaces settled since the last batch, the provisional page and the progress."""
    answer = search.provisional()
    await writer.statuses(answer["namespaces"])
    await writer.write(event("files", {"files": answer["files"], "file_count": answer["file_count"]}))
    progress = {"done": len(search.settled), "total": search.total, "file_count": answer["file_count"]}
    await writer.write(event("progress", progress))


async def _pump(writer: _Writer, search: SearchStream) -> None:
    loop = asyncio.get_running_loop()
    outcomes = aiter(search)
    ping_at = loop.time() + PING_S
    flushed_at: float | None = None  # no batch yet: the first goes at once
    pending = False
    upcoming: asyncio.Future[Outcome] = asyncio.ensure_future(anext(outcomes))
    try:
        while True:
            now = loop.time()
            wait = min(POLL_S, ping_at - now)
            if pending and flushed_at is not None:
                wait = min(wait, flushed_at + COALESCE_S - now)
            await asyncio.wait({upcoming}, timeout=max(0.0, wait))
            if writer.gone():
                raise _Gone
            if upcoming.done():
                try:
                    upcoming.result()
                except StopAsyncIteration:
                    break
                pending = True
                upcoming = asyncio.ensure_future(anext(outcomes))
            now = loop.time()
            if pending and (flushed_at is None or now >= flushed_at + COALESCE_S):
                await _batch(writer, search)
                flushed_at, pending = now, False
            if now >= ping_at:
                await writer.write(PING)
                ping_at = now + PING_S
    finally:
        upcoming.cancel()
    answer = search.result()
    await writer.statuses(answer["namespaces"])  # those cut off at the deadline, never heard of before
    await writer.write(event("done", answer))


async def stream_search(request: web.Request) -> web.StreamResponse:
    """The SSE stream of one search (GET with query parameters, or POST with a JSON body)."""
    with parameter_names(request):
        data = await search_data(request)
        search = await service_of(request).open_stream(parse_request(data), request.get(ACCESS))  # 400 before any event
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache, no-transform",
            "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
        }
    )
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    if isinstance(request_id, str):
        response.headers["X-Request-Id"] = request_id
    await response.prepare(request)
    writer = _Writer(request, response)
    try:
        async with search:
            await _pump(writer, search)
    except _Gone:
        log.info("stream_client_gone", settled=len(search.settled), total=search.total)
        return response
    except Exception as exc:  # after the stream began, a failure is an event, never a broken stream
        log.error("stream_failed", error=type(exc).__name__, exc_info=exc)
        with contextlib.suppress(_Gone):
            await writer.write(event("error", problem_for(exc)))
    with contextlib.suppress(ConnectionError, RuntimeError):
        await response.write_eof()
    return response
