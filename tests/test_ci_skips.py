"""Under CI=true a skip fails, saying why, unless its reason is allowed (tests/ci_skips.py).

Each test runs a small suite of its own in a real pytest process with the plugin loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ci_skips import ALLOWED

REPO = Path(__file__).resolve().parents[1]
ALLOWED_REASON = sorted(ALLOWED)[0]
SUITE = f"""
import pytest

def test_runs():
    pass

def test_missing_tool():
    pytest.skip("frobnicate is not installed")

@pytest.mark.skipif(True, reason="no such file: fixtures/x.json")
def test_missing_file():
    pass

@pytest.mark.skipif(True, reason={ALLOWED_REASON!r})
def test_allowed():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    raise AssertionError
"""


def run_suite(tmp_path: Path, ci: str | None, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider", "-rsfE", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


class TestUnderCi:
    def test_a_skip_for_a_missing_tool_or_file_fails_naming_it(self, tmp_path: Path) -> None:
        """With CI=true, skips for a missing tool and a missing file fail the run, each reason printed."""
        proc = run_suite(tmp_path, "true", {"test_suite.py": SUITE})
        assert proc.returncode == 1, proc.stdout
        assert "CI must run every test: frobnicate is not installed" in proc.stdout
        assert "CI must run every test: no such file: fixtures/x.json" in proc.stdout
        assert "skips CI refused" in proc.stdout
        assert "test_suite.py::test_missing_tool: frobnicate is not installed" in proc.stdout

    def test_an_allowed_reason_stays_a_skip_and_xfail_is_untouched(self, tmp_path: Path) -> None:
        """With CI=true, the allowed reason is still a skip and an xfail still an xfail."""
        proc = run_suite(tmp_path, "true", {"test_suite.py": SUITE})
        last = proc.stdout.strip().splitlines()[-1]
        assert "1 passed" in last and "1 skipped" in last and "1 xfailed" in last, proc.stdout
        skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED [1] test_suite.py:")]
        assert len(skipped) == 1 and skipped[0].endswith(f": {ALLOWED_REASON}"), proc.stdout

    def test_a_module_skipped_whole_fails(self, tmp_path: Path) -> None:
        """With CI=true, a module that skips itself at import fails too."""
        module = 'import pytest\npytest.skip("no chromium", allow_module_level=True)\n\ndef test_x():\n    pass\n'
        proc = run_suite(tmp_path, "true", {"test_module.py": module})
        assert proc.returncode != 0, proc.stdout
        assert "CI must run every test: no chromium" in proc.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_skip_is_a_skip(tmp_path: Path, ci: str | None) -> None:
    """Without CI=true every skip stays a skip and the run passes."""
    proc = run_suite(tmp_path, ci, {"test_suite.py": SUITE})
    assert proc.returncode == 0, proc.stdout
    assert "3 skipped" in proc.stdout.strip().splitlines()[-1]
