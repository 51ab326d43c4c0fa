"""Scripted fake backends, served for real by aiohttp on 127.0.0.1, for adapter tests.

::

    async with FakeServer(json_reply(payload), rate_limited(retry_after="7")) as server:
        backend = ZoektBackend("z", ZoektSettings(urls=[server.url]))
        ...
        assert server.requests[0].json()["Q"] == "..."

A server plays its replies in order, one per request, the last one repeating; a
request whose path starts with a key of ``routes`` gets that reply instead, every time
(an AFI provider's manifest before its searches). Every request is recorded
(:class:`Recorded`: method, path, query, headers, body) before it is answered. Reply
builders: :func:`json_reply`, :func:`text_reply`, :func:`stream`, :func:`rate_limited`,
:func:`server_error`, :func:`garbage`, :func:`wrong_type`, :func:`redirect`,
:func:`hang`, and for fault tests :func:`slow_drip`, :func:`reset_mid_body`,
:func:`huge_body`.

A hanging handler awaits an :class:`asyncio.Event` that is never set; when the client
gives up and closes the connection aiohttp cancels the handler, and
``server.cancelled`` is set, so a test can check that nothing was left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import orjson
from aiohttp import web
from multidict import CIMultiDict

__all__ = [
    "FakeServer",
    "Recorded",
    "Reply",
    "garbage",
    "hang",
    "huge_body",
    "json_reply",
    "leftover_tasks",
    "open_sockets",
    "rate_limited",
    "redirect",
    "reset_mid_body",
    "server_error",
    "slow_drip",
    "stream",
    "text_reply",
    "wrong_type",
]

JSON = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted answer.

    ``chunks`` are written one by one after the headers (a streamed body); with
    ``hang`` the handler never finishes: before the headers when there are no chunks,
    after the last chunk otherwise. ``content_type=None`` sends no Content-Type.
    ``repeat`` writes the chunks that many times (a huge body, never held whole),
    ``drip_s`` waits before each chunk, ``reset`` drops the connection after the
    chunks instead of ending the body.
    """

    status: int = 200
    body: bytes = b""
    content_type: str | None = JSON
    headers: Mapping[str, str] = field(default_factory=dict)
    chunks: tuple[bytes, ...] = ()
    hang: bool = False
    repeat: int = 1
    drip_s: float = 0.0
    reset: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """What the fake server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: CIMultiDict[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def json_reply(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    """``obj`` as an application/json body."""
    return Reply(status=status, body=orjson.dumps(obj), headers=dict(headers or {}))


def text_reply(
    text: str | bytes,
    status: int = 200,
    content_type: str | None = "text/plain; charset=utf-8",
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A body given verbatim, with any content type."""
    body = text.encode() if isinstance(text, str) else text
    return Reply(status=status, body=body, content_type=content_type, headers=dict(headers or {}))


def stream(*chunks: bytes, content_type: str = JSON, hang_after: bool = False) -> Reply:
    """A 200 whose body is written chunk by chunk; with ``hang_after`` it never ends."""
    return Reply(content_type=content_type, chunks=chunks, hang=hang_after)


def rate_limited(retry_after: str | None = "7", status: int = 429, headers: Mapping[str, str] | None = None) -> Reply:
    """A rate-limit answer (429 by default) with a ``Retry-After`` header."""
    extra = dict(headers or {})
    if retry_after is not None:
        extra["Retry-After"] = retry_after
    return Reply(status=status, body=b'{"message": "slow down"}', headers=extra)


def server_error(status: int = 500, body: bytes = b'{"Error": "internal error"}') -> Reply:
    """A 5xx answer."""
    return Reply(status=status, body=body)


def garbage(content_type: str = JSON) -> Reply:
    """A 200 that claims ``content_type`` but is not parseable."""
    return Reply(body=b"\x00\xff{{not json at all", content_type=content_type)


def wrong_type(content_type: str = "text/html; charset=utf-8") -> Reply:
    """A 200 of the wrong kind: an HTML login page from a proxy, say."""
    return Reply(body=b"<html><body>Sign in</body></html>", content_type=content_type)


def redirect(location: str = "/elsewhere", status: int = 302) -> Reply:
    """A redirect, which adapters must never follow."""
    return Reply(status=status, body=b"", content_type=None, headers={"Location": location})


def hang() -> Reply:
    """A request that is never answered."""
    return Reply(hang=True)


def slow_drip(body: bytes = b'{"Result": {}}', every_s: float = 0.05, piece: int = 1) -> Reply:
    """A 200 whose body comes ``piece`` bytes at a time, one piece every ``every_s`` seconds."""
    chunks = tuple(body[i : i + piece] for i in range(0, len(body), piece))
    return Reply(chunks=chunks, drip_s=every_s)


def reset_mid_body(prefix: bytes = b'{"Result": {"Files": [') -> Reply:
    """A 200 that sends ``prefix`` of its body, then drops the connection."""
    return Reply(chunks=(prefix,), reset=True)


def huge_body(size: int, declare_length: bool = False, chunk: int = 1 << 16) -> Reply:
    """A 200 of ``size`` bytes of JSON whitespace, streamed (with Content-Length if ``declare_length``)."""
    count, rest = divmod(size, chunk)
    if rest:
        raise ValueError("size must be a multiple of chunk")
    headers = {"Content-Length": str(size)} if declare_length else {}
    return Reply(chunks=(b" " * chunk,), repeat=count, headers=headers)


class FakeServer:
    """An aiohttp server on 127.0.0.1 answering every path with scripted replies."""

    def __init__(self, *replies: Reply, routes: Mapping[str, Reply] | None = None) -> None:
        self.replies = list(replies) or [json_reply({})]
        self.routes = dict(routes or {})
        self.requests: list[Recorded] = []
        self._played = 0
        self.cancelled = asyncio.Event()
        self._never = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """The base URL, without a trailing slash."""
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _next(self, path: str) -> Reply:
        for prefix, reply in self.routes.items():
            if path.startswith(prefix):
                return reply
        index = min(self._played, len(self.replies) - 1)
        self._played += 1
        return self.replies[index]

    async def _wait_forever(self) -> None:
        try:
            await self._never.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Recorded(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=CIMultiDict(request.headers),
                body=body,
            )
        )
        reply = self._next(request.path)
        headers = dict(reply.headers)
        if reply.content_type is not None:
            headers["Content-Type"] = reply.content_type
        if reply.hang and not reply.chunks:
            await self._wait_forever()
        if not reply.chunks:
            return web.Response(status=reply.status, body=reply.body, headers=headers)
        response = web.StreamResponse(status=reply.status, headers=headers)
        await response.prepare(request)
        for _ in range(reply.repeat):
            for chunk in reply.chunks:
                if reply.drip_s:
                    await asyncio.sleep(reply.drip_s)
                await response.write(chunk)
        if reply.reset:
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # the connection is gone: nothing more to send
        if reply.hang:
            await self._wait_forever()
        await response.write_eof()
        return response


def open_sockets() -> int:
    """How many sockets this process holds open (Linux: /proc/self/fd)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def leftover_tasks() -> list[asyncio.Task[Any]]:
    """Tasks still pending besides the caller's own (a test ends with none)."""
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and not t.done()]
