"""The GitLab blob search adapter against a fake GitLab served on 127.0.0.1."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.gitlab import GitLabBackend, GitLabSettings, build_search
from gateway.errors import BackendError, RateLimited, Unsupported
from gateway.models import BackendResult, SearchQuery
from tests.fake_github_gitlab import FakeApi, by_page, load, reply

TOKEN_ENV = "FEDSEARCH_TEST_GITLAB_TOKEN"
PROJECT = "acme/widget-service"
SEARCH = "/api/v4/projects/acme/widget-service/search"  # decoded; the raw path keeps %2F
REGISTRY = f"{PROJECT}/src/widgets/registry.py"
TESTS = f"{PROJECT}/tests/test_registry.py"
TEST_BLOB = {
    "basename": "tests/test_registry",
    "data": (
        'from widgets.registry import register_widget\n\n\ndef test_register():\n    register_widget("gear", object)\n'
    ),
    "path": "tests/test_registry.py",
    "filename": "tests/test_registry.py",
    "id": None,
    "ref": "main",
    "startline": 1,
    "project_id": 73,
}
LAST_PAGE = {"x-page": "2", "x-per-page": "2", "x-next-page": "", "x-total": "3", "x-total-pages": "2"}


@pytest.fixture
def recorded(fixtures_dir: Path) -> dict[str, Any]:
    return load(fixtures_dir, "gitlab_blobs.json")


@pytest.fixture
def token(recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    value: str = recorded["request"]["headers"]["PRIVATE-TOKEN"]
    monkeypatch.setenv(TOKEN_ENV, value)
    return value


def settings(api: FakeApi, **kw: Any) -> GitLabSettings:
    kw.setdefault("project", PROJECT)
    return GitLabSettings(url=api.url, token_env=TOKEN_ENV, **kw)


@pytest.fixture
async def backend(api: FakeApi, token: str) -> AsyncIterator[GitLabBackend]:
    async with GitLabBackend("gl", settings(api, ref="main", search_type="zoekt")) as gl:
        yield gl


def serve_pages(api: FakeApi, recorded: dict[str, Any], page2: list[Any] | None = None) -> None:
    first = reply(recorded["response"]["body"], headers=recorded["response"]["headers"])
    api.on("/api/v4/", by_page({1: first, 2: reply([TEST_BLOB] if page2 is None else page2, headers=LAST_PAGE)}))


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", False)
    kw.setdefault("max_files", 2)
    kw.setdefault("deadline", time.monotonic() + 5.0)
    return SearchQuery(text=text, **kw)


def lines(result: BackendResult) -> dict[str, list[int]]:
    return {f.path: [h.line for h in f.hits] for f in result.files}


class TestAsking:
    async def test_request_is_the_recorded_one(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """The fixture's path (id URL-encoded), parameters and token header are what GitLab receives."""
        serve_pages(api, recorded)
        await backend.search(query(paths=("*.py",)))
        sent = api.seen[0]
        want = recorded["request"]
        assert sent.raw_path.startswith("/api/v4/projects/acme%2Fwidget-service/search?")
        assert sent.query == {k: str(v) for k, v in want["query"].items()}
        assert sent.headers["PRIVATE-TOKEN"] == want["headers"]["PRIVATE-TOKEN"]
        assert "Authorization" not in sent.headers

    async def test_group_endpoint(self, api: FakeApi, token: str, recorded: dict[str, Any]) -> None:
        """A group namespace asks the group's search endpoint, without ref."""
        serve_pages(api, recorded)
        async with GitLabBackend("gl", settings(api, project=None, group="acme", search_type="advanced")) as gl:
            await gl.search(query())
        assert api.seen[0].path == "/api/v4/groups/acme/search"
        assert api.seen[0].query["search"] == '"register_widget"'
        assert "ref" not in api.seen[0].query

    def test_language_becomes_extension_glob(self) -> None:
        """A language whose extensions share a prefix is asked as one extension:prefix* filter."""
        assert build_search(query(languages=("python",))) == "register_widget extension:py*"
        assert build_search(query(languages=("go",))) == "register_widget extension:go"

    def test_glob_becomes_path_filter(self) -> None:
        """An anchored glob's literal directories (inside the project) become path:."""
        q = build_search(query(paths=("src/**",)))
        assert q == "register_widget path:src"

    def test_basic_refuses_filter_like_terms(self) -> None:
        """Basic search would parse a 'path:x' word of the term as a filter, so it is refused."""
        assert build_search(query("os.path:join")) == "os.path:join"
        with pytest.raises(Unsupported):
            build_search(query("see -path:x"))

    async def test_regex_needs_zoekt(self, api: FakeApi, token: str) -> None:
        """Only a namespace with search_type = "zoekt" declares regex mode (the fan-out refuses it elsewhere)."""
        assert GitLabBackend("gl", settings(api)).modes == {"exact"}
        assert GitLabBackend("gl", settings(api, search_type="zoekt")).modes == {"exact", "regex"}

    async def test_regex_with_zoekt(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """With zoekt, regex=true is sent and lines are found again with the regex."""
        serve_pages(api, recorded)
        result = await backend.search(query("def \\w+_widget", mode="regex"))
        assert api.seen[0].query["regex"] == "true"
        assert api.seen[0].query["search"] == "def\\x20\\w+_widget"
        assert lines(result) == {REGISTRY: [6, 11]}

    @pytest.mark.parametrize("targets", [{}, {"group": "acme", "project": PROJECT}])
    def test_exactly_one_target(self, targets: dict[str, str]) -> None:
        """A namespace names exactly one of group or project."""
        with pytest.raises(ValidationError, match="exactly one"):
            GitLabSettings(**targets)


class TestReading:
    async def test_fixture_round_trip(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """The recorded chunks become one file with a hit per matching line, at startline + index."""
        serve_pages(api, recorded)
        result = await backend.search(query())
        assert lines(result) == {REGISTRY: [6, 12], TESTS: [1, 5]}
        hit = result.files[0].hits[0]
        assert (hit.kind, hit.column, hit.text) == ("line", 5, "def register_widget(name, factory):")

    async def test_column_counts_characters(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """The match after 'é' on registry.py line 12 is at character column 55."""
        serve_pages(api, recorded)
        result = await backend.search(query())
        hit = result.files[0].hits[1]
        assert (hit.line, hit.column) == (12, 55)
        assert "café" in hit.text

    async def test_context_from_the_chunk(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """Context lines come from inside the chunk, as far as it goes."""
        serve_pages(api, recorded)
        result = await backend.search(query(context_lines=2))
        first, second = result.files[0].hits
        assert first.before == ("", "")
        assert first.after == (
            '    """Register a widget factory under ``name``."""',
            "    _REGISTRY[name] = factory",
        )
        assert (second.before, second.after) == (("", "def lookup_widget(name):"), ())

    async def test_case_sensitive_filters_locally(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """GitLab ignores case, so a case-sensitive query drops chunks without an exact-case match."""
        serve_pages(api, recorded)
        result = await backend.search(query("Register_Widget", case_sensitive=True))
        assert result.files == []

    async def test_local_path_filter(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """An exclude glob is applied to the answer's paths."""
        serve_pages(api, recorded)
        result = await backend.search(query(paths=("!tests/**",)))
        assert list(lines(result)) == [REGISTRY]

    async def test_group_paths_use_project_id(self, api: FakeApi, token: str, recorded: dict[str, Any]) -> None:
        """In a group namespace a file's path starts with its blob's project_id."""
        serve_pages(api, recorded)
        async with GitLabBackend("gl", settings(api, project=None, group="acme")) as gl:
            result = await gl.search(query())
        assert list(lines(result)) == ["73/src/widgets/registry.py", "73/tests/test_registry.py"]

    async def test_file_name_match(self, api: FakeApi, backend: GitLabBackend) -> None:
        """A blob found by its name, with no matching line, is one path-level hit."""
        blob = TEST_BLOB | {"data": "import pytest\n"}
        api.on("/api/v4/", reply([blob], headers=LAST_PAGE))
        result = await backend.search(query("test_registry"))
        assert [(h.kind, h.line, h.text) for h in result.files[0].hits] == [("file", 1, TESTS)]

    async def test_garbled_chunk_is_an_error(self, api: FakeApi, backend: GitLabBackend) -> None:
        """A blob without startline is a BackendError, not a wrong line number."""
        api.on("/api/v4/", reply([TEST_BLOB | {"startline": None}], headers=LAST_PAGE))
        with pytest.raises(BackendError, match="startline"):
            await backend.search(query())


class TestCapped:
    async def test_missing_total(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """No x-total header (over 10,000 results) makes the answer capped."""
        headers = {k: v for k, v in LAST_PAGE.items() if k not in ("x-total", "x-total-pages")}
        api.on("/api/v4/", reply(recorded["response"]["body"], headers=headers))
        result = await backend.search(query())
        assert result.status == "capped"
        assert "x-total" in result.reason

    async def test_pages_left_unfetched(self, api: FakeApi, token: str, recorded: dict[str, Any]) -> None:
        """Stopping at max_pages with x-next-page set is capped."""
        serve_pages(api, recorded)
        async with GitLabBackend("gl", settings(api, max_pages=1)) as gl:
            result = await gl.search(query())
        assert len(api.seen) == 1
        assert (result.status, result.file_count, list(lines(result))) == ("capped", 1, [REGISTRY])
        assert "page 1 of 2" in result.reason

    async def test_enough_files_stops_paging(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """Once max_files files are complete paging stops; the possibly partial last file is held back."""
        body = [*recorded["response"]["body"], TEST_BLOB]
        api.on("/api/v4/", by_page({1: reply(body, headers=recorded["response"]["headers"])}))
        result = await backend.search(query(max_files=1))
        assert len(api.seen) == 1
        assert list(lines(result)) == [REGISTRY]
        assert (result.status, result.file_count) == ("capped", 2)


class TestPaging:
    async def test_two_pages(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """x-next-page leads to page 2 whose files join the answer; the last page ends it uncapped."""
        serve_pages(api, recorded)
        result = await backend.search(query())
        assert [s.query["page"] for s in api.seen] == ["1", "2"]
        assert (list(lines(result)), result.status) == ([REGISTRY, TESTS], "ok")

    async def test_chunks_of_one_file_across_pages_merge(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """A file whose chunks straddle two pages is one file with all its hits."""
        first, second = copy.deepcopy(recorded["response"]["body"])
        api.on(
            "/api/v4/",
            by_page(
                {
                    1: reply([first], headers=recorded["response"]["headers"]),
                    2: reply([second, TEST_BLOB], headers=LAST_PAGE),
                }
            ),
        )
        result = await backend.search(query())
        assert lines(result) == {REGISTRY: [6, 12], TESTS: [1, 5]}

    async def test_error_on_a_later_page_keeps_the_first(
        self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]
    ) -> None:
        """A 500 on page 2 returns page 1's files as capped, naming the failure."""
        first = reply(recorded["response"]["body"], headers=recorded["response"]["headers"])
        api.on("/api/v4/", by_page({1: first, 2: reply({"message": "500 Internal Server Error"}, status=500)}))
        result = await backend.search(query())
        assert list(lines(result)) == [REGISTRY]
        assert result.status == "capped"
        assert "HTTP 500" in result.reason


class TestFailing:
    async def test_403_rate_limit(self, api: FakeApi, backend: GitLabBackend) -> None:
        """403 with x-ratelimit-remaining 0 raises RateLimited until x-ratelimit-reset."""
        reset = str(int(time.time()) + 120)
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
        api.on("/api/v4/", reply({"message": "403 Forbidden"}, status=403, headers=headers))
        with pytest.raises(RateLimited) as info:
            await backend.search(query())
        assert info.value.retry_after is not None
        assert 100 < info.value.retry_after <= 121

    async def test_regex_not_available(self, api: FakeApi, backend: GitLabBackend, recorded: dict[str, Any]) -> None:
        """GitLab's 'regex option is not available' is Unsupported, with its message."""
        api.on("/api/v4/", reply(recorded["error_examples"][1]["body"], status=400))
        with pytest.raises(Unsupported, match="regex option is not available"):
            await backend.search(query("a.b", mode="regex"))

    async def test_404(self, api: FakeApi, backend: GitLabBackend) -> None:
        """An unknown or invisible project is a BackendError saying so."""
        api.on("/api/v4/", reply({"message": "404 Project Not Found"}, status=404))
        with pytest.raises(BackendError, match="not found"):
            await backend.search(query())

    async def test_wrong_shape(self, api: FakeApi, backend: GitLabBackend) -> None:
        """JSON that is not a list of blobs is a BackendError."""
        api.on("/api/v4/", reply({"blobs": []}, headers=LAST_PAGE))
        with pytest.raises(BackendError, match="shape"):
            await backend.search(query())
