"""Answers sized for their reader (issue 36): a character budget beside the hit budget, a declaration's
lines cut past ``hit_lines`` and counted, a person's surfaces asking for the files, files read in slices."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import Config, DefaultsConfig, ServerConfig, discover
from gateway.http.app import create_app
from gateway.mcp.tools import build_server
from gateway.models import FileMatch, Hit, gathered
from gateway.query.request import parse_request
from gateway.rank import reads_as_question
from gateway.service import READ_LINES, SearchService
from gateway.sizing import DEFAULT_CHAR_BUDGET, PERSON, file_chars
from gateway.wire import build_response
from tests.corpus import make_corpus
from tests.helpers import held_client

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]

#: A module of 60 methods, each using ``self`` on its def line and 5 more: 360 matched lines in 60 declarations.
BIG = "class Big:\n" + "".join(
    f"    def m{n}(self):\n" + "".join(f"        self.value_{n}_{k} = self.other_{k}\n" for k in range(5))
    for n in range(60)
)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(
        tmp_path / "src",
        {
            "repo": {
                "big.py": BIG,
                "big2.py": BIG,
                "big3.py": BIG,
                **{f"small{n}.py": f"def f{n}(self):\n    return self\n" for n in range(30)},
                "long.txt": "".join(f"line {n}\n" for n in range(1, 1001)),
                "wide.txt": "".join("x" * 399 + "\n" for _ in range(300)),
            }
        },
    )


@pytest.fixture
async def service(corpus: Path) -> Any:
    config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(corpus))
    service = SearchService(config)
    yield service
    await service.aclose()


@pytest.fixture
async def client(aiohttp_client: MakeClient, corpus: Path) -> Client:
    config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(corpus))
    return await aiohttp_client(create_app(config))


def _chars(answer: dict[str, Any]) -> int:
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


#: Control characters aside: JSON writes each as six (``\u001f``), which the estimate does not count.
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=80)
_LINE = st.builds(lambda n, t: Hit(line=n, text=t, column=1), st.integers(1, 9999), _TEXT)


def _declaration(lines: list[Hit], name: str, intent: str) -> Hit:
    first = min((h.line for h in lines), default=1)
    return Hit(
        line=first,
        end_line=first + 50,
        text="",
        kind="function",
        symbol=f"Outer.{name}",
        name=name,
        intent=intent,
        lines=tuple(sorted(lines, key=lambda h: h.line)),
    )


_DECLARATION = st.builds(
    _declaration, st.lists(_LINE, min_size=1, max_size=8), st.from_regex(r"[a-z_]{1,20}", fullmatch=True), _TEXT
)


class TestEstimate:
    @settings(max_examples=150, deadline=None)
    @given(
        hits=st.lists(st.one_of(_LINE, _DECLARATION), min_size=1, max_size=30),
        path=st.from_regex(r"[a-z]{1,12}(/[a-z_]{1,12}){0,4}\.py", fullmatch=True),
        lines=st.one_of(st.none(), st.integers(0, 4)),
        bare=st.booleans(),
    )
    def test_a_file_is_estimated_within_a_fifth_of_its_json(
        self, hits: list[Hit], path: str, lines: int | None, bare: bool
    ) -> None:
        """What paging counts for a file (its hits gathered, bare or not) is within 20 % of the characters
        the wire then writes for it."""
        ordered = sorted(hits, key=lambda h: h.line)
        file = gathered(FileMatch(path=path, hits=tuple(ordered)))
        request = parse_request({"query": "x", "hit_lines": lines, "char_budget": 10_000_000, "hit_budget": 5000})
        from gateway.rank import Ranked, RankedFile

        ranked = Ranked(
            page=[RankedFile("ns", file, 1.0)],
            file_count=1,
            weak_filtered=0,
            truncated=False,
            next=[],
            note=None,
            statuses=[],
            offset=0,
            hit_lines=lines,
            bare=bare,
        )
        real = _chars(build_response(request, ranked, 0)["files"][0])
        estimate = file_chars(file, "ns", lines, bare=bare)
        assert abs(estimate - real) <= 0.2 * real, (estimate, real)


class TestPage:
    async def test_a_big_first_file_lists_fewer_lines_but_every_declaration(self, service: SearchService) -> None:
        """A first file whose declarations would pass the character budget listing three lines each lists
        fewer (limits say how many), keeps all 60 declarations, counts every line, and fits."""
        answer = await service.search(parse_request({"query": "self", "paths": ["big.py"], "char_budget": 15_000}))
        (group,) = answer["files"]
        listed = answer["limits"]["hit_lines"]
        assert group["hit_count"] == 60 == len(group["hits"])
        assert listed is not None and listed < 3 and answer["limits"]["char_budget"] == 15_000
        methods = [h for h in group["hits"] if h["kind"] == "method"]
        assert all(h["line_count"] == 6 and len(h.get("lines", [])) == min(6, listed) for h in methods)
        assert _chars(answer) <= 15_000 * 1.2

    async def test_a_first_file_that_cannot_fit_leaves_its_hits_bare_and_says_how_to_get_the_rest(
        self, service: SearchService
    ) -> None:
        """Past the budget with no lines listed, every hit is still there without the file_path and namespace
        its group says; note says so, and next's search (verbatim) gets that file alone with its lines."""
        request = parse_request({"query": "self", "paths": ["big.py"], "char_budget": 1000})
        answer = await service.search(request)
        (group,) = answer["files"]
        assert group["hit_count"] == 60 == len(group["hits"]) and answer["limits"]["hit_lines"] == 0
        assert all("file_path" not in h and "namespace" not in h and "lines" not in h for h in group["hits"])
        assert answer["truncated"] and "big.py alone passes char_budget 1000" in answer["note"]
        (action,) = [a for a in answer["next"] if a["reason"].startswith("the lines of")]
        assert action["args"]["paths"] == ["/big.py"] and action["args"]["namespaces"] == [group["namespace"]]
        whole = await service.search(parse_request(action["args"]))
        (again,) = whole["files"]
        assert whole["limits"]["hit_lines"] == 3 and again["file_path"] == "big.py" and again["hit_count"] == 60
        assert all(
            h["file_path"] == "big.py" and len(h.get("lines", ())) == min(3, h["line_count"]) for h in again["hits"]
        )

    async def test_a_person_sees_the_files_asked_for(self, service: SearchService) -> None:
        """With a person's budgets, the page holds the 20 files asked for; an agent's answer stays within its
        characters, whole files, in the same order."""
        person = await service.search(parse_request({"query": "self", **PERSON}))
        agent = await service.search(parse_request({"query": "self"}))
        assert len(person["files"]) == 20
        assert 1 <= len(agent["files"]) < 20 and _chars(agent) <= DEFAULT_CHAR_BUDGET * 1.2
        assert [g["file_path"] for g in agent["files"]] == [g["file_path"] for g in person["files"]][
            : len(agent["files"])
        ]
        assert all(g["hit_count"] == len(g["hits"]) for g in agent["files"])

    async def test_every_line_when_asked(self, service: SearchService) -> None:
        """hit_lines null lists every matched line, as the CLI's rg-like output asks."""
        answer = await service.search(
            parse_request({"query": "self", "paths": ["big.py"], "hit_lines": None, "char_budget": 10_000_000})
        )
        (group,) = answer["files"]
        assert answer["limits"]["hit_lines"] is None
        assert sum(len(h.get("lines", [])) for h in group["hits"]) == 360  # 60 x (1 + 5)

    async def test_an_exact_question_with_no_match_suggests_meaning(self, service: SearchService) -> None:
        answer = await service.search(parse_request({"query": "how do I sanitize the uploaded file name"}))
        assert answer["files"] == [] and "mode semantic" in answer["note"]
        answer = await service.search(parse_request({"query": "zzz_not_here"}))
        assert "semantic" not in answer["note"]

    @pytest.mark.parametrize(
        ("pattern", "question"),
        [
            ("where is the config loaded?", True),
            ("sanitize the name of an upload", True),
            ("def get_", False),
            ("raise ValueError", False),
            ("std::vector<int> x", False),
        ],
    )
    def test_what_reads_as_a_question(self, pattern: str, question: bool) -> None:
        assert reads_as_question(pattern) is question


class TestHttp:
    async def test_a_browser_gets_a_persons_budgets(self, client: Client) -> None:
        """A GET asking for HTML (a browser's address bar) is a person's page; a script's GET is the API's."""
        browser = await (await client.get("/v1/search?q=self", headers={"Accept": "text/html,*/*"})).json()
        script = await (await client.get("/v1/search?q=self", headers={"Accept": "application/json"})).json()
        assert browser["limits"]["hit_budget"] == PERSON["hit_budget"] and len(browser["files"]) == 20
        assert script["limits"]["hit_budget"] == 100 and script["limits"]["char_budget"] == DEFAULT_CHAR_BUDGET
        given = await (await client.get("/v1/search?q=self&hit_lines=all&char_budget=2000000")).json()
        assert (given["limits"]["hit_lines"], given["limits"]["char_budget"]) == (None, 2_000_000)

    async def test_a_file_is_read_in_slices(self, client: Client) -> None:
        """A read is a slice (400 lines) saying where the next starts, whatever range is asked."""
        resp = await client.get("/v1/files/repo/long.txt")
        assert resp.status == 200 and len((await resp.text()).splitlines()) == READ_LINES
        assert (resp.headers["X-End-Line"], resp.headers["X-Next-Start-Line"]) == ("400", "401")
        last = await client.get("/v1/files/repo/long.txt?start_line=801")
        assert len((await last.text()).splitlines()) == 200 and "X-Next-Start-Line" not in last.headers
        ranged = await client.get("/v1/files/repo/long.txt?start_line=1&end_line=1000")
        assert len((await ranged.text()).splitlines()) == READ_LINES and ranged.headers["X-Next-Start-Line"] == "401"
        short = await client.get("/v1/files/repo/long.txt?start_line=1&end_line=10")
        assert len((await short.text()).splitlines()) == 10 and "X-Next-Start-Line" not in short.headers

    async def test_a_slice_stops_at_its_characters(self, client: Client) -> None:
        """Lines of 400 characters: a slice stops at about 40,000 characters (98 lines, each counted with what
        its JSON string or numbered line adds), not 400 lines."""
        resp = await client.get("/v1/files/repo/wide.txt")
        assert len((await resp.text()).splitlines()) == 98 and resp.headers["X-Next-Start-Line"] == "99"

    async def test_a_start_past_the_end_is_a_400_naming_start_line(self, client: Client) -> None:
        resp = await client.get("/v1/files/repo/long.txt?start_line=5000")
        assert resp.status == 400 and resp.content_type == "application/problem+json"
        problem = await resp.json()
        assert problem["field"] == "start_line" and "1000 lines" in problem["detail"]


def test_the_cli_names_every_listing() -> None:
    """The CLI's list of listings (kept without importing them) is the listing module's."""
    from gateway.cli.listing import KINDS
    from gateway.cli.search import _LISTINGS

    assert set(_LISTINGS) == set(KINDS)


class TestErrorsThatHelp:
    """Issue 37's edges: an error names what would have worked."""

    @pytest.mark.parametrize(
        ("data", "field", "said"),
        [
            ({"query": "x", "namespace": ["repo"]}, "namespace", "did you mean 'namespaces'?"),
            ({"query": "x", "fiels": 3}, "fiels", "did you mean 'files'?"),
            ({"query": "x", "zzzzzz": 1}, "zzzzzz", "unknown field"),
            ({"query": "lang:klingon x"}, "query", "one of c, cpp,"),
        ],
    )
    async def test_bad_input_says_what_would_work(
        self, client: Client, data: dict[str, Any], field: str, said: str
    ) -> None:
        resp = await client.post("/v1/search", json=data)
        problem = await resp.json()
        assert resp.status == 400 and problem["field"] == field and said in problem["detail"]
        assert "did you mean" not in problem["detail"] or field != "zzzzzz"

    async def test_an_unknown_namespace_lists_the_visible_ones(self, client: Client) -> None:
        problem = await (await client.post("/v1/search", json={"query": "x", "namespaces": ["nope"]})).json()
        assert problem["detail"] == "no namespace matches 'nope'; namespaces: repo"
        problem = await (await client.post("/v1/search", json={"query": "repo:nope x"})).json()
        assert problem["field"] == "query" and problem["detail"].endswith("(repo:nope); namespaces: repo")

    async def test_a_file_of_an_unknown_namespace_says_so(self, client: Client) -> None:
        resp = await client.get("/v1/files/nope/x.py")
        assert resp.status == 404 and (await resp.json())["detail"] == "no such namespace: 'nope'"


def test_twenty_namespaces_at_most_are_named() -> None:
    from gateway.errors import UnknownNamespace

    error = UnknownNamespace("x", [f"ns{n}" for n in range(25)])
    assert error.message.endswith("ns18, ns19 and 5 more") and "ns20" not in error.message


class TestMcpChannels:
    """SPEC §4: a client hands its model ONE channel, so each (the text, the structured content as compact
    JSON) stays within about 1.1 x char_budget at defaults, for any query."""

    @pytest.mark.parametrize("query", ["self", "e", "a", "_", "(", "value", "def m", "return self"])
    async def test_each_channel_within_the_budget(self, service: SearchService, query: str) -> None:
        """At defaults every channel holds at most 44,000 characters; at a budget of 5,000 at most 5,500, or
        the note says which file alone passed it and next holds the search that gets its lines."""
        async for mcp in held_client(build_server(service)):
            for budget in (None, 5000):
                args = {"query": query} if budget is None else {"query": query, "char_budget": budget}
                result = await mcp.call_tool("search", args)
                structured = result.structured_content
                assert structured is not None and not result.is_error
                (content,) = result.content
                assert content.type == "text"
                largest = max(len(content.text), _chars(structured))
                limit = 1.1 * (budget or DEFAULT_CHAR_BUDGET)
                if budget is None:
                    assert largest <= limit, (query, largest)
                elif largest > limit:
                    assert "alone passes char_budget" in structured["note"], (query, largest)
                    assert any(a["reason"].startswith("the lines of") for a in structured["next"])
