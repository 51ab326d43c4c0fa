"""schemathesis with every check against the served OpenAPI document (issue 40), this tree against another.

    python bench/openapi_checks.py                                   # this checkout against d0d5bc5
    python bench/openapi_checks.py --against d0d5bc5 --this HEAD --max-examples 100 --seed 40 [--corpus DIR]

Each revision serves from its own process: ``git archive REV`` unpacked in a temp folder
(the working tree itself for ``--this .``), ``fedsearch serve`` over the checkouts of
``--corpus`` (default /work/corpus-real, else the tests' corpus), ``[index]`` off so no
builder competes for the CPU. Against each, the schemathesis CLI runs every phase with
``--checks all --max-examples N --seed S --workers 1``, twice: as a new user runs it, and
with this tree's tests/openapi_hooks.py, which drops the refusals the document states
in words (tests/test_openapi_fuzz.py runs the second way). Printed per revision and way:
the cases each check ran on and failed, the unique findings by code, the refusals
dropped by rule, the document's size (raw and gzipped) and the run's seconds. A
benchmark: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus import make_corpus  # noqa: E402
from tests.helpers import free_port, subprocess_env  # noqa: E402
from tests.test_openapi_fuzz import run_schemathesis  # noqa: E402

CORPUS = Path("/work/corpus-real")


def _tree(rev: str, into: Path) -> Path:
    if rev == ".":
        return ROOT
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _config(corpus: Path, into: Path) -> Path:
    names = sorted(p.name for p in corpus.iterdir() if (p / ".git").exists())
    lines = ["[index]", "enabled = false", ""]
    for name in names:
        lines += ["[[namespaces]]", f'name = "{name}"', 'backend = "ripgrep"', f'root = "{corpus / name}"', ""]
    path = into / "fedsearch.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def measure(tree: Path, config: Path, out: Path, seed: int, max_examples: int) -> dict[str, Any]:
    port = free_port()
    env = subprocess_env(PYTHONPATH=str(tree), FEDSEARCH_LOG_LEVEL="warning")
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)]
    with subprocess.Popen(command, env=env, cwd=tree, stderr=subprocess.DEVNULL) as proc:
        try:
            url = f"http://127.0.0.1:{port}"
            document = _wait(url)
            figures: dict[str, Any] = {"bytes": len(document), "gzipped": len(gzip.compress(document, 9))}
            for hooks in (False, True):
                started = time.monotonic()
                where = out / ("hooks" if hooks else "plain")
                where.mkdir(parents=True)
                report = run_schemathesis(url, where, seed, max_examples, hooks=hooks)
                report["seconds"] = time.monotonic() - started
                figures["hooks" if hooks else "plain"] = report
            return figures
        finally:
            proc.terminate()
            proc.wait(30)


def _wait(url: str) -> bytes:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/openapi.json", timeout=5) as response:
                body: bytes = response.read()
                return body
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def show(name: str, figures: dict[str, Any]) -> None:
    print(f"\n== {name}: /openapi.json {figures['bytes']:,} bytes, {figures['gzipped']:,} gzipped")
    for way in ("plain", "hooks"):
        report = figures[way]
        ran, failed = report["per_check"]
        cases = report["test_cases"]["generated"]
        codes = ", ".join(f"{f['code']} {f['title']}: {f['count']}" for f in report["failures"]) or "none"
        label = "as a new user runs it" if way == "plain" else "refusals stated in words dropped"
        print(f"-- {label}: {cases} cases, {report['seconds']:.0f} s; unique findings: {codes}")
        for check in sorted(ran):
            print(f"   {check:32} {ran[check]:6} cases {failed[check]:5} failed")
        if report["dropped"]:
            print("   dropped: " + ", ".join(f"{rule} {n}" for rule, n in sorted(report["dropped"].items())))
        warnings = {k: v for k, v in report["warnings"].items() if v}
        if warnings:
            print(f"   warnings: {warnings}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--against", default="d0d5bc5", help="the revision before (default: before issue 40)")
    parser.add_argument("--this", default=".", help="the revision after ('.': the working tree)")
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="openapi-checks-") as tmp:
        work = Path(tmp)
        corpus = args.corpus or (CORPUS if CORPUS.is_dir() else make_corpus(work / "corpus"))
        config = _config(corpus, work)
        print(f"corpus {corpus}, seed {args.seed}, --max-examples {args.max_examples}, --checks all")
        for name, rev in (("before " + args.against, args.against), ("after " + args.this, args.this)):
            tree = _tree(rev, work / f"tree-{rev.replace('/', '_')}")
            show(name, measure(tree, config, work / f"out-{rev.replace('/', '_')}", args.seed, args.max_examples))
            if tree != ROOT:
                shutil.rmtree(tree, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
