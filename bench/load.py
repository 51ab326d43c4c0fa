"""load: goodput under load, 1x to 4x capacity, and a soak (issue 22; SPEC §6, last paragraph).

    .venv/bin/python bench/load.py [--corpus DIR] [--phase-s 20] [--multiples 1,2,4]
                                   [--soak-s 60] [--soak-multiple 2] [--deadline-ms 5000]
                                   [--max-scans N] [--capacity RATE] [--calibrate-s 20]
                                   [--warmup-s 10] [--sample-s 5] [--rounds 1] [--no-index] [--seed 1]
                                   [--server-log FILE] [--tree DIR]
    make bench    # this script at its defaults: 20 s a multiple, a 60 s soak
    make soak     # the issue's run: 180 s a multiple, then 600 s at 2x

``fedsearch serve`` (a process of its own, as deployed) over every git checkout under
``--corpus`` (default ``$FEDSEARCH_CORPUS_REAL`` or ``/work/corpus-real``: real
repositories, outside any checkout, never committed; skipped with a line saying how to
get them when absent), each a ``ripgrep`` namespace, answers cached nowhere (``[cache]
answer_ttl_s = 0``, no single-flight: every request scans; cursor snapshots kept as
served, in a store bounded to ``--cache-mb``, full by the end of warm-up), its
declaration index built first (``--no-index``: none). Everything stays on 127.0.0.1 and every phase ends by itself.

1. **Warm-up** (``--warmup-s``, a few closed-loop clients): the server learns what scans cost.
2. **Capacity**: ``2 x max_scans`` closed-loop clients (each slot busy, one more waiting)
   for ``--calibrate-s``; the rate of complete answers is "1x" (or give it: ``--capacity``).
   A refused client waits (Retry-After, at most half a second): it must not spin.
3. **Multiples**: for each of ``--multiples``, requests sent open-loop (Poisson arrivals, a
   seeded mix of queries) at that multiple of capacity for ``--phase-s`` seconds; with
   ``--rounds N`` the multiples N times over, interleaved (1x 2x 4x 1x 2x 4x: a neighbour's
   load on a shared machine falls on each), and summed per multiple.
4. **Soak**: ``--soak-s`` seconds at ``--soak-multiple``, the server sampled every
   ``--sample-s``: RSS, open descriptors, child processes, event-loop tasks, scans.
5. **After**: the server idle a moment, sampled again beside the baseline taken after warm-up.

Per phase: requests sent, answered 200, refused 503, goodput (complete answers, every
namespace ``ok`` or ``capped``, within the deadline as the client measured it, per second)
and its share of the 1x goodput, admitted p50/p99/max, refusals p50/p99/max. Targets
(issue 22): goodput at 2x and 4x >= 90 % of 1x; admitted p99 <= deadline; refusals < 10 ms;
the soak's RSS growth after warm-up < 20 MB; descriptors and children back to baseline.
The machine is printed (``uptime``) before and after: shared machines are noisy.
``--tree DIR`` serves from another source tree (a baseline: ``git worktree add
/tmp/before main``; give it the same ``--capacity`` so both are offered the same load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import size, wait_for_index

JSON = {"Content-Type": "application/json"}
#: A mix of what people search for: rare names, common words, regexes (some find a lot).
QUERIES: tuple[dict[str, Any], ...] = (
    {"query": "ClientSession"},
    {"query": "def __init__"},
    {"query": "import os"},
    {"query": "raise ValueError"},
    {"query": "TODO"},
    {"query": "register_event"},
    {"query": "async def"},
    {"query": "return None"},
    {"query": "Optional["},
    {"query": "isinstance"},
    {"query": "connection pool"},
    {"query": "deprecated"},
    {"query": r"class \w+Error", "mode": "regex"},
    {"query": r"def test_\w+_json", "mode": "regex"},
    {"query": r"https?://\S+\.org", "mode": "regex"},
    {"query": "lang:python self.assert"},
)
#: Requests in flight the client allows itself (past it, an arrival is counted dropped).
MAX_OUTSTANDING = 4000
#: A closed-loop client refused waits Retry-After, at most this long, before asking again.
CLOSED_LOOP_PAUSE_S = 0.5
#: Statuses of a complete namespace answer (``capped``: the backend's own limit, not load).
COMPLETE = frozenset({"ok", "capped"})


@dataclass
class Phase:
    """What one phase sent and got back."""

    name: str
    rate: float  # requests a second offered (0: closed loop)
    seconds: float = 0.0
    sent: int = 0
    dropped: int = 0
    errors: int = 0
    answered: list[float] = field(default_factory=list)  # seconds, every 200
    goodput: int = 0  # complete and within the deadline
    partial: int = 0  # 200 but some namespace timed out / was unavailable
    late: int = 0  # 200 after the deadline
    refused: list[float] = field(default_factory=list)  # seconds, every 503
    no_retry_after: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


def merged(name: str, phases: list[Phase]) -> Phase:
    """The phases of one multiple over every round, as one."""
    out = Phase(name, phases[0].rate if phases else 0.0)
    for p in phases:
        out.seconds += p.seconds
        out.sent += p.sent
        out.dropped += p.dropped
        out.errors += p.errors
        out.answered += p.answered
        out.goodput += p.goodput
        out.partial += p.partial
        out.late += p.late
        out.refused += p.refused
        out.no_retry_after += p.no_retry_after
        for k, v in p.statuses.items():
            out.statuses[k] = out.statuses.get(k, 0) + v
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:,.0f}"


def ms1(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:.1f}"


# --- the server ------------------------------------------------------------------------------


def checkouts(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.iterdir() if (p / ".git").exists()) if corpus.is_dir() else []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_config(path: Path, dirs: list[Path], port: int, index_dir: Path, args: argparse.Namespace) -> None:
    lines = ["[server]", 'host = "127.0.0.1"', f"port = {port}"]
    if args.max_scans:
        lines.append(f"max_scans = {args.max_scans}")
    lines += ["", "[defaults]", f"timeout_ms = {args.deadline_ms}", ""]
    # every request scans (no cached answers, no shared ones); the in-process store (cursor
    # snapshots) bounded small, so it is full by the end of warm-up: what grows after is not it
    lines += ["[cache]", "answer_ttl_s = 0", "single_flight = false", f"max_bytes = {args.cache_mb << 20}", ""]
    lines += ["[index]", f"enabled = {'false' if args.no_index else 'true'}", f'dir = "{index_dir}"', ""]
    for d in dirs:
        lines += ["[[namespaces]]", f'name = "{d.name}"', 'backend = "ripgrep"', f'root = "{d}"', ""]
    path.write_text("\n".join(lines))


class Server:
    """``fedsearch serve`` in a process of its own, and what /proc and /metrics say of it."""

    def __init__(self, config: Path, port: int, log: Path | None, tree: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(tree)}  # the gateway of that source tree
        with open(log or os.devnull, "wb") as stderr:  # its logs at info, as served (to nowhere by default)
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)],
                cwd=tree,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    async def up(self, session: aiohttp.ClientSession) -> None:
        for _ in range(600):
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(self.url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        raise RuntimeError("fedsearch serve did not come up")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def children(self) -> int:
        found = 0
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            with contextlib.suppress(OSError):
                found += len(Path(f"/proc/{self.proc.pid}/task/{task}/children").read_text().split())
        return found

    async def metrics(self, session: aiohttp.ClientSession) -> dict[str, float]:
        async with session.get(self.url + "/metrics") as resp:
            text = await resp.text()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("fedsearch_") and any(k in line for k in ("admission", "scan", "tasks", "cache_bytes")):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    async def sample(self, session: aiohttp.ClientSession) -> dict[str, float]:
        metrics = await self.metrics(session)
        return {
            "rss_mb": self.rss_mb(),
            "fds": self.fds(),
            "children": self.children(),
            "tasks": metrics.get("fedsearch_event_loop_tasks", float("nan")),
            "running": metrics.get("fedsearch_scans_running", float("nan")),
            "queued": metrics.get("fedsearch_scans_queued", float("nan")),
            "cache_mb": metrics.get("fedsearch_cache_bytes", float("nan")) / (1 << 20),
        }

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover - a server that will not stop
            self.proc.kill()
            self.proc.wait()


# --- the clients ---------------------------------------------------------------------------


class Mix:
    """The queries, in a seeded random order; each request a little different (no two alike)."""

    def __init__(self, seed: int, deadline_ms: int) -> None:
        self._rng = random.Random(seed)
        self._deadline_ms = deadline_ms

    def next(self) -> bytes:
        return orjson.dumps({**self._rng.choice(QUERIES), "timeout_ms": self._deadline_ms})


async def one(session: aiohttp.ClientSession, url: str, body: bytes, phase: Phase, deadline_s: float) -> float:
    """Send one request and count what came back; the Retry-After of a 503 (else 0)."""
    phase.sent += 1
    started = time.perf_counter()
    try:
        async with session.post(url, data=body, headers=JSON) as resp:
            raw = await resp.read()
            status = resp.status
            retry_after = resp.headers.get("Retry-After")
    except (aiohttp.ClientError, OSError):
        phase.errors += 1
        return 0.0
    took = time.perf_counter() - started
    if status == 503:
        phase.refused.append(took)
        phase.no_retry_after += retry_after is None
        return float(retry_after) if retry_after and retry_after.isdigit() else 1.0
    if status != 200:
        phase.errors += 1
        return 0.0
    phase.answered.append(took)
    statuses = [s["status"] for s in orjson.loads(raw)["namespaces"]]
    for s in statuses:
        phase.statuses[s] = phase.statuses.get(s, 0) + 1
    complete = all(s in COMPLETE for s in statuses)
    if took > deadline_s:
        phase.late += 1
    elif complete:
        phase.goodput += 1
    if not complete:
        phase.partial += 1
    return 0.0


async def closed_loop(
    session: aiohttp.ClientSession, url: str, mix: Mix, phase: Phase, clients: int, seconds: float, deadline_s: float
) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def client() -> None:
        while loop.time() < end:
            refused = await one(session, url, mix.next(), phase, deadline_s)
            if refused:  # told to come back later: a moment later (a refused client must not spin)
                await asyncio.sleep(min(refused, CLOSED_LOOP_PAUSE_S))

    started = loop.time()
    await asyncio.gather(*(client() for _ in range(clients)))
    phase.seconds = loop.time() - started


async def open_loop(
    session: aiohttp.ClientSession,
    url: str,
    mix: Mix,
    phase: Phase,
    seconds: float,
    rng: random.Random,
    deadline_s: float,
) -> None:
    """Poisson arrivals at ``phase.rate`` for ``seconds``, each request its own task; then wait for them."""
    loop = asyncio.get_running_loop()
    start = at = loop.time()
    outstanding: set[asyncio.Task[float]] = set()
    while True:
        at += rng.expovariate(phase.rate)
        if at - start >= seconds:
            break
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(outstanding) >= MAX_OUTSTANDING:
            phase.dropped += 1
            continue
        task = asyncio.create_task(one(session, url, mix.next(), phase, deadline_s))
        outstanding.add(task)
        task.add_done_callback(outstanding.discard)
    phase.seconds = seconds
    await asyncio.gather(*outstanding)


async def sampler(
    server: Server, session: aiohttp.ClientSession, every: float, into: list[tuple[float, dict[str, float]]]
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        with contextlib.suppress(aiohttp.ClientError, OSError):
            into.append((loop.time() - start, await server.sample(session)))
        await asyncio.sleep(every)


# --- the report ----------------------------------------------------------------------------


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:  # pragma: no cover - no uptime(1)
        return "uptime: unavailable"


HEADER = (
    f"{'phase':<12} {'offered/s':>9} {'sent':>6} {'200':>6} {'503':>6} {'err':>4} {'goodput/s':>9} "
    f"{'vs 1x':>6} {'partial':>7} {'late':>5} {'adm p50':>8} {'adm p99':>8} {'adm max':>8} "
    f"{'ref p50':>8} {'ref p99':>8} {'ref max':>8}"
)


def row(phase: Phase, peak: float | None) -> str:
    rate = phase.goodput / phase.seconds if phase.seconds else 0.0
    share = f"{rate / peak * 100:5.0f}%" if peak else "     -"
    offered = f"{phase.rate:9.1f}" if phase.rate else f"{'closed':>9}"
    return (
        f"{phase.name:<12} {offered} {phase.sent:>6} {len(phase.answered):>6} {len(phase.refused):>6} "
        f"{phase.errors + phase.dropped:>4} {rate:>9.1f} {share:>6} {phase.partial:>7} {phase.late:>5} "
        f"{ms(pct(phase.answered, 0.5)):>8} {ms(pct(phase.answered, 0.99)):>8} {ms(pct(phase.answered, 1.0)):>8} "
        f"{ms1(pct(phase.refused, 0.5)):>8} {ms1(pct(phase.refused, 0.99)):>8} {ms1(pct(phase.refused, 1.0)):>8}"
    )


def summary(samples: list[tuple[float, dict[str, float]]], warm_s: float) -> str:
    if not samples:
        return "no samples"
    rss = [s["rss_mb"] for _, s in samples]
    after_warm = [s["rss_mb"] for t, s in samples if t >= warm_s] or rss
    growth = after_warm[-1] - after_warm[0]
    most = {k: max(s[k] for _, s in samples) for k in ("fds", "children", "tasks", "running", "queued", "cache_mb")}
    return (
        f"RSS {rss[0]:.0f} -> {rss[-1]:.0f} MB (max {max(rss):.0f}; after {warm_s:.0f} s of warm-up "
        f"{after_warm[0]:.0f} -> {after_warm[-1]:.0f}: {growth:+.1f} MB); most at once: "
        f"{most['fds']:.0f} fds, {most['children']:.0f} children, {most['tasks']:.0f} tasks, "
        f"{most['running']:.0f} scans running, {most['queued']:.0f} waiting; "
        f"the cache store at most {most['cache_mb']:.1f} MB"
    )


def by_minute(samples: list[tuple[float, dict[str, float]]]) -> str:
    """The RSS at the first sample of each minute (how it went, not only where it ended)."""
    seen: dict[int, float] = {}
    for t, sample in samples:
        seen.setdefault(int(t // 60), sample["rss_mb"])
    return " ".join(f"{m}:{v:.0f}" for m, v in sorted(seen.items()))


def baseline_line(name: str, sample: dict[str, float]) -> str:
    return (
        f"{name:<9} RSS {sample['rss_mb']:6.1f} MB  fds {sample['fds']:4.0f}  children {sample['children']:3.0f}  "
        f"tasks {sample['tasks']:4.0f}  scans running {sample['running']:.0f}, waiting {sample['queued']:.0f}  "
        f"cache store {sample['cache_mb']:.1f} MB"
    )


async def settle(server: Server, session: aiohttp.ClientSession, seconds: float) -> dict[str, float]:
    """Idle ``seconds`` (the server lets go of what it held), then one sample."""
    await asyncio.sleep(seconds)
    return await server.sample(session)


async def ready(
    server: Server, watcher: aiohttp.ClientSession, args: argparse.Namespace, index_dir: Path, dirs: list[Path]
) -> int:
    """Wait for the server to answer and its declaration index to be built; its ``max_scans``."""
    await server.up(watcher)
    if not args.no_index:
        waited = await asyncio.to_thread(wait_for_index, index_dir, dirs)
        print(f"declaration index built by the server in {waited:.1f} s")
    max_scans = int((await server.metrics(watcher)).get("fedsearch_scans_max", 0))  # 0: a tree without it
    print(f"server: pid {server.proc.pid}, max_scans {max_scans}, deadline {args.deadline_ms} ms")
    return max_scans


async def run(args: argparse.Namespace, dirs: list[Path], work: Path) -> None:
    port = free_port()
    index_dir = work / "index"
    config = work / "fedsearch.toml"
    write_config(config, dirs, port, index_dir, args)
    server = Server(config, port, Path(args.server_log) if args.server_log else None, Path(args.tree).resolve())
    deadline_s = args.deadline_ms / 1000
    url = server.url + "/v1/search"
    rng = random.Random(args.seed)
    mix = Mix(args.seed, args.deadline_ms)
    timeout = aiohttp.ClientTimeout(total=deadline_s + 30)
    # the samples' own session opens and closes a connection each time: it leaves nothing on the server
    watcher = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True), timeout=timeout)
    load = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)
    try:
        max_scans = await ready(server, watcher, args, index_dir, dirs)
        warm = Phase("warm-up", 0)
        await closed_loop(load, url, mix, warm, max(1, max_scans), args.warmup_s, deadline_s)
        await load.close()  # its connections go: the baseline holds none of them
        load = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)
        base = await settle(server, watcher, 2.0)
        capacity = args.capacity
        print(HEADER)
        if not capacity:
            calib = Phase("capacity", 0)
            await closed_loop(load, url, mix, calib, 2 * max(1, max_scans), args.calibrate_s, deadline_s)
            capacity = calib.goodput / calib.seconds
            print(row(calib, None), flush=True)
            await settle(server, watcher, 2.0)
        by_multiple: dict[float, list[Phase]] = {m: [] for m in args.multiples}
        for turn in range(args.rounds):
            for multiple in args.multiples:
                phase = Phase(f"{multiple:g}x" + (f" #{turn + 1}" if args.rounds > 1 else ""), multiple * capacity)
                await open_loop(load, url, mix, phase, args.phase_s, rng, deadline_s)
                by_multiple[multiple].append(phase)
                print(row(phase, None), flush=True)
                await settle(server, watcher, 2.0)
        totals = {m: merged(f"{m:g}x all", phases) for m, phases in by_multiple.items()}
        one = totals.get(1.0)
        peak = one.goodput / one.seconds if one is not None and one.seconds else None
        samples: list[tuple[float, dict[str, float]]] = []
        soak: Phase | None = None
        if args.soak_s:
            soak = Phase(f"soak {args.soak_multiple:g}x", args.soak_multiple * capacity)
            watch = asyncio.create_task(sampler(server, watcher, args.sample_s, samples))
            try:
                await open_loop(load, url, mix, soak, args.soak_s, rng, deadline_s)
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            print(row(soak, None), flush=True)
        await load.close()
        after = await settle(server, watcher, 5.0)
        print()
        print(f"capacity (1x): {capacity:.1f} complete answers/s; goodput against the 1x phases' ({peak or 0:.1f}/s):")
        print(HEADER)
        for total in totals.values():
            print(row(total, peak))
        if soak is not None:
            print(row(soak, peak))
            print(f"soak, sampled every {args.sample_s:g} s: {summary(samples, min(60.0, args.soak_s / 5))}")
            print(f"soak RSS (MB) at each minute: {by_minute(samples)}")
        print(baseline_line("baseline", base))
        print(baseline_line("after", after))
        counts = {
            k: v
            for k, v in (await server.metrics(watcher)).items()
            if ("admission_total" in k or "expired_total" in k) and "_created" not in k
        }
        print(
            "server counted:", ", ".join(f"{re.sub(r'^fedsearch_', '', k)} {v:.0f}" for k, v in sorted(counts.items()))
        )
        missing = sum(p.no_retry_after for p in totals.values()) + (soak.no_retry_after if soak else 0)
        if missing:
            print(f"WARNING: {missing} refusals without Retry-After")
    finally:
        await load.close()
        await watcher.close()
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--phase-s", type=float, default=20.0, help="seconds at each multiple")
    parser.add_argument(
        "--multiples", type=lambda s: [float(x) for x in s.split(",") if x], default=[1.0, 2.0, 4.0], help="e.g. 1,2,4"
    )
    parser.add_argument("--rounds", type=int, default=1, help="the multiples this many times over, interleaved")
    parser.add_argument("--soak-s", type=float, default=60.0, help="seconds of the soak (0: none)")
    parser.add_argument("--soak-multiple", type=float, default=2.0)
    parser.add_argument("--deadline-ms", type=int, default=5000, help="every request's timeout_ms")
    parser.add_argument("--max-scans", type=int, default=0, help="[server] max_scans (default: the server's)")
    parser.add_argument("--capacity", type=float, default=0.0, help="1x in requests/s (default: measured)")
    parser.add_argument("--calibrate-s", type=float, default=20.0)
    parser.add_argument("--warmup-s", type=float, default=10.0)
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--no-index", action="store_true", help="no declaration index")
    parser.add_argument("--cache-mb", type=int, default=16, help="[cache] max_bytes of the server, in MiB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server-log", help="write the server's log lines (info) to this file")
    parser.add_argument(
        "--tree",
        default=str(Path(__file__).resolve().parents[1]),
        help="serve from this source tree (e.g. `git worktree add /tmp/before main`: the baseline)",
    )
    args = parser.parse_args()
    corpus = Path(args.corpus)
    dirs = checkouts(corpus)
    if not dirs:
        print(
            f"load: skipped: no git checkouts under {corpus}; check some real repositories out there "
            "(e.g. sqlalchemy, mypy, pydantic, aiohttp, requests, httpx, flask, click), or give --corpus"
        )
        return 0
    nfiles, nbytes = size(dirs)
    print(f"load: {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.0f} MB under {corpus}")
    print(f"machine: {os.cpu_count()} CPUs; {uptime()}")
    work = Path(tempfile.mkdtemp(prefix="fedsearch-load-"))
    try:
        asyncio.run(run(args, dirs, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        print(f"machine after: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
