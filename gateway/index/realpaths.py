"""The real path of many roots at once, each parent folder resolved once (standard library only).

A server over 10,000 checkouts under one folder resolves each root in three places (its
tree, its content index folder, its build lock). :func:`os.path.realpath` resolves every
component of every path again: four ``lstat`` calls a root here, 0.9 s of a 10,000-root
server's start. :func:`real_root` resolves a root's parent folder once (remembered for
:data:`PARENT_TTL_S`, so a symlink changed later is seen by the next reload) and looks at
the root's own name alone: one ``lstat``, and the same answer as ``os.path.realpath``.
"""

from __future__ import annotations

import os
import time

__all__ = ["PARENT_TTL_S", "real_root"]

#: How long a parent folder's real path is believed (seconds): long enough for one start or reload.
PARENT_TTL_S = 2.0
#: Parents remembered at most (then forgotten all at once).
PARENTS = 4096

_parents: dict[str, tuple[float, str]] = {}


def real_root(path: str) -> str:
    """``os.path.realpath(path)``, the parent folder's part resolved at most once every PARENT_TTL_S."""
    if ".." in path.split(os.sep):  # resolved after the symlink before it, not lexically: the slow way
        return os.path.realpath(path)
    absolute = os.path.abspath(path)
    parent, name = os.path.split(absolute)
    if not name:  # the file system's root
        return absolute
    now = time.monotonic()
    known = _parents.get(parent)
    if known is None or now - known[0] > PARENT_TTL_S:
        if len(_parents) >= PARENTS:
            _parents.clear()
        known = _parents[parent] = (now, os.path.realpath(parent))
    joined = os.path.join(known[1], name)
    return os.path.realpath(joined) if os.path.islink(joined) else joined
