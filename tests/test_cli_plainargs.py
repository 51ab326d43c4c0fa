"""``fedsearch search`` read without argparse (gateway.cli.plainargs): the very namespace argparse reads.

A command line of switches and positionals is read by :func:`plain_args`; these tests hold its
reading equal to argparse's for every such line hypothesis makes, check that it reads nothing
else (argparse then reads it, and words its errors), and that a listing starts rg with neither
argparse nor typing imported.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cli.parser import command_parser, parse
from gateway.cli.plainargs import DEFAULTS, SWITCHES, plain_args
from tests.cli_support import Capture, run, stand_in_corpus

#: The attributes of rg's output flags (issue 49: gateway.cli.rgflags).
_OUTPUT = frozenset({"heading", "column", "filename", "null", "trim", "quiet"})
#: Positionals as people type them (never a leading "-": those are argparse's).
_POSITIONAL = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"), max_size=12).filter(
    lambda text: not text.startswith("-")
)


def _argparse(argv: list[str]) -> dict[str, object] | None:
    """argparse's namespace for ``fedsearch search ARGV`` as a dict, or None for a usage error."""
    try:
        return vars(parse(["search", *argv]))
    except SystemExit:
        return None


class TestSameReading:
    def test_the_defaults_are_argparses(self) -> None:
        namespace = vars(parse(["search", "x"]))
        assert namespace == {**DEFAULTS, "query": "x", "command": "search"}

    def test_each_switch_sets_what_argparse_sets(self) -> None:
        parser = command_parser("search")
        actions = {option: action for action in parser._actions for option in action.option_strings}
        for token, (name, value, _) in SWITCHES.items():
            if token in actions:
                assert actions[token].dest == name, token
                assert actions[token].nargs == 0, token  # a switch: it takes no value
            ours = plain_args(["search", "q", token])
            assert ours is not None, token
            assert vars(ours) == _argparse(["q", token]), token
            assert getattr(ours, name) == value

    @settings(max_examples=400, deadline=None)
    @given(
        st.lists(
            st.one_of(st.sampled_from(sorted(SWITCHES)), _POSITIONAL),
            max_size=6,
        )
    )
    def test_any_line_of_switches_and_positionals(self, argv: list[str]) -> None:
        """Read alike, or left to argparse (which then may refuse it, as before)."""
        ours = plain_args(["search", *argv])
        if ours is None:
            return
        assert vars(ours) == _argparse(argv)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.sampled_from(sorted(SWITCHES)), min_size=1, max_size=4), _POSITIONAL)
    def test_what_it_reads_argparse_accepts(self, switches: list[str], query: str) -> None:
        """A line argparse accepts is read unless a switch repeats or a group has two: those lines alone go to
        argparse (never a line read otherwise than argparse reads it, by the test above)."""
        ours = plain_args(["search", query, *switches])
        theirs = _argparse([query, *switches])
        names = [SWITCHES[s][0] for s in switches]
        groups = [SWITCHES[s][2] for s in switches if SWITCHES[s][2]]
        if len(set(names)) == len(names) and len(set(groups)) == len(groups):
            assert theirs is not None and ours is not None and vars(ours) == theirs

    @pytest.mark.parametrize(
        "argv",
        [
            ["search", "--help"],
            ["search", "x", "-g", "*.py"],
            ["search", "x", "-li"],
            ["search", "x", "--count-m"],
            ["search", "--", "-x"],
            ["search", "x", "-l", "-c"],
            ["search", "x", "-l", "-l"],
            ["search", "x", "-s", "-i"],
            ["search", "x", "-u", "-u"],
            ["search", "-1"],
            ["search", "x", "-"],
            # rg's output flags taking a value, or two setting one attribute (the last wins: argparse's)
            ["search", "x", "-M", "80"],
            ["search", "x", "--max-columns=80"],
            ["search", "x", "--sort", "path"],
            ["search", "x", "--max-depth", "2"],
            ["search", "x", "-d", "2"],
            ["search", "x", "--heading", "--no-heading"],
            ["search", "x", "-H", "-I"],
            ["search", "x", "-q0"],
            ["search", "--version"],
            ["--version"],
            ["read", "flask/app.py"],
            ["namespaces"],
            [],
        ],
    )
    def test_anything_else_is_argparses(self, argv: list[str]) -> None:
        assert plain_args(argv) is None

    @pytest.mark.parametrize("switch", [s for s, (name, _, _) in SWITCHES.items() if name in _OUTPUT])
    def test_an_output_switch_asks_the_same_rg(self, switch: str) -> None:
        """rg's output flags read on the fast path (gateway.cli.rgflags) leave the request as it was: the rg
        gateway.cli.early starts from it is the very rg the search asks for (adopted, never a wrong one)."""
        from gateway.cli.early import _guess
        from gateway.cli.flags import normalise, request_data

        def data(argv: list[str]) -> dict[str, object]:
            args = plain_args(["search", *argv])
            assert args is not None
            normalise(args)
            return request_data(args)

        plain, flagged = data(["Url_for", "-w"]), data(["Url_for", "-w", switch])
        assert flagged == plain and _guess(flagged) == _guess(plain) is not None

    def test_a_word_character_is_a_regexs(self) -> None:
        """-w's word boundary at each end of literal text: ``\\w`` as re reads it, without re."""
        from gateway.cli.flags import _word_char

        for code in range(0x3000):
            char = chr(code)
            assert _word_char(char) == bool(re.match(r"\w", char)), hex(code)


class TestBehaviour:
    def test_an_error_is_still_argparses(self, capsys: Capture) -> None:
        with pytest.raises(SystemExit) as exited:
            run(capsys, "search", "x", "-l", "-c")
        assert exited.value.code == 2 and "not allowed with argument" in capsys.readouterr().err

    def test_a_listing_reads_as_before(self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
        """``-l -i`` through plain_args lists what rg lists."""
        root = stand_in_corpus(tmp_path, monkeypatch)
        from adapters.ripgrep.spawn import find_rg

        rg = find_rg()
        assert rg is not None
        expected = subprocess.run([rg, "-l", "-i", "Def"], cwd=root, capture_output=True, text=True).stdout
        code, out, _ = run(capsys, "search", "Def", "-l", "-i")
        assert code == 0 and sorted(out.splitlines()) == sorted(expected.splitlines()) and out

    def test_a_listing_imports_neither_argparse_nor_typing(self, tmp_path: Path) -> None:
        """What a plain listing imports before its rg starts and while it runs: the standard library's core and
        our own few modules (argparse, re, typing, json, collections: ~15 ms of its start, bench/README.md)."""
        (tmp_path / "one" / ".git").mkdir(parents=True)
        (tmp_path / "one" / "a.py").write_text("import os\n")
        code = (
            "import sys\n"
            "from gateway.cli.main import main\n"
            "sys.argv = ['fedsearch', 'search', 'import', '-l']\n"
            "code = main(['search', 'import', '-l'])\n"
            "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
        )
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(Path.cwd())}
        env.pop("FEDSEARCH_CONFIG", None)
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.stdout == "one/a.py\n", done.stderr
        modules = set(done.stderr.split())
        assert {"argparse", "typing", "re", "json", "collections", "contextlib", "msgspec"}.isdisjoint(modules)
        assert "gateway.cli.plainargs" in modules and "gateway.cli.listing" in modules


def test_the_namespace_is_argparses_kind() -> None:
    """Code reading a namespace reads ours as argparse's (attributes, vars, equality)."""
    ours = plain_args(["search", "q", "-l"])
    theirs = parse(["search", "q", "-l"])
    assert ours is not None and isinstance(theirs, argparse.Namespace)
    assert ours == theirs and vars(ours) == vars(theirs) and ours.files_with_matches is True
