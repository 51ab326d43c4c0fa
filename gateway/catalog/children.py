"""The namespaces peers serve of their own, as namespaces of ours: ``<peer>/<remote>``.

A backend that ``serves_children`` (a peer gateway) lists them with
:meth:`~gateway.backend.AsyncBackend.children`. :class:`ChildDirectory` keeps each
parent's list, learned when a caller needs it (a pattern to match, a caller that may
see only some of them, a listing) and asked again once it is :data:`TTL_S` old; one
refresh at a time per parent, bounded by :data:`REFRESH_S`. A parent that cannot be
asked keeps what was known (``None`` when nothing ever was: patterns under it are
then passed on for the peer to judge).

:class:`ChildBackend` searches one child alone: the route of a child whose parent the
caller may not see whole (a token allowed ``peer/flask`` but not ``peer``), so neither
the parent's name nor its other children appear in the answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec.structs import replace

from gateway.backend import AsyncBackend
from gateway.errors import BackendError
from gateway.log import get_logger
from gateway.models import BackendResult, ChildNamespace, SearchQuery

__all__ = ["MIN_AGE_S", "REFRESH_S", "SEARCH_SHARE", "TTL_S", "ChildBackend", "ChildDirectory"]

#: A parent's children are asked again once their list is this old.
TTL_S = 30.0
#: A pattern that matches no known child asks again once the list is this old.
MIN_AGE_S = 2.0
#: The longest a caller waits for a parent's list (a search, a quarter of its deadline at most).
REFRESH_S = 2.0
#: The share of a search's deadline it may wait for its peers' children to be listed.
SEARCH_SHARE = 0.25

log = get_logger("fedsearch.children")


class ChildDirectory:
    """Each parent's children, as last listed, and when."""

    def __init__(self, parents: Mapping[str, AsyncBackend[Any]]) -> None:
        self._parents = dict(parents)
        self._known: dict[str, tuple[float, tuple[ChildNamespace, ...]]] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}

    @property
    def parents(self) -> list[str]:
        return list(self._parents)

    def known(self, parent: str) -> tuple[ChildNamespace, ...] | None:
        """The children of ``parent`` as last listed; None if they never were."""
        found = self._known.get(parent)
        return found[1] if found is not None else None

    def age(self, parent: str) -> float:
        found = self._known.get(parent)
        return float("inf") if found is None else time.monotonic() - found[0]

    async def refresh(
        self, parents: Iterable[str] | None = None, older_than: float = TTL_S, within: float = REFRESH_S
    ) -> bool:
        """List again the children of ``parents`` (all) whose list is older than ``older_than``,
        waiting ``within`` seconds at most (a list still coming is kept when it comes); whether
        any list changed."""
        due = [p for p in (self._parents if parents is None else parents) if p in self._parents]
        due = [p for p in due if self.age(p) > older_than]
        if not due:
            return False
        before = {p: self.known(p) for p in due}
        tasks = [self._inflight.get(p) or self._start(p) for p in due]
        await asyncio.wait(tasks, timeout=max(0.0, min(within, REFRESH_S)))
        return any(self.known(p) != before[p] for p in due)

    async def aclose(self) -> None:
        """Stop the listings still running."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    def _start(self, parent: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._list(parent), name=f"children:{parent}")
        self._inflight[parent] = task
        task.add_done_callback(lambda _: self._inflight.pop(parent, None))
        return task

    async def _list(self, parent: str) -> None:
        try:
            children = await self._parents[parent].children(time.monotonic() + REFRESH_S)
        except BackendError as exc:
            log.info("children_unlisted", namespace=parent, error=exc.reason)
            return
        except Exception as exc:  # a bug in one adapter costs only its children's listing
            log.error("children_crashed", namespace=parent, error=type(exc).__name__)
            return
        self._known[parent] = (time.monotonic(), tuple(sorted(children, key=lambda c: c.name)))


class ChildBackend(AsyncBackend[Any]):
    """One child of ``parent`` searched alone, its answer as the child's own (its status, its files)."""

    def __init__(self, parent: AsyncBackend[Any], child: ChildNamespace) -> None:
        super().__init__(f"{parent.name}/{child.name}", parent.settings)
        self.parent = parent
        self.child = child
        self.kind = child.backend
        self.modes = parent.modes
        self.policy = parent.policy

    def health(self) -> Any:
        return self.parent.health()

    async def search(self, query: SearchQuery) -> BackendResult:
        result = await self.parent.search(replace(query, sub_namespaces=(self.child.name,)))
        name = self.child.name
        files = [replace(f, namespace="") for f in result.files if f.namespace == name]
        said = next((c for c in result.children if c.name == name), None)
        if said is not None and said.status != "ok":
            return BackendResult(files=files, status=said.status, reason=said.error)
        return BackendResult(files=files, status=result.status, reason=result.reason)
