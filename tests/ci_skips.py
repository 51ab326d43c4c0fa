"""Under ``CI=true`` a skipped test is a failure, unless its reason is on :data:`ALLOWED`.

A test skips where this machine lacks something it needs (redis-server, chromium, kubectl,
systemd-analyze, a standard-library module, /proc). On a developer's machine that is a
skip that says why; in CI it would be a test that never ran while the run looks green, so
CI turns it into a failure naming the reason. ``.ci/run`` installs what the suite drives.

Loaded by ``tests/conftest.py`` (``pytest_plugins``); ``tests/test_ci_skips.py`` runs it on
a suite of its own (``pytest -p tests.ci_skips``).
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

__all__ = ["ALLOWED", "pytest_make_collect_report", "pytest_runtest_makereport", "pytest_terminal_summary"]

#: Reasons a CI run may skip for, each because it is not a missing file or tool:
ALLOWED = frozenset(
    {
        # CI runs as root, and root can write in a folder whose permissions say no: the test of an
        # unwritable index folder cannot make one (tests/test_index.py).
        "root writes anywhere",
    }
)
_PREFIX = "Skipped: "
_refused: list[str] = []


def _under_ci() -> bool:
    return os.environ.get("CI") == "true"


def _reason(longrepr: object) -> str:
    """The text a skip was given (pytest keeps it as ``(path, line, "Skipped: reason")``)."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix(_PREFIX)


def _refuse(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _reason(report.longrepr)
    if reason in ALLOWED:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"CI=true: this test was skipped, and CI must run every test: {reason}\n"
        "(install what it needs in .ci/run, or add the reason to tests/ci_skips.py's ALLOWED when it is not "
        "a missing file or tool)"
    )
    _refused.append(f"{report.nodeid}: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A skip (in setup, a ``skipif``, or in the test, ``pytest.skip``) fails under CI; an xfail is no skip."""
    report = yield
    if _under_ci() and report.skipped and not hasattr(report, "wasxfail"):
        _refuse(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module that skips itself whole (``pytest.skip(..., allow_module_level=True)``) fails under CI."""
    report = yield
    if _under_ci() and report.skipped:
        _refuse(report)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The refused skips, listed together at the end of the run."""
    if _refused:
        terminalreporter.section("skips CI refused (CI=true)")
        for line in _refused:
            terminalreporter.line(line)
