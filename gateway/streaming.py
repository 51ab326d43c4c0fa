"""A search heard namespace by namespace: what the SSE stream and MCP progress are built on.

:meth:`SearchService.stream <gateway.service.SearchService.stream>` plans the search
at once (bad input raises before anything starts) and hands back a
:class:`SearchStream`. Entered, it runs the search in a task; iterated, it yields each
namespace's :class:`~gateway.models.Outcome` as it settles; once the iteration ends
:attr:`SearchStream.answer` is the answer, exactly what ``search`` returns.
:meth:`SearchStream.provisional` is the answer over what has settled so far. Leaving
the ``async with`` early cancels the search: its backends are cancelled and reaped
(``rg`` killed) before ``__aexit__`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self

from gateway.fanout import Route
from gateway.models import Outcome
from gateway.query.request import SearchRequest

__all__ = ["Plan", "Runner", "SearchStream"]


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated request ready to fan out: its routes resolved, its clock started."""

    request: SearchRequest
    routes: Sequence[Route]
    started: float
    #: When it began on the wall clock (ns): a file modified after it may not be what was read.
    since_ns: int
    #: The caller's identity for the cache (its token and the namespaces it may see).
    access_key: bytes


class Runner(Protocol):
    """What a stream needs of the search service (:class:`gateway.service.SearchService`)."""

    async def run(self, plan: Plan, on_outcome: Callable[[Outcome], None] | None = None) -> dict[str, Any]: ...

    def provisional(self, plan: Plan, outcomes: Sequence[Outcome]) -> dict[str, Any]: ...


class SearchStream:
    """One search whose namespaces are heard of as they settle (an async iterator of outcomes)."""

    def __init__(self, service: Runner, plan: Plan) -> None:
        self._service = service
        self.plan = plan
        self.settled: list[Outcome] = []
        self.answer: dict[str, Any] | None = None
        self._queue: asyncio.Queue[Outcome] = asyncio.Queue()
        self._task: asyncio.Task[dict[str, Any]] | None = None

    @property
    def total(self) -> int:
        """How many namespaces were asked."""
        return len(self.plan.routes)

    async def __aenter__(self) -> Self:
        on_outcome: Callable[[Outcome], None] = self._queue.put_nowait
        self._task = asyncio.create_task(self._service.run(self.plan, on_outcome), name="stream")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the search if it is still running, and wait until its backends let go."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Outcome:
        task = self._task
        if task is None:
            raise RuntimeError("enter the stream (async with) before iterating it")
        while self._queue.empty():
            if task.done():
                self.answer = task.result()
                raise StopAsyncIteration
            getter = asyncio.ensure_future(self._queue.get())
            try:
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                return self._settle(getter.result())
        return self._settle(self._queue.get_nowait())

    def _settle(self, outcome: Outcome) -> Outcome:
        self.settled.append(outcome)
        return outcome

    def result(self) -> dict[str, Any]:
        """The answer, once the iteration has ended."""
        if self.answer is None:
            raise RuntimeError("the stream has not ended")
        return self.answer

    def provisional(self) -> dict[str, Any]:
        """The answer over the namespaces settled so far."""
        return self._service.provisional(self.plan, self.settled)
