"""cache: cursor pages against page 1, single-flight, and the snapshot store's bound (issue 18).

.venv/bin/python bench/cache.py [--rounds 5] [--dir DIR] [--queries 1000] [--bound-mib 32]

1. Paging: one truncated query over the 8 package checkouts of bench/local.py (ripgrep,
   in-process service), page 1 (fan-out, ranking, snapshot kept) against pages 2..N
   (from the cursor's snapshot), with the snapshot in the process and in Redis (a
   redis-server started on a free port, when installed). Also page 1 with snapshots
   off, for what keeping one costs.
2. Single-flight: 50 identical requests at once over the same 8 namespaces, counting
   backend calls per namespace (the service's outcome observer), with it and without.
3. Bound: 1,000 distinct truncated queries (a mock backend: 400 files of 3 hits each)
   through an in-process store bounded at --bound-mib: the most it ever held, what it
   evicted, and what tracemalloc says it really holds against what it counted; then
   the same check of the estimate on real ripgrep snapshots (hits left undecoded).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build, size
from gateway.cache.store import MemoryStore
from gateway.config import CacheConfig, Config, config_from_env
from gateway.log import configure
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.redis_server import RedisServer, redis_missing

PAGING_QUERY = "def __init__"
SHARED_QUERY = "ClientSession"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def spread(xs: list[float]) -> str:
    return f"min {ms(min(xs))}  med {ms(statistics.median(xs))}  max {ms(max(xs))} ms"


def next_page(answer: dict[str, Any]) -> dict[str, Any] | None:
    for action in answer.get("next", []):
        if action["reason"].startswith("next page"):
            args: dict[str, Any] = action["args"]
            return args
    return None


def with_cache(config: Config, **cache: Any) -> Config:
    return dataclasses.replace(config, cache=CacheConfig(**cache))


async def paging(config: Config, rounds: int, label: str, **cache: Any) -> None:
    service = SearchService(with_cache(config, answer_ttl_s=0, **cache))
    first_times: list[float] = []
    later: list[float] = []
    pages = files = count = 0
    try:
        for r in range(rounds + 1):
            asked = {"query": PAGING_QUERY, "files": 20, "timeout_ms": 30_000 - r}
            started = time.perf_counter()
            answer = await service.search_json(asked)
            took = time.perf_counter() - started
            if r == 0:
                continue  # warm
            first_times.append(took)
            count, pages, files = answer["file_count"], 1, len(answer["files"])
            while (follow := next_page(answer)) is not None:
                if cache.get("snapshot_ttl_s") == 0:
                    break
                started = time.perf_counter()
                answer = await service.search_json(follow)
                later.append(time.perf_counter() - started)
                pages, files = pages + 1, files + len(answer["files"])
                assert answer["file_count"] == count and "note" not in answer, answer.get("note")
            assert cache.get("snapshot_ttl_s") == 0 or files == count
    finally:
        await service.aclose()
    line = f"  {label:28} page 1: {spread(first_times)}"
    if later:
        ratio = statistics.median(first_times) / statistics.median(later)
        line += f" | pages 2..{pages}: {spread(later)} | page 1 / page n {ratio:.0f}x"
    print(line + (f"  ({files} files paged)" if later else f"  ({count} files)"))


async def single_flight(config: Config, label: str, **cache: Any) -> None:
    service = SearchService(with_cache(config, answer_ttl_s=0, **cache))
    calls: dict[str, int] = {}
    service.observers.append(lambda o: calls.__setitem__(o.namespace, calls.get(o.namespace, 0) + 1))
    try:
        await service.search_json({"query": SHARED_QUERY, "timeout_ms": 30_001})  # warm
        calls.clear()
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(service.search_json({"query": SHARED_QUERY, "timeout_ms": 30_000}) for _ in range(50))
        )
        took = time.perf_counter() - started
    finally:
        await service.aclose()
    assert len({a["file_count"] for a in answers}) == 1
    per = sorted(set(calls.values()))
    print(f"  {label:28} backend calls per namespace {per} over {len(calls)} namespaces; all 50 in {ms(took)} ms")


def mock_backend() -> MockBackend:
    async def handler(query: SearchQuery) -> BackendResult:
        files = tuple(
            FileMatch(
                path=f"src/pkg{n % 17}/module_{n}.py",
                hits=tuple(
                    Hit(
                        line=10 * h + 1, text=f"    value_{n}_{h} = {query.text}(argument, other)  # typical", column=13
                    )
                    for h in range(3)
                ),
                definition=False,
            )
            for n in range(400)
        )
        return BackendResult(files=files, status="capped", reason="stopped at 400 files (cap)")

    return MockBackend(handler, name="wide")


def held_bytes(store: MemoryStore) -> int:
    """What tracemalloc says the store's records hold: the traced memory freed by dropping them."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    store.clear()
    gc.collect()
    return before - tracemalloc.get_traced_memory()[0]


async def bound(queries: int, bound_mib: int) -> None:
    service = SearchService.with_backends([mock_backend()], cache={"answer_ttl_s": 0, "max_bytes": bound_mib << 20})
    store = service.cache.store
    assert isinstance(store, MemoryStore)
    most = 0
    tracemalloc.start()
    try:
        for n in range(queries):
            answer = await service.search_json({"query": f"needle_{n:04}", "files": 20})
            assert next_page(answer) is not None and next_page(answer)["cursor"]  # type: ignore[index]
            most = max(most, store.bytes)
        counted, records, evicted = store.bytes, len(store), store.evictions
        real = held_bytes(store)
    finally:
        tracemalloc.stop()
        await service.aclose()
    print(
        f"  {queries} distinct truncated queries, bound {bound_mib} MiB: at most {most / 2**20:.1f} MiB counted"
        f" ({'within' if most <= bound_mib << 20 else 'OVER'} the bound), {records} snapshots kept, {evicted} evicted;"
        f" tracemalloc: the kept ones hold {real / 2**20:.1f} MiB for {counted / 2**20:.1f} MiB counted"
        f" ({real / counted:.2f})"
    )


async def estimate_on_ripgrep(config: Config) -> None:
    """held_size against tracemalloc on real ripgrep snapshots, hits undecoded."""
    service = SearchService(with_cache(config, answer_ttl_s=0, max_bytes=1 << 30))
    store = service.cache.store
    assert isinstance(store, MemoryStore)
    words = ("def __init__", "import os", "raise ValueError", "return self", "TODO", "class ", "async def", "yield")
    tracemalloc.start()
    kept = 0
    try:
        for word in words:
            for case in (True, False):
                answer = await service.search_json({"query": word, "case_sensitive": case, "timeout_ms": 30_000})
                kept += next_page(answer) is not None
        counted = store.bytes
        real = held_bytes(store)
    finally:
        tracemalloc.stop()
        await service.aclose()
    print(
        f"  {kept} ripgrep snapshots (8 checkouts): tracemalloc {real / 2**20:.1f} MiB for {counted / 2**20:.1f} MiB"
        f" counted ({real / counted:.2f})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", help="corpus folder (default: a temp folder)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--bound-mib", type=int, default=32)
    args = parser.parse_args()
    configure(level="warning", json=True)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-bench-"))
    dirs = build(base)
    nfiles, nbytes = size(dirs)
    config = config_from_env(root=str(base), env={})
    print(f"cache: corpus {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.1f} MB (ripgrep, in-process service)")

    print(f"1. paging {PAGING_QUERY!r}, 20 files a page, {args.rounds} rounds")
    await paging(config, args.rounds, "snapshots off", snapshot_ttl_s=0)
    await paging(config, args.rounds, "snapshot in process")
    missing = redis_missing()
    redis = None if missing else RedisServer().start()
    try:
        if redis is None:
            print(f"  snapshot in Redis: skipped ({missing})")
        else:
            await paging(config, args.rounds, "snapshot in Redis (local)", url=redis.url)
            print(f"2. 50 identical concurrent requests for {SHARED_QUERY!r}")
            await single_flight(config, "single-flight (default)")
            await single_flight(config, "single_flight = false", single_flight=False)
            await single_flight(config, "single-flight, Redis", url=redis.url)
    finally:
        if redis is not None:
            redis.close()
    print("3. the in-process store's bound")
    await bound(args.queries, args.bound_mib)
    await estimate_on_ripgrep(config)


if __name__ == "__main__":
    asyncio.run(main())
