"""AsyncBackend: the one contract every adapter implements. Read this file to write one.

An adapter is a subclass of :class:`AsyncBackend` registered by kind in
:mod:`gateway.registry`. What it **must** provide:

* ``kind``: its name in ``[[namespaces]] backend = "..."``;
* ``Settings``: its pydantic model (a :class:`BackendSettings`) of the keys of its
  ``[[namespaces]]`` table besides ``name``, ``backend``, ``weight`` and ``timeout_ms``;
* :meth:`AsyncBackend.search`: one coroutine answering a :class:`~gateway.models.SearchQuery`
  with a :class:`~gateway.models.BackendResult`, files in the backend's rank order. It
  raises only :class:`gateway.errors.BackendError` subclasses, having translated what its
  transport raised at its edge. Whatever it has found when ``query.deadline`` comes, it
  returns then, as ``status="timeout"``.

What it **may** declare (class attributes, or set in ``__init__`` when they depend on
the settings); the rest of the gateway reads them here and nowhere else:

========================  =============================================================
``modes``                 the search modes it can do (default exact and regex); the
                          fan-out answers any other mode ``unsupported`` without asking
``policy``                how the resilience layer protects it: retries, a breaker per
                          replica, hedging (:mod:`gateway.resilience.policy`; ``LOCAL``
                          for a local process, ``UNHEDGED`` for a rate-limited API)
:meth:`replicas`,         several equivalent servers, asked one by one: the resilience
:meth:`search_replica`    layer spreads, fails over and hedges across them
``max_hits``              the most hits one answer may hand the gateway; the resilience
``caps_hits``             layer keeps whole files up to it (``capped``), unless the
                          adapter says it caps its answers itself
``token_env``             the environment variable holding its secret: its value is
                          redacted from every log line and error
``shares_calls``          its searches in one fan-out are merged into calls shared by
                          several namespaces, each inside :func:`call_slot`
                          (:mod:`adapters._coalesce`)
``serves_children``,      it serves namespaces of its own, ``<name>/<sub>`` (a peer),
:meth:`children`          and lists them as that backend declares them
``repository_paths``      it serves many repositories: each ``file_path`` is
                          ``<repository>/<path>`` (:attr:`FileMatch.repository
                          <gateway.models.FileMatch.repository>` set), and ``paths`` and
                          ``languages`` match the path inside the repository (SPEC §5)
``scan_modes``            the modes in which a search is a local scan (a process on
                          this machine): such scans take slots of ``[server]
                          max_scans``, inside :func:`~gateway.resilience.admission.scan_slot`
:meth:`tree`              read access to its files (a local checkout)
``reads``,                read access to remote files: :meth:`read_file` (the whole
:meth:`read_file`,        file, bounded by :data:`gateway.files.MAX_READ_BYTES`); with
``lists``,                ``lists`` also :meth:`stat_file` and :meth:`list_files`. Any
:meth:`stat_file`,        path it will not show is :class:`gateway.errors.NotFound`;
:meth:`list_files`        where it cannot read, :class:`gateway.errors.Unsupported` says
                          so (naming the file's URL when the backend gives one)
:meth:`declared_modes`    the modes its namespaces can search in as the remote declares
                          them (``/v1/namespaces``): its ``modes`` unless it knows better
:meth:`health`            ``ok``, ``degraded`` or ``unavailable`` (the resilience
                          layer's word, from its breakers)
:meth:`aclose`            release sessions and processes
========================  =============================================================

HTTP adapters start from the template in :mod:`adapters._http`;
:class:`gateway.testing.MockBackend` is the test double.
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from gateway.dedup.identity import Identities
from gateway.errors import Unsupported
from gateway.models import (
    DEFAULT_MAX_HITS,
    REPOSITORY_KINDS,
    BackendResult,
    ChildNamespace,
    Mode,
    RemoteFile,
    SearchQuery,
)
from gateway.narrowing import Narrower
from gateway.resilience.policy import Policy
from gateway.scope import call_slot

__all__ = [
    "DEFAULT_MAX_HITS",
    "REPOSITORY_KINDS",
    "AsyncBackend",
    "BackendSettings",
    "FileTree",
    "Health",
    "call_slot",
]

#: A namespace's health as ``/v1/namespaces`` reports it.
Health = Literal["ok", "degraded", "unavailable"]


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

    kind: str
    Settings: ClassVar[type[BackendSettings]]
    modes: frozenset[Mode] = frozenset({"exact", "regex"})
    policy: Policy = Policy()
    max_hits: int = DEFAULT_MAX_HITS
    #: Whether its answers never hold more than ``max_hits`` hits (it caps them as it reads).
    caps_hits: bool = False
    token_env: str | None = None
    shares_calls: bool = False
    serves_children: bool = False
    repository_paths: bool = False
    reads: bool = False
    lists: bool = False
    #: The modes in which its searches are local scans, bounded by ``[server] max_scans``.
    scan_modes: frozenset[Mode] = frozenset()

    def __init__(self, name: str, settings: S) -> None:
        self.name = name
        self.settings = settings

    @abc.abstractmethod
    async def search(self, query: SearchQuery) -> BackendResult:
        """Search this namespace; files in the backend's rank order, best first."""

    def replicas(self) -> int:
        """How many equivalent replicas serve this namespace (each asked by :meth:`search_replica`)."""
        return 1

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        """Search on replica ``replica`` (0 <= replica < :meth:`replicas`)."""
        return await self.search(query)

    def tree(self) -> FileTree | None:
        """Read access to the files, when the backend has them locally."""
        return None

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """The whole of a remote file (``path`` as this backend names it) by ``deadline``."""
        raise Unsupported(f"{self.kind} namespaces cannot be read")

    async def stat_file(self, path: str, deadline: float) -> dict[str, Any]:
        """``{"type": "file"|"dir", "size", "mtime"}`` of a remote path (a backend that ``lists``)."""
        raise Unsupported(f"{self.kind} namespaces cannot be listed")

    async def list_files(self, path: str, deadline: float) -> list[dict[str, Any]]:
        """The entries ``{"name", "type", "size"}`` of a remote directory, sorted by name."""
        raise Unsupported(f"{self.kind} namespaces cannot be listed")

    async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
        """The namespaces it serves of its own (``serves_children``), as it declares them."""
        return ()

    def declared_modes(self) -> frozenset[str]:
        """The modes its namespaces can search in, as the remote declares them (the adapter's
        ``modes`` unless it knows better: a peer's children, an AFI manifest)."""
        return frozenset(self.modes)

    def health(self) -> Health:
        """Whether it can be asked now (an adapter alone does not know: ``ok``)."""
        return "ok"

    def start_serving(self, shared: dict[type, Any]) -> None:
        """Its process is a long-lived server, not a one-shot search: it may keep ready what
        the next search needs (the ripgrep backend keeps rg started). ``shared``: one dict per
        service, where backends of one kind keep what they share (by its type)."""

    def use_index(self, narrower: Narrower) -> None:
        """A local backend may scan only the files the content index names (:mod:`gateway.narrowing`);
        others ignore it."""

    def indexed_root(self) -> str | None:
        """The checkout a local backend searches through the content index (absolute; None: none), which
        the service may rule out before searching it (:meth:`gateway.index.content.narrow.ContentIndex.ruled_out`)."""
        return None

    def identities(self) -> Identities | None:
        """A local backend's content identities by path (:mod:`gateway.dedup.identity`), for an answer
        made elsewhere over its files (the intent index's); None: it has none, or sets them itself."""
        return None

    async def aclose(self) -> None:
        """Release what the backend holds (sessions, processes)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
