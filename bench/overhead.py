"""overhead: fedsearch vs a naive gateway in front of the same 8 fake Zoekt backends.

The naive gateway runs twice: as written naively (a ClientSession per request) and with
one shared session (connection reuse, the stronger baseline); both ratios are printed.

    .venv/bin/python bench/overhead.py [--rounds 3] [--seconds 3]

One process serves 8 pre-serialized Zoekt answers (100 files each); fedsearch
(`fedsearch serve`, one worker) and the naive gateway (bench/naive_gateway.py, one
worker) both front them. Measured A B A B: throughput at 16 connections and p50
latency at 1 connection. Prints min/median/max and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


async def load(url: str, connections: int, seconds: float) -> tuple[float, list[float]]:
    """Requests per second with ``connections`` concurrent clients, and every latency."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while time.monotonic() < stop:
                started = time.perf_counter()
                async with session.post(url + "/v1/search", data=BODY) as resp:
                    await resp.read()
                    assert resp.status == 200
                latencies.append(time.perf_counter() - started)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.monotonic() - started
    return len(latencies) / elapsed, latencies


def fmt(xs: list[float], unit: str, scale: float = 1.0) -> str:
    return f"min {min(xs) * scale:8.1f}  med {statistics.median(xs) * scale:8.1f}  max {max(xs) * scale:8.1f} {unit}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    base = consecutive_ports(8)
    fed_port, naive_port, reuse_port = free_ports(3)
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
        subprocess.Popen([PY, str(HERE / "fake_zoekt.py"), str(base), "8"], stdout=subprocess.PIPE),
    ]
    assert procs[0].stdout is not None
    procs[0].stdout.readline()
    procs.append(
        subprocess.Popen(
            [PY, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(fed_port)],
            stderr=subprocess.DEVNULL,
            env=env,
        )
    )
    procs.append(subprocess.Popen([PY, str(HERE / "naive_gateway.py"), str(naive_port), *backends]))
    procs.append(
        subprocess.Popen(
            [PY, str(HERE / "naive_gateway.py"), str(reuse_port), *backends], env=dict(os.environ, NAIVE_REUSE="1")
        )
    )
    gateways = {
        "fedsearch": f"http://127.0.0.1:{fed_port}",
        "naive": f"http://127.0.0.1:{naive_port}",
        "naive+reuse": f"http://127.0.0.1:{reuse_port}",
    }
    try:
        for url in gateways.values():
            await wait_ready(url)
            await load(url, 16, 1.0)  # warm
        rps: dict[str, list[float]] = {k: [] for k in gateways}
        p50: dict[str, list[float]] = {k: [] for k in gateways}
        for _ in range(args.rounds):
            for name, url in gateways.items():
                rate, _ = await load(url, 16, args.seconds)
                rps[name].append(rate)
                _, lat = await load(url, 1, args.seconds)
                p50[name].append(statistics.median(lat))
        print(
            f"8 fake Zoekt backends x 100 files; {args.rounds} rounds A B A B of {args.seconds:.0f} s; "
            f"{os.cpu_count()} cores"
        )
        for name in gateways:
            print(f"{name:12} throughput@16 {fmt(rps[name], 'req/s')} | p50@1 {fmt(p50[name], 'ms', 1000)}")
        for naive in ("naive", "naive+reuse"):
            tput = statistics.median(rps["fedsearch"]) / statistics.median(rps[naive])
            ratio = statistics.median(p50["fedsearch"]) / statistics.median(p50[naive])
            print(f"ratios fedsearch/{naive}: throughput {tput:.2f}x (target >= 1.2), p50 {ratio:.2f}x (target <= 1.0)")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


if __name__ == "__main__":
    asyncio.run(main())
