"""``fedsearch search`` (SPEC §4): the wire answer, rg's flags and output, exit codes, next actions."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import search as search_cmd
from gateway.cli.main import main
from tests.cli_support import Capture, run, stand_in_corpus
from tests.corpus import make_corpus

ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Lines of a file for context tests: matches on 3, 4 and 12.
CONTEXT_FILE = "".join(f"line {n}{' needle' if n in (3, 4, 12) else ''}\n" for n in range(1, 17))


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test corpus, the current directory (paths print relative to it)."""
    root = stand_in_corpus(tmp_path, monkeypatch)
    (root / "alpha" / "notes.txt").write_text(CONTEXT_FILE)
    return root


def search_json(capsys: Capture, *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "search", *argv, "--json")
    assert code in (0, 1), err
    answer: dict[str, Any] = json.loads(out)
    return answer


class TestAnswer:
    def test_json_prints_the_wire_answer(self, corpus: Path, capsys: Capture) -> None:
        """--json prints exactly one wire answer; exit 0 when something matched."""
        code, out, _ = run(capsys, "search", "register_widget", "--json")
        answer = json.loads(out)
        assert code == 0
        assert {"files", "file_count", "truncated", "limits", "namespaces", "took_ms"} <= set(answer)

    def test_next_action_runs_verbatim(self, corpus: Path, capsys: Capture) -> None:
        """Paging by --args-json with each next action reaches every file exactly once."""
        seen: list[tuple[str, str]] = []
        argv: list[str] = ["register_widget", "--page-files", "1"]
        while True:
            answer = search_json(capsys, *argv)
            seen += [(g["namespace"], g["file_path"]) for g in answer["files"]]
            pages = [a for a in answer.get("next", []) if a["reason"].startswith("next page")]
            if not pages:
                break
            argv = ["--args-json", json.dumps(pages[0]["args"])]
        assert len(seen) == len(set(seen)) == answer["file_count"] == 6

    def test_printed_command_is_shell_ready(self, corpus: Path, capsys: Capture) -> None:
        """The printed next command, split as a shell would, is a valid invocation."""
        _, _, err = run(capsys, "search", "register_widget", "--root", str(corpus), "--page-files", "1")
        line = next(ln.strip() for ln in err.splitlines() if ln.strip().startswith("fedsearch search"))
        assert line.endswith(f"--root {corpus}")
        code, again, _ = run(capsys, *shlex.split(line)[1:], "--json")
        assert code == 0 and json.loads(again)["limits"]["offset"] == 1

    def test_nothing_matched_exits_1_with_a_note(self, corpus: Path, capsys: Capture) -> None:
        """No match exits 1 and says why (on stderr, off a terminal: no result to print)."""
        code, out, err = run(capsys, "search", "zzz_no_such_thing")
        assert (code, out) == (1, "") and "nothing matched 'zzz_no_such_thing' in 3 namespaces" in err

    def test_a_mode_no_namespace_has_exits_1_with_one_fallback(
        self, corpus: Path, tmp_path: Path, capsys: Capture
    ) -> None:
        """--semantic over checkouts that cannot do it (no index): nothing matched (1), not failed (3); one fallback."""
        config = tmp_path / "no-index.toml"
        config.write_text(
            "[index]\nenabled = false\n"
            + "".join(
                f'[[namespaces]]\nname = "{n}"\nbackend = "ripgrep"\nroot = "{corpus / n}"\n'
                for n in ("alpha", "gamma", "team/beta")
            )
        )
        code, out, _ = run(capsys, "search", "widget", "--semantic", "--json", "--config", str(config))
        answer = json.loads(out)
        assert code == 1
        (action,) = answer["next"]
        assert action["args"]["mode"] == "exact" and action["args"]["namespaces"] == ["alpha", "gamma", "team/beta"]

    def test_every_namespace_failed_exits_3(self, tmp_path: Path, capsys: Capture) -> None:
        """When every namespace fails (peers that refuse connections) the exit code is 3."""
        config = tmp_path / "down.toml"
        config.write_text(
            "".join(f'[[namespaces]]\nname = "p{i}"\nbackend = "gateway"\nurl = "http://127.0.0.1:9"\n' for i in (1, 2))
        )
        code, out, _ = run(capsys, "search", "x", "--config", str(config), "--json")
        assert code == 3
        assert all(s["status"] == "unavailable" for s in json.loads(out)["namespaces"])


class TestOutput:
    def test_files_are_grouped_under_paths_relative_to_here(self, corpus: Path, capsys: Capture) -> None:
        """Each file is printed under its path relative to the current directory, its lines numbered."""
        code, out, _ = run(capsys, "search", "register_widget", "--page-files", "1", "--heading")
        assert code == 0
        lines = out.splitlines()
        assert lines[0] == "alpha/src/widgets.py"
        assert lines[1:4] == [
            "register_widget  function  4-5",
            "4:def register_widget(name):",
            "8:register_widget('x')",
        ]

    def test_paths_from_inside_a_checkout_open_from_there(self, corpus: Path, capsys: Capture) -> None:
        """Run in a subfolder, a file of another folder named by PATH is printed with ../ so an editor opens it."""
        os.chdir(corpus / "alpha" / "src")
        _, out, _ = run(capsys, "search", "register_widget", ".", "..", "--heading")
        assert "widgets.py" in out.splitlines() and "../README.md" in out.splitlines()
        assert (Path.cwd() / "../README.md").is_file()

    def test_context_blocks_are_merged_with_separators(self, corpus: Path, capsys: Capture) -> None:
        """-C 1 prints each line once, matches as N:, context as N-, and -- between blocks, as rg does."""
        _, out, _ = run(capsys, "search", "needle", "-C", "1", "--heading")
        block = out.split("\n\n")[0].splitlines()
        assert block == [
            "alpha/notes.txt",
            "2-line 2",
            "3:line 3 needle",
            "4:line 4 needle",
            "5-line 5",
            "--",
            "11-line 11",
            "12:line 12 needle",
            "13-line 13",
        ]

    def test_after_and_before_context_are_one_sided(self, corpus: Path, capsys: Capture) -> None:
        """-A 2 shows two lines after each match and none before; -B 1 the other way."""
        _, out, _ = run(capsys, "search", "needle", "-A", "2", "--heading")
        assert out.split("\n\n")[0].splitlines()[1:5] == ["3:line 3 needle", "4:line 4 needle", "5-line 5", "6-line 6"]
        _, out, _ = run(capsys, "search", "needle", "-B", "1", "--heading")
        assert out.split("\n\n")[0].splitlines()[1:4] == ["2-line 2", "3:line 3 needle", "4:line 4 needle"]

    def test_color_always_colours_as_rg(self, corpus: Path, capsys: Capture) -> None:
        """--color always: the path magenta, a declaration's header dim, line numbers green, matches bold red."""
        _, out, _ = run(capsys, "search", "register_widget", "--color", "always", "--page-files", "1", "--heading")
        first, header, second = out.splitlines()[:3]
        assert first == "\x1b[35malpha/src/widgets.py\x1b[0m"
        assert header == "\x1b[2mregister_widget  function  4-5\x1b[0m"
        assert second == "\x1b[32m4\x1b[0m:def \x1b[1;31mregister_widget\x1b[0m(name):"

    def test_color_never_and_off_a_terminal_prints_none(self, corpus: Path, capsys: Capture) -> None:
        """--color never, and auto with no terminal, print no escape sequence."""
        for flag in ("never", "auto"):
            _, out, _ = run(capsys, "search", "register_widget", "--color", flag)
            assert ANSI.search(out) is None

    @pytest.mark.parametrize("configured", [False, True])
    def test_files_with_matches_lists_every_file(
        self, corpus: Path, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch, configured: bool
    ) -> None:
        """-l prints every matching file once and nothing else: rg's listing over the checkouts found here,
        and over a config's namespaces every page of the service's answer, as many as it takes."""
        monkeypatch.setattr(search_cmd, "LIST_FILES", 2)  # three pages
        config = tmp_path / "c.toml"
        config.write_text(
            "".join(
                f'[[namespaces]]\nname = "{n}"\nbackend = "ripgrep"\nroot = "{corpus / n}"\n'
                for n in ("alpha", "gamma", "team/beta")
            )
        )
        code, out, err = run(
            capsys, "search", "register_widget", "-l", *(["--config", str(config)] if configured else [])
        )
        assert code == 0 and err == ""
        assert sorted(out.splitlines()) == [
            "alpha/README.md",
            "alpha/src/util.py",
            "alpha/src/widgets.py",
            "team/beta/docs/guide.md",
            "team/beta/lib/registry.go",
            "team/beta/vendor/dep/widget.go",
        ]

    def test_count_prints_matched_lines_per_file(self, corpus: Path, capsys: Capture) -> None:
        """-c prints path:count of matched lines, as rg -c."""
        _, out, _ = run(capsys, "search", "needle", "-c")
        assert out == "alpha/notes.txt:3\n"

    def test_vimgrep_prints_path_line_column_text(self, corpus: Path, capsys: Capture) -> None:
        """--vimgrep prints one path:line:column:text per matched line."""
        _, out, _ = run(capsys, "search", "RegisterWidget", "--vimgrep")
        assert out == "team/beta/lib/registry.go:3:6:func RegisterWidget() {}\n"

    def test_a_listing_with_nothing_exits_1(self, corpus: Path, capsys: Capture) -> None:
        """-l that finds nothing prints nothing and exits 1, as rg."""
        assert run(capsys, "search", "zzz_no_such_thing", "-l")[:2] == (1, "")


class TestRgFlags:
    def test_options_may_follow_the_query_and_paths(self, corpus: Path, capsys: Capture) -> None:
        """Flags after QUERY and PATH are read as rg reads them."""
        answer = search_json(capsys, "register_widget", "alpha", "-i", "--page-files", "5")
        assert {g["namespace"] for g in answer["files"]} == {"alpha"}

    def test_a_query_after_double_dash_may_start_with_a_dash(self, corpus: Path, capsys: Capture) -> None:
        """After --, a query such as -x is the query, as in rg; options before it still count."""
        code, out, err = run(capsys, "search", "-i", "--", "-x", "alpha")
        assert (code, out) == (1, "") and "nothing matched '-x' in alpha" in err  # the PATH as typed

    def test_ignore_case_and_case_sensitive(self, corpus: Path, capsys: Capture) -> None:
        """-i matches any case; -s only the case given."""
        insensitive = search_json(capsys, "registerwidget", "-i")
        assert [g["file_path"] for g in insensitive["files"]] == ["lib/registry.go"]
        assert search_json(capsys, "registerwidget", "-s")["files"] == []

    def test_word_regexp_matches_whole_words(self, corpus: Path, capsys: Capture) -> None:
        """-w: 'register' alone is no whole word in 'register_widget'."""
        assert search_json(capsys, "register", "-w")["files"] == []
        assert search_json(capsys, "register_widget", "-w")["files"]

    def test_word_regexp_bounds_only_word_ends_of_literal_text(self, corpus: Path, capsys: Capture) -> None:
        """-w on literal text: 'register_widget(' is a whole word before '(' ; 'widget(' is inside one."""
        answer = search_json(capsys, "register_widget(", "-w")
        assert {g["file_path"] for g in answer["files"]} == {"src/widgets.py", "docs/guide.md"}
        assert search_json(capsys, "widget(", "-w")["files"] == []
        assert search_json(capsys, "widget(")["files"]

    def test_lang_takes_rg_type_names(self, corpus: Path, capsys: Capture) -> None:
        """-t go (and --lang) filter by language."""
        answer = search_json(capsys, "register_widget", "-t", "go")
        assert {g["file_path"] for g in answer["files"]} == {"lib/registry.go", "vendor/dep/widget.go"}

    def test_a_trailing_checkout_searches_only_it(self, corpus: Path, capsys: Capture) -> None:
        """A trailing PATH naming a checkout searches only that namespace."""
        answer = search_json(capsys, "register_widget", "team/beta")
        assert {s["name"] for s in answer["namespaces"]} == {"team/beta"}

    def test_a_trailing_folder_inside_a_checkout_narrows_to_it(self, corpus: Path, capsys: Capture) -> None:
        """A folder inside a checkout searches only under it; a file, only it."""
        answer = search_json(capsys, "register_widget", "alpha/src")
        assert {(g["namespace"], g["file_path"]) for g in answer["files"]} == {
            ("alpha", "src/widgets.py"),
            ("alpha", "src/util.py"),
        }
        answer = search_json(capsys, "register_widget", "alpha/src/util.py")
        assert [g["file_path"] for g in answer["files"]] == ["src/util.py"]

    def test_a_folder_of_checkouts_searches_those_inside(self, tmp_path: Path, capsys: Capture) -> None:
        """A PATH holding checkouts searches each checkout under it."""
        make_corpus(tmp_path / "src")
        os.chdir(tmp_path)
        answer = search_json(capsys, "register_widget", "src/team", "--root", "src")
        assert {s["name"] for s in answer["namespaces"]} == {"team/beta"}

    def test_a_path_outside_every_namespace_is_bad_input(self, corpus: Path, tmp_path: Path, capsys: Capture) -> None:
        """A PATH in no checkout exits 2 naming it."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        code, _, err = run(capsys, "search", "x", str(elsewhere))
        assert code == 2 and f"{elsewhere} is not in any namespace" in err

    def test_an_unknown_flag_prints_the_search_usage(self, corpus: Path, capsys: Capture) -> None:
        """A flag search does not have is an error with search's usage, not the top level's."""
        with pytest.raises(SystemExit) as exited:
            main(["search", "x", "--no-such-flag"])
        err = capsys.readouterr().err
        assert exited.value.code == 2
        assert err.startswith("usage: fedsearch search") and "--no-such-flag" in err

    def test_fixed_strings_and_regex_exclude_each_other(self, corpus: Path, capsys: Capture) -> None:
        """-F with --regex is a usage error."""
        with pytest.raises(SystemExit):
            main(["search", "x", "-F", "--regex"])
        assert "not allowed with" in capsys.readouterr().err


class TestWhere:
    def test_inside_a_checkout_without_root_searches_there_and_below(self, corpus: Path, capsys: Capture) -> None:
        """Run in a subfolder of a checkout with no --root, the search covers that checkout's namespace
        under the folder it runs in, as rg and git grep do."""
        os.chdir(corpus / "team" / "beta" / "docs")
        answer = search_json(capsys, "register_widget")
        assert [s["name"] for s in answer["namespaces"]] == ["beta"]
        assert [f["file_path"] for f in answer["files"]] == ["docs/guide.md"]

    def test_a_root_without_checkouts_warns(self, tmp_path: Path, capsys: Capture) -> None:
        """A --root holding no checkout warns on stderr that there is nothing to search."""
        code, out, err = run(capsys, "search", "x", "--root", str(tmp_path))
        assert (code, out) == (1, "")
        assert f"warning: no git checkout under {tmp_path}" in err
        assert "no namespace to search" in err


class TestBadInput:
    @pytest.mark.parametrize(
        ("argv", "field"),
        [
            (["search", ""], "query"),
            (["search", "x", "--page-files", "0"], "files"),
            (["search", "(", "--regex"], "query"),
            (["search", "x", "--ns", "nope"], "namespaces"),
            (["search", "--args-json", "{bad"], "args-json"),
            (["search", "--args-json", '{"query": "x", "typo": 1}'], "typo"),
            (["search"], "query"),
            (["search", "x", "-C", "11"], "context_lines"),
            (["search", "x", "-A", "-1"], "context_lines"),
            (["search", "x", "-w", "--semantic"], "word-regexp"),
        ],
    )
    def test_bad_input_exits_2_naming_the_field(
        self, corpus: Path, capsys: Capture, argv: list[str], field: str
    ) -> None:
        """Bad input exits 2 with a one-line message naming the field, no traceback."""
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.startswith(f"fedsearch: invalid {field}:") and err.count("\n") == 1

    def test_json_errors_are_problem_json_on_stdout(self, corpus: Path, capsys: Capture) -> None:
        """With --json an error is problem JSON on stdout (RFC 9457), the exit code still 2."""
        code, out, err = run(capsys, "search", "x", "--page-files", "0", "--json")
        problem = json.loads(out)
        assert code == 2 and err == ""
        assert problem["status"] == 400 and problem["field"] == "files" and problem["type"] == "about:blank"

    def test_json_usage_errors_are_problem_json(self, corpus: Path, capsys: Capture) -> None:
        """With --json even a flag argparse refuses is problem JSON on stdout."""
        with pytest.raises(SystemExit) as exited:
            main(["search", "x", "--json", "--no-such-flag"])
        assert exited.value.code == 2
        assert "--no-such-flag" in json.loads(capsys.readouterr().out)["detail"]

    def test_an_unknown_language_lists_the_known_ones(self, corpus: Path, capsys: Capture) -> None:
        """-t with an unknown language names the languages there are."""
        code, _, err = run(capsys, "search", "x", "-t", "klingon")
        assert code == 2 and "unknown language 'klingon'" in err and "python" in err and "rust" in err

    def test_a_literal_query_that_looks_like_a_regex_gets_a_hint(self, corpus: Path, capsys: Capture) -> None:
        """Nothing matched for literal text such as 'def \\w+_widget\\(': a hint to add --regex, as typed."""
        code, _, err = run(capsys, "search", r"def \w+_widget\(")
        assert code == 1
        assert err.endswith("fedsearch: hint: def \\w+_widget\\( looks like a regex: add --regex to search it as one\n")
        assert run(capsys, "search", r"def \w+_widget\(", "--regex")[0] == 0


class TestDeclarations:
    def test_a_declaration_prints_its_header_above_its_lines(self) -> None:
        """A hit with `lines` (a declaration) is printed as a header line, then each of its matched lines."""
        from gateway.cli.render import Style, human

        hit = {
            "kind": "method",
            "qualified_name": "Flask.url_for",
            "start_line": 10,
            "end_line": 20,
            "text": "    def url_for(self):",
            "lines": [
                {"line": 10, "column": 9, "text": "    def url_for(self):"},
                {"line": 14, "column": 5, "text": "    url_for = 1"},
            ],
        }
        answer = {
            "files": [{"namespace": "flask", "file_path": "app.py", "hit_count": 1, "hits": [hit]}],
            "file_count": 1,
            "limits": {"offset": 0},
            "namespaces": [{"name": "flask", "status": "ok"}],
        }
        out = human(answer, Style(), lambda ns, path: f"{ns}/{path}")
        assert out.splitlines()[:4] == [
            "flask/app.py",
            "Flask.url_for  method  10-20",
            "10:    def url_for(self):",
            "14:    url_for = 1",
        ]

    def test_a_declaration_with_no_line_to_show_prints_its_header_alone(self) -> None:
        """A declaration hit with neither lines nor text of its own (a semantic one) prints its header, and
        under it why it matched (its reason)."""
        from gateway.cli.render import Style, human

        hit = {"kind": "function", "qualified_name": "url_for", "start_line": 3, "end_line": 9, "reason": "r"}
        hit["score"] = 0.8
        group = {"namespace": "flask", "file_path": "app.py", "hit_count": 1, "hits": [hit]}
        out = human({"files": [group]}, Style(), lambda ns, path: f"{ns}/{path}")
        assert out == "flask/app.py\nurl_for  function  3-9 (0.80)\n  why: r\n"
