"""The CLI (SPEC §4): in-process and as a subprocess, exit codes, next actions that run verbatim."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main
from tests.corpus import make_corpus

FEDSEARCH = [sys.executable, "-m", "gateway.cli"]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class TestInProcess:
    def test_json_prints_the_wire_answer(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints exactly one wire answer; exit 0 when something matched."""
        code, out, _ = _run(capsys, "search", "register_widget", "--root", str(corpus), "--json")
        answer = json.loads(out)
        assert code == 0
        assert {"files", "file_count", "truncated", "limits", "namespaces", "took_ms"} <= set(answer)

    def test_human_output_groups_by_file_and_prints_next(
        self, corpus: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Human output shows namespace:path groups, numbered lines, and runnable next commands."""
        code, out, _ = _run(capsys, "search", "register_widget", "--root", str(corpus), "--files", "1")
        assert code == 0
        assert out.splitlines()[0] == "alpha:src/widgets.py"
        assert "4:def register_widget(name):" in out
        assert "fedsearch search --args-json" in out and f"--root {corpus}" in out

    def test_next_action_runs_verbatim(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Paging by --args-json with each next action reaches every file exactly once."""
        seen: list[tuple[str, str]] = []
        argv: list[str] = ["search", "register_widget", "--files", "1"]
        while True:
            code, out, _ = _run(capsys, *argv, "--root", str(corpus), "--json")
            answer: dict[str, Any] = json.loads(out)
            assert code == 0
            seen += [(g["namespace"], g["file_path"]) for g in answer["files"]]
            pages = [a for a in answer.get("next", []) if a["reason"].startswith("next page")]
            if not pages:
                break
            argv = ["search", "--args-json", json.dumps(pages[0]["args"])]
        assert len(seen) == len(set(seen)) == answer["file_count"] == 6

    def test_printed_command_is_shell_ready(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The printed next command, split as a shell would, is a valid invocation."""
        _, out, _ = _run(capsys, "search", "register_widget", "--root", str(corpus), "--files", "1")
        line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("fedsearch search"))
        argv = shlex.split(line)[1:]
        code, again, _ = _run(capsys, *argv, "--json")
        assert code == 0 and json.loads(again)["limits"]["offset"] == 1

    @pytest.mark.parametrize(
        ("argv", "field"),
        [
            (["search", ""], "query"),
            (["search", "x", "--files", "0"], "files"),
            (["search", "(", "--regex"], "query"),
            (["search", "x", "-n", "nope"], "namespaces"),
            (["search", "--args-json", "{bad"], "args-json"),
            (["search", "--args-json", '{"query": "x", "typo": 1}'], "typo"),
            (["search"], "query"),
        ],
    )
    def test_bad_input_exits_2_naming_the_field(
        self, corpus: Path, capsys: pytest.CaptureFixture[str], argv: list[str], field: str
    ) -> None:
        """Bad input exits 2 with a one-line message naming the field, no traceback."""
        code, out, err = _run(capsys, *argv, "--root", str(corpus))
        assert code == 2 and out == ""
        assert err.startswith(f"fedsearch: invalid {field}:") and err.count("\n") == 1

    def test_nothing_matched_exits_1_with_a_note(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """No match exits 1 and says why."""
        code, out, _ = _run(capsys, "search", "zzz_no_such_thing", "--root", str(corpus))
        assert code == 1 and "nothing matched" in out

    def test_every_namespace_failed_exits_3(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """When every namespace fails (here: ripgrep cannot search by meaning) the exit code is 3."""
        code, out, _ = _run(capsys, "search", "widget", "--semantic", "--root", str(corpus), "--json")
        assert code == 3
        assert all(s["status"] == "unsupported" for s in json.loads(out)["namespaces"])

    def test_bad_config_exits_2_naming_the_key(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A config error exits 2 and names the key."""
        cfg = tmp_path / "bad.toml"
        cfg.write_text('[[namespaces]]\nname = "x"\nbackend = "ripgrep"\nroot = "/nonexistent/dir"\n')
        code, _, err = _run(capsys, "check-config", "--config", str(cfg))
        assert code == 2 and "namespaces[0].root" in err

    def test_namespaces_json(self, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """`fedsearch namespaces --json` lists the discovered checkouts."""
        code, out, _ = _run(capsys, "namespaces", "--root", str(corpus), "--json")
        assert code == 0 and [n["name"] for n in json.loads(out)] == ["alpha", "gamma", "team/beta"]


class TestSubprocess:
    def test_search_as_a_subprocess(self, corpus: Path) -> None:
        """The installed command answers with JSON on stdout and nothing but logs on stderr."""
        proc = subprocess.run(
            [*FEDSEARCH, "search", "RegisterWidget", "--root", str(corpus), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        answer = json.loads(proc.stdout)
        assert [g["file_path"] for g in answer["files"]] == ["lib/registry.go"]

    def test_bad_input_subprocess_has_no_traceback(self, corpus: Path) -> None:
        """Bad input as a subprocess: exit 2, one line, no traceback."""
        proc = subprocess.run(
            [*FEDSEARCH, "search", "x", "--timeout-ms", "5", "--root", str(corpus)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr and "timeout_ms" in proc.stderr
