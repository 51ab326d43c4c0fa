"""many_namespaces: the same bytes served as 32, 256 and 1,600 namespaces, and 10,000 tiny ones (issue 51).

    .venv/bin/python bench/many_namespaces.py [--source DIR] [--corpus DIR] [--copies 32] [--rounds 3]
                                              [--layouts 32,256,1600] [--tiny 10000] [--out JSON] [--poll-s 0.5]

The corpus is ``--copies`` copies of the checkouts under ``--source`` (default
``$FEDSEARCH_CORPUS_REAL``, else ``/work/corpus-real``: fetched public repositories, never
committed), ``copyNN/<checkout>``, each ``git init``ed without history. The same bytes are
served three ways, by one ``fedsearch serve`` each:

- ``32``-like: one namespace a copy (its root holds its checkouts);
- ``256``-like: one namespace a checkout;
- ``1600``-like: one namespace for each top folder of each checkout (hidden ones aside).

For each, measured in one run: the time from a server's start, with an empty index folder,
until every namespace's content index is ``ready`` (asked of ``/v1/namespaces`` every ``--poll-s``:
at 1,248 namespaces each answer is tens of ms of the server's CPU, at nice 0 beside a builder at
nice 15; and the MB/s that makes), the server's
RSS once its indexes are ready, the answer's size, and searches (selective queries and a
word that is nowhere; cached answers off), round by round interleaved across the servers,
medians in ms. Every answer's files are compared with ``rg -l`` over the same roots.

``--tiny N`` then generates N tiny checkouts (three files each) and serves them as N
namespaces: the time from the server's start to its first answer, ``GET /v1/namespaces``,
the RSS, and an empty search (median of 5).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build_many
from bench.overhead import free_ports
from bench.scale import BIN, corpus_bytes, make_copies, say
from bench.scale import write_named_config as write_config
from gateway.index.files import find_rg
from gateway.index.locks import Claims

#: (label, text, mode, case_sensitive): selective queries, and a word that is nowhere.
QUERIES: list[tuple[str, str, str, bool]] = [
    ("selective", "register_blueprint", "exact", True),
    ("selective", "QueuePool", "exact", True),
    ("selective", "get_netrc_auth", "exact", True),
    ("selective", r"def \w+_blueprint\(", "regex", True),
    ("selective", "queuepool", "exact", False),
    ("nowhere", "zqxjkw_found_nowhere", "exact", True),
]


def layout(copies: list[Path], kind: str) -> list[tuple[str, Path]]:
    """(name, root) of each namespace: a copy, a checkout, or a checkout's top folder."""
    if kind == "32":
        return [(c.name, c) for c in copies]
    checkouts = [(f"{c.name}/{k.name}", k) for c in copies for k in sorted(c.iterdir()) if k.is_dir()]
    if kind == "256":
        return checkouts
    return [
        (f"{name}/{top.name}", top)
        for name, checkout in checkouts
        for top in sorted(checkout.iterdir())
        if top.is_dir() and not top.name.startswith(".")
    ]


class Server:
    """``fedsearch serve --config`` in a process of its own (its own session: nothing outlives it)."""

    def __init__(self, config: Path, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._log = log.open("wb")
        self.started = time.monotonic()
        env = {**os.environ, "FEDSEARCH_LOG_LEVEL": "warning"}
        self.proc = subprocess.Popen(
            [str(BIN / "fedsearch"), "serve", "--config", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def get(self, path: str, timeout: float = 60) -> tuple[float, bytes]:
        started = time.perf_counter()
        with urllib.request.urlopen(self.url + path, timeout=timeout) as answer:
            data: bytes = answer.read()
        return time.perf_counter() - started, data

    def post(self, body: dict[str, Any], timeout: float = 120) -> tuple[float, bytes]:
        request = urllib.request.Request(
            self.url + "/v1/search", data=orjson.dumps(body), headers={"Content-Type": "application/json"}
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            data: bytes = answer.read()
        return time.perf_counter() - started, data

    def search(self, text: str, mode: str, case: bool) -> tuple[float, bytes]:
        body = {"query": text, "mode": mode, "case_sensitive": case, "timeout_ms": 60000, "files": 200}
        return self.post(body)

    def first_answer(self, timeout: float = 600) -> float:
        """Seconds from the server's start to its first answer (polling every 20 ms)."""
        while time.monotonic() - self.started < timeout:
            with contextlib.suppress(OSError, ValueError):
                self.search("zqxjkw_found_nowhere", "exact", True)
                return time.monotonic() - self.started
            time.sleep(0.02)
        raise TimeoutError("no answer")

    def ready(self, names: int, timeout: float = 1800, poll_s: float = 0.5) -> float:
        """Seconds from the server's start until every namespace's content index is ready, asked of
        ``/v1/namespaces`` every ``poll_s`` (each answer is the server's work beside its builder's)."""
        while time.monotonic() - self.started < timeout:
            with contextlib.suppress(OSError, ValueError):
                items = orjson.loads(self.get("/v1/namespaces")[1])["namespaces"]
                if len(items) == names and all(i.get("index", {}).get("state") == "ready" for i in items):
                    return time.monotonic() - self.started
            time.sleep(poll_s)
        raise TimeoutError("the content indexes did not get ready")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self._log.close()


def rg_files(rg: str, text: str, mode: str, case: bool, roots: list[Path]) -> set[str]:
    argv = [rg, "--no-config", "-l", *(["-F"] if mode == "exact" else []), "-s" if case else "-i", "-e", text]
    out = subprocess.run([*argv, "--", *map(str, roots)], capture_output=True, check=False).stdout
    return {os.path.realpath(line) for line in out.decode().splitlines()}


def answer_files(answer: dict[str, Any], roots: dict[str, Path]) -> set[str]:
    return {os.path.realpath(roots[f["namespace"]] / f["file_path"]) for f in answer["files"]}


def every_file(server: Server, answer: dict[str, Any], roots: dict[str, Path]) -> tuple[set[str], bool]:
    """The files of every page (following the next-page action verbatim); whether a namespace was not ok."""
    files: set[str] = set()
    while True:
        files |= answer_files(answer, roots)
        if any(s["status"] != "ok" for s in answer["namespaces"]):
            return files, True
        pages = [n for n in answer.get("next", []) if n["reason"].startswith("next page")]
        if not pages:
            return files, False
        answer = orjson.loads(server.post(pages[0]["args"])[1])


def run_layouts(args: argparse.Namespace, copies: list[Path], work: Path) -> dict[str, Any]:
    rg = find_rg()
    assert rg is not None
    files, size = corpus_bytes(Path(args.corpus))
    say(f"corpus: {len(copies)} copies, {files:,} files, {size / 1e9:.2f} GB")
    kinds = args.layouts.split(",")
    ports = free_ports(len(kinds))
    servers: dict[str, Server] = {}
    spaces: dict[str, list[tuple[str, Path]]] = {}
    figures: dict[str, Any] = {"corpus": {"copies": len(copies), "files": files, "bytes": size}, "layouts": {}}
    for kind, port in zip(kinds, ports, strict=True):  # each build alone: no other layout's builder runs
        spaces[kind] = layout(copies, kind)
        index_dir = work / f"index-{kind}"
        shutil.rmtree(index_dir, ignore_errors=True)
        config = work / f"config-{kind}.toml"
        write_config(config, spaces[kind], index_dir, port)
        server = Server(config, port, work / f"server-{kind}.log")
        try:
            first = server.first_answer()
            ready = server.ready(len(spaces[kind]), poll_s=args.poll_s)
        finally:
            server.close()
        say(
            f"{len(spaces[kind]):>6} namespaces: first answer {first:.2f} s, every content index ready {ready:.1f} s "
            f"({size / 1e6 / ready:.1f} MB/s)"
        )
        figures["layouts"][kind] = {
            "namespaces": len(spaces[kind]),
            "first_answer_s": first,
            "ready_s": ready,
            "mb_per_s": size / 1e6 / ready,
        }
    # The searches: every server up at once over its content index, its builder kept idle by holding every
    # root's lock here (a builder builds only what it holds: gateway.index.locks), so no background parsing
    # competes with the searches timed.
    holding = [Claims(str(work / f"index-{kind}"), [str(root) for _, root in spaces[kind]]) for kind in kinds]
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(1.0):
            for claims in holding:
                claims.renew()

    for claims in holding:
        claims.take()
    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        for kind, port in zip(kinds, ports, strict=True):
            servers[kind] = Server(work / f"config-{kind}.toml", port, work / f"server-{kind}-search.log")
        for kind, server in servers.items():
            server.ready(len(spaces[kind]))
        time.sleep(5)  # each checkout's first check (a thread each) and its bitset believed
        times: dict[tuple[str, str], list[float]] = {}
        sizes: dict[tuple[str, str], int] = {}
        differed = 0
        for _ in range(args.rounds + 1):  # the first round warms and checks
            for _, text, mode, case in QUERIES:
                for kind, server in servers.items():
                    seconds, data = server.search(text, mode, case)
                    times.setdefault((kind, text), []).append(seconds)
                    if (kind, text) not in sizes:
                        sizes[kind, text] = len(data)
                        roots = dict(spaces[kind])
                        want = rg_files(rg, text, mode, case, [r for _, r in spaces[kind]])
                        got, partial = every_file(server, orjson.loads(data), roots)
                        if got != want or partial:
                            differed += 1
                            say(f"  DIFFERS {kind} {text!r}: {len(got)} files, rg {len(want)}")
        for kind, server in servers.items():
            figures["layouts"][kind]["rss_mb"] = server.rss_mb()
        say("")
        header = f"{'query':<24}" + "".join(f"{k + ' ns':>12}" for k in kinds) + "   ratio to first"
        say(header)
        for _, text, _, _ in QUERIES:
            medians = [statistics.median(times[k, text][1:]) * 1000 for k in kinds]
            ratio = "  ".join(f"{m / medians[0]:.2f}x" for m in medians[1:])
            say(f"{text[:24]:<24}" + "".join(f"{m:>12.1f}" for m in medians) + f"   {ratio}")
            for kind, median in zip(kinds, medians, strict=True):
                figures["layouts"][kind].setdefault("search_ms", {})[text] = median
        selective = [t for c, t, _, _ in QUERIES if c == "selective"]
        for kind in kinds:
            ms = figures["layouts"][kind]["search_ms"]
            figures["layouts"][kind]["selective_median_ms"] = statistics.median(ms[t] for t in selective)
            figures["layouts"][kind]["answer_bytes_nowhere"] = sizes[kind, "zqxjkw_found_nowhere"]
            figures["layouts"][kind]["answer_bytes_register_blueprint"] = sizes[kind, "register_blueprint"]
        say("")
        for kind in kinds:
            f = figures["layouts"][kind]
            say(
                f"{f['namespaces']:>6} ns: selective median {f['selective_median_ms']:.1f} ms "
                f"({f['selective_median_ms'] / figures['layouts'][kinds[0]]['selective_median_ms']:.2f}x), "
                f"nowhere {f['search_ms']['zqxjkw_found_nowhere']:.1f} ms, RSS {f['rss_mb']:.0f} MB, "
                f"answer {f['answer_bytes_nowhere']:,} B empty / {f['answer_bytes_register_blueprint']:,} B "
                f"register_blueprint"
            )
        say(f"answers that differed from rg -l: {differed}")
        figures["differed"] = differed
    finally:
        for server in servers.values():
            server.close()
        stop.set()
        renewer.join()
        for claims in holding:
            claims.release()
    return figures


def run_tiny(n: int, work: Path) -> dict[str, Any]:
    root = work / f"tiny-{n}"
    checkouts = build_many(root, n)
    index_dir = work / "index-tiny"
    shutil.rmtree(index_dir, ignore_errors=True)
    (port,) = free_ports(1)
    config = work / "config-tiny.toml"
    write_config(config, [(p.name, p) for p in checkouts], index_dir, port)
    server = Server(config, port, work / "server-tiny.log")
    try:
        first = server.first_answer()
        listing, data = server.get("/v1/namespaces")
        listed = len(orjson.loads(data)["namespaces"])
        empties = [server.search("zqxjkw_found_nowhere", "exact", True)[0] for _ in range(5)]
        with contextlib.suppress(TimeoutError):
            server.ready(n, timeout=600)
        empties_ready = [server.search("zqxjkw_found_nowhere", "exact", True) for _ in range(5)]
        figures = {
            "namespaces": n,
            "first_answer_s": first,
            "namespaces_ms": listing * 1000,
            "namespaces_listed": listed,
            "empty_search_ms": statistics.median(empties) * 1000,
            "empty_search_ready_ms": statistics.median(t for t, _ in empties_ready) * 1000,
            "empty_answer_bytes": len(empties_ready[-1][1]),
            "rss_mb": server.rss_mb(),
        }
    finally:
        server.close()
    say(
        f"{n:,} tiny namespaces: first answer {figures['first_answer_s']:.2f} s, /v1/namespaces "
        f"{figures['namespaces_ms']:.0f} ms ({listed:,} listed), empty search {figures['empty_search_ms']:.0f} ms "
        f"(indexes ready: {figures['empty_search_ready_ms']:.0f} ms, {figures['empty_answer_bytes']:,} B), "
        f"RSS {figures['rss_mb']:.0f} MB"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--corpus", default=None, help="where the copies are kept (default: <source>-many)")
    parser.add_argument("--copies", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layouts", default="32,256,1600")
    parser.add_argument("--tiny", type=int, default=10_000, help="0: skip the tiny namespaces")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--poll-s", type=float, default=0.5, help="how often readiness is asked of /v1/namespaces while building"
    )
    args = parser.parse_args()
    source = Path(args.source)
    if not source.is_dir():
        say(f"many_namespaces: skipped, no corpus at {source} (fetched checkouts; see the docstring)")
        return
    args.corpus = args.corpus or f"{source}-many-{args.copies}"
    copies = make_copies(source, Path(args.corpus), args.copies)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fedsearch-many-") as tmp:
        work = Path(tmp)
        if args.layouts:
            figures.update(run_layouts(args, copies, work))
        if args.tiny:
            figures["tiny"] = run_tiny(args.tiny, work)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
