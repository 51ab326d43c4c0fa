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
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from gateway.models import BackendResult, Mode, SearchQuery

__all__ = ["AsyncBackend", "BackendSettings", "FileTree"]


class BackendSettings(BaseModel):
    """Base of every adapter's settings model: frozen, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


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
