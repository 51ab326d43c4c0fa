"""``fedsearch index``: build or refresh every local namespace's indexes now, content and declarations.

A server keeps its indexes up to date in the background; this is how a user of the
one-shot CLI gets them (a one-shot search then reads them: content narrows its scans,
declarations shape its hits), and how anyone gets them before serving. It takes each
root's lock as the background builder does (:mod:`gateway.index.locks`) and builds the
roots it holds; a root another process holds (a running server's builder, which keeps it
up to date itself) is waited for, up to ``--wait`` seconds, saying which process holds
it: built here if that process lets go, reported as it is once that process has built it.
On a terminal it shows a progress line per namespace as its files are read; otherwise it
prints one line a namespace when that one is done.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.cli.messages import warn
from gateway.cli.render import plural
from gateway.cli.scope import load

if TYPE_CHECKING:
    from gateway.index.builder import BuildStats
    from gateway.index.locks import RootLock
    from gateway.index.resolve import DeclarationIndex

__all__ = ["run"]


class _Progress:
    """A line rewritten in place on a terminal; nothing elsewhere."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.shown = False
        self._last = 0.0

    def show(self, text: str) -> None:
        now = time.monotonic()
        if not self.tty or now - self._last < 0.1:
            return
        self._last = now
        sys.stderr.write(f"\r\x1b[2K{text}")
        sys.stderr.flush()
        self.shown = True

    def reading(self, name: str) -> Callable[[int, int], None]:
        """What the content builder calls after each batch of ``name``'s files."""

        def show(done: int, total: int) -> None:
            self.show(f"{name}: reading {done:,} of {total:,} files")

        return show

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
            self.shown = False


def _line(name: str, stats: BuildStats, content: dict[str, object] | None, seconds: float, by: str = "") -> str:
    """One namespace's line (``by``: it was built by another process, which says so instead of counts)."""
    parts = [name + ":" if by else f"{name}: {plural(stats.listed, 'file')} with a grammar"]
    if content is not None:
        size = int(str(content["bytes"])) / 1e6
        parts.append(
            f"content index {content['state']}, {plural(int(str(content['files'])), 'file')}, {size:.1f} MB"
            + (f" ({plural(stats.content_read, 'file')} read)" if stats.content_read else "")
        )
    if by:
        return " ".join(parts[:1]) + " " + "; ".join([*parts[1:], by]) + "\n"
    parts.append(f"{plural(stats.parsed, 'file')} parsed, {stats.embedded:,} declarations embedded")
    return "; ".join(parts) + f" ({seconds:.1f} s)\n"


def run(args: argparse.Namespace) -> int:
    """Build every local index of the config now; 0 when every root is built (here or by the process holding
    it), 1 when another process still held one unbuilt past ``--wait``, 2 when the folder cannot be written."""
    if args.status or args.prune:
        from gateway.cli import folder

        return folder.status(args) if args.status else folder.prune(args)
    from gateway.index.locks import RootLock
    from gateway.index.setup import index_for

    config = load(args)
    index = index_for(config)
    if index is None or index.directory is None:
        warn("no local namespace to index" if config.index.enabled else "[index] enabled = false: nothing to build")
        return 0
    directory = os.path.expanduser(index.directory)
    locks = {s.root: RootLock(directory, s.root) for s in index.sources.values()}
    try:
        os.makedirs(directory, exist_ok=True)
        for lock in locks.values():
            lock.take()
    except OSError as exc:
        sys.stderr.write(f"fedsearch: cannot write the index folder {directory}: {exc.strerror or exc}\n")
        for lock in locks.values():
            lock.release()
        return 2
    try:
        return _build(index, directory, locks, content=config.index.content, wait_s=args.wait)
    finally:
        for lock in locks.values():
            lock.release()


def _build(index: DeclarationIndex, directory: str, locks: dict[str, RootLock], *, content: bool, wait_s: float) -> int:
    from gateway.index.builder import Builder, BuildStats
    from gateway.index.locks import holder
    from gateway.index.roots import register
    from gateway.index.setup import content_for
    from gateway.index.store import Store

    content_builder = None
    if content:
        from gateway.index.content.build import ContentBuilder

        content_builder = ContentBuilder(directory, workers=index.build_workers, max_bytes=index.max_bytes or 0)
    names: dict[str, list[str]] = {}
    for name, source in index.sources.items():
        names.setdefault(source.root, []).append(name)
    register(directory, names)  # their last use, and the names --status shows
    store = Store.open(directory, busy_s=10.0)
    builder = Builder(store, list(index.sources.values()), workers=index.build_workers, content=content_builder)
    reader = content_for(index)
    progress = _Progress(sys.stderr.isatty())
    said: set[int] = set()
    ends = time.monotonic() + wait_s
    todo = dict(index.sources)
    code = 0
    try:
        while todo:
            for name, source in list(todo.items()):
                lock = locks[source.root]
                if not lock.held and not lock.take():
                    other = holder(directory, source.root)
                    described = reader.describe(source.root) if reader is not None else None
                    if other is not None and (described is None or described["state"] != "ready"):
                        if other.pid not in said:
                            said.add(other.pid)
                            warn(f"waiting for another builder (pid {other.pid}) of {source.root}: {other.words()}")
                        continue
                    by = f"built by pid {other.pid}" if other is not None else "built by another process"
                    sys.stdout.write(_line(name, BuildStats(), described, 0.0, by))
                    del todo[name]
                    continue
                started = time.monotonic()
                stats = BuildStats()
                if content_builder is not None:
                    content_builder.progress = progress.reading(name)
                listed = builder.refresh_content(source, stats) if content_builder is not None else None
                progress.show(f"{name}: parsing declarations")
                builder.refresh_one(source, stats, None, listed)
                progress.clear()
                described = reader.describe(source.root) if reader is not None else None
                sys.stdout.write(_line(name, stats, described, time.monotonic() - started))
                sys.stdout.flush()
                del todo[name]
            if not todo:
                break
            if time.monotonic() >= ends:
                held = ", ".join(
                    f"{name} (pid {p.pid})" for name, s in todo.items() if (p := holder(directory, s.root))
                )
                warn(
                    f"another builder still holds {held or ', '.join(todo)} after {wait_s:g} s (a running fedsearch "
                    "serve keeps its indexes up to date itself): nothing built here for "
                    + ("it" if len(todo) == 1 else "them")
                )
                code = 1
                break
            time.sleep(min(0.2, max(0.0, ends - time.monotonic())))
    finally:
        progress.clear()
        store.close()
        if reader is not None:
            reader.close()
    return code
