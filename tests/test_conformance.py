"""Every backend kind keeps the same promises (SPEC §6), whatever protocol it speaks.

Parametrised over ``gateway.registry.KINDS``: each kind has a :class:`Kind` below saying
how to point it at a fake serving its real API format (``tests/fixtures/backends/``)
and which of its requests the faults are played on. A kind added to the registry
without one fails :class:`TestCoverage`.

HTTP kinds: 429 with Retry-After, 5xx, garbage, a wrong content type, a redirect (never
followed), a server that hangs, the deadline (through the fan-out, on a busy machine),
a secret canary in error bodies, a token variable that is not set, path filters (matched
inside the repository, SPEC §5, and pushed down in the backend's own syntax), modes
they cannot do, and reading a file: its content, asked again by its identity and
served from what was kept, a missing file, the size cap, a hang; a kind that cannot
read says so and names the file's URL. The local kind (``ripgrep``): the deadline,
path filters, modes, reading.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings
from gateway.backend import REPOSITORY_KINDS, AsyncBackend
from gateway.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidRequest,
    NotFound,
    RateLimited,
    Transient,
    Unsupported,
)
from gateway.fanout import Route, fan_out
from gateway.models import BackendResult, Mode, SearchQuery
from gateway.registry import KINDS, load_kind
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.fakeservers import (
    FakeServer,
    Recorded,
    Reply,
    garbage,
    hang,
    huge_body,
    json_reply,
    leftover_tasks,
    rate_limited,
    redirect,
    server_error,
    stream,
    text_reply,
    wrong_type,
)
from tests.helpers import fake_program, git_repo, no_leaks, rg_children
from tests.remote_files import REGISTRY_PATH, REGISTRY_PY, etag, zoekt_read_answer

TEXT = "register_widget"
CANARY_ENV = "FEDSEARCH_TEST_CONFORMANCE_TOKEN"
CANARY = "conformance-canary-5e1d0c9b7a"
MODES: tuple[Mode, ...] = ("exact", "regex", "semantic")
SRC = re.compile(r"(^|/)src/")
JSON = "application/json"
EVENT_STREAM = "text/event-stream"


def _fixture(fixtures: Path, name: str) -> Any:
    return json.loads((fixtures / name).read_text())


def _recorded_body(fixtures: Path, name: str, **headers: str) -> Reply:
    """The recorded response body of a fixture (``{"request", "response": {"body"}}``)."""
    return json_reply(_fixture(fixtures, name)["response"]["body"], headers=headers)


def _afi_manifest() -> Reply:
    return json_reply(
        {
            "afi_version": "0.1",
            "provider": "fake",
            "profile": 2,
            "capabilities": ["stat", "list", "read", "search"],
            "search": {"modes": ["exact", "regex"], "max_results": 500},
            "path": {"case_sensitive": True, "max_length": 4096},
            "auth": {"required": False, "methods": []},
        }
    )


def _afi_page(fixtures: Path) -> Reply:
    """An AFI search page for the files of the recorded zoekt answer (AFI has no recorded fixture)."""
    files = _fixture(fixtures, "zoekt_search_response.json")["Result"]["Files"]
    matches = [
        {"path": f"/{f['FileName']}", "line": m["LineNumber"], "column": 1, "text": f"{TEXT}(x)"}
        for f in files
        for m in f["LineMatches"]
    ]
    return json_reply({"matches": matches})


def _peer_answer(fixtures: Path) -> Reply:
    """A fedsearch answer holding the files of the recorded zoekt answer."""
    files = _fixture(fixtures, "zoekt_search_response.json")["Result"]["Files"]
    groups = [
        {
            "file_path": f["FileName"],
            "namespace": "remote",
            "hit_count": 1,
            "hits": [
                {
                    "id": i,
                    "qualified_name": f"remote:{f['FileName']}:3",
                    "kind": "line",
                    "name": "",
                    "file_path": f["FileName"],
                    "start_line": 3,
                    "end_line": 3,
                    "matched": ["content"],
                    "namespace": "remote",
                    "text": f"{TEXT}(x)",
                    "column": 1,
                }
            ],
        }
        for i, f in enumerate(files)
    ]
    status = {"name": "remote", "backend": "ripgrep", "status": "ok", "took_ms": 1, "files": len(groups), "hits": 2}
    answer = {
        "files": groups,
        "file_count": len(groups),
        "weak_filtered": 0,
        "truncated": False,
        "limits": {"files": 20, "offset": 0, "hit_budget": 100},
        "namespaces": [status],
        "took_ms": 1,
    }
    return json_reply(answer)


def _raw(content_type: str = "text/plain; charset=utf-8") -> Callable[[Path], Reply]:
    """The registry module as a raw-file endpoint serves it, with its ETag."""
    return lambda _: text_reply(REGISTRY_PY, content_type=content_type, headers={"ETag": etag(REGISTRY_PY)})


def _afi_file(_: Path) -> Reply:
    """The registry module as an AFI ``read`` answers it (fedsearch's provider sends ETag and X-AFI-EOF)."""
    headers = {"ETag": etag(REGISTRY_PY), "X-AFI-EOF": "true", "Accept-Ranges": "bytes"}
    return text_reply(REGISTRY_PY, content_type="text/x-python", headers=headers)


NOT_MODIFIED = Reply(status=304, body=b"", content_type=None)
HOUND_URL = "https://github.com/acme/widget-service/blob/HEAD/src/widgets/registry.py"
LIVEGREP_URL = "https://github.com/acme/widget-service/blob/HEAD/src/widgets/registry.py#L1"


@dataclass(frozen=True, slots=True)
class Kind:
    """How the conformance suite drives one HTTP backend kind."""

    settings: Callable[[str], dict[str, Any]]  # the fake's URL -> the namespace's keys
    answer: Callable[[Path], Reply]  # the search request's good answer, from the fixtures
    search_path: str  # the path of the request faults are played on
    pushed: Callable[[Recorded], str]  # where the search request says the path globs, in the backend's syntax
    read_path: str  # the registry module's path, as the kind names it
    read: Callable[[Path], Reply] | None  # a read's good answer; None: it cannot read
    read_asked: Callable[[Recorded], bool]  # whether a request asked for the registry module
    unchanged: Callable[[Path], Reply] = lambda _: NOT_MODIFIED  # a read asked again, the file unchanged
    url: str = ""  # the file's URL a kind that cannot read names
    repository: str = ""  # the fixtures' repository as the kind names it (files are <repository>/<path>)
    content_type: str = JSON  # what a good answer's Content-Type is
    routes: Callable[[Path], dict[str, Reply]] = lambda _: {}  # other requests' fixed answers
    auth: tuple[str, str] = ("Authorization", "Bearer ")  # header and prefix the token goes in
    partial: Callable[[Path], Reply] | None = None  # a good start, then nothing: kept at the deadline


HTTP: dict[str, Kind] = {
    "zoekt": Kind(
        settings=lambda url: {"urls": [url]},
        answer=lambda fx: json_reply(_fixture(fx, "zoekt_search_response.json")),
        search_path="/api/search",
        pushed=lambda r: str(r.json()["Q"]),
        repository="github.com/acme/widget-service",
        read_path=f"github.com/acme/widget-service/{REGISTRY_PATH}",
        read=lambda fx: json_reply(zoekt_read_answer(fx)),
        read_asked=lambda r: r.path == "/api/search" and r.json()["Opts"]["Whole"] is True,
        unchanged=lambda fx: json_reply(zoekt_read_answer(fx, whole=False)),
    ),
    "hound": Kind(
        settings=lambda url: {"url": url},
        answer=lambda fx: _recorded_body(fx, "hound_search.json"),
        search_path="/api/v1/search",
        pushed=lambda r: r.query["files"],
        repository="widget-service",
        read_path=f"widget-service/{REGISTRY_PATH}",
        read=None,
        read_asked=lambda r: r.path == "/api/v1/repos",
        routes=lambda fx: {"/api/v1/repos": json_reply(_fixture(fx, "hound_repos.json"))},
        url=HOUND_URL,
    ),
    "livegrep": Kind(
        settings=lambda url: {"url": url, "index": "livegrep"},
        answer=lambda fx: _recorded_body(fx, "livegrep_search.json"),
        search_path="/api/v1/search/livegrep",
        pushed=lambda r: r.query["q"],
        repository="acme/widget-service",
        read_path=f"acme/widget-service/{REGISTRY_PATH}",
        read=None,
        read_asked=lambda r: r.path == "/api/v1/repos",
        routes=lambda _: {
            "/api/v1/repos": json_reply(
                {
                    "repo_urls": {
                        "livegrep": {"acme/widget-service": "https://github.com/{name}/blob/{version}/{path}#L{lno}"}
                    },
                    "internal_view_repos": [],
                    "default_search_repos": [],
                    "link_configs": [],
                }
            )
        },
        url=LIVEGREP_URL,
    ),
    "sourcegraph": Kind(
        settings=lambda url: {"url": url},
        answer=lambda fx: text_reply((fx / "sourcegraph_stream.txt").read_bytes(), content_type=EVENT_STREAM),
        search_path="/.api/search/stream",
        pushed=lambda r: r.query["q"],
        repository="github.com/acme/widget-service",
        read_path=f"github.com/acme/widget-service/{REGISTRY_PATH}",
        read=_raw(),
        read_asked=lambda r: r.path == f"/github.com/acme/widget-service/-/raw/{REGISTRY_PATH}",
        content_type=EVENT_STREAM,
        auth=("Authorization", "token "),
        partial=lambda fx: stream(
            (fx / "sourcegraph_stream.txt").read_bytes().split(b"event: done")[0],
            content_type=EVENT_STREAM,
            hang_after=True,
        ),
    ),
    "github": Kind(
        settings=lambda url: {"url": url, "scope": "repo:acme/widget-service", "fetch_lines": False},
        answer=lambda fx: _recorded_body(fx, "github_code_search.json"),
        search_path="/search/code",
        pushed=lambda r: r.query["q"],
        repository="acme/widget-service",
        read_path=f"acme/widget-service/{REGISTRY_PATH}",
        read=_raw("application/vnd.github.raw+json; charset=utf-8"),
        read_asked=lambda r: (
            r.path == f"/repos/acme/widget-service/contents/{REGISTRY_PATH}"
            and r.headers["Accept"] == "application/vnd.github.raw+json"
        ),
    ),
    "gitlab": Kind(
        settings=lambda url: {"url": url, "project": "acme/widget-service", "max_pages": 1},
        answer=lambda fx: json_reply(
            _fixture(fx, "gitlab_blobs.json")["response"]["body"],
            headers=_fixture(fx, "gitlab_blobs.json")["response"]["headers"],
        ),
        search_path="/api/v4/projects/",
        pushed=lambda r: r.query["search"],
        repository="acme/widget-service",
        read_path=f"acme/widget-service/{REGISTRY_PATH}",
        read=_raw(),
        read_asked=lambda r: r.path.endswith(f"/repository/files/{REGISTRY_PATH}/raw") and r.query["ref"] == "HEAD",
        auth=("PRIVATE-TOKEN", ""),
    ),
    "afi": Kind(
        settings=lambda url: {"url": url},
        answer=_afi_page,
        search_path="/afi/search",
        pushed=lambda r: str(r.json()["path"]),
        read_path=REGISTRY_PATH,
        read=_afi_file,
        read_asked=lambda r: r.path == "/afi/read" and r.query["path"] == f"/{REGISTRY_PATH}",
        routes=lambda _: {"/.afi/manifest.json": _afi_manifest()},
    ),
    "gateway": Kind(
        settings=lambda url: {"url": url},
        answer=_peer_answer,
        search_path="/v1/search",
        pushed=lambda r: str(r.json()["paths"]),
        read_path=f"remote/{REGISTRY_PATH}",
        read=_afi_file,
        read_asked=lambda r: r.path == "/afi/read" and r.query["path"] == f"/remote/{REGISTRY_PATH}",
    ),
}
#: Kinds that search what is on this machine: the HTTP faults do not apply to them.
LOCAL = ("ripgrep",)


def backend(kind: str, url: str, **extra: Any) -> AsyncBackend[Any]:
    cls = load_kind(kind)
    return cls(kind, cls.Settings.model_validate({**HTTP[kind].settings(url), **extra}))


def query(seconds: float = 5.0, **kw: Any) -> SearchQuery:
    return SearchQuery(text=TEXT, case_sensitive=False, deadline=time.monotonic() + seconds, **kw)


async def ask(kind: str, reply: Reply, fixtures: Path, **kw: Any) -> BackendResult:
    """The kind's answer to a query (``kw``) against a fake answering ``reply`` to its search request."""
    async with (
        FakeServer(reply, routes=HTTP[kind].routes(fixtures)) as server,
        backend(kind, server.url) as found,
    ):
        return await found.search(query(**kw))


async def refused(kind: str, reply: Reply, fixtures: Path, **settings: Any) -> tuple[BackendError, FakeServer]:
    """The error the kind raises for ``reply``, and the fake (its requests recorded)."""
    async with (
        FakeServer(reply, HTTP[kind].answer(fixtures), routes=HTTP[kind].routes(fixtures)) as server,
        backend(kind, server.url, **settings) as found,
    ):
        with pytest.raises(BackendError) as caught:
            await found.search(query())
    return caught.value, server


def searches(kind: str, server: FakeServer) -> list[str]:
    return [r.path for r in server.requests if r.path.startswith(HTTP[kind].search_path)]


async def hog(q: SearchQuery) -> BackendResult:
    """A neighbour that keeps the event loop busy from just before the deadline to well past it."""
    await asyncio.sleep(max(0.0, q.remaining() - 0.05))
    time.sleep(0.2)  # noqa: ASYNC251 - the point: nothing else runs while the machine is busy
    return BackendResult()


async def outcome_on_a_busy_machine(found: AsyncBackend[Any], seconds: float = 0.5) -> Any:
    """The kind's outcome through the fan-out, its deadline passing while the loop is blocked."""
    routes = [Route("ns", found), Route("hog", MockBackend(hog, "hog"))]
    outcomes = await fan_out(routes, query(seconds))
    return outcomes[0]


@pytest.fixture(params=sorted(HTTP))
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


class TestCoverage:
    def test_every_kind_is_covered(self) -> None:
        """Every kind the registry knows has a conformance entry here (HTTP or local)."""
        assert set(KINDS) == set(HTTP) | set(LOCAL)


class TestAnswers:
    async def test_the_real_format_is_read(self, kind: str, fixtures_dir: Path) -> None:
        """The recorded answer of the kind's API gives files with hits (the harness is sound)."""
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir)
        assert result.status in ("ok", "capped") and result.files
        assert all(f.hits for f in result.files)


class TestFaults:
    async def test_429_with_retry_after(self, kind: str, fixtures_dir: Path) -> None:
        """A 429 with Retry-After is RateLimited, carrying the wait."""
        error, _ = await refused(kind, rate_limited("7"), fixtures_dir)
        assert isinstance(error, RateLimited) and error.retry_after == 7.0

    async def test_500_is_an_error(self, kind: str, fixtures_dir: Path) -> None:
        """A 500 is an error naming the status, never retried (not transient)."""
        error, _ = await refused(kind, server_error(500), fixtures_dir)
        assert error.status == "error" and "500" in error.reason and not isinstance(error, Transient)

    async def test_503_is_unavailable_and_transient(self, kind: str, fixtures_dir: Path) -> None:
        """A 503 is `unavailable`, and a retry (elsewhere, later) may cure it."""
        error, _ = await refused(kind, server_error(503), fixtures_dir)
        assert isinstance(error, BackendUnavailable) and isinstance(error, Transient)

    async def test_garbage(self, kind: str, fixtures_dir: Path) -> None:
        """A body of the right type that cannot be read is an error."""
        error, _ = await refused(kind, garbage(HTTP[kind].content_type), fixtures_dir)
        assert error.status == "error"

    async def test_wrong_content_type(self, kind: str, fixtures_dir: Path) -> None:
        """An HTML page (a proxy's login wall) is an error naming the type."""
        error, _ = await refused(kind, wrong_type(), fixtures_dir)
        assert error.status == "error" and "content type 'text/html'" in error.reason

    async def test_redirect_is_refused(self, kind: str, fixtures_dir: Path) -> None:
        """A redirect is refused and its target never asked."""
        error, server = await refused(kind, redirect(HTTP[kind].search_path + "?again=1"), fixtures_dir)
        assert "redirect refused" in error.reason
        assert len(searches(kind, server)) == 1

    async def test_hang(self, kind: str, fixtures_dir: Path) -> None:
        """A server that never answers costs the deadline: timeout, the request dropped, nothing left running."""
        async with FakeServer(hang(), routes=HTTP[kind].routes(fixtures_dir)) as server:
            async with backend(kind, server.url) as found:
                with pytest.raises(BackendTimeout):
                    await found.search(query(0.3))
            await asyncio.wait_for(server.cancelled.wait(), 5)
        assert leftover_tasks() == []


class TestDeadline:
    async def test_a_hanging_server_is_timeout_through_the_fan_out(self, kind: str, fixtures_dir: Path) -> None:
        """Through the fan-out, a namespace whose server hangs is `timeout` at its deadline, the others
        unharmed, nothing left running, the machine busy across the deadline."""
        async with (
            no_leaks(),
            FakeServer(hang(), routes=HTTP[kind].routes(fixtures_dir)) as server,
            backend(kind, server.url) as found,
        ):
            outcome = await outcome_on_a_busy_machine(found)
        assert outcome.status == "timeout"

    @pytest.mark.parametrize("streaming", [k for k in sorted(HTTP) if HTTP[k].partial is not None])
    async def test_what_came_before_the_deadline_is_kept(self, streaming: str, fixtures_dir: Path) -> None:
        """A kind that reads its answer as it comes keeps what came when the deadline cuts it, even on
        a busy machine."""
        kind, partial = streaming, HTTP[streaming].partial
        assert partial is not None
        async with (
            FakeServer(partial(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)) as server,
            backend(kind, server.url) as found,
        ):
            outcome = await outcome_on_a_busy_machine(found)
        assert outcome.status == "timeout" and outcome.result is not None and outcome.result.files


class TestSecrets:
    @pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 500, 502])
    async def test_a_token_echoed_in_an_error_never_shows(
        self, kind: str, status: int, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The token goes in the kind's header, and an error body echoing it leaves no trace in the error."""
        monkeypatch.setenv(CANARY_ENV, CANARY)
        echo = f"you sent {CANARY}"
        body = dict.fromkeys(("message", "error", "Error", "detail", "code", "field"), echo)
        reply = Reply(status=status, body=orjson.dumps(body))
        error, server = await refused(kind, reply, fixtures_dir, token_env=CANARY_ENV)
        header, prefix = HTTP[kind].auth
        assert server.requests[0].headers[header] == prefix + CANARY
        assert CANARY not in str(error) and CANARY not in repr(error) and CANARY not in error.reason

    async def test_a_token_variable_not_set_sends_nothing(
        self, kind: str, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A namespace whose token variable is not set fails before asking anything, naming the variable."""
        monkeypatch.delenv(CANARY_ENV, raising=False)
        async with (
            FakeServer(HTTP[kind].answer(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)) as server,
            backend(kind, server.url, token_env=CANARY_ENV) as found,
        ):
            with pytest.raises(BackendError, match=CANARY_ENV):
                await found.search(query())
        assert server.requests == []


def _named(kind: str, inner: str) -> str:
    """A file's path as ``kind`` names it: ``<repository>/<inner>`` where it serves many."""
    repository = HTTP[kind].repository
    return f"{repository}/{inner}" if repository else inner


class TestPathFilters:
    async def test_include_glob(self, kind: str, fixtures_dir: Path) -> None:
        """Only files under an include glob come back, whatever the backend sent."""
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, paths=("src/**",))
        assert result.files and all(SRC.search(f.path) for f in result.files)

    async def test_exclude_glob(self, kind: str, fixtures_dir: Path) -> None:
        """No file under an exclude glob comes back, whatever the backend sent."""
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, paths=("!src/**",))
        assert not any(SRC.search(f.path) for f in result.files)

    async def test_an_include_glob_matches_inside_the_repository(self, kind: str, fixtures_dir: Path) -> None:
        """`src/**` is matched against the path inside the repository: each file is
        `<repository>/<path>` with the repository as the backend names it, and that path is under src/."""
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, paths=("src/**",))
        assert result.files
        for file in result.files:
            assert file.repository == HTTP[kind].repository
            assert file.inner_path.startswith("src/") and file.path == _named(kind, file.inner_path)

    async def test_an_exclude_glob_matches_inside_the_repository(self, kind: str, fixtures_dir: Path) -> None:
        """`!src/**` drops exactly the files under src/ of their repository; the others stay."""
        everything = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir)
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, paths=("!src/**",))
        kept = [f.path for f in everything.files if not f.inner_path.startswith("src/")]
        assert [f.path for f in result.files] == kept
        assert any(f.inner_path.startswith("src/") for f in everything.files)

    async def test_a_glob_naming_the_repository_matches_nothing(self, kind: str, fixtures_dir: Path) -> None:
        """The repository is not part of the path globs see: a glob on its name finds nothing
        (for the other kinds, a glob on a folder that is not there)."""
        top = HTTP[kind].repository.split("/")[0] if HTTP[kind].repository else "widget-service"
        result = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, paths=(f"{top}/**",))
        assert list(result.files) == []

    async def test_languages_match_inside_the_repository(self, kind: str, fixtures_dir: Path) -> None:
        """A language keeps the files of its extensions (all Python here) and no other language does."""
        python = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, languages=("python",))
        go = await ask(kind, HTTP[kind].answer(fixtures_dir), fixtures_dir, languages=("go",))
        assert python.files and all(f.inner_path.endswith(".py") for f in python.files)
        assert list(go.files) == []

    async def test_the_glob_is_pushed_down(self, kind: str, fixtures_dir: Path) -> None:
        """The search request says the include glob in the backend's own syntax (its folder at least)."""
        async with (
            FakeServer(HTTP[kind].answer(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)) as server,
            backend(kind, server.url) as found,
        ):
            await found.search(query(paths=("src/**",)))
        [sent] = [r for r in server.requests if r.path.startswith(HTTP[kind].search_path)][:1]
        assert "src" in HTTP[kind].pushed(sent)


READABLE = sorted(k for k in HTTP if HTTP[k].read is not None)
UNREADABLE = sorted(k for k in HTTP if HTTP[k].read is None)


async def read(kind: str, *replies: Reply, fixtures: Path, seconds: float = 5.0, **settings: Any) -> Any:
    """What ``kind`` reads of the registry module (or raises), the fake answering ``replies``; and the fake."""
    async with (
        FakeServer(*replies, routes=HTTP[kind].routes(fixtures)) as server,
        backend(kind, server.url, **settings) as found,
    ):
        try:
            got: Any = await found.read_file(HTTP[kind].read_path, time.monotonic() + seconds)
        except Exception as exc:
            got = exc
    return got, server


class TestReading:
    @pytest.mark.parametrize("kind", READABLE)
    async def test_a_file_is_read_whole(self, kind: str, fixtures_dir: Path) -> None:
        """The file's bytes, asked of the backend's own content API, with an identity to ask again by."""
        reply = HTTP[kind].read
        assert reply is not None
        got, server = await read(kind, reply(fixtures_dir), fixtures=fixtures_dir)
        assert got.data == REGISTRY_PY and got.identity
        assert any(HTTP[kind].read_asked(r) for r in server.requests)

    @pytest.mark.parametrize("kind", READABLE)
    async def test_a_file_read_again_is_asked_by_its_identity(self, kind: str, fixtures_dir: Path) -> None:
        """Read again, the file is asked by what identifies its content (an ETag, zoekt's checksum); the
        backend saying it is unchanged, the copy kept is served."""
        reply = HTTP[kind].read
        assert reply is not None
        async with (
            FakeServer(
                reply(fixtures_dir), HTTP[kind].unchanged(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)
            ) as server,
            backend(kind, server.url) as found,
        ):
            first = await found.read_file(HTTP[kind].read_path, time.monotonic() + 5)
            again = await found.read_file(HTTP[kind].read_path, time.monotonic() + 5)
            assert found.read_cache.hits == 1  # type: ignore[attr-defined]
        assert again.data == first.data == REGISTRY_PY
        last = server.requests[-1]
        assert last.headers.get("If-None-Match") == etag(REGISTRY_PY) or last.json()["Opts"]["Whole"] is False

    @pytest.mark.parametrize("kind", READABLE)
    async def test_a_missing_file_is_not_found(self, kind: str, fixtures_dir: Path) -> None:
        """A file the backend does not have is NotFound (the same error as a local file that is not there)."""
        missing = json_reply({"Result": {"Files": None}}) if kind == "zoekt" else json_reply({}, status=404)
        got, _ = await read(kind, missing, fixtures=fixtures_dir)
        assert isinstance(got, NotFound)

    @pytest.mark.parametrize("kind", READABLE)
    async def test_a_file_over_the_cap_is_refused(self, kind: str, fixtures_dir: Path) -> None:
        """A file larger than the read cap is refused naming `path`, never held whole."""
        got, _ = await read(kind, huge_body(1 << 18), fixtures=fixtures_dir, max_bytes=1 << 16)
        assert isinstance(got, InvalidRequest) and got.field == "path" and "larger than" in got.message

    @pytest.mark.parametrize("kind", READABLE)
    async def test_a_hanging_read_ends_at_its_deadline(self, kind: str, fixtures_dir: Path) -> None:
        """A backend that never answers a read costs its deadline: a timeout, the request dropped."""
        got, _ = await read(kind, hang(), fixtures=fixtures_dir, seconds=0.3)
        assert isinstance(got, BackendTimeout)
        assert leftover_tasks() == []

    @pytest.mark.parametrize("kind", UNREADABLE)
    async def test_a_kind_that_cannot_read_names_the_url(self, kind: str, fixtures_dir: Path) -> None:
        """A backend that serves no content says so, naming where the file can be seen."""
        got, server = await read(kind, json_reply({}), fixtures=fixtures_dir)
        assert isinstance(got, Unsupported) and HTTP[kind].url in got.reason
        assert f"{kind} namespaces cannot be read" in got.reason
        assert any(HTTP[kind].read_asked(r) for r in server.requests)

    @pytest.mark.parametrize("kind", UNREADABLE)
    async def test_without_the_repository_list_it_still_says_so(self, kind: str, fixtures_dir: Path) -> None:
        """When the backend will not list its repositories, the read is still a clear `unsupported`."""
        async with FakeServer(server_error(500)) as server, backend(kind, server.url) as found:
            with pytest.raises(Unsupported, match=f"{kind} namespaces cannot be read"):
                await found.read_file(HTTP[kind].read_path, time.monotonic() + 5)

    async def test_every_kind_that_names_repositories_says_so(self) -> None:
        """The kinds whose files are `<repository>/<path>` declare it, and the core knows them by name."""
        assert {k for k in KINDS if load_kind(k).repository_paths} == REPOSITORY_KINDS
        assert {k for k in HTTP if HTTP[k].repository} == REPOSITORY_KINDS

    @pytest.mark.parametrize("kind", READABLE)
    async def test_read_through_the_service(self, kind: str, fixtures_dir: Path) -> None:
        """Through the service (the read path of /v1/files, read_file and `fedsearch read`), a remote
        file reads as a local one: numbered lines, the total, a range."""
        reply = HTTP[kind].read
        assert reply is not None
        async with FakeServer(reply(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)) as server:
            service = SearchService.with_backends([backend(kind, server.url)])
            try:
                namespace, path = service.split_path(f"{kind}/{HTTP[kind].read_path}")
                got = await service.read_file(namespace, path, 6, 7)
            finally:
                await service.aclose()
        assert (namespace, path) == (kind, HTTP[kind].read_path)
        assert got["total_lines"] == 12 and got["start_line"] == 6 and got["end_line"] == 7
        assert got["lines"] == [
            "def register_widget(name, factory):",
            '    """Register a widget factory under ``name``."""',
        ]


#: (kind, mode) for every mode a kind does not declare.
CANNOT = [(k, m) for k in sorted(HTTP) for m in MODES if m not in load_kind(k).modes]


class TestModes:
    @pytest.mark.parametrize(("kind", "mode"), CANNOT)
    async def test_a_mode_it_cannot_do_is_unsupported(self, kind: str, mode: Mode, fixtures_dir: Path) -> None:
        """A mode the kind does not declare is `unsupported` through the fan-out, and nothing is sent."""
        async with (
            FakeServer(HTTP[kind].answer(fixtures_dir), routes=HTTP[kind].routes(fixtures_dir)) as server,
            backend(kind, server.url) as found,
        ):
            [outcome] = await fan_out([Route("ns", found)], query(mode=mode))
        assert (outcome.status, outcome.error) == ("unsupported", f"{kind} cannot search in {mode} mode")
        assert server.requests == []


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "widgets",
        {
            "src/widgets/registry.py": f"def {TEXT}(name):\n    pass\n",
            "tests/test_registry.py": f"from widgets import {TEXT}\n",
            "README.md": f"Call {TEXT}.\n",
        },
    )


class TestLocal:
    async def test_what_rg_found_before_the_deadline_is_kept(
        self, tmp_path: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An rg still running at the deadline gives what it wrote so far as `timeout`, and is reaped,
        even when the machine is too busy to run anything across the deadline."""
        root = str(checkout)
        written = [
            f"{root}/src/widgets/registry.py\\0001:5:def {TEXT}(name):",
            f"{root}/README.md\\0001:6:Call {TEXT}.",
        ]
        output = "\\n\\n".join(written) + "\\n"  # rg's --null --heading output, then rg goes on working
        slow_rg = fake_program(tmp_path / "rg", f"printf '{output}'; exec sleep 30")
        monkeypatch.setattr("adapters.ripgrep.backend.find_rg", lambda: slow_rg)
        async with no_leaks():
            outcome = await outcome_on_a_busy_machine(RipgrepBackend("rg", RipgrepSettings(root=root)))
        assert outcome.status == "timeout" and outcome.result is not None
        assert sorted(f.path for f in outcome.result.files) == ["README.md", "src/widgets/registry.py"]
        assert not rg_children("sleep")

    async def test_include_glob(self, checkout: Path) -> None:
        """Only files under an include glob come back."""
        found = RipgrepBackend("rg", RipgrepSettings(root=str(checkout)))
        [outcome] = await fan_out([Route("rg", found)], query(paths=("src/**",)))
        assert outcome.result is not None
        assert [f.path for f in outcome.result.files] == ["src/widgets/registry.py"]

    async def test_exclude_glob(self, checkout: Path) -> None:
        """No file under an exclude glob comes back."""
        found = RipgrepBackend("rg", RipgrepSettings(root=str(checkout)))
        [outcome] = await fan_out([Route("rg", found)], query(paths=("!src/**",)))
        assert outcome.result is not None
        assert sorted(f.path for f in outcome.result.files) == ["README.md", "tests/test_registry.py"]

    async def test_a_file_is_read(self, checkout: Path) -> None:
        """A local namespace's file reads through the same path (lines, total, a range)."""
        service = SearchService.with_backends([RipgrepBackend("rg", RipgrepSettings(root=str(checkout)))])
        try:
            got = await service.read_file("rg", "src/widgets/registry.py", 1, 1)
        finally:
            await service.aclose()
        assert got["lines"] == [f"def {TEXT}(name):"] and got["total_lines"] == 2

    async def test_semantic_is_unsupported(self, checkout: Path) -> None:
        """ripgrep cannot search by meaning: `unsupported`, no rg started."""
        found = RipgrepBackend("rg", RipgrepSettings(root=str(checkout)))
        [outcome] = await fan_out([Route("rg", found)], query(mode="semantic"))
        assert (outcome.status, outcome.error) == ("unsupported", "ripgrep cannot search in semantic mode")
        assert rg_children() == set()
