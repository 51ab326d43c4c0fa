"""AsyncBackend: the one contract every adapter implements.

An adapter subclasses :class:`AsyncBackend`, declares its ``kind``, its pydantic
``Settings`` model (the keys of its ``[[namespaces]]`` table besides ``name``,
``backend``, ``weight`` and ``timeout_ms``) and the ``modes`` it can search in,
and implements one coroutine, :meth:`search`. It raises only
:class:`gateway.errors.BackendError` subclasses, having translated whatever its
transport raised at its edge.

A backend that can read its files (a local checkout) also returns a
:class:`FileTree` from :meth:`tree`; the others return ``None`` and reading
through them is ``unsupported``.

A fan-out keeps at most ``server.concurrency`` backend calls in flight. A backend
whose searches in one fan-out are merged into calls shared by many namespaces (one
``rg`` for every local checkout, one request per Zoekt server) says so with
:attr:`AsyncBackend.shares_calls`: its namespaces then take no place each, and each
shared call takes one, inside :func:`call_slot`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from gateway.models import BackendResult, Mode, SearchQuery

__all__ = ["CALL_GATE", "AsyncBackend", "BackendSettings", "FileTree", "call_slot"]

#: The current fan-out's gate (set by the fan-out for the namespaces it starts).
CALL_GATE: ContextVar[asyncio.Semaphore | None] = ContextVar("fedsearch_call_gate", default=None)


@contextlib.asynccontextmanager
async def call_slot() -> AsyncIterator[None]:
    """Hold a place in the current fan-out's gate for one call shared by several namespaces."""
    gate = CALL_GATE.get()
    if gate is None:
        yield
        return
    async with gate:
        yield


class BackendSettings(BaseModel):
    """Base of every adapter's settings model: frozen, unknown keys rejected; built when first
    validated (a configured namespace), not when its adapter is imported."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class FileTree(Protocol):
    """Read access to a namespace's files by relative path (paths never leave the root).

    Synchronous: async callers run it in a thread. A path it will not show raises
    :class:`gateway.errors.NotFound`, exactly like one that does not exist.
    """

    def read_text(self, path: str) -> str: ...

    def read_lines(
        self, path: str, start_line: int = 1, end_line: int | None = None, max_lines: int = 2000
    ) -> tuple[list[str], int]: ...

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    def stat(self, path: str) -> dict[str, Any]: ...

    def list_dir(self, path: str) -> list[dict[str, Any]]: ...


S = TypeVar("S", bound=BackendSettings)


class AsyncBackend(abc.ABC, Generic[S]):
    """One namespace's backend. Use as an async context manager or call :meth:`aclose`."""

    kind: ClassVar[str]
    Settings: ClassVar[type[BackendSettings]]
    modes: frozenset[Mode] = frozenset({"exact", "regex"})
    #: Whether it serves several namespaces of its own (``<name>/<sub>``), like a peer gateway.
    serves_children: ClassVar[bool] = False
    #: Whether its searches share calls with other namespaces', each call inside
    #: :func:`call_slot` (then the fan-out does not hold a place for each namespace).
    shares_calls: bool = False
    #: Whether its answers never hold more hits than its settings' ``max_hits`` (it caps
    #: them as it reads): the resilience layer then need not count them again.
    caps_hits: ClassVar[bool] = False

    def __init__(self, name: str, settings: S) -> None:
        self.name = name
        self.settings = settings

    @abc.abstractmethod
    async def search(self, query: SearchQuery) -> BackendResult:
        """Search this namespace; files in the backend's rank order, best first."""

    async def aclose(self) -> None:
        """Release what the backend holds (sessions, processes)."""

    def tree(self) -> FileTree | None:
        """Read access to the files, when the backend has them locally."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
