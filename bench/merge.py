"""merge: 100,000 hits from 50 namespaces ranked, grouped and paged (target <= 150 ms).

.venv/bin/python bench/merge.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.models import BackendResult, FileMatch, Hit, Outcome
from gateway.query.request import parse_request
from gateway.rank import rank
from gateway.wire import build_response

TEXTS = ("    return register_widget(name)", "def register_widget(name, factory):", "x = 1  # register_widget")


def outcomes(namespaces: int = 50, files: int = 400, hits: int = 5) -> list[Outcome]:
    out = []
    for n in range(namespaces):
        result = BackendResult(
            files=tuple(
                FileMatch(
                    path=f"src/pkg{f % 13}/module_{f}.py" if f % 17 else f"vendor/lib/widget_{f}.min.js",
                    hits=tuple(Hit(line=10 * h + 1, text=TEXTS[(f + h) % 3], column=5) for h in range(hits)),
                )
                for f in range(files)
            )
        )
        out.append(
            Outcome(
                namespace=f"ns{n:02}", backend="mock", status="ok", took_ms=1, result=result, weight=1.0 + (n % 3) * 0.5
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    outs = outcomes()
    total = sum(len(f.hits) for o in outs if o.result for f in o.result.files)
    request = parse_request({"query": "register_widget", "files": 20, "offset": 40})
    times = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        answer = build_response(request, rank(request, outs), took_ms=0)
        times.append(time.perf_counter() - started)
    assert answer["file_count"] == 20_000
    print(
        f"merge: {total} hits, {answer['file_count']} files, 50 namespaces -> page of {len(answer['files'])}: "
        f"min {min(times) * 1000:.1f}  med {statistics.median(times) * 1000:.1f}  max {max(times) * 1000:.1f} ms "
        f"(target <= 150 ms)"
    )


if __name__ == "__main__":
    main()
