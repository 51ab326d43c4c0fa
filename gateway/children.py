"""How a serving loop learns that a child process (``rg``) ended: a pidfd, not a thread.

Before Python 3.12, asyncio watches each child with a thread blocked in ``waitpid``:
a thread started per search, which the spawning coroutine waits to see running (on
a busy two-core machine, behind rg's own threads), and an exit that reaches the loop
through a thread-safe wake-up. A pidfd (Linux 5.3+) is a file descriptor the loop
polls like a socket. Python 3.12+ already does this by default; this brings it to
3.11 for the loops that serve, and does nothing where pidfds are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator

__all__ = ["pidfd_children", "pidfds_work"]


def pidfds_work() -> bool:
    """Whether this kernel and Python hand out pidfds."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return False
    try:
        os.close(pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


@contextlib.contextmanager
def pidfd_children() -> Iterator[bool]:
    """While open, the running loop's children are watched by pidfd (Python < 3.12 only).

    Yields whether it changed anything; the previous watcher is restored on exit.
    """
    if sys.version_info >= (3, 12) or not pidfds_work():
        yield False
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        previous = asyncio.get_child_watcher()
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    try:
        yield True
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(previous)
        watcher.close()
