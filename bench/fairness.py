"""fairness: one greedy caller beside polite ones, under overload (issue 53).

    .venv/bin/python bench/fairness.py [--corpus DIR] [--seconds 60] [--greedy 4] [--polite 0.1]
                                       [--deadline-ms 5000] [--max-scans N] [--capacity RATE]
                                       [--calibrate-s 20] [--warmup-s 10] [--no-index] [--seed 1]
                                       [--tree DIR]
    make bench    # this script at its defaults

``fedsearch serve`` in a process of its own (:class:`bench.load.Server`, caching off:
``answer_ttl_s = 0``, no single-flight) over every git checkout under ``--corpus`` (by
default ``$FEDSEARCH_CORPUS_REAL`` or ``/work/corpus-real``; when that has none, copies of
this venv's packages, :func:`bench.corpus.build`). After a warm-up and a measured capacity
(``bench/load.py``'s closed loops: complete answers a second at ``2 x max_scans`` clients),
three callers send **open loop at fixed rates** for ``--seconds``, each naming itself in
``X-Fedsearch-Client``: ``greedy`` at ``--greedy`` times capacity, ``polite-1`` and
``polite-2`` at ``--polite`` times capacity each. The capacity is measured again after the
run and the total goodput is set against the mean of the two: on a shared machine the
capacity before the run alone may be another machine's (the server's CPU, gateway and rg,
is printed for each phase).

Per caller: offered (sent), admitted (200), goodput (complete answers within the deadline)
and its share of what it offered, late (answered past the deadline) and partial (within it,
a namespace not complete), p50/p99 of admitted answers, refused (429 and 503) and the
refusals' p50. ``--tree DIR`` serves another source tree (the code before a change).
Targets (issue 53): each polite caller's goodput >= 0.95 of what it offered and its p99
within the deadline; the total goodput >= 0.9 of capacity; a refusal answered in <= 20 ms p50.
:func:`drive` is what ``tests/test_fairness.py`` runs, short, in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build, size
from bench.load import (
    COMPLETE,
    MAX_OUTSTANDING,
    Mix,
    Phase,
    Server,
    checkouts,
    closed_loop,
    free_port,
    ms,
    ms1,
    pct,
    ready,
    uptime,
    write_config,
)

CLIENT_HEADER = "X-Fedsearch-Client"


@dataclass
class Stats:
    """What one caller sent and got back."""

    name: str
    rate: float
    sent: int = 0
    dropped: int = 0
    errors: int = 0
    answered: list[float] = field(default_factory=list)  # seconds, every 200
    goodput: int = 0  # complete, within the deadline
    late: int = 0  # answered after the deadline
    partial: int = 0  # answered within it, some namespace not complete (a scan cut or never started)
    refused: list[float] = field(default_factory=list)  # seconds, every 429 and 503
    statuses: dict[int, int] = field(default_factory=dict)  # refusals by status
    reasons: dict[str, int] = field(default_factory=dict)  # refusals by the problem's reason
    no_retry_after: int = 0


async def one(session: aiohttp.ClientSession, url: str, body: bytes, stats: Stats, deadline_s: float) -> None:
    """Send one request as ``stats.name`` and count what came back."""
    stats.sent += 1
    headers = {"Content-Type": "application/json", CLIENT_HEADER: stats.name}
    started = time.perf_counter()
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            raw = await resp.read()
            status = resp.status
            retry_after = resp.headers.get("Retry-After")
    except (aiohttp.ClientError, OSError):
        stats.errors += 1
        return
    took = time.perf_counter() - started
    if status in (429, 503):
        stats.refused.append(took)
        stats.statuses[status] = stats.statuses.get(status, 0) + 1
        reason = orjson.loads(raw).get("reason", "capacity")
        stats.reasons[reason] = stats.reasons.get(reason, 0) + 1
        stats.no_retry_after += retry_after is None
        return
    if status != 200:
        stats.errors += 1
        return
    stats.answered.append(took)
    complete = all(s["status"] in COMPLETE for s in orjson.loads(raw)["namespaces"])
    if took > deadline_s:
        stats.late += 1
    elif complete:
        stats.goodput += 1
    else:
        stats.partial += 1


async def sender(
    session: aiohttp.ClientSession,
    url: str,
    stats: Stats,
    seconds: float,
    deadline_s: float,
    next_body: Callable[[], bytes],
    offset: float = 0.0,
) -> None:
    """Open loop: one request every ``1 / stats.rate`` seconds for ``seconds`` (a fixed rate, each
    its own task, never waiting for an answer); then wait for them."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    gap = 1.0 / stats.rate
    outstanding: set[asyncio.Task[None]] = set()
    at = offset * gap
    while at < seconds:
        delay = start + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        at += gap
        if len(outstanding) >= MAX_OUTSTANDING:
            stats.dropped += 1
            continue
        task = asyncio.create_task(one(session, url, next_body(), stats, deadline_s))
        outstanding.add(task)
        task.add_done_callback(outstanding.discard)
    await asyncio.gather(*outstanding)


async def drive(
    session: aiohttp.ClientSession,
    url: str,
    callers: Sequence[tuple[str, float]],
    seconds: float,
    deadline_s: float,
    next_body: Callable[[], bytes],
) -> dict[str, Stats]:
    """Every caller (name, requests a second) sending open loop at once for ``seconds``."""
    stats = {name: Stats(name, rate) for name, rate in callers}
    await asyncio.gather(
        *(
            sender(session, url, s, seconds, deadline_s, next_body, offset=i / len(stats))
            for i, s in enumerate(stats.values())
        )
    )
    return stats


HEADER = (
    f"{'caller':<10} {'offered/s':>9} {'offered':>7} {'admitted':>8} {'goodput':>7} {'of offered':>10} "
    f"{'late':>5} {'partial':>7} {'p50 ms':>7} {'p99 ms':>7} {'refused':>7} {'429':>5} {'503':>5} {'ref p50 ms':>10}"
)


def row(s: Stats) -> str:
    share = s.goodput / s.sent if s.sent else float("nan")
    return (
        f"{s.name:<10} {s.rate:>9.2f} {s.sent:>7} {len(s.answered):>8} {s.goodput:>7} {share:>10.3f} "
        f"{s.late:>5} {s.partial:>7} {ms(pct(s.answered, 0.5)):>7} {ms(pct(s.answered, 0.99)):>7} {len(s.refused):>7} "
        f"{s.statuses.get(429, 0):>5} {s.statuses.get(503, 0):>5} {ms1(pct(s.refused, 0.5)):>10}"
    )


def report(stats: dict[str, Stats], seconds: float, capacity: float, deadline_s: float) -> list[str]:
    """The table and the targets, met or not."""
    lines = [HEADER, *(row(s) for s in stats.values())]
    total = sum(s.goodput for s in stats.values()) / seconds
    refusals = [t for s in stats.values() for t in s.refused]
    lines.append(f"total goodput {total:.1f}/s = {total / capacity:.3f} of capacity ({capacity:.1f}/s)")
    for s in stats.values():
        if s.name.startswith("polite"):
            share = s.goodput / s.sent if s.sent else 0.0
            p99 = pct(s.answered, 0.99)
            ok = share >= 0.95 and p99 <= deadline_s
            lines.append(
                f"target {s.name}: goodput {share:.3f} of offered (>= 0.95), p99 {ms(p99)} ms "
                f"(<= {deadline_s * 1000:.0f}): {'met' if ok else 'MISSED'}"
            )
    lines.append(f"target total goodput >= 0.9 of capacity: {'met' if total >= 0.9 * capacity else 'MISSED'}")
    p50 = pct(refusals, 0.5)
    lines.append(f"target refusal p50 <= 20 ms: {ms1(p50)} ms: {'met' if not p50 > 0.020 else 'MISSED'}")
    reasons = {name: s.reasons for name, s in stats.items() if s.reasons}
    lines.append(f"refusals by reason: {reasons}; without Retry-After: {sum(s.no_retry_after for s in stats.values())}")
    return lines


def cpu_s(pid: int) -> tuple[float, float]:
    """CPU seconds of process ``pid`` so far: its own (user + system) and its ended children's (rg)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def spent(before: tuple[float, float], after: tuple[float, float], seconds: float, answers: int) -> str:
    own, rg = after[0] - before[0], after[1] - before[1]
    return (
        f"server CPU {own / seconds:.2f} cores (gateway), {rg / seconds:.2f} (rg); "
        f"{(own + rg) / max(1, answers) * 1000:.0f} ms an answer"
    )


async def run(args: argparse.Namespace, dirs: list[Path], work: Path) -> None:
    port = free_port()
    index_dir = work / "index"
    config = work / "fedsearch.toml"
    args.cache_mb = 16
    write_config(config, dirs, port, index_dir, args)
    server = Server(config, port, None, Path(args.tree).resolve())
    deadline_s = args.deadline_ms / 1000
    url = server.url + "/v1/search"
    mix = Mix(args.seed, args.deadline_ms)
    timeout = aiohttp.ClientTimeout(total=deadline_s + 30)
    watcher = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True), timeout=timeout)
    load = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)
    try:
        max_scans = await ready(server, watcher, args, index_dir, dirs)
        await closed_loop(load, url, mix, Phase("warm-up", 0), max(1, max_scans), args.warmup_s, deadline_s)

        async def calibrate() -> float:
            calib = Phase("capacity", 0)
            before = cpu_s(server.proc.pid)
            await closed_loop(load, url, mix, calib, 2 * max(1, max_scans), args.calibrate_s, deadline_s)
            print(
                f"capacity {calib.goodput / calib.seconds:.1f}/s;",
                spent(before, cpu_s(server.proc.pid), calib.seconds, len(calib.answered)),
                f"({uptime()})",
            )
            return calib.goodput / calib.seconds

        capacity = args.capacity or await calibrate()
        await asyncio.sleep(2.0)
        callers = [
            ("greedy", args.greedy * capacity),
            ("polite-1", args.polite * capacity),
            ("polite-2", args.polite * capacity),
        ]
        print(
            f"capacity {capacity:.1f} complete answers/s; for {args.seconds:g} s: "
            + ", ".join(f"{name} {rate:.2f}/s" for name, rate in callers)
        )
        before, started = cpu_s(server.proc.pid), time.perf_counter()
        stats = await drive(load, url, callers, args.seconds, deadline_s, mix.next)
        answers = sum(len(s.answered) for s in stats.values())
        print("run:", spent(before, cpu_s(server.proc.pid), time.perf_counter() - started, answers))
        if not args.capacity:  # the machine may have changed meanwhile (it is shared): measured again
            await asyncio.sleep(2.0)
            after = await calibrate()
            print(f"capacity before the run {capacity:.1f}/s, after it {after:.1f}/s: taken as their mean")
            capacity = (capacity + after) / 2
        print()
        for line in report(stats, args.seconds, capacity, deadline_s):
            print(line)
        metrics = await (await watcher.get(server.url + "/metrics")).text()
        prefix = "fedsearch_caller_requests_total{"
        counted = [line for line in metrics.splitlines() if line.startswith(prefix)]
        print("server counted:", "; ".join(sorted(counted)))
    finally:
        await load.close()
        await watcher.close()
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--greedy", type=float, default=4.0, help="the greedy caller's rate, times capacity")
    parser.add_argument("--polite", type=float, default=0.1, help="each polite caller's rate, times capacity")
    parser.add_argument("--deadline-ms", type=int, default=5000)
    parser.add_argument("--max-scans", type=int, default=0)
    parser.add_argument("--capacity", type=float, default=0.0, help="1x in requests/s (default: measured)")
    parser.add_argument("--calibrate-s", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=10.0)
    parser.add_argument("--no-index", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--tree",
        default=str(Path(__file__).resolve().parents[1]),
        help="serve from this source tree (`git archive REV | tar -x -C DIR`: the code before a change)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fedsearch-fairness-"))
    try:
        dirs = checkouts(Path(args.corpus))
        if not dirs:
            dirs = build(work / "corpus")
            print(f"fairness: no checkouts under {args.corpus}: copies of this venv's packages instead")
        nfiles, nbytes = size(dirs)
        print(f"fairness: {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.0f} MB")
        print(f"machine: {os.cpu_count()} CPUs; {uptime()}")
        asyncio.run(run(args, dirs, work))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work, ignore_errors=True)
        print(f"machine after: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
