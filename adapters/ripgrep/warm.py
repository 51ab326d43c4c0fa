"""rg started ahead of its search: in a server, a search finds its rg already running.

Starting rg is about 1.5 ms of a local search's answer, serial with it: ``posix_spawn``, the
loader, rg's own start-up (bench/README.md, "rg started ahead"). rg reads its patterns
from stdin (``-f -``) before it opens a file, so an rg started with all of its vector but
the pattern waits there, ready, until it is given one. In a long-lived server each
ripgrep search thus takes an rg that was started for its vector (:meth:`WarmPool.take`),
writes its pattern into it and closes its stdin (:meth:`Started.give`); :data:`REFILL_S`
after that rg ended, the pool starts the next one for the same vector (the search's
answer is out by then, and the loop and the cores are idle).

* **Bounds.** At most :data:`WARM_MAX` waiting rg per service, the least recently used
  stopped first, and each stopped after :data:`IDLE_S` unused. A waiting rg holds about
  4 MB and one thread, and nothing else.
* **Same answers.** ``-f -`` reads one pattern a line: a pattern holding a line break
  or a NUL (:func:`stdin_pattern` is None) is given by ``-e`` to an rg started for it, as
  outside a server.
* **Faults.** A waiting rg that died (killed, or its binary gone) is replaced by one
  started at once; one that cannot start says why as before. A pool's rg are killed and
  reaped when it closes, when it is collected, and when the interpreter exits; one whose
  server was killed outright reads the end of its stdin, and with no pattern at all it
  exits without searching.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters.ripgrep.process import Child
from adapters.ripgrep.spawn import OutputPipe

__all__ = ["IDLE_S", "REFILL_S", "WARM_MAX", "Started", "WarmPool", "start", "stdin_pattern"]

#: Waiting rg a service keeps (one per vector: namespaces, mode, case, excludes, context).
WARM_MAX = 4
#: After a search's rg ended, the next one for its vector starts this much later.
REFILL_S = 0.005
#: A waiting rg that was not taken for this long is stopped.
IDLE_S = 600.0


def stdin_pattern(text: str) -> bytes | None:
    """``text`` as rg reads it from ``-f -`` (one line), or None if it cannot be one line."""
    if "\n" in text or "\r" in text or "\x00" in text:
        return None
    return text.encode() + b"\n"


@dataclass(eq=False, slots=True)
class Started:
    """An rg that reads its pattern from ``stdin``: its process and its output pipe."""

    child: Child
    pipe: OutputPipe
    stdin: int

    def give(self, pattern: bytes) -> bool:
        """Hand rg its pattern (it starts searching); False if it has gone already."""
        try:
            if self.child.exited.done():
                return False
            os.write(self.stdin, pattern)  # <= 4,001 bytes into an empty pipe: one write
            return True
        except BrokenPipeError:
            return False
        finally:
            self._close_stdin()

    def discard(self) -> None:
        """Stop it from the loop: killed now, its descriptors closed once it was reaped."""
        self._close_stdin()
        self.pipe.close()
        child = self.child
        child.kill()
        if child.exited.done():
            child.close()
        else:
            child.exited.add_done_callback(lambda _: child.close())

    def reap_now(self) -> None:
        """Stop it without the loop (which may be gone): killed, waited for, closed."""
        self._close_stdin()
        self.pipe.close()
        self.child.reap_now()

    def _close_stdin(self) -> None:
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1


def start(argv: Sequence[str], nice: int) -> Started:
    """Start rg as ``argv`` (``-f -``) from here, its stdin a pipe; OSError if it cannot start."""
    pipe = OutputPipe()
    try:
        read, write = os.pipe()
    except OSError:
        pipe.close()
        raise
    try:
        child = Child(argv, cwd=None, stdout=pipe.write_fd, stdin=read, nice=nice)
    except BaseException:
        os.close(write)
        pipe.close()
        raise
    finally:
        os.close(read)
    pipe.started()
    return Started(child, pipe, write)


@dataclass(eq=False, slots=True)
class _Waiting:
    started: Started
    pid: int  # the process that started it (a forked child's exit must not stop it)
    expiry: asyncio.TimerHandle


class WarmPool:
    """The waiting rg of one service, by vector (see the module's docstring)."""

    def __init__(self, size: int = WARM_MAX, refill_s: float = REFILL_S, idle_s: float = IDLE_S) -> None:
        self.size = size
        self.refill_s = refill_s
        self.idle_s = idle_s
        self.closed = False
        #: How many searches took a waiting rg.
        self.taken = 0
        self._waiting: OrderedDict[tuple[str, ...], _Waiting] = OrderedDict()
        self._refills: dict[tuple[str, ...], asyncio.TimerHandle] = {}
        self._finalizer = weakref.finalize(self, _reap_all, self._waiting)

    def take(self, argv: Sequence[str]) -> Started | None:
        """The rg waiting for ``argv``, if there is one (it is the caller's now)."""
        waiting = self._waiting.pop(tuple(argv), None)
        if waiting is None:
            return None
        waiting.expiry.cancel()
        self.taken += 1
        return waiting.started

    def refill(self, argv: Sequence[str], nice: int) -> None:
        """A search with ``argv`` is done: the next rg for it starts :attr:`refill_s` from now."""
        key = tuple(argv)
        if self.closed or key in self._waiting or key in self._refills:
            return
        loop = asyncio.get_running_loop()
        self._refills[key] = loop.call_later(self.refill_s, _later, weakref.ref(self), WarmPool._start, key, nice)

    def waiting(self) -> list[int]:
        """The pids of the rg waiting now, least recently started first."""
        return [w.started.child.pid for w in self._waiting.values()]

    async def aclose(self) -> None:
        """Stop every waiting rg (killed and reaped) and start no more."""
        self.closed = True
        for handle in self._refills.values():
            handle.cancel()
        self._refills.clear()
        waiting = list(self._waiting.values())
        self._waiting.clear()
        for w in waiting:
            w.expiry.cancel()
            w.started.discard()
        for w in waiting:
            await asyncio.shield(w.started.child.exited)

    def _start(self, key: tuple[str, ...], nice: int) -> None:
        del self._refills[key]
        if self.closed or key in self._waiting:
            return
        try:
            started = start(key, nice)
        except OSError:  # the next search starts its own rg, and says why it cannot
            return
        expiry = asyncio.get_running_loop().call_later(self.idle_s, _later, weakref.ref(self), WarmPool._expire, key)
        self._waiting[key] = _Waiting(started, os.getpid(), expiry)
        started.child.exited.add_done_callback(
            functools.partial(_later, weakref.ref(self), WarmPool._died, key, started)
        )
        while len(self._waiting) > self.size:
            _, oldest = self._waiting.popitem(last=False)
            oldest.expiry.cancel()
            oldest.started.discard()

    def _died(self, key: tuple[str, ...], started: Started, _: object) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None and waiting.started is started:  # died while it waited (not taken)
            del self._waiting[key]
            waiting.expiry.cancel()
            started.discard()

    def _expire(self, key: tuple[str, ...]) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is not None:
            waiting.started.discard()


def _later(pool: weakref.ref[WarmPool], method: Callable[..., None], *args: object) -> None:
    """A timer's call of a pool's method: a timer does not keep a pool nobody holds (its
    finalizer stops its rg)."""
    alive = pool()
    if alive is not None:
        method(alive, *args)


def _reap_all(waiting: OrderedDict[tuple[str, ...], _Waiting]) -> None:
    """The pool was collected, or the interpreter exits: none of its rg may outlive it."""
    for w in waiting.values():
        if w.pid == os.getpid():
            with contextlib.suppress(OSError):
                w.started.reap_now()
    waiting.clear()
