"""One zoekt request for every namespace that asks the same zoekt server the same thing.

A zoekt-webserver indexes many repositories, and namespaces usually carve one server
up by their ``repos`` regex. A fan-out starts every namespace's search in the same
turn of the event loop; the :class:`Coalescer` lets the searches for one endpoint
gather for two turns, then sends ONE ``/api/search`` whose ``repo:`` filter is the
union of the members' regexes (none if a member has none), asking for every
member's page of files. The answer is read once and each file handed to the
members whose ``repos`` matches its repository (an RE2 set: one pass per repository
name). A thousand namespaces on four servers cost four requests, not a thousand.

Members share a request only when it would be the same request alone: the same
endpoint, query (deadline included), token variable and size cap, and when each
opted in (``coalesce``, the default). Zoekt ranks the merged answer as one; when it
reports the answer capped, every member is told (``capped``, with zoekt's reason).
A failure reaches every member, each through its own resilience layer (retries,
breaker); a member that is cancelled leaves the others waiting, and when every
member has gone the request is cancelled.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2

from gateway.backend import call_slot
from gateway.errors import BackendError
from gateway.models import BackendResult, SearchQuery

if TYPE_CHECKING:
    from adapters.zoekt.backend import ZoektBackend

__all__ = ["MAX_MEMBERS", "Coalescer", "RepoRouter"]

#: Namespaces in one request at most (the answer holds a page of files for each).
MAX_MEMBERS = 64


class RepoRouter:
    """Which members a repository belongs to: an RE2 set of their ``repos`` regexes."""

    def __init__(self, regexes: list[str]) -> None:
        self._everyone = [i for i, regex in enumerate(regexes) if not regex]
        self._set: re2.Set | None = None
        if len(self._everyone) < len(regexes):
            self._set = re2.Set.SearchSet()
            self._index: list[int] = []
            for i, regex in enumerate(regexes):
                if regex:
                    self._set.Add(regex)
                    self._index.append(i)
            self._set.Compile()
        self._seen: dict[str, list[int]] = {}

    def __call__(self, repository: str) -> list[int]:
        """Indices of the members that own ``repository``, in member order."""
        owners = self._seen.get(repository)
        if owners is None:
            matched = self._set.Match(repository) if self._set is not None else None
            owners = sorted([*self._everyone, *(self._index[i] for i in matched or ())])
            self._seen[repository] = owners
        return owners


@dataclass(slots=True)
class _Member:
    repos: str
    future: asyncio.Future[BackendResult]
    counted: bool = False  # its batch has counted it settled


@dataclass(slots=True)
class _Batch:
    """Members of one request; the backend whose session sends it; the task sending it."""

    backend: ZoektBackend
    query: SearchQuery
    replica: int
    members: list[_Member] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    waiting: int = 0  # members whose future is not done
    cancelled: bool = False  # one member at least was cancelled

    def settled(self, member: _Member, future: asyncio.Future[BackendResult]) -> None:
        """A member answered or went; once all have, one at least cancelled, stop the request."""
        member.counted = True
        self.waiting -= 1
        self.cancelled = self.cancelled or future.cancelled()
        if not self.waiting and self.cancelled and self.task is not None:
            self.task.cancel()


class Coalescer:
    """Gathers the searches one turn of the loop sends to one zoekt endpoint into one request."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, _Batch] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def search(self, backend: ZoektBackend, query: SearchQuery, replica: int) -> BackendResult:
        settings = backend.settings
        loop = asyncio.get_running_loop()
        key = (loop, settings.endpoints[replica].rstrip("/"), query, settings.token_env, settings.max_bytes)
        batch = self._pending.get(key)
        if batch is None or len(batch.members) >= MAX_MEMBERS:
            batch = self._pending[key] = _Batch(backend, query, replica)
            loop.call_soon(loop.call_soon, self._launch, key, batch)  # two turns: let the fan-out join
        member = _Member(settings.repos, loop.create_future())
        batch.members.append(member)
        try:
            return await member.future
        finally:
            # The last member to leave waits for the request to end: no task outlives its callers.
            task = batch.task
            if task is not None and batch.waiting - (not member.counted) <= 0:
                await asyncio.wait({task})

    def _launch(self, key: Hashable, batch: _Batch) -> None:
        if self._pending.get(key) is batch:
            del self._pending[key]
        task = asyncio.get_running_loop().create_task(self._send(batch))
        batch.task = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        for member in batch.members:
            if member.future.done():  # gone before the request started
                batch.cancelled = batch.cancelled or member.future.cancelled()
            else:
                batch.waiting += 1
                member.future.add_done_callback(functools.partial(batch.settled, member))
        if not batch.waiting:
            task.cancel()

    @staticmethod
    async def _send(batch: _Batch) -> None:
        async with call_slot():  # one place in the fan-out's gate for the whole request
            await Coalescer._send_now(batch)

    @staticmethod
    async def _send_now(batch: _Batch) -> None:
        members = [m for m in batch.members if not m.future.done()]
        if not members:
            return
        try:
            results = await batch.backend.search_for(batch.query, batch.replica, [m.repos for m in members])
        except BaseException as exc:  # every member hears it; a cancellation is re-raised
            for m in members:
                if not m.future.done():
                    m.future.set_exception(exc if isinstance(exc, Exception) else BackendError("search cancelled"))
            if not isinstance(exc, Exception):
                raise
            return
        for m, result in zip(members, results, strict=True):
            if not m.future.done():
                m.future.set_result(result)
