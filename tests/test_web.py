"""The page's routes over HTTP (no browser): GET /, its files, /v1/query, and who may fetch them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig, TokenConfig
from gateway.http.app import create_app
from gateway.http.page import CSP, PAGE_ROUTES
from gateway.models import BackendResult, SearchQuery
from gateway.query.languages import LANGUAGES
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]
TOKEN = "web-token"


async def nothing(query: SearchQuery) -> BackendResult:
    return BackendResult()


async def client_for(aiohttp_client: MakeClient, tokens: tuple[TokenConfig, ...] = ()) -> Client:
    backend = MockBackend(nothing, name="alpha")
    config = Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=(NamespaceConfig(name="alpha", backend="mock", settings=MockSettings()),),
        tokens=tokens,
    )
    return await aiohttp_client(create_app(config, lambda c: SearchService(c, {"alpha": backend})))


@pytest.fixture
async def client(aiohttp_client: MakeClient) -> Client:
    return await client_for(aiohttp_client)


class TestPage:
    async def test_index_is_html_with_a_strict_policy(self, client: Client) -> None:
        """GET / is the page, with a Content-Security-Policy allowing only its own origin."""
        resp = await client.get("/")
        assert resp.status == 200 and resp.content_type == "text/html"
        assert resp.headers["Content-Security-Policy"] == CSP
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        html = await resp.text()
        assert '<script src="/static/fedsearch.js" defer></script>' in html
        assert not re.search(r"<script>(?!\s*$)", html)  # no inline script
        assert re.findall(r'(?:src|href)="([^"]*)"', html) and all(  # nothing from another host
            url.startswith("/") and not url.startswith("//") for url in re.findall(r'(?:src|href)="([^"]*)"', html)
        )

    async def test_index_carries_the_language_table(self, client: Client) -> None:
        """The page names languages with the table requests are filtered by."""
        html = await (await client.get("/")).text()
        table = re.search(r'<script type="application/json" id="languages">(.*?)</script>', html, re.S)
        assert table is not None
        assert json.loads(table.group(1)) == {k: list(v) for k, v in LANGUAGES.items()}

    @pytest.mark.parametrize("path", sorted(PAGE_ROUTES - {"/"}))
    async def test_static_files_are_served_and_revalidated(self, client: Client, path: str) -> None:
        """Each static file is served with its type and an ETag; a matching If-None-Match is a 304."""
        resp = await client.get(path)
        assert resp.status == 200 and resp.content_type in {"text/javascript", "text/css", "image/svg+xml"}
        again = await client.get(path, headers={"If-None-Match": resp.headers["ETag"]})
        assert again.status == 304

    async def test_the_script_never_writes_markup(self, client: Client) -> None:
        """The script puts text in the page, never markup (innerHTML, insertAdjacentHTML, document.write)."""
        script = await (await client.get("/static/fedsearch.js")).text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", script)

    async def test_page_is_open_but_searching_needs_a_token(self, aiohttp_client: MakeClient) -> None:
        """With tokens, the page and its files need none; /v1/query and the stream do."""
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        client = await client_for(aiohttp_client, (TokenConfig(name="t", sha256=digest, namespaces=["*"]),))
        for path in PAGE_ROUTES:
            assert (await client.get(path)).status == 200
        assert (await client.post("/v1/query", json={"query": "x"})).status == 401
        assert (await client.post("/v1/search/stream", json={"query": "x"})).status == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.post("/v1/query", json={"query": "x"}, headers=auth)).status == 200


class TestQueryRoute:
    async def test_post_takes_the_query_apart(self, client: Client) -> None:
        """POST /v1/query says what is searched for and which filters the query holds."""
        resp = await client.post("/v1/query", json={"query": 'repo:alpha -file:tests/ "lang:x" Foo'})
        assert await resp.json() == {
            "query": 'repo:alpha -file:tests/ "lang:x" Foo',
            "pattern": "lang:x Foo",
            "mode": "exact",
            "case_sensitive": True,
            "filters": [
                {"key": "repo", "value": "alpha", "negated": False, "text": "repo:alpha"},
                {"key": "file", "value": "tests/", "negated": True, "text": "-file:tests/"},
            ],
        }

    async def test_get_takes_search_parameters(self, client: Client) -> None:
        """GET /v1/query takes /v1/search's parameters; /RE/ is a regex."""
        body = await (await client.get("/v1/query", params={"q": "/a+b/", "case": "false"})).json()
        assert (body["pattern"], body["mode"], body["case_sensitive"]) == ("a+b", "regex", False)

    async def test_bad_query_is_a_400_naming_the_parameter(self, client: Client) -> None:
        """An unknown language is the usual 400, naming q on GET and query on POST."""
        got = await client.get("/v1/query", params={"q": "lang:klingon x"})
        assert got.status == 400 and (await got.json(content_type=None))["field"] == "q"
        posted = await client.post("/v1/query", json={"query": "lang:klingon x"})
        assert (await posted.json(content_type=None))["field"] == "query"

    async def test_openapi_lists_the_new_routes(self, client: Client) -> None:
        """/openapi.json describes the stream, /v1/query and the page."""
        paths = (await (await client.get("/openapi.json")).json())["paths"]
        assert {"get", "post"} <= set(paths["/v1/search/stream"]) and {"get", "post"} <= set(paths["/v1/query"])
        assert "text/event-stream" in paths["/v1/search/stream"]["post"]["responses"]["200"]["content"]
        assert "/" in paths
