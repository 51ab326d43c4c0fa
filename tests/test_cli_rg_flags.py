"""rg's everyday output flags in ``fedsearch search`` (issue 49), each held to the real rg byte for byte.

``--heading``/``--no-heading`` (and the default of each: a heading on a terminal, none off one),
``--column``, ``-I``/``-H``, ``-M NUM``, ``--sort path``, ``-0``, ``--max-depth NUM``, ``--trim`` and
``-q``, on a ranked page and in rg's own listings, run from the same folder over the same checkout as
rg (with ``--sort path`` on both sides, so that rg's order is one and the whole output compares); the
combinations fedsearch refuses, each a usage error naming its flag; ``fedsearch --version``; and
``fedsearch read PATH:N``, ``N-M`` and ``N-``. The CLI runs in this process (its stdout no terminal),
or as a process of its own on a pseudo-terminal where the terminal's default is what is tested.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from adapters.ripgrep.spawn import find_rg
from gateway.cli.main import main
from tests.cli_support import Capture, run
from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, subprocess_env
from tests.test_cli_rg import rg as rg_in

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A line past the answer's 256 characters, a multi-byte character before its two matches (byte columns).
LONG = "s = 'ü" + "x" * 300 + "' + hit('long') + hit"
#: The checkout ``proj`` (the tests stand in ``proj/src/pkg``), and ``lib`` beside it. Text files: no
#: declaration header (fedsearch's own line) is printed among rg's.
FILES = {
    "proj": {
        "src/pkg/app.txt": (
            "# the app\n"
            "import hit\n"
            "\thit = 1\n"
            "    two = hit + hit\n"
            "é = 'ü'; hit(); hit()\n"
            f"{LONG}\n"
            "nothing here\n"
            "  context line\n"
            "hit at start\n"
        ),
        "src/pkg/notes.txt": "a note\n\n\n   hit in notes\n",
        "src/pkg/sub/deep.txt": "hit deep\n",
        "src/pkg/sub/deeper/deepest.txt": "hit deepest\n",
        "src/other.txt": "other hit\n",
        "src/py/code.py": "def hit():\n    return hit\n",
        "README.md": "hit the readme\n",
    },
    "lib": {"x.txt": "hit lib\n", "in/y.txt": "hit in lib\n"},
}
#: rg's reading of the query as fedsearch reads it (literal text, smart case), with line numbers.
RG = ("-n", "-F", "-S")


def code_of(done: subprocess.CompletedProcess[str]) -> int:
    """fedsearch's exit code for what rg did: rg's, but 1 where rg searched no file at all (its filters, here
    --max-depth, left none: it says so and exits 2; fedsearch passes the words on, nothing matched)."""
    return 1 if done.returncode == 2 and done.stderr.startswith("rg: No files were searched") else done.returncode


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder holding ``proj`` and ``lib``; no config in the environment."""
    monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
    return make_corpus(tmp_path / "work", FILES)


@pytest.fixture
def pkg(work: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``proj/src/pkg``, the current directory."""
    folder = work / "proj" / "src" / "pkg"
    monkeypatch.chdir(folder)
    return folder


def rg(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real rg with ``argv`` in ``cwd`` (here by default), no config file."""
    return rg_in(cwd or Path.cwd(), *argv)


def same(capsys: Capture, ours: list[str], theirs: list[str]) -> str:
    """``fedsearch search OURS`` (a page of every file) and ``rg THEIRS``, both in path order: byte for byte the
    same, and something; the output."""
    code, out, err = run(capsys, "search", *ours, "--sort", "path", "--page-files", "50")
    expected = rg("--sort", "path", *theirs)
    assert (code, out) == (expected.returncode, expected.stdout), err
    assert code == 0 and out
    return out


def on_terminal(cwd: Path, *argv: str) -> str:
    """``argv`` run in ``cwd`` with a pseudo-terminal as its stdout: what it printed there (line ends as written)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL, env=subprocess_env()
        )
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    return b"".join(chunks).decode().replace("\r\n", "\n")


class TestHeading:
    def test_off_a_terminal_the_page_is_rgs_path_line_text(self, pkg: Path, capsys: Capture) -> None:
        """No flag, stdout a pipe: ``path:line:text``, a line each, as ``rg -n`` prints it there (the summary on
        stderr); the long line read whole from the file, as rg prints it."""
        out = same(capsys, ["hit"], [*RG, "hit"])
        assert "app.txt:3:\thit = 1\n" in out and f"app.txt:6:{LONG}\n" in out

    @pytest.mark.parametrize("flag", ["--heading", "--no-heading"])
    def test_either_asked(self, pkg: Path, capsys: Capture, flag: str) -> None:
        """``--heading``: the path above its lines, a blank line between files; ``--no-heading``: a path each."""
        same(capsys, ["hit", flag], [*RG, flag, "hit"])
        same(capsys, ["hit", flag, "-C", "1"], [*RG, flag, "-C", "1", "hit"])

    def test_the_last_given_wins(self, pkg: Path, capsys: Capture) -> None:
        """As in rg, ``--heading --no-heading`` is no heading."""
        same(capsys, ["hit", "--heading", "--no-heading"], [*RG, "--heading", "--no-heading", "hit"])

    @pytest.mark.parametrize("flags", [[], ["--no-heading"], ["-C", "1"]])
    def test_on_a_terminal_as_rg_there(self, pkg: Path, flags: list[str]) -> None:
        """On a terminal the page has rg's heading by default (and none with --no-heading); the summary follows
        it there, after a blank line."""
        binary = find_rg()
        assert binary is not None
        ours = on_terminal(pkg, *fedsearch_command(), "search", "hit", "--sort", "path", "--color", "never", *flags)
        theirs = on_terminal(pkg, binary, "--sort", "path", "--color", "never", *RG, *flags, "hit")
        assert ("\n\n" in theirs) == (flags != ["--no-heading"])
        assert ours.startswith(theirs + "\n") and "files matched" in ours[len(theirs) :]

    def test_no_heading_prints_no_declaration_header(
        self, work: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without a heading only rg's lines are printed: a declaration's header (fedsearch's) is left out."""
        monkeypatch.chdir(work / "proj" / "src" / "py")
        assert run(capsys, "index")[0] == 0
        same(capsys, ["hit"], [*RG, "hit"])
        code, out, _ = run(capsys, "search", "hit", "--heading")
        assert code == 0 and "hit  function  1-2" in out.splitlines()


class TestLineShape:
    @pytest.mark.parametrize(
        "flags",
        [
            ["--column"],
            ["--column", "-o"],
            ["--column", "-N"],
            ["--column", "-C", "1"],
            ["--column", "--heading"],
            ["-o"],
            ["--trim"],
            ["--trim", "-o"],
            ["--trim", "-C", "1", "--column"],
            ["-N", "--trim"],
        ],
    )
    def test_column_only_matching_and_trim(self, pkg: Path, capsys: Capture, flags: list[str]) -> None:
        """``--column`` is the byte column of the first match (of each part with -o; after é and ü, and in the
        long line, bytes); ``--trim`` leaves out ASCII whitespace at a line's start (a tab, spaces)."""
        out = same(capsys, ["hit", *flags], [*RG, *flags, "hit"])
        if flags == ["--column"]:
            assert "app.txt:5:12:é = 'ü'; hit(); hit()" in out.splitlines()  # bytes: é and ü are two each

    @pytest.mark.parametrize("flags", [["-I"], ["-H"], ["-I", "--heading"], ["-H", "--heading"]])
    def test_filename_flags(self, pkg: Path, capsys: Capture, flags: list[str]) -> None:
        """``-I`` prints no path; ``-H`` prints it even for one file searched alone."""
        same(capsys, ["hit", *flags], [*RG, *flags, "hit"])
        same(capsys, ["hit", *flags, "notes.txt"], [*RG, *flags, "hit", "notes.txt"])

    def test_one_file_alone_prints_no_path(self, pkg: Path, capsys: Capture) -> None:
        """As rg: one file searched alone prints its lines without its path (heading or not)."""
        assert same(capsys, ["hit", "app.txt"], [*RG, "hit", "app.txt"]).startswith("2:import hit\n")
        same(capsys, ["hit", "app.txt", "--heading"], [*RG, "--heading", "hit", "app.txt"])

    @pytest.mark.parametrize("flags", [["-0"], ["-0", "--heading"], ["-0", "-C", "1"], ["-0", "-I"]])
    def test_null(self, pkg: Path, capsys: Capture, flags: list[str]) -> None:
        """``-0``: a NUL after the path instead of ``:``/``-`` (with a heading, instead of its line end)."""
        out = same(capsys, ["hit", *flags], [*RG, *flags, "hit"])
        assert ("\0" in out) == ("-I" not in flags)

    @pytest.mark.parametrize(
        "flags", [["--column", "-M", "20"], ["--heading", "-0", "--trim"], ["-I", "-o", "--column"], ["-C", "1"]]
    )
    def test_a_page_the_service_answers(
        self, work: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch, flags: list[str]
    ) -> None:
        """Over a config's namespaces the service answers the page: its lines are printed alike (under src/, where
        no declaration has a header of fedsearch's)."""
        config = work / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "proj"\nbackend = "ripgrep"\nroot = "{work / "proj"}"\n')
        monkeypatch.chdir(work / "proj")
        same(capsys, ["hit", "src/pkg", *flags, "--config", str(config)], [*RG, *flags, "hit", "src/pkg"])


class TestMaxColumns:
    @pytest.mark.parametrize("most", ["0", "5", "12", "16", "17", "20", "300", "400"])
    @pytest.mark.parametrize(
        "flags", [[], ["--column"], ["-o"], ["-o", "--column"], ["--trim"], ["-C", "1"], ["--heading", "-C", "2"]]
    )
    def test_long_lines_as_rg_omits_them(self, pkg: Path, capsys: Capture, most: str, flags: list[str]) -> None:
        """``-M NUM``: a line of more than NUM bytes, its line end counted (an -o part without; after --trim),
        is rg's notice: ``[Omitted long matching line]``, ``[Omitted long context line]``, and with
        ``--column`` ``[Omitted long line with N matches]``; -M 0 is no limit."""
        out = same(capsys, ["hit", "-M", most, *flags], [*RG, "-M", most, *flags, "hit"])
        if most == "12" and flags == ["--column"]:
            column = len(LONG[: LONG.index("hit")].encode()) + 1
            assert f"app.txt:6:{column}:[Omitted long line with 2 matches]" in out.splitlines()

    def test_with_colours_the_notice_counts_the_matches(self, pkg: Path, capsys: Capture) -> None:
        """With colours rg knows each match: its notice counts them (the escapes aside, the same lines)."""
        code, out, _ = run(capsys, "search", "hit", "-M", "14", "--color", "always", "--sort", "path")
        theirs = rg("--sort", "path", "--color", "always", *RG, "-M", "14", "hit").stdout
        assert code == 0 and ANSI.sub("", out) == ANSI.sub("", theirs)
        assert "[Omitted long line with 2 matches]" in ANSI.sub("", out)

    def test_the_cut_is_the_answers(self) -> None:
        """The page knows a line the answer cut by gateway.models' own bounds."""
        from gateway import models
        from gateway.cli import render

        assert (render.MAX_TEXT, render.ELLIPSIS) == (models.MAX_TEXT, models.ELLIPSIS)
        assert render._cut(models.cut_text(LONG, LONG.index("hit") + 1)) and not render._cut(LONG[:200])


class TestSortAndPaths:
    def test_sort_path_follows_the_paths_given(self, pkg: Path, capsys: Capture) -> None:
        """``--sort path`` over several PATHs: each PATH's files in turn, in the order given, as rg."""
        out = same(
            capsys, ["hit", "sub", "notes.txt", "../other.txt"], [*RG, "hit", "sub", "notes.txt", "../other.txt"]
        )
        assert out.startswith("sub/deep.txt:")

    def test_sort_none_is_rgs_default(self, pkg: Path, capsys: Capture) -> None:
        """``--sort none`` is accepted (rg's default order: the page's is its ranking)."""
        code, out, _ = run(capsys, "search", "hit", "--sort", "none")
        expected = rg(*RG, "hit").stdout
        assert code == 0 and sorted(out.splitlines()) == sorted(expected.splitlines())


class TestMaxDepth:
    @pytest.mark.parametrize("depth", ["0", "1", "2", "5"])
    def test_in_a_subfolder(self, pkg: Path, capsys: Capture, depth: str) -> None:
        """From a subfolder of a checkout, counted from there: the page and the listings as rg."""
        code, out, _ = run(capsys, "search", "hit", "--max-depth", depth, "--sort", "path")
        expected = rg("--sort", "path", *RG, "--max-depth", depth, "hit")
        assert (code, out) == (code_of(expected), expected.stdout)
        for listing in ("-l", "-c"):
            code, out, err = run(capsys, "search", "hit", listing, "--max-depth", depth, "--sort", "path")
            expected = rg("--sort", "path", "-F", "-S", listing, "--max-depth", depth, "hit")
            assert (code, out, err) == (code_of(expected), expected.stdout, expected.stderr)

    @pytest.mark.parametrize("depth", ["1", "2", "3", "4"])
    def test_over_checkouts_side_by_side(
        self, work: Path, capsys: Capture, depth: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From the folder holding ``proj`` and ``lib`` (each one level down): the depth counted from there."""
        monkeypatch.chdir(work)
        code, out, _ = run(capsys, "search", "hit", "--max-depth", depth, "--sort", "path", "--page-files", "50")
        expected = rg("--sort", "path", *RG, "--max-depth", depth, "hit")
        assert (code, out) == (code_of(expected), expected.stdout)
        code, out, _ = run(capsys, "search", "hit", "-l", "--max-depth", depth, "--sort", "path")
        expected = rg("--sort", "path", "-F", "-S", "-l", "--max-depth", depth, "hit")
        assert (code, out) == (code_of(expected), expected.stdout)

    @pytest.mark.parametrize(
        "paths", [["sub"], ["sub/deeper/deepest.txt"], ["../other.txt", "sub"], ["../../README.md", "sub/deeper"]]
    )
    @pytest.mark.parametrize("depth", ["0", "1"])
    def test_from_each_path(self, pkg: Path, capsys: Capture, paths: list[str], depth: str) -> None:
        """With PATHs, counted from each (a file given is searched whatever the depth), as rg."""
        for listing in ([], ["-c"]):
            code, out, _ = run(capsys, "search", "hit", *listing, "--max-depth", depth, *paths)
            expected = rg(*RG, *listing, "--max-depth", depth, "hit", *paths)
            assert (code, sorted(out.splitlines())) == (code_of(expected), sorted(expected.stdout.splitlines()))

    def test_paths_at_different_depths(self, pkg: Path, capsys: Capture) -> None:
        """Folders at different depths of their checkout: rg's listing counts from each as typed; a page's one rg
        runs over the checkout's root and cannot, and says so, naming the flag."""
        code, out, _ = run(capsys, "search", "hit", "-c", "--max-depth", "1", "sub", "../../README.md", "..")
        expected = rg("-F", "-S", "-c", "--max-depth", "1", "hit", "sub", "../../README.md", "..")
        assert (code, sorted(out.splitlines())) == (0, sorted(expected.stdout.splitlines()))
        for paths in (["sub", ".."], ["sub/deeper/deepest.txt", "sub"]):  # (that file: deeper than sub's walk)
            code, out, err = run(capsys, "search", "hit", "--max-depth", "1", *paths)
            assert (code, out) == (2, "") and err.startswith("fedsearch: invalid max-depth: --max-depth 1: ")

    def test_checkouts_at_different_depths_are_refused(
        self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Checkouts one and two levels below: one rg cannot count one depth for both; said, naming the flag."""
        top = make_corpus(tmp_path / "mixed", {"a": {"x.txt": "hit\n"}, "team/b": {"y.txt": "hit\n"}})
        monkeypatch.chdir(top)
        for listing in ([], ["-l"]):
            code, out, err = run(capsys, "search", "hit", "--max-depth", "2", *listing)
            assert (code, out) == (2, "") and err.startswith("fedsearch: invalid max-depth: --max-depth 2: ")
        monkeypatch.chdir(top / "team")  # from there one checkout alone: as rg
        code, out, _ = run(capsys, "search", "hit", "--max-depth", "2")
        assert (code, out) == (0, rg(*RG, "--max-depth", "2", "hit").stdout)


class TestListings:
    @pytest.mark.parametrize("listing", ["-l", "-c", "--count-matches", "--vimgrep"])
    @pytest.mark.parametrize(
        "flags",
        [["-0"], ["-I"], ["-H"], ["--column"], ["--heading"], ["-M", "12"], ["--trim"], ["-0", "-I"], ["--no-heading"]],
    )
    def test_rg_prints_them(self, pkg: Path, capsys: Capture, listing: str, flags: list[str]) -> None:
        """Over the checkouts found here a listing is rg's: each flag changes it as it changes rg's."""
        for given in ([], ["app.txt"]):
            code, out, _ = run(capsys, "search", "hit", listing, *flags, "--sort", "path", *given)
            expected = rg("--sort", "path", "-F", "-S", listing, *flags, "hit", *given)
            assert (code, out) == (expected.returncode, expected.stdout) != (0, "")

    @pytest.mark.parametrize("listing", ["-l", "-c", "--vimgrep"])
    @pytest.mark.parametrize("flags", [["-0"], ["-I"], ["-0", "-I"], []])
    def test_read_through_for_an_include_glob(self, pkg: Path, capsys: Capture, listing: str, flags: list[str]) -> None:
        """An include glob is applied to rg's output (rg prints NUL-ended paths): -0 and -I are printed as rg."""
        code, out, _ = run(capsys, "search", "hit", listing, *flags, "-g", "*.txt", "--sort", "path")
        expected = rg("--sort", "path", "-F", "-S", listing, *flags, "-g", "*.txt", "hit")
        assert (code, out) == (expected.returncode, expected.stdout) != (0, "")

    def test_a_config_listing_prints_null_and_no_filename(
        self, work: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From the service's pages (a config), -l -0 and -c -I print as rg (in rank order: compared sorted)."""
        config = work / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "proj"\nbackend = "ripgrep"\nroot = "{work / "proj"}"\n')
        monkeypatch.chdir(work / "proj")
        code, out, _ = run(capsys, "search", "hit", "-l", "-0", "--config", str(config))
        expected = rg("-F", "-S", "-l", "-0", "hit").stdout
        assert code == 0 and sorted(out.split("\0")) == sorted(expected.split("\0"))
        code, out, _ = run(capsys, "search", "hit", "-c", "-I", "--config", str(config))
        expected = rg("-F", "-S", "-c", "-I", "hit").stdout
        assert code == 0 and sorted(out.splitlines()) == sorted(expected.splitlines())


class TestQuiet:
    @pytest.mark.parametrize("flags", [[], ["-l"], ["-c"], ["--vimgrep"], ["--heading"], ["--json"]])
    def test_the_exit_code_alone(self, pkg: Path, capsys: Capture, flags: list[str]) -> None:
        """``-q``: nothing on stdout (nor a summary on stderr); 0 when something matched, 1 when nothing did, as rg."""
        for flag in ("-q", "--quiet"):
            assert run(capsys, "search", "hit", flag, *flags) == (0, "", "") == (rg("-q", "hit").returncode, "", "")
            assert run(capsys, "search", "zzz_nothing", flag, *flags)[:2] == (1, "") == (rg("-q", "zzz").returncode, "")

    def test_over_a_config(self, work: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
        """Over a config's namespaces (the service's pages) alike."""
        config = work / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "proj"\nbackend = "ripgrep"\nroot = "{work / "proj"}"\n')
        monkeypatch.chdir(work / "proj")
        assert run(capsys, "search", "hit", "-q", "--config", str(config)) == (0, "", "")
        assert run(capsys, "search", "zzz_nothing", "-q", "--config", str(config))[:2] == (1, "")

    def test_an_error_is_still_said(self, pkg: Path, capsys: Capture) -> None:
        """Bad input still exits 2 with its line on stderr."""
        code, out, err = run(capsys, "search", "x", "-q", "--page-files", "0")
        assert (code, out) == (2, "") and err.startswith("fedsearch: invalid files:")


class TestRefused:
    @pytest.mark.parametrize(
        ("argv", "field"),
        [
            (["hit", "--json", "--column"], "column"),
            (["hit", "--json", "--heading"], "heading"),
            (["hit", "--json", "-I"], "filename"),
            (["hit", "--json", "-M", "10"], "max-columns"),
            (["hit", "--json", "--trim"], "trim"),
            (["hit", "--json", "-0"], "null"),
            (["hit", "--json", "--sort", "path"], "sort"),
            (["hit", "-M", "-1"], "max-columns"),
            (["hit", "--max-depth", "-1"], "max-depth"),
            (["hit", "--semantic", "--column"], "column"),
            (["hit", "--semantic", "-M", "20"], "max-columns"),
            (["hit", "--semantic", "--no-heading"], "heading"),
        ],
    )
    def test_usage_errors_name_the_flag(self, pkg: Path, capsys: Capture, argv: list[str], field: str) -> None:
        """What fedsearch cannot print as rg does is refused: exit 2, one line naming the field; problem JSON on
        stdout with --json."""
        code, out, err = run(capsys, "search", *argv)
        if "--json" in argv:
            problem = json.loads(out)
            assert (code, err, problem["field"], problem["status"]) == (2, "", field, 400)
        else:
            assert (code, out) == (2, "") and err.startswith(f"fedsearch: invalid {field}:") and err.count("\n") == 1

    @pytest.mark.parametrize(
        ("flags", "field"),
        [(["-M", "10"], "max-columns"), (["--trim"], "trim"), (["--sort", "path"], "sort"), (["-d", "1"], "max-depth")],
    )
    def test_what_only_rgs_listing_does(
        self, work: Path, capsys: Capture, flags: list[str], field: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A listing from the service's pages (a config's namespaces) refuses what rg applies as it reads or walks;
        --max-depth is refused by the service's page too."""
        config = work / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "proj"\nbackend = "ripgrep"\nroot = "{work / "proj"}"\n')
        monkeypatch.chdir(work / "proj")
        code, out, err = run(capsys, "search", "hit", "-l", *flags, "--config", str(config))
        expected = "config" if field == "max-depth" else field
        assert (code, out) == (2, "") and err.startswith(f"fedsearch: invalid {expected}:"), err
        if field == "max-depth":
            for where in (["--config", str(config)], ["--server", "http://127.0.0.1:9"]):
                code, _, err = run(capsys, "search", "hit", *flags, *where)
                assert code == 2 and "--max-depth works on the checkouts found here" in err

    def test_an_unknown_sort_is_argparses_error(self, pkg: Path, capsys: Capture) -> None:
        """``--sort modified`` (rg's, not fedsearch's): a usage error naming --sort."""
        with pytest.raises(SystemExit) as exited:
            main(["search", "hit", "--sort", "modified"])
        assert exited.value.code == 2 and "argument --sort: invalid choice: 'modified'" in capsys.readouterr().err

    def test_a_negative_number_is_still_a_value(self, pkg: Path, capsys: Capture) -> None:
        """``-0`` is an option; ``-A -1`` is still a value (refused by its own rule), ``-- -1`` a query."""
        code, _, err = run(capsys, "search", "x", "-A", "-1")
        assert code == 2 and err.startswith("fedsearch: invalid context_lines:")
        assert run(capsys, "search", "--", "-1")[0] == 1


class TestVersion:
    def expected(self) -> str:
        pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
        binary = find_rg()
        assert binary is not None
        first = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
        return f"fedsearch {pyproject['project']['version']}\n{first} ({binary})\n"

    @pytest.mark.parametrize("argv", [["--version"], ["-V"], ["search", "--version"], ["search", "x", "-V"]])
    def test_ours_and_rgs(self, argv: list[str]) -> None:
        """fedsearch's version (pyproject's) and the rg it runs, one line each; ``search --version`` as rg's."""
        done = subprocess.run([*fedsearch_command(), *argv], capture_output=True, text=True, env=subprocess_env())
        assert (done.returncode, done.stdout, done.stderr) == (0, self.expected(), "")

    def test_it_imports_no_command(self, tmp_path: Path) -> None:
        """``--version`` reads neither argparse nor a command's modules (as fast as --help, or faster)."""
        code = (
            "import sys\n"
            "from gateway.cli.main import main\n"
            "assert main(['--version']) == 0\n"
            "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
        )
        env = {**subprocess_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout == self.expected(), done.stderr
        modules = set(done.stderr.split())
        assert {"argparse", "subprocess", "importlib.metadata", "gateway.cli.search", "msgspec"}.isdisjoint(modules)


class TestRead:
    def test_a_line_alone(self, pkg: Path, capsys: Capture) -> None:
        """``PATH:N`` is line N alone, as ``rg -n`` and editors name it."""
        assert run(capsys, "read", "app.txt:3")[:2] == (0, "3\t\thit = 1\n")
        line = rg("-n", "hit at start", "app.txt").stdout.partition(":")[0]
        assert run(capsys, "read", f"app.txt:{line}")[:2] == (0, f"{line}\thit at start\n")

    def test_a_range(self, pkg: Path, capsys: Capture) -> None:
        """``PATH:N-M`` is N to M, as before."""
        assert run(capsys, "read", "app.txt:2-3")[:2] == (0, "2\timport hit\n3\t\thit = 1\n")

    def test_from_a_line_on(self, pkg: Path, capsys: Capture) -> None:
        """``PATH:N-`` reads from N to the end (within the read's usual slice)."""
        code, out, _ = run(capsys, "read", "app.txt:8-")
        assert (code, out) == (0, "8\t  context line\n9\thit at start\n")
        code, out, _ = run(capsys, "read", "proj/src/pkg/app.txt:7-", "--json")
        result = json.loads(out)
        assert code == 0 and (result["start_line"], result["end_line"], len(result["lines"])) == (7, 9, 3)

    def test_past_the_end_names_the_line(self, pkg: Path, capsys: Capture) -> None:
        """A line past the end is an error naming start_line."""
        code, out, err = run(capsys, "read", "app.txt:99")
        assert (code, out) == (2, "") and err.startswith("fedsearch: invalid start_line:")
