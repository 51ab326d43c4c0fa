"""The file view's highlighting and outline, and facets over a snapshot (issue 37), without a browser."""

from __future__ import annotations

import fnmatch
import os
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.cache.snapshots import EncodedSnapshots, HeldSnapshots, Snapshots
from gateway.cache.store import MemoryStore
from gateway.index.files import Source
from gateway.index.resolve import DeclarationIndex
from gateway.models import BackendResult, FileMatch, Hit, Outcome
from gateway.query.languages import LANGUAGES
from gateway.query.request import parse_request
from gateway.rank import Ordering, settle
from gateway.view.facets import count_facets, language_of_name
from gateway.view.highlight import highlight
from gateway.view.outline import outline_of

#: Lines as a file holds them: anything but a line end (a stray \r is shown plain, tested apart).
LINES = st.lists(st.text(st.characters(exclude_characters="\n\r"), max_size=40), max_size=30)
PATHS = ("a.py", "b.js", "c.go", "README.md", "Makefile", "d.rs", "e.unknown-ext", "f.json", "g.c")


def joined(line: str | list[list[str]]) -> str:
    return line if isinstance(line, str) else "".join(text for _, text in line)


class TestHighlight:
    @given(st.sampled_from(PATHS), LINES, LINES)
    def test_the_runs_give_back_the_lines(self, path: str, lines: list[str], lead: list[str]) -> None:
        """Whatever the language and text, a slice's runs are its lines, one for one, in order."""
        got = highlight(path, lines, lead)
        assert [joined(line) for line in got] == lines

    def test_a_slice_inside_a_docstring_is_coloured_as_one(self) -> None:
        """The lines read before a slice are lexed with it: its first line, inside a docstring, is one."""
        lead = ["def f():", '    """The start of a docstring']
        got = highlight("a.py", ["    still the docstring", '    """', "    return 1"], lead)
        assert got[0] == [["c", "    still the docstring"]]
        assert ["k", "return"] in got[2]  # after it, code again
        assert highlight("a.py", ["    still the docstring"])[0] != got[0]  # without the lead it is not

    def test_keywords_names_strings_and_comments_have_classes(self) -> None:
        got = highlight("a.py", ["def needle(x):  # find", '    return "needle"'])
        assert got[0][:3] == [["k", "def"], ["", " "], ["f", "needle"]]
        assert got[0][-1] == ["c", "# find"]
        assert ["s", '"needle"'] in got[1]

    def test_unknown_names_and_carriage_returns_are_plain(self) -> None:
        assert highlight("notes.unknown-ext", ["a", "b"]) == ["a", "b"]
        assert highlight("a.py", ["x = 1\r", "y"]) == ["x = 1\r", "y"]


class TestFacets:
    @given(st.sampled_from(sorted({g[1:] for globs in LANGUAGES.values() for g in globs})), st.text(max_size=8))
    def test_a_files_language_is_the_first_whose_glob_matches(self, suffix: str, stem: str) -> None:
        """language_of_name reads a name as the request's languages filter and the page do."""
        name = f"dir/{stem.replace('/', '')}{suffix}"
        base = name.rsplit("/", 1)[1]
        first = next(
            (lang for lang, globs in LANGUAGES.items() if any(fnmatch.fnmatchcase(base, g) for g in globs)), None
        )
        assert language_of_name(name) == first

    def test_counts_by_namespace_language_and_top_folder(self) -> None:
        files = [("a", "src/x.py"), ("a", "src/y.py"), ("b", "docs/z.md"), ("b", "README"), ("a", "lib/w.go")]
        facets = count_facets(files)
        assert facets.file_count == 5
        assert facets.namespaces == [("a", 3), ("b", 2)]
        assert facets.languages == [("python", 2), ("go", 1), ("markdown", 1)]
        assert facets.folders == [("src/", 2), ("docs/", 1), ("lib/", 1)]  # README is at the root: none


def _outcomes(files: int) -> list[Outcome]:
    paths = [f"src/f{n:03}.py" if n % 3 else f"docs/f{n:03}.md" for n in range(files)]
    result = BackendResult(files=tuple(FileMatch(path=p, hits=(Hit(line=1, text="x", column=1),)) for p in paths))
    return [Outcome(namespace="ns", backend="mock", status="ok", took_ms=1, result=result)]


class TestSnapshotFacets:
    async def check(self, snapshots: Snapshots) -> None:
        whole = settle(parse_request({"query": "x", "files": 5}), _outcomes(90), everything=True)
        assert isinstance(whole.ordered, Ordering) and len(whole.ordered.ready()) < 90  # not all in order
        assert await snapshots.put("k", whole, 60)
        facets = await snapshots.facets("k")
        assert facets is not None and facets.file_count == 90
        assert facets.languages == [("python", 60), ("markdown", 30)]
        assert facets.folders == [("src/", 60), ("docs/", 30)]
        assert facets.namespaces == [("ns", 90)]
        assert await snapshots.facets("another") is None

    async def test_a_held_snapshot_counts_every_file_without_sorting_them(self) -> None:
        held = HeldSnapshots(MemoryStore(1 << 24))
        await self.check(held)

    async def test_an_encoded_snapshot_keeps_its_facets_beside_its_chunks(self) -> None:
        await self.check(EncodedSnapshots(MemoryStore(1 << 24)))


class TestOutline:
    def test_from_the_index_or_parsed_when_the_file_changed(self, tmp_path: Path) -> None:
        """The outline nests declarations; a file changed since it was indexed is read as it is now."""
        root = tmp_path / "repo"
        root.mkdir()
        (root / "m.py").write_text("class A:\n    def f(self):\n        pass\n")
        index = DeclarationIndex(None, [Source("repo", str(root))])
        got = outline_of(index, "repo", "m.py")
        assert got is not None and [(s.qualified_name, s.depth, s.start_line) for s in got] == [
            ("A", 0, 1),
            ("A.f", 1, 2),
        ]
        (root / "m.py").write_text("def g():\n    pass\n")
        later = time.time() + 5
        os.utime(root / "m.py", (later, later))
        got = outline_of(index, "repo", "m.py")
        assert got is not None and [s.qualified_name for s in got] == ["g"]

    def test_none_outside_local_namespaces_and_their_languages(self, tmp_path: Path) -> None:
        root = tmp_path / "repo"
        root.mkdir()
        (root / "notes.md").write_text("# hi\n")
        index = DeclarationIndex(None, [Source("repo", str(root))])
        assert outline_of(index, "repo", "notes.md") is None
        assert outline_of(index, "remote", "m.py") is None
        assert outline_of(None, "repo", "m.py") is None
        assert outline_of(index, "repo", "gone.py") is None


async def test_a_server_looks_a_lexer_up_as_it_starts(tmp_path: Path, aiohttp_client: Any) -> None:
    """Pygments' first lookup (its table of lexers) runs as the server starts, not in the first view."""
    from gateway.config import config_from_env
    from gateway.http.app import create_app
    from gateway.view import highlight as module

    module._lexer.cache_clear()
    await aiohttp_client(create_app(config_from_env(root=str(tmp_path), env={})))
    assert module._lexer.cache_info().currsize == 1
