"""The peer gateway adapter against a REAL second fedsearch served on 127.0.0.1.

The peer is ``create_app(config)`` over ``git init`` checkouts (``tests.corpus``);
failures the real peer cannot produce on demand (5xx, garbage, hangs, redirects,
later pages failing) are scripted with :class:`tests.fakeservers.FakeServer`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from adapters.peer import PeerBackend, PeerSettings, build_request, next_offset, peer_timeout_ms
from adapters.ripgrep.backend import find_rg
from gateway.config import Config, DefaultsConfig, ServerConfig, discover, parse_config
from gateway.errors import BackendError, ConfigError
from gateway.http.app import create_app
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.query.request import parse_request
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

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

TOKEN_ENV = "FEDSEARCH_TEST_PEER_TOKEN"
TOKEN = "peer-secret-3f9a1c77d2"
LOCAL = {"delta": {"app.py": "from alpha import register_widget\n"}}
BULK = 450

Serve = Callable[..., Awaitable[str]]
Local = Callable[..., SearchService]


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", False)
    kw.setdefault("deadline", time.monotonic() + 10.0)
    return SearchQuery(text=text, **kw)


@contextlib.asynccontextmanager
async def fake_peer(*replies: Reply, **settings: Any) -> AsyncIterator[tuple[FakeServer, PeerBackend]]:
    """A scripted fake peer and a PeerBackend pointed at it."""
    async with FakeServer(*replies) as server, PeerBackend("p", PeerSettings(url=server.url, **settings)) as peer:
        yield server, peer


def config_of(root: Path) -> Config:
    return Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(root))


async def failing(q: SearchQuery) -> BackendResult:
    raise BackendError("boom")


async def symbols(q: SearchQuery) -> BackendResult:
    hit = Hit(
        line=3,
        end_line=7,
        text="def register_widget(name):",
        column=5,
        kind="function",
        symbol="register_widget",
        score=0.9,
    )
    return BackendResult(files=(FileMatch(path="lib/defs.py", hits=(hit,)),))


def with_mocks(*mocks: MockBackend) -> Callable[[Config], SearchService]:
    """A peer service factory: the config's ripgrep namespaces plus ``mocks``."""

    def factory(config: Config) -> SearchService:
        return SearchService.with_backends([*(open_backend(ns) for ns in config.namespaces), *mocks])

    return factory


@pytest.fixture
def remote_root(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "remote")


@pytest.fixture
def serve(aiohttp_server: Callable[..., Any]) -> Serve:
    """Serve a real fedsearch app over ``root``; returns its base URL. ``seen`` records request bodies."""

    async def start(
        root: Path,
        factory: Callable[[Config], SearchService] | None = None,
        seen: list[dict[str, Any]] | None = None,
    ) -> str:
        app = create_app(config_of(root), service_factory=factory)
        if seen is not None:

            @web.middleware
            async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
                if request.method == "POST":
                    seen.append(await request.json())
                return await handler(request)

            app.middlewares.append(record)
        server = await aiohttp_server(app)
        return str(server.make_url("")).rstrip("/")

    return start


@pytest.fixture
async def peer_url(serve: Serve, remote_root: Path) -> str:
    return await serve(remote_root)


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[Local]:
    """Build a local service: a ``peer`` namespace at a URL plus the ripgrep namespace ``delta``."""
    root = make_corpus(tmp_path / "local", LOCAL)
    made: list[SearchService] = []

    def build(url: str, **settings: Any) -> SearchService:
        peer = PeerBackend("peer", PeerSettings(url=url, **settings))
        service = SearchService.with_backends([peer, *(open_backend(ns) for ns in discover(root))])
        made.append(service)
        return service

    yield build
    for service in made:
        await service.aclose()


def group(answer: dict[str, Any], namespace: str, path: str) -> dict[str, Any]:
    found = [g for g in answer["files"] if (g["namespace"], g["file_path"]) == (namespace, path)]
    assert len(found) == 1, f"{namespace} {path} not in {[(g['namespace'], g['file_path']) for g in answer['files']]}"
    chosen: dict[str, Any] = found[0]
    return chosen


def peer_answer(files: list[tuple[str, str, int]], offset: int = 0, more: bool = False) -> dict[str, Any]:
    """A peer SearchResponse with one hit per (namespace, path, line); ``more`` adds a next-page action."""
    groups = [
        {
            "file_path": path,
            "namespace": ns,
            "hit_count": 1,
            "hits": [
                {
                    "id": 1,
                    "qualified_name": f"{ns}:{path}:{line}",
                    "kind": "line",
                    "name": path,
                    "file_path": path,
                    "start_line": line,
                    "end_line": line,
                    "matched": ["content"],
                    "namespace": ns,
                    "text": "needle",
                    "column": 1,
                }
            ],
        }
        for ns, path, line in files
    ]
    end = offset + len(files)
    actions = [{"reason": "next page", "tool": "search", "args": {"query": "needle", "offset": end}}] if more else []
    return {
        "files": groups,
        "file_count": end + (1 if more else 0),
        "weak_filtered": 0,
        "truncated": more,
        "limits": {"files": 200, "offset": offset, "hit_budget": 5000},
        "next": actions,
        "namespaces": [
            {"name": "r", "backend": "ripgrep", "status": "ok", "took_ms": 1, "files": len(files), "hits": len(files)}
        ],
        "took_ms": 1,
    }


class TestAsking:
    def test_request_is_a_valid_search_request(self) -> None:
        """The body sent is a complete SearchRequest the peer's own validation accepts."""
        body = build_request(
            query(paths=("src/**",), languages=("python",), context_lines=2, max_files=500),
            offset=200,
            namespaces=["team/*"],
        )
        request = parse_request(body)
        assert (request.files, request.offset, request.hit_budget) == (200, 200, 5000)
        assert request.case_sensitive is False
        assert request.namespaces == ["team/*"]
        assert (request.paths, request.languages, request.context_lines) == (["src/**"], ["python"], 2)

    def test_timeout_inside_our_deadline(self) -> None:
        """The peer's timeout_ms leaves a margin inside ours and stays within its bounds."""
        assert peer_timeout_ms(5.0) == 4500
        assert peer_timeout_ms(0.01) == 100
        assert peer_timeout_ms(600.0) == 60_000

    def test_next_page_action_is_found(self) -> None:
        """Only the action moving the offset on counts as the next page."""
        answer = {
            "next": [
                {"tool": "search", "args": {"offset": 0, "namespaces": ["x"]}},
                {"tool": "search", "args": {"offset": 200}},
            ]
        }
        assert next_offset(answer, 0) == 200
        assert next_offset(answer, 200) is None
        assert next_offset({"next": [{"tool": "search", "args": {"offset": True}}]}, 0) is None

    async def test_token_and_globs_sent(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The token goes as a Bearer header, the configured globs as namespaces."""
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        async with fake_peer(json_reply(peer_answer([])), token_env=TOKEN_ENV, namespaces=["team/*"]) as (
            server,
            peer,
        ):
            await peer.search(query())
        sent = server.requests[0]
        assert (sent.method, sent.path) == ("POST", "/v1/search")
        assert sent.headers["Authorization"] == f"Bearer {TOKEN}"
        assert sent.json()["namespaces"] == ["team/*"]

    def test_config_table(self) -> None:
        """A [[namespaces]] table of backend gateway validates its url, token_env and remote globs."""
        config = parse_config(
            {
                "namespaces": [
                    {
                        "name": "peer",
                        "backend": "gateway",
                        "url": "http://h:1/",
                        "token_env": TOKEN_ENV,
                        "namespaces": ["team/*"],
                    }
                ]
            }
        )
        settings = config.namespaces[0].settings
        assert isinstance(settings, PeerSettings)
        assert (settings.url, settings.namespaces) == ("http://h:1", ["team/*"])
        with pytest.raises(ConfigError, match=r"namespaces\[0\]\.repos"):
            parse_config({"namespaces": [{"name": "p", "backend": "gateway", "url": "http://h", "repos": "x"}]})


class TestRealPeer:
    async def test_remote_files_tagged(self, peer_url: str, local: Local) -> None:
        """A remote file comes back as <peer>/<remote> with the peer's lines and character columns."""
        answer = await local(peer_url).search_json({"query": "register_widget"})
        widgets = group(answer, "peer/alpha", "src/widgets.py")
        first = [h["lines"][0] for h in widgets["hits"]]  # the file's own hit's first line, a declaration's
        assert [(h["kind"], h["start_line"]) for h in widgets["hits"]] == [("file", 1), ("function", 4)]
        assert [(f["line"], f["column"]) for f in first] == [(8, 1), (4, 5)]
        assert first[1]["text"] == "def register_widget(name):" and "text" not in widgets["hits"][1]
        assert group(answer, "peer/team/beta", "docs/guide.md")["hits"][0]["lines"][0]["column"] == 5

    async def test_remote_statuses(self, peer_url: str, local: Local) -> None:
        """Every remote namespace appears in namespaces as <peer>/<remote> with its backend and counts."""
        answer = await local(peer_url).search_json({"query": "register_widget"})
        statuses = {s["name"]: s for s in answer["namespaces"]}
        assert set(statuses) == {"delta", "peer", "peer/alpha", "peer/gamma", "peer/team/beta"}
        alpha = statuses["peer/alpha"]
        assert (alpha["backend"], alpha["status"], alpha["files"], alpha["hits"]) == ("ripgrep", "ok", 3, 4)
        assert statuses["peer/gamma"]["files"] == 0

    async def test_merged_with_local(self, peer_url: str, local: Local) -> None:
        """Remote and local namespaces merge into one ranked answer, counted once."""
        answer = await local(peer_url).search_json({"query": "register_widget"})
        shown = {(g["namespace"], g["file_path"]) for g in answer["files"]}
        assert shown == {
            ("peer/alpha", "src/widgets.py"),
            ("peer/alpha", "src/util.py"),
            ("peer/alpha", "README.md"),
            ("peer/team/beta", "lib/registry.go"),
            ("peer/team/beta", "docs/guide.md"),
            ("peer/team/beta", "vendor/dep/widget.go"),
            ("delta", "app.py"),
        }
        assert (answer["file_count"], answer["truncated"]) == (7, False)
        assert answer["files"][0]["file_path"] == "src/widgets.py"  # the definition ranks first
        assert answer["files"][-1]["file_path"] == "vendor/dep/widget.go"  # vendored ranks last

    async def test_context_lines(self, peer_url: str, local: Local) -> None:
        """Context lines asked for come back from the peer around each hit."""
        answer = await local(peer_url).search_json({"query": "register_widget", "context_lines": 1})
        hit = group(answer, "peer/alpha", "src/widgets.py")["hits"][1]["lines"][0]  # the declaration's
        assert hit["context"] == {"before": [""], "after": ["    return name"]}

    async def test_remote_glob_limits(self, peer_url: str, local: Local) -> None:
        """Configured remote globs restrict the peer's namespaces."""
        answer = await local(peer_url, namespaces=["team/*"]).search_json({"query": "register_widget"})
        assert {s["name"] for s in answer["namespaces"]} == {"delta", "peer", "peer/team/beta"}
        assert {g["namespace"] for g in answer["files"]} == {"delta", "peer/team/beta"}

    async def test_remote_400_is_an_error(self, peer_url: str) -> None:
        """A remote glob matching nothing is the peer's 400, carried as a BackendError with its detail."""
        async with PeerBackend("p", PeerSettings(url=peer_url, namespaces=["nope-*"])) as peer:
            with pytest.raises(BackendError, match="namespaces: no namespace matches 'nope-\\*'"):
                await peer.search(query())

    async def test_symbols_and_scores(self, serve: Serve, remote_root: Path) -> None:
        """A remote symbol hit keeps its kind, name and span; a semantic score passes through."""
        url = await serve(remote_root, with_mocks(MockBackend(symbols, name="defs")))
        async with PeerBackend("p", PeerSettings(url=url, namespaces=["defs"])) as peer:
            result = await peer.search(query(mode="semantic", threshold=0.5))
        (file,) = result.files
        (hit,) = file.hits
        assert (file.namespace, file.path) == ("defs", "lib/defs.py")
        assert (hit.kind, hit.symbol, hit.line, hit.last_line, hit.score) == ("function", "register_widget", 3, 7, 0.9)


class TestRemoteFailure:
    @pytest.fixture
    async def broken_url(self, serve: Serve, remote_root: Path) -> str:
        return await serve(remote_root, with_mocks(MockBackend(failing, name="broken")))

    async def test_child_status(self, broken_url: str) -> None:
        """A failed remote namespace is a child status with its error; the peer itself is ok."""
        async with PeerBackend("p", PeerSettings(url=broken_url)) as peer:
            result = await peer.search(query())
        children = {c.name: c for c in result.children}
        assert (children["broken"].status, children["broken"].backend, children["broken"].error) == (
            "error",
            "mock",
            "boom",
        )
        assert result.status == "ok"

    async def test_becomes_our_next_action(self, broken_url: str, local: Local) -> None:
        """The peer's failed namespace shows as peer/broken and becomes our own retry action."""
        answer = await local(broken_url).search_json({"query": "register_widget"})
        statuses = {s["name"]: s for s in answer["namespaces"]}
        assert (statuses["peer/broken"]["status"], statuses["peer/broken"]["error"]) == ("error", "boom")
        assert answer["truncated"] is True
        retry = [a for a in answer["next"] if a["args"]["namespaces"] == ["peer/broken"]]
        assert len(retry) == 1 and "peer/broken failed" in retry[0]["reason"]
        assert {g["namespace"] for g in answer["files"]} >= {"peer/alpha", "delta"}

    async def test_next_action_runs_verbatim(self, broken_url: str, local: Local) -> None:
        """The retry action naming peer/broken runs verbatim and searches only that remote namespace."""
        service = local(broken_url)
        answer = await service.search_json({"query": "register_widget"})
        retry = next(a for a in answer["next"] if a["args"]["namespaces"] == ["peer/broken"])
        again = await service.search_json(retry["args"])
        assert {s["name"] for s in again["namespaces"]} == {"peer", "peer/broken"}

    async def test_sub_namespaces_asked(self, broken_url: str) -> None:
        """A query naming sub-namespaces asks the peer for exactly those."""
        async with PeerBackend("p", PeerSettings(url=broken_url)) as peer:
            result = await peer.search(
                SearchQuery(text="register_widget", case_sensitive=False, sub_namespaces=("team/*",))
            )
        assert [c.name for c in result.children] == ["team/beta"]
        assert {f.namespace for f in result.files} == {"team/beta"}

    async def test_sub_namespaces_stay_within_globs(self, broken_url: str) -> None:
        """Sub-namespaces outside the configured globs are not shown."""
        async with PeerBackend("p", PeerSettings(url=broken_url, namespaces=["alpha"])) as peer:
            result = await peer.search(
                SearchQuery(text="register_widget", case_sensitive=False, sub_namespaces=("alpha", "team/*"))
            )
        assert [c.name for c in result.children] == ["alpha"]
        assert {f.namespace for f in result.files} == {"alpha"}
        assert result.file_count is None


class TestPaging:
    @pytest.fixture
    async def bulk(self, serve: Serve, tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
        root = make_corpus(tmp_path / "bulk", {"bulk": {f"f{i:03}.txt": "needle\n" for i in range(BULK)}})
        seen: list[dict[str, Any]] = []
        return await serve(root, seen=seen), seen

    async def peer_order(self, url: str) -> list[str]:
        """The peer's own global order, paged by hand."""
        paths: list[str] = []
        async with aiohttp.ClientSession() as session:
            for offset in range(0, BULK, 200):
                body = {"query": "needle", "files": 200, "hit_budget": 5000, "char_budget": 10**7, "offset": offset}
                async with session.post(url + "/v1/search", json=body) as resp:
                    paths += [g["file_path"] for g in (await resp.json())["files"]]
        return paths

    async def test_follows_pages(self, bulk: tuple[str, list[dict[str, Any]]]) -> None:
        """Enough files wanted: every page is followed and the files keep the peer's global order."""
        url, seen = bulk
        async with PeerBackend("p", PeerSettings(url=url)) as peer:
            result = await peer.search(query("needle", max_files=1000))
        assert [b["offset"] for b in seen] == [0, 200, 400]
        assert (result.status, result.file_count) == ("ok", None)
        assert [f.path for f in result.files] == await self.peer_order(url)

    async def test_stops_at_max_files(self, bulk: tuple[str, list[dict[str, Any]]]) -> None:
        """Pages stop once max_files files are in; the peer's remaining pages make the result capped."""
        url, seen = bulk
        async with PeerBackend("p", PeerSettings(url=url)) as peer:
            result = await peer.search(query("needle", max_files=250))
        assert [b["offset"] for b in seen] == [0, 200]
        assert (result.status, len(result.files), result.file_count) == ("capped", 400, BULK)
        assert "400 of 450" in result.reason

    async def test_later_page_timeout_keeps_the_first(self) -> None:
        """A later page that hangs past the deadline leaves the first page, marked timeout."""
        first = json_reply(peer_answer([("r", "a.txt", 1), ("r", "b.txt", 2)], more=True))
        async with fake_peer(first, hang()) as (server, peer):
            result = await peer.search(query("needle", max_files=10, deadline=time.monotonic() + 0.5))
        assert result.status == "timeout"
        assert [(f.namespace, f.path) for f in result.files] == [("r", "a.txt"), ("r", "b.txt")]
        assert server.requests[1].json()["offset"] == 2

    async def test_later_page_error_keeps_the_first(self) -> None:
        """A later page answering 500 leaves the first page, marked capped with the reason."""
        first = json_reply(peer_answer([("r", "a.txt", 1)], more=True))
        async with fake_peer(first, server_error()) as (server, peer):
            result = await peer.search(query("needle", max_files=10))
        assert (result.status, len(result.files)) == ("capped", 1)
        assert server.requests[1].json()["offset"] == 1
        assert "HTTP 500" in result.reason


class TestFailing:
    async def search(self, *replies: Any, deadline: float = 5.0) -> tuple[BackendResult, FakeServer]:
        async with fake_peer(*replies, token_env=TOKEN_ENV) as (server, peer):
            result = await peer.search(query(deadline=time.monotonic() + deadline))
        return result, server

    @pytest.fixture(autouse=True)
    def token(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(TOKEN_ENV, TOKEN)

    async def test_wrong_shape(self) -> None:
        """JSON that is not a SearchResponse is a BackendError about its shape."""
        with pytest.raises(BackendError, match="shape"):
            await self.search(json_reply({"files": [{"namespace": "x", "hits": "no"}]}))

    async def test_400_detail_is_scrubbed_of_the_token(self) -> None:
        """A 400 detail echoing the token is carried without it."""
        echo = json_reply({"detail": f"bad token {TOKEN}", "field": "body"}, status=400)
        with pytest.raises(BackendError) as info:
            await self.search(echo)
        assert "peer rejected the request: body: bad token" in info.value.reason
        assert TOKEN not in info.value.reason


class TestSizing:
    async def test_asks_for_every_line_and_no_character_cut(self) -> None:
        """The peer is asked for whole declaration hits (every line) and pages cut by files only: ours cuts."""
        async with fake_peer(json_reply(peer_answer([("r", "a.txt", 1)]))) as (server, peer):
            await peer.search(query("needle"))
        sent = server.requests[0].json()
        assert (sent["hit_lines"], sent["char_budget"]) == (None, 10_000_000)

    async def test_a_peer_from_before_the_sizing_fields_is_asked_without_them(self) -> None:
        """A peer that refuses char_budget as an unknown field is asked again without the sizing fields,
        and so are its later pages."""
        refused = json_reply(
            {
                "type": "about:blank",
                "title": "Bad Request",
                "status": 400,
                "detail": "unknown field",
                "field": "char_budget",
            },
            status=400,
        )
        first = json_reply(peer_answer([("r", "a.txt", 1)], more=True))
        second = json_reply(peer_answer([("r", "b.txt", 2)], offset=1))
        async with fake_peer(refused, first, second) as (server, peer):
            result = await peer.search(query("needle", max_files=10))
        assert [f.path for f in result.files] == ["a.txt", "b.txt"] and result.status == "ok"
        bodies = [r.json() for r in server.requests]
        assert "char_budget" in bodies[0] and not any("char_budget" in b or "hit_lines" in b for b in bodies[1:])
        assert len(bodies) == 3
