"""scale: local search at gigabytes: rg, codesearch and fedsearch (HTTP and one-shot) over the same ~3 GB.

    .venv/bin/python bench/scale.py [--source DIR] [--corpus DIR] [--gb 3] [--rounds 5] [--short] [--out JSON]

The corpus is copies of the checkouts under ``--source`` (default ``$FEDSEARCH_CORPUS_REAL``,
else ``/work/corpus-real``: fetched public repositories, never committed) until ``--gb``:
``copy01/<checkout>``, each checkout ``git init``ed without history (rg honours its
``.gitignore`` as in the original), one namespace a copy. ``--short`` (``make bench``) is
half a gigabyte and three rounds. Measured in one run:

1. **The content index build**, alone, into a fresh folder: the builder's own code
   (:meth:`gateway.index.builder.Builder.refresh_content`) with both cores' workers, in a
   process of its own: wall and CPU seconds, MB/s of the files, the size on disk against
   the corpus, and the peak RSS of its processes together (sampled every 0.1 s).
2. **Searches**, per query class (selective literal, selective regex, case-insensitive,
   common), interleaved round by round: ``rg -n`` over the tree (every matched line, what
   fedsearch reads; ``rg -l`` beside it, what the research table used), ``csearch -l``
   where Debian's ``codesearch`` is installed (its ``cindex`` built once, timed),
   fedsearch over HTTP (``fedsearch serve`` warm, ``POST /v1/search`` without cached
   answers) and one-shot (``fedsearch search --config ... --json``, start-up included).
   Medians in ms, and fedsearch's ratios to ``rg -n`` and to csearch.
3. **Freshness**: 100 files across the copies get a new token, and the very next search
   must find all 100; then how long the server's builder took to index them again
   (its ``content_index_updated`` log events).

The full indexes (content and declarations) for the server are built once with
``fedsearch index`` into ``<corpus>.index`` and kept between runs (rebuilt with
``--rebuild``), so no background build competes with the searches measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.overhead import free_ports
from gateway.index.files import find_rg

#: (class, text, mode, case_sensitive)
QUERIES: list[tuple[str, str, str, bool]] = [
    ("selective literal", "register_blueprint", "exact", True),
    ("selective literal", "get_netrc_auth", "exact", True),
    ("selective literal", "QueuePool", "exact", True),
    ("selective literal", "zqxjkw_found_nowhere", "exact", True),
    ("selective regex", r"def \w+_blueprint\(", "regex", True),
    ("selective regex", r"class \w+Pool\b", "regex", True),
    ("case-insensitive", "queuepool", "exact", False),
    ("case-insensitive", "GET_NETRC_AUTH", "exact", False),
    ("common", "raise ValueError", "exact", True),
    ("common", "def get_", "exact", True),
    ("common", "self", "exact", True),
]
SHORT_QUERIES = [q for i, q in enumerate(QUERIES) if i in (0, 3, 4, 6, 8, 9)]
FRESH_TOKEN = "zqxjkw_fresh_token"
BIN = Path(sys.executable).parent


def say(text: str) -> None:
    print(text, flush=True)


# --- the corpus ---------------------------------------------------------------------


def corpus_bytes(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
    return files, size


def make_corpus(source: Path, corpus: Path, gb: float) -> list[Path]:
    """Copies of ``source``'s checkouts under ``corpus`` until it holds ``gb`` GB (kept between runs)."""
    _, one = corpus_bytes(source)
    return make_copies(source, corpus, max(1, round(gb * 1e9 / max(1, one))))


def make_copies(source: Path, corpus: Path, copies: int) -> list[Path]:
    """``copies`` copies of ``source``'s checkouts under ``corpus``, ``copyNN/<checkout>``, each ``git init``ed
    without history (kept between runs)."""
    checkouts = sorted(p for p in source.iterdir() if (p / ".git").exists())
    corpus.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(1, copies + 1):
        dest = corpus / f"copy{i:02d}"
        if not dest.exists():
            staging = corpus / f".copy{i:02d}.tmp"
            shutil.rmtree(staging, ignore_errors=True)
            for checkout in checkouts:
                shutil.copytree(checkout, staging / checkout.name, ignore=shutil.ignore_patterns(".git"), symlinks=True)
                subprocess.run(["git", "init", "-q", str(staging / checkout.name)], check=True)
            staging.rename(dest)
        out.append(dest)
    return out


def write_config(path: Path, copies: list[Path], index_dir: Path, port: int) -> None:
    write_named_config(path, [(copy.name, copy) for copy in copies], index_dir, port)


def write_named_config(path: Path, spaces: list[tuple[str, Path]], index_dir: Path, port: int) -> None:
    """A server's config: one ripgrep namespace for each (name, root), cached answers off."""
    lines = [
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        "[cache]",
        "answer_ttl_s = 0",
        "single_flight = false",
        "[index]",
        f'dir = "{index_dir}"',
    ]
    for name, root in spaces:
        lines += ["[[namespaces]]", f'name = "{name}"', 'backend = "ripgrep"', f'root = "{root}"']
    path.write_text("\n".join(lines) + "\n")


# --- the build ----------------------------------------------------------------------

BUILD = r"""
import sys, time, json
from gateway.config import load_config
from gateway.index.builder import Builder, BuildStats
from gateway.index.content.build import ContentBuilder
from gateway.index.setup import index_for
from gateway.index.store import Store
config = load_config(sys.argv[1])
index = index_for(config)
content = ContentBuilder(sys.argv[2], workers=index.build_workers, max_bytes=index.max_bytes)
builder = Builder(Store.open(None), list(index.sources.values()), workers=index.build_workers, content=content)
stats = BuildStats()
started = time.monotonic()
with content.pool():  # as the background builder's pass: its reading processes forked once
    for source in index.sources.values():
        builder.refresh_content(source, stats)
print(json.dumps({"seconds": time.monotonic() - started, "files": stats.content_read, "bytes": stats.content_bytes,
                  "workers": index.build_workers}))
"""


def _processes() -> Iterator[tuple[str, list[str]]]:
    """Every process now: its pid and the fields of its ``/proc/PID/stat`` after the command name."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as handle:
                yield entry, handle.read().rpartition(")")[2].split()


def _tree_rss(pgid: int) -> int:
    """Resident bytes of every process in a process group now."""
    page = os.sysconf("SC_PAGE_SIZE")
    return sum(int(fields[21]) * page for _, fields in _processes() if int(fields[2]) == pgid)  # rss, pgrp


def measure_build(config: Path, folder: Path) -> dict[str, Any]:
    """The content index built from nothing by the builder's own code, in a process group of its own."""
    shutil.rmtree(folder, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD, str(config), str(folder)],
        stdout=subprocess.PIPE,
        start_new_session=True,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.1):
            peak = max(peak, _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result: dict[str, Any] = json.loads(out)
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["peak_rss_mb"] = peak / 1e6
    result["largest_process_rss_mb"] = after.ru_maxrss / 1024
    _, result["index_bytes"] = corpus_bytes(folder)
    return result


# --- searching ------------------------------------------------------------------------


class Server:
    """``fedsearch serve --config`` in a process of its own, its log kept."""

    def __init__(self, config: Path, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [str(BIN / "fedsearch"), "serve", "--config", str(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def quiet(self, most_s: float = 900.0) -> float:
        """Wait until the server's background builder is idle (its CPU time still for 3 s): its first pass
        over a big corpus (every file looked at) would otherwise compete with the searches timed."""
        started = time.monotonic()
        still = 0
        before = -1.0
        while time.monotonic() - started < most_s and still < 6:
            time.sleep(0.5)
            spent = _cpu_of_children(self.proc.pid, "gateway.index")
            still = still + 1 if spent - before < 0.05 else 0
            before = spent
        return time.monotonic() - started

    def ready(self, names: int, timeout: float = 600.0) -> float:
        """Wait until every namespace's content index is ready; seconds waited."""
        import urllib.request

        started = time.monotonic()
        while time.monotonic() - started < timeout:
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(self.url + "/v1/namespaces", timeout=5) as answer:
                    items = json.loads(answer.read())["namespaces"]
                if len(items) == names and all(i.get("index", {}).get("state") == "ready" for i in items):
                    return time.monotonic() - started
            time.sleep(0.25)
        raise TimeoutError("the content indexes did not get ready")

    def search(self, text: str, mode: str, case: bool) -> tuple[float, dict[str, Any]]:
        import urllib.request

        body = orjson.dumps({"query": text, "mode": mode, "case_sensitive": case, "timeout_ms": 60000})
        request = urllib.request.Request(
            self.url + "/v1/search", data=body, headers={"Content-Type": "application/json"}
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=120) as answer:
            data = answer.read()
        return time.perf_counter() - started, orjson.loads(data)

    def close(self) -> None:
        self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        if self.proc.poll() is None:
            self.proc.kill()
        self._log.close()


def _cpu_of_children(pid: int, marker: str) -> float:
    """CPU seconds so far of ``pid``'s children whose command line holds ``marker``."""
    total = 0.0
    for entry, fields in _processes():
        if int(fields[1]) != pid:  # ppid
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as handle:
            if marker.encode() in handle.read():
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - started


def rg_argv(rg: str, flag: str, text: str, mode: str, case: bool, roots: list[Path]) -> list[str]:
    return [
        rg,
        "--no-config",
        flag,
        *(["-F"] if mode == "exact" else []),
        "-s" if case else "-i",
        "-e",
        text,
        "--",
        *map(str, roots),
    ]


def csearch_argv(text: str, mode: str, case: bool) -> list[str]:
    import re

    pattern = re.escape(text) if mode == "exact" else text
    return ["csearch", "-l", *([] if case else ["-i"]), pattern]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--corpus", default=None, help="where the copies go (default: SOURCE's sibling corpus-scale)")
    parser.add_argument("--gb", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--short", action="store_true", help="half a gigabyte, three rounds, fewer queries")
    parser.add_argument("--rebuild", action="store_true", help="build the server's indexes again")
    parser.add_argument("--searches-only", action="store_true", help="skip the build measurement")
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    source = Path(args.source)
    if not source.is_dir():
        say(f"scale: skipped: no checkouts at {source} (fetch public repositories there, or set FEDSEARCH_CORPUS_REAL)")
        return
    gb, rounds, queries = (0.5, 3, SHORT_QUERIES) if args.short else (args.gb, args.rounds, QUERIES)
    corpus = (
        Path(args.corpus) if args.corpus else source.parent / ("corpus-scale-short" if args.short else "corpus-scale")
    )
    rg = find_rg()
    assert rg is not None, "rg is needed"
    copies = make_corpus(source, corpus, gb)
    files, size = corpus_bytes(corpus)
    say(f"corpus: {len(copies)} namespaces (copies of {source}), {files:,} files, {size / 1e9:.2f} GB")
    say(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    figures: dict[str, Any] = {"corpus": {"namespaces": len(copies), "files": files, "bytes": size}}

    work = Path(tempfile.mkdtemp(prefix="scale-"))
    index_dir = Path(str(corpus) + ".index")
    port = free_ports(1)[0]
    config = work / "fedsearch.toml"
    write_config(config, copies, index_dir, port)
    try:
        # 1. the build, alone
        if not args.searches_only:
            figures["build"] = built = measure_build(config, work / "build")
            say(
                f"content index build ({built['workers']} workers): {built['seconds']:.1f} s wall, "
                f"{built['cpu_s']:.1f} s CPU, {built['bytes'] / 1e6 / built['seconds']:.0f} MB/s of "
                f"{built['bytes'] / 1e9:.2f} GB read; "
                f"{built['index_bytes'] / 1e6:.0f} MB on disk ({built['index_bytes'] / size:.3f}x the corpus); "
                f"peak RSS {built['peak_rss_mb']:.0f} MB all processes, "
                f"{built['largest_process_rss_mb']:.0f} MB the largest"
            )
            shutil.rmtree(work / "build", ignore_errors=True)

        # codesearch's index, once
        csearch = shutil.which("csearch") is not None and shutil.which("cindex") is not None
        env = dict(os.environ, CSEARCHINDEX=str(corpus) + ".csearchindex")
        if csearch and (args.rebuild or not Path(env["CSEARCHINDEX"]).exists()):
            seconds = timed(["cindex", *map(str, copies)], env)
            figures["cindex_s"] = seconds
            say(f"codesearch: cindex {seconds:.1f} s, {os.path.getsize(env['CSEARCHINDEX']) / 1e6:.0f} MB")
        elif not csearch:
            say("codesearch: not installed (apt-get install codesearch): its column is left out")

        # the server's indexes (content and declarations), built before any search is timed
        if args.rebuild:
            shutil.rmtree(index_dir, ignore_errors=True)
        started = time.monotonic()
        subprocess.run(
            [str(BIN / "fedsearch"), "index", "--config", str(config)], stdout=subprocess.DEVNULL, check=True
        )
        say(f"fedsearch index (content and declarations, kept in {index_dir}): {time.monotonic() - started:.0f} s")

        server = Server(config, port, work / "server.log")
        try:
            waited = server.ready(len(copies))
            say(f"server ready in {waited:.1f} s (every content index followed and checked)")
            say(f"its builder's first pass over the corpus done after {server.quiet():.0f} s more (waited: not timed)")
            figures["queries"] = search_rounds(server, rg, copies, config, queries, rounds, csearch, env)
            figures["freshness"] = freshness(server, copies)
        finally:
            server.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        Path(args.out).write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))


def search_rounds(
    server: Server,
    rg: str,
    copies: list[Path],
    config: Path,
    queries: list[tuple[str, str, str, bool]],
    rounds: int,
    csearch: bool,
    env: dict[str, str],
) -> list[dict[str, Any]]:
    sides = ["rg -n", "rg -l", *(["csearch -l"] if csearch else []), "http", "one-shot"]
    out = []
    say("")
    say(f"{'class':18} {'query':24} {'files':>7} " + " ".join(f"{s:>10}" for s in sides) + "  http/rg  http/cs")
    for klass, text, mode, case in queries:
        times: dict[str, list[float]] = {s: [] for s in sides}
        files = 0
        for _ in range(rounds):
            times["rg -n"].append(timed(rg_argv(rg, "-n", text, mode, case, copies)))
            times["rg -l"].append(timed(rg_argv(rg, "-l", text, mode, case, copies)))
            if csearch:
                times["csearch -l"].append(timed(csearch_argv(text, mode, case), env))
            seconds, answer = server.search(text, mode, case)
            times["http"].append(seconds)
            files = answer["file_count"]
            times["one-shot"].append(
                timed(
                    [
                        str(BIN / "fedsearch"),
                        "search",
                        "--config",
                        str(config),
                        "--json",
                        *(["--regex"] if mode == "regex" else []),
                        *(["-s"] if case else ["-i"]),
                        "--",
                        text,
                    ]
                )
            )
        medians = {s: statistics.median(t) * 1000 for s, t in times.items()}
        row = {"class": klass, "query": text, "mode": mode, "case_sensitive": case, "files": files, "ms": medians}
        out.append(row)
        ratio_rg = medians["http"] / medians["rg -n"]
        ratio_cs = medians["http"] / medians["csearch -l"] if csearch else float("nan")
        say(
            f"{klass:18} {text[:24]:24} {files:>7,} "
            + " ".join(f"{medians[s]:>10.1f}" for s in sides)
            + f"  {ratio_rg:>7.3f}  {ratio_cs:>7.2f}"
        )
    return out


def freshness(server: Server, copies: list[Path]) -> dict[str, Any]:
    """100 files get a token; the next search must see them all; the builder's update is timed."""
    targets: list[Path] = []
    for copy in copies:
        targets += sorted((copy / "flask" / "src" / "flask").glob("*.py"))[: max(1, 100 // len(copies) + 1)]
    targets = targets[:100]
    saved = {p: p.read_bytes() for p in targets}
    mark = server.log.stat().st_size if server.log.exists() else 0
    try:
        for path in targets:
            with path.open("ab") as handle:
                handle.write(f"\n# {FRESH_TOKEN}\n".encode())
        seconds, answer = server.search(FRESH_TOKEN, "exact", True)
        seen = answer["file_count"]
        deadline = time.monotonic() + 30
        updated: list[dict[str, Any]] = []
        while time.monotonic() < deadline and sum(e.get("read", 0) for e in updated) < len(targets):
            time.sleep(0.2)
            updated = [e for e in _events(server.log, mark) if e.get("event") == "content_index_updated"]
        content_s = sum(e.get("content_s", 0.0) for e in updated)
        total_s = sum(e.get("seconds", 0.0) for e in updated)
        read = sum(e.get("read", 0) for e in updated)
        say("")
        say(
            f"freshness: {len(targets)} files changed; the next search found {seen} of them "
            f"in {seconds * 1000:.0f} ms; the builder read {read} files again: {content_s:.2f} s for the "
            f"content index, {total_s:.2f} s with their declarations"
        )
        return {
            "changed": len(targets),
            "seen": seen,
            "search_ms": seconds * 1000,
            "content_s": content_s,
            "total_s": total_s,
        }
    finally:
        for path, data in saved.items():
            path.write_bytes(data)


def _events(log: Path, offset: int) -> list[dict[str, Any]]:
    out = []
    with log.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    out.append(event)
    return out


if __name__ == "__main__":
    main()
