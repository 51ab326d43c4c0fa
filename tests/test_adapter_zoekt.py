"""The Zoekt adapter, against a fake zoekt-webserver serving the recorded JSON API payloads."""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path
from typing import Any

import pydantic
import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.zoekt.backend import ZoektBackend, ZoektSettings
from gateway.errors import BackendError
from gateway.models import BackendResult, FileMatch, SearchQuery
from tests.fakeservers import (
    FakeServer,
    json_reply,
)

REPO = "github.com/acme/widget-service"
REPO_RE = "^github\\.com/acme/widget-service$"


@pytest.fixture
def request_fixture(fixtures_dir: Path) -> Any:
    return json.loads((fixtures_dir / "zoekt_search_request.json").read_text())


@pytest.fixture
def response(fixtures_dir: Path) -> Any:
    return json.loads((fixtures_dir / "zoekt_search_response.json").read_text())


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    return SearchQuery(text=text, **kw)


async def search(server: FakeServer, q: SearchQuery | None = None, **settings: Any) -> BackendResult:
    settings.setdefault("urls", [server.url])
    async with ZoektBackend("zoekt", ZoektSettings(**settings)) as backend:
        return await backend.search(q or query())


def zoekt_tokens(q: str) -> list[str]:
    """Split a zoekt query as zoekt's ``nextToken`` does, quotes undone (query/parse.go)."""
    tokens: list[str] = []
    i = 0
    while i < len(q):
        while i < len(q) and q[i] in " \t":
            i += 1
        text, depth = "", 0
        while i < len(q) and not (q[i] in " \t\n" or (q[i] == ")" and depth == 0)):
            c = q[i]
            if c == '"':
                i += 1
                while q[i] != '"':
                    if q[i] == "\\":
                        i += 1
                    text += q[i]
                    i += 1
            elif c == "\\":
                text += q[i : i + 2]
                i += 1
            else:
                depth += {"(": 1, ")": -1}.get(c, 0)
                text += c
            i += 1
        if text:
            tokens.append(text)
    return tokens


def one_file(*line_matches: dict[str, Any], name: str = "a.py", **stats: Any) -> dict[str, Any]:
    """A zoekt answer with one file holding ``line_matches``."""
    files = [{"FileName": name, "Repository": REPO, "LineMatches": list(line_matches), "Score": 1.0}]
    return {"Result": {"FileCount": 1, "MatchCount": len(line_matches), "Files": files, **stats}}


def line_match(line: str, number: int, *offsets: int, name: bool = False) -> dict[str, Any]:
    raw = line.encode()
    frags = [{"LineOffset": o, "Offset": o, "MatchLength": 3, "SymbolInfo": None} for o in offsets]
    return {
        "Line": base64.b64encode(raw + b"\n").decode(),
        "LineNumber": number,
        "Before": None,
        "After": None,
        "FileName": name,
        "LineFragments": frags,
    }


class TestAsk:
    """What the adapter sends to zoekt."""

    async def test_fixture_request_shape(self, request_fixture: dict[str, Any], response: dict[str, Any]) -> None:
        """The recorded request is what goes out for the recorded query."""
        async with FakeServer(json_reply(response)) as server:
            q = query(case_sensitive=True, context_lines=1, max_files=50, deadline=time.monotonic() + 11.0)
            await search(server, q, repos=REPO_RE)
        sent = server.requests[0]
        body = sent.json()
        assert (sent.method, sent.path) == ("POST", "/api/search")
        assert body.keys() == request_fixture.keys()
        assert body["Q"] == request_fixture["Q"]
        assert body["RepoIDs"] is None
        opts, recorded = body["Opts"], request_fixture["Opts"]
        assert opts.keys() == recorded.keys()
        assert {k: opts[k] for k in ("NumContextLines", "MaxDocDisplayCount", "MaxMatchDisplayCount")} == {
            k: recorded[k] for k in ("NumContextLines", "MaxDocDisplayCount", "MaxMatchDisplayCount")
        }
        assert opts["ChunkMatches"] is False

    async def test_wall_time_inside_the_deadline(self, response: dict[str, Any]) -> None:
        """MaxWallTime (nanoseconds) is positive and inside the remaining deadline."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, query(deadline=time.monotonic() + 2.0))
        wall = server.requests[0].json()["Opts"]["MaxWallTime"]
        assert 0 < wall <= 2_000_000_000

    async def test_page_size_asks_for_enough_files(self, response: dict[str, Any]) -> None:
        """MaxDocDisplayCount follows the page's max_files."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, query(max_files=120))
        assert server.requests[0].json()["Opts"]["MaxDocDisplayCount"] == 120

    @pytest.mark.parametrize("text", ['a.b(c) "d" -e\\f', "x or y", "-lead", "file:x.go", "[a]+{2}|^$ tab\there"])
    async def test_exact_mode_escapes(self, text: str, response: dict[str, Any]) -> None:
        """An exact pattern reaches zoekt as one token, a regex matching exactly the text."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, query(text, mode="exact"))
        tokens = zoekt_tokens(server.requests[0].json()["Q"])
        assert tokens[0] == "case:yes"
        assert len(tokens) == 2
        regex = re2.compile(tokens[1])
        assert regex.search(f"<<{text}>>").group() == text
        assert regex.search(text.replace(text[0], "Z", 1) if len(text) > 1 else "Z") is None

    async def test_regex_mode_keeps_the_pattern(self, response: dict[str, Any]) -> None:
        """A regex pattern reaches zoekt unchanged (quoted where it needs to be)."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, query(r"func \w+\(ctx", mode="regex", case_sensitive=False))
        assert zoekt_tokens(server.requests[0].json()["Q"]) == ["case:no", r"func \w+\(ctx"]

    async def test_globs_and_languages_become_file_filters(self, response: dict[str, Any]) -> None:
        """Include, language and exclude globs become file:, file: and -file: regexes."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, query(paths=("src/**", "!**/test_*"), languages=("python",)))
        tokens = zoekt_tokens(server.requests[0].json()["Q"])
        include, language, exclude = (re2.compile(t.split(":", 1)[1]) for t in tokens[1:4])
        assert [t.split(":", 1)[0] for t in tokens[1:4]] == ["file", "file", "-file"]
        assert include.search("src/a/b.go") and not include.search("lib/src.go")
        assert language.search("x/y.py") and not language.search("x/y.go")
        assert exclude.search("a/test_b.py") and not exclude.search("a/b.py")

    async def test_repos_setting_becomes_repo_filter(self, response: dict[str, Any]) -> None:
        """The namespace's repos regex is the first term."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, repos="^github\\.com/(acme|umbrella) corp/")
        assert zoekt_tokens(server.requests[0].json()["Q"])[0] == "repo:^github\\.com/(acme|umbrella) corp/"

    async def test_first_replica_is_asked(self, response: dict[str, Any]) -> None:
        """Of several replicas the first one gets the query."""
        async with FakeServer(json_reply(response)) as server:
            await search(server, urls=[server.url, "http://127.0.0.1:9"])
        assert len(server.requests) == 1

    def test_settings_need_an_http_url(self) -> None:
        """A namespace without an http(s) URL is a config error."""
        with pytest.raises(pydantic.ValidationError):
            ZoektSettings(urls=[])
        with pytest.raises(pydantic.ValidationError):
            ZoektSettings(urls=["ftp://zoekt"])


class TestRead:
    """How zoekt's answer becomes hits."""

    async def test_fixture_round_trip(self, response: dict[str, Any]) -> None:
        """The recorded answer gives both files, scored first, with 1-based lines and character columns."""
        async with FakeServer(json_reply(response)) as server:
            result = await search(server, query(context_lines=1))
        assert result.status == "ok"
        assert [f.path for f in result.files] == [f"{REPO}/src/widgets/registry.py", f"{REPO}/tests/test_registry.py"]
        first, second = result.files
        assert [(h.line, h.column) for h in first.hits] == [(6, 5), (12, 55)]
        assert [(h.line, h.column) for h in second.hits] == [(1, 30), (5, 5)]
        assert first.hits[0].text == "def register_widget(name, factory):"
        assert first.hits[0].before == ("",)
        assert first.hits[0].after == ('    """Register a widget factory under ``name``."""',)
        assert first.hits[1].before == ("def lookup_widget(name):",)
        assert first.hits[1].after == ()

    async def test_non_ascii_before_the_match_counts_characters(self) -> None:
        """Byte offsets after multi-byte characters become character columns."""
        payload = one_file(line_match("日本語 é x = abc", 3, len("日本語 é x = ".encode())))
        async with FakeServer(json_reply(payload)) as server:
            result = await search(server, query("abc"))
        assert result.files[0].hits[0].column == len("日本語 é x = ") + 1

    async def test_files_in_score_order(self, response: dict[str, Any]) -> None:
        """Files are ranked by zoekt's Score, not by the order they arrived in."""
        reordered = copy.deepcopy(response)
        files = reordered["Result"]["Files"]
        files.reverse()
        async with FakeServer(json_reply(reordered)) as server:
            result = await search(server)
        assert [f.path.rsplit("/", 1)[1] for f in result.files] == ["registry.py", "test_registry.py"]

    async def test_several_matches_on_one_line_are_one_hit(self) -> None:
        """Two fragments on one line give one hit, its column at the first."""
        payload = one_file(line_match("abc abc", 4, 4, 0))
        async with FakeServer(json_reply(payload)) as server:
            result = await search(server, query("abc"))
        assert [(h.line, h.column) for h in result.files[0].hits] == [(4, 1)]

    async def test_chunk_matches_read_like_line_matches(self, fixtures_dir: Path, response: dict[str, Any]) -> None:
        """A chunk-mode answer gives the same lines, columns and texts."""
        chunks = json.loads((fixtures_dir / "zoekt_search_response_chunks.json").read_text())
        async with FakeServer(json_reply(chunks), json_reply(response)) as server:
            from_chunks = await search(server)
            from_lines = await search(server)
        assert from_chunks.files == from_lines.files

    async def test_context_lines_only_when_asked(self, response: dict[str, Any]) -> None:
        """With context_lines=0 hits carry no context even if zoekt sent some."""
        async with FakeServer(json_reply(response)) as server:
            result = await search(server, query(context_lines=0))
        assert all(h.before == () and h.after == () for f in result.files for h in f.hits)

    async def test_paths_filtered_locally_too(self, response: dict[str, Any]) -> None:
        """A file outside the path globs is dropped even if zoekt returned it."""
        async with FakeServer(json_reply(response)) as server:
            result = await search(server, query(paths=("!tests/**",)))
        assert [f.path for f in result.files] == [f"{REPO}/src/widgets/registry.py"]

    async def test_file_name_match_is_a_file_hit(self) -> None:
        """A file matched only by its name gets one hit of kind file."""
        payload = one_file(line_match("src/abc.py", 0, 4, name=True), name="src/abc.py")
        async with FakeServer(json_reply(payload)) as server:
            result = await search(server, query("abc"))
        (hit,) = result.files[0].hits
        assert (hit.kind, hit.line, hit.column, hit.text) == ("file", 1, 5, "src/abc.py")

    async def test_empty_answer(self) -> None:
        """No files (``null``) is an ok, empty result."""
        async with FakeServer(json_reply({"Result": {"FileCount": 0, "MatchCount": 0, "Files": None}})) as server:
            result = await search(server)
        assert (result.status, result.files) == ("ok", ())


class TestCapped:
    """Zoekt's partial answers are reported as capped."""

    @pytest.mark.parametrize(
        ("stats", "words"),
        [
            ({"FilesSkipped": 3}, "stopped early in 3 files"),
            ({"ShardsSkipped": 2}, "skipped 2 shards"),
            ({"Crashes": 1}, "1 zoekt shards crashed"),
            ({"FileCount": 40}, "matched 40 files and sent 2"),
            ({"MatchCount": 90}, "sent 4 of 90 matches"),
        ],
    )
    async def test_truncation_signal_caps(self, response: dict[str, Any], stats: dict[str, int], words: str) -> None:
        """Each of zoekt's truncation signals gives status capped with a reason."""
        capped = copy.deepcopy(response)
        capped["Result"].update(stats)
        async with FakeServer(json_reply(capped)) as server:
            result = await search(server)
        assert result.status == "capped"
        assert words in result.reason
        assert len(result.files) == 2
        assert result.file_count == max(2, stats.get("FileCount", 2))

    async def test_complete_answer_is_ok(self, response: dict[str, Any]) -> None:
        """The recorded, complete answer is not capped."""
        async with FakeServer(json_reply(response)) as server:
            result = await search(server)
        assert (result.status, result.reason, result.file_count) == ("ok", "", None)


class TestFail:
    """Failures become gateway errors, once, at the edge."""

    async def test_bad_query_names_zoekt_reason(self) -> None:
        """400 with zoekt's Error message says what zoekt disliked."""
        reply = json_reply({"Error": "query: unknown case argument"}, status=400)
        async with FakeServer(reply) as server:
            with pytest.raises(BackendError, match="unknown case argument"):
                await search(server)

    async def test_wrong_shape(self) -> None:
        """JSON of the wrong shape is a BackendError."""
        async with FakeServer(json_reply(["not", "a", "result"]), json_reply({"Result": []})) as server:
            for _ in range(2):
                with pytest.raises(BackendError, match="shape"):
                    await search(server)


class TestDefinition:
    """Whether a lazily kept Zoekt file defines the name is what ranking's test would find on its decoded hits."""

    @settings(max_examples=200, deadline=None)
    @given(
        lines=st.lists(
            st.tuples(
                st.integers(1, 30),
                st.sampled_from(
                    [
                        "def register_widget(name):",
                        "    return register_widget(x)",
                        "class register_widget:",
                        "x = 'def register_widget'",
                        "déf register_widget",
                        "def register_widget" + "(" * 300,
                        "   " + "y" * 260 + " def register_widget",
                        "async def Register_Widget():\r\n",
                        "def Foo.register_widget(x):",
                        "\tpub fn register_widget<T>() {} // register_widget",
                        "register_widget register_widget",
                    ]
                ),
                st.one_of(st.none(), st.integers(0, 8)),
                st.booleans(),
            ),
            min_size=1,
            max_size=24,
            unique_by=lambda line: line[0],  # Zoekt sends one LineMatch a line (decoding keeps one of a number)
        ),
        sensitive=st.booleans(),
    )
    def test_lazy_equals_decoded(self, lines: list[tuple[int, str, int | None, bool]], sensitive: bool) -> None:
        """definition() of the undecoded matches equals defines() over the hits they decode to."""
        from adapters.zoekt.read import File, Fragment, LineMatch, _definitions, _lazy_file
        from gateway.signals import defines, definition_test

        matches = [
            LineMatch(
                Line=base64.b64encode(text.encode()).decode(),
                LineNumber=number,
                FileName=name,
                LineFragments=[Fragment(LineOffset=offset)] if offset is not None else None,
            )
            for number, text, offset, name in lines
        ]
        test = definition_test("register_widget", "exact", sensitive)
        assert test is not None
        if all(m.FileName for m in matches):
            return
        groups = [matches, matches[::-1], matches[: len(matches) // 2 or 1]]  # one pass over several files
        said = _definitions(groups, test)
        for group, word in zip(groups, said, strict=True):
            if all(m.FileName for m in group):
                continue
            lazy = _lazy_file(File(FileName="a.py", Repository="r"), group, 0, None)
            assert word == defines(FileMatch(path=lazy.path, hits=tuple(lazy.hits)), test), group

    def test_symbols_seen_in_the_raw_answer(self) -> None:
        """An answer naming a SymbolInfo that is not null may hold symbols; one with only nulls holds none."""
        from adapters.zoekt.read import has_symbols

        assert not has_symbols(b'{"LineFragments": [{"SymbolInfo": null}, {"SymbolInfo":null}]}')
        assert has_symbols(b'{"LineFragments": [{"SymbolInfo": {"Sym": "register_widget"}}]}')
        assert has_symbols(b'[{"SymbolInfo":[{"Sym":"x"}]}]')
