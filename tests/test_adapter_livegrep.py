"""The livegrep adapter, against a fake livegrep web server serving the recorded search payload."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
import re2

from adapters.livegrep import LivegrepBackend, LivegrepSettings
from gateway.errors import BackendError
from gateway.models import BackendResult, SearchQuery
from tests.fakeservers import (
    FakeServer,
    json_reply,
    text_reply,
)

TREE = "acme/widget-service"
KNOWN_TAGS = {"file", "-file", "path", "-path", "repo", "-repo", "tags", "-tags", "case", "lit", "max_matches"}


@pytest.fixture
def recorded(fixtures_dir: Path) -> Any:
    return json.loads((fixtures_dir / "livegrep_search.json").read_text())


@pytest.fixture
def response(recorded: dict[str, Any]) -> dict[str, Any]:
    return dict(recorded["response"]["body"])


def sniffed(obj: Any, status: int = 200) -> Any:
    """A JSON body as livegrep sends it: no Content-Type of its own, so Go sniffs text/plain."""
    return text_reply(json.dumps(obj), status=status)


def query(text: str = "register_widget", **kw: Any) -> SearchQuery:
    return SearchQuery(text=text, **kw)


async def search(server: FakeServer, q: SearchQuery | None = None, **settings: Any) -> BackendResult:
    settings.setdefault("url", server.url)
    settings.setdefault("index", "livegrep")
    async with LivegrepBackend("livegrep", LivegrepSettings(**settings)) as backend:
        return await backend.search(q or query())


def parse_query(q: str) -> dict[str, str]:
    """livegrep's ``ParseQuery`` (server/query.go), operators and the bare regex (key "")."""
    ops: dict[str, str] = {}
    key = ""
    q = q.strip()
    while q:
        m = re2.search(r"\(|(?:^([a-zA-Z0-9-_]+):|\\.)| ", q)
        if m is None:
            ops[key] = ops.get(key, "") + q
            break
        ops[key] = ops.get(key, "") + q[: m.start()]
        match, q = m.group(), q[m.end() :]
        if match == " ":
            if key == "":
                ops[key] = ops.get(key, "") + " "
            key = ""
        elif match == "(":
            depth, i, escaped = 1, 0, False
            while i < len(q) and depth:
                c = q[i]
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                else:
                    depth += {"(": 1, ")": -1}.get(c, 0)
                i += 1
            ops[key] = ops.get(key, "") + match + q[:i]
            q = q[i:]
        elif match.startswith("\\"):
            ops[key] = ops.get(key, "") + match
        elif key == "" and m.group(1) in KNOWN_TAGS:
            key = m.group(1)
        else:
            ops[key] = ops.get(key, "") + match
    return {k: v.strip() for k, v in ops.items()}


class TestAsk:
    """What the adapter sends to livegrep."""

    async def test_fixture_request_shape(self, recorded: dict[str, Any], response: dict[str, Any]) -> None:
        """The recorded request's path, parameters and query terms are what goes out."""
        async with FakeServer(sniffed(response)) as server:
            q = query(mode="regex", languages=("python",), max_files=5)
            await search(server, q, repos=TREE)
        sent, expected = server.requests[0], recorded["request"]
        assert (sent.method, sent.path) == (expected["method"], "/api/v1/search/livegrep")
        assert sent.query.keys() == expected["query"].keys()
        assert sent.query["regex"] == expected["query"]["regex"]
        got, want = parse_query(sent.query["q"]), parse_query(expected["query"]["q"])
        assert got.keys() == want.keys()
        assert {k: got[k] for k in ("", "repo", "max_matches")} == {k: want[k] for k in ("", "repo", "max_matches")}
        assert re2.search(got["file"], "src/widgets/registry.py") and not re2.search(got["file"], "a.go")

    @pytest.mark.parametrize(
        "text",
        [
            "a.b(c) [d]* {2}",
            " lead and trail ",
            "see file:x.go",
            "-repo:y",
            "x (unbalanced",
            "tab\there",
            "back\\slash",
        ],
    )
    async def test_exact_mode_escapes(self, text: str, response: dict[str, Any]) -> None:
        """An exact pattern survives livegrep's query parser as a regex matching exactly the text."""
        async with FakeServer(sniffed(response)) as server:
            await search(server, query(text, mode="exact"), repos=TREE)
        ops = parse_query(server.requests[0].query["q"])
        assert ops["repo"] == TREE
        assert set(ops) == {"", "repo", "max_matches"}
        regex = re2.compile(ops[""])
        assert regex.search(f"<<{text}>>").group() == text
        assert regex.search(text[1:]) is None

    @pytest.mark.parametrize("regex", [r"[(]open", r"\bfile:\s+(\w+)", r"(?i:Foo) bar"])
    async def test_regex_mode_survives_the_parser(self, regex: str, response: dict[str, Any]) -> None:
        """A regex with parentheses, operator-like words or spaces reaches RE2 meaning the same."""
        async with FakeServer(sniffed(response)) as server:
            await search(server, query(regex, mode="regex", paths=("src/**",)))
        ops = parse_query(server.requests[0].query["q"])
        assert set(ops) == {"", "file", "max_matches"}
        sample = "x (open file:  name Foo bar"
        assert re2.search(ops[""], sample).group() == re2.search(regex, sample).group()

    async def test_case_choice_in_fold_case(self, response: dict[str, Any]) -> None:
        """fold_case carries the resolved case choice."""
        async with FakeServer(sniffed(response)) as server:
            await search(server, query(case_sensitive=True))
            await search(server, query(case_sensitive=False))
        assert [r.query["fold_case"] for r in server.requests] == ["false", "true"]

    async def test_globs_become_file_operators(self, response: dict[str, Any]) -> None:
        """Include globs become file:, exclude globs -file:."""
        async with FakeServer(sniffed(response)) as server:
            await search(server, query(paths=("src/**", "!**/test_*")))
        ops = parse_query(server.requests[0].query["q"])
        assert re2.search(ops["file"], "src/a/b.go") and not re2.search(ops["file"], "lib/src.go")
        assert re2.search(ops["-file"], "a/test_b.py") and not re2.search(ops["-file"], "a/b.py")

    async def test_max_matches_grows_with_the_page(self, response: dict[str, Any]) -> None:
        """max_matches asks for enough lines for the page."""
        async with FakeServer(sniffed(response)) as server:
            await search(server, query(max_files=40))
        assert parse_query(server.requests[0].query["q"])["max_matches"] == "400"

    def test_settings_need_an_http_url(self) -> None:
        """A namespace without an http(s) URL is a config error."""
        with pytest.raises(pydantic.ValidationError):
            LivegrepSettings(index="livegrep")


class TestRead:
    """How livegrep's answer becomes hits."""

    async def test_fixture_round_trip(self, response: dict[str, Any]) -> None:
        """The recorded answer gives both files with 1-based lines, character columns and context in file order."""
        async with FakeServer(sniffed(response)) as server:
            result = await search(server, query(context_lines=3))
        assert result.status == "ok"
        assert [f.path for f in result.files] == [f"{TREE}/src/widgets/registry.py", f"{TREE}/tests/test_registry.py"]
        first, second = result.files
        assert [(h.line, h.column) for h in first.hits] == [(6, 5), (12, 55)]
        assert [(h.line, h.column) for h in second.hits] == [(1, 30), (5, 5)]
        assert first.hits[0].before == ("DEFAULT_TIMEOUT = 30", "", "")
        assert first.hits[1].before == ("", "", "def lookup_widget(name):")
        assert second.hits[0].after == ("", "", "def test_register():")

    async def test_context_cut_to_the_query(self, response: dict[str, Any]) -> None:
        """Only context_lines of livegrep's context are kept, nearest the hit."""
        async with FakeServer(sniffed(response)) as server:
            result = await search(server, query(context_lines=1))
        hit = result.files[0].hits[1]
        assert (hit.before, hit.after) == (("def lookup_widget(name):",), ())

    async def test_non_ascii_before_the_match_counts_characters(self) -> None:
        """Bounds count code points, and become 1-based character columns."""
        line = "日本語 é = abc"
        start = line.index("abc")
        result_line = {
            "tree": "t",
            "version": "v",
            "path": "a.py",
            "lno": 3,
            "context_before": [],
            "context_after": [],
            "bounds": [start, start + 3],
            "line": line,
        }
        payload = {"info": {"why": "NONE"}, "results": [result_line], "file_results": [], "search_type": "normal"}
        async with FakeServer(sniffed(payload)) as server:
            result = await search(server, query("abc"))
        (hit,) = result.files[0].hits
        assert hit.column is not None
        assert (hit.column, hit.text[hit.column - 1 :]) == (start + 1, "abc")

    async def test_file_results_are_file_hits(self, response: dict[str, Any]) -> None:
        """Path-only matches become one hit of kind file, after the content matches."""
        payload = copy.deepcopy(response)
        payload["file_results"] = [{"tree": TREE, "version": "v", "path": "src/register_widget.py", "bounds": [4, 19]}]
        async with FakeServer(sniffed(payload)) as server:
            result = await search(server)
        last = result.files[-1]
        assert (last.path, last.hits[0].kind, last.hits[0].column) == (f"{TREE}/src/register_widget.py", "file", 5)

    async def test_paths_filtered_locally_too(self, response: dict[str, Any]) -> None:
        """Globs livegrep could not take (language and path together) are applied here."""
        async with FakeServer(sniffed(response)) as server:
            result = await search(server, query(paths=("tests/**",), languages=("python",)))
        assert [f.path for f in result.files] == [f"{TREE}/tests/test_registry.py"]

    async def test_json_content_type_accepted(self, response: dict[str, Any]) -> None:
        """A livegrep behind a proxy that labels the body application/json reads the same."""
        async with FakeServer(json_reply(response), sniffed(response)) as server:
            labelled = await search(server)
            plain = await search(server)
        assert labelled == plain


class TestCapped:
    """livegrep's partial answers are reported as capped."""

    @pytest.mark.parametrize(("why", "words"), [("MATCH_LIMIT", "stopped at 200"), ("TIMEOUT", "timed out")])
    async def test_exit_reason_caps(self, response: dict[str, Any], why: str, words: str) -> None:
        """info.why other than NONE caps the result with a reason."""
        capped = copy.deepcopy(response)
        capped["info"]["why"] = why
        async with FakeServer(sniffed(capped)) as server:
            result = await search(server)
        assert result.status == "capped" and words in result.reason
        assert len(result.files) == 2

    async def test_complete_answer_is_ok(self, response: dict[str, Any]) -> None:
        """The recorded, complete answer is not capped."""
        async with FakeServer(sniffed(response)) as server:
            result = await search(server)
        assert (result.status, result.reason) == ("ok", "")


class TestFail:
    """Failures become gateway errors, once, at the edge."""

    async def test_bad_query_names_livegrep_reason(self, recorded: dict[str, Any]) -> None:
        """A 400 carries livegrep's own message."""
        async with FakeServer(sniffed(recorded["error_examples"][1]["body"], status=400)) as server:
            with pytest.raises(BackendError, match="livegrep rejected the query: Parse error"):
                await search(server)

    async def test_wrong_shape(self) -> None:
        """JSON of the wrong shape is a BackendError."""
        async with FakeServer(sniffed([1]), sniffed({"results": [{"path": 1}]})) as server:
            for _ in range(2):
                with pytest.raises(BackendError, match="shape"):
                    await search(server)
