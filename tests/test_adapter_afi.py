"""The AFI consumer against scripted AFI replies and against fedsearch's own AFI provider.

Scripted replies (:class:`tests.fakeservers.FakeServer`, one per request in order:
the manifest first, then search pages) cover what a real provider will not do on
demand; the real provider is ``create_app`` with ``gateway.afi.routes.add_afi_routes`` over
``git init`` checkouts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from adapters.afi import AfiBackend, AfiSettings, Manifest, afi_query, ecma_escape, scope_of
from adapters.ripgrep.backend import find_rg
from gateway.afi.routes import MANIFEST_PATH, add_afi_routes
from gateway.config import Config, DefaultsConfig, ServerConfig, discover, parse_config
from gateway.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    RateLimited,
    Rejected,
    Unsupported,
)
from gateway.http.app import create_app
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService, open_backend
from gateway.testing import MockBackend
from tests.corpus import make_corpus
from tests.fakeservers import (
    FakeServer,
    Reply,
    hang,
    json_reply,
    server_error,
)

TOKEN_ENV = "FEDSEARCH_TEST_AFI_TOKEN"
TOKEN = "afi-secret-8c1e55b0aa"
ALL_MODES = ["exact", "regex", "semantic"]
SEARCH = "/afi/search"

Serve = Callable[..., Awaitable[str]]


def manifest(modes: list[str] | None = None, max_results: int = 500, **extra: Any) -> Reply:
    """An AFI manifest reply declaring ``modes``."""
    body = {
        "afi_version": "0.1",
        "provider": "fake",
        "profile": 2,
        "capabilities": ["stat", "list", "read", "search"],
        "search": {"modes": ALL_MODES if modes is None else modes, "max_results": max_results},
        "path": {"case_sensitive": True, "max_length": 4096},
        "auth": {"required": False, "methods": []},
        **extra,
    }
    return json_reply(body)


def match(path: str, line: int, column: int | None = 1, text: str = "needle", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path, "line": line, "text": text, **extra}
    if column is not None:
        out["column"] = column
    return out


def page(*matches: dict[str, Any], cursor: str | None = None, extra: dict[str, Any] | None = None) -> Reply:
    body: dict[str, Any] = {"matches": list(matches), **(extra or {})}
    if cursor is not None:
        body["next_cursor"] = cursor
    return json_reply(body)


def afi_error(code: str, status: int, message: str = "nope", **extra: Any) -> Reply:
    headers = {"Retry-After": str(extra["retry_after"])} if "retry_after" in extra else {}
    return json_reply({"code": code, "message": message, **extra}, status=status, headers=headers)


def query(text: str = "needle", **kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", True)
    kw.setdefault("deadline", time.monotonic() + 5.0)
    return SearchQuery(text=text, **kw)


@contextlib.asynccontextmanager
async def fake_afi(*replies: Reply, **settings: Any) -> AsyncIterator[tuple[FakeServer, AfiBackend]]:
    """A scripted AFI provider and an AfiBackend pointed at it."""
    async with FakeServer(*replies) as server, AfiBackend("a", AfiSettings(url=server.url, **settings)) as afi:
        yield server, afi


def lines(result: BackendResult) -> dict[str, list[tuple[int, int | None]]]:
    return {f.path: [(h.line, h.column) for h in f.hits] for f in result.files}


class TestManifest:
    async def test_read_first_and_kept(self) -> None:
        """The manifest is read before the first search and not again while searches succeed."""
        async with fake_afi(manifest(), page(), page()) as (server, afi):
            await afi.search(query())
            await afi.search(query())
        assert [(r.method, r.path) for r in server.requests] == [
            ("GET", MANIFEST_PATH),
            ("POST", SEARCH),
            ("POST", SEARCH),
        ]

    async def test_refreshed_after_a_failure(self) -> None:
        """A failed search drops the manifest, so the next search reads it again."""
        async with fake_afi(manifest(), server_error(), manifest(), page()) as (server, afi):
            with pytest.raises(BackendError):
                await afi.search(query())
            await afi.search(query())
        assert [r.path for r in server.requests] == [MANIFEST_PATH, SEARCH, MANIFEST_PATH, SEARCH]

    async def test_failed_manifest_is_not_kept(self) -> None:
        """A manifest that cannot be read fails the search and is asked for again next time."""
        async with fake_afi(server_error(503), manifest(), page()) as (server, afi):
            with pytest.raises(BackendUnavailable):
                await afi.search(query())
            await afi.search(query())
        assert [r.path for r in server.requests] == [MANIFEST_PATH, MANIFEST_PATH, SEARCH]

    async def test_case_insensitive_exact_needs_regex(self) -> None:
        """Without a declared regex mode a case-insensitive exact search is Unsupported, and nothing is searched."""
        async with fake_afi(manifest(["exact"])) as (server, afi):
            with pytest.raises(Unsupported, match="case-insensitive"):
                await afi.search(query(case_sensitive=False))
        assert [r.path for r in server.requests] == [MANIFEST_PATH]

    @pytest.mark.parametrize("mode", ["regex", "semantic"])
    async def test_undeclared_mode(self, mode: str) -> None:
        """A mode the manifest does not declare is Unsupported without a search."""
        async with fake_afi(manifest(["exact"])) as (server, afi):
            with pytest.raises(Unsupported, match=mode):
                await afi.search(query(mode=mode))
        assert len(server.requests) == 1

    def test_no_search_capability(self) -> None:
        """A provider below profile 2 (no search) is Unsupported."""
        with pytest.raises(Unsupported, match="does not offer search"):
            Manifest.parse({"capabilities": ["stat", "list"], "search": {"modes": ["exact"]}})


class TestAsking:
    def test_exact_is_a_string(self) -> None:
        """A case-sensitive exact search is AFI's plain string query."""
        assert afi_query(query("a.b"), Manifest(frozenset(ALL_MODES))) == "a.b"

    def test_case_insensitive_exact_is_an_escaped_regex(self) -> None:
        """A case-insensitive exact search is an escaped regex with flag i."""
        got = afi_query(query("f(a.b)[0]|x", case_sensitive=False), Manifest(frozenset(ALL_MODES)))
        assert got == {"regex": r"f\(a\.b\)\[0\]\|x", "flags": "i"}

    def test_escape_leaves_plain_characters(self) -> None:
        """Only ECMAScript syntax characters are escaped (a u-flag regex refuses needless escapes)."""
        assert ecma_escape("a-b c_d/e$") == "a-b c_d\\/e\\$"

    def test_regex_and_semantic(self) -> None:
        """Regex carries flag i only when case-insensitive; semantic carries the threshold."""
        modes = Manifest(frozenset(ALL_MODES))
        assert afi_query(query("a+", mode="regex"), modes) == {"regex": "a+"}
        assert afi_query(query("a+", mode="regex", case_sensitive=False), modes) == {"regex": "a+", "flags": "i"}
        assert afi_query(query("auth", mode="semantic", threshold=0.7), modes) == {"semantic": "auth", "threshold": 0.7}

    @pytest.mark.parametrize(
        ("paths", "scope"),
        [
            ((), "/"),
            (("src/api/**",), "/src/api"),
            (("src/x.py",), "/src"),
            (("*.py",), "/"),
            (("**/x.py",), "/"),
            (("src/**", "lib/**"), "/"),
            (("src/**", "!src/gen/**"), "/src"),
            (("s*/api/**",), "/"),
        ],
    )
    def test_scope_from_one_include(self, paths: tuple[str, ...], scope: str) -> None:
        """The search path is the literal directory of a single include glob, else the root."""
        assert scope_of(paths) == scope

    async def test_body_and_token(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The search body has query, path and a limit within max_results; the token goes as Bearer."""
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        async with fake_afi(manifest(max_results=50), page(), token_env=TOKEN_ENV) as (server, afi):
            await afi.search(query(paths=("src/**",)))
        assert server.requests[1].json() == {"query": "needle", "path": "/src", "limit": 50}
        assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in server.requests)

    def test_config_table(self) -> None:
        """A [[namespaces]] table of backend afi validates its url and token_env, and needs the url."""
        config = parse_config(
            {"namespaces": [{"name": "docs", "backend": "afi", "url": "https://h/", "token_env": TOKEN_ENV}]}
        )
        settings = config.namespaces[0].settings
        assert isinstance(settings, AfiSettings) and settings.url == "https://h"
        with pytest.raises(ConfigError, match="url"):
            parse_config({"namespaces": [{"name": "docs", "backend": "afi"}]})


class TestReading:
    async def test_grouped_by_path(self) -> None:
        """Matches group by path in first-seen order, one hit per line at its first column, without the leading /."""
        matches = [
            match("/b/x.py", 3, 9),
            match("/a/y.py", 1, 2),
            match("/b/x.py", 3, 4),
            match("/b/x.py", 1, None, **{"x-namespace": "ns"}),
        ]
        async with fake_afi(manifest(), page(*matches)) as (_, afi):
            result = await afi.search(query())
        assert lines(result) == {"b/x.py": [(1, None), (3, 4)], "a/y.py": [(1, 2)]}
        assert [f.path for f in result.files] == ["b/x.py", "a/y.py"]
        assert all(f.namespace == "" for f in result.files)

    async def test_context_trimmed(self) -> None:
        """Context is cut to the lines asked for, nearest the hit kept."""
        ctx = {"before": ["b1", "b2"], "after": ["a1", "a2"]}
        async with fake_afi(manifest(), page(match("/x.py", 5, context=ctx))) as (_, afi):
            with_one = await afi.search(query(context_lines=1))
            without = await afi.search(query())
        assert (with_one.files[0].hits[0].before, with_one.files[0].hits[0].after) == (("b2",), ("a1",))
        assert (without.files[0].hits[0].before, without.files[0].hits[0].after) == ((), ())

    async def test_local_filters(self) -> None:
        """Path excludes and languages are applied to the provider's paths here."""
        matches = [match("/src/a.py", 1), match("/src/gen/b.py", 1), match("/src/c.go", 1)]
        async with fake_afi(manifest(), page(*matches)) as (_, afi):
            result = await afi.search(query(paths=("!src/gen/**",), languages=("python",)))
        assert list(lines(result)) == ["src/a.py"]

    async def test_semantic_scores(self) -> None:
        """Semantic matches keep their score; the text is cut to 256 characters."""
        long = "x" * 400
        async with fake_afi(manifest(), page(match("/d.md", 1, None, text=long, score=0.8))) as (_, afi):
            result = await afi.search(query("auth", mode="semantic"))
        hit = result.files[0].hits[0]
        assert (hit.score, len(hit.text), hit.text[-1]) == (0.8, 256, "…")

    async def test_incomplete_provider_namespaces(self) -> None:
        """A fedsearch provider's x-incomplete makes the result capped, naming what did not answer."""
        body = page(match("/a.py", 1), extra={"x-incomplete": [{"name": "broken", "status": "error"}]})
        async with fake_afi(manifest(), body) as (_, afi):
            result = await afi.search(query())
        assert (result.status, len(result.files)) == ("capped", 1)
        assert "broken (error)" in result.reason


class TestPaging:
    async def test_follows_cursor(self) -> None:
        """next_cursor is sent back until the provider gives none, and a file split over pages is merged."""
        replies = [
            manifest(),
            page(match("/a.py", 1), match("/b.py", 1), cursor="c1"),
            page(match("/b.py", 2), match("/c.py", 1)),
        ]
        async with fake_afi(*replies) as (server, afi):
            result = await afi.search(query())
        assert server.requests[2].json()["cursor"] == "c1"
        assert result.status == "ok"
        assert lines(result) == {"a.py": [(1, 1)], "b.py": [(1, 1), (2, 1)], "c.py": [(1, 1)]}

    async def test_budget_caps(self) -> None:
        """Once max_files files are complete a cursor left makes the result capped, the partial last file dropped."""
        replies = [manifest(), page(match("/a.py", 1), match("/b.py", 1), match("/c.py", 1), cursor="c1")]
        async with fake_afi(*replies) as (server, afi):
            result = await afi.search(query(max_files=2))
        assert len(server.requests) == 2
        assert (result.status, result.file_count) == ("capped", 3)
        assert list(lines(result)) == ["a.py", "b.py"]
        assert "has more" in result.reason

    async def test_later_page_timeout(self) -> None:
        """A later page hanging past the deadline keeps the first page's complete files, marked timeout."""
        replies = [manifest(), page(match("/a.py", 1), match("/b.py", 1), cursor="c1"), hang()]
        async with fake_afi(*replies) as (_, afi):
            result = await afi.search(query(deadline=time.monotonic() + 0.5))
        assert (result.status, list(lines(result))) == ("timeout", ["a.py"])

    async def test_later_page_error(self) -> None:
        """A later page's AFI error keeps the first page, marked capped with the error."""
        replies = [
            manifest(),
            page(match("/a.py", 1), match("/b.py", 1), cursor="c1"),
            afi_error("internal", 500, "disk on fire"),
        ]
        async with fake_afi(*replies) as (_, afi):
            result = await afi.search(query())
        assert (result.status, list(lines(result))) == ("capped", ["a.py"])
        assert "disk on fire" in result.reason


class TestErrors:
    @pytest.fixture(autouse=True)
    def token(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(TOKEN_ENV, TOKEN)

    async def fail(self, reply: Reply, deadline: float = 5.0) -> BackendError:
        async with fake_afi(manifest(), reply, token_env=TOKEN_ENV) as (_, afi):
            with pytest.raises(BackendError) as info:
                await afi.search(query(deadline=time.monotonic() + deadline))
        return info.value

    async def test_rate_limited_object(self) -> None:
        """An AFI rate_limited error is RateLimited with its retry_after."""
        err = await self.fail(afi_error("rate_limited", 429, retry_after=12))
        assert isinstance(err, RateLimited) and err.retry_after == 12.0

    async def test_unauthorized(self) -> None:
        """unauthorized is the request refused (Rejected: the provider is up), saying just that."""
        err = await self.fail(afi_error("unauthorized", 401))
        assert type(err) is Rejected and err.reason == "unauthorized"

    async def test_unsupported(self) -> None:
        """unsupported is Unsupported with the provider's message."""
        err = await self.fail(afi_error("unsupported", 405, "no regex here"))
        assert isinstance(err, Unsupported) and "no regex here" in err.reason

    async def test_not_found(self) -> None:
        """Another AFI 4xx error is Rejected, naming its code."""
        err = await self.fail(afi_error("not_found", 404, "no such path"))
        assert type(err) is Rejected and err.reason == "AFI not_found: no such path"

    async def test_wrong_shape(self) -> None:
        """A 200 without a matches list is a BackendError about its shape."""
        assert "shape" in (await self.fail(json_reply({"matches": {"a": 1}}))).reason
        assert "shape" in (await self.fail(json_reply({"matches": ["x"]}))).reason


# --- against fedsearch's own AFI provider ------------------------------------------------


async def failing(q: SearchQuery) -> BackendResult:
    raise BackendError("boom")


async def semantic(q: SearchQuery) -> BackendResult:
    hits = (Hit(line=2, text="verify the signed token", score=0.9), Hit(line=9, text="weak", score=0.2))
    return BackendResult(files=(FileMatch(path="auth.md", hits=hits),))


@pytest.fixture
def serve(aiohttp_server: Callable[..., Any]) -> Serve:
    """Serve a real fedsearch app with its AFI routes over ``root``; returns its base URL."""

    async def start(root: Path, *mocks: MockBackend, seen: list[dict[str, Any]] | None = None) -> str:
        config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(root))

        def factory(c: Config) -> SearchService:
            return SearchService.with_backends([*(open_backend(ns) for ns in c.namespaces), *mocks])

        app = create_app(config, service_factory=factory if mocks else None)
        if seen is not None:

            @web.middleware
            async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
                if request.path == SEARCH:
                    seen.append(await request.json())
                return await handler(request)

            app.middlewares.append(record)
        if not any(r.resource is not None and r.resource.canonical == MANIFEST_PATH for r in app.router.routes()):
            add_afi_routes(app)
        server = await aiohttp_server(app)
        return str(server.make_url("")).rstrip("/")

    return start


@pytest.fixture
async def provider(serve: Serve, tmp_path: Path) -> str:
    return await serve(make_corpus(tmp_path / "remote"))


@pytest.mark.skipif(find_rg() is None, reason="no rg binary")
class TestRealProvider:
    async def test_exact(self, provider: str) -> None:
        """A case-sensitive search finds the provider's files under their virtual paths, with lines and columns."""
        async with AfiBackend("r", AfiSettings(url=provider)) as afi:
            result = await afi.search(query("register_widget"))
        found = lines(result)
        assert found["alpha/src/widgets.py"] == [(4, 5), (8, 1)]
        assert found["team/beta/docs/guide.md"] == [(1, 5)]
        assert set(found) == {
            "alpha/src/widgets.py",
            "alpha/src/util.py",
            "alpha/README.md",
            "team/beta/lib/registry.go",
            "team/beta/docs/guide.md",
            "team/beta/vendor/dep/widget.go",
        }

    async def test_case_insensitive_through_regex(self, provider: str) -> None:
        """A case-insensitive exact search goes as an escaped regex and finds the same lines."""
        async with AfiBackend("r", AfiSettings(url=provider)) as afi:
            result = await afi.search(query("REGISTER_WIDGET(", case_sensitive=False))
        assert lines(result) == {"alpha/src/widgets.py": [(4, 5), (8, 1)], "team/beta/docs/guide.md": [(1, 5)]}

    async def test_scoped_by_path(self, provider: str) -> None:
        """An include glob's directory becomes the AFI search path."""
        async with AfiBackend("r", AfiSettings(url=provider)) as afi:
            result = await afi.search(query("register_widget", paths=("team/beta/**",)))
        assert {f.path for f in result.files} == {
            "team/beta/lib/registry.go",
            "team/beta/docs/guide.md",
            "team/beta/vendor/dep/widget.go",
        }

    async def test_semantic_undeclared(self, serve: Serve, tmp_path: Path) -> None:
        """A provider whose manifest declares no semantic mode is not asked by meaning: Unsupported."""
        lexical = MockBackend(semantic, name="docs", modes=frozenset({"exact", "regex"}))
        (tmp_path / "empty").mkdir()
        url = await serve(tmp_path / "empty", lexical)  # no local checkout: nothing there searches by meaning
        async with AfiBackend("r", AfiSettings(url=url)) as afi:
            with pytest.raises(Unsupported, match="semantic"):
                await afi.search(query("widgets", mode="semantic"))

    async def test_semantic_declared(self, serve: Serve, tmp_path: Path) -> None:
        """With a semantic namespace behind it the provider is asked semantically; scores pass, weak hits do not."""
        url = await serve(make_corpus(tmp_path / "remote"), MockBackend(semantic, name="docs"))
        async with AfiBackend("r", AfiSettings(url=url)) as afi:
            result = await afi.search(query("auth", mode="semantic", threshold=0.5))
        assert [(f.path, [(h.line, h.score) for h in f.hits]) for f in result.files] == [("docs/auth.md", [(2, 0.9)])]

    async def test_paging_through_cursors(self, serve: Serve, tmp_path: Path) -> None:
        """Matches over several cursor pages all arrive, files whole, none twice."""
        files = {f"f{i:02}.txt": "needle\n" * 20 for i in range(30)}
        seen: list[dict[str, Any]] = []
        url = await serve(make_corpus(tmp_path / "bulk", {"bulk": files}), seen=seen)
        async with AfiBackend("r", AfiSettings(url=url)) as afi:
            result = await afi.search(query(max_files=100))  # limit 500: two pages of 600 matches
        assert [("cursor" in body, body["limit"]) for body in seen] == [(False, 500), (True, 500)]
        assert result.status == "ok"
        assert sorted(f.path for f in result.files) == [f"bulk/f{i:02}.txt" for i in range(30)]
        assert all([h.line for h in f.hits] == list(range(1, 21)) for f in result.files)

    async def test_paging_capped(self, serve: Serve, tmp_path: Path) -> None:
        """With few files wanted, paging stops early and says the provider has more."""
        files = {f"f{i:02}.txt": "needle\n" * 20 for i in range(30)}
        url = await serve(make_corpus(tmp_path / "bulk", {"bulk": files}))
        async with AfiBackend("r", AfiSettings(url=url)) as afi:
            result = await afi.search(query(max_files=5))  # limit 100: five files a page
        assert result.status == "capped"
        assert len(result.files) == 9 and result.file_count == 10
        assert all(len(f.hits) == 20 for f in result.files)

    async def test_in_a_local_answer(self, serve: Serve, tmp_path: Path) -> None:
        """An afi namespace merges with a local one; a failed provider namespace makes it capped, with a next action."""
        url = await serve(make_corpus(tmp_path / "remote"), MockBackend(failing, name="broken"))
        local = discover(make_corpus(tmp_path / "local", {"delta": {"app.py": "import register_widget\n"}}))
        service = SearchService.with_backends(
            [AfiBackend("remote", AfiSettings(url=url)), *(open_backend(ns) for ns in local)]
        )
        try:
            answer = await service.search_json({"query": "register_widget", "case_sensitive": True})
        finally:
            await service.aclose()
        shown = {(g["namespace"], g["file_path"]) for g in answer["files"]}
        assert ("remote", "alpha/src/widgets.py") in shown and ("delta", "app.py") in shown
        status = {s["name"]: s for s in answer["namespaces"]}["remote"]
        assert (status["backend"], status["status"]) == ("afi", "capped")
        assert "broken (error)" in status["error"]
        assert any(a["args"]["namespaces"] == ["remote"] for a in answer["next"])

    async def test_manifest_route_is_served(self, provider: str) -> None:
        """The provider under test really is fedsearch's (its manifest names it)."""
        async with AfiBackend("r", AfiSettings(url=provider)) as afi:
            got = await afi.manifest(query())
        assert {"exact", "regex"} <= got.modes and got.max_results == 500
