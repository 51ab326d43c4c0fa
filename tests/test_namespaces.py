"""Names (gateway/catalog/namespaces.py): patterns over configured namespaces and peers' children alike.

A peer here is a backend that serves children (listed by ``children()``) and answers with
files tagged by child; what a real peer does over HTTP is in tests/test_remote_namespaces.py.
This file pins the rules: what a pattern matches, what a caller sees, what a route asks,
and that paths match inside the repository in next actions and query filters too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.backend import AsyncBackend
from gateway.errors import BackendError, InvalidRequest, NotFound, UnknownNamespace
from gateway.models import BackendResult, ChildNamespace, ChildStatus, FileMatch, Hit, Outcome, SearchQuery
from gateway.query.refine import refine
from gateway.query.request import parse_request
from gateway.rank import rank
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings

CHILDREN = ("alpha", "team/beta", "team/gamma", "zk")


class FakePeer(AsyncBackend[MockSettings]):
    """A backend serving children: each answers one file; ``zk`` is a zoekt (``<repository>/<path>``)."""

    kind = "gateway"
    Settings = MockSettings
    serves_children = True

    def __init__(self, name: str = "peer", children: tuple[str, ...] = CHILDREN, fail: bool = False) -> None:
        super().__init__(name, MockSettings())
        self.names = children
        self.asked: list[tuple[str, ...]] = []
        self.listed = 0
        self.fail = fail

    async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
        self.listed += 1
        if self.fail:
            raise BackendError("down")
        kinds = {"zk": "zoekt"}
        return tuple(ChildNamespace(name=n, backend=kinds.get(n, "ripgrep"), modes=("exact",)) for n in self.names)

    async def search(self, query: SearchQuery) -> BackendResult:
        self.asked.append(query.sub_namespaces)
        wanted = [n for n in self.names if not query.sub_namespaces or n in query.sub_namespaces]
        hit = (Hit(line=1, text="register_widget"),)
        files = [
            FileMatch(path=f"github.com/acme/w/src/{n}.py" if n == "zk" else f"src/{n}.py", hits=hit, namespace=n)
            for n in wanted
        ]
        statuses = [ChildStatus(name=n, backend="zoekt" if n == "zk" else "ripgrep", status="ok") for n in wanted]
        return BackendResult(files=files, children=tuple(statuses))


async def _local(query: SearchQuery) -> BackendResult:
    return BackendResult(files=(FileMatch(path="app.py", hits=(Hit(line=1, text="register_widget"),)),))


async def service_with(peer: FakePeer, listed: bool = True) -> SearchService:
    service = SearchService.with_backends([peer, MockBackend(_local, name="delta")])
    if listed:
        await service.catalog.children.refresh()
    return service


def routes(service: SearchService, *patterns: str, access: Any = None) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.namespace, r.sub_namespaces) for r in service.resolve(patterns, access)]


class TestPatterns:
    async def test_a_glob_matches_children_by_their_full_name(self) -> None:
        """`*/alpha`, `peer/team/*` and `*a` match children as `<peer>/<child>` names."""
        service = await service_with(FakePeer())
        assert routes(service, "*/alpha") == [("peer", ("alpha",))]
        assert routes(service, "peer/team/*") == [("peer", ("team/beta", "team/gamma"))]
        assert routes(service, "*a") == [("peer", ("alpha", "team/beta", "team/gamma")), ("delta", ())]

    async def test_a_pattern_matching_the_peer_asks_it_whole(self) -> None:
        """A pattern naming the peer itself asks all of it, whatever else it matches."""
        service = await service_with(FakePeer())
        assert routes(service, "peer*") == [("peer", ())]
        assert routes(service, "peer", "peer/alpha") == [("peer", ())]

    async def test_an_unknown_child_is_unknown(self) -> None:
        """`peer/nope` matches nothing: UnknownNamespace naming it (the 400 of any unknown namespace)."""
        service = await service_with(FakePeer())
        with pytest.raises(UnknownNamespace, match="'peer/nope'"):
            service.resolve(["peer/nope"])

    async def test_children_never_listed_are_for_the_peer_to_judge(self) -> None:
        """A peer whose children could not be listed gets the pattern's rest as its own glob."""
        service = await service_with(FakePeer(fail=True))
        assert service.catalog.children.known("peer") is None
        assert routes(service, "peer/al*") == [("peer", ("al*",))]
        with pytest.raises(UnknownNamespace):
            service.resolve(["*/alpha"])  # nothing known matches it

    async def test_query_filters_narrow_children_too(self) -> None:
        """`repo:` meets the request's patterns child by child; `-repo:` leaves children out."""
        service = await service_with(FakePeer())
        request = parse_request({"query": "x repo:peer/team/* -repo:*/gamma", "namespaces": ["peer/*"]})
        assert [(r.namespace, r.sub_namespaces) for r in service.routes(request)] == [("peer", ("team/beta",))]
        with pytest.raises(InvalidRequest, match="no namespace matches both"):
            service.routes(parse_request({"query": "x repo:delta", "namespaces": ["peer/alpha"]}))

    async def test_a_search_under_a_child_pattern_is_learned_first(self) -> None:
        """A search naming a child lists the peer's children first (once), then asks only that child."""
        peer = FakePeer()
        service = await service_with(peer, listed=False)
        answer = await service.search_json({"query": "register_widget", "namespaces": ["*/alpha"]})
        assert peer.listed == 1 and peer.asked == [("alpha",)]
        assert [g["namespace"] for g in answer["files"]] == ["peer/alpha"]


class TestAccess:
    async def test_a_caller_seeing_some_children_gets_them_alone(self) -> None:
        """Access to `peer/team/*` only: those children are searched, each as its own namespace."""
        peer = FakePeer()
        service = await service_with(peer)
        access = lambda name: name.startswith("peer/team/")  # noqa: E731
        assert routes(service, access=access) == [("peer/team/beta", ()), ("peer/team/gamma", ())]
        answer = await service.search(parse_request({"query": "register_widget"}), access)
        assert sorted(s["name"] for s in answer["namespaces"]) == ["peer/team/beta", "peer/team/gamma"]
        assert sorted(g["namespace"] for g in answer["files"]) == ["peer/team/beta", "peer/team/gamma"]
        assert sorted(peer.asked) == [("team/beta",), ("team/gamma",)]

    async def test_names_and_owners_follow_access(self) -> None:
        """A caller sees the children its access allows; the rest are NotFound, like what does not exist."""
        service = await service_with(FakePeer())
        access = lambda name: name in ("delta", "peer/alpha")  # noqa: E731
        assert service.names(access) == ["peer/alpha", "delta"]
        assert service.split_path("peer/alpha/src/a.py", access) == ("peer/alpha", "src/a.py")
        for hidden in ("peer", "peer/team/beta", "peer/nope"):
            with pytest.raises(NotFound):
                service.backend(hidden, access)
        with pytest.raises(NotFound):
            service.split_path("peer/team/beta/x.py", access)

    async def test_a_hidden_parent_is_not_named_in_listings(self) -> None:
        """A child listed to a caller who may not see its parent carries no `parent`."""
        service = await service_with(FakePeer())
        listed = service.namespaces(lambda name: name == "peer/alpha")
        assert listed == [
            {
                "name": "peer/alpha",
                "backend": "ripgrep",
                "health": "ok",
                "capabilities": {"modes": ["exact"], "read": False, "list": False},
                "file_paths": "<path>",
            }
        ]


class TestInsideTheRepository:
    def outcome(self, *paths: str, repository: str = "acme/widget-service") -> Outcome:
        hit = (Hit(line=1, text="register_widget"),)
        files = tuple(FileMatch(path=f"{repository}/{p}", hits=hit, repository=repository) for p in paths)
        result = BackendResult(files=files, status="capped", reason="GitHub serves only the first 1000")
        return Outcome(namespace="gh", backend="github", status="capped", took_ms=1, result=result)

    def test_a_narrowing_action_names_a_folder_inside_the_repository(self) -> None:
        """A capped multi-repository namespace is narrowed to `src/**` (its files' folder inside the
        repository), never to the repository's owner."""
        request = parse_request({"query": "register_widget", "namespaces": ["gh"]})
        answer = rank(request, [self.outcome("src/a.py", "src/b.py", "tests/c.py")])
        paths = [a["args"].get("paths") for a in answer.next]
        assert ["src/**"] in paths and ["!src/**"] in paths
        assert not any(p and any(g.startswith(("acme", "!acme")) for g in p) for p in paths)

    def test_the_querys_file_filter_matches_inside_the_repository(self) -> None:
        """`file:src/**` in the query (beside the request's own paths) keeps files under src/ of their repository."""
        request = parse_request({"query": "register_widget file:src/**", "paths": ["*.py"]})
        [refined] = refine(request.criteria, [self.outcome("src/a.py", "tests/src_b.py", "docs/x.py")])
        assert refined.result is not None
        assert [f.inner_path for f in refined.result.files] == ["src/a.py"]

    def test_a_peers_repository_child_passes_inside_some_repository(self) -> None:
        """Files of a peer's zoekt child (their repository unknown here) pass when the path passes inside
        some repository the name may be."""
        hit = (Hit(line=1, text="x"),)
        files = (
            FileMatch(path="github.com/acme/w/src/a.py", hits=hit, namespace="zk"),
            FileMatch(path="github.com/acme/w/docs/b.py", hits=hit, namespace="zk"),
        )
        children = (ChildStatus(name="zk", backend="zoekt", status="ok"),)
        result = BackendResult(files=files, children=children)
        outcome = Outcome(namespace="peer", backend="gateway", status="ok", took_ms=1, result=result)
        request = parse_request({"query": "x file:src/**", "paths": ["*.py"]})
        [refined] = refine(request.criteria, [outcome])
        assert refined.result is not None and [f.path for f in refined.result.files] == ["github.com/acme/w/src/a.py"]


class TestListingChildren:
    async def test_a_slow_listing_costs_only_the_wait_allowed(self) -> None:
        """A peer slow to list its children holds a caller only as long as allowed; the listing goes on
        and is kept when it comes (and is stopped when the service closes)."""
        release = asyncio.Event()

        class Slow(FakePeer):
            async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
                await release.wait()
                return await super().children(deadline)

        peer = Slow()
        service = await service_with(peer, listed=False)
        assert await service.catalog.children.refresh(within=0.01) is False
        assert service.catalog.children.known("peer") is None
        release.set()
        assert await service.catalog.children.refresh(within=1.0) is True  # the same listing, now done
        assert peer.listed == 1 and service.catalog.children.known("peer") is not None
        await service.aclose()

    async def test_closing_stops_a_listing(self) -> None:
        """Closing the service cancels a listing still running."""

        class Hangs(FakePeer):
            async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
                await asyncio.Event().wait()
                return ()

        service = await service_with(Hangs(), listed=False)
        await service.catalog.children.refresh(within=0.01)
        await service.aclose()
        assert service.catalog.children.known("peer") is None
