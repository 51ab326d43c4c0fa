"""Duplicates across engines (issue 38): identities from GitHub (``sha``), GitLab (a blob's ``id``),
Zoekt (``Checksum``) and a peer gateway (its own ``identity``), merged with a local checkout's.

The remote engines are fakes serving their real formats from ``tests/fixtures/backends``, on
127.0.0.1; the peer is a real second fedsearch (``create_app``) over a real checkout, and
ours searches a clone of that checkout beside it.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from adapters.github import GitHubBackend, GitHubSettings
from adapters.gitlab import GitLabBackend, GitLabSettings
from adapters.peer import PeerBackend, PeerSettings
from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings, find_rg
from adapters.zoekt.backend import ZoektBackend, ZoektSettings
from gateway.config import config_from_env
from gateway.dedup.identity import blob_id
from gateway.http.app import create_app
from gateway.service import SearchService
from tests.fake_github_gitlab import FakeApi, load, reply
from tests.test_adapter_github import TEST_PY  # the repository's test file: a local copy is made of it
from tests.test_dedup import FILES, checkout, groups

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

REPO = "acme/widget-service"
REGISTRY_SHA = "c0ffee00d15ea5e0ddba11ab1e5ca1ab1e000001"  # the fixture's sha of src/widgets/registry.py
LAST_PAGE = {"x-page": "1", "x-per-page": "20", "x-next-page": "", "x-total": "2", "x-total-pages": "1"}


@pytest.fixture
async def engines(aiohttp_server: Callable[..., Any], fixtures_dir: Path) -> FakeApi:
    """One fake serving GitHub's code search, GitLab's blob search and Zoekt's search, from the fixtures."""
    api = FakeApi()
    github = load(fixtures_dir, "github_code_search.json")["response"]
    body = copy.deepcopy(github["body"])
    for item in body["items"]:
        if item["path"] == "tests/test_registry.py":
            item["sha"] = blob_id(TEST_PY.encode())  # the local checkout's file, byte for byte
    headers = {k: v for k, v in github["headers"].items() if k != "link"}  # one page
    api.on("/search/code", reply(body, headers=headers))
    blobs = copy.deepcopy(load(fixtures_dir, "gitlab_blobs.json")["response"]["body"])
    for blob in blobs:
        blob["id"] = REGISTRY_SHA  # GitLab's blob id of the same file as GitHub's
    api.on("/api/v4/", reply(blobs, headers=LAST_PAGE))
    zoekt = load(fixtures_dir, "zoekt_search_response.json")
    api.on("/api/search", reply(zoekt))
    server = await aiohttp_server(api.app())
    api.url = str(server.make_url("")).rstrip("/")
    return api


@pytest.fixture
async def service(engines: FakeApi, tmp_path: Path) -> AsyncIterator[SearchService]:
    local = checkout(tmp_path / "loc", {"tests/test_registry.py": TEST_PY})
    backends = [
        GitHubBackend("gh", GitHubSettings(url=engines.url, scope=f"repo:{REPO}", fetch_lines=False)),
        GitLabBackend("gl", GitLabSettings(url=engines.url, project=REPO)),
        ZoektBackend("zk1", ZoektSettings(urls=[engines.url])),
        ZoektBackend("zk2", ZoektSettings(urls=[engines.url])),
        RipgrepBackend("loc", RipgrepSettings(root=str(local))),
    ]
    svc = SearchService.with_backends(backends)
    yield svc
    await svc.aclose()


def merged(answer: dict[str, Any]) -> list[set[tuple[str, str]]]:
    """Each group with copies, as the set of its copies' (namespace, path)."""
    return [{key, *dups} for key, dups in groups(answer).items() if dups]


class TestRemoteEngines:
    async def test_github_and_gitlab_share_a_blob_id(self, service: SearchService) -> None:
        """GitHub's sha and GitLab's blob id of one file are one identity: one group."""
        answer = await service.search_json({"query": "register_widget"})
        path = f"{REPO}/src/widgets/registry.py"
        assert {("gh", path), ("gl", path)} in merged(answer)

    async def test_a_github_sha_equal_to_a_local_blob_id_is_one_group(self, service: SearchService) -> None:
        """A GitHub file whose sha is a local file's git blob id is that file: one group."""
        answer = await service.search_json({"query": "register_widget"})
        assert {("gh", f"{REPO}/tests/test_registry.py"), ("loc", "tests/test_registry.py")} in merged(answer)

    async def test_zoekt_checksums_merge_only_between_zoekt_namespaces(self, service: SearchService) -> None:
        """Two Zoekt namespaces' copies are one group; no group mixes Zoekt with the git identities."""
        answer = await service.search_json({"query": "register_widget"})
        sets = merged(answer)
        for name in ("src/widgets/registry.py", "tests/test_registry.py"):
            path = f"github.com/{REPO}/{name}"
            assert {("zk1", path), ("zk2", path)} in sets
        for copies in sets:
            kinds = {ns.startswith("zk") for ns, _ in copies}
            assert len(kinds) == 1, copies

    async def test_counts_stay_each_namespaces_own(self, service: SearchService) -> None:
        """file_count counts groups (four of nine files merged away); each namespace counts its own."""
        on = await service.search_json({"query": "register_widget"})
        off = await service.search_json({"query": "register_widget", "dedup": False})
        assert off["file_count"] == on["file_count"] + sum(len(c) - 1 for c in merged(on))
        assert {s["name"]: s["files"] for s in on["namespaces"]} == {s["name"]: s["files"] for s in off["namespaces"]}
        identities = {(g["namespace"], g["file_path"]): g.get("identity") for g in off["files"]}
        assert identities[("gl", f"{REPO}/src/widgets/registry.py")] == f"git:{REGISTRY_SHA}"
        assert identities[("zk1", f"github.com/{REPO}/src/widgets/registry.py")] == "zoekt:jh8DpcfSm0Q="


# --- a peer gateway whose children duplicate a local namespace ---------------------------------


@pytest.fixture
async def peer_url(aiohttp_server: Callable[..., Any], tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """A real second gateway over one checkout (``proj``); the bodies of the searches it was asked."""
    root = tmp_path / "remote"
    checkout(root / "proj", FILES)
    asked: list[dict[str, Any]] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/v1/search" and request.method == "POST":
            asked.append(await request.json())
        response: web.StreamResponse = await handler(request)
        return response

    app = create_app(config_from_env(None, str(root), env={}))
    app.middlewares.append(record)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/"), asked


@pytest.fixture
def mine(peer_url: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> Path:
    """A local clone of the peer's checkout."""
    clone = tmp_path / "mine"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "remote" / "proj"), str(clone)], check=True)
    return clone


class TestPeer:
    async def test_a_peers_child_and_a_local_clone_are_one_group(
        self, peer_url: tuple[str, list[dict[str, Any]]], mine: Path
    ) -> None:
        """The peer's identities pass through: its child's files and the local clone's are one group each,
        the peer is asked for every copy (dedup false), and each namespace counts its own files."""
        url, asked = peer_url
        service = SearchService.with_backends(
            [RipgrepBackend("mine", RipgrepSettings(root=str(mine))), PeerBackend("up", PeerSettings(url=url))],
            weights={"mine": 2.0},
        )
        try:
            answer = await service.search_json({"query": "register_widget"})
        finally:
            await service.aclose()
        shown = groups(answer)
        for path in FILES:
            assert shown[("mine", path)] == [("up/proj", path)]
        assert answer["file_count"] == len(FILES)
        assert {s["name"]: s["files"] for s in answer["namespaces"]} == {"mine": 4, "up": 0, "up/proj": 4}
        assert asked and all(body["dedup"] is False for body in asked)
