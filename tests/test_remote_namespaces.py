"""Remote namespaces as first-class as local ones (SPEC §5), against a REAL second fedsearch.

The peer is ``create_app`` over ``git init`` checkouts (``tests.corpus``: ``alpha``,
``team/beta``, ``gamma``) served on 127.0.0.1; in front of it, our gateway serves the
``peer`` namespace (``backend = "gateway"``) and a local ``delta``. Its children are
listed, matched by globs everywhere a pattern is taken, readable on every read surface,
and scoped by AFI paths; a token may see some of them and nothing else.
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from aiohttp.typedefs import Handler
from mcp import Client

from adapters.peer import PeerBackend, PeerSettings
from adapters.ripgrep.backend import find_rg
from adapters.zoekt.backend import ZoektSettings
from gateway.afi.base import locate
from gateway.afi.search import _scope
from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig, TokenConfig, discover
from gateway.http.app import create_app
from gateway.mcp.tools import build_server
from gateway.service import SearchService
from tests.corpus import FILES, make_corpus
from tests.fake_github_gitlab import FakeApi
from tests.helpers import fedsearch_command, free_port, subprocess_env
from tests.remote_files import REGISTRY_PATH, zoekt_read_answer

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

Client_ = TestClient[Any, Any]
Front = Callable[..., Awaitable[Client_]]
WIDGETS = FILES["alpha"]["src/widgets.py"]
TOKENS = {"alpha-only": "alpha-only-t0ken-91c", "children": "children-t0ken-5d2", "all": "all-t0ken-77e"}
GLOBS = {"alpha-only": ["delta", "peer/alpha"], "children": ["peer/*"], "all": ["*"]}


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def _config(namespaces: tuple[NamespaceConfig, ...], tokens: bool = False) -> Config:
    table = tuple(
        TokenConfig(name=n, sha256=hashlib.sha256(t.encode()).hexdigest(), namespaces=GLOBS[n])
        for n, t in TOKENS.items()
    )
    return Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=namespaces,
        tokens=table if tokens else (),
        source="test",
    )


class Peer:
    """The real second gateway: its URL and the requests it received (path, status)."""

    def __init__(self) -> None:
        self.url = ""
        self.seen: list[tuple[str, str, int]] = []

    def searches(self) -> int:
        return sum(1 for method, path, _ in self.seen if (method, path) == ("POST", "/v1/search"))


@pytest.fixture
def zoekt() -> FakeApi:
    return FakeApi()


@pytest.fixture
async def peer(aiohttp_server: Callable[..., Any], tmp_path: Path, fixtures_dir: Path, zoekt: FakeApi) -> Peer:
    """The peer gateway over the corpus, plus ``zk``: a zoekt namespace (a fake serving the fixtures)."""
    answer = orjson.loads((fixtures_dir / "zoekt_search_response.json").read_bytes())

    async def zoekt_api(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body["Opts"].get("Whole") is not None:
            return web.json_response(zoekt_read_answer(fixtures_dir, whole=body["Opts"]["Whole"]))
        return web.json_response(answer)

    zoekt.on("/api/search", zoekt_api)
    zoekt_server = await aiohttp_server(zoekt.app())
    zoekt_url = str(zoekt_server.make_url("")).rstrip("/")
    root = make_corpus(tmp_path / "remote")
    zk = NamespaceConfig(name="zk", backend="zoekt", settings=ZoektSettings(urls=[zoekt_url]))
    app = create_app(_config((*discover(root), zk)))
    found = Peer()

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        found.seen.append((request.method, request.path, response.status))
        return response

    app.middlewares.append(record)
    server = await aiohttp_server(app)
    found.url = str(server.make_url("")).rstrip("/")
    return found


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "local", {"delta": {"app.py": "from alpha import register_widget\n"}})


def front_config(url: str, local_root: Path, tokens: bool = False, **settings: Any) -> Config:
    peer_ns = NamespaceConfig(name="peer", backend="gateway", settings=PeerSettings(url=url, **settings))
    return _config((peer_ns, *discover(local_root)), tokens)


@pytest.fixture
async def front(aiohttp_client: Callable[..., Any], local_root: Path) -> Front:
    """Our gateway over HTTP: the peer at ``url`` as ``peer`` and the local ``delta``."""

    async def make(url: str, tokens: bool = False, **settings: Any) -> Client_:
        client: Client_ = await aiohttp_client(create_app(front_config(url, local_root, tokens, **settings)))
        return client

    return make


@pytest.fixture
async def service(peer: Peer, local_root: Path) -> AsyncIterator[SearchService]:
    svc = SearchService(front_config(peer.url, local_root))
    yield svc
    await svc.aclose()


async def search(client: Client_, headers: dict[str, str] | None = None, **body: Any) -> tuple[int, Any]:
    resp = await client.post("/v1/search", json={"query": "register_widget", **body}, headers=headers)
    return resp.status, await resp.json()


def shown(answer: dict[str, Any]) -> set[tuple[str, str]]:
    return {(g["namespace"], g["file_path"]) for g in answer["files"]}


class TestListing:
    async def test_children_are_listed_as_the_peer_declares_them(self, peer: Peer, front: Front) -> None:
        """/v1/namespaces lists `peer/<remote>` for each of the peer's namespaces, with the backend,
        health, capabilities and file path form the peer gives for it."""
        client = await front(peer.url)
        listed = {e["name"]: e for e in (await (await client.get("/v1/namespaces")).json())["namespaces"]}
        async with PeerBackend("p", PeerSettings(url=peer.url)) as direct:
            remote = await direct.children(asyncio.get_running_loop().time() + 5)
        assert set(listed) == {"peer", "delta", *(f"peer/{c.name}" for c in remote)}
        assert {c.name for c in remote} == {"alpha", "team/beta", "gamma", "zk"}
        for child in remote:
            entry = listed[f"peer/{child.name}"]
            assert (entry["backend"], entry["health"], entry["parent"]) == (child.backend, child.health, "peer")
            assert entry["capabilities"] == {"modes": list(child.modes), "read": child.read, "list": child.list}
        assert listed["peer/zk"]["file_paths"] == "<repository>/<path>"
        assert listed["peer/alpha"]["file_paths"] == "<path>" and listed["peer/alpha"]["backend"] == "ripgrep"

    async def test_the_peer_claims_only_the_modes_its_namespaces_declare(self, peer: Peer, front: Front) -> None:
        """The peer's own entry shows the modes its namespaces declare (not every mode it could pass on)."""
        client = await front(peer.url)
        listed = {e["name"]: e for e in (await (await client.get("/v1/namespaces")).json())["namespaces"]}
        declared = {m for n, e in listed.items() if n.startswith("peer/") for m in e["capabilities"]["modes"]}
        peer_entry = listed["peer"]
        assert set(peer_entry["capabilities"]["modes"]) == declared
        # the peer's checkouts search by meaning (their intent index), its zoekt namespace does not
        assert "semantic" in listed["peer/alpha"]["capabilities"]["modes"]
        assert "semantic" not in listed["peer/zk"]["capabilities"]["modes"]
        assert peer_entry["file_paths"] == "<namespace>/<path>" and peer_entry["capabilities"]["read"] is True

    async def test_an_unreachable_peer_lists_no_children(self, front: Front) -> None:
        """A peer that cannot be asked is listed alone (its children are not made up)."""
        client = await front(f"http://127.0.0.1:{free_port()}")
        names = [e["name"] for e in (await (await client.get("/v1/namespaces")).json())["namespaces"]]
        assert names == ["peer", "delta"]

    async def test_mcp_namespaces_lists_them_too(self, service: SearchService) -> None:
        """The MCP `namespaces` tool answers the same list, children included."""
        async with Client(build_server(service), raise_exceptions=True) as client:
            result = await client.call_tool("namespaces", {})
        names = [e["name"] for e in result.structured_content["namespaces"]]  # type: ignore[index]
        assert {"peer/alpha", "peer/team/beta", "peer/zk"} <= set(names)


class TestPatterns:
    async def test_a_glob_matches_a_child(self, peer: Peer, front: Front) -> None:
        """`*/alpha` finds `peer/alpha` (and nothing else), as a local glob would."""
        status, answer = await search(await front(peer.url), namespaces=["*/alpha"])
        assert status == 200
        assert {ns for ns, _ in shown(answer)} == {"peer/alpha"}
        assert {s["name"] for s in answer["namespaces"]} == {"peer", "peer/alpha"}

    async def test_a_glob_spans_children_of_two_levels(self, peer: Peer, front: Front) -> None:
        """`peer/team/*` finds the nested child `peer/team/beta` only."""
        _, answer = await search(await front(peer.url), namespaces=["peer/team/*"])
        assert {ns for ns, _ in shown(answer)} == {"peer/team/beta"}

    async def test_an_unknown_child_is_the_400_of_an_unknown_namespace(self, peer: Peer, front: Front) -> None:
        """`peer/nope` is the same 400 as a local name that does not exist, and the peer is never asked to search."""
        client = await front(peer.url)
        status, problem = await search(client, namespaces=["peer/nope"])
        status_local, local = await search(client, namespaces=["zzzz/nope"])
        assert status == status_local == 400
        visible = "; namespaces: peer, peer/alpha, peer/gamma, peer/team/beta, peer/zk, delta"
        assert problem["detail"] == "no namespace matches 'peer/nope'" + visible
        assert {k: v for k, v in problem.items() if k not in ("detail", "instance")} == {
            k: v for k, v in local.items() if k not in ("detail", "instance")
        }
        assert peer.searches() == 0

    async def test_the_query_syntax_matches_children(self, peer: Peer, front: Front) -> None:
        """`repo:*/alpha` in the query narrows to the child; `-repo:peer/alpha` leaves it out."""
        client = await front(peer.url)
        _, only = await search(client, query="register_widget repo:*/alpha")
        _, without = await search(client, query="register_widget -repo:peer/alpha")
        assert {ns for ns, _ in shown(only)} == {"peer/alpha"}
        assert "peer/alpha" not in {ns for ns, _ in shown(without)}
        assert {"peer/team/beta", "delta"} <= {ns for ns, _ in shown(without)}

    async def test_a_failed_child_is_retried_alone_never_wider(self, front: Front) -> None:
        """A peer that fails while asked for `peer/alpha` offers a retry of `peer/alpha`, not of all the peer."""
        client = await front(f"http://127.0.0.1:{free_port()}")
        status, answer = await search(client, namespaces=["peer/alpha"])
        assert status == 200 and answer["truncated"] is True
        assert [a["args"]["namespaces"] for a in answer["next"]] == [["peer/alpha"]]

    async def test_paths_match_inside_a_childs_repositories(self, peer: Peer, front: Front) -> None:
        """Through the peer, a zoekt child's files are `<repository>/<path>` and `src/**` keeps its src/ files."""
        _, answer = await search(await front(peer.url), namespaces=["peer/zk"], paths=["src/**"])
        assert shown(answer) == {("peer/zk", f"github.com/acme/widget-service/{REGISTRY_PATH}")}


class TestTokens:
    async def test_a_token_sees_the_children_its_globs_allow(self, peer: Peer, front: Front) -> None:
        """A token allowed `peer/alpha` lists, searches and reads exactly that child: no trace of `peer`
        itself nor of its other children anywhere in the answers."""
        client = await front(peer.url, tokens=True)
        headers = bearer("alpha-only")
        listed = await (await client.get("/v1/namespaces", headers=headers)).read()
        resp = await client.post("/v1/search", json={"query": "register_widget"}, headers=headers)
        body = await resp.read()
        answer = orjson.loads(body)
        names = [e["name"] for e in orjson.loads(listed)["namespaces"]]
        assert names == ["peer/alpha", "delta"]
        assert {ns for ns, _ in shown(answer)} == {"peer/alpha", "delta"}
        assert {s["name"] for s in answer["namespaces"]} == {"peer/alpha", "delta"}
        for blob in (listed, body):
            for word in (b"team/beta", b"gamma", b'"peer"', b"zk"):
                assert word not in blob

    async def test_a_token_reads_its_child_and_nothing_else(self, peer: Peer, front: Front) -> None:
        """`/v1/files` of the allowed child reads; another child's file is the 404 of a file that is not there."""
        client = await front(peer.url, tokens=True)
        headers = bearer("alpha-only")
        ok = await client.get("/v1/files/peer/alpha/src/widgets.py", headers=headers)
        hidden = await client.get("/v1/files/peer/team/beta/docs/guide.md", headers=headers)
        missing = await client.get("/v1/files/peer/nothing/here.md", headers=headers)
        assert ok.status == 200 and await ok.text() == WIDGETS
        assert hidden.status == missing.status == 404
        assert await hidden.json() == await missing.json()

    async def test_a_glob_over_children_only(self, peer: Peer, front: Front) -> None:
        """A token allowed `peer/*` searches every child, each named alone, never `peer` itself."""
        client = await front(peer.url, tokens=True)
        status, answer = await search(client, headers=bearer("children"))
        assert status == 200
        assert {s["name"] for s in answer["namespaces"]} == {"peer/alpha", "peer/team/beta", "peer/gamma", "peer/zk"}
        assert {ns for ns, _ in shown(answer)} >= {"peer/alpha", "peer/team/beta"}

    async def test_a_pattern_outside_the_token_is_unknown(self, peer: Peer, front: Front) -> None:
        """A child the token may not see is the same 400 as one that does not exist."""
        client = await front(peer.url, tokens=True)
        status, problem = await search(client, headers=bearer("alpha-only"), namespaces=["peer/team/*"])
        # the namespaces it names are the token's alone: the hidden child is never among them
        assert (
            status == 400 and problem["detail"] == "no namespace matches 'peer/team/*'; namespaces: peer/alpha, delta"
        )


class TestReading:
    async def test_v1_files_reads_a_remote_file(self, peer: Peer, front: Front) -> None:
        """`/v1/files/peer/alpha/src/widgets.py` is the remote file's text, with its line headers."""
        resp = await (await front(peer.url)).get("/v1/files/peer/alpha/src/widgets.py?start_line=4&end_line=5")
        assert resp.status == 200
        assert await resp.text() == "def register_widget(name):\n    return name\n"
        assert (resp.headers["X-Start-Line"], resp.headers["X-Total-Lines"]) == ("4", "8")

    async def test_a_remote_file_asked_again_is_a_304(self, peer: Peer, service: SearchService) -> None:
        """Read twice, the second read is a conditional request the peer answers 304 (nothing sent back)."""
        first = await service.read_file("peer/alpha", "src/widgets.py")
        again = await service.read_file("peer/alpha", "src/widgets.py")
        assert first == again
        reads = [status for method, path, status in peer.seen if path == "/afi/read"]
        assert reads == [200, 304]

    async def test_read_file_over_mcp(self, service: SearchService) -> None:
        """MCP `read_file` opens a file found under a child, as it was named in the hit."""
        async with Client(build_server(service), raise_exceptions=True) as client:
            result = await client.call_tool("read_file", {"namespace": "peer/team/beta", "path": "docs/guide.md"})
        assert result.structured_content["lines"] == FILES["team/beta"]["docs/guide.md"].splitlines()  # type: ignore[index]

    async def test_a_repository_childs_file_reads_through_the_peer(self, peer: Peer, service: SearchService) -> None:
        """A zoekt child's `<repository>/<path>` reads through the peer (which reads it from zoekt)."""
        got = await service.read_file("peer/zk", f"github.com/acme/widget-service/{REGISTRY_PATH}", 6, 6)
        assert got["lines"] == ["def register_widget(name, factory):"] and got["total_lines"] == 12

    async def test_afi_read_stat_and_list(self, peer: Peer, front: Front) -> None:
        """AFI `read`, `stat` and `list` work under a child as under a local namespace."""
        client = await front(peer.url)
        read = await client.get("/afi/read", params={"path": "/peer/alpha/src/widgets.py"})
        stat = await (await client.get("/afi/stat", params={"path": "/peer/alpha/src/widgets.py"})).json()
        listed = await (await client.get("/afi/list", params={"path": "/peer/alpha/src"})).json()
        top = await (await client.get("/afi/list", params={"path": "/peer"})).json()
        assert read.status == 200 and await read.text() == WIDGETS
        assert (stat["type"], stat["size"]) == ("file", len(WIDGETS.encode()))
        assert [e["path"] for e in listed["entries"]] == ["/peer/alpha/src/util.py", "/peer/alpha/src/widgets.py"]
        assert {e["path"] for e in top["entries"]} >= {"/peer/alpha", "/peer/gamma", "/peer/team", "/peer/zk"}

    async def test_afi_read_answers_if_none_match(self, peer: Peer, front: Front) -> None:
        """AFI `read` sends an ETag and answers it with 304 (what a peer's reads rely on)."""
        client = await front(peer.url)
        first = await client.get("/afi/read", params={"path": "/peer/alpha/README.md"})
        again = await client.get(
            "/afi/read", params={"path": "/peer/alpha/README.md"}, headers={"If-None-Match": first.headers["ETag"]}
        )
        assert first.status == 200 and again.status == 304 and await again.read() == b""

    async def test_fedsearch_read_against_the_server(self, peer: Peer, local_root: Path, tmp_path: Path) -> None:
        """`fedsearch read peer/alpha/src/widgets.py:4-5 --server URL` prints the remote lines."""
        port = free_port()
        app = create_app(front_config(peer.url, local_root))
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            target = "peer/alpha/src/widgets.py:4-5"
            command = [*fedsearch_command(), "read", target, "--server", f"http://127.0.0.1:{port}"]
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env()
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            await runner.cleanup()
        assert proc.returncode == 0, err.decode()
        assert out.decode() == "4\tdef register_widget(name):\n5\t    return name\n"


class TestAfiSearch:
    async def afi(self, client: Client_, path: str) -> tuple[int, Any]:
        resp = await client.post("/afi/search", json={"query": "register_widget", "path": path})
        return resp.status, await resp.json()

    async def test_a_search_under_a_child(self, peer: Peer, front: Front) -> None:
        """`"path": "/peer/alpha"` finds the matches under it, as `/peer` finds them under `/peer/alpha/`."""
        client = await front(peer.url)
        status, under_child = await self.afi(client, "/peer/alpha")
        _, under_peer = await self.afi(client, "/peer")
        assert status == 200 and under_child["matches"]
        assert all(m["path"].startswith("/peer/alpha/") for m in under_child["matches"])
        expected = [m for m in under_peer["matches"] if m["path"].startswith("/peer/alpha/")]
        assert {(m["path"], m["line"]) for m in under_child["matches"]} == {(m["path"], m["line"]) for m in expected}

    async def test_a_search_under_a_folder_of_a_child(self, peer: Peer, front: Front) -> None:
        """`/peer/team/beta/docs` scopes to that folder of the nested child."""
        status, found = await self.afi(await front(peer.url), "/peer/team/beta/docs")
        assert status == 200
        assert {m["path"] for m in found["matches"]} == {"/peer/team/beta/docs/guide.md"}

    async def test_a_search_under_an_unknown_child_is_not_found(self, peer: Peer, front: Front) -> None:
        """A child that is not there is `not_found`, as a local path that is not there."""
        status, error = await self.afi(await front(peer.url), "/peer/nope")
        assert (status, error["code"]) == (404, "not_found")

    async def test_before_the_children_are_listed(self, peer: Peer, local_root: Path) -> None:
        """Even with the peer's children not listed yet, a path under one scopes the search to it."""
        service = SearchService(front_config(peer.url, local_root))
        try:
            assert service.catalog.children.known("peer") is None
            target = locate("peer/alpha/src", service.visible())
            scope = await _scope(service, target, service.visible(), None)
        finally:
            await service.aclose()
        assert (scope.patterns, scope.paths) == (["peer/alpha"], ["/src", "/src/**"])  # the file, or all in the folder


class TestShape:
    async def test_a_backend_of_lines_gives_the_files_own_hit(self, peer: Peer, front: Front) -> None:
        """SPEC §3: a zoekt namespace (lines only) behind the peer, and the peer's own, answer as a local one
        does: at most one hit of kind file a file, first, holding every line outside a declaration; no hit
        has a text or column of its own."""
        client = await front(peer.url)
        status, answer = await search(client, namespaces=["peer/*"], hit_lines=None, files=200)
        assert status == 200
        kinds = {group["namespace"] for group in answer["files"]}
        assert {"peer/zk", "peer/alpha"} <= kinds
        for group in answer["files"]:
            own = [hit for hit in group["hits"] if hit["kind"] == "file"]
            assert len(own) <= 1 and (not own or group["hits"][0] is own[0])
            for hit in group["hits"]:
                lines = [line["line"] for line in hit.get("lines", ())]
                assert "text" not in hit and "column" not in hit and hit["line_count"] == len(lines)
                assert lines == sorted(lines)
            if group["namespace"] == "peer/zk":
                assert [hit["kind"] for hit in group["hits"]] == ["file"]
