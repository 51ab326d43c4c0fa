"""prune: the index folder after 8 checkouts, a bigger config once, then the 8 again (issue 41).

    .venv/bin/python bench/prune.py [--corpus /work/corpus-real] [--copies 36] [--dir DIR]

The issue's sequence, in one fresh index folder, with the real builder:

1. **the 8**: the builder (declarations, vectors, content) over the corpus's checkouts;
   the folder's size then is the target.
2. **a bigger config once**: ``--copies`` more checkouts (``git clone --shared`` of the 8 in
   turn, kept in ``<dir>/copies`` between runs) built into the same folder by their own
   config's builder. The folder's size now is what stayed forever before this issue.
3. **the 8 again**, some weeks later: the copies' last use set 20 days back (the clock we
   control; keep_days 14), then the background builder process of the 8's config
   (``python -m gateway.index``, as ``fedsearch serve`` starts it) makes its first pass,
   which prunes. From its log: the roots pruned, the prune's seconds (VACUUM's of them) and
   the whole pass's (how long the builder was busy). Meanwhile another process reads
   declarations as a search does: its reads before and during the pass say whether searches
   waited. Then the folder's size.
4. **file per root instead** (the road not taken): the copies' share of the database as one
   file a root, unlinked.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.index import roots
from gateway.index.background import BuilderProcess
from gateway.index.builder import Builder
from gateway.index.content.build import ContentBuilder
from gateway.index.files import Source
from gateway.index.prune import DAY_S, folder_bytes
from gateway.index.store import Store
from gateway.log import configure


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _db_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("declarations-*"))


def build(folder: Path, checkouts: list[Path]) -> float:
    """A config's indexes, built as its builder builds them (markers with their names); seconds."""
    store = Store.open(str(folder), busy_s=10.0)
    sources = [Source(d.name, str(d)) for d in checkouts]
    roots.register(str(folder), {str(d): [d.name] for d in checkouts})
    builder = Builder(store, sources, workers=2, content=ContentBuilder(str(folder), workers=2))
    started = time.monotonic()
    builder.refresh()
    store.close()
    return time.monotonic() - started


def copies(where: Path, checkouts: list[Path], n: int) -> list[Path]:
    """``n`` checkouts more, each a ``git clone --shared`` of one of ``checkouts`` in turn."""
    out = []
    for i in range(n):
        source = checkouts[i % len(checkouts)]
        dest = where / f"{source.name}-{i // len(checkouts) + 2}"
        if not dest.exists():
            subprocess.run(["git", "clone", "-q", "--shared", str(source), str(dest)], check=True)
        out.append(dest)
    return out


def _reader(folder: str, checkouts: list[str], stop: Any, marks: Any, out: Any) -> None:
    """Another process reading as a search does (50 files' outlines of each checkout, a name's defining
    files), timing each read, until ``stop``; reads after ``marks`` is set count as during."""
    store = Store.open(folder, busy_s=0.05)
    paths = {root: sorted(store.states(root))[:50] for root in checkouts}
    before: list[float] = []
    during: list[float] = []
    while not stop.is_set():
        for root, some in paths.items():
            started = time.monotonic()
            store.lookup(root, some)
            store.defining_paths("get", True)
            (during if marks.is_set() else before).append(time.monotonic() - started)
            time.sleep(0.01)  # searches come and go; a reader in a tight loop would take a core of two
    store.close()
    out.put((before[len(before) // 2 :], during))  # the first half of those before warmed the cache


def serve_again(folder: Path, checkouts: list[Path]) -> dict[str, Any]:
    """The 8's background builder process until its first pass is done: that pass's and the prune's events."""
    context = multiprocessing.get_context("fork")
    stop, marks, results = context.Event(), context.Event(), context.Queue()
    reader = context.Process(target=_reader, args=(str(folder), [str(d) for d in checkouts], stop, marks, results))
    reader.start()
    time.sleep(3.0)
    spec = BuilderProcess(str(folder), [Source(d.name, str(d)) for d in checkouts], 3600.0, 2, content=True).spec
    marks.set()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.index"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "FEDSEARCH_LOG_LEVEL": "info"},
    )
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(spec).encode() + b"\n")
    proc.stdin.flush()
    events: dict[str, Any] = {}
    for line in proc.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") in ("index_pruned", "index_pass"):
            events[event["event"]] = event
        if event.get("event") == "index_pass":
            break
    stop.set()
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    before, during = results.get()
    reader.join()
    events["reads"] = (before, during)
    events["cpu_s"] = usage.ru_utime + usage.ru_stime
    return events


def per_file(sizes: list[int], where: Path) -> str:
    """The same bytes as one file a root: the time to unlink them all."""
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for i, n in enumerate(sizes):
        path = where / f"root{i}.sqlite3"
        with open(path, "wb") as handle:
            handle.write(os.urandom(1 << 16))
            handle.truncate(n)
        files.append(path)
    os.sync()
    started = time.monotonic()
    for path in files:
        path.unlink()
    took = time.monotonic() - started
    return f"file per root instead: unlinking {len(files)} files of {_mb(sum(sizes))} took {took * 1000:.1f} ms"


def _first_two(folder: Path, kept: Path, checkouts: list[Path], more: list[Path]) -> tuple[int, int]:
    """Steps 1 and 2 (the folder after them kept in ``kept`` for ``--reuse``); the 8's folder and database bytes."""
    seconds = build(folder, checkouts)
    alone, db_alone = folder_bytes(str(folder)), _db_bytes(folder)
    print(
        f"1. the {len(checkouts)} checkouts: built in {seconds:.1f} s; folder {_mb(alone)} "
        f"(declarations {_mb(db_alone)})"
    )
    seconds = build(folder, more)
    print(
        f"2. a bigger config once ({len(more)} checkouts more): built in {seconds:.1f} s; folder "
        f"{_mb(folder_bytes(str(folder)))} (declarations {_mb(_db_bytes(folder))}): without pruning it stays so"
    )
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(folder, kept)
    (kept / "alone.json").write_text(json.dumps([alone, db_alone]))
    return alone, db_alone


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default="/work/corpus-real")
    parser.add_argument("--copies", type=int, default=36)
    parser.add_argument("--dir", help="where to work (its copies/ are kept for the next run)")
    parser.add_argument(
        "--reuse", action="store_true", help="start step 3 from the folder the last run kept after step 2 (<dir>/grown)"
    )
    args = parser.parse_args()
    configure(level="warning")
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"prune: skipped, no corpus at {corpus}")
        return 0
    checkouts = sorted(p for p in corpus.iterdir() if (p / ".git").exists())
    top = Path(args.dir or tempfile.mkdtemp(prefix="fedsearch-prune-"))
    folder, grown_copy = top / "idx", top / "grown"
    shutil.rmtree(folder, ignore_errors=True)
    more = copies(top / "copies", checkouts, args.copies)
    if args.reuse and grown_copy.is_dir():
        shutil.copytree(grown_copy, folder)
        alone, db_alone = json.loads((grown_copy / "alone.json").read_text())
        print(f"1. the {len(checkouts)} checkouts (kept): folder {_mb(alone)} (declarations {_mb(db_alone)})")
        print(
            f"2. a bigger config once (kept, {len(more)} checkouts more): folder {_mb(folder_bytes(str(folder)))} "
            f"(declarations {_mb(_db_bytes(folder))})"
        )
    else:
        alone, db_alone = _first_two(folder, grown_copy, checkouts, more)
    db_grown = _db_bytes(folder)
    then = time.time() - 20 * DAY_S
    for copy in more:
        os.utime(roots.marker_path(str(folder), str(copy)), (then, then))
    events = serve_again(folder, checkouts)
    pruned, passed = events.get("index_pruned", {}), events.get("index_pass", {})
    after, db_after = folder_bytes(str(folder)), _db_bytes(folder)
    print(
        f"3. the {len(checkouts)} again, 20 days on: the builder's first pass pruned {pruned.get('roots', 0)} roots "
        f"({pruned.get('files', 0):,} files' rows) in {pruned.get('seconds', 0):.2f} s (VACUUM "
        f"{pruned.get('vacuum_s', 0):.2f} s); the whole pass took {passed.get('seconds', 0):.2f} s, the builder "
        f"process {events['cpu_s']:.1f} s of CPU in all (niced); "
        f"folder {_mb(after)} (declarations {_mb(db_after)}), the {len(checkouts)} alone {_mb(alone)}"
    )
    before, during = events["reads"]
    for label, reads in (("before the pass", before), ("during the pass", during)):
        if reads:
            print(
                f"   a search's reads {label}: {len(reads)}, median {statistics.median(reads) * 1000:.2f} ms, "
                f"slowest {max(reads) * 1000:.1f} ms"
            )
    share = max(0, db_grown - db_alone) // max(1, len(more))
    print("4. " + per_file([share] * len(more), top / "per-file"))
    shutil.rmtree(top / "per-file", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
