"""``fedsearch index``: build or refresh every local namespace's indexes now, content and declarations.

A server keeps its indexes up to date in the background; this is how a user of the
one-shot CLI gets them (a one-shot search then reads them: content narrows its scans,
declarations shape its hits), and how anyone gets them before serving. It takes the
index folder's lock as the background builder does, waiting (and saying so) while
another builder works. On a terminal it shows a progress line per namespace as its
files are read; otherwise it prints one line a namespace when that one is done.
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


def _line(name: str, stats: BuildStats, content: dict[str, object] | None, seconds: float) -> str:
    parts = [f"{name}: {plural(stats.listed, 'file')} with a grammar"]
    if content is not None:
        size = int(str(content["bytes"])) / 1e6
        parts.append(
            f"content index {content['state']}, {plural(int(str(content['files'])), 'file')}, {size:.1f} MB"
            + (f" ({plural(stats.content_read, 'file')} read)" if stats.content_read else "")
        )
    parts.append(f"{plural(stats.parsed, 'file')} parsed, {stats.embedded:,} declarations embedded")
    return "; ".join(parts) + f" ({seconds:.1f} s)\n"


def run(args: argparse.Namespace) -> int:
    """Build every local index of the config now; 0 when done, 1 when another builder (a running server's)
    held the folder past ``--wait``, 2 when the folder cannot be written."""
    if args.status or args.prune:
        from gateway.cli import folder

        return folder.status(args) if args.status else folder.prune(args)
    from gateway.index.builder import hold_lock
    from gateway.index.setup import index_for

    config = load(args)
    index = index_for(config)
    if index is None or index.directory is None:
        warn("no local namespace to index" if config.index.enabled else "[index] enabled = false: nothing to build")
        return 0
    directory = os.path.expanduser(index.directory)
    try:
        os.makedirs(directory, exist_ok=True)
        lock = hold_lock(
            directory, lambda: warn(f"waiting for another builder of {directory} to finish its pass"), args.wait
        )
    except OSError as exc:
        sys.stderr.write(f"fedsearch: cannot write the index folder {directory}: {exc.strerror or exc}\n")
        return 2
    if lock is None:  # a running server's builder: it keeps these indexes up to date itself
        warn(
            f"another builder still holds {directory} after {args.wait:g} s (a running fedsearch serve keeps "
            "its indexes up to date itself): nothing built here"
        )
        return 1
    try:
        _build(index, directory, content=config.index.content)
    finally:
        os.close(lock)
    return 0


def _build(index: DeclarationIndex, directory: str, *, content: bool) -> None:
    from gateway.index.builder import Builder, BuildStats
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
    try:
        for name, source in index.sources.items():
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
    finally:
        progress.clear()
        store.close()
        if reader is not None:
            reader.close()
