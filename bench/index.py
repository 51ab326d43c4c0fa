"""index: the declaration index's costs: building it, keeping it, and a search before it is built.

    .venv/bin/python bench/index.py [--rounds 7] [--dir DIR] [--workers 1,2]

Over the corpus of bench/local.py (8 package checkouts copied from the venv):

- **build**: the builder process (``python -m gateway.index``, niced, as a server
  starts it) from an empty folder until every file is indexed, with each number of
  parsing processes: seconds, MB of source a second, the database's size on disk, and
  the peak RSS of the builder and its parsing processes together;
- **touch**: one file touched, one builder pass: how many files it parsed, how long;
- **first page**: in-process searches, A B C interleaved: the index off (as before it
  existed), cold (a copy of a database holding no file yet, each round: what is not
  indexed is parsed on the spot within ``parse_budget_ms``, the rest line hits), warm; the median extra
  time of cold over off is the cost of a first page over files not yet indexed;
- **answer size**: ``self`` in the three corpus modules (``.py``) whose matched lines
  are nearest 619, hit_budget 100: the answer's bytes with line hits (index off) and with
  declarations.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build, size, wait_for_index
from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.index.background import BuilderProcess
from gateway.index.builder import Builder
from gateway.index.files import Source, find_rg
from gateway.index.store import Store
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.service import SearchService

QUERIES = ("register_widget", "ClientSession", "raise ValueError", "import os", "BaseModel")


def _rss_kb(pid: int) -> int:
    """Resident memory of a process and all its children (kB)."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            with open(f"/proc/{current}/task/{current}/children") as children:
                pids += [int(c) for c in children.read().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def measure_build(dirs: list[Path], workers: int) -> str:
    folder = Path(tempfile.mkdtemp(prefix="fedsearch-index-"))
    sources = [Source(d.name, str(d)) for d in dirs]
    process = BuilderProcess(str(folder), sources, refresh_s=3600, workers=workers)
    started = time.monotonic()
    process.start()
    assert process.proc is not None
    peak = 0
    try:
        while True:
            peak = max(peak, _rss_kb(process.proc.pid))
            try:
                wait_for_index(folder, dirs, timeout=0.2)
                break
            except RuntimeError:
                continue
        took = time.monotonic() - started
    finally:
        process.stop()
    store = Store.open(str(folder))
    indexed = {d.name: store.states(str(d)) for d in dirs}
    nbytes = sum(s for states in indexed.values() for s, _ in states.values())
    nfiles = sum(len(states) for states in indexed.values())
    disk = sum(f.stat().st_size for f in folder.iterdir())
    store.close()
    return (
        f"build, {workers} parsing process(es): {nfiles} files, {nbytes / 1e6:.1f} MB in {took:.1f} s = "
        f"{nbytes / 1e6 / took:.2f} MB/s; database {disk / 1e6:.1f} MB on disk; peak RSS {peak / 1024:.0f} MB"
    )


def measure_touch(dirs: list[Path]) -> str:
    folder = tempfile.mkdtemp(prefix="fedsearch-index-")
    store = Store.open(folder)
    builder = Builder(store, [Source(d.name, str(d)) for d in dirs])
    builder.refresh()
    target = next(p for p in sorted(dirs[0].rglob("*.py")) if p.stat().st_size > 20_000)
    later = time.time_ns() + 10**9
    os.utime(target, ns=(later, later))
    started = time.monotonic()
    stats = builder.refresh()
    took = time.monotonic() - started
    unchanged = builder.refresh()
    return (
        f"touch one file ({target.name}, {target.stat().st_size / 1e3:.0f} kB): the next pass parsed "
        f"{stats.parsed} file(s) in {took * 1000:.0f} ms (listing and stat of all {stats.listed} included); "
        f"a pass with nothing changed: {unchanged.parsed} parsed, {unchanged.seconds * 1000:.0f} ms"
    )


def _service(base: Path, folder: str, enabled: bool) -> SearchService:
    """A service over ``base`` with its index in ``folder``, answering every search afresh (no
    cached answers: a repeated query would be timed as a cache hit)."""
    config = config_from_env(root=str(base), env={})
    index = IndexConfig(dir=folder, enabled=enabled)
    return SearchService(dataclasses.replace(config, index=index, cache=CacheConfig(answer_ttl_s=0)))


async def _time(service: SearchService, query: str) -> float:
    started = time.perf_counter()
    await service.search(parse_request({"query": query, "timeout_ms": 60_000}))
    return time.perf_counter() - started


async def measure_first_page(base: Path, dirs: list[Path], rounds: int) -> list[str]:
    empty = tempfile.mkdtemp(prefix="fedsearch-index-")  # a database that exists and holds no file yet
    template = Store.open(empty)
    template.close()
    warm_dir = tempfile.mkdtemp(prefix="fedsearch-index-")
    Builder(Store.open(warm_dir), [Source(d.name, str(d)) for d in dirs]).refresh()
    off = _service(base, warm_dir, enabled=False)
    warm = _service(base, warm_dir, enabled=True)
    lines = []
    extras = []
    try:
        for query in QUERIES:
            await _time(off, query)
            await _time(warm, query)
            times: dict[str, list[float]] = {"off": [], "cold": [], "warm": []}
            for i in range(rounds):
                fresh = tempfile.mkdtemp(prefix="fedsearch-index-")
                shutil.copytree(empty, fresh, dirs_exist_ok=True)
                cold = _service(base, fresh, enabled=True)
                sides = [("off", off), ("cold", cold), ("warm", warm)]
                for name, service in sides if i % 2 == 0 else sides[::-1]:
                    times[name].append(await _time(service, query))
                await cold.aclose()
            med = {k: statistics.median(v) * 1000 for k, v in times.items()}
            extras.append(med["cold"] - med["off"])
            lines.append(
                f"  {query!r:20} off {med['off']:6.1f} ms | cold {med['cold']:6.1f} ms "
                f"(+{med['cold'] - med['off']:5.1f}) | warm {med['warm']:6.1f} ms ({med['warm'] / med['off']:.2f}x off)"
            )
    finally:
        await off.aclose()
        await warm.aclose()
    lines.append(f"first page over files not yet indexed: median +{statistics.median(extras):.1f} ms over index off")
    return ["first page (in-process, median of rounds):", *lines]


async def measure_size(base: Path, dirs: list[Path], most: int = 3) -> list[str]:
    rg = find_rg()
    assert rg is not None
    done = subprocess.run(
        [rg, "--no-config", "-c", "-s", "-F", "-e", "self", "--null", "--", *map(str, dirs)],
        capture_output=True,
        check=False,
    )
    counts: dict[str, int] = {}
    for line in done.stdout.splitlines():
        raw, _, count = line.partition(b"\0")
        if raw.endswith(b".py"):  # a module, not a stub of one-line declarations
            counts[raw.decode()] = int(count)
    lines = []
    for path in sorted(counts, key=lambda p: (abs(counts[p] - 619), p))[:most]:
        ns = next(d.name for d in dirs if path.startswith(str(d) + "/"))
        rel = path[len(str(base / ns)) + 1 :]
        folder = tempfile.mkdtemp(prefix="fedsearch-index-")
        Builder(Store.open(folder), [Source(ns, str(base / ns))]).refresh()  # warm
        request = parse_request({"query": "self", "namespaces": [ns], "paths": [rel], "hit_budget": 100})
        sizes = {}
        for enabled in (False, True):
            service = _service(base, folder, enabled)
            try:
                answer = await service.search(request)
            finally:
                await service.aclose()
            sizes[enabled] = (len(orjson.dumps(answer)), answer["files"][0]["hit_count"])
        (before, found), (after, hits) = sizes[False], sizes[True]
        lines.append(
            f"answer size, 'self' in {ns}/{rel} ({counts[path]} matched lines), hit_budget 100: "
            f"line hits {before / 1e3:.0f} KB ({found} hits) -> declarations {after / 1e3:.0f} KB ({hits} hits), "
            f"{after / before:.2f}x"
        )
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir", help="corpus folder (default: a temp folder)")
    parser.add_argument("--workers", default="1,2", help="parsing processes to build with, each in turn")
    args = parser.parse_args()
    configure(level="warning")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-bench-"))
    dirs = build(base)
    nfiles, nbytes = size(dirs)
    print(f"corpus: {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.1f} MB under {base}")
    for workers in (int(w) for w in args.workers.split(",")):
        print(measure_build(dirs, workers), flush=True)
    print(measure_touch(dirs), flush=True)
    print("\n".join(await measure_size(base, dirs)), flush=True)
    print("\n".join(await measure_first_page(base, dirs, args.rounds)))


if __name__ == "__main__":
    asyncio.run(main())
