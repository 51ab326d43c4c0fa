"""Semantic mode for local namespaces: their backend, with the intent index answering that mode.

:class:`SemanticBackend` wraps a local namespace's backend (``ripgrep``): it is the same
backend to everyone (kind, settings, modes plus ``semantic``, tree, health), exact and
regex searches go straight to it, and a semantic search is answered by
:class:`IntentSearch` from the intent index, in a thread (the event loop never waits
on a matrix product or the database).

Until a checkout's intent index is built, a search says so: with some of it embedded,
the answer is what that part holds, ``capped``, its reason "the intent index is still
building: N of M files"; with none, the namespace is ``unavailable`` with the same words
and a retry delay. A process with no background builder (the CLI) first catches up:
it starts a one-pass builder for its local namespaces in the background
(:func:`~gateway.index.builder.start_once`) and waits until the namespace is built, no
builder is at work any more, or shortly before the deadline; a builder not done by
then goes on alone, at low priority, and the next search finds more.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from gateway.backend import AsyncBackend, FileTree, Health
from gateway.dedup.identity import Identities
from gateway.errors import BackendError, BackendUnavailable
from gateway.index.builder import Builder, BuildStats, lock_held, start_once
from gateway.index.intents import intents_id
from gateway.index.semantic import SYNC_S, Intents
from gateway.index.store import Progress, Store
from gateway.index.vocabulary import Vocabulary
from gateway.models import BackendResult, Mode, SearchQuery
from gateway.narrowing import Narrower
from gateway.query.globs import PathFilter

if TYPE_CHECKING:
    from gateway.index.resolve import DeclarationIndex

__all__ = ["RETRY_AFTER_S", "IntentSearch", "SemanticBackend", "building", "with_semantic"]

#: The retry delay of a namespace whose intent index has nothing in it yet (seconds).
RETRY_AFTER_S = 5.0
#: Time kept back from the deadline for the search itself when catching up: this share, at least the floor.
KEEP_SHARE = 0.3
KEEP_FLOOR_S = 0.5
#: How often a search waiting for the index looks again (seconds).
WAIT_STEP_S = 0.05


def building(progress: Progress) -> str:
    """The words for an intent index that is not built yet."""
    if progress.listed is None:
        return "the intent index is still building: no file of it is listed yet"
    return f"the intent index is still building: {min(progress.done, progress.listed):,} of {progress.listed:,} files"


class IntentSearch:
    """Semantic searches of one service's local namespaces (one at a time: each takes milliseconds)."""

    def __init__(self, index: DeclarationIndex) -> None:
        self.index = index
        self._intents: dict[str, Intents] = {}
        self._vocabulary = Vocabulary()  # the code's words, every checkout's (gateway.index.vocabulary)
        self._progress: dict[str, tuple[float, int, Progress]] = {}  # root -> (when, data_version, progress)
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._started: asyncio.Future[bool] | None = None  # a one-pass builder started by catch_up

    def store(self) -> Store:
        """A connection of its own (the index's, when that one is in memory)."""
        if self._store is None:
            shared = self.index.store()
            self._store = shared if shared.path is None else Store.open(self.index.directory, busy_s=0.05)
        return self._store

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None and store is not self.index._store:
            store.close()

    def progress(self, namespace: str) -> Progress:
        """How far the namespace's intent index is (read again when the database changed, at most every SYNC_S)."""
        root = self.index.sources[namespace].root
        store = self.store()
        now = time.monotonic()
        seen = self._progress.get(root)
        if seen is not None and (seen[2].built or now - seen[0] < SYNC_S):
            return seen[2]
        version = store.data_version()
        if seen is not None and seen[1] == version:
            self._progress[root] = (now, version, seen[2])
            return seen[2]
        progress = store.progress(root) if store.intents_of() == intents_id() else Progress(False, 0, None)
        self._progress[root] = (now, version, progress)
        return progress

    def _built(self, namespace: str, fresh: bool = False) -> bool:
        """Whether the namespace's intent index is built (``fresh``: read now, not remembered)."""
        with self._lock:
            if fresh:
                self._progress.pop(self.index.sources[namespace].root, None)
            try:
                return self.progress(namespace).built
            except sqlite3.Error:
                return False

    def answer(self, namespace: str, query: SearchQuery) -> BackendResult:
        """The namespace's semantic answer (raises BackendUnavailable while nothing of it is embedded)."""
        from gateway.index.model import model

        with self._lock:
            try:
                return self._answer(namespace, query, model())
            except (sqlite3.OperationalError, sqlite3.ProgrammingError) as exc:  # busy, or closed under it
                raise BackendError(f"the index database is busy: {exc}"[:200]) from None
            except sqlite3.DatabaseError as exc:
                self._store = None
                self.index._fault(exc)
                raise BackendError(f"the index database failed: {exc}"[:200]) from None

    def _answer(self, namespace: str, query: SearchQuery, encoder: Any) -> BackendResult:
        root = self.index.sources[namespace].root
        store = self.store()
        progress = self.progress(namespace)
        intents = self._intents.get(root)
        if intents is None:
            intents = self._intents[root] = Intents(root)
        if store.intents_of() == intents_id():
            intents.sync(store, encoder.dim)
            self._vocabulary.sync(store, encoder.dim)
        if not len(intents) and not progress.built:
            raise BackendUnavailable(building(progress), retry_after=RETRY_AFTER_S)
        accept = PathFilter.build(query.paths, query.languages)
        files = intents.search(
            store,
            query.text,
            lambda: encoder.embed_one(query.text),  # the question's vector, made once a search has candidates
            query.max_files,
            None if accept.is_open else accept,
            self._vocabulary,
            encoder.embed,
        )
        if progress.built:
            return BackendResult(files=files)
        return BackendResult(files=files, status="capped", reason=building(progress))

    async def catch_up(self, namespace: str, deadline: float) -> None:
        """Bring the namespace's intent index up to date before searching, where no builder does (the CLI)."""
        index = self.index
        if index.building() or await asyncio.to_thread(self._built, namespace):
            return
        left = deadline - time.monotonic()
        until = deadline - max(KEEP_FLOOR_S, KEEP_SHARE * left)
        if until <= time.monotonic():
            return
        source = index.sources[namespace]
        store = index.store()
        from gateway.index.model import model

        loading = asyncio.ensure_future(asyncio.to_thread(model))  # meanwhile: the search needs it next
        if store.path is None or index.directory is None:  # in memory: only this process can build it
            builder = Builder(store, [source], workers=1)
            builder.should_stop = lambda: time.monotonic() >= until
            await asyncio.to_thread(builder.refresh_one, source, BuildStats())
        else:
            directory = index.directory
            if self._started is None:  # one builder for every local namespace, started by the first to ask
                sources = list(index.sources.values())
                self._started = asyncio.ensure_future(
                    asyncio.to_thread(
                        start_once,
                        directory,
                        sources,
                        index.build_workers,
                        index.content,
                        max_bytes=index.max_bytes,
                        keep_days=index.keep_days,
                    )
                )
            await asyncio.shield(self._started)
            while time.monotonic() < until:
                if await asyncio.to_thread(self._built, namespace, True):
                    break
                if not await asyncio.to_thread(lock_held, directory):
                    break  # no builder at work (it is done, or could not start)
                await asyncio.sleep(WAIT_STEP_S)
        self._progress.pop(source.root, None)
        intents = self._intents.get(source.root)
        if intents is not None:
            intents.changed()
        with contextlib.suppress(Exception):  # a model that cannot load says so in the answer
            await loading


class SemanticBackend(AsyncBackend[Any]):
    """A local namespace's backend that also searches by meaning, from the intent index."""

    def __init__(self, inner: AsyncBackend[Any], search: IntentSearch) -> None:
        super().__init__(inner.name, inner.settings)
        self.inner = inner
        self.intents = search
        self.kind = inner.kind
        self.modes: frozenset[Mode] = inner.modes | {"semantic"}
        self.policy = inner.policy
        self.max_hits = inner.max_hits
        self.caps_hits = inner.caps_hits
        self.token_env = inner.token_env
        self.shares_calls = inner.shares_calls
        self.serves_children = inner.serves_children
        self.scan_modes = inner.scan_modes  # by meaning it reads the index: no scan

    async def search(self, query: SearchQuery) -> BackendResult:
        if query.mode != "semantic":
            return await self.inner.search(query)
        await self.intents.catch_up(self.name, query.deadline)
        result = await asyncio.to_thread(self.intents.answer, self.name, query)
        identities = self.inner.identities()  # the same files as the checkout's: copies merge by meaning too
        return replace(result, identities=identities) if identities is not None and result.files else result

    def replicas(self) -> int:
        return self.inner.replicas()

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        if query.mode == "semantic":
            return await self.search(query)
        return await self.inner.search_replica(query, replica)

    def tree(self) -> FileTree | None:
        return self.inner.tree()

    def identities(self) -> Identities | None:
        return self.inner.identities()

    def health(self) -> Health:
        return self.inner.health()

    def start_serving(self, shared: dict[type, Any]) -> None:
        self.inner.start_serving(shared)

    def use_index(self, narrower: Narrower) -> None:
        self.inner.use_index(narrower)

    async def aclose(self) -> None:
        await self.inner.aclose()


def with_semantic(index: DeclarationIndex, backend: AsyncBackend[Any]) -> AsyncBackend[Any]:
    """A local namespace's backend, searching by meaning from ``index``'s intent index too."""
    search = index.semantic
    if not isinstance(search, IntentSearch):
        search = index.semantic = IntentSearch(index)
    if isinstance(backend, SemanticBackend):  # kept across a reload: it searches this index now
        backend.intents = search
        return backend
    return SemanticBackend(backend, search)
