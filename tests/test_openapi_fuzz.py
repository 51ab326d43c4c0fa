"""schemathesis with every check against a served corpus: the document is the API (issue 40).

``fedsearch serve`` runs as a real subprocess over real git checkouts (tests/corpus.py),
and the schemathesis CLI runs every phase (examples, coverage, fuzzing, stateful, the
last following the answer's ``readFile`` link) with ``--checks all`` against
``/openapi.json``, as a new user would run it. Any finding fails the test: a
schema-valid request refused, an invalid one accepted, an answer (an SSE event's data
among them) that is not as documented, a 405 without ``Allow``, a 5xx. The only
findings dropped are the refusals the document states in words (tests/openapi_hooks.py),
each counted by its rule.

The seed is fixed (:data:`SEED`) so CI runs the same cases every time; ``make fuzz``
sets ``FEDSEARCH_FUZZ_SEED=random`` and ``FEDSEARCH_FUZZ_SCALE=10`` (ten times the
examples). The seed, the cases and the findings per check are printed at the end.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, free_port, subprocess_env

ROOT = Path(__file__).resolve().parents[1]
SCALE = float(os.environ.get("FEDSEARCH_FUZZ_SCALE", "1"))
SEED = os.environ.get("FEDSEARCH_FUZZ_SEED", "40")
#: Examples per operation in the fuzzing phase (a few hundred in all at scale 1; the coverage phase adds its own).
MAX_EXAMPLES = max(1, round(25 * SCALE))
#: Warnings schemathesis may give that are no finding. The file routes refuse most generated line
#: ranges (past the end of a small file, or backwards) and /v1/facets every generated cursor (no
#: snapshot holds it), as the document says in words; and a generated namespace and path name no
#: file, so the file routes answer 404 to most of the fuzzing phase's cases (the stateful phase
#: reaches real files through the search answer's links, which the document gives for each).
_FILE_ROUTES = {f"GET /v1/{route}/{{namespace}}/{{path}}" for route in ("files", "view", "outline")}
EXPECTED_WARNINGS = {
    "validation_mismatch": {"GET /v1/files/{namespace}/{path}", "GET /v1/view/{namespace}/{path}", "POST /v1/facets"},
    "missing_test_data": _FILE_ROUTES,
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``fedsearch serve`` over the corpus, with no config (the default: every checkout a namespace)."""
    root = make_corpus(tmp_path_factory.mktemp("openapi-corpus"))
    port = free_port()
    env = subprocess_env(FEDSEARCH_LOG_LEVEL="warning")
    command = [*fedsearch_command(), "serve", "--root", str(root), "--host", "127.0.0.1", "--port", str(port)]
    with subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        try:
            _wait_for(port, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(30)


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"fedsearch serve exited: {proc.stderr.read() if proc.stderr else b''!r}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("fedsearch serve did not listen within 30 s")


def _schemathesis() -> list[str]:
    script = Path(sys.executable).with_name("schemathesis")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"]


def per_check(ndjson: Path) -> tuple[Counter[str], Counter[str]]:
    """(cases each check ran on, cases it failed) from a schemathesis NDJSON report."""
    ran: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for line in ndjson.read_text(encoding="utf-8").splitlines():
        event = json.loads(line).get("ScenarioFinished")
        for checks in ((event or {}).get("recorder") or {}).get("checks", {}).values():
            for check in checks:
                ran[check["name"]] += 1
                failed[check["name"]] += check["status"] == "failure"
    return ran, failed


def run_schemathesis(url: str, out: Path, seed: int, max_examples: int, hooks: bool = True) -> dict[str, Any]:
    """Run the schemathesis CLI with every check; its JSON report, with ``per_check``, ``dropped`` and ``output``."""
    dropped = out / "dropped.txt"
    env = subprocess_env(PYTHONPATH=str(ROOT), FEDSEARCH_OPENAPI_DROPPED=str(dropped))
    if hooks:
        env["SCHEMATHESIS_HOOKS"] = "tests.openapi_hooks"
    command = [
        *_schemathesis(),
        "--config-file",
        str(ROOT / "tests" / "fixtures" / "schemathesis.toml"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--report",
        "json,ndjson",
        "--report-dir",
        str(out),
        "--no-color",
        "--output-truncate",
        "true",
    ]
    result = subprocess.run(command, env=env, cwd=out, capture_output=True, text=True, timeout=1800, check=False)
    reports = {path.suffix: path for path in out.iterdir() if path.suffix in (".json", ".ndjson")}
    assert ".json" in reports, result.stdout[-3000:] + result.stderr[-3000:]
    report: dict[str, Any] = json.loads(reports[".json"].read_text(encoding="utf-8"))
    report["per_check"] = per_check(reports[".ndjson"])
    report["dropped"] = Counter(dropped.read_text(encoding="utf-8").splitlines()) if dropped.exists() else Counter()
    report["output"] = result.stdout
    return report


@pytest.mark.timeout(1800)  # every phase over 12 operations: about a minute at scale 1 on 2 cores
def test_schemathesis_with_every_check_finds_nothing(
    served: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every phase and every check of schemathesis finds nothing against the served document."""
    seed = random.randrange(1 << 31) if SEED == "random" else int(SEED)
    report = run_schemathesis(served, tmp_path, seed, MAX_EXAMPLES)
    ran, failed = report["per_check"]
    _print(request, seed, report)
    assert report["failures"] == [], report["output"][-6000:]
    assert report["errors"] == [], report["output"][-6000:]
    warnings = {name: set(ops) for name, ops in report["warnings"].items() if ops}
    unexpected = {name: ops - EXPECTED_WARNINGS.get(name, set()) for name, ops in warnings.items()}
    assert {name: ops for name, ops in unexpected.items() if ops} == {}, report["output"][-6000:]
    assert sum(failed.values()) == 0
    # every check ran, on a few hundred cases: a check that never ran would find nothing either
    assert report["test_cases"]["generated"] >= 200 * min(SCALE, 1)
    assert {"positive_data_acceptance", "negative_data_rejection", "unsupported_method"} <= {
        name for name, count in ran.items() if count
    }


def _print(request: pytest.FixtureRequest, seed: int, report: dict[str, Any]) -> None:
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    ran, failed = report["per_check"]
    checks = ", ".join(f"{name} {ran[name]}/{failed[name]}" for name in sorted(ran))
    dropped = ", ".join(f"{rule} {n}" for rule, n in sorted(report["dropped"].items())) or "none"
    with capture.global_and_fixture_disabled():
        reporter.write_line(
            f"\nschemathesis: seed {seed}, {report['test_cases']['generated']} cases, "
            f"{len(report['failures'])} findings (scale {SCALE:g}, {MAX_EXAMPLES} examples per operation)"
        )
        reporter.write_line(f"checks (cases/failed): {checks}")
        reporter.write_line(f"refusals stated in words (dropped): {dropped}")
