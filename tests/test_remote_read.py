"""Reading remote files, backend by backend, through the bounds every read has (SPEC §5).

Fakes serve each API's real format on 127.0.0.1: GitHub's contents API with its rate
limit (:class:`tests.fake_github_gitlab.GitHubContents`), Sourcegraph's raw endpoint,
GitLab's raw files, zoekt's whole-file search, Hound's and livegrep's repository lists.
What the conformance suite checks for every kind (content, identity, a missing file,
the cap, a hang) is not repeated here: these are each backend's own ways.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.github import GitHubBackend, GitHubSettings
from adapters.gitlab import GitLabBackend, GitLabSettings
from adapters.hound import HoundBackend, HoundSettings
from adapters.sourcegraph import SourcegraphBackend, SourcegraphSettings
from adapters.zoekt.backend import ZoektBackend, ZoektSettings
from gateway.errors import BackendUnavailable, NotFound, RateLimited
from gateway.http.app import create_app
from gateway.models import SearchQuery
from gateway.resilience.policy import Policy
from gateway.resilience.wrapper import ResilientBackend, wrap
from gateway.service import SearchService
from tests.fake_github_gitlab import FakeApi, GitHubContents, load, reply
from tests.fakeservers import FakeServer, json_reply, server_error, text_reply
from tests.helpers import FakeClock, FakeSleep
from tests.remote_files import REGISTRY_PATH, REGISTRY_PY, etag, zoekt_read_answer

REPO = "acme/widget-service"
FILE = f"{REPO}/{REGISTRY_PATH}"
TOKEN_ENV = "FEDSEARCH_TEST_READ_TOKEN"


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TOKEN_ENV, "ghp_fictional-read-token")
    return "ghp_fictional-read-token"


class TestGitHubUnderItsRateLimit:
    @pytest.fixture
    def contents(self, api: FakeApi) -> GitHubContents:
        served = GitHubContents({FILE: REGISTRY_PY, f"{REPO}/README.md": b"# widgets\n"}, limit=2)
        api.on("/repos/", served)
        return served

    @pytest.fixture
    async def github(self, api: FakeApi, token: str) -> AsyncIterator[GitHubBackend]:
        settings = GitHubSettings(url=api.url, token_env=TOKEN_ENV, scope=f"repo:{REPO}")
        async with GitHubBackend("gh", settings) as gh:
            yield gh

    async def test_a_second_read_costs_no_rate_limit(self, github: GitHubBackend, contents: GitHubContents) -> None:
        """Read twice: the second is a conditional request GitHub answers 304, counting nothing."""
        first = await github.read_file(FILE, soon())
        again = await github.read_file(FILE, soon())
        assert first.data == again.data == REGISTRY_PY
        assert contents.statuses == [200, 304] and contents.used == 1
        assert github.read_cache.hits == 1

    async def test_the_raw_media_type_is_asked(
        self, api: FakeApi, github: GitHubBackend, contents: GitHubContents
    ) -> None:
        """The contents API is asked with GitHub's raw media type and the token."""
        await github.read_file(FILE, soon())
        [sent] = api.to("/repos/")
        assert sent.path == f"/repos/{REPO}/contents/{REGISTRY_PATH}"
        assert sent.headers["Accept"] == "application/vnd.github.raw+json"
        assert sent.headers["Authorization"] == "Bearer ghp_fictional-read-token"

    async def test_a_file_a_search_located_reads_free(
        self, api: FakeApi, github: GitHubBackend, contents: GitHubContents, fixtures_dir: Path
    ) -> None:
        """A file the search fetched to locate its lines reads back as a 304: no rate limit spent."""
        recorded = load(fixtures_dir, "github_code_search.json")["response"]
        api.on("/search/code", reply(recorded["body"], headers=recorded["headers"]))
        await github.search(_query())
        spent = contents.used
        got = await github.read_file(FILE, soon())
        assert got.data == REGISTRY_PY and contents.statuses[-1] == 304 and contents.used == spent
        refs = [s.query.get("ref") for s in api.to(f"/repos/{REPO}/contents/{REGISTRY_PATH}")]
        assert refs[-1] == "3f2a9c1e8b7d6054a1b2c3d4e5f60718293a4b5c"  # the commit the search saw

    async def test_rate_limited_the_copy_kept_is_served(self, github: GitHubBackend, contents: GitHubContents) -> None:
        """With the rate limit spent, a file read before is served from the copy kept; one never read
        is RateLimited with GitHub's reset as the wait."""
        await github.read_file(FILE, soon())
        await github.read_file(f"{REPO}/README.md", soon())
        contents.files[FILE] = REGISTRY_PY + b"# changed\n"  # the ETag no longer holds: GitHub would answer in full
        kept = await github.read_file(FILE, soon())
        assert kept.data == REGISTRY_PY and contents.statuses[-1] == 403
        contents.files[f"{REPO}/NEW.md"] = b"new\n"
        with pytest.raises(RateLimited) as caught:
            await github.read_file(f"{REPO}/NEW.md", soon())
        assert caught.value.retry_after is not None

    async def test_a_path_without_a_repository_is_not_found(
        self, api: FakeApi, github: GitHubBackend, contents: GitHubContents
    ) -> None:
        """`owner/name/path` is the form: anything shorter, or leaving the repository, is NotFound, unsent."""
        for path in ("acme", "acme/widget-service", f"{REPO}/../../etc/passwd", f"{REPO}/a//b"):
            with pytest.raises(NotFound):
                await github.read_file(path, soon())
        assert api.to("/repos/") == []


def _query(**kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", False)
    return SearchQuery(text="register_widget", max_files=2, deadline=soon(), **kw)


class TestSourcegraph:
    async def test_a_file_a_search_found_reads_at_its_commit(self, fixtures_dir: Path) -> None:
        """The repository and commit the search named are used: one request, at that commit."""
        stream = text_reply((fixtures_dir / "sourcegraph_stream.txt").read_bytes(), content_type="text/event-stream")
        raw = text_reply(REGISTRY_PY, headers={"ETag": etag(REGISTRY_PY)})
        async with (
            FakeServer(stream, raw) as server,
            SourcegraphBackend("sg", SourcegraphSettings(url=server.url)) as sg,
        ):
            await sg.search(_query())
            got = await sg.read_file(f"github.com/{FILE}", soon())
        assert got.data == REGISTRY_PY
        commit = "3f2a9c1e8b7d6054a1b2c3d4e5f60718293a4b5c"
        assert server.requests[-1].path == f"/github.com/{REPO}@{commit}/-/raw/{REGISTRY_PATH}"

    async def test_an_unseen_repository_is_found_by_its_splits(self) -> None:
        """Without a search, `host/owner/name` is tried first, then the other splits, until one exists."""
        missing = json_reply({"error": "not found"}, status=404)
        raw = text_reply(REGISTRY_PY)
        async with (
            FakeServer(missing, raw) as server,
            SourcegraphBackend("sg", SourcegraphSettings(url=server.url)) as sg,
        ):
            got = await sg.read_file(f"acme/widgets/lib/{REGISTRY_PATH}", soon())
        assert got.data == REGISTRY_PY
        assert [r.path for r in server.requests] == [
            f"/acme/widgets/lib/-/raw/{REGISTRY_PATH}",
            f"/acme/widgets/-/raw/lib/{REGISTRY_PATH}",
        ]


class TestGitLab:
    async def test_a_group_file_is_named_by_its_project_id(self, api: FakeApi) -> None:
        """In a group namespace `<project id>/<path>` reads that project's raw file (the path encoded whole)."""
        api.on("/api/v4/projects/73/", reply(raw=REGISTRY_PY, content_type="text/plain"))
        async with GitLabBackend("gl", GitLabSettings(url=api.url, group="acme")) as gl:
            got = await gl.read_file(f"73/{REGISTRY_PATH}", soon())
            with pytest.raises(NotFound):
                await gl.read_file(f"acme/{REGISTRY_PATH}", soon())
        assert got.data == REGISTRY_PY
        [sent] = api.seen
        assert sent.raw_path == "/api/v4/projects/73/repository/files/src%2Fwidgets%2Fregistry.py/raw?ref=HEAD"

    async def test_the_configured_ref_is_read(self, api: FakeApi) -> None:
        """A project namespace with a `ref` reads that ref."""
        api.on("/api/v4/projects/", reply(raw=REGISTRY_PY, content_type="text/plain"))
        settings = GitLabSettings(url=api.url, project=REPO, ref="release-2")
        async with GitLabBackend("gl", settings) as gl:
            await gl.read_file(FILE, soon())
        assert api.seen[0].query == {"ref": "release-2"}
        assert api.seen[0].raw_path.startswith("/api/v4/projects/acme%2Fwidget-service/repository/files/")


class TestZoekt:
    async def test_every_split_is_asked_within_the_namespace(self, fixtures_dir: Path) -> None:
        """One search asks every split of the path (anchored, escaped, case-sensitive), within `repos`."""
        async with (
            FakeServer(json_reply(zoekt_read_answer(fixtures_dir))) as server,
            ZoektBackend("zk", ZoektSettings(urls=[server.url], repos="^github\\.com/acme/")) as zk,
        ):
            got = await zk.read_file(f"github.com/{FILE}", soon())
        assert got.data == REGISTRY_PY
        body = server.requests[0].json()
        assert body["Opts"]["Whole"] is True
        q = body["Q"]
        assert q.startswith('repo:"^github\\\\.com/acme/" case:yes (')
        assert '(repo:"^github\\\\.com/acme/widget-service$" file:"^src/widgets/registry\\\\.py$")' in q
        assert '(repo:"^github\\\\.com$" file:"^acme/widget-service/src/widgets/registry\\\\.py$")' in q
        assert q.count(" or ") == 4

    async def test_a_changed_checksum_reads_the_content_again(self, fixtures_dir: Path) -> None:
        """Asked again, a file whose checksum changed is fetched whole once more."""
        replies = [
            json_reply(zoekt_read_answer(fixtures_dir)),
            json_reply(zoekt_read_answer(fixtures_dir, whole=False, checksum="AAAAAAAAAAA=")),
            json_reply(zoekt_read_answer(fixtures_dir, checksum="AAAAAAAAAAA=")),
        ]
        async with FakeServer(*replies) as server, ZoektBackend("zk", ZoektSettings(urls=[server.url])) as zk:
            await zk.read_file(f"github.com/{FILE}", soon())
            again = await zk.read_file(f"github.com/{FILE}", soon())
        assert [r.json()["Opts"]["Whole"] for r in server.requests] == [True, False, True]
        assert again.identity.startswith("AAAAAAAAAAA=@") and zk.read_cache.hits == 0


def _policy(clock: FakeClock, sleep: FakeSleep) -> Policy:
    return Policy(clock=clock, sleep=sleep, jitter=lambda low, high: high, failure_threshold=3)


class TestResilience:
    async def test_a_transient_failure_is_retried_once(self) -> None:
        """A read answered 503 is asked once more, and its answer kept."""
        raw = text_reply(REGISTRY_PY)
        clock, sleep = FakeClock(), FakeSleep()
        async with FakeServer(server_error(503), raw) as server:
            sg = wrap(SourcegraphBackend("sg", SourcegraphSettings(url=server.url)), _policy(clock, sleep))
            got = await sg.read_file(f"github.com/{FILE}", soon())
            await sg.aclose()
        assert got.data == REGISTRY_PY and len(server.requests) == 2 and len(sleep.slept) == 1

    async def test_failing_reads_open_the_breaker(self) -> None:
        """Reads failing with 500 open the breaker; the next is refused at once, the backend not asked."""
        clock, sleep = FakeClock(), FakeSleep()
        async with FakeServer(server_error(500)) as server:
            sg = wrap(SourcegraphBackend("sg", SourcegraphSettings(url=server.url)), _policy(clock, sleep))
            assert isinstance(sg, ResilientBackend)
            for _ in range(3):
                with pytest.raises(Exception, match="500"):
                    await sg.read_file(f"github.com/{FILE}", soon())
            asked = len(server.requests)
            with pytest.raises(BackendUnavailable, match="circuit open"):
                await sg.read_file(f"github.com/{FILE}", soon())
            await sg.aclose()
        assert len(server.requests) == asked and sg.health() == "unavailable"

    async def test_missing_files_are_no_failure(self) -> None:
        """A backend saying a file is not there is alive: however many are missing, the breaker stays closed."""
        clock, sleep = FakeClock(), FakeSleep()
        async with FakeServer(json_reply({"Result": {"Files": None}})) as server:
            backend = ZoektBackend("zk", ZoektSettings(urls=[server.url]))
            zk = wrap(backend, _policy(clock, sleep))
            for _ in range(6):
                with pytest.raises(NotFound):
                    await zk.read_file(f"github.com/{FILE}", soon())
            await zk.aclose()
        assert zk.health() == "ok" and len(server.requests) == 6


class TestUnreadableOverHttp:
    async def test_v1_files_and_afi_name_the_url(self, aiohttp_client: Callable[..., Any], fixtures_dir: Path) -> None:
        """A Hound file over /v1/files is a 405 problem naming where to see it; AFI `read` says `unsupported` alike."""
        repos = json_reply(orjson.loads((fixtures_dir / "hound_repos.json").read_bytes()))
        async with FakeServer(repos) as server:
            hound = HoundBackend("hound", HoundSettings(url=server.url))
            service = SearchService.with_backends([hound])
            client = await aiohttp_client(create_app(service.config, service_factory=lambda _: service))
            files = await client.get(f"/v1/files/hound/widget-service/{REGISTRY_PATH}")
            afi = await client.get("/afi/read", params={"path": f"/hound/widget-service/{REGISTRY_PATH}"})
            problem, error = await files.json(), await afi.json()
        url = f"https://github.com/acme/widget-service/blob/HEAD/{REGISTRY_PATH}"
        assert files.status == 405 and url in problem["detail"]
        assert (afi.status, error["code"]) == (405, "unsupported") and url in error["message"]

    async def test_afi_list_of_a_backend_that_cannot_list(
        self, aiohttp_client: Callable[..., Any], api: FakeApi
    ) -> None:
        """Listing a folder of a backend that reads but cannot list is `unsupported` (and reading works)."""
        api.on("/repos/", GitHubContents({FILE: REGISTRY_PY}))
        gh = GitHubBackend("gh", GitHubSettings(url=api.url, scope=f"repo:{REPO}"))
        service = SearchService.with_backends([gh])
        client = await aiohttp_client(create_app(service.config, service_factory=lambda _: service))
        listed = await client.get("/afi/list", params={"path": f"/gh/{REPO}/src"})
        read = await client.get("/afi/read", params={"path": f"/gh/{FILE}"})
        assert (listed.status, (await listed.json())["code"]) == (405, "unsupported")
        assert read.status == 200 and await read.read() == REGISTRY_PY
