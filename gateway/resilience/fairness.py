"""Fair queueing over per-caller queues: start-time fair queueing (SFQ; Goyal, Vin and Cheng, 1996).

Each caller has its own FIFO queue. An item is tagged when it reaches the head of its
caller's queue: its **start** is the later of the queue's virtual time and the finish of
that caller's last served item, and serving it moves the caller's finish on by
``cost / weight``. The next item served is always the head with the least start; the
virtual time is the start of the item served last. So:

* over a long run, callers that always have work are served in proportion to their
  weights (what two of them received, each over its weight, differs by at most one
  item each: SFQ's fairness bound);
* a caller arriving while others are backlogged starts at the virtual time, so it waits
  behind at most one item of each of them, however far over their share they are;
* a caller gets no credit for the time it had nothing queued.

With one caller it is a FIFO (one heap entry pushed and popped per item). Items may die
while they wait (a deadline came): ``pop(alive)`` drops dead ones without charging their
caller.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

T = TypeVar("T")
#: The fewest a cost counts for (an unlearnt cost of 0 would let a caller take every turn).
MIN_COST = 1e-3
#: Empty callers whose finish is behind the virtual time are forgotten once there are this many callers.
SWEEP_AT = 1024


@dataclass(slots=True, eq=False)
class _Flow(Generic[T]):
    weight: float
    finish: float
    items: deque[tuple[T, float]] = field(default_factory=deque)
    entry: int = -1  # the sequence number of this flow's live heap entry


class FairQueue(Generic[T]):
    """Items queued per caller key and served by start-time fair queueing (see the module)."""

    __slots__ = ("_flows", "_heap", "_len", "_seq", "_sweep_at", "virtual")

    def __init__(self) -> None:
        self._flows: dict[str, _Flow[T]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        self._len = 0
        self._sweep_at = SWEEP_AT
        #: The start tag of the item served last.
        self.virtual = 0.0

    def __len__(self) -> int:
        """Items queued (dead ones among them until they are dropped)."""
        return self._len

    def __iter__(self) -> Iterator[tuple[str, T]]:
        """(caller key, item) of every queued item, caller by caller, each in its order."""
        for key, flow in self._flows.items():
            for item, _ in flow.items:
                yield key, item

    def callers(self) -> int:
        """Callers with something queued."""
        return sum(1 for flow in self._flows.values() if flow.items)

    def push(self, key: str, item: T, cost: float, weight: float = 1.0) -> None:
        """Queue ``item`` for caller ``key``; serving it costs ``cost`` (seconds), shared by ``weight``."""
        flow = self._flows.get(key)
        if flow is None:
            if len(self._flows) >= self._sweep_at:
                self._sweep()
            flow = self._flows[key] = _Flow(weight, self.virtual)
        flow.weight = weight
        flow.items.append((item, max(cost, MIN_COST)))
        self._len += 1
        if len(flow.items) == 1:
            self._tag(key, flow)

    def pop(self, alive: Callable[[T], bool] = lambda _: True) -> tuple[str, T] | None:
        """The next (caller key, item) to serve, dead items dropped on the way; None when empty."""
        heap = self._heap
        while heap:
            start, seq, key = heapq.heappop(heap)
            flow = self._flows.get(key)
            if flow is None or flow.entry != seq:
                continue  # stale
            items = flow.items
            while items and not alive(items[0][0]):
                items.popleft()
                self._len -= 1
            if not items:
                flow.entry = -1
                continue
            item, cost = items.popleft()
            self._len -= 1
            self.virtual = start
            flow.finish = start + cost / flow.weight
            flow.entry = -1
            if items:
                self._tag(key, flow)
            return key, item
        return None

    def _tag(self, key: str, flow: _Flow[T]) -> None:
        self._seq += 1
        flow.entry = self._seq
        heapq.heappush(self._heap, (max(self.virtual, flow.finish), self._seq, key))

    def _sweep(self) -> None:
        """Forget callers with nothing queued and no finish ahead of the virtual time (nothing to remember)."""
        virtual = self.virtual
        for key in [k for k, f in self._flows.items() if not f.items and f.finish <= virtual]:
            del self._flows[key]
        self._sweep_at = max(SWEEP_AT, 2 * len(self._flows))  # swept again when it has doubled
