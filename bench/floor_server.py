"""The floor under `local`: the least an HTTP gateway over one rg can do, to compare fedsearch with.

    .venv/bin/python bench/floor_server.py PORT CORPUS bare|work

Serves POST /v1/search over the checkouts in CORPUS with aiohttp (on uvloop when it
is installed, as `fedsearch serve`), one rg per request, started by Popen over every
checkout at once as fedsearch starts it (``posix_spawn``, its exit through a pidfd,
its output left in a 1 MiB pipe and read when it exits):

- ``bare``: answers how many files rg printed. No validation, no parsing, no ranking:
  the cost of HTTP, the spawn and the reading alone.
- ``work``: fedsearch's own work on top (`gateway.wire.parse_request`, rg's output
  through `adapters.ripgrep.output.OutputReader` into one collector per checkout, `gateway.rank.rank`,
  `gateway.wire.build_response`, orjson): the same answer fedsearch gives, without its
  fan-out, resilience layer, batcher, middlewares or reading while rg runs.

`bench/compare_local.py --floor` runs both beside fedsearch, interleaved with rg.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters._coalesce import Seat
from adapters.ripgrep.batch import Part, Router
from adapters.ripgrep.output import Collector, OutputReader, build_argv, find_rg
from adapters.ripgrep.spawn import PIPE_BYTES
from gateway.models import BackendResult, Outcome, SearchQuery
from gateway.query.request import parse_request
from gateway.rank import rank
from gateway.serving import settle_heap
from gateway.wire import build_response


async def run_rg(argv: list[str]) -> bytes:
    """rg's whole output, read once it exited."""
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write_fd, close_fds=False)
    os.close(write_fd)
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def reap() -> None:
        if not exited.done():
            exited.set_result(None)

    pidfd = os.pidfd_open(proc.pid)
    loop.add_reader(pidfd, reap)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    proc.wait()
    chunks = []
    while chunk := os.read(read_fd, PIPE_BYTES):
        chunks.append(chunk)
    os.close(read_fd)
    return b"".join(chunks)


def app(corpus: Path, mode: str) -> web.Application:
    rg = find_rg()
    assert rg is not None
    roots = sorted(str(p) for p in corpus.iterdir() if (p / ".git").exists())

    async def bare(request: web.Request) -> web.Response:
        asked = orjson.loads(await request.read())
        query = SearchQuery(
            text=asked["query"], case_sensitive=any(c.isupper() for c in asked["query"]), deadline=time.monotonic() + 60
        )
        output = await run_rg(build_argv(rg, query, (), roots))
        return web.Response(body=orjson.dumps({"file_count": output.count(b"\0")}), content_type="application/json")

    async def work(request: web.Request) -> web.Response:
        started = time.monotonic()
        asked = parse_request(orjson.loads(await request.read()))
        query = SearchQuery(
            text=asked.query,
            mode=asked.mode,
            case_sensitive=asked.effective_case(),
            deadline=started + asked.timeout_ms / 1000,
        )
        output = await run_rg(build_argv(rg, query, (), roots))
        loop = asyncio.get_running_loop()
        seats = [Seat(Part(root, Collector(strip=len(root) + 1)), loop.create_future()) for root in roots]
        reader = OutputReader(Router(seats), blocks=True)
        reader.feed_bytes(output)
        reader.end()
        outcomes = [
            Outcome(
                namespace=os.path.basename(s.value.root),
                backend="ripgrep",
                status="ok",
                took_ms=0,
                result=BackendResult(files=s.value.collector.ranked()),
            )
            for s in seats
        ]
        answer = build_response(asked, rank(asked, outcomes), round((time.monotonic() - started) * 1000))
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    application = web.Application()
    application.router.add_post("/v1/search", bare if mode == "bare" else work)
    return application


def main() -> None:
    port, corpus, mode = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if mode not in ("bare", "work"):
        raise SystemExit("mode: bare or work")
    settle_heap()
    web.run_app(app(corpus, mode), host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    main()
