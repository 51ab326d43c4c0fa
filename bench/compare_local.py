"""local, A B A B across commits: `fedsearch serve` from several source trees and `rg --json`, interleaved.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/compare_local.py /tmp/before . [--rounds 9] [--dir DIR] [--copies K] [--floor] [--gap-ms MS]

Each tree's server runs with that tree on PYTHONPATH (this venv's packages), over the
same corpus as bench/local.py, with a fresh declaration index that is built before
anything is measured (a tree that has one). For each query, every round asks each server once (in
turn, the order reversed every other round) and runs rg after each answer (``--gap-ms``
later: 20 by default, so that what a server does once its answer is out, such as
starting the next search's rg, never runs beside what is timed), so all sides see the
same machine. Prints each tree's median time and ratio to rg per query,
then each tree's median ratio over the queries. On a noisy machine a difference
between two commits means something only here, not across separate runs.

With ``--floor`` the two servers of bench/floor_server.py run beside them: the least an
HTTP gateway over one rg does (``floor-bare``), and that plus fedsearch's own work on
the answer (``floor-work``): what fedsearch costs beyond them is its framework.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.ripgrep.backend import find_rg
from bench.corpus import build, wait_for_index
from bench.local import JSON, QUERIES, rg_once
from bench.overhead import free_ports


async def ask(session: aiohttp.ClientSession, port: int, body: bytes) -> float:
    """Seconds for one search, the answer read as bytes (the server started if not yet up)."""
    for _ in range(300):
        try:
            started = time.perf_counter()
            async with session.post(f"http://127.0.0.1:{port}/v1/search", data=body, headers=JSON) as resp:
                await resp.read()
            return time.perf_counter() - started
        except aiohttp.ClientConnectorError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"no server on port {port}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+", help="source trees (checkouts of fedsearch) to compare")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", help="corpus folder (default: a temp folder)")
    parser.add_argument("--floor", action="store_true", help="also the two servers of bench/floor_server.py")
    parser.add_argument("--copies", type=int, default=1, help="the 8 package checkouts, that many times over")
    parser.add_argument(
        "--gap-ms",
        type=float,
        default=20.0,
        help="pause after each answer, before rg runs (what a server does once its answer is out, such as "
        "starting the next search's rg, ends before anything is timed; 0: back to back)",
    )
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-bench-"))
    dirs = build(base, copies=args.copies)
    rg = find_rg()
    assert rg is not None
    trees = [str(Path(t).resolve()) for t in args.trees]
    floors = ["floor-bare", "floor-work"] if args.floor else []
    ports = free_ports(len(trees) + len(floors))
    env = dict(os.environ)  # logs at the default level (info), as served
    caches = [Path(tempfile.mkdtemp(prefix="fedsearch-cache-")) for _ in trees]  # fresh declaration indexes
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--root", str(base), "--port", str(port)],
            cwd=tree,
            stderr=subprocess.DEVNULL,
            env=dict(env, PYTHONPATH=tree, XDG_CACHE_HOME=str(cache)),
        )
        for tree, port, cache in zip(trees, ports, caches, strict=False)
    ]
    here = Path(__file__).resolve().parent
    servers += [
        subprocess.Popen([sys.executable, str(here / "floor_server.py"), str(port), str(base), name.split("-")[1]])
        for name, port in zip(floors, ports[len(trees) :], strict=True)
    ]
    trees += floors
    ratios: dict[str, list[float]] = {t: [] for t in trees}
    try:
        async with aiohttp.ClientSession() as session:
            for tree, port, cache in zip(trees, ports, caches, strict=False):
                await ask(session, port, orjson.dumps({"query": "warm"}))
                if (Path(tree) / "gateway" / "index").is_dir():  # a tree with a declaration index: built first
                    print(f"{Path(tree).name}: index built in {wait_for_index(cache / 'fedsearch', dirs):.1f} s")
            for query in QUERIES:
                body = orjson.dumps({"query": query, "timeout_ms": 60_000})
                for port in ports:
                    await ask(session, port, body)  # up, and warm
                rg_once(rg, dirs, query)
                times: dict[str, list[float]] = {t: [] for t in trees}
                alone: list[float] = []
                for i in range(args.rounds):
                    pairs = list(zip(trees, ports, strict=True))
                    # a deadline a millisecond apart each round: never an answer from cache
                    fresh = orjson.dumps({"query": query, "timeout_ms": 59_000 - i})
                    for tree, port in pairs if i % 2 == 0 else pairs[::-1]:
                        times[tree].append(await ask(session, port, fresh))
                        await asyncio.sleep(args.gap_ms / 1000)
                        alone.append(rg_once(rg, dirs, query))
                rg_median = statistics.median(alone)
                line = f"{query!r:20} rg {rg_median * 1000:6.1f} ms"
                for tree in trees:
                    ratio = statistics.median(times[tree]) / rg_median
                    ratios[tree].append(ratio)
                    line += f" | {Path(tree).name}: {statistics.median(times[tree]) * 1000:6.1f} ms {ratio:.2f}"
                print(line)
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=10)
    for tree in trees:
        print(f"{tree}: median ratio fedsearch/rg over {len(QUERIES)} queries {statistics.median(ratios[tree]):.3f}")


if __name__ == "__main__":
    asyncio.run(main())
