"""overhead: fedsearch vs a naive gateway in front of the same 8 fake Zoekt backends.

The naive gateway runs twice: as written naively (a ClientSession per request) and with
one shared session (connection reuse, the stronger baseline); both ratios are printed.

    .venv/bin/python bench/overhead.py [--rounds 3] [--seconds 3]

One process serves 8 pre-serialized Zoekt answers (100 files each); fedsearch
(`fedsearch serve`, one worker) and the naive gateway (bench/naive_gateway.py, one
worker) both front them. Measured A B A B: throughput at 16 connections and p50
latency at 1 connection. Prints min/median/max and the ratios.

Side by side (issue 54), in the same A B C rounds: ``--tree DIR`` adds fedsearch run from
another source tree (``git archive REV | tar -x -C DIR``: the code before a change);
``--tracing`` adds this tree with tracing on at 100 % sampling, exporting every span over
OTLP to ``otlp_sink.py``; ``--traced-tree DIR`` adds another tree with tracing on (the
tracing before a change); ``--no-naive`` leaves the naive gateways out; ``--files N``: each
Zoekt answer's files (100; fewer make a request cheaper, and tracing's share of it larger).
Each round runs the gateways in turn, the order reversed every other round; with
``--together`` the 16-connection load of a round is sent to every gateway at once (their
throughputs are then shares of the machine, not comparable to a run alone), so that what
else the shared machine runs at that moment weighs on each alike: the steadier way to
compare CPU a request. CPU a request is printed twice: used in the gateway's own windows, and
used from the start of each of its windows to the start of its next one (the last: SETTLE_S
after the last round), which counts what a thread does after the window (a traced gateway's
batch processor exports up to 5 s later, possibly while another gateway is loaded).

``--interleave STEPS`` measures CPU a request finer still: STEPS steps, each sending BURST
requests at once to each gateway in turn (in an order drawn anew each step: a gateway loaded
right after itself runs on warm caches, and a fixed order favours those at its ends), so that a
second's drift in the machine's speed weighs on every gateway alike; each gateway's CPU is read
from ``/proc`` before each of BLOCKS blocks of steps and SETTLE_S after the last. Printed: CPU
a request over the whole run, its ratio to this tree, and the blocks' own ratios (min, median,
max: the spread a single shorter run would show).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
PY = sys.executable
BODY = b'{"query": "register_widget"}'
#: Wait after the last round: the batch span processor exports what is left within 5 s.
SETTLE_S = 6.0
#: ``--interleave``: requests sent at once to a gateway in a step, and the blocks the steps make.
BURST = 16
BLOCKS = 10


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def consecutive_ports(n: int) -> int:
    for base in range(23000, 60000, 97):
        try:
            socks = []
            for i in range(n):
                s = socket.socket()
                s.bind(("127.0.0.1", base + i))
                socks.append(s)
            for s in socks:
                s.close()
            return base
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


async def wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.post(url + "/v1/search", data=BODY) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


async def search(session: aiohttp.ClientSession, url: str) -> None:
    """One search, answered 200."""
    async with session.post(url + "/v1/search", data=BODY) as resp:
        await resp.read()
        assert resp.status == 200


async def load(url: str, connections: int, seconds: float) -> tuple[float, list[float]]:
    """Requests per second with ``connections`` concurrent clients, and every latency."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while time.monotonic() < stop:
                started = time.perf_counter()
                await search(session, url)
                latencies.append(time.perf_counter() - started)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.monotonic() - started
    return len(latencies) / elapsed, latencies


async def interleave(gateways: dict[str, str], pids: dict[str, int], steps: int) -> None:
    """CPU a request, each step sending BURST searches to every gateway in turn (see the module's doc)."""
    names = [name for name in gateways if name in pids]
    marks: dict[str, list[float]] = {name: [] for name in names}
    per_block = max(1, steps // BLOCKS)
    rng = random.Random(54)
    load_before = os.getloadavg()[0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=BURST * len(names))) as session:
        for step in range(steps):
            if step % per_block == 0:
                for name in names:
                    marks[name].append(cpu_s(pids[name]))
            for name in rng.sample(names, len(names)):
                await asyncio.gather(*(search(session, gateways[name]) for _ in range(BURST)))
    load_after = os.getloadavg()[0]
    await asyncio.sleep(SETTLE_S)
    for name in names:
        marks[name].append(cpu_s(pids[name]))
    sizes = [min(per_block, steps - start) * BURST for start in range(0, steps, per_block)]
    print(
        f"interleaved: {steps} steps of {BURST} searches to each gateway in turn, in {len(sizes)} blocks; "
        f"{os.cpu_count()} cores; load {load_before:.1f} before, {load_after:.1f} after"
    )
    used = {
        name: [(b - a) / n for a, b, n in zip(marks[name][:-1], marks[name][1:], sizes, strict=True)] for name in names
    }
    whole = {name: (marks[name][-1] - marks[name][0]) / (steps * BURST) for name in names}
    for name in names:
        line = f"{name:17} CPU a request {whole[name] * 1000:7.2f} ms (blocks {fmt(used[name], 'ms', 1000)})"
        if name != "fedsearch":
            blocks = sorted(a / b for a, b in zip(used[name], used["fedsearch"], strict=True))
            line += (
                f"; {whole[name] / whole['fedsearch']:.3f}x this tree's"
                f" (blocks min {blocks[0]:.3f} med {statistics.median(blocks):.3f} max {blocks[-1]:.3f})"
            )
        print(line)


def cpu_s(pid: int) -> float:
    """CPU seconds ``pid`` has used (user and system), from /proc: a figure the machine's other load
    moves far less than throughput."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(tree: Path, config: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``fedsearch serve`` from the source tree ``tree`` (its own code: first on the path)."""
    return subprocess.Popen(
        [PY, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
        stderr=subprocess.DEVNULL,
        cwd=tree,
        env=dict(env, PYTHONPATH=str(tree)),
    )


def fmt(xs: list[float], unit: str, scale: float = 1.0) -> str:
    return f"min {min(xs) * scale:8.1f}  med {statistics.median(xs) * scale:8.1f}  max {max(xs) * scale:8.1f} {unit}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--tree", action="append", default=[], help="another fedsearch source tree beside this one")
    parser.add_argument("--tracing", action="store_true", help="also this tree with tracing on (100 %% sampled)")
    parser.add_argument("--traced-tree", action="append", default=[], help="another source tree, tracing on")
    parser.add_argument("--no-naive", action="store_true", help="leave the naive gateways out")
    parser.add_argument("--files", type=int, default=100, help="files in each Zoekt answer")
    parser.add_argument("--together", action="store_true", help="load every gateway at once (CPU a request)")
    parser.add_argument("--no-p50", action="store_true", help="leave out the 1-connection latency")
    parser.add_argument("--interleave", type=int, default=0, metavar="STEPS", help="CPU a request, interleaved")
    args = parser.parse_args()
    base = consecutive_ports(8)
    fed_port, naive_port, reuse_port, sink_port, traced_port = free_ports(5)
    backends = [f"http://127.0.0.1:{base + i}" for i in range(8)]
    tmp = Path(tempfile.mkdtemp(prefix="fedsearch-overhead-"))
    config = tmp / "fedsearch.toml"
    config.write_text(
        "".join(
            f'[[namespaces]]\nname = "zoekt{i}"\nbackend = "zoekt"\nurls = ["{u}"]\n' for i, u in enumerate(backends)
        )
        + "[cache]\nanswer_ttl_s = 0\nsingle_flight = false\n"  # every request searches, as the naive one does
    )
    env = dict(os.environ, FEDSEARCH_LOG_LEVEL=os.environ.get("FEDSEARCH_LOG_LEVEL", "info"))
    procs = [
        subprocess.Popen([PY, str(HERE / "fake_zoekt.py"), str(base), "8", str(args.files)], stdout=subprocess.PIPE),
    ]
    assert procs[0].stdout is not None
    procs[0].stdout.readline()
    procs.append(serve(HERE.parent, config, fed_port, env))
    gateways = {"fedsearch": f"http://127.0.0.1:{fed_port}"}
    pids = {"fedsearch": procs[-1].pid}
    for tree, port in zip(args.tree, free_ports(len(args.tree)), strict=True):
        procs.append(serve(Path(tree).resolve(), config, port, env))
        gateways[Path(tree).name] = f"http://127.0.0.1:{port}"
        pids[Path(tree).name] = procs[-1].pid
    if args.tracing or args.traced_tree:
        sink = subprocess.Popen([PY, str(HERE / "otlp_sink.py"), str(sink_port)], stdout=subprocess.PIPE)
        procs.append(sink)
        assert sink.stdout is not None
        sink.stdout.readline()
        traced = tmp / "traced.toml"
        endpoint = f"http://127.0.0.1:{sink_port}/v1/traces"
        traced.write_text(config.read_text() + f'[tracing]\nendpoint = "{endpoint}"\nsample_ratio = 1.0\n')
        trees = [("fedsearch+tracing", HERE.parent, traced_port)] if args.tracing else []
        trees += [
            (f"{Path(tree).name}+tracing", Path(tree).resolve(), port)
            for tree, port in zip(args.traced_tree, free_ports(len(args.traced_tree)), strict=True)
        ]
        for name, tree, port in trees:
            procs.append(serve(tree, traced, port, env))
            gateways[name] = f"http://127.0.0.1:{port}"
            pids[name] = procs[-1].pid
    if not args.no_naive:
        procs.append(subprocess.Popen([PY, str(HERE / "naive_gateway.py"), str(naive_port), *backends]))
        procs.append(
            subprocess.Popen(
                [PY, str(HERE / "naive_gateway.py"), str(reuse_port), *backends], env=dict(os.environ, NAIVE_REUSE="1")
            )
        )
        gateways["naive"] = f"http://127.0.0.1:{naive_port}"
        gateways["naive+reuse"] = f"http://127.0.0.1:{reuse_port}"
    try:
        for url in gateways.values():
            await wait_ready(url)
            await load(url, 16, 1.0)  # warm
        if args.interleave:
            await interleave(gateways, pids, args.interleave)
            return
        load_before = os.getloadavg()[0]
        rps: dict[str, list[float]] = {k: [] for k in gateways}
        p50: dict[str, list[float]] = {k: [] for k in gateways}
        cpu: dict[str, list[float]] = {k: [] for k in pids}
        # Each gateway's CPU at the start of each of its windows, and its requests in it: a round's
        # CPU runs to the start of its next window (the last: SETTLE_S after the last round), so that
        # what a window leaves to a thread (the spans the batch processor exports up to 5 s later)
        # is counted, whenever it runs.
        marks: dict[str, list[float]] = {k: [] for k in pids}
        served: dict[str, list[int]] = {k: [] for k in pids}
        for turn in range(args.rounds):
            if args.together:  # every gateway loaded at once: whatever else the machine runs, it runs for all
                before = {name: cpu_s(pid) for name, pid in pids.items()}
                loads = await asyncio.gather(*(load(url, 16, args.seconds) for url in gateways.values()))
                for name, (rate, lat) in zip(gateways, loads, strict=True):
                    rps[name].append(rate)
                    if name in pids:
                        cpu[name].append((cpu_s(pids[name]) - before[name]) / len(lat))
                        marks[name].append(before[name])
                        served[name].append(len(lat))
            for name, url in list(gateways.items())[:: -1 if turn % 2 else 1]:
                if not args.together:
                    before_one = cpu_s(pids[name]) if name in pids else 0.0
                    rate, lat = await load(url, 16, args.seconds)
                    if name in pids:
                        cpu[name].append((cpu_s(pids[name]) - before_one) / len(lat))
                        marks[name].append(before_one)
                        served[name].append(len(lat))
                    rps[name].append(rate)
                if not args.no_p50:
                    _, lat = await load(url, 1, args.seconds)
                    p50[name].append(statistics.median(lat))
        load_after = os.getloadavg()[0]
        await asyncio.sleep(SETTLE_S)
        settled: dict[str, list[float]] = {}
        for name, pid in pids.items():
            ends = [*marks[name][1:], cpu_s(pid)]
            settled[name] = [(end - mark) / n for mark, end, n in zip(marks[name], ends, served[name], strict=True)]
        order = "all at once" if args.together else "A B B A"
        print(
            f"8 fake Zoekt backends x {args.files} files; {args.rounds} rounds {order} of {args.seconds:.0f} s; "
            f"{os.cpu_count()} cores; load {load_before:.1f} before, {load_after:.1f} after"
        )
        for name in gateways:
            latency = f" | p50@1 {fmt(p50[name], 'ms', 1000)}" if p50[name] else ""
            print(f"{name:17} throughput@16 {fmt(rps[name], 'req/s')}{latency}")
        for name in pids:
            print(f"{name:17} CPU a request @16 {fmt(cpu[name], 'ms', 1000)}  (its window)")
            print(f"{name:17} CPU a request @16 {fmt(settled[name], 'ms', 1000)}  (to its next window: all)")
        for other in pids:
            if other != "fedsearch":
                tput = statistics.median(rps[other]) / statistics.median(rps["fedsearch"])
                ratio = statistics.median(p50[other]) / statistics.median(p50["fedsearch"]) if p50[other] else 0.0
                print(f"ratios {other}/fedsearch: throughput {tput:.3f}x, p50 {ratio:.3f}x")
                for label, used in (("its window", cpu), ("all", settled)):
                    whole = statistics.median(used[other]) / statistics.median(used["fedsearch"])
                    paired = statistics.median(a / b for a, b in zip(used[other], used["fedsearch"], strict=True))
                    print(f"  CPU a request ({label}): {whole:.3f}x (the rounds' own ratios: median {paired:.3f}x)")
        for naive in [n for n in ("naive", "naive+reuse") if n in gateways]:
            tput = statistics.median(rps["fedsearch"]) / statistics.median(rps[naive])
            ratio = statistics.median(p50["fedsearch"]) / statistics.median(p50[naive]) if p50[naive] else 0.0
            print(f"ratios fedsearch/{naive}: throughput {tput:.2f}x (target >= 1.2), p50 {ratio:.2f}x (target <= 1.0)")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


if __name__ == "__main__":
    asyncio.run(main())
