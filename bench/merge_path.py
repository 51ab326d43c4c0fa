"""merge_path: CPU a remote file costs on the merge path, against the previous commit, as a guard.

    .venv/bin/python bench/merge_path.py [--rounds 150] [--against REV] [--json]

In process, no network: 8 namespaces each answer a real-format Zoekt answer of 100 files
(``fake_zoekt.payload``: the bytes, decoded by the adapter's own reader on every search),
and the service does what it does for a request over HTTP: fan-out, ranking, the page,
the snapshot a truncated first page keeps, the wire answer (cached answers and
single-flight off, as in ``overhead_wrk.py``). Prints the CPU (``time.process_time``) of
a search and per file, the median of ``--rounds`` after a warm-up.

``--against REV`` runs the same measurement from REV in a temporary worktree
(``git worktree add``), the two interleaved in turns of ``--rounds`` each, and fails
(exit 1) when this tree takes more than 25 % more CPU a file than REV: ``make bench``
runs it against ``HEAD~1``. A benchmark, not a timed unit test: it prints figures and
its verdict; nothing in the test suite depends on a machine's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NAMESPACES = 8
FILES = 100
LIMIT = 1.25


async def measure(rounds: int) -> list[float]:
    """CPU seconds of each of ``rounds`` searches (after a warm-up)."""
    sys.path.insert(0, str(ROOT))
    try:
        from adapters.zoekt.read import DECODER, parse_response
    except ImportError:  # a tree from before adapters/zoekt/ was a package
        from adapters.zoekt_read import DECODER, parse_response  # type: ignore[import-not-found,no-redef]
    from gateway.log import configure
    from gateway.models import BackendResult, SearchQuery
    from gateway.query.request import parse_request
    from gateway.service import SearchService
    from gateway.testing import MockBackend

    configure(level="warning")  # a line a namespace a search would be measured too
    answers = [_payload()(i, FILES) for i in range(NAMESPACES)]

    def handler(body: bytes) -> Any:
        async def answer(query: SearchQuery) -> BackendResult:
            return parse_response(DECODER.decode(body), query, lambda _: True)

        return answer

    backends = [MockBackend(handler(body), name=f"zoekt{i}") for i, body in enumerate(answers)]
    try:
        service = SearchService.with_backends(backends, cache={"answer_ttl_s": 0, "single_flight": False})
    except (TypeError, ValueError):  # a tree older than [cache]
        service = SearchService.with_backends(backends)
    request = parse_request({"query": "register_widget"})
    for _ in range(20):
        await service.search(request)
    spent = []
    for _ in range(rounds):
        started = time.process_time()
        answer = await service.search(request)
        spent.append(time.process_time() - started)
    assert answer["file_count"] == NAMESPACES * FILES, answer["file_count"]
    await service.aclose()
    return spent


def _payload() -> Any:
    """``fake_zoekt.payload`` from beside this script, whatever tree is measured (an old one may not make it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fake_zoekt_here", Path(__file__).resolve().with_name("fake_zoekt.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.payload


def run_tree(tree: Path, rounds: int) -> list[float]:
    """This script's measurement with ``tree`` first on the path (its own code)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--rounds", str(rounds), "--json", "--tree", str(tree)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(tree), FEDSEARCH_LOG_LEVEL="warning"),
    )
    spent: list[float] = json.loads(done.stdout)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--against", default=None, help="a revision to compare with (e.g. HEAD~1)")
    parser.add_argument("--turns", type=int, default=4, help="with --against: turns of each, interleaved")
    parser.add_argument("--json", action="store_true", help="print the CPU seconds of each search as JSON")
    parser.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree:
        global ROOT
        ROOT = Path(args.tree)
    if args.json:
        print(json.dumps(asyncio.run(measure(args.rounds))))
        return 0
    files = NAMESPACES * FILES
    if not args.against:
        spent = asyncio.run(measure(args.rounds))
        median = statistics.median(spent)
        each = median / files * 1e6
        print(f"merge path, {files} remote files: {median * 1000:.2f} ms CPU a search, {each:.2f} us a file")
        return 0
    with tempfile.TemporaryDirectory(prefix="merge-path-") as folder:
        before = Path(folder) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-f", str(before), args.against],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        try:
            ours: list[float] = []
            theirs: list[float] = []
            for _ in range(args.turns):
                theirs += run_tree(before, args.rounds)
                ours += run_tree(ROOT, args.rounds)
        except subprocess.CalledProcessError as exc:
            print(f"merge path: {args.against} could not be measured ({exc.stderr.strip()[-200:]}): no verdict")
            return 0
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True)
    mine, base = statistics.median(ours), statistics.median(theirs)
    ratio = mine / base
    print(
        f"merge path, {files} remote files, CPU a file: this tree {mine / files * 1e6:.2f} us, "
        f"{args.against} {base / files * 1e6:.2f} us: {ratio:.2f}x"
    )
    if ratio > LIMIT:
        print(f"REGRESSION: more than {LIMIT:.2f}x {args.against}'s CPU a file on the merge path")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
