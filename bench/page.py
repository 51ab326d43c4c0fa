"""The web page (issue 37), this tree against another revision: its weight, the first file
shown after typing, and the file view of a 5,000-line file, in Debian's chromium.

    python bench/page.py                          # this checkout against HEAD~1, 20 rounds
    python bench/page.py --against d0d5bc5 --this HEAD --rounds 20 [--corpus /work/corpus-real]

Each tree serves from its own process (``git archive REV`` unpacked in a temp folder, run
with this script's ``--serve``), two servers each:

* the 8 checkouts of ``--corpus`` (``[index]`` off: a builder would parse them all for
  minutes; both trees alike), for **typing**: a fresh page loaded at ``/``, a query set in
  the box and its ``input`` event sent; measured inside the page from that event to the
  first ``.file`` shown (the page's 180 ms typing pause included). 20 distinct queries, so
  no answer comes from the cache; the two trees take turns, each first every other round.
* one checkout holding a 5,000-line Python file (mypy's ``checker.py``, its first 5,000
  lines; ``[index]`` on in a temp folder), for the **file view**: a fresh page loaded at
  ``/``, then ``#/files/big/checker.py``; measured inside the page from setting the hash
  to the first slice's lines on screen (the next animation frame after they are in the
  document), and to all 5,000 lines (``Show more lines`` clicked until none is left).

The page's weight is each tree's assets as served (the HTML with its language table, CSS,
JS, icon), raw and gzipped (level 9). A benchmark: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIG_SOURCE = "mypy/mypy/checker.py"
BIG_LINES = 5000
QUERIES = (
    "ClientSession",
    "def __init__",
    "raise ValueError",
    "import os",
    "Blueprint",
    "url_for",
    "TypeAdapter",
    "async def",
    "class Config",
    "json.dumps",
    "TODO",
    "@property",
    "session.get",
    "yield from",
    "Response(",
    "validate_call",
    "Column(",
    "typing.Any",
    "isinstance(",
    "return None",
)
#: Sets a query in the loaded page's box; resolves with the ms until its first file is shown.
TYPED = """(word) => new Promise((resolve) => {
  const files = document.getElementById('files');
  const began = performance.now();
  const observer = new MutationObserver(() => {
    if (files.querySelector('.file')) { observer.disconnect(); resolve(performance.now() - began); }
  });
  observer.observe(files, {subtree: true, childList: true});
  const box = document.getElementById('q');
  box.value = word;
  box.dispatchEvent(new Event('input'));
})"""
#: Opens the file view; resolves with [ms to the first slice on screen, ms to every line].
VIEWED = """([path, last]) => new Promise((resolve) => {
  const body = document.getElementById('viewer-body');
  const began = performance.now();
  let first = 0;
  const check = () => {
    if (!first && body.querySelector('.line')) {
      requestAnimationFrame(() => { first = performance.now() - began; check(); });
      return;
    }
    if (!first) return;
    if (document.getElementById('L' + last)) {
      observer.disconnect();
      requestAnimationFrame(() => resolve([first, performance.now() - began]));
      return;
    }
    const more = document.getElementById('viewer-more');
    if (!more.hidden && !more.dataset.clicked) { more.dataset.clicked = '1'; more.click(); }
  };
  const observer = new MutationObserver(() => {
    document.getElementById('viewer-more').dataset.clicked = '';
    check();
  });
  observer.observe(body, {childList: true});
  location.hash = '#/files/' + path;
})"""


# --- a tree's servers (run with --serve, the tree first on sys.path) --------------------


async def serve(corpus: str, big: str, index_dir: str) -> None:
    from aiohttp import web

    from gateway.config import Config, DefaultsConfig, IndexConfig, ServerConfig, discover
    from gateway.http.app import create_app
    from gateway.http.page import _load

    async def start(config: Config) -> tuple[web.AppRunner, str]:
        runner = web.AppRunner(create_app(config), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return runner, f"http://127.0.0.1:{port}"

    typing_runner, typing_url = await start(
        Config(
            server=ServerConfig(),
            defaults=DefaultsConfig(),
            namespaces=discover(corpus),
            index=IndexConfig(enabled=False),
        )
    )
    view_runner, view_url = await start(
        Config(
            server=ServerConfig(), defaults=DefaultsConfig(), namespaces=discover(big), index=IndexConfig(dir=index_dir)
        )
    )
    assets = _load()
    weight = {
        "raw": sum(len(a.body) for a in assets.values()),
        "gzipped": sum(len(gzip.compress(a.body, 9)) for a in assets.values()),
        "parts": {path: [len(a.body), len(gzip.compress(a.body, 9))] for path, a in sorted(assets.items())},
    }
    ready = Path(index_dir) / "ready.json"
    ready.parent.mkdir(parents=True, exist_ok=True)
    ready.with_suffix(".tmp").write_text(json.dumps({"typing": typing_url, "view": view_url, "weight": weight}))
    ready.with_suffix(".tmp").rename(ready)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
    await typing_runner.cleanup()
    await view_runner.cleanup()


# --- the parent: trees, browser, figures ------------------------------------------------


def tree_of(rev: str, folder: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def big_checkout(corpus: Path, folder: Path) -> Path:
    checkout = folder / "big"
    checkout.mkdir(parents=True)
    lines = (corpus / BIG_SOURCE).read_text(encoding="utf-8").splitlines(keepends=True)[:BIG_LINES]
    (checkout / "checker.py").write_text("".join(lines), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    return folder


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(len(xs) * 0.9))]
    return f"median {statistics.median(xs):7.1f} ms  p90 {p90:7.1f}  min {xs[0]:7.1f}  (n={len(xs)})"


async def measure(trees: dict[str, Path], corpus: Path, big: Path, index: Path, rounds: int) -> None:
    from playwright.async_api import async_playwright

    from bench.stream import BROWSER_ARGS

    servers: dict[str, tuple[subprocess.Popen[str], dict[str, Any]]] = {}
    for name, tree in trees.items():
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(corpus), str(big), str(index / name)],
            cwd=tree,
            env={**os.environ, "FEDSEARCH_TREE": str(tree)},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        ready = index / name / "ready.json"
        while not ready.exists():
            if process.poll() is not None:
                raise SystemExit(f"{name}: its servers did not start (exit {process.returncode})")
            await asyncio.sleep(0.1)
        servers[name] = (process, json.loads(ready.read_text()))
    typed: dict[str, list[float]] = {name: [] for name in trees}
    first: dict[str, list[float]] = {name: [] for name in trees}
    whole: dict[str, list[float]] = {name: [] for name in trees}
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
            for _process, urls in servers.values():  # one warm-up each: lexers, the index, the page cache
                page = await browser.new_page()
                await page.goto(urls["view"])
                await page.evaluate(VIEWED, ["big/checker.py", BIG_LINES])
                await page.close()
            for i in range(rounds):
                order = list(servers.items()) if i % 2 == 0 else list(reversed(servers.items()))
                for name, (_, urls) in order:
                    page = await browser.new_page(viewport={"width": 1280, "height": 860})
                    await page.goto(urls["typing"])
                    await page.wait_for_selector("#intro-count:not(:empty)")
                    typed[name].append(await page.evaluate(TYPED, QUERIES[i % len(QUERIES)]))
                    await page.close()
                    page = await browser.new_page(viewport={"width": 1280, "height": 860})
                    await page.goto(urls["view"])
                    await page.wait_for_selector("#intro-count:not(:empty)")
                    shown, every = await page.evaluate(VIEWED, ["big/checker.py", BIG_LINES])
                    first[name].append(shown)
                    whole[name].append(every)
                    await page.close()
            await browser.close()
    finally:
        for process, _ in servers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=30)
    for name, (_, urls) in servers.items():
        weight = urls["weight"]
        parts = ", ".join(f"{path} {raw:,}/{zipped:,}" for path, (raw, zipped) in weight["parts"].items())
        print(f"{name}: page weight {weight['raw']:,} bytes, {weight['gzipped']:,} gzipped ({parts})")
    for name in trees:
        print(f"{name}: typed to first file shown        {fmt(typed[name])}")
        print(f"{name}: file view, first slice on screen {fmt(first[name])}")
        print(f"{name}: file view, all {BIG_LINES:,} lines        {fmt(whole[name])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD~1", help="the revision to compare with")
    parser.add_argument("--this", default=None, help="the revision measured (default: this checkout as it is)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--corpus", default="/work/corpus-real", help="a folder of git checkouts")
    parser.add_argument("--serve", nargs=3, metavar=("CORPUS", "BIG", "INDEX_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(*args.serve))
        return
    corpus = Path(args.corpus)
    if not (corpus / BIG_SOURCE).is_file():
        print(f"page: no {corpus / BIG_SOURCE} (the fetched checkouts, e.g. /work/corpus-real): skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trees = {}
        for name, rev in ((args.against, args.against), (args.this or "this checkout", args.this)):
            (folder / name).mkdir()
            trees[name] = tree_of(rev, folder / name) if rev else ROOT
        big = big_checkout(corpus, folder / "big")
        asyncio.run(measure(trees, corpus, big, folder / "index", args.rounds))


if __name__ == "__main__":
    tree = os.environ.get("FEDSEARCH_TREE")
    sys.path.insert(0, tree or str(ROOT))
    main()
