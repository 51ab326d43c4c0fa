"""remote_read: a file read through a peer against the same file read locally; GitHub reads under its rate limit.

    .venv/bin/python bench/remote_read.py [--files 150] [--package mypy] [--reads 50]

**Through a peer.** Two `fedsearch serve` processes: the *peer* over a copy of an
installed package (mypy's, `git init`ed, outside the checkout), and the *front*, whose only
namespace is the peer (`backend = "gateway"`), reached through a byte-counting TCP
proxy in this process. For the same files (spread over sizes), side by side in each
round:

* local: `GET /v1/files/<package>/<path>` asked of the peer (the read on the machine
  holding the file);
* remote, first read: `GET /v1/files/peer/<package>/<path>` asked of the front (it reads
  the file whole from the peer's `/afi/read`);
* remote, again: the same (a conditional request the peer answers `304`);
* and the peer's `/afi/read` of the file asked directly: the request the front makes,
  without the front (what is left of the remote read is the front's own work and the hop).

Each of ``--files`` distinct files (spread over the sizes) is read locally, then through
the front twice in a row (the first read through the front is the file's only cold one).
Prints the median and p90 latency of each, the remote's excess over the local read,
and the bytes on the wire between front and peer per read (both directions, headers
included) beside the files' size.

**GitHub under its rate limit.** A fake GitHub contents API (raw media type, ETag, a
rate limit of 60 an hour, 304s not counted, as GitHub documents) and a `github`
namespace behind the resilience layer, in process: the first read of a file, the
read again, and reads once the limit is spent. Prints latency, requests, and the rate
limit each costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build
from bench.overhead import free_ports

PY = sys.executable


class CountingProxy:
    """A TCP proxy that counts the bytes it carries each way."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = 0  # front -> peer
        self.down = 0  # peer -> front
        self.server: asyncio.Server | None = None

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upward: bool) -> None:
        try:
            while chunk := await reader.read(1 << 16):
                if upward:
                    self.up += len(chunk)
                else:
                    self.down += len(chunk)
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", port)

    def total(self) -> int:
        return self.up + self.down


async def wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def pick(root: Path, count: int) -> list[tuple[str, int]]:
    """``count`` files of the checkout spread over its sizes (path relative to it, size)."""
    files = sorted((p.stat().st_size, p) for p in root.rglob("*.py") if p.stat().st_size > 0)
    step = max(1, len(files) // count)
    return [(str(p.relative_to(root)), size) for size, p in files[::step][:count]]


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(values) * 1000:6.2f} ms  p90 {p90 * 1000:6.2f} ms"


async def timed_get(session: aiohttp.ClientSession, url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    async with session.get(url) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status} {body[:200]!r}")
    return time.perf_counter() - started, body


async def through_a_peer(files: int, package: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="fedsearch-remote-read-"))
    build(tmp / "corpus", (package,))
    checkout = tmp / "corpus" / package
    chosen = pick(checkout, files)
    peer_port, front_port, proxy_port = free_ports(3)
    quiet = "[index]\nenabled = false\n"  # no declaration index building beside the measurements
    peer_config, front_config = tmp / "peer.toml", tmp / "front.toml"
    peer_config.write_text(f'{quiet}[[namespaces]]\nname = "{package}"\nbackend = "ripgrep"\nroot = "{checkout}"\n')
    front_config.write_text(
        f'{quiet}[[namespaces]]\nname = "peer"\nbackend = "gateway"\nurl = "http://127.0.0.1:{proxy_port}"\n'
    )
    env = dict(os.environ, FEDSEARCH_LOG_LEVEL="warning")
    serve = [PY, "-m", "gateway.cli", "serve", "--host", "127.0.0.1"]
    procs = [
        subprocess.Popen([*serve, "--config", str(peer_config), "--port", str(peer_port)], env=env),
        subprocess.Popen([*serve, "--config", str(front_config), "--port", str(front_port)], env=env),
    ]
    proxy = CountingProxy(peer_port)
    await proxy.start(proxy_port)
    peer, front = f"http://127.0.0.1:{peer_port}", f"http://127.0.0.1:{front_port}"
    try:
        await wait_ready(peer)
        await wait_ready(front)
        local: list[float] = []
        hop: list[float] = []
        cold: list[float] = []
        warm: list[float] = []
        cold_bytes: list[int] = []
        warm_bytes: list[int] = []
        async with aiohttp.ClientSession() as session:
            await timed_get(session, f"{front}/v1/files/peer/{package}/__init__.py")  # connections up, children listed
            await timed_get(session, f"{peer}/v1/files/{package}/__init__.py")
            for path, _ in chosen:  # side by side: each file read locally, then twice through the front
                took, direct = await timed_get(session, f"{peer}/v1/files/{package}/{path}")
                local.append(took)
                took, _ = await timed_get(session, f"{peer}/afi/read?path=/{package}/{path}")
                hop.append(took)
                for times, wire in ((cold, cold_bytes), (warm, warm_bytes)):
                    before = proxy.total()
                    took, via = await timed_get(session, f"{front}/v1/files/peer/{package}/{path}")
                    assert via == direct, path
                    times.append(took)
                    wire.append(proxy.total() - before)
        sizes = [size for _, size in chosen]
        print(
            f"through a peer: {len(chosen)} files of {package} ({min(sizes)}..{max(sizes)} bytes, "
            f"median {statistics.median(sizes):.0f}); load {os.getloadavg()[0]:.2f}"
        )
        print(f"  local read (the peer's /v1/files)          {ms(local)}")
        print(f"  the peer's /afi/read (what the front asks) {ms(hop)}")
        print(f"  remote, first read (front -> peer)         {ms(cold)}")
        print(f"  remote, read again (a 304 from the peer)   {ms(warm)}")
        base = statistics.median(local)
        print(
            f"  over the local read: first +{(statistics.median(cold) - base) * 1000:.2f} ms "
            f"({statistics.median(cold) / base:.2f}x), again +{(statistics.median(warm) - base) * 1000:.2f} ms "
            f"({statistics.median(warm) / base:.2f}x)"
        )
        overhead = [wire - size for wire, size in zip(cold_bytes, sizes, strict=True)]
        print(
            f"  bytes on the wire front<->peer a read: first median {statistics.median(cold_bytes):.0f} "
            f"(the file + median {statistics.median(overhead):.0f} of requests and headers), "
            f"again median {statistics.median(warm_bytes):.0f}"
        )
    finally:
        if proxy.server is not None:
            proxy.server.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


async def github_under_its_rate_limit(reads: int) -> None:
    from adapters.github import GitHubBackend, GitHubSettings
    from gateway.resilience.wrapper import wrap
    from gateway.service import SearchService
    from tests.fake_github_gitlab import FakeApi, GitHubContents

    repo = "acme/widget-service"
    content = (Path(__file__).resolve().parents[1] / "gateway" / "service.py").read_bytes()
    files = {f"{repo}/src/service.py": content, f"{repo}/src/other.py": b"x = 1\n"}
    contents = GitHubContents(dict(files), limit=60)
    fake = FakeApi()
    fake.on("/repos/", contents)
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    (port,) = free_ports(1)
    await web.TCPSite(runner, "127.0.0.1", port).start()
    os.environ["FEDSEARCH_BENCH_GH_TOKEN"] = "ghp_bench-only"
    settings = GitHubSettings(url=f"http://127.0.0.1:{port}", token_env="FEDSEARCH_BENCH_GH_TOKEN", fetch_lines=False)
    service = SearchService.with_backends([wrap(GitHubBackend("gh", settings))])
    path = "acme/widget-service/src/service.py"
    try:
        started = time.perf_counter()
        await service.read_file("gh", path)
        first = time.perf_counter() - started
        after_first = contents.used
        again: list[float] = []
        for _ in range(reads):
            started = time.perf_counter()
            await service.read_file("gh", path)
            again.append(time.perf_counter() - started)
        used_by_again = contents.used - after_first
        contents.used = contents.limit  # the hour's limit spent elsewhere
        contents.files[path] = content + b"# changed upstream\n"
        spent: list[float] = []
        for _ in range(reads):
            started = time.perf_counter()
            got = await service.read_file("gh", path)
            spent.append(time.perf_counter() - started)
        statuses = {s: contents.statuses.count(s) for s in sorted(set(contents.statuses))}
        print(f"GitHub under its rate limit (a {len(content)}-byte file, limit 60/h); load {os.getloadavg()[0]:.2f}")
        print(f"  first read: {first * 1000:.2f} ms, rate limit used {after_first}")
        print(f"  read again x{reads}: {ms(again)}, rate limit used {used_by_again} (GitHub answered 304 each time)")
        print(
            f"  limit spent, read x{reads}: {ms(spent)}, served from the copy kept "
            f"({got['total_lines']} lines); answers seen {statuses}"
        )
    finally:
        await service.aclose()
        await runner.cleanup()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--package", default="mypy")
    parser.add_argument("--reads", type=int, default=50)
    args = parser.parse_args()
    await through_a_peer(args.files, args.package)
    await github_under_its_rate_limit(args.reads)


if __name__ == "__main__":
    asyncio.run(main())
