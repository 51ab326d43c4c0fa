"""The naive baseline: aiohttp gather of all backends, json parse, sort, dump (no limits, no ranking).

    python bench/naive_gateway.py PORT BACKEND_URL...   (NAIVE_REUSE=1: one shared ClientSession)

As written naively it opens a ClientSession per request; with NAIVE_REUSE=1 it keeps one,
the stronger baseline (connection reuse is one of the gateway's own optimisations).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import aiohttp
from aiohttp import web

BACKENDS = sys.argv[2:]
REUSE = os.environ.get("NAIVE_REUSE") == "1"


async def search(request: web.Request) -> web.Response:
    body = await request.json()
    payload = {"Q": body["query"], "Opts": {"MaxDocDisplayCount": 100, "NumContextLines": 0}}

    async def one(session: aiohttp.ClientSession, url: str) -> list[dict[str, object]]:
        async with session.post(url + "/api/search", json=payload) as resp:
            data = json.loads(await resp.read())
            return [dict(f, Namespace=url) for f in data["Result"]["Files"] or []]

    if REUSE:
        session: aiohttp.ClientSession = request.app["session"]
        results = await asyncio.gather(*(one(session, u) for u in BACKENDS), return_exceptions=True)
    else:
        async with aiohttp.ClientSession() as fresh:
            results = await asyncio.gather(*(one(fresh, u) for u in BACKENDS), return_exceptions=True)
    files = [f for r in results if isinstance(r, list) for f in r]
    files.sort(key=lambda f: -float(f["Score"]))  # type: ignore[arg-type]
    return web.Response(text=json.dumps({"files": files[: body.get("files", 20)]}), content_type="application/json")


async def session_ctx(app: web.Application) -> object:
    app["session"] = aiohttp.ClientSession()
    yield
    await app["session"].close()


if __name__ == "__main__":
    app = web.Application()
    app.cleanup_ctx.append(session_ctx)  # type: ignore[arg-type]
    app.router.add_post("/v1/search", search)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
