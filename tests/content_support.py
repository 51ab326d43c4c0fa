"""Building content indexes in tests: the builder as the background one runs it, over real rg listings."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings
from gateway.index.content.build import ContentBuilder, ContentStats
from gateway.index.content.narrow import ContentIndex
from gateway.index.files import Source, find_rg, list_all
from gateway.models import BackendResult, SearchQuery


def build(directory: Path, root: Path, exclude: tuple[str, ...] = (), workers: int = 1) -> ContentStats:
    """One whole pass over ``root``'s content index under ``directory`` (as a builder's first pass)."""
    source = Source(root.name, os.path.abspath(root), exclude)
    listed_ns = time.time_ns()
    stats = ContentStats()
    ContentBuilder(str(directory), workers=workers).refresh(source, list_all(source, find_rg()), listed_ns, stats)
    return stats


def indexed(directory: Path, root: Path, exclude: tuple[str, ...] = ()) -> ContentIndex:
    """``root``'s content index, built, as a one-shot search reads it (every file checked at each search)."""
    build(directory, root, exclude)
    return ContentIndex(str(directory), [os.path.abspath(root)])


def age(root: Path, seconds: float = 10.0) -> None:
    """Every file and folder under ``root`` made ``seconds`` older (mtime), as if written long ago.

    Their ctime stays now, so a test that wants them clean past the racy window also sets
    ``gateway.index.content.fresh.RACY_NS`` to 0 (no write races in a test).
    """
    then = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (then, then), follow_symlinks=False)
        os.utime(dirpath, (then, then))


async def answers(root: Path, narrower: ContentIndex | None, q: SearchQuery) -> list[tuple[str, Any]]:
    """Every file and hit of one search (line, column, text, context), in path order; without a narrower,
    rg's own answer over the whole checkout."""
    backend = RipgrepBackend("repo", RipgrepSettings(root=str(root)))
    if narrower is not None:
        backend.use_index(narrower)
    async with backend:
        result: BackendResult = await backend.search(q)
    assert result.status == "ok", result.reason
    return sorted((f.path, [(h.line, h.column, h.text, h.before, h.after) for h in f.hits]) for f in result.files)
