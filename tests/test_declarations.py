"""Hits as declarations (SPEC §3) and ranking that knows definitions, through the real service and rg."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.peer import parse_page
from gateway.afi.search import afi_matches
from gateway.cli.render import Style, human
from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.http.app import create_app
from gateway.index import grammars, parse, resolve
from gateway.index.builder import Builder
from gateway.index.files import Source
from gateway.index.store import Store, db_name
from gateway.mcp.tools import build_server
from gateway.query.request import parse_request
from gateway.rank import EXACT, NOT
from gateway.service import SearchService
from gateway.wire import SearchResponse
from tests.corpus import make_corpus, matched_lines
from tests.helpers import held_client

#: A module of three functions, each using `needle` several times, and a module-level use.
MODULE = (
    "import os\n"  # 1
    "print(needle)\n"  # 2
    "\n"
    "def one():\n"  # 4
    "    needle()\n"
    "    needle()\n"
    "    return needle\n"  # 7
    "\n"
    "class Holder:\n"  # 9
    '    """Holds the needle."""\n'
    "    def two(self):\n"  # 11
    "        return needle + needle\n"
    "\n"
    "    def three(self):\n"  # 14
    "        def inner():\n"  # 15
    "            return needle\n"
    "        return needle\n"  # 17
)

FILES = {
    "repo": {
        "src/mod.py": MODULE,
        "src/other.py": "from mod import needle\n\n\ndef use():\n    needle()\n",
        "README.md": "needle in the docs\n",
    },
    "defs": {
        "lib/widget.py": "class Widget:\n    pass\n",
        "lib/uses.py": "".join(f"w{i} = Widget()\n" for i in range(30)),
        "tests/test_widget.py": "class TestWidget(Widget):\n    pass\n" + "Widget()\n" * 40,
    },
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src", FILES)


def _service(corpus: Path, index_dir: Path, **index: Any) -> SearchService:
    """A service over ``corpus`` with its index in ``index_dir`` and no cached answers (each search
    here must see the index as it is now)."""
    config = config_from_env(root=str(corpus), env={})
    no_answers = CacheConfig(answer_ttl_s=0)
    return SearchService(dataclasses.replace(config, index=IndexConfig(dir=str(index_dir), **index), cache=no_answers))


@pytest.fixture
async def service(corpus: Path, tmp_path: Path) -> AsyncIterator[SearchService]:
    svc = _service(corpus, tmp_path / "idx")
    try:
        yield svc
    finally:
        await svc.aclose()


async def _search(service: SearchService, **args: Any) -> dict[str, Any]:
    return await service.search(parse_request(args))


def _group(answer: dict[str, Any], path: str) -> dict[str, Any]:
    return next(g for g in answer["files"] if g["file_path"] == path)


class TestHitsAsDeclarations:
    async def test_matched_lines_are_grouped_into_their_innermost_declaration(self, service: SearchService) -> None:
        """Each declaration is one hit with its own lines; the lines outside every declaration, the file's own."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        hits = _group(answer, "src/mod.py")["hits"]
        shape = [(h["kind"], h["qualified_name"], h["start_line"], h["end_line"]) for h in hits]
        assert shape == [
            ("file", "src/mod.py", 1, 2),
            ("function", "one", 4, 7),
            ("class", "Holder", 9, 17),
            ("method", "Holder.two", 11, 12),
            ("method", "Holder.three", 14, 17),
            ("function", "Holder.three.inner", 15, 16),
        ]
        lines = {h["qualified_name"]: [x["line"] for x in h.get("lines", [])] for h in hits}
        assert lines["one"] == [5, 6, 7] and lines["Holder"] == [10] and lines["Holder.three"] == [17]
        assert lines["Holder.three.inner"] == [16]

    async def test_a_declaration_hit_carries_its_names_intent_and_lines(self, service: SearchService) -> None:
        """`name`, `qualified_name`, `intent`, `matched`, its lines and their count; no text/column of its own
        (SPEC §3: they would repeat `lines[0]`)."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        holder = next(h for h in _group(answer, "src/mod.py")["hits"] if h["qualified_name"] == "Holder")
        assert holder["name"] == "Holder" and holder["kind"] == "class"
        assert holder["intent"] == "Holds the needle."
        assert holder["matched"] == ["intent", "content"]
        assert holder["lines"][0]["text"] == '    """Holds the needle."""' and holder["line_count"] == 1
        assert "text" not in holder and "column" not in holder

    async def test_a_declaration_lists_its_first_lines_and_counts_the_rest(self, service: SearchService) -> None:
        """Past hit_lines a declaration lists its first lines only, says how many it has, and every line is
        there when asked (hit_lines null); limits say how many a hit listed."""
        cut = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"], hit_lines=1)
        whole = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"], hit_lines=None)
        one = next(h for h in _group(cut, "src/mod.py")["hits"] if h["qualified_name"] == "one")
        every = next(h for h in _group(whole, "src/mod.py")["hits"] if h["qualified_name"] == "one")
        assert [x["line"] for x in one["lines"]] == [5] and one["line_count"] == 3
        assert [x["line"] for x in every["lines"]] == [5, 6, 7] and every["line_count"] == 3
        assert (cut["limits"]["hit_lines"], whole["limits"]["hit_lines"]) == (1, None)
        assert _group(cut, "src/mod.py")["hit_count"] == _group(whole, "src/mod.py")["hit_count"]

    async def test_sym_finds_declarations_of_a_local_namespace(self, service: SearchService) -> None:
        """`sym:NAME` keeps the declarations named so, in a namespace whose hits are lines until a page is
        cut (issue 37: it found nothing): `sym:Widget` is the class and the test class, not its uses."""
        answer = await _search(service, query="sym:Widget", namespaces=["defs"])
        kept = sorted((g["file_path"], h["qualified_name"]) for g in answer["files"] for h in g["hits"])
        assert kept == [("lib/widget.py", "Widget"), ("tests/test_widget.py", "TestWidget")]
        assert all(h["kind"] == "class" for g in answer["files"] for h in g["hits"])
        assert answer["files"][0]["file_path"] == "lib/widget.py"

    async def test_sym_is_the_same_on_http_stream_and_mcp(
        self, service: SearchService, aiohttp_client: Callable[..., Awaitable[Any]]
    ) -> None:
        """`sym:` on every surface (issue 37): POST /v1/search, the SSE stream the page reads, and MCP's
        `search` keep the same declarations. The first tests of `sym:` ran over mock backends whose hits
        were declarations already; a local namespace's hits are lines until a page is cut, which only a
        real rg namespace with its declaration index shows."""
        request = {"query": "sym:Widget", "namespaces": ["defs"]}
        http = await aiohttp_client(create_app(service.config, lambda _config: service))
        answers = [await (await http.post("/v1/search", json=request)).json()]
        streamed = await (await http.get("/v1/search/stream", params={"q": "sym:Widget", "ns": "defs"})).text()
        answers.append(json.loads([ln for ln in streamed.splitlines() if ln.startswith("data: ")][-1][6:]))
        async for mcp in held_client(build_server(service)):
            answers.append((await mcp.call_tool("search", request)).structured_content)
        for answer in answers:
            kept = sorted((g["file_path"], h["qualified_name"]) for g in answer["files"] for h in g["hits"])
            assert kept == [("lib/widget.py", "Widget"), ("tests/test_widget.py", "TestWidget")]

    async def test_every_matched_line_appears_exactly_once(self, service: SearchService, corpus: Path) -> None:
        """Grouping neither loses nor repeats a line: the lines are rg's (every line listed)."""
        answer = await _search(service, query="needle", namespaces=["repo"], hit_lines=None)
        for group in answer["files"]:
            lines = matched_lines(group)
            text = (corpus / "repo" / group["file_path"]).read_text().splitlines()
            expected = [n for n, line in enumerate(text, 1) if "needle" in line]
            assert sorted(lines) == expected and len(set(lines)) == len(lines)

    async def test_hit_ids_are_stable_and_unique(self, service: SearchService) -> None:
        """The same hit has the same id on every call; ids differ within a file."""
        first = await _search(service, query="needle", namespaces=["repo"])
        second = await _search(service, query="needle", namespaces=["repo"])
        ids = [[h["id"] for h in g["hits"]] for g in first["files"]]
        assert ids == [[h["id"] for h in g["hits"]] for g in second["files"]]
        assert all(len(set(group)) == len(group) for group in ids)

    async def test_the_hit_budget_counts_declarations(self, service: SearchService) -> None:
        """A file of eleven matched lines in five declarations costs six hits, not eleven."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/*.py"], hit_budget=7)
        assert [g["file_path"] for g in answer["files"]] == ["src/mod.py"]
        assert _group(answer, "src/mod.py")["hit_count"] == 6
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/*.py"], hit_budget=8)
        assert [g["file_path"] for g in answer["files"]] == ["src/mod.py", "src/other.py"]

    async def test_a_file_without_a_grammar_has_only_its_own_hit(self, service: SearchService) -> None:
        """README.md has no grammar: its matches are the file's own hit."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["README.md"])
        assert [h["kind"] for h in _group(answer, "README.md")["hits"]] == ["file"]

    async def test_a_file_changed_since_the_search_began_has_only_its_own_hit(
        self, service: SearchService, corpus: Path
    ) -> None:
        """Its lines may not be the ones rg read: the file's own hit, never a wrong span."""
        future = time.time_ns() + 3600 * 10**9
        os.utime(corpus / "repo" / "src" / "mod.py", ns=(future, future))
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        assert {h["kind"] for h in _group(answer, "src/mod.py")["hits"]} == {"file"}

    async def test_no_time_to_parse_means_its_own_hit_now_declarations_once_indexed(
        self, corpus: Path, tmp_path: Path
    ) -> None:
        """With no parse budget a page never waits: the file's own hit, until the builder has indexed the file."""
        service = _service(corpus, tmp_path / "idx", parse_budget_ms=0)
        try:
            answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
            assert {h["kind"] for h in _group(answer, "src/mod.py")["hits"]} == {"file"}
            Builder(Store.open(str(tmp_path / "idx")), [Source("repo", str(corpus / "repo"))]).refresh()
            answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
            assert "function" in {h["kind"] for h in _group(answer, "src/mod.py")["hits"]}
        finally:
            await service.aclose()

    @pytest.mark.parametrize("allowance", [10.0, 0.0])
    async def test_loading_a_grammar_is_not_spent_from_the_parse_budget(
        self, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allowance: float
    ) -> None:
        """A process's first parse of a language loads its grammar first (tree-sitter, the wheel,
        the query compiled: ~13 ms for Python, most of a 30 ms budget). Within the page's
        allowance that load is given back: the page's files not yet indexed are all parsed. A
        load past it is spent from the budget: here it takes it all, and both keep line hits."""
        loaded: set[str] = set()

        def slow(name: str) -> Any:
            if name not in loaded:  # this process's first load of it, made slower than the budget
                loaded.add(name)
                time.sleep(0.1)
            return grammars.grammar(name)

        monkeypatch.setattr(resolve, "grammar", slow)
        monkeypatch.setattr(parse, "grammar", slow)
        monkeypatch.setattr(resolve, "LOAD_ALLOWANCE_S", allowance)
        service = _service(corpus, tmp_path / "idx", parse_budget_ms=30)
        try:
            answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/*.py"])
        finally:
            await service.aclose()
        assert loaded == {"python"}
        for path in ("src/mod.py", "src/other.py"):
            kinds = {h["kind"] for h in _group(answer, path)["hits"]}
            assert ("function" in kinds) if allowance else (kinds == {"file"}), (path, kinds)

    async def test_a_recurring_file_is_read_from_the_database_once_until_it_changes(
        self, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A page's file is held in the process: found again, the database is not read; once the
        file changed and was indexed again, the page shows its new declarations, not the held ones."""
        service = _service(corpus, tmp_path / "idx", parse_budget_ms=0)
        builder = Builder(Store.open(str(tmp_path / "idx")), [Source("repo", str(corpus / "repo"))])
        builder.refresh()
        read: list[list[str]] = []
        lookup = Store.lookup

        def counted(store: Store, root: str, paths: Any) -> Any:
            read.append(list(paths))
            return lookup(store, root, paths)

        monkeypatch.setattr(Store, "lookup", counted)
        ask = {"query": "needle", "namespaces": ["repo"], "paths": ["src/mod.py"]}
        try:
            first = await _search(service, **ask)
            assert read == [["src/mod.py"]]
            again = await _search(service, **ask)
            assert read == [["src/mod.py"]] and again["files"] == first["files"]
            module = corpus / "repo" / "src" / "mod.py"
            module.write_text(MODULE.replace("def one", "def uno"))
            past = time.time_ns() - 60 * 10**9
            os.utime(module, ns=(past, past))
            builder.refresh()
            changed = await _search(service, **ask)
            assert read[1:] == [["src/mod.py"]]  # held, but no longer the file: read again
            names = {h["qualified_name"] for h in _group(changed, "src/mod.py")["hits"]}
            assert "uno" in names and "one" not in names
        finally:
            await service.aclose()

    async def test_a_damaged_database_at_start_is_rebuilt(self, corpus: Path, tmp_path: Path) -> None:
        """A database that is not one: the search answers with declarations; one warning says it was rebuilt."""
        (tmp_path / "idx").mkdir()
        (tmp_path / "idx" / db_name()).write_bytes(b"garbage" * 4096)
        service = _service(corpus, tmp_path / "idx")
        try:
            with capture_logs() as logs:
                answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
            assert "function" in {h["kind"] for h in _group(answer, "src/mod.py")["hits"]}
            assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["index_rebuilt"]
        finally:
            await service.aclose()

    async def test_a_database_that_breaks_mid_search_costs_only_that_pages_declarations(
        self, service: SearchService, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The answer comes with line hits, the database is built again (one warning), the next page has them."""
        await _search(service, query="needle", namespaces=["repo"])
        real = Store.lookup
        broken = [True]

        def lookup(self: Store, namespace: str, paths: Any) -> Any:
            if broken.pop() if broken else False:
                raise sqlite3.DatabaseError("database disk image is malformed")
            return real(self, namespace, paths)

        monkeypatch.setattr(Store, "lookup", lookup)
        with capture_logs() as logs:
            answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        assert {h["kind"] for h in _group(answer, "src/mod.py")["hits"]} == {"file"}
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["index_rebuilt"]
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        assert "function" in {h["kind"] for h in _group(answer, "src/mod.py")["hits"]}

    async def test_human_output_prints_a_declaration_header_above_its_lines(self, service: SearchService) -> None:
        """`Holder.two  method  11-12`, then its matched lines as rg prints them."""
        request = parse_request({"query": "needle", "namespaces": ["repo"], "paths": ["src/mod.py"]})
        text = human(await service.search(request), Style(), lambda namespace, path: f"{namespace}:{path}")
        assert "Holder.two  method  11-12\n12:        return needle + needle\n" in text
        assert "2:print(needle)\n" in text


class TestDefinitionRanking:
    async def test_the_defining_file_ranks_first_from_the_index(self, corpus: Path, tmp_path: Path) -> None:
        """The file that declares the name beats files that use it more, tests included."""
        Builder(Store.open(str(tmp_path / "idx")), [Source("defs", str(corpus / "defs"))]).refresh()
        service = _service(corpus, tmp_path / "idx")
        try:
            answer = await _search(service, query="Widget", namespaces=["defs"])
            assert next(g["file_path"] for g in answer["files"]) == "lib/widget.py"
            views = service.index.definitions(parse_request({"query": "Widget"})) if service.index else None
            assert views is not None
            defines = views["defs"]
            assert (defines("lib/widget.py"), defines("lib/uses.py"), defines("nowhere.py")) == (EXACT, NOT, None)
        finally:
            await service.aclose()

    async def test_before_indexing_only_a_definition_of_the_name_itself_counts(
        self, corpus: Path, tmp_path: Path
    ) -> None:
        """The regex test: `class Widget` defines Widget, `class TestWidget(Widget)` does not."""
        service = _service(corpus, tmp_path / "idx", enabled=False)
        try:
            answer = await _search(service, query="Widget", namespaces=["defs"])
            assert next(g["file_path"] for g in answer["files"]) == "lib/widget.py"
            assert [g["file_path"] for g in answer["files"]][-1] == "tests/test_widget.py"
        finally:
            await service.aclose()

    async def test_the_file_name_matches_ignoring_case_and_separators(self, corpus: Path, tmp_path: Path) -> None:
        """`widget` finds lib/widget.py first whatever the case (smart case no longer hides it)."""
        service = _service(corpus, tmp_path / "idx", enabled=False)
        try:
            for query in ("widget", "WIDGET"):
                answer = await _search(service, query=query, namespaces=["defs"], case_sensitive=False)
                assert answer["files"][0]["file_path"] == "lib/widget.py"
        finally:
            await service.aclose()


class TestSurfaces:
    async def test_the_answer_fits_the_published_schema(self, service: SearchService) -> None:
        """An answer with declaration hits validates as SearchResponse (the OpenAPI and MCP output schema)."""
        answer = await _search(service, query="needle", namespaces=["repo"], context_lines=1)
        parsed = SearchResponse.model_validate(answer)
        hit = next(h for g in parsed.files for h in g.hits if h.lines)
        assert hit.lines is not None and hit.lines[0].context is not None

    async def test_afi_gives_one_match_per_line_with_its_declaration(self, service: SearchService) -> None:
        """AFI flattens a declaration into one Match per matched line, the declaration in x-declaration."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        (matches,) = afi_matches(answer, semantic=False, threshold=0.5)
        assert [m["line"] for m in matches] == matched_lines(answer["files"][0])
        five = next(m for m in matches if m["line"] == 5)
        assert five["x-declaration"] == {
            "kind": "function",
            "name": "one",
            "qualified_name": "one",
            "start_line": 4,
            "end_line": 7,
        }
        assert "x-declaration" not in next(m for m in matches if m["line"] == 2)

    async def test_a_peers_declarations_pass_through_unchanged(self, service: SearchService) -> None:
        """A peer gateway's declaration hit comes back with its kind, names, intent, span and lines."""
        answer = await _search(service, query="needle", namespaces=["repo"], paths=["src/mod.py"])
        files, _ = parse_page({**answer, "files": [dict(answer["files"][0], namespace="repo")]}, "exact")
        ours = _group(answer, "src/mod.py")["hits"]
        theirs = list(files[0].hits)
        holder = next(h for h in theirs if h.symbol == "Holder")
        assert (holder.kind, holder.name, holder.intent, holder.line, holder.end_line) == (
            "class",
            "Holder",
            "Holds the needle.",
            9,
            17,
        )
        assert [h.line for h in holder.lines] == [10]
        assert len(theirs) == len(ours)
