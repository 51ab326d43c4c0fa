"""The HTTP surface (SPEC §4): routes, problem+json, limits, OpenAPI, metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from openapi_spec_validator import validate
from yarl import URL

from gateway.config import Config, DefaultsConfig, ServerConfig, discover
from gateway.http.app import create_app
from tests.corpus import make_corpus

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]


def _strip_timing(answer: dict[str, Any]) -> dict[str, Any]:
    answer = dict(answer)
    answer.pop("took_ms", None)
    answer["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    return answer


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src")


@pytest.fixture
async def client(aiohttp_client: MakeClient, corpus: Path) -> Client:
    config = Config(
        server=ServerConfig(max_body_bytes=4096),
        defaults=DefaultsConfig(),
        namespaces=discover(corpus),
    )
    return await aiohttp_client(create_app(config))


async def _problem(resp: Any, status: int) -> dict[str, Any]:
    assert resp.status == status
    assert resp.headers["Content-Type"].startswith("application/problem+json")
    body: dict[str, Any] = await resp.json(content_type=None)
    assert body["status"] == status
    return body


class TestSearch:
    async def test_post_search_answers(self, client: Client) -> None:
        """POST /v1/search gives the wire answer with every namespace's status."""
        resp = await client.post("/v1/search", json={"query": "register_widget"})
        assert resp.status == 200
        answer = await resp.json()
        names = {g["namespace"] for g in answer["files"]}
        assert names == {"alpha", "team/beta"}
        assert {s["name"] for s in answer["namespaces"]} == {"alpha", "team/beta", "gamma"}
        assert resp.headers["X-Request-Id"]

    async def test_get_equals_post(self, client: Client) -> None:
        """GET /v1/search with query parameters gives the same answer as POST."""
        body = {"query": "register_widget", "namespaces": ["alpha", "team/*"], "files": 2, "context_lines": 1}
        post = await (await client.post("/v1/search", json=body)).json()
        params = [("q", "register_widget"), ("ns", "alpha"), ("ns", "team/*"), ("files", "2"), ("context", "1")]
        get = await (await client.get("/v1/search", params=params)).json()
        assert _strip_timing(get) == _strip_timing(post)

    async def test_next_action_runs_verbatim(self, client: Client) -> None:
        """A next action's args, posted as they are, give the next page."""
        first = await (await client.post("/v1/search", json={"query": "register_widget", "files": 1})).json()
        assert first["truncated"]
        action = first["next"][0]
        second = await client.post("/v1/search", json=action["args"])
        assert second.status == 200
        page = await second.json()
        assert page["limits"]["offset"] == 1
        assert page["files"][0]["file_path"] != first["files"][0]["file_path"]

    async def test_request_id_is_echoed(self, client: Client) -> None:
        """A sane X-Request-Id from the caller is echoed back."""
        resp = await client.post("/v1/search", json={"query": "x"}, headers={"X-Request-Id": "abc-123"})
        assert resp.headers["X-Request-Id"] == "abc-123"


class TestProblems:
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            (b"{not json", "body"),
            (b"[1, 2]", "body"),
            (b'{"query": "x", "bogus": 1}', "bogus"),
            (b'{"query": ""}', "query"),
            (b'{"query": "(", "mode": "regex"}', "query"),
            (b'{"query": "x", "files": 1000}', "files"),
            (b'{"query": "x", "namespaces": ["nope"]}', "namespaces"),
            (b'\xff\xfe{"query"}', "body"),
        ],
    )
    async def test_post_bad_input_is_a_400_naming_the_field(self, client: Client, body: bytes, field: str) -> None:
        """Each kind of bad POST body is a problem+json 400 naming the field."""
        resp = await client.post("/v1/search", data=body, headers={"Content-Type": "application/json"})
        assert (await _problem(resp, 400))["field"] == field

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ([("q", "x"), ("bogus", "1")], "bogus"),
            ([("q", "x"), ("files", "many")], "files"),
            ([("q", "x"), ("case", "maybe")], "case"),
            ([("files", "3")], "q"),
            ([("q", "x"), ("ns", "missing")], "ns"),
        ],
    )
    async def test_get_bad_input_names_the_parameter(
        self, client: Client, params: list[tuple[str, str]], field: str
    ) -> None:
        """Bad GET parameters are a 400 naming the parameter as the caller wrote it."""
        resp = await client.get("/v1/search", params=params)
        assert (await _problem(resp, 400))["field"] == field

    @pytest.mark.parametrize(
        ("query_string", "field"),
        [("q=%ff", "q"), ("q=x&path=src%2F%c3%28", "path"), ("q=x&%ff=1", "query string")],
    )
    async def test_get_non_utf8_is_a_400_naming_the_parameter(
        self, client: Client, query_string: str, field: str
    ) -> None:
        """A parameter that is not UTF-8 once percent-decoded is a 400 naming it, not a search for U+FFFD."""
        resp = await client.get(URL.build(path="/v1/search", query_string=query_string, encoded=True))
        problem = await _problem(resp, 400)
        assert problem["field"] == field and "UTF-8" in problem["detail"]

    async def test_large_body_is_413(self, client: Client) -> None:
        """A body over the configured limit is a problem+json 413."""
        resp = await client.post("/v1/search", data=b'{"query": "' + b"x" * 8000 + b'"}')
        await _problem(resp, 413)

    async def test_unknown_route_is_404(self, client: Client) -> None:
        """An unknown route is a problem+json 404."""
        await _problem(await client.get("/v2/nothing"), 404)


class TestFiles:
    async def test_read_a_range(self, client: Client) -> None:
        """GET /v1/files returns the asked lines with the total."""
        resp = await client.get("/v1/files/alpha/src/widgets.py", params={"start_line": "4", "end_line": "5"})
        assert resp.status == 200
        assert await resp.text() == "def register_widget(name):\n    return name\n"
        assert resp.headers["X-Total-Lines"] == "8"

    async def test_namespace_with_slash(self, client: Client) -> None:
        """A namespace containing '/' resolves to its files."""
        resp = await client.get("/v1/files/team/beta/lib/registry.go")
        assert resp.status == 200 and "RegisterWidget" in await resp.text()

    @pytest.mark.parametrize(
        "path",
        [
            "alpha/src/%2E%2E/%2E%2E/gamma/main.rs",
            "alpha/%2e%2e/%2e%2e/etc/passwd",
            "alpha/.git/config",
            "nope/x",
            "alpha/zzz",
        ],
    )
    async def test_outside_or_missing_is_404(self, client: Client, path: str) -> None:
        """Paths leaving the namespace root, or missing, are 404s."""
        base = str(client.make_url("/v1/files/"))
        resp = await client.session.get(URL(base + path, encoded=True))
        await _problem(resp, 404)


class TestOperations:
    async def test_health_and_ready(self, client: Client) -> None:
        """/healthz and /readyz answer 200 once the service is open."""
        assert (await client.get("/healthz")).status == 200
        ready = await client.get("/readyz")
        assert ready.status == 200 and (await ready.json())["namespaces"] == 3

    async def test_namespaces(self, client: Client) -> None:
        """/v1/namespaces lists name, backend kind, health and capabilities."""
        items = (await (await client.get("/v1/namespaces")).json())["namespaces"]
        assert [i["name"] for i in items] == ["alpha", "gamma", "team/beta"]
        assert items[0]["backend"] == "ripgrep" and items[0]["capabilities"]["read"] is True

    async def test_openapi_validates(self, client: Client) -> None:
        """/openapi.json is a valid OpenAPI 3.1 document describing search."""
        doc = await (await client.get("/openapi.json")).json()
        validate(doc)
        assert doc["openapi"].startswith("3.1")
        assert "SearchRequest" in doc["components"]["schemas"]

    async def test_metrics(self, client: Client) -> None:
        """/metrics counts requests, namespace outcomes and cache events under fedsearch_ names, every time."""
        for query in ("register_widget", "register_widget", "Widget"):  # the repeat is answered from cache
            await client.post("/v1/search", json={"query": query})
        text = await (await client.get("/metrics")).text()
        assert 'fedsearch_http_requests_total{method="POST",route="/v1/search",status="200"} 3.0' in text
        outcome = 'fedsearch_namespace_outcomes_total{backend="ripgrep",namespace="alpha",status="ok"} 2.0'
        assert outcome in text
        assert 'fedsearch_namespace_duration_seconds_count{backend="ripgrep",namespace="alpha"} 2.0' in text
        assert 'fedsearch_cache_events_total{event="answer_hit"} 1.0' in text
        assert 'fedsearch_cache_events_total{event="answer_miss"} 2.0' in text
        assert "fedsearch_http_in_flight" in text


class TestRequestLog:
    async def test_a_request_without_an_answer_is_logged_499(self) -> None:
        """A request cut before it answers (client gone, shutdown) still logs request_done, status 499."""
        import asyncio

        from aiohttp.test_utils import make_mocked_request
        from structlog.testing import capture_logs

        from gateway.http.middleware import request_id_middleware

        async def cut(request: Any) -> Any:
            raise asyncio.CancelledError

        with capture_logs() as logs, pytest.raises(asyncio.CancelledError):
            await request_id_middleware(make_mocked_request("POST", "/v1/search"), cut)
        done = [e for e in logs if e["event"] == "request_done"]
        assert len(done) == 1 and done[0]["status"] == 499
