"""Streaming and the web page: time to the first ``files`` event, the page's weight, and
time to first results in a real browser over local checkouts.

    python bench/stream.py            # all three; prints figures
    python bench/stream.py --rounds 30 --no-browser

1. ``/v1/search/stream`` on a gateway with two namespaces, one answering in 20 ms and
   one in 2 s (MockBackends in the server process): the time from sending the request
   to reading the first ``files`` event, and to ``done``. Client and server share one
   event loop (as a proxy in front of the gateway would not), so the figures include
   the client's own work.
2. The page's bytes as served (HTML with its language table, CSS, JS, icon), raw and gzipped.
3. In Debian's chromium (Playwright), over the 8 package checkouts of ``bench/corpus.py``,
   measured inside the page: from navigation to ``/?q=...`` to the first file shown
   (the page loads first), and from typing a new query into the loaded page to its
   first match highlighted (the 180 ms typing pause included).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import ClientSession, web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build
from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig, discover
from gateway.http.app import create_app
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings

BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Installed before the page's own script: the time (since navigation) the first file is shown.
FIRST_FILE = """
new MutationObserver((_, observer) => {
  if (document.querySelector('.file')) { window.firstFileAt = performance.now(); observer.disconnect(); }
}).observe(document, {subtree: true, childList: true});
"""
#: Types a query into the loaded page; resolves with the ms until a match of it is highlighted.
TYPED = """(word) => new Promise((resolve) => {
  const began = performance.now();
  const observer = new MutationObserver(() => {
    const marks = document.querySelectorAll('.file mark');
    if ([...marks].some((m) => m.textContent.includes(word))) {
      observer.disconnect();
      resolve(performance.now() - began);
    }
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
  const box = document.getElementById('q');
  box.value = word;
  box.dispatchEvent(new Event('input'));
})"""
QUERIES = ("ClientSession", "def __init__", "raise ValueError", "TODO", "import os")


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(len(xs) * 0.9))]
    return f"median {statistics.median(xs):7.1f} ms  p90 {p90:7.1f} ms  min {xs[0]:7.1f} ms  (n={len(xs)})"


def after(seconds: float, path: str) -> Callable[[SearchQuery], Awaitable[BackendResult]]:
    async def answer(query: SearchQuery) -> BackendResult:
        await asyncio.sleep(seconds)
        return BackendResult(files=(FileMatch(path=path, hits=(Hit(line=1, text="needle"),)),))

    return answer


async def start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def first_files(rounds: int) -> None:
    backends = {
        "fast": MockBackend(after(0.02, "fast.py"), name="fast"),
        "slow": MockBackend(after(2.0, "slow.py"), name="slow"),
    }
    config = Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=tuple(NamespaceConfig(name=n, backend="mock", settings=MockSettings()) for n in backends),
    )
    runner, base = await start(create_app(config, lambda c: SearchService(c, backends)))
    firsts: list[float] = []
    dones: list[float] = []
    try:
        async with ClientSession() as session:
            for _ in range(rounds):
                sent = time.perf_counter()
                async with session.post(base + "/v1/search/stream", json={"query": "needle"}) as resp:
                    buffer, seen = b"", False
                    async for chunk in resp.content.iter_any():
                        buffer += chunk
                        if not seen and b"event: files\n" in buffer:
                            firsts.append((time.perf_counter() - sent) * 1000)
                            seen = True
                    dones.append((time.perf_counter() - sent) * 1000)
    finally:
        await runner.cleanup()
    print("stream, namespaces answering in 20 ms and 2 s:")
    print(f"  first files event  {fmt(firsts)}")
    print(f"  done event         {fmt(dones)}")


def weight() -> None:
    from gateway.http.page import _load

    assets = _load()
    total = sum(len(a.body) for a in assets.values())
    zipped = sum(len(gzip.compress(a.body, 9)) for a in assets.values())
    parts = ", ".join(f"{path} {len(a.body):,}" for path, a in sorted(assets.items()))
    print(f"page weight: {total:,} bytes ({zipped:,} gzipped): {parts}")


async def browser_times(rounds: int, folder: Path) -> None:
    from playwright.async_api import async_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    build(folder)
    config = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(folder))
    runner, base = await start(create_app(config))
    cold: list[float] = []
    warm: list[float] = []
    alone: list[float] = []
    try:
        async with ClientSession() as session:  # the search alone, for comparison
            for i in range(rounds):
                began = time.perf_counter()
                async with session.post(base + "/v1/search", json={"query": QUERIES[i % len(QUERIES)]}) as resp:
                    await resp.read()
                alone.append((time.perf_counter() - began) * 1000)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            for i in range(rounds):
                query = QUERIES[i % len(QUERIES)]
                page = await browser.new_page()
                await page.add_init_script(FIRST_FILE)
                await page.goto(f"{base}/?q={query.replace(' ', '+')}")
                await page.wait_for_selector(".file", timeout=30_000)
                cold.append(await page.evaluate("window.firstFileAt"))
                warm.append(await page.evaluate(TYPED, QUERIES[(i + 1) % len(QUERIES)]))
                await page.close()
            await browser.close()
    finally:
        await runner.cleanup()
    print(f"browser over {len(config.namespaces)} local checkouts:")
    print(f"  POST /v1/search alone (no browser)  {fmt(alone)}")
    print(f"  navigation to first file shown      {fmt(cold)}")
    print(f"  typed to first match highlighted    {fmt(warm)}   (the 180 ms typing pause included)")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--dir", help="corpus folder for the browser run (default: a temp folder)")
    args = parser.parse_args()
    await first_files(args.rounds)
    weight()
    if args.no_browser:
        return
    if args.dir:
        await browser_times(args.rounds, Path(args.dir))
        return
    with tempfile.TemporaryDirectory() as tmp:
        await browser_times(args.rounds, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
