"""A scripted fake HTTP API served for real on 127.0.0.1, for the GitHub and GitLab adapter tests.

Each test registers replies by path prefix; every request is recorded (decoded path,
raw path, query, headers) so a test asserts on what the adapter actually sent.
:class:`GitHubContents` serves GitHub's contents API (raw media type, ETags, the rate limit).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.remote_files import etag

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Seen:
    """One request the fake received."""

    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class FakeApi:
    """Replies by path prefix (the last registered prefix that matches wins)."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    routes: list[tuple[str, Handler]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    def on(self, prefix: str, handler: Handler) -> None:
        self.routes.append((prefix, handler))

    def to(self, prefix: str) -> list[Seen]:
        """The requests whose path starts with ``prefix``, in order."""
        return [s for s in self.seen if s.path.startswith(prefix)]

    async def hang(self, request: web.Request) -> web.StreamResponse:
        """A handler that never answers (until the test ends)."""
        await self.release.wait()
        return web.json_response({})

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(
            Seen(
                method=request.method,
                path=request.path,
                raw_path=request.raw_path,
                query=dict(request.query),
                headers=dict(request.headers),
            )
        )
        for prefix, handler in reversed(self.routes):
            if request.path.startswith(prefix):
                return await handler(request)
        return web.json_response({"message": "Not Found"}, status=404)


def reply(
    body: Any = None,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    raw: bytes | None = None,
    content_type: str = "application/json",
) -> Handler:
    """A handler answering ``body`` as JSON (or ``raw`` bytes) with ``status`` and ``headers``."""
    data = raw if raw is not None else json.dumps(body).encode()

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, status=status, headers={"Content-Type": content_type, **(headers or {})})

    return handle


def by_page(pages: Mapping[int, Handler]) -> Handler:
    """A handler dispatching on the ``page`` query parameter (default 1)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return await pages[int(request.query.get("page", "1"))](request)

    return handle


def load(fixtures_dir: Path, name: str) -> dict[str, Any]:
    """One recorded backend exchange from ``fixtures/backends``."""
    data: dict[str, Any] = json.loads((fixtures_dir / name).read_text(encoding="utf-8"))
    return data


def adapter_tasks() -> list[asyncio.Task[Any]]:
    """Tasks still alive whose coroutine lives in the ``adapters`` package."""
    alive = []
    for task in asyncio.all_tasks():
        code = getattr(task.get_coro(), "cr_code", None)
        if code is not None and "/adapters/" in code.co_filename:
            alive.append(task)
    return alive


@dataclass
class GitHubContents:
    """GitHub's contents API for a few files, as GitHub serves it: the raw media type, an ETag,
    ``If-None-Match`` answered ``304`` without counting against the rate limit, the primary
    rate limit's headers on every answer and its ``403`` once it is spent."""

    files: dict[str, bytes]  # "<owner>/<name>/<path>" -> content
    limit: int = 60
    used: int = 0
    statuses: list[int] = field(default_factory=list)

    def _headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(max(0, self.limit - self.used)),
            "x-ratelimit-used": str(self.used),
            "x-ratelimit-reset": "1785000060",
            "x-ratelimit-resource": "core",
            "X-GitHub-Media-Type": "github.v3; param=raw",
        }

    def _answer(self, status: int, **kw: Any) -> web.Response:
        self.statuses.append(status)
        return web.Response(status=status, **kw)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        _, _, rest = request.path.partition("/repos/")
        repo_path = rest.replace("/contents/", "/", 1)
        data = self.files.get(repo_path)
        if data is not None and request.headers.get("If-None-Match") == etag(data):
            return self._answer(304, headers={"ETag": etag(data), **self._headers()})
        if self.used >= self.limit:
            body = {
                "message": "API rate limit exceeded for user ID 1.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
            }
            return self._answer(403, text=json.dumps(body), content_type="application/json", headers=self._headers())
        self.used += 1
        if data is None:
            body = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest/repos/contents"}
            return self._answer(404, text=json.dumps(body), content_type="application/json", headers=self._headers())
        headers = {"ETag": etag(data), "Content-Type": "application/vnd.github.raw+json; charset=utf-8"}
        return self._answer(200, body=data, headers={**headers, **self._headers()})
