"""Cursors over the surfaces: bound to the caller's token over HTTP, verbatim on MCP, HTTP and the CLI.

Invariant 7 with snapshots: a cursor made for one token, replayed by another (even one
that sees the same namespaces), is never served; the request runs again as the
replaying caller, who sees only what it may.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from gateway.cache.results import CURSOR_EXPIRED
from gateway.config import Config, TokenConfig
from gateway.http.app import create_app
from gateway.mcp.tools import build_server
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.secure_corpus import (
    FORBIDDEN_WORDS,
    GLOBS,
    TERM,
    bearer,
    digest,
    make_config,
    make_mock,
    make_root,
    service_factory,
)
from tests.test_cursors import capping, next_page
from tests.test_mcp import held_client, subprocess_env
from tests.test_parity import REPO, strip

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

TWIN = "reader-twin-t0ken"  # a second token that sees exactly what `reader` sees
REQUEST = {"query": TERM, "files": 1}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_root(tmp_path_factory.mktemp("cursors"))


def with_twin(config: Config) -> Config:
    twin = TokenConfig(name="twin", sha256=digest(TWIN), namespaces=GLOBS["reader"])
    return Config(
        server=config.server,
        defaults=config.defaults,
        namespaces=config.namespaces,
        tokens=(*config.tokens, twin),
        source=config.source,
    )


@pytest.fixture
async def client(aiohttp_client: MakeClient, root: Path) -> Client:
    return await aiohttp_client(create_app(with_twin(make_config(root)), service_factory(make_mock())))


async def post(client: Client, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post("/v1/search", json=body, headers=headers)
    assert response.status == 200, await response.text()
    answer: dict[str, Any] = await response.json()
    return answer


class TestCursorAccess:
    async def test_a_wider_tokens_cursor_replayed_by_a_narrower_one_leaks_nothing(self, client: Client) -> None:
        """admin's next page, posted verbatim by reader: a fresh answer of reader's own, no trace of the rest."""
        admin = await post(client, REQUEST, bearer("admin"))
        follow = next_page(admin)
        assert follow is not None and follow["cursor"]
        response = await client.post("/v1/search", json=follow, headers=bearer("reader"))
        body = await response.text()
        assert response.status == 200
        for word in FORBIDDEN_WORDS:
            assert word not in body
        answer = json.loads(body)
        assert answer["note"].startswith(CURSOR_EXPIRED)
        assert answer["file_count"] == 3

    async def test_a_narrower_tokens_cursor_is_not_served_to_a_wider_one(self, client: Client) -> None:
        """reader's cursor replayed by admin runs admin's own search (all seven files), not reader's snapshot."""
        reader = await post(client, REQUEST, bearer("reader"))
        follow = next_page(reader)
        assert follow is not None
        answer = await post(client, follow, bearer("admin"))
        assert answer["note"].startswith(CURSOR_EXPIRED)
        assert answer["file_count"] == 7

    async def test_a_cursor_is_bound_to_its_token_even_where_another_sees_the_same(self, client: Client) -> None:
        """A token with exactly reader's view still does not get reader's snapshot."""
        follow = next_page(await post(client, REQUEST, bearer("reader")))
        assert follow is not None
        twin = await post(client, follow, {"Authorization": f"Bearer {TWIN}"})
        assert twin["note"].startswith(CURSOR_EXPIRED)

    async def test_a_token_pages_its_own_snapshot_over_post_and_get(self, client: Client) -> None:
        """reader's cursor serves reader's page 2 over POST and GET alike, counted in /metrics."""
        first = await post(client, REQUEST, bearer("reader"))
        follow = next_page(first)
        assert follow is not None
        over_post = await post(client, follow, bearer("reader"))
        params = {"q": TERM, "files": "1", "offset": str(follow["offset"]), "cursor": follow["cursor"]}
        over_get = await (await client.get("/v1/search", params=params, headers=bearer("reader"))).json()
        assert "note" not in over_post
        assert strip(over_get) == strip(over_post)
        assert over_post["file_count"] == first["file_count"] == 3
        metrics = await (await client.get("/metrics", headers=bearer("reader"))).text()
        assert 'fedsearch_cache_events_total{event="snapshot_served"} 2.0' in metrics
        assert 'fedsearch_cache_events_total{event="snapshot_stored"} 1.0' in metrics

    async def test_a_bad_cursor_is_a_problem_naming_the_field(self, client: Client) -> None:
        """A malformed cursor is a 400 problem whose field is `cursor`."""
        response = await client.post("/v1/search", json={**REQUEST, "cursor": "no spaces"}, headers=bearer("reader"))
        assert response.status == 400
        assert (await response.json())["field"] == "cursor"


@pytest.fixture
async def shared(root: Path) -> AsyncIterator[SearchService]:
    mock: MockBackend = make_mock()
    service = SearchService(make_config(root, tokens=False), {"zz-mockery": mock})
    try:
        yield service
    finally:
        await service.aclose()


async def cli_over_http(url: str, args: dict[str, Any]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "search",
        "--server",
        url,
        "--args-json",
        json.dumps(args),
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out)
    return answer


async def test_a_cursor_action_runs_verbatim_over_mcp_http_and_the_cli(
    aiohttp_client: MakeClient, shared: SearchService
) -> None:
    """Invariant 3 with a cursor: page 2 as MCP `search`, POST /v1/search and `--args-json` is one page."""
    seen: list[str] = []
    shared.cache.observers.append(seen.append)
    client = await aiohttp_client(create_app(shared.config, lambda _: shared))
    first = await post(client, REQUEST, {})
    follow = next_page(first)
    assert follow is not None and follow["cursor"]
    over_http = await post(client, follow, {})
    async for mcp in held_client(build_server(shared)):
        over_mcp = (await mcp.call_tool("search", follow)).structured_content
        break
    over_cli = await cli_over_http(str(client.make_url("")).rstrip("/"), follow)
    assert over_mcp is not None
    assert strip(over_http) == strip(over_mcp) == strip(over_cli)
    assert "note" not in over_http and over_http["file_count"] == first["file_count"]
    assert seen.count("snapshot_served") == 3


def test_every_surface_exposes_the_cursor_field() -> None:
    """The request schema published by HTTP (OpenAPI) and MCP has `cursor`."""
    from gateway.http.openapi import openapi

    schema = openapi()["components"]["schemas"]["SearchRequest"]
    assert "cursor" in schema["properties"]


async def test_afi_search_pages_through_one_snapshot(aiohttp_client: MakeClient) -> None:
    """AFI's next_cursor carries the service's cursor: its pages come from one ranking, each match once."""
    backend = capping("wide", 450, random.Random(21), 450, 450)  # every file, in a new order each call
    service = SearchService.with_backends([backend])
    client = await aiohttp_client(create_app(service.config, lambda _: service))
    matches: list[tuple[str, int]] = []
    body: dict[str, Any] = {"query": "needle", "path": "/", "limit": 500}
    for _ in range(10):
        response = await client.post("/afi/search", json=body)
        assert response.status == 200, await response.text()
        page = await response.json()
        matches.extend((m["path"], m["line"]) for m in page["matches"])
        if "next_cursor" not in page:
            break
        body = {**body, "cursor": page["next_cursor"]}
    assert len(backend.calls) == 1
    assert len(matches) == len(set(matches)) == sum(1 + len(f"src/mod_{n:03}.py") % 3 for n in range(450))
