"""Hedged requests (The Tail at Scale): after the backend's p95, ask another replica too.

* :class:`LatencyWindow` keeps the last latencies of a backend and gives the delay
  after which a request counts as a straggler: their 95th percentile, never under a
  floor (50 ms), so an ordinary answer never triggers a hedge. An attempt cut short
  (a hedge loser, a deadline loser) counts with the time it ran, a lower bound of
  its latency: the window neither forgets the stragglers hedging hid, nor is taken
  over by the few a spent budget let through (which would push p95 to the
  straggler's latency and switch hedging off).
* :class:`HedgeBudget` caps hedges at a share of the requests (5 %) with a small burst:
  a token bucket filled by each request.
* :func:`race` runs the primary, and if it has not answered after the delay, the hedge
  beside it: the first answer wins and the loser is cancelled (its cancellation is
  never held against its replica: see :mod:`gateway.resilience.breaker`). A failure does not win:
  the other attempt still may answer; if both fail, the last failure is raised.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["HedgeBudget", "LatencyWindow", "race"]

T = TypeVar("T")


class LatencyWindow:
    """The last ``size`` latencies (seconds) and their 95th percentile, floored."""

    def __init__(self, size: int = 100, floor_s: float = 0.05, quantile: float = 0.95) -> None:
        self.samples: deque[float] = deque(maxlen=size)
        self.floor_s = floor_s
        self.quantile = quantile

    def record(self, seconds: float) -> None:
        self.samples.append(max(0.0, seconds))

    def percentile(self) -> float | None:
        """The quantile of what was seen (nearest rank), None before any sample."""
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return ordered[max(0, math.ceil(self.quantile * len(ordered)) - 1)]

    def delay(self) -> float:
        """How long a request may run before it is hedged."""
        seen = self.percentile()
        return self.floor_s if seen is None else max(self.floor_s, seen)


class HedgeBudget:
    """Each request earns ``ratio`` of a hedge, up to ``burst``; a hedge spends one."""

    def __init__(self, ratio: float = 0.05, burst: float = 10.0) -> None:
        self.ratio = ratio
        self.burst = max(1.0, burst)
        self.tokens = 1.0

    def earn(self) -> None:
        self.tokens = min(self.burst, self.tokens + self.ratio)

    def spend(self) -> bool:
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


async def race(
    primary: Callable[[], Awaitable[T]],
    hedge: Callable[[], Awaitable[T] | None],
    delay: float,
) -> tuple[T, bool]:
    """The first answer of ``primary`` and, after ``delay``, of ``hedge``; and whether the hedge won.

    ``hedge`` is called only when the delay passes without an answer; it returns None
    when it decides not to go (no replica ready, no budget, no time left), and then
    this is just ``await primary()``.
    """
    first: asyncio.Future[T] = asyncio.ensure_future(primary())
    tasks: dict[asyncio.Future[T], bool] = {first: False}
    try:
        done, _ = await asyncio.wait({first}, timeout=delay)
        second = None if done else hedge()
        if second is None:
            return await first, False
        tasks[asyncio.ensure_future(second)] = True
        failure: BaseException | None = None
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc is None:
                    return task.result(), tasks[task]
                failure = exc
        raise failure if failure is not None else RuntimeError("hedged attempts ended without an answer")
    finally:
        losers = [t for t in tasks if not t.done()]
        for task in losers:
            task.cancel()
        if losers:
            await asyncio.gather(*losers, return_exceptions=True)
