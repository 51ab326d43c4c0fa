"""The Sourcegraph adapter, against a fake instance streaming the recorded server-sent events."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import re2

from adapters.sourcegraph import SourcegraphBackend, SourcegraphSettings, SseParser
from gateway.errors import BackendError
from gateway.models import BackendResult, SearchQuery
from tests.fakeservers import (
    FakeServer,
    Reply,
    leftover_tasks,
    stream,
)

REPO = "github.com/acme/widget-service"
REPO_RE = "^github\\.com/acme/widget-service$"
SSE = "text/event-stream"
TOKEN_ENV = "SG_TEST_TOKEN"


@pytest.fixture
def recorded(fixtures_dir: Path) -> Any:
    return json.loads((fixtures_dir / "sourcegraph_stream_request.json").read_text())


@pytest.fixture
def body(fixtures_dir: Path) -> bytes:
    return (fixtures_dir / "sourcegraph_stream.txt").read_bytes()


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch, recorded: dict[str, Any]) -> str:
    secret = recorded["headers"]["Authorization"].removeprefix("token ")
    monkeypatch.setenv(TOKEN_ENV, secret)
    return str(secret)


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    kw.setdefault("case_sensitive", False)
    return SearchQuery(text=text, **kw)


def sse(*events: tuple[str, Any]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def events(*items: tuple[str, Any]) -> Reply:
    return stream(sse(*items), content_type=SSE)


def content(path: str, *chunks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content", "path": path, "repository": REPO, "chunkMatches": list(chunks)}


def chunk(text: str, first_line: int, *ranges: tuple[int, int]) -> dict[str, Any]:
    """A chunk of ``text`` starting at 0-based ``first_line``, ranges as (0-based line, 0-based column)."""
    spans = [{"start": {"line": ln, "column": col}, "end": {"line": ln, "column": col + 3}} for ln, col in ranges]
    return {"content": text, "contentStart": {"line": first_line, "column": 0}, "ranges": spans}


async def search(server: FakeServer, q: SearchQuery | None = None, **settings: Any) -> BackendResult:
    settings.setdefault("url", server.url)
    async with SourcegraphBackend("sg", SourcegraphSettings(**settings)) as backend:
        return await backend.search(q or query())


def scan_delimited(text: str, delimiter: str) -> tuple[str, str]:
    """Sourcegraph's ``ScanDelimited`` (non-strict): the value and what follows it."""
    assert text[0] == delimiter
    out, i = "", 1
    escapes = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", delimiter: delimiter}
    while text[i] != delimiter:
        if text[i] == "\\":
            i += 1
            out += escapes.get(text[i], "\\" + text[i])
        else:
            out += text[i]
        i += 1
    return out, text[i + 1 :]


def pattern_of(q: str) -> tuple[str, str]:
    """The pattern token of a q the adapter built: its delimiter ('' when bare) and value."""
    head = q
    while head.split(" ", 1)[0].split(":", 1)[0] in ("repo", "file", "-file", "case"):
        head = head.split(" ", 1)[1]
    if head[0] in '"/':
        value, rest = scan_delimited(head, head[0])
        assert rest.startswith(" count:")
        return head[0], value
    return "", head.split(" ", 1)[0]


def filter_values(q: str, field: str) -> list[str]:
    """The values of ``field:`` filters in q (quoted ones undone)."""
    values = []
    rest = q
    while (at := rest.find(f" {field}:" if not rest.startswith(f"{field}:") else f"{field}:")) >= 0:
        rest = rest[at:].lstrip(" ")[len(field) + 1 :]
        if rest.startswith('"'):
            value, rest = scan_delimited(rest, '"')
        else:
            value, _, rest = rest.partition(" ")
        values.append(value)
    return values


class TestAsk:
    """What the adapter sends to Sourcegraph."""

    async def test_fixture_request_shape(self, recorded: dict[str, Any], body: bytes, token: str) -> None:
        """The recorded request (path, parameters, headers) is what goes out for the recorded query."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            q = query(max_files=4, deadline=time.monotonic() + 16.9)
            await search(server, q, repos=REPO_RE, token_env=TOKEN_ENV)
        sent = server.requests[0]
        assert (sent.method, sent.path) == (recorded["method"], recorded["path"])
        assert sent.query.keys() == recorded["query"].keys()
        assert {k: v for k, v in sent.query.items() if k != "display"} == {
            k: v for k, v in recorded["query"].items() if k != "display"
        }
        for name, value in recorded["headers"].items():
            assert sent.headers[name] == value

    @pytest.mark.parametrize("text", ['say "hi"', "back\\slash \\n", "-negated", "and", "repo:x (y", "tab\tz", "a.b"])
    async def test_exact_mode_escapes(self, text: str, body: bytes) -> None:
        """An exact pattern reaches Sourcegraph as a literal that unquotes to the text."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            await search(server, query(text))
        delimiter, value = pattern_of(server.requests[0].query["q"])
        assert delimiter in ('"', "")
        assert value == text
        if not delimiter:
            assert re2.search(r"^[A-Za-z0-9_.]+$", text) and text.lower() not in ("and", "or", "not")

    @pytest.mark.parametrize("regex", [r"a/b\d+", r"\\server\\share", r'x"y', r"(?i)foo\/bar"])
    async def test_regex_mode_is_slash_delimited(self, regex: str, body: bytes) -> None:
        """A regex reaches Sourcegraph slash-delimited and unquotes to itself."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            await search(server, query(regex, mode="regex"))
        assert pattern_of(server.requests[0].query["q"]) == ("/", regex)

    async def test_case_sensitive_adds_case_yes(self, body: bytes) -> None:
        """case:yes is sent exactly when the search is case-sensitive."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            await search(server, query(case_sensitive=True))
            await search(server, query(case_sensitive=False))
        sensitive, folded = (r.query["q"].split() for r in server.requests)
        assert "case:yes" in sensitive and "case:yes" not in folded

    async def test_globs_and_languages_become_file_filters(self, body: bytes) -> None:
        """Include, language and exclude globs become file:, file: and -file: regexes."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            await search(server, query(paths=("src/**", "!**/test_*"), languages=("go",)))
        q = server.requests[0].query["q"]
        include, language = (re2.compile(v) for v in filter_values(q, "file"))
        (exclude,) = (re2.compile(v) for v in filter_values(q, "-file"))
        assert include.search("src/a/b.go") and not include.search("lib/src.go")
        assert language.search("x/y.go") and not language.search("x/y.py")
        assert exclude.search("a/test_b.go") and not exclude.search("a/b.go")

    async def test_count_and_timeout_follow_the_query(self, body: bytes) -> None:
        """count: grows with the page and timeout: stays inside the remaining deadline."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            await search(server, query(max_files=100, deadline=time.monotonic() + 0.5))
        words = server.requests[0].query["q"].split()
        assert "count:2500" in words
        (timeout,) = (w for w in words if w.startswith("timeout:"))
        assert timeout.endswith("ms") and 0 < int(timeout[len("timeout:") : -2]) <= 500


class TestRead:
    """How the event stream becomes hits."""

    async def test_fixture_round_trip(self, body: bytes) -> None:
        """The recorded stream gives its files with 1-based lines and character columns."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            result = await search(server)
        assert [f.path for f in result.files] == [f"{REPO}/src/widgets/registry.py", f"{REPO}/tests/test_registry.py"]
        first, second = result.files
        assert [(h.line, h.column, h.kind) for h in first.hits] == [(6, 5, "line"), (12, 55, "line")]
        assert [(h.line, h.column) for h in second.hits] == [(1, 30)]
        assert first.hits[1].text == "    return _REGISTRY.get(name)  # café-safe lookup of register_widget entries"

    async def test_line_matches_shape(self, fixtures_dir: Path) -> None:
        """The cm=f shape (lineMatches, 0-based lineNumber, rune offsets) reads the same way."""
        body = (fixtures_dir / "sourcegraph_stream_linematches.txt").read_bytes()
        async with FakeServer(stream(body, content_type=SSE)) as server:
            result = await search(server)
        assert result.status == "ok"
        assert [(h.line, h.column) for h in result.files[0].hits] == [(6, 5), (12, 55)]

    async def test_parsed_incrementally(self, body: bytes) -> None:
        """A stream cut into tiny chunks, with CRLF line ends, reads the same."""
        crlf = body.replace(b"\n", b"\r\n")
        pieces = tuple(crlf[i : i + 7] for i in range(0, len(crlf), 7))
        async with FakeServer(stream(body, content_type=SSE), stream(*pieces, content_type=SSE)) as server:
            whole = await search(server)
            pieced = await search(server)
        assert pieced == whole

    def test_parser_joins_data_lines_and_skips_comments(self) -> None:
        """Several data lines are one payload; comments and stray lines are ignored."""
        parser = SseParser()
        got = parser.feed(b": ping\nevent: matches\ndata: [1,\nstray text\ndata:  2]\n")
        got += parser.feed(b"\nevent: done\ndata: {}\n\n")
        assert got == [("matches", b"[1,\n 2]"), ("done", b"{}")]

    async def test_non_ascii_before_the_match_counts_characters(self) -> None:
        """Sourcegraph's 0-based rune columns become 1-based character columns."""
        text = "日本語 é = abc"
        reply = events(("matches", [content("a.py", chunk(text, 2, (2, text.index("abc"))))]), ("done", {}))
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        (hit,) = result.files[0].hits
        assert hit.column is not None
        assert (hit.line, hit.column, hit.text[hit.column - 1 :]) == (3, 9, "abc")

    async def test_several_matches_on_one_line_are_one_hit(self) -> None:
        """Two ranges on one line give one hit, its column at the first."""
        reply = events(("matches", [content("a.py", chunk("abc abc", 0, (0, 4), (0, 0)))]), ("done", {}))
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert [(h.line, h.column) for h in result.files[0].hits] == [(1, 1)]

    async def test_context_from_the_chunk(self) -> None:
        """Context lines come from the chunk's content around the hit, cut to context_lines."""
        reply = events(("matches", [content("a.py", chunk("one\ntwo\nabc\nfour\nfive", 9, (11, 0)))]), ("done", {}))
        async with FakeServer(reply) as server:
            result = await search(server, query("abc", context_lines=1))
        (hit,) = result.files[0].hits
        assert (hit.line, hit.before, hit.after) == (12, ("two",), ("four",))

    async def test_path_match_is_a_file_hit(self) -> None:
        """A path-only match gets one hit of kind file."""
        path = {
            "type": "path",
            "path": "src/abc.py",
            "repository": REPO,
            "pathMatches": [chunk("", 0, (0, 4))["ranges"][0]],
        }
        async with FakeServer(events(("matches", [path]), ("done", {}))) as server:
            result = await search(server, query("abc"))
        (hit,) = result.files[0].hits
        assert (result.files[0].path, hit.kind, hit.column, hit.text) == (f"{REPO}/src/abc.py", "file", 5, "src/abc.py")

    async def test_content_without_ranges_is_dropped(self) -> None:
        """A content match with no usable range gives no file (and no invented path hit)."""
        reply = events(
            ("matches", [content("a.py", chunk("abc", 0)), content("b.py", chunk("abc", 0, (0, 0)))]), ("done", {})
        )
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert [f.path for f in result.files] == [f"{REPO}/b.py"]

    async def test_paths_filtered_locally_too(self, body: bytes) -> None:
        """A file outside the path globs is dropped even if Sourcegraph sent it."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            result = await search(server, query(paths=("src/**",)))
        assert [f.path for f in result.files] == [f"{REPO}/src/widgets/registry.py"]


class TestCapped:
    """Partial streams are reported as capped."""

    async def test_display_limit_caps(self, body: bytes) -> None:
        """The recorded display skip caps the result; the archived-repo default does not count."""
        async with FakeServer(stream(body, content_type=SSE)) as server:
            result = await search(server)
        assert (result.status, result.reason) == ("capped", "display limit hit")

    @pytest.mark.parametrize("reason", ["shard-match-limit", "shard-timeout", "repository-cloning", "backend-missing"])
    async def test_skipped_reason_caps(self, reason: str) -> None:
        """Each limit Sourcegraph reports in progress.skipped caps the result."""
        skipped = [{"reason": reason, "title": f"{reason} title", "message": "m", "severity": "warn"}]
        reply = events(
            ("matches", [content("a.py", chunk("abc", 0, (0, 0)))]),
            ("progress", {"done": True, "matchCount": 1, "skipped": skipped}),
            ("done", {}),
        )
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert (result.status, result.reason, len(result.files)) == ("capped", f"{reason} title", 1)

    async def test_archived_default_alone_is_ok(self) -> None:
        """Skipping archived repositories by default is not a cap."""
        skipped = [{"reason": "excluded-archive", "title": "1 archived", "message": "m", "severity": "info"}]
        reply = events(
            ("matches", [content("a.py", chunk("abc", 0, (0, 0)))]),
            ("progress", {"done": True, "matchCount": 1, "skipped": skipped}),
            ("done", {}),
        )
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert result.status == "ok"

    async def test_alert_after_results_caps(self) -> None:
        """An alert that comes with results caps them, naming the alert."""
        reply = events(
            ("matches", [content("a.py", chunk("abc", 0, (0, 0)))]),
            ("alert", {"title": "Timed out while searching", "proposedQueries": None}),
            ("done", {}),
        )
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert result.status == "capped" and "Timed out while searching" in result.reason

    async def test_alert_without_results_is_an_error(self, fixtures_dir: Path) -> None:
        """The recorded 'Unable To Process Query' alert is an error that says why."""
        body = (fixtures_dir / "sourcegraph_stream_alert.txt").read_bytes()
        async with FakeServer(stream(body, content_type=SSE)) as server:
            with pytest.raises(BackendError, match='Unable To Process Query: Invalid value "yesplease"'):
                await search(server)

    async def test_error_event_with_results_caps(self) -> None:
        """An error event after results caps them; a stray text line after it is ignored."""
        reply = stream(
            sse(("matches", [content("a.py", chunk("abc", 0, (0, 0)))]), ("error", {"message": "zoekt down"})),
            b"Internal Server Error\n",
            content_type=SSE,
        )
        async with FakeServer(reply) as server:
            result = await search(server, query("abc"))
        assert result.status == "capped" and "zoekt down" in result.reason

    async def test_error_event_alone_is_an_error(self) -> None:
        """An error event with nothing found is a BackendError with its message."""
        async with FakeServer(events(("error", {"message": "zoekt down"}))) as server:
            with pytest.raises(BackendError, match="zoekt down"):
                await search(server)

    async def test_stream_ending_before_done_caps(self) -> None:
        """A stream cut off before done keeps what came and says so."""
        async with FakeServer(events(("matches", [content("a.py", chunk("abc", 0, (0, 0)))]))) as server:
            result = await search(server, query("abc"))
        assert result.status == "capped" and "before done" in result.reason

    async def test_size_cap_keeps_what_fit(self) -> None:
        """Reading stops at max_bytes; the events that fit are kept and the result capped."""
        first = sse(("matches", [content("a.py", chunk("abc", 0, (0, 0)))]))
        big = sse(("matches", [content(f"f{i}.py", chunk("abc " * 50, 0, (0, 0))) for i in range(40)]))
        async with FakeServer(stream(first, big, sse(("done", {})), content_type=SSE)) as server:
            result = await search(server, query("abc"), max_bytes=2048)
        assert result.status == "capped" and "2048-byte cap" in result.reason
        assert [f.path for f in result.files] == [f"{REPO}/a.py"]

    async def test_deadline_mid_stream_keeps_results(self) -> None:
        """When the deadline passes mid-stream, what came is returned with status timeout."""
        first = sse(("matches", [content("a.py", chunk("abc", 0, (0, 0)))]))
        async with FakeServer(stream(first, content_type=SSE, hang_after=True)) as server:
            result = await search(server, query("abc", deadline=time.monotonic() + 0.3))
            await asyncio.wait_for(server.cancelled.wait(), 5)
        assert (result.status, [f.path for f in result.files]) == ("timeout", [f"{REPO}/a.py"])
        assert leftover_tasks() == []
