"""Namespaces on one zoekt server asked the same thing at once share one request."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.zoekt.backend import MAX_MEMBERS, ZoektBackend, ZoektSettings
from adapters.zoekt.read import RepoRouter
from gateway.errors import BackendError
from gateway.fanout import Route, fan_out
from gateway.models import BackendResult, SearchQuery
from gateway.resilience.wrapper import wrap
from gateway.scope import call_scope
from tests.fakeservers import FakeServer, hang, json_reply, leftover_tasks, server_error

REPOS = ("github.com/acme/widgets", "github.com/acme/gears", "github.com/other/tools")


@pytest.fixture
def answer(fixtures_dir: Path) -> dict[str, Any]:
    """The recorded zoekt answer, its first file copied into each of REPOS (two files each)."""
    recorded = json.loads((fixtures_dir / "zoekt_search_response.json").read_text())
    template = recorded["Result"]["Files"][0]
    files = []
    for r, repo in enumerate(REPOS):
        for i in range(2):
            file = copy.deepcopy(template)
            file.update(Repository=repo, FileName=f"src/f{i}.py", Score=1000.0 - 10 * r - i)
            files.append(file)
    matches = sum(len(f["LineMatches"]) for f in files)
    recorded["Result"].update(
        Files=files, FileCount=len(files), MatchCount=matches, FilesSkipped=0, ShardsSkipped=0, Crashes=0
    )
    return recorded


def query(**kw: Any) -> SearchQuery:
    return SearchQuery(text="register_widget", deadline=time.monotonic() + 10, **kw)


@asynccontextmanager
async def backends(*settings: dict[str, Any]) -> AsyncIterator[list[ZoektBackend]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(ZoektBackend(f"z{i}", ZoektSettings(**s))) for i, s in enumerate(settings)
        ]


async def together(found: list[ZoektBackend], q: SearchQuery | None = None) -> list[BackendResult]:
    """The backends' searches made at once, in one scope, as a fan-out makes them."""
    q = q or query()
    async with call_scope():
        return list(await asyncio.gather(*(b.search(q) for b in found)))


def paths(result: BackendResult) -> list[str]:
    return [f.path for f in result.files]


class TestShared:
    async def test_one_request_split_by_repository(self, answer: dict[str, Any]) -> None:
        """Three namespaces on one server: one request, its repo filter their union, each its own files."""
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(
                *({"urls": [server.url], "repos": f"^{r}$"} for r in REPOS[:2]),
                {"urls": [server.url], "repos": "^github\\.com/other/"},
            ) as found,
        ):
            widgets, gears, other = await together(found)
        assert len(server.requests) == 1
        q = server.requests[0].json()["Q"]
        assert '"(?:^github.com/acme/widgets$)|(?:^github.com/acme/gears$)|(?:^github\\\\.com/other/)"' in q
        assert paths(widgets) == ["github.com/acme/widgets/src/f0.py", "github.com/acme/widgets/src/f1.py"]
        assert paths(gears) == ["github.com/acme/gears/src/f0.py", "github.com/acme/gears/src/f1.py"]
        assert paths(other) == ["github.com/other/tools/src/f0.py", "github.com/other/tools/src/f1.py"]
        assert {r.status for r in (widgets, gears, other)} == {"ok"}

    async def test_a_namespace_without_repos_lifts_the_filter(self, answer: dict[str, Any]) -> None:
        """One member without `repos` wants every repository: no repo filter, it gets them all."""
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(
                {"urls": [server.url], "repos": "acme/gears$"},
                {"urls": [server.url]},
            ) as found,
        ):
            gears, everything = await together(found)
        assert len(server.requests) == 1 and "repo:" not in server.requests[0].json()["Q"]
        assert paths(gears) == ["github.com/acme/gears/src/f0.py", "github.com/acme/gears/src/f1.py"]
        assert len(everything.files) == 6

    async def test_asks_a_page_for_each_member(self, answer: dict[str, Any]) -> None:
        """The shared request asks for every member's page of files."""
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(*({"urls": [server.url], "repos": r} for r in REPOS)) as found,
        ):
            await together(found, query(max_files=20))
        assert server.requests[0].json()["Opts"]["MaxDocDisplayCount"] == 60

    async def test_zoekt_caps_reach_every_member(self, answer: dict[str, Any]) -> None:
        """A capped shared answer caps each member, with zoekt's reason and no borrowed file count."""
        answer["Result"]["FilesSkipped"] = 3
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(*({"urls": [server.url], "repos": r} for r in REPOS[:2])) as found,
        ):
            results = await together(found)
        assert [(r.status, r.file_count, len(r.files)) for r in results] == [("capped", None, 2)] * 2
        assert all("zoekt stopped early in 3 files" in r.reason for r in results)

    async def test_a_failure_reaches_every_member(self) -> None:
        """A 500 on the shared request is each member's error."""
        async with (
            FakeServer(server_error()) as server,
            backends(*({"urls": [server.url], "repos": r} for r in REPOS)) as found,
        ):
            q = query()
            async with call_scope():
                outcomes = await asyncio.gather(*(b.search(q) for b in found), return_exceptions=True)
        assert len(server.requests) == 1
        assert all(isinstance(o, BackendError) and "HTTP 500" in str(o) for o in outcomes)

    async def test_more_members_than_a_request_holds(self, answer: dict[str, Any]) -> None:
        """Past MAX_MEMBERS the namespaces go in a second request."""
        count = MAX_MEMBERS + 3
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(*({"urls": [server.url], "repos": f"^{REPOS[i % 3]}$"} for i in range(count))) as found,
        ):
            results = await together(found)
        assert len(server.requests) == 2
        assert all(len(r.files) == 2 for r in results)


class TestGate:
    @pytest.mark.parametrize(("coalesce", "requests"), [(True, 1), (False, 12)])
    async def test_a_shared_request_takes_one_place_in_the_gate(
        self, answer: dict[str, Any], coalesce: bool, requests: int
    ) -> None:
        """Through a fan-out with a gate of two: twelve namespaces on one server share one
        request; with ``coalesce = false`` each is still its own request behind the gate."""
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(
                *({"urls": [server.url], "repos": f"^{REPOS[i % 3]}$", "coalesce": coalesce} for i in range(12))
            ) as found,
        ):
            routes = [Route(b.name, wrap(b)) for b in found]
            outcomes = await fan_out(routes, query(), concurrency=2)
        assert [o.status for o in outcomes] == ["ok"] * 12
        assert len(server.requests) == requests


class TestApart:
    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ({"coalesce": False}, {"coalesce": False}),
            ({}, {"token_env": "ZOEKT_BATCH_TEST_TOKEN"}),
            ({}, {"max_bytes": 1 << 20}),
        ],
        ids=["opted-out", "other-token", "other-size-cap"],
    )
    async def test_requests_that_differ_are_not_shared(
        self, answer: dict[str, Any], first: dict[str, Any], second: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Opting out, another token or another size cap keeps a namespace's request its own."""
        monkeypatch.setenv("ZOEKT_BATCH_TEST_TOKEN", "secret")
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(
                {"urls": [server.url], "repos": REPOS[0], **first}, {"urls": [server.url], "repos": REPOS[1], **second}
            ) as found,
        ):
            await together(found)
        asked = sorted(r.json()["Q"] for r in server.requests)
        assert len(asked) == 2
        assert asked[0].startswith(f"repo:{REPOS[1]} ") and asked[1].startswith(f"repo:{REPOS[0]} ")

    async def test_other_servers_and_deadlines_are_not_shared(self, answer: dict[str, Any]) -> None:
        """Two servers get a request each; another deadline is another request."""
        async with (
            FakeServer(json_reply(answer)) as one,
            FakeServer(json_reply(answer)) as two,
            backends(
                {"urls": [one.url], "repos": REPOS[0]},
                {"urls": [two.url], "repos": REPOS[1]},
                {"urls": [one.url], "repos": REPOS[2]},
            ) as found,
        ):
            q1, q2 = query(), query()
            async with call_scope():
                await asyncio.gather(found[0].search(q1), found[1].search(q1), found[2].search(q2))
        assert (len(one.requests), len(two.requests)) == (2, 1)


class TestCancel:
    async def test_every_member_gone_cancels_the_request(self) -> None:
        """When every member is cancelled the shared request is dropped and nothing is left running."""
        async with (
            FakeServer(hang()) as server,
            backends(*({"urls": [server.url], "repos": r} for r in REPOS)) as found,
        ):
            q = query()
            async with call_scope():
                tasks = [asyncio.create_task(b.search(q)) for b in found]
                for _ in range(500):
                    if server.requests:
                        break
                    await asyncio.sleep(0.01)
                for task in tasks:
                    task.cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(r, asyncio.CancelledError) for r in results)
            await asyncio.wait_for(server.cancelled.wait(), 5)
            assert leftover_tasks() == []

    async def test_one_member_gone_leaves_the_others_their_answer(self, answer: dict[str, Any]) -> None:
        """A member cancelled while the request runs does not take the others' answer with it."""
        async with (
            FakeServer(json_reply(answer)) as server,
            backends(*({"urls": [server.url], "repos": f"^{r}$"} for r in REPOS)) as found,
        ):
            q = query()
            async with call_scope():
                tasks = [asyncio.create_task(b.search(q)) for b in found]
                await asyncio.sleep(0)
                tasks[0].cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError) and len(server.requests) == 1
        assert [paths(r)[0] for r in results[1:] if isinstance(r, BackendResult)] == [
            "github.com/acme/gears/src/f0.py",
            "github.com/other/tools/src/f0.py",
        ]

    async def test_fan_out_deadline_with_a_hanging_server(self) -> None:
        """Through the fan-out: every member times out at the deadline; no task or request left behind."""
        async with (
            FakeServer(hang()) as server,
            backends(*({"urls": [server.url], "repos": r} for r in REPOS)) as found,
        ):
            routes = [Route(f"ns{i}", wrap(b)) for i, b in enumerate(found)]
            outcomes = await fan_out(routes, SearchQuery(text="x", deadline=time.monotonic() + 0.3))
            assert [o.status for o in outcomes] == ["timeout"] * 3
            assert len(server.requests) == 1
            await asyncio.wait_for(server.cancelled.wait(), 5)
            assert leftover_tasks() == []


class TestRouter:
    def test_overlapping_and_open_regexes(self) -> None:
        """A repository goes to every member whose regex finds it; an empty regex takes everything."""
        route = RepoRouter(["acme/", "", "^github\\.com/acme/gears$", "tools$"])
        assert route("github.com/acme/gears") == [0, 1, 2]
        assert route("github.com/other/tools") == [1, 3]
        assert route("gitlab.com/x/y") == [1]

    def test_without_an_open_member(self) -> None:
        """No member without a regex: a repository nobody names goes nowhere."""
        assert RepoRouter(["a$", "b$"])("zzz") == []
