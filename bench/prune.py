"""prune: the index folder after 8 checkouts, a bigger config once, then the 8 again (issue 41).

    .venv/bin/python bench/prune.py [--corpus /work/corpus-real] [--copies 36] [--dir DIR]

1. **the 8 alone**: the builder (declarations, vectors, content) over the corpus's
   checkouts in a fresh folder: its size is the target.
2. **a bigger config once**: ``--copies`` more roots, each one of the 8 under another path,
   as a bigger config's builder leaves them: their declaration rows written again under the
   copy's root (SQL, as a build of the same files would write them) and their content index
   folders copied. Their last use is set 20 days back (``keep_days`` 14). The folder's size
   now is what stays forever without pruning.
3. **the 8 again**: one builder pass over the 8 with its pruner (keep_days 14, max_bytes
   10 GiB): the roots pruned, the seconds pruning took (VACUUM's of them), the builder's whole
   pass beside a pass with nothing to prune, and the folder's size after. Meanwhile another
   process reads declarations as a search does: its reads before and during the prune say
   whether searches waited.
4. **file per root instead** (the road not taken): the same bytes as one file a root, unlinked.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.index import roots
from gateway.index.builder import Builder
from gateway.index.content.build import ContentBuilder
from gateway.index.content.paths import root_dir
from gateway.index.files import Source
from gateway.index.prune import DAY_S, Pruner, folder_bytes
from gateway.index.store import Store
from gateway.log import configure


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def build_base(folder: Path, checkouts: list[Path]) -> float:
    """The 8 checkouts' indexes, built as the background builder builds them; seconds."""
    store = Store.open(str(folder), busy_s=10.0)
    sources = [Source(d.name, str(d)) for d in checkouts]
    builder = Builder(store, sources, workers=2, content=ContentBuilder(str(folder), workers=2))
    started = time.monotonic()
    builder.refresh()
    store.close()
    return time.monotonic() - started


def add_copies(folder: Path, checkouts: list[Path], copies: int, where: Path) -> list[str]:
    """``copies`` roots more, each one of ``checkouts`` under another path (see the module)."""
    db = next(folder.glob("declarations-*.sqlite3"))
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("PRAGMA foreign_keys=ON")
    added = []
    for i in range(copies):
        source = checkouts[i % len(checkouts)]
        root = where / f"copy{i:02d}-{source.name}"
        root.mkdir(parents=True, exist_ok=True)
        connection.execute("BEGIN")
        connection.execute(
            "INSERT INTO files (root, path, size, mtime_ns, language, parsed, declarations) "
            "SELECT ?, path, size, mtime_ns, language, parsed, declarations FROM files WHERE root = ?",
            (str(root), str(source)),
        )
        connection.execute(
            "INSERT INTO declarations (file_id, ordinal, parent, kind, name, qualified_name, start_line, end_line, "
            "intent, signature) SELECT n.id, d.ordinal, d.parent, d.kind, d.name, d.qualified_name, d.start_line, "
            "d.end_line, d.intent, d.signature FROM declarations d JOIN files o ON o.id = d.file_id "
            "JOIN files n ON n.root = ? AND n.path = o.path WHERE o.root = ?",
            (str(root), str(source)),
        )
        connection.execute(
            "INSERT INTO intents (file_id, count, vectors) SELECT n.id, i.count, i.vectors FROM intents i "
            "JOIN files o ON o.id = i.file_id JOIN files n ON n.root = ? AND n.path = o.path WHERE o.root = ?",
            (str(root), str(source)),
        )
        connection.execute("COMMIT")
        original = Path(root_dir(str(folder), str(source)))
        if original.is_dir():
            copy = Path(root_dir(str(folder), str(root)))
            shutil.copytree(original, copy)
            (copy / "root").write_bytes(os.fsencode(str(root)))
        roots.register(str(folder), {str(root): [root.name]})
        then = time.time() - 20 * DAY_S
        os.utime(roots.marker_path(str(folder), str(root)), (then, then))
        added.append(str(root))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return added


def _reader(folder: Path, checkouts: list[Path], stop: Any, marks: Any, out: Any) -> None:
    """Another process reading as a search does (a page's files, a name's defining files), timing
    each read, until ``stop``; ``marks`` is set when the prune starts."""
    store = Store.open(str(folder), busy_s=0.05)
    paths = {str(d): sorted(store.states(str(d)))[:50] for d in checkouts}
    before: list[float] = []
    during: list[float] = []
    while not stop.is_set():
        for root, some in paths.items():
            started = time.monotonic()
            store.lookup(root, some)
            store.defining_paths("get", True)
            (during if marks.is_set() else before).append(time.monotonic() - started)
    store.close()
    out.put((before[len(before) // 2 :], during))  # the first half of those before warmed the cache


def measure(folder: Path, checkouts: list[Path]) -> list[str]:
    out = []
    store = Store.open(str(folder), busy_s=10.0)
    sources = [Source(d.name, str(d)) for d in checkouts]
    mine = {str(d): [d.name] for d in checkouts}
    builder = Builder(store, sources, workers=2, content=ContentBuilder(str(folder), workers=2))
    builder.pruner = Pruner(str(folder), store, mine, keep_days=14, max_bytes=10 * 1024**3)
    context = multiprocessing.get_context("fork")
    stop, marks, results = context.Event(), context.Event(), context.Queue()
    reader = context.Process(target=_reader, args=(folder, checkouts, stop, marks, results))
    reader.start()
    time.sleep(3.0)
    marks.set()
    prune = builder.pruner.run()
    stop.set()
    baseline, during = results.get()
    reader.join()
    out.append(
        f"pruned {len(prune.dropped)} roots ({prune.files:,} files' rows) in {prune.seconds:.2f} s, "
        f"VACUUM {prune.vacuum_s:.2f} s of it; folder {_mb(prune.before)} -> {_mb(prune.after)}"
    )
    for label, reads in (("before the prune", baseline), ("during the prune", during)):
        if reads:
            out.append(
                f"a search's reads {label}: {len(reads)}, median {statistics.median(reads) * 1000:.2f} ms, "
                f"slowest {max(reads) * 1000:.1f} ms"
            )
    builder.pruner._due = 0.0  # a survey again, with nothing left to prune
    started = time.monotonic()
    idle = builder.pruner.run()
    survey_s = time.monotonic() - started
    surveyed, plain = [], []
    for _ in range(3):
        builder.pruner._due = 0.0
        surveyed.append(builder.refresh().seconds)
        plain.append(builder.refresh().seconds)  # the next survey is PRUNE_S away
    out.append(
        f"a survey with nothing to prune: {survey_s * 1000:.0f} ms ({len(idle.dropped)} dropped); "
        f"a builder pass with nothing changed: median {statistics.median(plain):.2f} s, "
        f"{statistics.median(surveyed):.2f} s with a survey"
    )
    store.close()
    return out


def per_file(sizes: list[int], where: Path) -> str:
    """The same bytes as one file a root: the time to unlink them all."""
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for i, n in enumerate(sizes):
        path = where / f"root{i}.sqlite3"
        with open(path, "wb") as handle:
            handle.truncate(n)
            handle.write(os.urandom(1 << 16))
        files.append(path)
    os.sync()
    started = time.monotonic()
    for path in files:
        path.unlink()
    took = time.monotonic() - started
    return f"file per root instead: unlinking {len(files)} files of {_mb(sum(sizes))} took {took * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default="/work/corpus-real")
    parser.add_argument("--copies", type=int, default=36)
    parser.add_argument("--dir", help="where to build (kept; the 8's index is reused from <dir>/base)")
    args = parser.parse_args()
    configure()
    checkouts = sorted(p for p in Path(args.corpus).iterdir() if (p / ".git").exists())
    top = Path(args.dir or tempfile.mkdtemp(prefix="fedsearch-prune-"))
    base = top / "base"
    if not base.exists():
        seconds = build_base(base, checkouts)
        print(f"the {len(checkouts)} checkouts' index built in {seconds:.1f} s")
    alone = folder_bytes(str(base))
    db_alone = sum(p.stat().st_size for p in base.glob("declarations-*"))
    print(f"the {len(checkouts)} alone: folder {_mb(alone)} (declarations database {_mb(db_alone)})")
    work = top / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    for checkout in checkouts:  # the 8 used now
        roots.register(str(work), {str(checkout): [checkout.name]})
    added = add_copies(work, checkouts, args.copies, top / "copies")
    grown = folder_bytes(str(work))
    db_grown = sum(p.stat().st_size for p in work.glob("declarations-*"))
    print(
        f"after a bigger config ({len(added)} roots more): folder {_mb(grown)} "
        f"(declarations {_mb(db_grown)}): without pruning it stays so"
    )
    for line in measure(work, checkouts):
        print(line)
    after = folder_bytes(str(work))
    db_after = sum(p.stat().st_size for p in work.glob("declarations-*"))
    print(f"after the 8 again: folder {_mb(after)} (declarations {_mb(db_after)}); the 8 alone: {_mb(alone)}")
    share = (db_grown - db_alone) // max(1, args.copies)
    print(per_file([share] * args.copies, top / "per-file"))
    shutil.rmtree(top / "per-file", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
