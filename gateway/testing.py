"""Test helpers for fedsearch and adapter authors: ``MockBackend(handler)``.

::

    async def handler(query: SearchQuery) -> BackendResult:
        return BackendResult(files=(FileMatch(path="a.py", hits=(Hit(line=1, text="x"),)),))

    backend = MockBackend(handler, name="demo")
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.backend import AsyncBackend, BackendSettings
from gateway.models import BackendResult, Mode, SearchQuery

__all__ = ["MockBackend", "MockSettings"]

Handler = Callable[[SearchQuery], Awaitable[BackendResult]]


class MockSettings(BackendSettings):
    pass


class MockBackend(AsyncBackend[MockSettings]):
    """A backend whose answer is whatever ``handler`` returns (or raises)."""

    kind = "mock"
    Settings = MockSettings
    modes: frozenset[Mode] = frozenset({"exact", "regex", "semantic"})

    def __init__(
        self,
        handler: Handler,
        name: str = "mock",
        modes: frozenset[Mode] | None = None,
        max_hits: int | None = None,
    ) -> None:
        super().__init__(name, MockSettings())
        self.handler = handler
        self.calls: list[SearchQuery] = []
        self.closed = False
        if modes is not None:
            self.modes = modes
        if max_hits is not None:
            self.max_hits = max_hits

    async def search(self, query: SearchQuery) -> BackendResult:
        self.calls.append(query)
        return await self.handler(query)

    async def aclose(self) -> None:
        self.closed = True
