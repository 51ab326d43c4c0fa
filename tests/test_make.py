"""The Makefile's `make run`: the runtime alone installed, pip's output in a log unless it fails, one line printed.

Each test runs the real `make` in this checkout with ``VENV`` pointing at a folder of its own. Where a test
is about what make does around pip, that folder's ``bin/python`` is a stand-in script recording how it was
called (so nothing is downloaded); where it is about what `make run` prints, it is this virtualenv's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import git_repo

REPO = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
URL_LINE = re.compile(r"fedsearch: serving 1 namespace at (http://127\.0\.0\.1:\d+/)")
FAKE_PIP = """#!/bin/sh
echo "pip: $*" >> "$(dirname "$0")/../calls"
echo "Collecting things ... a lot of pip output"
echo "WARNING: a deprecation that nobody asked for" >&2
exit ${FAKE_PIP_EXIT:-0}
"""


def make(venv: Path, *args: str, env: dict[str, str] | None = None, **kwargs: object) -> subprocess.Popen[str]:
    if MAKE is None:  # pragma: no cover - CI has make (.ci/run runs it)
        pytest.skip("make is not installed")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("FEDSEARCH_", "MAKE"))}
    full_env.update(env or {})
    return subprocess.Popen(
        [MAKE, f"VENV={venv}", *args],
        cwd=REPO,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kwargs,  # type: ignore[call-overload]
    )


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def fake_venv(tmp_path: Path) -> Path:
    """A virtualenv folder whose python only records its arguments, and whose fedsearch says it ran."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    executable(venv / "bin" / "python", FAKE_PIP)
    executable(venv / "bin" / "fedsearch", '#!/bin/sh\necho "fedsearch ran: $*"\n')
    return venv


def calls(venv: Path) -> list[str]:
    path = venv / "calls"
    return path.read_text().splitlines() if path.exists() else []


class TestInstall:
    def test_run_installs_the_runtime_alone_and_prints_nothing_of_pip(self, fake_venv: Path) -> None:
        """`make run` installs `.` (not the dev extra), keeps pip's output in the log and prints only the server's."""
        proc = make(fake_venv, "run", "ROOT=/somewhere", "PORT=9999")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert out == "fedsearch ran: serve --root /somewhere --host 127.0.0.1 --port 9999\n"
        assert calls(fake_venv) == ["pip: -m pip install -e . --config-settings editable_mode=compat"]
        log = (fake_venv / "install.log").read_text()
        assert "a lot of pip output" in log and "a deprecation" in log

    def test_a_failing_install_shows_its_log_and_stops(self, fake_venv: Path) -> None:
        """When pip fails, its whole output and the log's path are printed, make fails, and nothing is served."""
        proc = make(fake_venv, "run", env={"FAKE_PIP_EXIT": "1"})
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode != 0
        assert "a lot of pip output" in out and "a deprecation" in out
        assert f"the install failed (its log: {fake_venv}/install.log)" in out
        assert "fedsearch ran" not in out and not (fake_venv / ".installed-run").exists()

    def test_the_dev_install_serves_run_too(self, fake_venv: Path) -> None:
        """The dev extra (`make test`'s) installs '.[dev]', after which `make run` installs nothing more."""
        proc = make(fake_venv, f"{fake_venv}/.installed-dev")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == ""
        assert calls(fake_venv) == ["pip: -m pip install -e .[dev] --config-settings editable_mode=compat"]
        proc = make(fake_venv, "run")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out.startswith("fedsearch ran: serve")
        assert len(calls(fake_venv)) == 1

    def test_a_runtime_install_does_not_count_as_the_dev_one(self, fake_venv: Path) -> None:
        """After `make run`'s install, the dev extra is still installed when asked for."""
        make(fake_venv, "run").communicate(timeout=60)
        proc = make(fake_venv, f"{fake_venv}/.installed-dev")
        proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert [c.split()[5] for c in calls(fake_venv)] == [".", ".[dev]"]


@pytest.fixture
def installed_venv(tmp_path: Path) -> Path:
    """A VENV folder over this virtualenv (its python and fedsearch), the runtime marked installed."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "fedsearch"):
        (venv / "bin" / name).symlink_to(Path(sys.executable).parent / name)
    (venv / ".installed-run").touch()
    return venv


@pytest.fixture
def running(installed_venv: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`make run` over a one-checkout root on a free port, and the first line it printed."""
    root = tmp_path / "src"
    git_repo(root / "flask", {"app.py": "def url_for():\n    pass\n"})
    proc = make(installed_venv, "run", f"ROOT={root}", "PORT=0")
    assert proc.stdout is not None
    try:
        yield proc, proc.stdout.readline()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)


class TestRun:
    def test_the_one_line_is_the_url_and_it_serves_the_page(self, running: tuple[subprocess.Popen[str], str]) -> None:
        """The first thing `make run` prints is the URL line, and the page is at that URL."""
        _, line = running
        match = URL_LINE.fullmatch(line.rstrip("\n"))
        assert match, line
        with urllib.request.urlopen(match[1], timeout=30) as resp:
            assert resp.status == 200 and b"<html" in resp.read().lower()

    def test_nothing_else_is_printed(self, running: tuple[subprocess.Popen[str], str]) -> None:
        """After a search and Ctrl-C, the URL line is still all `make run` printed."""
        proc, line = running
        url = URL_LINE.fullmatch(line.rstrip("\n"))
        assert url
        with urllib.request.urlopen(url[1] + "v1/search?q=url_for", timeout=30) as resp:
            assert b'"file_count":1' in resp.read()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals make and the server
        rest, _ = proc.communicate(timeout=30)
        assert rest == "", rest
