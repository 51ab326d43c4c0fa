"""A file's declarations, from the declaration index, for the file view's outline.

The index holds each parsed file's :class:`~gateway.index.hits.Outline` with the size and
modification time it was read at. A file that changed since (or that the builder has
not reached) is parsed on the spot, as a page's files are: one file, at most
:data:`~gateway.index.files.MAX_PARSE_BYTES`. Remote namespaces have no outline here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import msgspec

from gateway.index.files import index_file, stat_of
from gateway.index.grammars import language_of
from gateway.index.hits import Outline
from gateway.index.resolve import DeclarationIndex

__all__ = ["Symbol", "outline_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Symbol:
    """One declaration as the outline lists it; ``depth`` 0 at the top of the file."""

    kind: str
    name: str
    qualified_name: str
    start_line: int
    end_line: int
    depth: int


def _symbols(outline: Outline) -> list[Symbol]:
    out: list[Symbol] = []
    depths: list[int] = []
    for i, start in enumerate(outline.starts):
        parent = outline.parents[i]
        depth = depths[parent] + 1 if parent >= 0 else 0
        depths.append(depth)
        kind, name, qualified, _ = outline.detail(i)
        out.append(
            Symbol(
                kind=kind, name=name, qualified_name=qualified, start_line=start, end_line=outline.ends[i], depth=depth
            )
        )
    return out


def outline_of(index: DeclarationIndex | None, namespace: str, path: str) -> list[Symbol] | None:
    """The declarations of ``path`` in the local namespace ``namespace``, in order; None where the
    index knows nothing of it (not a local namespace, not a language it parses, not a file)."""
    if index is None or namespace not in index.sources or language_of(path) is None:
        return None
    root = index.sources[namespace].root
    now = stat_of(root, path)
    if now is None:
        return None
    try:
        stored = index.store().lookup(root, [path]).get(path)
    except sqlite3.Error:
        stored = None  # the index is busy or broken: the file is parsed here instead
    if stored is not None and (stored.size, stored.mtime_ns) == now and stored.outline is not None:
        try:
            return _symbols(stored.outline)
        except (msgspec.DecodeError, IndexError, ValueError, TypeError):
            pass  # an outline that is not one we wrote (a damaged database, rebuilt by the builder): parsed here
    fresh = index_file(root, path)
    if fresh is None or fresh.declarations is None:
        return None
    return _symbols(Outline.of(fresh.declarations))
