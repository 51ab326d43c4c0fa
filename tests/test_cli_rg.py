"""``fedsearch search`` where it is rg (issue 35): in a subfolder, rg's flags, rg's listings and context blocks.

Each test runs ``fedsearch`` as a process of its own, its stdout a pipe, from a subfolder of a
real git checkout, and holds it to the real ``rg`` run there with the same flags ("as rg").
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters.ripgrep.spawn import find_rg
from tests.cli_support import Capture, run
from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, subprocess_env

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

LONG = "x = '" + "a" * 400 + "' + url_for('long')"
#: One checkout, ``proj``; the tests stand in ``proj/src/pkg``.
FILES = {
    "proj": {
        "src/pkg/helpers.py": (
            "import os\n"
            "\n"
            "\n"
            "def url_for(endpoint):\n"
            '    """Build a URL: url_for("x") is "/x"."""\n'
            "    return '/' + endpoint\n"
            "\n"
            "\n"
            "def other():\n"
            "    return url_for('index')\n" + "\n" * 8 + "def last():\n"
            "    return url_for('z')\n"
        ),
        "src/pkg/app.py": (
            "# the app\n"
            "from helpers import url_for\n"
            "\n"
            "é = 'ü'; url_for('a'); url_for('b')\n"
            f"{LONG}\n"
            "lang:py is text here\n"
            "nothing\n"
        ),
        "src/pkg/sub/deep.py": "VALUE = url_for  # deep\n",
        "src/pkg/notes.txt": "a note\n",
        "src/pkg/.hidden/secret.py": "url_for = 'hidden'\n",
        "src/pkg/built/out.py": "url_for = 'ignored'\n",
        "src/pkg/.gitignore": "built/\n",
        "src/other.py": "url_for('other')\n",
        "tests/test_app.py": "def test_url_for():\n    url_for('t')\n",
        "README.md": "Call url_for to build URLs.\n",
    }
}


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """The checkout ``proj``, made under ``tmp_path/work``."""
    return make_corpus(tmp_path / "work", FILES) / "proj"


@pytest.fixture
def pkg(proj: Path) -> Path:
    """The subfolder the tests stand in."""
    return proj / "src" / "pkg"


def fedsearch(cwd: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``fedsearch ARGV`` as a process of its own, run in ``cwd``, its stdout a pipe."""
    return subprocess.run(
        [*fedsearch_command(), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        input=stdin,
        timeout=120,
        check=False,
    )


def rg(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real rg with ``argv``, run in ``cwd`` (no config file)."""
    binary = find_rg()
    assert binary is not None
    env = {k: v for k, v in subprocess_env().items() if k != "RIPGREP_CONFIG_PATH"}
    return subprocess.run(
        [binary, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def same_lines(cwd: Path, ours: list[str], theirs: list[str]) -> list[str]:
    """fedsearch's and rg's outputs, as sorted lines, asserted equal and not empty (rg's order is its threads')."""
    done, expected = fedsearch(cwd, *ours), rg(cwd, *theirs)
    assert done.returncode == expected.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(expected.stdout.splitlines()) != []
    return done.stdout.splitlines()


class TestInASubfolder:
    def test_search_covers_the_folder_and_below_with_paths_relative_to_it(self, pkg: Path) -> None:
        """From src/pkg with no --root, a ranked page holds the files there and below, printed relative to it."""
        done = fedsearch(pkg, "search", "url_for", "--page-files", "50", "--heading")
        heads = [block.splitlines()[0] for block in done.stdout.split("\n\n") if block]
        assert done.returncode == 0 and sorted(heads) == ["app.py", "helpers.py", "sub/deep.py"]

    def test_files_with_matches_are_rgs(self, pkg: Path) -> None:
        """-l lists what rg -l lists there: nothing above the folder, nothing ignored or hidden."""
        listed = same_lines(pkg, ["search", "url_for", "-l"], ["-S", "-F", "-l", "url_for"])
        assert sorted(listed) == ["app.py", "helpers.py", "sub/deep.py"]

    def test_a_path_search_printed_reads(self, pkg: Path) -> None:
        """`read app.py:2-2` from src/pkg reads that file: its first segment is no namespace."""
        done = fedsearch(pkg, "read", "app.py:2-2")
        assert (done.returncode, done.stdout) == (0, "2\tfrom helpers import url_for\n")
        done = fedsearch(pkg, "read", "sub/deep.py")
        assert done.returncode == 0 and done.stdout.startswith("1\tVALUE = url_for")

    @pytest.mark.parametrize("target", ["nope.py", "proj/app.py", "proj/nope.py:3-4"])
    def test_a_file_not_there_says_so(self, pkg: Path, target: str) -> None:
        """A path that is not a file (here, nor as NAMESPACE/PATH) is "no such file", in words, and exit 2."""
        done = fedsearch(pkg, "read", target)
        name = target.partition(":")[0]
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"fedsearch: no such file: {name}\n")

    def test_namespace_and_path_still_read(self, pkg: Path) -> None:
        """NAMESPACE/PATH reads where no file of that name is here."""
        done = fedsearch(pkg, "read", "proj/README.md")
        assert (done.returncode, done.stdout) == (0, "1\tCall url_for to build URLs.\n")

    def test_anchored_globs_are_relative_to_the_folder(self, pkg: Path) -> None:
        """-g sub/*.py means the folder's sub/, as rg reads it."""
        listed = same_lines(
            pkg, ["search", "url_for", "-l", "-g", "sub/*.py"], ["-S", "-F", "-l", "-g", "sub/*.py", "url_for"]
        )
        assert listed == ["sub/deep.py"]

    def test_paths_as_typed_print_as_rg_prints_them(self, pkg: Path) -> None:
        """PATHs above the folder and the folder itself print as rg prints them (../other.py, ./app.py)."""
        same_lines(
            pkg, ["search", "url_for", "-l", "../other.py", "."], ["-S", "-F", "-l", "url_for", "../other.py", "."]
        )

    def test_a_folder_holding_checkouts(self, proj: Path) -> None:
        """From the folder holding the checkout, -l prints proj/... as rg does from there."""
        listed = same_lines(proj.parent, ["search", "url_for", "-l"], ["-S", "-F", "-l", "url_for"])
        assert "proj/src/other.py" in listed


class TestRgFlags:
    def test_e_is_a_pattern_and_repeats(self, pkg: Path) -> None:
        """-e PATTERN, twice: lines matching either (regexes), as rg -e -e."""
        same_lines(
            pkg,
            ["search", "-e", "def \\w+", "-e", "VALUE", "--vimgrep"],
            ["-S", "--vimgrep", "-e", "def \\w+", "-e", "VALUE"],
        )

    def test_f_reads_patterns_from_a_file(self, pkg: Path, tmp_path: Path) -> None:
        """-f FILE: a pattern a line, as rg -f."""
        patterns = tmp_path / "patterns"
        patterns.write_text("import os\nnothing\n")
        same_lines(pkg, ["search", "-f", str(patterns), "-l"], ["-S", "-l", "-f", str(patterns)])

    def test_with_e_every_positional_is_a_path(self, pkg: Path) -> None:
        """With -e, the positional is a PATH (as rg): `-e url_for sub` searches sub alone."""
        assert same_lines(pkg, ["search", "-e", "url_for", "sub", "-l"], ["-S", "-l", "-e", "url_for", "sub"]) == [
            "sub/deep.py"
        ]

    def test_patterns_are_not_the_query_syntax(self, pkg: Path) -> None:
        """-e lang:py is the text 'lang:py' (rg reads no filter), not a language filter."""
        assert same_lines(pkg, ["search", "-e", "lang:py", "-c"], ["-S", "-c", "-e", "lang:py"]) == ["app.py:1"]

    def test_max_count_and_only_matching(self, pkg: Path) -> None:
        """-m 1 and -o with --vimgrep are rg's."""
        same_lines(pkg, ["search", "url_for", "-m", "1", "--vimgrep"], ["-S", "-F", "-m", "1", "--vimgrep", "url_for"])
        same_lines(pkg, ["search", "url_for", "-o", "--vimgrep"], ["-S", "-F", "-o", "--vimgrep", "url_for"])

    @pytest.mark.parametrize("flags", [["--hidden"], ["-u"], ["-uu"]])
    def test_hidden_and_unrestricted(self, pkg: Path, flags: list[str]) -> None:
        """--hidden, -u and -uu list what rg lists with them (hidden and ignored files)."""
        same_lines(pkg, ["search", "url_for", "-l", *flags], ["-S", "-F", "-l", *flags, "url_for"])

    def test_hidden_reaches_the_ranked_search(self, pkg: Path) -> None:
        """--hidden searches hidden files in a ranked page too."""
        done = fedsearch(pkg, "search", "url_for", "--hidden", "--json", "--page-files", "50")
        assert ".hidden/secret.py" in {
            f["file_path"].removeprefix("src/pkg/") for f in json.loads(done.stdout)["files"]
        }
        done = fedsearch(pkg, "search", "url_for", "--json", "--page-files", "50")
        assert ".hidden/secret.py" not in {
            f["file_path"].removeprefix("src/pkg/") for f in json.loads(done.stdout)["files"]
        }

    def test_count_and_count_matches(self, pkg: Path) -> None:
        """-c counts lines, --count-matches matches, as rg."""
        counts = same_lines(pkg, ["search", "url_for", "-c"], ["-S", "-F", "-c", "url_for"])
        matches = same_lines(pkg, ["search", "url_for", "--count-matches"], ["-S", "-F", "--count-matches", "url_for"])
        assert "app.py:3" in counts and "app.py:4" in matches

    def test_files_lists_what_would_be_searched(self, pkg: Path) -> None:
        """--files lists the files rg would search, searching none; a positional is a PATH."""
        same_lines(pkg, ["search", "--files"], ["--files"])
        assert same_lines(pkg, ["search", "--files", "sub"], ["--files", "sub"]) == ["sub/deep.py"]

    def test_type_list_lists_what_t_takes(self, pkg: Path) -> None:
        """--type-list prints each name -t takes with its globs, rg's format, and -t takes each."""
        done = fedsearch(pkg, "search", "--type-list")
        lines = done.stdout.splitlines()
        assert done.returncode == 0 and "py: *.py, *.pyi" in lines and "python: *.py, *.pyi" in lines
        assert all(re.fullmatch(r"[a-z+#]+: \*?\S+(, \S+)*", line) for line in lines)
        assert fedsearch(pkg, "search", "url_for", "-t", "py", "-l").returncode == 0

    def test_line_numbers_are_rgs_n(self, pkg: Path) -> None:
        """-n is line numbers (no namespace); -N prints the lines without them, as rg -N (off a terminal, without
        a heading unless --heading, as rg: tests/test_cli_rg_flags.py)."""
        assert fedsearch(pkg, "search", "note", "-n", "--heading").stdout == "notes.txt\n1:a note\n"
        assert fedsearch(pkg, "search", "note", "-n").stdout == "notes.txt:1:a note\n" == rg(pkg, "-n", "note").stdout
        assert (
            fedsearch(pkg, "search", "note", "-N", "--heading").stdout
            == "notes.txt\na note\n"
            == rg(pkg, "-N", "--heading", "note").stdout
        )

    def test_ns_and_page_files_name_what_n_and_files_named(self, pkg: Path) -> None:
        """--ns (and --namespace) pick namespaces; --page-files sizes a page."""
        for flag in ("--ns", "--namespace"):
            done = fedsearch(pkg, "search", "url_for", flag, "proj", "--page-files", "1", "--json")
            answer = json.loads(done.stdout)
            assert [s["name"] for s in answer["namespaces"]] == ["proj"] and len(answer["files"]) == 1

    def test_an_empty_pattern_file_matches_nothing(self, pkg: Path, tmp_path: Path) -> None:
        """-f of an empty file: no pattern, nothing matched, exit 1, as rg."""
        empty = tmp_path / "empty"
        empty.write_text("")
        done = fedsearch(pkg, "search", "-f", str(empty), "-l")
        assert (done.returncode, done.stdout) == (1, "") == (rg(pkg, "-l", "-f", str(empty)).returncode, "")

    def test_a_pattern_file_not_there(self, pkg: Path) -> None:
        """-f naming no file is bad input (exit 2) saying so."""
        done = fedsearch(pkg, "search", "-f", "nope.txt")
        assert done.returncode == 2 and done.stderr.startswith("fedsearch: invalid file: cannot read nope.txt: ")

    def test_rgs_own_listings_need_the_checkouts_here(self, pkg: Path, proj: Path, tmp_path: Path) -> None:
        """--files, --count-matches, --hidden and -u with --server or --config: bad input, said."""
        config = tmp_path / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "proj"\nbackend = "ripgrep"\nroot = "{proj}"\n')
        for flags in (["--files"], ["x", "--count-matches"], ["x", "--hidden"], ["x", "-uu"]):
            for where in (["--server", "http://127.0.0.1:9"], ["--config", str(config)]):
                done = fedsearch(pkg, "search", *flags, *where)
                said = f"{flags[-1]} works on the checkouts found here, not with {where[0]}\n"
                assert (done.returncode, done.stderr) == (2, f"fedsearch: invalid {where[0][2:]}: {said}")


class TestVimgrep:
    def test_one_line_a_match_with_byte_columns_and_whole_lines(self, pkg: Path) -> None:
        """--vimgrep is rg's: two matches on a line are two lines, columns count bytes (after é and ü),
        and a long line is printed whole."""
        lines = same_lines(pkg, ["search", "url_for", "--vimgrep"], ["-S", "-F", "--vimgrep", "url_for"])
        four = [line for line in lines if line.startswith("app.py:4:")]
        assert [line.split(":")[2] for line in four] == ["12", "26"]  # bytes: é and ü are two each (10, 24 chars)
        assert f"app.py:5:{len(LONG) - len('url_for(') - 6}:{LONG}" in lines


def skeleton(line: str) -> str:
    """A printed line's number and kind (``12:``, ``11-``, ``--``)."""
    found = re.match(r"\d+[:-]|--$", line)
    return found.group(0) if found else line


class TestContext:
    def blocks(self, out: str) -> dict[str, list[str]]:
        """Each file's printed lines, by path."""
        return {block.splitlines()[0]: block.splitlines()[1:] for block in out.split("\n\n") if block}

    def test_blocks_are_rgs_with_headers_outside_them(self, pkg: Path, proj: Path) -> None:
        """-C 2: each file's lines, headers aside, are rg -C 2's; a header never sits between two lines of
        a block (after a header comes a block's first line, before it the path, -- or another header).
        The declarations are indexed first: a one-shot search parses on the spot only what its time
        allows, which a loaded machine may leave at none (then no header is printed at all)."""
        assert fedsearch(proj, "index").returncode == 0
        done = fedsearch(pkg, "search", "url_for", "-C", "2", "--heading")
        header = re.compile(r"\S+  [a-z_]+  \d+-\d+")
        found = self.blocks(done.stdout)
        assert any(header.fullmatch(line) for line in found["helpers.py"])
        for path, lines in found.items():
            theirs = rg(pkg, "-S", "-F", "-C", "2", "--heading", "-n", "url_for", path).stdout.splitlines()
            ours = [line for line in lines if not header.fullmatch(line)]
            assert [skeleton(line) for line in ours] == [skeleton(line) for line in theirs]
            if path != "app.py":  # (app.py's long line is cut in a page, as the answer holds it)
                assert ours == theirs
            last = 0  # the last line number of the block before
            for i, line in enumerate(lines):
                if header.fullmatch(line):
                    assert i == 0 or lines[i - 1] == "--" or header.fullmatch(lines[i - 1])
                    block: list[int] = []  # the numbers of the block it heads
                    for below in lines[i + 1 :]:
                        if below == "--":
                            break
                        if not header.fullmatch(below):
                            block.append(int(skeleton(below)[:-1]))
                    first = int(line.rpartition("  ")[2].partition("-")[0])
                    assert last < first <= block[-1]  # above the block holding its first line, or the next
                elif line != "--":
                    last = int(skeleton(line)[:-1])

    def test_only_matching_and_max_count_in_a_page(self, pkg: Path) -> None:
        """-o prints each matched part as N:part; -m 1 one matched line a file (as rg's)."""
        found = self.blocks(fedsearch(pkg, "search", "url_for", "-o", "--heading").stdout)
        assert [line for line in found["app.py"] if line[0].isdigit()] == rg(
            pkg, "-S", "-F", "-o", "-n", "url_for", "app.py"
        ).stdout.splitlines()
        found = self.blocks(fedsearch(pkg, "search", "url_for", "-m", "1", "-N", "--heading").stdout)
        assert found["app.py"] == ["from helpers import url_for"]


class TestPipes:
    def test_the_summary_and_next_commands_go_to_stderr(self, pkg: Path) -> None:
        """Off a terminal, stdout holds results only; the summary and the next commands are on stderr."""
        done = fedsearch(pkg, "search", "url_for", "--page-files", "1")
        assert done.returncode == 0 and "matched" not in done.stdout and "fedsearch search" not in done.stdout
        assert "3 files matched; showing 1-1" in done.stderr and "  fedsearch search --args-json " in done.stderr

    def test_nothing_matched_prints_nothing_on_stdout(self, pkg: Path) -> None:
        """No match: exit 1, stdout empty, the note on stderr; -l prints nothing, as rg."""
        done = fedsearch(pkg, "search", "zzz_nothing")
        assert (done.returncode, done.stdout) == (1, "") and "nothing matched" in done.stderr
        listed = fedsearch(pkg, "search", "zzz_nothing", "-l")
        assert (listed.returncode, listed.stdout, listed.stderr) == (1, "", "")


class TestListingReadsTheContentIndex:
    def test_l_and_c_narrowed_by_a_ready_index_list_as_rg(
        self, proj: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With the content index built, -l and -c read only the files it names (rg over them, one level
        deep) and list what rg lists, paths relative to the subfolder; a plain query's scan, started
        while the index is asked, is used only when it is as far along."""
        from gateway.cli import relay
        from gateway.index.content import fresh
        from gateway.index.content.narrow import ContentIndex
        from gateway.narrowing import Narrowed

        monkeypatch.setattr(fresh, "RACY_NS", 0)
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        monkeypatch.chdir(proj)
        assert run(capsys, "index")[0] == 0
        answers: list[Any] = []
        narrow = ContentIndex.narrow
        spawned: list[list[str]] = []
        spawn = relay._spawn

        def recorded(self: ContentIndex, *args: Any) -> Any:
            answers.append(narrow(self, *args))
            return answers[-1]

        def started(argv: list[str]) -> Any:
            spawned.append(argv)
            return spawn(argv)

        monkeypatch.setattr(ContentIndex, "narrow", recorded)
        monkeypatch.setattr(relay, "_spawn", started)
        monkeypatch.chdir(proj / "src" / "pkg")
        for flags in (["-l"], ["-c"], ["-l", "-g", "*.py"], ["-c", "-g", "*.py"]):
            code, out, _ = run(capsys, "search", "VALUE", *flags)
            theirs = rg(Path.cwd(), "-s", "-F", *flags, "VALUE").stdout
            assert (code, sorted(out.splitlines())) == (0, sorted(theirs.splitlines())) != (0, [])
        assert len(answers) == 4 and all(isinstance(a, Narrowed) for a in answers)
        assert sum("--max-depth" in argv for argv in spawned) >= 2  # the globbed ones: rg over the files named

    def test_below_a_gigabyte_a_listing_scans(
        self, proj: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Indexes large enough for the one-shot search but under LIST_INDEX_SHARE times that: -l scans (rg
        lists them sooner than asking), the ranked page reads them."""
        from gateway.cli import listing
        from gateway.discovery import default_index_dir
        from gateway.index.content import fresh, paths
        from gateway.index.content.narrow import ContentIndex

        monkeypatch.setattr(fresh, "RACY_NS", 0)
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        monkeypatch.chdir(proj)
        assert run(capsys, "index")[0] == 0
        size = paths.usable_bytes(default_index_dir(), [str(proj.resolve())])
        monkeypatch.setattr(paths, "CLI_MIN_BYTES", size)
        asked: list[str] = []
        narrow = ContentIndex.narrow

        def recorded(self: ContentIndex, root: str, *args: Any) -> Any:
            asked.append(root)
            return narrow(self, root, *args)

        monkeypatch.setattr(ContentIndex, "narrow", recorded)
        assert run(capsys, "search", "VALUE", "-l", "-g", "*.py")[:2] == (0, "src/pkg/sub/deep.py\n")
        assert asked == []
        monkeypatch.setattr(listing, "LIST_INDEX_SHARE", 1)
        assert run(capsys, "search", "VALUE", "-l", "-g", "*.py")[:2] == (0, "src/pkg/sub/deep.py\n")
        assert asked == [str(proj.resolve())]


class TestThePlainPath:
    def test_a_plain_request_is_started_as_a_checked_one_would_be(
        self, pkg: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The rg a plain request starts unchecked is the very rg the checked request asks for."""
        from gateway.cli import listing
        from gateway.cli.flags import normalise, request_data
        from gateway.cli.parser import parse
        from gateway.cli.scope import discovered_scope

        monkeypatch.chdir(pkg)
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        scope = discovered_scope(None)
        here = scope.here()
        assert here is not None
        for argv in (["url_for", "-l"], ["-e", "url_for", "-c", "-s"], ["--files"], ["x", "--vimgrep", "-g", "!*.md"]):
            args = parse(["search", *argv])
            normalise(args)
            data = request_data(args)
            kind = listing.kind_of(args)
            assert kind is not None
            plain = listing._plain(args, kind, data, scope, [here])
            checked = listing._plans(args, kind, data, scope, [here])
            assert plain is not None and checked is not None and checked.named is None
            assert checked.scan is not None and plain.argv == checked.scan.argv

    def test_its_bounds_are_the_requests(self) -> None:
        """The plain path's bounds are those gateway.query.criteria and gateway.query.globs check."""
        from gateway.cli import listing
        from gateway.query.criteria import MAX_QUERY
        from gateway.query.globs import MAX_GLOB_LENGTH, MAX_GLOBS, MAX_STARS
        from gateway.query.syntax import _META

        assert (listing._MOST_QUERY, listing._MOST_GLOBS, listing._MOST_GLOB, listing._MOST_STARS) == (
            MAX_QUERY,
            MAX_GLOBS,
            MAX_GLOB_LENGTH,
            MAX_STARS,
        )
        assert listing._REGEX_META == _META
