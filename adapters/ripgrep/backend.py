"""The ``ripgrep`` backend: a local directory searched by the ``rg`` binary.

Files are selected exactly as ``rg`` does by default: ignore files honoured, hidden
and binary files skipped, symlinks not followed. The request's ``paths`` mean what rg's
``-g`` means (:mod:`gateway.query.globs`), but rg is given only the globs that cannot change
what :class:`gateway.query.globs.PathFilter` decides: the settings' ``exclude`` and the
request's ``!`` globs that no later include overrides (those after its last include), as
``-g '!glob'``, which only remove files the filter removes too. rg skips them with the same
meaning, relative to the folder it runs in: a lone namespace with such a glob holding a ``/``
runs from its root, a batch of roots gets only the globs that name a file or folder alone
(:mod:`adapters.ripgrep.batch`). Include globs and languages are *not* passed to rg:
``-g glob`` whitelists a path over every ignore rule (``-g 'src/**'`` searches gitignored and
hidden files under ``src/``), ``-t``/``--type-add`` whitelists hidden files, and an exclude
followed by an include would need the include too. Everything rg prints is then decided by
PathFilter (every glob in order, the settings' excludes last), so the answer is rg's ``-g``
answer over the files rg searches by default, and never holds a file rg would have skipped.
Files named to rg explicitly (the content index's, :mod:`gateway.narrowing`), which rg's
``-g`` does not judge, pass PathFilter before rg is given them.

rg runs multi-threaded; files are ordered here by ``(-min(hits, 50), path)``.
Output is read line by line until the deadline or a cap, and rg is always killed
and reaped. Namespaces searched for the same thing at the same time share one rg
process (:mod:`adapters.ripgrep.batch`).
"""

from __future__ import annotations

import os
from typing import Any

from msgspec.structs import replace
from pydantic import Field, field_validator

from adapters._coalesce import Call, share
from adapters.ripgrep.batch import Part, RgCall
from adapters.ripgrep.identity import GitIdentities, identities_for, warm_later
from adapters.ripgrep.localfs import LocalTree
from adapters.ripgrep.output import (
    DEFAULT_MAX_FILES,
    RANK_HIT_CAP,
    build_argv,
    collector_for,
    find_rg,
)
from adapters.ripgrep.warm import WarmPool
from gateway.backend import DEFAULT_MAX_HITS, AsyncBackend, BackendSettings
from gateway.errors import BackendError
from gateway.models import BackendResult, Mode, SearchQuery
from gateway.narrowing import Narrower
from gateway.query.globs import validate_glob
from gateway.resilience.policy import LOCAL

__all__ = [
    "RANK_HIT_CAP",
    "RipgrepBackend",
    "RipgrepSettings",
    "build_argv",
    "find_rg",
]


class RipgrepSettings(BackendSettings):
    """``[[namespaces]]`` keys of a ``ripgrep`` namespace."""

    root: str
    exclude: list[str] = Field(default_factory=list)
    max_files: int = Field(default=DEFAULT_MAX_FILES, ge=1)
    max_hits: int = Field(default=DEFAULT_MAX_HITS, ge=1)

    @field_validator("root")
    @classmethod
    def _root_is_a_directory(cls, value: str) -> str:
        if value.startswith("~"):
            value = os.path.expanduser(value)  # as a shell would: root = "~/src"
        if not value or "\x00" in value:
            raise ValueError("root must be an existing directory")
        if not os.path.isdir(value):
            raise ValueError(f"root must be an existing directory; {value!r} is not one")
        return value

    @field_validator("exclude")
    @classmethod
    def _valid_globs(cls, value: list[str]) -> list[str]:
        globs = [glob.removeprefix("!") for glob in value]
        for i, glob in enumerate(globs):
            try:
                validate_glob(glob)
            except ValueError as exc:
                raise ValueError(f"exclude[{i}]: {exc}: {glob!r}") from None
        return globs


class RipgrepBackend(AsyncBackend[RipgrepSettings]):
    """Searches a local directory with ``rg``; can also read its files (:meth:`tree`)."""

    kind = "ripgrep"
    Settings = RipgrepSettings
    modes: frozenset[Mode] = frozenset({"exact", "regex"})
    policy = LOCAL
    shares_calls = True  # one rg for the batch, inside call_slot()
    scan_modes: frozenset[Mode] = frozenset({"exact", "regex"})  # each rg takes a slot of [server] max_scans
    caps_hits = True  # its Collector stops at max_hits

    def __init__(self, name: str, settings: RipgrepSettings) -> None:
        super().__init__(name, settings)
        self.max_hits = settings.max_hits
        self._tree = LocalTree(settings.root)
        self._root = os.path.abspath(settings.root)
        self._warm: WarmPool | None = None  # a server's waiting rg, shared by its ripgrep namespaces
        self.narrower: Narrower | None = None  # the content index, when the service has one
        #: Its files' content identities (git blob ids), shared with every namespace over the same root.
        self._identities = identities_for(self._root)

    def tree(self) -> LocalTree:
        return self._tree

    def start_serving(self, shared: dict[type, Any]) -> None:
        """A server: each search's rg is started before it (:mod:`adapters.ripgrep.warm`), and the root's
        content identities loaded and checked now, in a thread (:mod:`adapters.ripgrep.identity`)."""
        pool = shared.get(WarmPool)
        if not isinstance(pool, WarmPool):
            pool = shared[WarmPool] = WarmPool()
        self._warm = pool
        warm_later(self._identities)

    def use_index(self, narrower: Narrower) -> None:
        """Scan only the files the content index names (:mod:`gateway.narrowing`)."""
        self.narrower = narrower

    def indexed_root(self) -> str | None:
        return self._root if self.narrower is not None else None

    async def aclose(self) -> None:
        if self._warm is not None:
            await self._warm.aclose()  # the first namespace to close stops them all

    async def search(self, query: SearchQuery) -> BackendResult:
        rg = find_rg()
        if rg is None:
            raise BackendError("the rg binary was not found (install the 'ripgrep' package)")
        if query.remaining() <= 0:
            return BackendResult(status="timeout", reason="the deadline passed before rg started")
        collector = collector_for(query, self.settings.exclude, self.settings.max_files, self.settings.max_hits)
        rg_call = RgCall(rg, query, self.settings.exclude, self._warm, self.narrower)
        key = (rg, query, tuple(self.settings.exclude))  # what rg would see alone: the same, so one rg
        call = Call(key, rg_call.send, query.deadline, rg_call.hand_back)
        result = await share(call, Part(self._root, collector, self.name))
        return replace(result, identities=self._identities) if result.files else result

    def identities(self) -> GitIdentities:
        return self._identities
