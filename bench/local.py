"""local: fedsearch vs one `rg --json` process over the same checkouts.

    .venv/bin/python bench/local.py [--rounds 7] [--queries q1,q2,...] [--dir DIR] [--http]
    .venv/bin/python bench/local.py --checkouts 1000 [--http]   # many small checkouts, query 'needle'

fedsearch runs in-process (SearchService.search, the collector set up as `fedsearch
serve` sets it up), or with --http as `fedsearch serve` asked over HTTP (warm):
the request made beforehand, the answer read as bytes (decoding it is the client's
business, as decoding rg's JSON would be). rg's output is read through a pipe, as any
consumer of it must. Runs A B A B for each query, prints min/median/max per side and
the median ratio fedsearch/rg per query, then the median of those ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import socket
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
from bench.corpus import build, build_many, size, wait_for_index
from gateway.config import config_from_env
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.service import SearchService
from gateway.serving import settle_heap

JSON = {"Content-Type": "application/json"}
DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - for the whole run
QUERIES = ("register_widget", "def __init__", "ClientSession", "TODO", "import os", "raise ValueError")


def rg_once(rg: str, dirs: list[Path], query: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [rg, "--json", "--no-config", "-S", "-F", "-e", query, "--", *map(str, dirs)],
        stdout=subprocess.PIPE,
        check=False,
    )
    return time.perf_counter() - started


class Http:
    """`fedsearch serve` over the corpus, asked over HTTP."""

    def __init__(self, base: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.cache = Path(tempfile.mkdtemp(prefix="fedsearch-cache-"))  # a fresh declaration index
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--root", str(base), "--port", str(self.port)],
            stderr=subprocess.DEVNULL,  # logs at the default level (info), as served
            env=dict(os.environ, XDG_CACHE_HOME=str(self.cache)),
        )
        self.session: aiohttp.ClientSession | None = None

    async def fetch(self, body: bytes) -> bytes:
        """The raw answer to one search (the body made beforehand, the answer decoded after:
        client work, as reading rg's output is all the rg side does)."""
        if self.session is None:
            self.session = aiohttp.ClientSession()
        url = f"http://127.0.0.1:{self.port}/v1/search"
        for _ in range(300):
            try:
                async with self.session.post(url, data=body, headers=JSON) as resp:
                    return await resp.read()
            except aiohttp.ClientConnectorError:
                await asyncio.sleep(0.1)
        raise RuntimeError("fedsearch serve did not come up")

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)


_asked = itertools.count()


async def fed_once(service: SearchService | Http, query: str) -> tuple[float, int]:
    # a deadline a millisecond apart each time: never an answer from cache (the search is measured)
    asked = {"query": query, "timeout_ms": 60_000 - next(_asked) % 1000}
    if isinstance(service, Http):
        body = orjson.dumps(asked)
        started = time.perf_counter()
        raw = await service.fetch(body)
        took = time.perf_counter() - started
        return took, orjson.loads(raw)["file_count"]
    with contextlib.redirect_stderr(DEVNULL):  # its log lines, at info as served, go nowhere
        started = time.perf_counter()
        answer = await service.search(parse_request(asked))
        took = time.perf_counter() - started
    return took, answer["file_count"]


def fmt(xs: list[float]) -> str:
    return f"min {min(xs) * 1000:7.1f}  med {statistics.median(xs) * 1000:7.1f}  max {max(xs) * 1000:7.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--dir", help="corpus folder (default: a temp folder)")
    parser.add_argument("--http", action="store_true", help="ask `fedsearch serve` over HTTP")
    parser.add_argument("--checkouts", type=int, help="that many small checkouts instead (query: needle)")
    parser.add_argument("--copies", type=int, default=1, help="the 8 package checkouts, that many times over")
    args = parser.parse_args()
    configure(level="info", json=True)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-bench-"))
    dirs = build_many(base, args.checkouts) if args.checkouts else build(base, copies=args.copies)
    queries = "needle" if args.checkouts and args.queries == ",".join(QUERIES) else args.queries
    nfiles, nbytes = size(dirs)
    print(f"corpus: {len(dirs)} checkouts, {nfiles} files, {nbytes / 1e6:.1f} MB under {base}")
    rg = find_rg()
    assert rg is not None, "rg not found (the ripgrep wheel installs it)"
    service: SearchService | Http = Http(base) if args.http else SearchService(config_from_env(root=str(base), env={}))
    if not args.http:
        settle_heap()  # in-process: the collector as `fedsearch serve` sets it up (over HTTP, serve does)
    if isinstance(service, Http):
        await service.fetch(orjson.dumps({"query": "warm"}))  # up
        waited = wait_for_index(service.cache / "fedsearch", dirs)
        print(f"declaration index built by the server in {waited:.1f} s")
    print(f"fedsearch: {'HTTP (fedsearch serve, warm, its index built)' if args.http else 'in-process'}")
    ratios = []
    try:
        for query in queries.split(","):
            await fed_once(service, query)  # warm
            rg_once(rg, dirs, query)
            fed, ripgrep, count = [], [], 0
            for _ in range(args.rounds):
                t, count = await fed_once(service, query)
                fed.append(t)
                ripgrep.append(rg_once(rg, dirs, query))
            ratio = statistics.median(fed) / statistics.median(ripgrep)
            ratios.append(ratio)
            print(f"{query!r:20} files={count:5}  fedsearch {fmt(fed)} | rg {fmt(ripgrep)} | ratio {ratio:.2f}")
    finally:
        await service.aclose()
    print(f"median ratio fedsearch/rg over {len(ratios)} queries: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
