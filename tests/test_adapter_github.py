"""The GitHub code search adapter against a fake GitHub served on 127.0.0.1."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.github import GitHubBackend, GitHubSettings, build_q
from gateway.errors import BackendError, RateLimited
from gateway.models import BackendResult, SearchQuery
from tests.fake_github_gitlab import FakeApi, adapter_tasks, by_page, load, reply

TOKEN_ENV = "FEDSEARCH_TEST_GITHUB_TOKEN"
REPO = "acme/widget-service"
CONTENTS = f"/repos/{REPO}/contents/"
REGISTRY_PY = (
    '"""A registry of widget factories, keyed by name."""\n'
    "from __future__ import annotations\n"
    "_REGISTRY: dict = {}\n"
    "\n"
    "\n"
    "def register_widget(name, factory):\n"
    '    """Register a widget factory under ``name``."""\n'
    "    _REGISTRY[name] = factory\n"
    "\n"
    "\n"
    "def lookup_widget(name):\n"
    "    return _REGISTRY.get(name)  # café-safe lookup of register_widget entries\n"
)
TEST_PY = (
    'from widgets.registry import register_widget\n\n\ndef test_register():\n    register_widget("gear", object)\n'
)
RAW = "application/vnd.github.raw"


@pytest.fixture
def recorded(fixtures_dir: Path) -> dict[str, Any]:
    return load(fixtures_dir, "github_code_search.json")


@pytest.fixture
def token(recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    value: str = recorded["request"]["headers"]["Authorization"].removeprefix("Bearer ")
    monkeypatch.setenv(TOKEN_ENV, value)
    return value


@pytest.fixture
async def backend(api: FakeApi, token: str) -> AsyncIterator[GitHubBackend]:
    settings = GitHubSettings(url=api.url, token_env=TOKEN_ENV, scope=f"repo:{REPO}")
    async with GitHubBackend("gh", settings) as gh:
        yield gh


def serve_search(api: FakeApi, recorded: dict[str, Any], body: Any = None) -> None:
    response = recorded["response"]
    api.on("/search/code", reply(response["body"] if body is None else body, headers=response["headers"]))


def serve_raw(api: FakeApi) -> None:
    api.on(CONTENTS + "src/widgets/registry.py", reply(raw=REGISTRY_PY.encode(), content_type=RAW))
    api.on(CONTENTS + "tests/test_registry.py", reply(raw=TEST_PY.encode(), content_type=RAW))


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", False)
    kw.setdefault("max_files", 2)
    kw.setdefault("deadline", time.monotonic() + 5.0)
    return SearchQuery(text=text, **kw)


def lines(result: BackendResult) -> dict[str, list[int]]:
    return {f.path: [h.line for h in f.hits] for f in result.files}


class TestAsking:
    async def test_request_is_the_recorded_one(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """The fixture's query string and headers are what the fake server receives."""
        serve_search(api, recorded)
        serve_raw(api)
        await backend.search(query(languages=("python",)))
        sent = api.to("/search/code")[0]
        want = recorded["request"]
        assert sent.query == {k: str(v) for k, v in want["query"].items()}
        for name in ("Accept", "Authorization", "X-GitHub-Api-Version"):
            assert sent.headers[name] == want["headers"][name]
        assert sent.headers["User-Agent"]

    def test_phrase_is_quoted_and_escaped(self) -> None:
        """A term with spaces or quotes is sent as one escaped phrase."""
        assert build_q(query('say "hi" \\ now')) == '"say \\"hi\\" \\\\ now"'

    def test_glob_becomes_extension_qualifier(self) -> None:
        """A single '*.ext' include glob is asked as extension:ext."""
        assert build_q(query(paths=("*.py",)), "org:acme") == "register_widget org:acme extension:py"

    def test_glob_becomes_path_qualifier(self) -> None:
        """An anchored glob's literal directories (inside the repository) are asked as path:."""
        q = build_q(query(paths=("src/widgets/**/*.py",)))
        assert q == "register_widget path:src/widgets"

    def test_excludes_are_not_pushed(self) -> None:
        """Exclude globs and several languages stay local filters."""
        q = build_q(query(paths=("!vendor/**",), languages=("python", "go")))
        assert q == "register_widget"

    def test_scope_is_validated(self) -> None:
        """A scope that is not org:/user:/repo: qualifiers is a settings error."""
        with pytest.raises(ValueError, match="scope"):
            GitHubSettings(scope="is:public")


class TestReading:
    async def test_fixture_round_trip(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """The recorded answer plus raw contents become line hits, in GitHub's order."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query())
        assert lines(result) == {
            f"{REPO}/tests/test_registry.py": [1, 5],
            f"{REPO}/src/widgets/registry.py": [6, 12],
        }
        assert result.files[0].path == f"{REPO}/tests/test_registry.py"
        first = result.files[1].hits[0]
        assert (first.kind, first.column, first.text) == ("line", 5, "def register_widget(name, factory):")

    async def test_raw_fetch_shape(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any], token: str
    ) -> None:
        """Raw contents are fetched from the configured host at the result's commit, with the token."""
        serve_search(api, recorded)
        serve_raw(api)
        await backend.search(query())
        raw = api.to(CONTENTS)
        assert sorted(s.path for s in raw) == [
            CONTENTS + "src/widgets/registry.py",
            CONTENTS + "tests/test_registry.py",
        ]
        assert all(s.query == {"ref": "3f2a9c1e8b7d6054a1b2c3d4e5f60718293a4b5c"} for s in raw)
        assert all(s.headers["Authorization"] == f"Bearer {token}" for s in raw)
        assert all(s.headers["Accept"] == "application/vnd.github.raw+json" for s in raw)

    async def test_column_counts_characters(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """The match after 'é' on registry.py line 12 is at character column 55."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query())
        hit = result.files[1].hits[1]
        assert (hit.line, hit.column) == (12, 55)
        assert "café" in hit.text

    async def test_context_lines(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """context_lines brings the lines around each hit from the raw content."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query(context_lines=1))
        hit = result.files[1].hits[0]
        assert hit.before == ("",)
        assert hit.after == ('    """Register a widget factory under ``name``."""',)

    async def test_case_sensitive_filters_locally(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """GitHub ignores case, so a case-sensitive query drops files without an exact-case match."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query("Register_Widget", case_sensitive=True))
        assert result.files == []

    async def test_local_path_filter(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """An exclude glob the backend cannot express is applied to the answer."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query(paths=("!tests/**",)))
        assert list(lines(result)) == [f"{REPO}/src/widgets/registry.py"]

    async def test_raw_failure_falls_back_to_path_hits(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """When raw content fails, each file gets one path-level hit with its fragment line."""
        serve_search(api, recorded)
        api.on(CONTENTS, reply({"message": "boom"}, status=500))
        result = await backend.search(query())
        hits = {f.path: f.hits for f in result.files}
        assert [(h.kind, h.line) for f in result.files for h in f.hits] == [("file", 1), ("file", 1)]
        assert hits[f"{REPO}/tests/test_registry.py"][0].text == '    register_widget("gear", object)'
        assert hits[f"{REPO}/src/widgets/registry.py"][0].text == "def register_widget(name, factory):"

    async def test_raw_hang_falls_back_before_the_deadline(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """A raw fetch that hangs costs only line numbers: path-level hits, no timeout, no leaked task."""
        serve_search(api, recorded)
        api.on(CONTENTS, api.hang)
        result = await backend.search(query(deadline=time.monotonic() + 1.0))
        assert [h.kind for f in result.files for h in f.hits] == ["file", "file"]
        assert adapter_tasks() == []

    async def test_raw_rate_limit_stops_fetching(self, api: FakeApi, token: str, recorded: dict[str, Any]) -> None:
        """A rate-limited raw fetch stops the others: the rest fall back without asking."""
        serve_search(api, recorded)
        api.on(
            CONTENTS,
            reply(
                {"message": "API rate limit exceeded"},
                status=403,
                headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1"},
            ),
        )
        settings = GitHubSettings(url=api.url, token_env=TOKEN_ENV, raw_concurrency=1)
        async with GitHubBackend("gh", settings) as gh:
            result = await gh.search(query())
        assert len(api.to(CONTENTS)) == 1
        assert [h.kind for f in result.files for h in f.hits] == ["file", "file"]

    async def test_case_sensitive_fallback_uses_fragments(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """Without raw content, a case-sensitive query keeps only files whose fragments match exactly."""
        serve_search(api, recorded)
        api.on(CONTENTS, reply({"message": "boom"}, status=500))
        result = await backend.search(query("Register_Widget", case_sensitive=True))
        assert result.files == []


class TestCapped:
    async def test_total_above_fetched(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """total_count above the files fetched is capped with the total as file_count."""
        serve_search(api, recorded)
        serve_raw(api)
        result = await backend.search(query())
        assert (result.status, result.file_count) == ("capped", 3)

    async def test_incomplete_results(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """incomplete_results makes the answer capped even when every item was fetched."""
        body = copy.deepcopy(recorded["response"]["body"]) | {"incomplete_results": True, "total_count": 2}
        serve_search(api, recorded, body)
        serve_raw(api)
        result = await backend.search(query())
        assert result.status == "capped"
        assert "incomplete_results" in result.reason

    async def test_thousand_result_ceiling(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """A total_count above 1000 is capped and says GitHub serves only 1000."""
        body = copy.deepcopy(recorded["response"]["body"]) | {"total_count": 54321}
        serve_search(api, recorded, body)
        serve_raw(api)
        result = await backend.search(query())
        assert (result.status, result.file_count) == ("capped", 54321)
        assert "1000" in result.reason

    async def test_ceiling_error_on_a_later_page(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """A 422 past the ceiling on page 2 keeps page 1 and reports capped."""
        error = recorded["error_examples"][0]
        page1 = reply(recorded["response"]["body"] | {"total_count": 5000}, headers=recorded["response"]["headers"])
        api.on("/search/code", by_page({1: page1, 2: reply(error["body"], status=422)}))
        serve_raw(api)
        result = await backend.search(query(max_files=3))
        assert len(result.files) == 2
        assert result.status == "capped"


class TestPaging:
    async def test_two_pages(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """Fewer files than asked on page 1 and a next link: page 2 is fetched and appended."""
        body = recorded["response"]["body"]
        third = copy.deepcopy(body["items"][1]) | {"path": "src/widgets/extra.py", "name": "extra.py"}
        page2 = {"total_count": 3, "incomplete_results": False, "items": [third]}
        api.on(
            "/search/code",
            by_page(
                {
                    1: reply(body, headers=recorded["response"]["headers"]),
                    2: reply(page2),
                }
            ),
        )
        serve_raw(api)
        api.on(CONTENTS + "src/widgets/extra.py", reply(raw=b"x = 1\nregister_widget(x)\n", content_type=RAW))
        result = await backend.search(query(max_files=3))
        assert [s.query["page"] for s in api.to("/search/code")] == ["1", "2"]
        assert lines(result)[f"{REPO}/src/widgets/extra.py"] == [2]
        assert (len(result.files), result.status) == (3, "ok")

    async def test_hang_on_a_later_page_keeps_the_first(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """A page 2 that never answers ends in time with page 1's files and status timeout."""
        page1 = reply(recorded["response"]["body"], headers=recorded["response"]["headers"])
        api.on("/search/code", by_page({1: page1, 2: api.hang}))
        serve_raw(api)
        result = await backend.search(query(max_files=3, deadline=time.monotonic() + 1.0))
        assert len(result.files) == 2
        assert result.status == "timeout"
        assert adapter_tasks() == []


class TestFailing:
    async def test_403_primary_limit(self, api: FakeApi, backend: GitHubBackend) -> None:
        """403 with x-ratelimit-remaining 0 raises RateLimited until x-ratelimit-reset."""
        reset = str(int(time.time()) + 120)
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
        api.on("/search/code", reply({"message": "API rate limit exceeded"}, status=403, headers=headers))
        with pytest.raises(RateLimited) as info:
            await backend.search(query())
        assert info.value.retry_after is not None
        assert 100 < info.value.retry_after <= 121

    async def test_403_secondary_limit(self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]) -> None:
        """The recorded secondary-limit 403 (Retry-After, remaining 7) raises RateLimited."""
        example = recorded["error_examples"][2]
        api.on("/search/code", reply(example["body"], status=403, headers=example["headers"]))
        with pytest.raises(RateLimited) as info:
            await backend.search(query())
        assert info.value.retry_after == 60

    async def test_422_names_githubs_message(
        self, api: FakeApi, backend: GitHubBackend, recorded: dict[str, Any]
    ) -> None:
        """A validation error is a BackendError carrying GitHub's short message."""
        api.on("/search/code", reply(recorded["error_examples"][1]["body"], status=422))
        with pytest.raises(BackendError, match="HTTP 422: Validation Failed"):
            await backend.search(query())

    async def test_wrong_shape(self, api: FakeApi, backend: GitHubBackend) -> None:
        """JSON that is not a code search result is a BackendError."""
        api.on("/search/code", reply({"items": "nope"}))
        with pytest.raises(BackendError, match="shape"):
            await backend.search(query())

    async def test_no_token_no_header(self, api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without a token variable configured, no Authorization header is sent."""
        api.on("/search/code", reply({"message": "Requires authentication"}, status=401))
        async with GitHubBackend("gh", GitHubSettings(url=api.url)) as gh:
            with pytest.raises(BackendError, match="not authorised"):
                await gh.search(query())
        assert "Authorization" not in api.seen[0].headers
