"""The ripgrep adapter, against the real ``rg`` binary on repositories made with ``git init``."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings, build_argv, find_rg
from adapters.ripgrep.localfs import LocalTree
from adapters.ripgrep.output import SKIPPED, Collector, LineSplitter, OutputReader
from gateway.errors import BackendError
from gateway.fanout import Route, fan_out
from gateway.index.content import fresh
from gateway.models import MAX_TEXT, BackendResult, FileMatch, SearchQuery
from gateway.signals import DefinitionTest, defines
from tests.content_support import indexed
from tests.helpers import git_repo, rg_children

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

Make = Callable[..., Path]


@pytest.fixture
def make_repo(tmp_path: Path) -> Make:
    """Build a repository under tmp_path from a mapping of files."""

    def make(files: dict[str, str | bytes], name: str = "repo") -> Path:
        return git_repo(tmp_path / name, files)

    return make


#: Whether :func:`search` narrows with a content index built first (the ``index_mode`` fixture's).
MODE: dict[str, Any] = {"indexed": False, "folder": ""}


@pytest.fixture(params=["scanned", "indexed"])
def index_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The rg oracle run twice: scanning, and narrowed by a content index built over the repository first."""
    monkeypatch.setitem(MODE, "indexed", request.param == "indexed")
    monkeypatch.setitem(MODE, "folder", str(tmp_path / "content-index"))
    monkeypatch.setattr(fresh, "RACY_NS", 0)  # files the test wrote a moment ago are named, not read by folder
    return str(request.param)


async def search(root: Path, text: str = "needle", settings: dict[str, Any] | None = None, **q: Any) -> BackendResult:
    """Run one query on a fresh backend over ``root`` (narrowed by its content index in ``indexed`` mode)."""
    backend = RipgrepBackend("test", RipgrepSettings(root=str(root), **(settings or {})))
    if MODE["indexed"]:
        exclude = tuple(backend.settings.exclude)
        backend.use_index(indexed(Path(MODE["folder"]), root, exclude))
    async with backend:
        return await backend.search(SearchQuery(text=text, **q))


def paths(result: BackendResult) -> list[str]:
    return [f.path for f in result.files]


def collect(lines: list[bytes], context_lines: int = 0, definition: DefinitionTest | None = None) -> list[FileMatch]:
    """A whole rg output (its lines) read into one collector's ranked files."""
    collector = Collector(context_lines=context_lines, definition=definition)
    OutputReader(lambda _: collector).feed(list(lines))
    return collector.ranked()


@pytest.fixture(scope="module")
def slow_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose search yields millions of hits: far more than a short deadline can read."""
    root = tmp_path_factory.mktemp("slow")
    git_repo(root, {})
    (root / "many.txt").write_bytes(b"needle in a haystack\n" * 3_000_000)
    return root


@pytest.mark.usefixtures("index_mode")
class TestFileSelection:
    async def test_gitignored_file_is_not_searched(self, make_repo: Make) -> None:
        """A file matched by .gitignore never appears."""
        root = make_repo({".gitignore": "secret.txt\n", "secret.txt": "needle\n", "a.txt": "needle\n"})
        assert paths(await search(root)) == ["a.txt"]

    async def test_hidden_folder_is_not_searched(self, make_repo: Make) -> None:
        """Files in a hidden directory are skipped."""
        root = make_repo({".hidden/a.txt": "needle\n", "b.txt": "needle\n"})
        assert paths(await search(root)) == ["b.txt"]

    async def test_binary_file_is_skipped(self, make_repo: Make) -> None:
        """A file holding a NUL byte is skipped."""
        root = make_repo({"blob.dat": b"needle\x00needle\n", "a.txt": "needle\n"})
        assert paths(await search(root)) == ["a.txt"]

    async def test_symlink_outside_root_is_not_followed(self, make_repo: Make, tmp_path: Path) -> None:
        """Symlinks to a file or a directory outside the root are not searched."""
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "o.txt").write_text("needle\n")
        root = make_repo({"a.txt": "needle\n"})
        (root / "file_link").symlink_to(outside / "o.txt")
        (root / "dir_link").symlink_to(outside)
        assert paths(await search(root)) == ["a.txt"]

    async def test_include_glob_does_not_pull_in_ignored_files(self, make_repo: Make) -> None:
        """An include glob narrows the search but never adds gitignored or hidden files."""
        root = make_repo(
            {
                ".gitignore": "src/gen/\n",
                "src/gen/b.py": "needle\n",
                "src/.hid/h.py": "needle\n",
                "src/a.py": "needle\n",
                "lib/c.py": "needle\n",
            }
        )
        assert paths(await search(root, paths=("src/**",))) == ["src/a.py"]

    async def test_include_directory_glob(self, make_repo: Make) -> None:
        """A glob with a slash is anchored; as rg's -g, an include naming a folder keeps nothing by that (its
        files must match themselves): ``src/api/**`` keeps what it holds."""
        root = make_repo({"src/api/x.go": "needle\n", "src/web/y.go": "needle\n", "lib/src/api/z.go": "needle\n"})
        assert paths(await search(root, paths=("src/api",))) == []
        assert paths(await search(root, paths=("src/api/**",))) == ["src/api/x.go"]

    async def test_exclude_glob(self, make_repo: Make) -> None:
        """A leading '!' removes matching files."""
        root = make_repo({"a.py": "needle\n", "b.txt": "needle\n", "vendor/c.py": "needle\n"})
        assert paths(await search(root, paths=("!*.txt", "!vendor"))) == ["a.py"]

    async def test_settings_exclude(self, make_repo: Make) -> None:
        """The namespace's exclude globs apply to every query."""
        root = make_repo({"a.py": "needle\n", "app.min.js": "needle\n"})
        assert paths(await search(root, settings={"exclude": ["*.min.js"]})) == ["a.py"]

    async def test_language_filter(self, make_repo: Make) -> None:
        """A language keeps its extensions only, and never adds hidden files."""
        root = make_repo({"a.py": "needle\n", "b.go": "needle\n", "src/.secret.py": "needle\n"})
        assert paths(await search(root, languages=("python",))) == ["a.py"]

    async def test_no_match_is_an_empty_ok_result(self, make_repo: Make) -> None:
        """rg's exit status 1 (nothing matched) is an empty ok answer."""
        root = make_repo({"a.txt": "hay\n"})
        result = await search(root)
        assert (result.status, paths(result)) == ("ok", [])


@pytest.mark.usefixtures("index_mode")
class TestHits:
    async def test_non_utf8_content_yields_hits(self, make_repo: Make) -> None:
        """Undecodable bytes in a line are replaced, not fatal."""
        root = make_repo({"latin.txt": b"caf\xe9 needle\n"})
        hit = (await search(root)).files[0].hits[0]
        assert (hit.text, hit.column) == ("caf\ufffd needle", 6)

    async def test_non_utf8_path_yields_hits(self, make_repo: Make) -> None:
        """A file name that is not UTF-8 is decoded with a replacement character."""
        root = make_repo({os.fsdecode(b"legacy-\xe9.txt"): "needle\n"})
        assert paths(await search(root)) == ["legacy-\ufffd.txt"]

    async def test_long_line_is_cut_around_the_match(self, make_repo: Make) -> None:
        """A 10,000-character line is cut to 256 characters and keeps the match in view."""
        root = make_repo({"min.js": "x" * 5000 + "needle" + "y" * 4994 + "\n"})
        hit = (await search(root)).files[0].hits[0]
        assert len(hit.text) == MAX_TEXT
        assert hit.text.startswith("…") and hit.text.endswith("…")
        assert "needle" in hit.text
        assert hit.column == 5001

    async def test_megabyte_line(self, make_repo: Make) -> None:
        """A 1 MB line (one JSON message of over 1 MB) is read whole and cut around its match."""
        root = make_repo({"big.txt": "x" * 1_000_000 + "needle\n"})
        hit = (await search(root)).files[0].hits[0]
        assert (hit.column, len(hit.text)) == (1_000_001, MAX_TEXT)
        assert hit.text.endswith("needle")

    async def test_column_counts_characters(self, make_repo: Make) -> None:
        """Multi-byte characters before the match count once each."""
        root = make_repo({"a.txt": "é€x needle\n"})
        assert (await search(root)).files[0].hits[0].column == 5

    async def test_one_hit_per_matching_line(self, make_repo: Make) -> None:
        """A file with 500 matching lines gives 500 one-line hits, in line order."""
        root = make_repo({"a.txt": "needle\n" * 500})
        hits = (await search(root)).files[0].hits
        assert [h.line for h in hits] == list(range(1, 501))
        assert all(h.end_line == h.line for h in hits)

    async def test_several_matches_on_a_line_are_one_hit(self, make_repo: Make) -> None:
        """Two matches on one line make one hit whose column is the first match."""
        root = make_repo({"a.txt": "ab needle needle\n"})
        hits = (await search(root)).files[0].hits
        assert [(h.line, h.column) for h in hits] == [(1, 4)]

    async def test_files_ordered_by_hits_then_path(self, make_repo: Make) -> None:
        """More hits first, ties broken by path."""
        root = make_repo({"b.txt": "needle\n", "a.txt": "needle\n", "c.txt": "needle\nneedle\n"})
        assert paths(await search(root)) == ["c.txt", "a.txt", "b.txt"]


@pytest.mark.usefixtures("index_mode")
class TestModes:
    async def test_exact_is_literal(self, make_repo: Make) -> None:
        """In exact mode regex metacharacters match themselves."""
        root = make_repo({"a.txt": "abc\n", "b.txt": "a.c\n"})
        assert paths(await search(root, "a.c", mode="exact")) == ["b.txt"]

    async def test_regex(self, make_repo: Make) -> None:
        """In regex mode the query is a regular expression."""
        root = make_repo({"a.txt": "abc\n", "b.txt": "a.c\n"})
        assert paths(await search(root, "a.c", mode="regex")) == ["a.txt", "b.txt"]

    async def test_case_sensitive(self, make_repo: Make) -> None:
        """case_sensitive=True does not match another case."""
        root = make_repo({"a.txt": "Needle\n", "b.txt": "needle\n"})
        assert paths(await search(root, "needle", case_sensitive=True)) == ["b.txt"]

    async def test_case_insensitive(self, make_repo: Make) -> None:
        """case_sensitive=False (smart case resolved upstream) matches any case."""
        root = make_repo({"a.txt": "Needle\n", "b.txt": "needle\n"})
        assert paths(await search(root, "NEEDLE", case_sensitive=False)) == ["a.txt", "b.txt"]

    async def test_semantic_is_unsupported(self, make_repo: Make) -> None:
        """ripgrep cannot search by meaning: the fan-out says so without starting rg."""
        backend = RipgrepBackend("rg", RipgrepSettings(root=str(make_repo({"a.txt": "needle\n"}))))
        [outcome] = await fan_out([Route("rg", backend)], SearchQuery(text="needle", mode="semantic"))
        assert (outcome.status, outcome.error) == ("unsupported", "ripgrep cannot search in semantic mode")
        assert rg_children() == set()


@pytest.mark.usefixtures("index_mode")
class TestContext:
    async def test_context_lines_around_hits(self, make_repo: Make) -> None:
        """Hits carry up to N neighbouring lines, including other matching lines."""
        root = make_repo({"a.txt": "one\ntwo\nneedle 3\nneedle 4\nfive\nsix\nseven\n"})
        hits = (await search(root, context_lines=2)).files[0].hits
        assert [(h.before, h.after) for h in hits] == [
            (("one", "two"), ("needle 4", "five")),
            (("two", "needle 3"), ("five", "six")),
        ]

    async def test_context_stops_at_file_edges_and_gaps(self, make_repo: Make) -> None:
        """Context is only contiguous lines: fewer at the start of a file."""
        root = make_repo({"a.txt": "needle 1\nx\ny\nz\nw\nv\nneedle 7\n"})
        hits = (await search(root, context_lines=1)).files[0].hits
        assert [(h.line, h.before, h.after) for h in hits] == [(1, (), ("x",)), (7, ("v",), ())]

    async def test_no_context_by_default(self, make_repo: Make) -> None:
        """Without context_lines hits have no neighbours."""
        root = make_repo({"a.txt": "x\nneedle\ny\n"})
        hit = (await search(root)).files[0].hits[0]
        assert (hit.before, hit.after) == ((), ())


class TestCaps:
    async def test_file_cap(self, make_repo: Make) -> None:
        """More matching files than max_files stops rg: status capped with max_files files."""
        root = make_repo({f"f{i}.txt": "needle\n" for i in range(10)})
        result = await search(root, settings={"max_files": 3})
        assert (result.status, len(result.files)) == ("capped", 3)
        assert result.reason == "stopped at 3 files (cap)"
        assert rg_children() == set()

    async def test_hit_cap(self, make_repo: Make) -> None:
        """More hits than max_hits stops rg: status capped with max_hits hits."""
        root = make_repo({"a.txt": "needle\n" * 100})
        result = await search(root, settings={"max_hits": 7})
        assert result.status == "capped"
        assert sum(len(f.hits) for f in result.files) == 7
        assert "7 hits" in result.reason


class TestDeadline:
    async def test_deadline_already_passed(self, make_repo: Make) -> None:
        """A query whose deadline has passed times out and leaves no rg process."""
        root = make_repo({"a.txt": "needle\n"})
        result = await search(root, deadline=time.monotonic() - 1)
        assert result.status == "timeout"
        assert rg_children() == set()

    async def test_short_deadline_on_slow_search(self, slow_repo: Path) -> None:
        """A deadline reached mid-search returns what was read as timeout, rg killed and reaped."""
        result = await search(slow_repo, settings={"max_hits": 10**9}, deadline=time.monotonic() + 0.2)
        assert result.status == "timeout"
        assert "deadline" in result.reason
        assert rg_children() == set()

    async def test_cancellation_kills_rg(self, slow_repo: Path) -> None:
        """Cancelling a search kills rg and reaps it before the cancellation completes."""
        backend = RipgrepBackend("t", RipgrepSettings(root=str(slow_repo), max_hits=10**9))
        task = asyncio.create_task(backend.search(SearchQuery(text="needle", deadline=time.monotonic() + 60)))
        pids: set[int] = set()
        for _ in range(1000):
            pids = rg_children()
            if pids:
                break
            await asyncio.sleep(0.01)
        assert len(pids) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(ProcessLookupError):
            os.kill(pids.pop(), 0)


class TestErrors:
    async def test_rejected_regex_is_backend_error(self, make_repo: Make) -> None:
        """A regex rg cannot parse is a BackendError carrying rg's message."""
        root = make_repo({"a.txt": "needle\n"})
        with pytest.raises(BackendError, match="regex parse error: unclosed group"):
            await search(root, "a(", mode="regex")

    async def test_rg_that_cannot_start_is_backend_error(
        self, make_repo: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An rg binary that cannot be run is a BackendError naming why; no pipe is left open."""
        root = make_repo({"a.txt": "needle\n"})
        broken = tmp_path / "rg"
        broken.write_text("not a program\n")  # not executable
        monkeypatch.setattr("adapters.ripgrep.backend.find_rg", lambda: str(broken))
        fds = len(os.listdir("/proc/self/fd"))
        with pytest.raises(BackendError, match="cannot start rg: Permission denied"):
            await search(root)
        assert len(os.listdir("/proc/self/fd")) == fds

    async def test_rg_killed_by_a_signal_is_backend_error(
        self, make_repo: Make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An rg that dies of a signal (the OOM killer) is a BackendError with its status."""
        root = make_repo({"a.txt": "needle\n"})
        dying = tmp_path / "rg"
        dying.write_text("#!/bin/sh\nkill -9 $$\n")
        dying.chmod(0o755)
        monkeypatch.setattr("adapters.ripgrep.backend.find_rg", lambda: str(dying))
        with pytest.raises(BackendError, match="rg exited with status -9"):
            await search(root)

    def test_root_must_exist(self, tmp_path: Path) -> None:
        """A missing root is a validation error naming root."""
        with pytest.raises(pydantic.ValidationError) as info:
            RipgrepSettings(root=str(tmp_path / "missing"))
        assert info.value.errors()[0]["loc"] == ("root",)

    def test_root_must_be_a_directory(self, tmp_path: Path) -> None:
        """A root that is a file is a validation error naming root."""
        (tmp_path / "f").write_text("x")
        with pytest.raises(pydantic.ValidationError) as info:
            RipgrepSettings(root=str(tmp_path / "f"))
        assert info.value.errors()[0]["loc"] == ("root",)

    def test_bad_exclude_glob(self, tmp_path: Path) -> None:
        """An invalid exclude glob is a validation error naming exclude."""
        with pytest.raises(pydantic.ValidationError) as info:
            RipgrepSettings(root=str(tmp_path), exclude=["src/[abc"])
        assert info.value.errors()[0]["loc"] == ("exclude",)


class TestInvocation:
    def test_argv_exact(self) -> None:
        """Exact mode asks for fixed strings, NUL-ended paths, columns, no config, and the pattern after -e."""
        q = SearchQuery(text="-x", mode="exact", case_sensitive=False, context_lines=2)
        assert build_argv("rg", q) == [
            "rg", "--no-config", "--null", "--heading", "--with-filename", "--line-number", "--column",
            "--no-context-separator", "--color=never", "-F", "-i", "-C", "2", "-e", "-x", "--", ".",
        ]  # fmt: skip

    def test_argv_passes_only_excludes(self) -> None:
        """Include globs and languages never reach rg; excludes do, and risky flags never appear."""
        q = SearchQuery(text="x", mode="regex", paths=("src/**", "!*.min.js"), languages=("python",))
        argv = build_argv("rg", q, ["vendor"])
        assert argv[argv.index("-s") + 1 : argv.index("-e")] == ["-g", "!vendor", "-g", "!*.min.js"]
        assert not {"--pre", "-L", "--follow", "-P", "--sort", "-t"} & set(argv)


#: Real rg 14.1.0 output (``build_argv`` with ``-C 1 --sort path``) over a file name with a
#: Latin-1 byte, a line with one, a line with an "é" before the match, a CRLF line.
RECORDED = [
    b"./docs/legacy-\xe9.txt\x001:3:\xe9 register_widget",
    b"2-\xffsee Latin-1 byte above",
    b"",
    b"./src/widgets/registry.py\x005-",
    b"6:5:def register_widget(name):",
    b'7-    """Register a widget factory under ``name``."""',
    b"11-def lookup(name):",
    b"12:56:    return _REGISTRY.get(name)  # caf\xc3\xa9-safe lookup of register_widget entries\r",
    b"",
]


class TestParser:
    def test_recorded_output(self) -> None:
        """Recorded rg output reads into ranked files with character columns and context."""
        files = collect(RECORDED, context_lines=1)
        assert [f.path for f in files] == ["src/widgets/registry.py", "docs/legacy-\ufffd.txt"]  # by hits
        registry = files[0].hits
        assert [(h.line, h.column) for h in registry] == [(6, 5), (12, 55)]
        assert registry[1].text == "    return _REGISTRY.get(name)  # café-safe lookup of register_widget entries"
        assert (registry[0].before, registry[0].after) == (
            ("",),
            ('    """Register a widget factory under ``name``."""',),
        )
        assert registry[1].before == ("def lookup(name):",)
        legacy = files[1].hits
        assert [(h.line, h.column, h.text) for h in legacy] == [(1, 3, "\ufffd register_widget")]
        assert legacy[0].after == ("\ufffdsee Latin-1 byte above",)

    def test_definition_hint(self) -> None:
        """A file whose first matching lines hold a definition says so without building its hits."""
        files = collect(RECORDED, definition=DefinitionTest("register_widget", True))
        assert [defines(f, None) for f in files] == [True, False]
        assert all(getattr(f.hits, "_hits", None) is None for f in files)  # none decoded

    def test_garbage_is_passed_over(self) -> None:
        """Lines that are not numbered lines, and a file whose first line was skipped, yield nothing."""
        output = [
            b"./a\x001:1:needle",
            b'./a: WARNING: stopped searching binary file after match (found "\\0" byte around offset 9)',
            b"x:1:not a line number",
            b"",
            b"\x00",  # SKIPPED: an overlong first line, so the file is unknown
            b"2:1:needle of nobody",
            b"",
            b"./b\x003:1:needle",
        ]
        files = collect(output)
        assert [(f.path, [h.line for h in f.hits]) for f in files] == [("a", [1]), ("b", [3])]

    def test_any_split_into_reads_gives_the_same_files(self) -> None:
        """A file cut across reads (begin, take, flush) reads as the same file read whole."""
        from adapters.ripgrep.output import Collector, OutputReader

        def read(parts: list[list[bytes]]) -> list[tuple[str, list[tuple[int, str, tuple[str, ...]]]]]:
            collector = Collector(context_lines=1)
            reader = OutputReader(lambda _: collector)
            for part in parts:
                reader.feed(list(part))
            return [(f.path, [(h.line, h.text, h.before + h.after) for h in f.hits]) for f in collector.ranked()]

        whole = read([RECORDED])
        assert [path for path, _ in whole] == ["src/widgets/registry.py", "docs/legacy-\ufffd.txt"]
        for cut in range(1, len(RECORDED)):
            for second in range(cut, len(RECORDED)):
                assert read([RECORDED[:cut], RECORDED[cut:second], RECORDED[second:]]) == whole, (cut, second)

    def test_path_with_a_newline(self) -> None:
        """A file name holding a newline arrives over two lines and is joined again."""
        files = collect([b"./new", b"line.txt\x004:2:.needle"])
        assert [(f.path, f.hits[0].line, f.hits[0].column) for f in files] == [("new\nline.txt", 4, 2)]


class TestLineSplitter:
    @staticmethod
    def lines(pieces: list[bytes], limit: int = 1 << 20) -> list[bytes]:
        splitter = LineSplitter(limit)
        return [line for piece in pieces for line in splitter.split(piece)] + splitter.end()

    def test_lines_across_chunks(self) -> None:
        """Lines split across reads are joined; the last line needs no newline."""
        assert self.lines([b"ab", b"c\nd", b"e\n\nf"]) == [b"abc", b"de", b"", b"f"]

    def test_overlong_line_is_skipped_whole(self) -> None:
        """A line over the limit is replaced by SKIPPED and the next line is intact."""
        pieces = [b"ok\n" + b"x" * 50, b"y" * 50 + b"\nnext\n" + b"z" * 30 + b"\n"]
        assert self.lines(pieces, limit=20) == [b"ok", SKIPPED, b"next", SKIPPED]

    def test_overlong_line_across_reads_is_skipped(self) -> None:
        """A line that outgrows the limit over several reads is dropped without being held."""
        splitter = LineSplitter(20)
        assert splitter.split(b"ok\n" + b"x" * 50) == [b"ok"]
        assert splitter.take_pending(1 << 20) is None  # being skipped: nothing is held
        assert splitter.split(b"y" * 50 + b"\nnext\n") == [SKIPPED, b"next"]
        assert splitter.split(b"w" * 50) == []
        assert splitter.end() == [SKIPPED]


class TestTree:
    def test_tree_reads_the_root(self, make_repo: Make) -> None:
        """tree() gives a LocalTree over the namespace root."""
        root = make_repo({"a.txt": "hello\n"})
        tree = RipgrepBackend("t", RipgrepSettings(root=str(root))).tree()
        assert isinstance(tree, LocalTree)
        assert tree.read_text("a.txt") == "hello\n"
