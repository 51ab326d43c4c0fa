"""The garbage collector set up for serving, once the start-up heap is built.

An answer allocates tens of thousands of short-lived objects (decoded backend payloads,
files, hits), nearly all freed by reference counting. Collecting every 700 allocations
(the default) walked each answer's live files again and again (bench/README.md has what
that cost). The start-up heap (modules, config, compiled patterns) is long-lived:
frozen, full collections never walk it.

What does live on is each truncated answer's cursor snapshot (its ranked files, for
``snapshot_ttl_s``): a collection of the youngest generation walks them, ~15 ms every
~25 searches of a thousand files each, inside whichever search happened to allocate
past the threshold. :data:`IDLE` moves that work between searches: when the last
search running ends and none starts for :data:`IDLE_DELAY_S`, the generation that is
due (by CPython's own counts and thresholds) is collected once the youngest holds
:data:`IDLE_SHARE` of its threshold. A server never idle collects as before, at the
threshold.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc

__all__ = ["GC_YOUNG_THRESHOLD", "IDLE", "IDLE_DELAY_S", "IDLE_SHARE", "IdleCollector", "settle_heap"]

#: Allocations between two collections of the youngest generation (the default is 700).
GC_YOUNG_THRESHOLD = 50_000
#: How long no search runs before the garbage is collected (s): the last answer is written by then.
IDLE_DELAY_S = 0.005
#: The share of its threshold the youngest generation holds before an idle collection is worth one.
IDLE_SHARE = 0.25


class IdleCollector:
    """Collects garbage between searches (see the module docstring); off until :meth:`enable`."""

    def __init__(self, delay_s: float = IDLE_DELAY_S, share: float = IDLE_SHARE) -> None:
        self.delay_s = delay_s
        self.share = share
        self.enabled = False
        self.active = 0  # searches running
        #: Collections run while idle, by generation.
        self.collections = [0, 0, 0]
        self._timer: asyncio.TimerHandle | None = None

    def enable(self) -> None:
        self.enabled = True

    def begin(self) -> None:
        """A search starts."""
        self.active += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def end(self) -> None:
        """A search ended: once none runs for ``delay_s``, collect what is due."""
        self.active -= 1
        if self.active or not self.enabled or self._timer is not None:
            return
        with contextlib.suppress(RuntimeError):  # no loop (ended outside one): nothing to schedule on
            self._timer = asyncio.get_running_loop().call_later(self.delay_s, self._collect)

    def _collect(self) -> None:
        self._timer = None
        if self.active or not gc.isenabled():
            return
        young, middle, old = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if t0 <= 0 or young < t0 * self.share:
            return
        generation = 0  # the oldest due after this one, as CPython would pick
        if middle + 1 > t1:
            generation = 2 if old + 1 > t2 else 1
        gc.collect(generation)
        self.collections[generation] += 1


#: The process's idle collector (the collector is the process's too); servers enable it.
IDLE = IdleCollector()


def settle_heap() -> None:
    """Freeze what is alive now and collect young garbage rarely (call once, before serving).

    The young generations are collected first, not the whole heap: a server over 10,000 namespaces
    holds ~380,000 tracked objects, and a full collection of them took 266 ms of its start and found
    nothing the young ones had not (cyclic garbage old enough to be in the oldest generation is rare
    at start, and would stay frozen: bounded, never growing)."""
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
    IDLE.enable()
