"""resilience: the figures of issue 5, against fake zoekt-webservers on 127.0.0.1.

    .venv/bin/python bench/resilience.py [--requests 200] [--deadline-ms 200] [--seed 5]

1. 8 namespaces, 1 black-holed, deadline D: p50/p99/max of the answer (target p99 ≤ D + 50 ms)
   and how often the other 7 were complete; one request at a time, then 8 at a time.
2. All 8 black-holed: the answer within D + 50 ms; tasks and sockets back to baseline after.
3. Two replicas, one straggling (10 % of its requests take 1 s): p99 without and with hedging
   (target ≥ 5× better, ≤ 5 % extra requests), hedging alone and with probation.
4. A backend answering 503 to everything for 30 s: backend attempts per request (target ≤ 1.2
   plus the floor). The 30 s run on an injected clock (50 ms per request; backoff sleeps
   advance it too), so it takes a second or two of real time.

The fake servers run in a child process (``--serve``), as real backends would, so their
work and garbage stay out of the gateway's event loop. The gateway side goes through
``SearchService`` and the real Zoekt adapter behind the resilience layer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.zoekt.backend import ZoektBackend, ZoektSettings
from bench import NO_CACHE
from bench.fake_zoekt import payload
from gateway.config import parse_config
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.resilience.wrapper import Policy, ResilientBackend
from gateway.service import SearchService

# --- the fake servers (child process) -------------------------------------------------------


def handler_for(kind: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``ok:N`` (payload N, 20 files), ``hole`` (never answers), ``straggle:SEED`` (10 % take 1 s), ``503``."""
    name, _, arg = kind.partition(":")
    body = payload(int(arg) if name == "ok" else 0, files=20)
    rng = random.Random(int(arg) if name == "straggle" else 0)

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        if name == "hole":
            await asyncio.Event().wait()
        if name == "503":
            return web.Response(status=503, body=b"{}", content_type="application/json")
        if name == "straggle" and rng.random() < 0.10:
            await asyncio.sleep(1.0)
        return web.Response(body=body, content_type="application/json")

    return handle


async def serve(kinds: list[str]) -> None:
    urls = []
    for kind in kinds:
        app = web.Application()
        app.router.add_post("/api/search", handler_for(kind))
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        urls.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
    print("ready", *urls, flush=True)
    await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def servers(*kinds: str) -> AsyncIterator[list[str]]:
    """Fake servers of ``kinds`` in a child process; their URLs."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", *kinds, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode().split()
        if not line or line[0] != "ready":
            raise RuntimeError("the fake servers did not start")
        yield line[1:]
    finally:
        proc.terminate()
        await proc.wait()


# --- measuring ------------------------------------------------------------------------------


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def other_tasks() -> int:
    return len([t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def asking(service: SearchService, request: Any) -> Callable[[int], Awaitable[Any]]:
    """``one`` for :func:`timed`: the same search each time."""
    return lambda _: service.search(request)


async def timed(
    count: int, concurrency: int, one: Callable[[int], Awaitable[Any]], judge: Callable[[Any], bool] = bool
) -> tuple[list[float], int]:
    """Run ``one(i)`` for i < count, ``concurrency`` at a time: each call's latency, and how many
    results ``judge`` found good (results are dropped at once: holding hundreds of answers
    would make every full garbage collection of this process slower)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = [0.0] * count
    good = 0

    async def run(i: int) -> None:
        nonlocal good
        async with gate:
            started = time.perf_counter()
            result = await one(i)
            latencies[i] = time.perf_counter() - started
            good += judge(result)

    await asyncio.gather(*(run(i) for i in range(count)))
    return latencies, good


def service_over(urls: list[str]) -> SearchService:
    """A service of one zoekt namespace per URL, opened from config (so wrapped as in production)."""
    namespaces = [{"name": f"ns{i}", "backend": "zoekt", "urls": [url]} for i, url in enumerate(urls)]
    return SearchService(parse_config({"namespaces": namespaces, "cache": NO_CACHE}))


# --- 1 and 2: deadlines ---------------------------------------------------------------------


def judge(answer: dict[str, Any]) -> bool:
    """The 7 healthy namespaces answered ok with all 20 files each; the 8th timed out."""
    by = {s["name"]: s for s in answer["namespaces"]}
    healthy = all(by[f"ns{i}"]["status"] == "ok" and by[f"ns{i}"]["files"] == 20 for i in range(7))
    shown = sum(1 for f in answer["files"] if f["namespace"] != "ns7")
    return healthy and shown == 140 and by["ns7"]["status"] == "timeout"


async def partial_outage(requests: int, deadline_ms: int) -> None:
    request = parse_request({"query": "register_widget", "timeout_ms": deadline_ms, "files": 200, "hit_budget": 5000})
    print(f"1. 8 backends (20 files each), 1 black-holed, D = {deadline_ms} ms (target p99 <= {deadline_ms + 50} ms)")
    async with servers(*(f"ok:{i}" for i in range(7)), "hole") as urls:
        service = service_over(urls)
        try:
            await service.search(request)  # warm: connections, imports
            for concurrency, count in ((1, requests // 2), (8, requests)):
                latencies, complete = await timed(count, concurrency, lambda i: service.search(request), judge)
                print(
                    f"   {count} answers, {concurrency} at a time: p50 {ms(statistics.median(latencies))}"
                    f"  p99 {ms(pct(latencies, 0.99))}  max {ms(max(latencies))};"
                    f" the other 7 complete and the 8th `timeout` in {complete}/{count}"
                )
        finally:
            await service.aclose()


async def total_outage(requests: int, deadline_ms: int) -> None:
    request = parse_request({"query": "register_widget", "timeout_ms": deadline_ms})
    async with servers(*["hole"] * 8) as urls:
        service = service_over(urls)
        tasks_before, sockets_before = other_tasks(), open_sockets()
        try:
            latencies, timeouts = await timed(
                requests,
                8,
                lambda i: service.search(request),
                lambda a: all(s["status"] == "timeout" for s in a["namespaces"]),
            )
            await asyncio.sleep(0.05)
            tasks_after, sockets_after = other_tasks(), open_sockets()
        finally:
            await service.aclose()
    print(f"2. all 8 black-holed, D = {deadline_ms} ms, {requests} answers, 8 at a time")
    print(
        f"   p50 {ms(statistics.median(latencies))}  p99 {ms(pct(latencies, 0.99))}  max {ms(max(latencies))}"
        f"  (target <= {deadline_ms + 50} ms); every namespace `timeout` in {timeouts}/{requests}"
    )
    print(
        f"   gateway tasks {tasks_before} -> {tasks_after}, sockets {sockets_before} -> {sockets_after}"
        " (before -> 50 ms after the last answer)"
    )


# --- 3: hedging -----------------------------------------------------------------------------


async def hedging(requests: int, seed: int, concurrency: int) -> None:
    print(
        f"3. 2 replicas, one straggling (10 % of its requests take 1 s), {requests} searches, {concurrency} at a time"
    )
    request = parse_request({"query": "register_widget", "timeout_ms": 5000})
    base: float | None = None
    for label, policy in (
        ("no hedging", Policy(hedge=False)),
        ("hedging (p95, floor 50 ms, <= 5 %)", Policy(probation_s=0.0)),
        ("hedging + probation (default)", Policy()),
    ):
        async with servers(f"straggle:{seed}", "ok:0") as urls:
            backend = ResilientBackend(ZoektBackend("z", ZoektSettings(urls=urls)), policy)
            service = SearchService.with_backends([backend])
            try:
                latencies, _ = await timed(requests, concurrency, asking(service, request))
            finally:
                await service.aclose()
        stats = backend.stats
        extra = stats.attempts / requests - 1
        p99 = pct(latencies, 0.99)
        base = base or p99
        print(
            f"   {label:36} p50 {ms(statistics.median(latencies))}  p99 {ms(p99)}  ({base / p99:5.1f}x better)"
            f"  extra requests {extra * 100:4.1f} %  hedges {stats.hedges} (won {stats.hedges_won},"
            f" denied {stats.hedges_denied})"
        )


# --- 4: a 503 storm -------------------------------------------------------------------------


class InjectedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


async def storm(requests: int) -> None:
    step = 30.0 / requests
    print(
        f"4. one backend answering 503 to everything for 30 s (injected clock), {requests} requests,"
        f" one every {step * 1000:.0f} ms"
    )
    request = parse_request({"query": "register_widget", "timeout_ms": 2000})
    async with servers("503") as urls:
        for label, settings in (
            ("breaker + retry budget (default)", {}),
            ("retry budget alone (no breaker)", {"breaker": False}),
            ("neither (retries unbounded by a budget)", {"breaker": False, "budget_min": 10**9}),
        ):
            clock = InjectedClock()
            policy = Policy(clock=clock, sleep=clock.sleep, **settings)
            backend = ResilientBackend(ZoektBackend("z", ZoektSettings(urls=urls)), policy)
            service = SearchService.with_backends([backend])
            statuses: dict[str, int] = {}
            started = time.perf_counter()
            try:
                for _ in range(requests):
                    answer = await service.search(request)
                    status = answer["namespaces"][0]["status"]
                    statuses[status] = statuses.get(status, 0) + 1
                    clock.now += step
            finally:
                await service.aclose()
            took = time.perf_counter() - started
            stats = backend.stats
            print(
                f"   {label:40} attempts/request {stats.attempts / requests:5.3f}  ({stats.attempts} attempts,"
                f" {stats.short_circuited} short-circuited; {statuses};"
                f" {took / requests * 1000:.2f} ms/request)"
            )
    print(f"   target: <= 1.2 + the floor (3 retries per 10 s window: {3 * 3 / requests:.3f} per request here)")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--deadline-ms", type=int, default=200)
    parser.add_argument("--hedge-requests", type=int, default=800)
    parser.add_argument("--hedge-concurrency", type=int, default=4)
    parser.add_argument("--storm-requests", type=int, default=600)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        await serve(args.serve)
        return
    configure(level="critical")
    # What a long-running server does once started: the import-time heap is kept out of
    # every full collection, else each gen-2 pause (tens of ms here) lands in the tail.
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    await partial_outage(args.requests, args.deadline_ms)
    await total_outage(max(50, args.requests // 4), args.deadline_ms)
    await hedging(args.hedge_requests, args.seed, args.hedge_concurrency)
    await storm(args.storm_requests)
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    asyncio.run(main())
