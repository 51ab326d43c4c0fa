"""namespaces: one query over 1,000 namespaces (fake Zoekt backends, many namespaces per port).

    .venv/bin/python bench/namespaces.py [--namespaces 1000] [--ports 4] [--rounds 5]

Namespace n lives on port n % ports as repository ``github.com/acme/ns<n>``
(``repos = "/ns<n>$"``) and answers after its own delay (20-80 ms; one straggler at
150 ms). A request naming several namespaces (the gateway shares one request among the
namespaces on one server, ``repo:`` being the union of theirs) is answered with all their
files after the longest of their delays, as one zoekt search over their shards would be.
The gateway runs twice: sharing requests (the default, on the default config) and with
``coalesce = false`` (one request per namespace, ``server.concurrency`` raised to let
them all go at once). Prints the answer's latency against the slowest backend's,
CPU per answer, this process's peak RSS (targets: slowest + 100 ms, <= 300 MB), and the
harness's own floor: a bare aiohttp client sending the same 1,000 requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import NO_CACHE
from bench.overhead import consecutive_ports
from gateway.config import parse_config
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.service import SearchService

SLOWEST_MS = 150


def delay_ms(n: int) -> int:
    return SLOWEST_MS if n == 7 else 20 + (n * 37) % 61


SERVER = r"""
import asyncio, base64, json, re, sys
from aiohttp import web
base, ports = int(sys.argv[1]), int(sys.argv[2])
def files(n):
    line = base64.b64encode(f"def register_widget_{n}(x):\n".encode()).decode()
    return [json.dumps({"FileName": f"src/m{i}.py", "Repository": f"github.com/acme/ns{n}", "Score": 100.0 - i,
                        "LineMatches": [{"Line": line, "LineNumber": 3, "FileName": False,
                                         "LineFragments": [{"LineOffset": 4}]}]}).encode()
            for i in range(5)]
FILES = {}
async def handler(request):
    body = await request.json()
    # the namespaces asked for: one ("repo:/ns12$"), or several sharing the request
    wanted = sorted({int(n) for n in re.findall(r"/ns(\d+)", body["Q"])})
    await asyncio.sleep(max(DELAYS(n) for n in wanted) / 1000)
    parts = [f for n in wanted for f in FILES.setdefault(n, files(n))]
    answer = (b'{"Result": {"Files": [' + b", ".join(parts) + b'], "FileCount": %d, "MatchCount": %d}}'
              % (len(parts), len(parts)))
    return web.Response(body=answer, content_type="application/json")
async def main():
    for p in range(ports):
        app = web.Application(); app.router.add_post("/api/search", handler)
        runner = web.AppRunner(app, access_log=None); await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", base + p, backlog=2048).start()
    print("ready", flush=True); await asyncio.Event().wait()
asyncio.run(main())
"""


async def bare_client(base: int, ports: int, namespaces: int, rounds: int) -> tuple[float, float]:
    """The harness's floor: the same requests from one bare aiohttp session, no gateway.

    Median seconds, wall and this process's CPU, per round.
    """
    import aiohttp

    times, cpus = [], []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(n: int) -> None:
            url = f"http://127.0.0.1:{base + n % ports}/api/search"
            async with session.post(url, json={"Q": f"repo:/ns{n}$ register_widget"}) as resp:
                await resp.read()

        for _ in range(rounds + 1):
            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one(n) for n in range(namespaces)))
            times.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
    return statistics.median(times[1:]), statistics.median(cpus[1:])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--ports", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configure(level="info", json=True)  # the default level; its lines go nowhere (see measure)
    base = consecutive_ports(args.ports)
    code = SERVER.replace("DELAYS(n)", f"({SLOWEST_MS} if n == 7 else 20 + (n * 37) % 61)")
    server = subprocess.Popen([sys.executable, "-c", code, str(base), str(args.ports)], stdout=subprocess.PIPE)
    assert server.stdout is not None
    server.stdout.readline()
    slowest = max(delay_ms(n) for n in range(args.namespaces))
    floor, floor_cpu = await bare_client(base, args.ports, args.namespaces, args.rounds)
    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
            shared = await measure(base, args, coalesce=True)
            alone = await measure(base, args, coalesce=False)
    finally:
        server.terminate()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"scale: {args.namespaces} namespaces on {args.ports} ports, slowest backend {slowest} ms "
        f"(target: slowest + 100 ms, <= 300 MB)"
    )
    for label, (times, cpus) in (("coalesced (default)", shared), ("one request each", alone)):
        med = statistics.median(times) * 1000
        print(
            f"  {label:20} answer min {min(times) * 1000:.0f}  med {med:.0f}  max {max(times) * 1000:.0f} ms "
            f"(slowest + {med - slowest:.0f} ms), CPU {statistics.median(cpus) * 1000:.0f} ms"
        )
    print(f"  peak RSS {rss_mb:.0f} MB")
    print(
        f"  the same {args.namespaces} requests from a bare aiohttp client (no gateway): med {floor * 1000:.0f} ms "
        f"(slowest + {floor * 1000 - slowest:.0f} ms), CPU {floor_cpu * 1000:.0f} ms: the harness's own floor"
    )


async def measure(base: int, args: argparse.Namespace, *, coalesce: bool) -> tuple[list[float], list[float]]:
    """Median-ready answer times and CPU per round of one query over every namespace."""
    namespaces = [
        {
            "name": f"ns{n}",
            "backend": "zoekt",
            "urls": [f"http://127.0.0.1:{base + n % args.ports}"],
            "repos": f"/ns{n}$",
            "coalesce": coalesce,
        }
        for n in range(args.namespaces)
    ]
    # Shared requests on the default config; separate ones with room for all of them at
    # once (at the default 64, a thousand separate requests go in sixteen waves).
    server = {} if coalesce else {"server": {"concurrency": args.namespaces}}
    config = parse_config({**server, "namespaces": namespaces, "cache": NO_CACHE})
    service = SearchService(config)
    times, cpus = [], []
    try:
        request = parse_request({"query": "register_widget", "timeout_ms": 10_000})
        for _ in range(args.rounds + 1):
            started, cpu = time.perf_counter(), time.process_time()
            answer = await service.search(request)
            times.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            ok = sum(1 for s in answer["namespaces"] if s["status"] == "ok")
            assert ok == args.namespaces, json.dumps(answer["namespaces"][:3])
            assert answer["file_count"] == 5 * args.namespaces, answer["file_count"]
    finally:
        await service.aclose()
    return times[1:], cpus[1:]  # the first round opens the sessions


if __name__ == "__main__":
    asyncio.run(main())
