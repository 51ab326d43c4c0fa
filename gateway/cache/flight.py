"""Single-flight: identical requests in flight together share one computation.

The first caller of a key starts the work as a task of its own; callers that arrive
with the same key while it runs wait for the same task. A caller that goes away
(cancelled: its client disconnected) stops waiting without disturbing the others;
when the last one has gone the work is cancelled too, so nothing runs for nobody.
A failure reaches every caller waiting for it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class _Call(Generic[T]):
    task: asyncio.Task[T]
    waiters: int = 0


class SingleFlight(Generic[T]):
    """Calls in flight by key."""

    def __init__(self) -> None:
        self._calls: dict[str, _Call[T]] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def waiting(self) -> int:
        """How many callers are waiting, all keys together."""
        return sum(call.waiters for call in self._calls.values())

    async def run(self, key: str, work: Callable[[], Coroutine[Any, Any, T]]) -> tuple[T, bool]:
        """The result of ``work()`` for ``key``, and whether another caller's run gave it."""
        call = self._calls.get(key)
        shared = call is not None
        if call is None:
            call = _Call(asyncio.create_task(work()))
            self._calls[key] = call
            call.task.add_done_callback(functools.partial(self._done, key, call))
        call.waiters += 1
        try:
            return await asyncio.shield(call.task), shared
        finally:
            call.waiters -= 1
            if not call.waiters and not call.task.done():  # the last caller went away: so does the work
                self._forget(key, call)
                call.task.cancel()

    def _forget(self, key: str, call: _Call[T]) -> None:
        if self._calls.get(key) is call:
            del self._calls[key]

    def _done(self, key: str, call: _Call[T], task: asyncio.Task[T]) -> None:
        self._forget(key, call)
        if not task.cancelled():
            task.exception()  # retrieved: whoever waited has it
