"""``ResultCache``: how the service answers a request that may be cached (SPEC §3 Cursors, §5 ``[cache]``).

In order, for one request:

1. **A cursor** names a snapshot (:mod:`gateway.cache.keys` binds it to the request
   but its offset, and to the caller's access). A live one is paged with no fan-out:
   the same order and ``file_count`` as the page that made it. Otherwise the cursor is
   dropped and the request goes on as below, its answer noting why.
2. **A cached answer** to the same request and access, younger than ``answer_ttl_s``,
   is served (``took_ms`` is this request's own time).
3. **Single-flight**: the same request (and access) already being answered is waited
   for, not fanned out again.
4. Otherwise the service's fan-out runs. When its page leaves a next page, the whole
   ranking is stored as a snapshot and the next-page action carries its cursor
   (widening actions never do: they start a snapshot of their own). The answer is
   stored unless a namespace failed in a way a retry may mend (error, timeout,
   unavailable): asking again should ask again.

A live cursor also names its snapshot's facets (:meth:`ResultCache.facets`): counts over
every file the answer ranked, for the page's facets.

A request without a cursor is never answered from a snapshot: a new search sees data
at most ``answer_ttl_s`` old, however long snapshots live. Every step counts an event
(``observers``; ``/metrics`` shows them as ``fedsearch_cache_events_total``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cache.codec import ANSWER, DecodeError, decode_answer, encode_answer
from gateway.cache.flight import SingleFlight
from gateway.cache.keys import answer_key, new_cursor, snapshot_key
from gateway.cache.snapshots import EncodedSnapshots, HeldSnapshots, Snapshots
from gateway.cache.store import MemoryStore, Store
from gateway.config import CacheConfig
from gateway.errors import ConfigError
from gateway.log import get_logger
from gateway.query.request import SearchRequest
from gateway.rank import Ranked, Resolve, Whole, page_of
from gateway.tracing import span
from gateway.view.facets import Facets
from gateway.wire import build_response

__all__ = ["CURSOR_EXPIRED", "CURSOR_UNREADABLE", "EVENTS", "Resolver", "ResultCache", "Run", "open_cache"]

#: The fan-out: a request (no cursor) and whether to rank every file (for a snapshot) -> the ranking.
Run = Callable[[SearchRequest, bool], Awaitable[Whole]]
#: The step that makes a page's files final (declarations), for a ranking begun at a time (ns).
Resolver = Callable[[int], Resolve | None]

CURSOR_EXPIRED = (
    "the snapshot of this cursor had expired (or is unknown here): the query ran again, "
    "so this page may repeat or skip files of earlier pages"
)
CURSOR_UNREADABLE = (
    "the snapshot of this cursor could not be read (the cache is unavailable): the query ran again, "
    "so this page may repeat or skip files of earlier pages"
)
#: Statuses that do not keep an answer out of the cache (asking again would give the same).
_KEEPABLE = frozenset({"ok", "capped", "unsupported"})
#: What the cache counts.
EVENTS = (
    "answer_hit",
    "answer_miss",
    "answer_shared",
    "snapshot_stored",
    "snapshot_served",
    "snapshot_missed",
)

log = get_logger("fedsearch.cache")


def _with_note(answer: dict[str, Any], note: str) -> dict[str, Any]:
    """``answer`` with ``note`` said first in its note (the keys kept in wire order)."""
    said = answer.get("note")
    out: dict[str, Any] = {}
    for key, value in answer.items():
        if key == "namespaces":
            out["note"] = f"{note}; {said}" if said else note
        if key != "note":
            out[key] = value
    return out


class ResultCache:
    """Snapshots, cached answers and single-flight over one :class:`Store` (None: single-flight only)."""

    def __init__(self, config: CacheConfig, store: Store | None) -> None:
        self.config = config
        #: Where snapshots are kept (None: no snapshots, no cursors).
        self.snapshots: Snapshots | None = None
        self.store = store
        self.flight: SingleFlight[dict[str, Any]] = SingleFlight()
        #: Called with the name of every event (one of :data:`EVENTS`).
        self.observers: list[Callable[[str], None]] = []

    @property
    def store(self) -> Store | None:
        """Where answers (and snapshots) are kept; None keeps nothing (single-flight only)."""
        return self._store

    @store.setter
    def store(self, store: Store | None) -> None:
        self._store = store
        self.snapshots = None
        if store is not None and self.config.snapshot_ttl_s > 0:
            self.snapshots = HeldSnapshots(store) if isinstance(store, MemoryStore) else EncodedSnapshots(store)
        self.answers = store is not None and self.config.answer_ttl_s > 0
        #: Answers kept compressed: not in this process's own store (memory is not what is short there).
        self.compress = not isinstance(store, MemoryStore)

    def _event(self, name: str) -> None:
        for observe in self.observers:
            observe(name)

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()

    async def search(
        self, request: SearchRequest, access: bytes, started: float, run: Run, resolver: Resolver | None = None
    ) -> dict[str, Any]:
        """The answer to ``request`` for a caller of ``access`` (see the module docstring); ``resolver``
        makes each page's files final (the declaration index), from a snapshot as from a fan-out."""
        note = None
        store = self.store
        if request.cursor is not None:
            if self.snapshots is not None:
                page = await self._page(self.snapshots, request, request.cursor, access, resolver)
                if page is not None:
                    return self._finish(page, started)
                self._event("snapshot_missed")
            note = CURSOR_EXPIRED if store is None or store.available else CURSOR_UNREADABLE
            request = request.model_copy(update={"cursor": None})
        key = answer_key(self.config.prefix, request, access)
        if store is not None and self.answers:
            cached = await self._cached(store, key)
            if cached is not None:
                self._event("answer_hit")
                return self._finish(cached, started, note)
        if not self.config.single_flight:
            answer, shared = await self._compute(request, access, key, run, resolver), False
        else:
            answer, shared = await self.flight.run(key, lambda: self._compute(request, access, key, run, resolver))
        self._event("answer_shared" if shared else "answer_miss")
        return self._finish(answer, started, note)

    async def facets(self, request: SearchRequest, access: bytes) -> Facets | None:
        """The facets of the snapshot ``request``'s cursor names (bound like a page), or None."""
        if request.cursor is None or self.snapshots is None:
            return None
        return await self.snapshots.facets(snapshot_key(self.config.prefix, request.cursor, request, access))

    @staticmethod
    def _finish(answer: dict[str, Any], started: float, note: str | None = None) -> dict[str, Any]:
        """This caller's copy of a (possibly shared) answer, with its own ``took_ms``."""
        out = _with_note(answer, note) if note else dict(answer)
        out["took_ms"] = round((time.monotonic() - started) * 1000)
        return out

    @staticmethod
    async def _cached(store: Store, key: str) -> dict[str, Any] | None:
        got = await store.get(key, (ANSWER,))
        if not got or got[0] is None:
            return None
        try:
            return decode_answer(got[0])
        except DecodeError as exc:
            log.warning("cache_undecodable", kind="answer", error=str(exc))
            return None

    async def _page(
        self, snapshots: Snapshots, request: SearchRequest, cursor: str, access: bytes, resolver: Resolver | None
    ) -> dict[str, Any] | None:
        """The page ``request`` asks for from the snapshot ``cursor`` names, or None."""
        key = snapshot_key(self.config.prefix, cursor, request, access)
        with span("fedsearch.cursor.read") as current:
            whole = await snapshots.page(key, request.offset, request.files)
            if current is not None:
                current.set_attributes({"fedsearch.found": whole is not None, "fedsearch.offset": request.offset})
        if whole is None:
            return None
        self._event("snapshot_served")
        return build_response(request, _page_of(request, whole, cursor, resolver), 0)

    async def _compute(
        self, request: SearchRequest, access: bytes, key: str, run: Run, resolver: Resolver | None
    ) -> dict[str, Any]:
        """Fan out, keep a snapshot when a next page is left, and the answer when it may be kept."""
        snapshots, store, config = self.snapshots, self.store, self.config
        whole = await run(request, snapshots is not None)
        cursor = new_cursor() if store is not None and snapshots is not None else None
        ranked = _page_of(request, whole, cursor, resolver)  # first: the page decodes its files
        if store is None:
            return build_response(request, ranked, 0)
        ttl = config.answer_ttl_s
        if ranked.more and snapshots is not None and cursor is not None:
            with span("fedsearch.snapshot.write") as current:
                snapshot = snapshot_key(config.prefix, cursor, request, access)
                kept = await snapshots.put(snapshot, whole, config.snapshot_ttl_s)
                if current is not None:
                    current.set_attributes({"fedsearch.files": whole.file_count, "fedsearch.kept": kept})
            if kept:
                self._event("snapshot_stored")
                ttl = min(ttl, config.snapshot_ttl_s)  # a kept answer never outlives its cursor's snapshot
            else:
                ranked = _page_of(request, whole, None, resolver)
        answer = build_response(request, ranked, 0)
        if self.answers and all(s["status"] in _KEEPABLE for s in whole.statuses):
            await store.put(key, {ANSWER: encode_answer(answer, self.compress)}, ttl)
        return answer


def _page_of(request: SearchRequest, whole: Whole, cursor: str | None, resolver: Resolver | None) -> Ranked:
    return page_of(request, whole, cursor, resolver(whole.since_ns) if resolver is not None else None)


def open_cache(config: CacheConfig, process: bool = True, env: dict[str, str] | None = None) -> ResultCache:
    """The cache ``[cache]`` describes: in Redis when ``url`` is set, else in this process
    (unless ``process`` is False: a one-shot process, whose snapshots nobody could page)."""
    store: Store | None = None
    if config.url is not None:
        from gateway.cache.redis_store import RedisStore

        password = None
        if config.password_env:
            password = (os.environ if env is None else env).get(config.password_env)
            if not password:
                raise ConfigError("cache.password_env", f"environment variable {config.password_env!r} is not set")
        store = RedisStore(config.url, config.timeout_ms / 1000, password=password)
    elif process:
        store = MemoryStore(config.max_bytes)
    return ResultCache(config, store)
