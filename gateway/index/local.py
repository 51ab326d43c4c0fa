"""Semantic mode for local namespaces: their backend, with the intent index answering that mode.

:class:`SemanticBackend` wraps a local namespace's backend (``ripgrep``): it is the same
backend to everyone (kind, settings, modes plus ``semantic``, tree, health), exact and
regex searches go straight to it, and a semantic search is answered by
:class:`IntentSearch` from the intent index, in a thread (the event loop never waits
on a matrix product or the database).

Until a checkout's intent index is built, a search answers from what is embedded so far,
``capped``, its reason saying how far the build is ("the intent index is still building:
declarations of 412 of 1,310 files so far", and who builds it when another process does).
With nothing embedded yet it first waits for the first files, within its deadline (less
what the search itself needs); ``unavailable`` is kept for a namespace that truly cannot
answer (its database cannot be read). A process with no background builder (the CLI)
first catches up: it starts a one-pass builder for its local namespaces
(:func:`~gateway.index.background.start_once`) and waits until the namespace is built, no
builder is at work any more, or shortly before the deadline; the builder ends with the CLI,
and the next search finds what it committed.
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
from gateway.errors import BackendError
from gateway.index.background import BuilderProcess, start_once
from gateway.index.builder import Builder, BuildStats
from gateway.index.intents import intents_id
from gateway.index.locks import Holder, Holders, holder
from gateway.index.semantic import SYNC_S, Intents, WordCounts
from gateway.index.store import Progress, Store, damaged
from gateway.index.vocabulary import Vocabulary
from gateway.models import BackendResult, Mode, SearchQuery
from gateway.narrowing import Narrower
from gateway.query.globs import PathFilter
from gateway.tracing import span

if TYPE_CHECKING:
    from gateway.index.resolve import DeclarationIndex

__all__ = ["IntentSearch", "SemanticBackend", "building", "with_semantic"]
#: Time kept back from the deadline for the search itself when catching up: this share, at least the floor.
KEEP_SHARE = 0.3
KEEP_FLOOR_S = 0.5
#: How often a search waiting for the index looks again (seconds).
WAIT_STEP_S = 0.05


def building(progress: Progress, by: Holder | None = None) -> str:
    """The words for an intent index that is not built yet (``by``: another process holding its root)."""
    if progress.listed is None:
        words = "the intent index is still building: its files are not listed yet"
    else:
        done = min(progress.done, progress.listed)
        words = f"the intent index is still building: declarations of {done:,} of {progress.listed:,} files so far"
    if by is not None and not by.mine:
        words += f" ({by.words()})" if by.stuck() else f" (by pid {by.pid})"
    return words


class IntentSearch:
    """Semantic searches of one service's local namespaces (one at a time: each takes milliseconds)."""

    def __init__(self, index: DeclarationIndex) -> None:
        self.index = index
        self._intents: dict[str, Intents] = {}
        self._vocabulary = Vocabulary()  # the code's words, every checkout's (gateway.index.vocabulary)
        self._counts = WordCounts()  # how many declarations hold a word: every checkout's
        self._progress: dict[str, tuple[float, int, Progress]] = {}  # root -> (when, data_version, progress)
        self._lock = threading.Lock()
        self._holders: Holders | None = None  # who builds each root, read at most once a second
        self._store: Store | None = None
        self._builder: BuilderProcess | None = None  # a one-pass builder started by catch_up (the CLI's)

    def store(self) -> Store:
        """A connection of its own (the index's, when that one is in memory)."""
        if self._store is None:
            shared = self.index.store()
            self._store = shared if shared.path is None else Store.open(self.index.directory, busy_s=0.05)
        return self._store

    def close(self) -> None:
        builder, self._builder = self._builder, None
        if builder is not None:  # nothing a search started outlives it
            builder.stop()
        store, self._store = self._store, None
        if store is not None and store is not self.index._store:
            store.close()

    def progress(self, namespace: str) -> Progress:
        """How far the namespace's intent index is (read again when the database changed, at most every SYNC_S)."""
        root = self.index.sources[namespace].root
        store = self.store()
        now = time.monotonic()
        seen = self._progress.get(root)
        if seen is not None and now - seen[0] < SYNC_S:
            return seen[2]
        version = store.data_version()  # first the store follows a file another process replaced (rebuilt)
        if seen is not None and seen[1] == version:
            self._progress[root] = (now, version, seen[2])
            return seen[2]
        progress = store.progress(root) if store.intents_of() == intents_id() else Progress(False, 0, None)
        self._progress[root] = (now, version, progress)
        return progress

    def _built(self, namespace: str, fresh: bool = False, begun: bool = False) -> bool:
        """Whether the namespace's intent index is built (``fresh``: read now, not remembered; ``begun``:
        or has any file done)."""
        with self._lock:
            if fresh:
                self._progress.pop(self.index.sources[namespace].root, None)
            try:
                progress = self.progress(namespace)
            except sqlite3.Error:
                return False
            return progress.built or (begun and progress.done > 0)

    def _holder(self, namespace: str) -> Holder | None:
        """Who builds the namespace's index (named in an answer while it builds), read at most once a second."""
        directory = self.index.directory
        if directory is None:
            return None
        if self._holders is None:
            self._holders = Holders(directory)
        return self._holders.get(self.index.sources[namespace].root)

    def answer(self, namespace: str, query: SearchQuery) -> BackendResult:
        """The namespace's semantic answer (capped, saying how far, while its index is still building)."""
        from gateway.index.model import model

        with self._lock:
            try:
                return self._answer(namespace, query, model())
            except sqlite3.DatabaseError as exc:
                if not damaged(exc):  # busy, or closed under it
                    raise BackendError(f"the index database is busy: {exc}"[:200]) from None
                self._store = None
                self._progress.clear()
                self.index._fault(exc)
                raise BackendError(f"the index database failed: {exc}"[:200]) from None

    def _answer(self, namespace: str, query: SearchQuery, encoder: Any) -> BackendResult:
        root = self.index.sources[namespace].root
        store = self.store()
        progress = self.progress(namespace)
        intents = self._intents.get(root)
        if intents is None:
            intents = self._intents[root] = Intents(root, self._counts)
        if store.intents_of() == intents_id():
            intents.sync(store, encoder.dim)
            self._vocabulary.sync(store, encoder.dim)
        if not len(intents) and not progress.built:
            return BackendResult(files=(), status="capped", reason=building(progress, self._holder(namespace)))
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
        return BackendResult(files=files, status="capped", reason=building(progress, self._holder(namespace)))

    async def catch_up(self, namespace: str, deadline: float) -> None:
        """Wait, within the deadline, for what the namespace's intent index can give: a server for the first
        files its builder (or another process) embeds; a process with no builder (the CLI) starts a one-pass
        builder and waits until the namespace is built or no builder is at work on it."""
        index = self.index
        serving = index.building()  # a background builder keeps the index up to date: it is at work
        if await asyncio.to_thread(self._built, namespace, False, serving):
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
            if not serving and self._builder is None:  # one builder for every local namespace, by the first to ask
                self._builder = start_once(
                    directory,
                    list(index.sources.values()),
                    index.build_workers,
                    index.content,
                    max_bytes=index.max_bytes,
                    keep_days=index.keep_days,
                )
            while time.monotonic() < until:
                if await asyncio.to_thread(self._built, namespace, True, serving):
                    break
                if not serving and not self._at_work(directory, source.root):
                    break  # no builder at work on it (done, or could not start)
                await asyncio.sleep(WAIT_STEP_S)
        self._progress.pop(source.root, None)
        intents = self._intents.get(source.root)
        if intents is not None:
            intents.changed()
        with contextlib.suppress(Exception):  # a model that cannot load says so in the answer
            await loading

    def _at_work(self, directory: str, root: str) -> bool:
        """Whether a builder works on ``root``: this process's one-pass builder runs, or a process holds it."""
        builder = self._builder
        return (builder is not None and builder.running()) or holder(directory, root) is not None


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
        with span("fedsearch.semantic") as current:  # scoring by meaning, from the intent index
            await self.intents.catch_up(self.name, query.deadline)
            result = await asyncio.to_thread(self.intents.answer, self.name, query)
            if current is not None:
                current.set_attribute("fedsearch.files", len(result.files))
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

    def indexed_root(self) -> str | None:
        return self.inner.indexed_root()

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
