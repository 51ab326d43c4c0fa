"""Building the indexes of local namespaces: content, declarations, intents, prose.

:class:`Builder` does the work: for each local namespace (whose root it holds the lock of,
:mod:`gateway.index.locks`) it brings the content index up to date, lists the files a
grammar reads, forgets the ones that are gone and parses the ones whose (size, mtime)
changed, committing in small batches so readers see progress and the write lock is
never held long. Files asked for by a search (a page met them unindexed or stale) go
first. Then it embeds the declarations of the parsed files that have no intent vectors
yet (:mod:`gateway.index.intents`), and once a pass has left nothing of a checkout to
parse or embed, marks it built: from then on its semantic searches are complete; and,
where its declarations changed, writes again the sentences of its docs that name them
(:mod:`gateway.index.prose`).

Each pass ends by keeping the folder within its bounds (:mod:`gateway.index.prune`: the
roots unused for ``keep_days`` or gone, then the least recently used past ``max_bytes``),
a survey every PRUNE_S.

It runs in the background builder process (:mod:`gateway.index.background`), and in
``fedsearch index``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.index.files import Source, changed, find_rg, index_file, list_all, list_files, stat_of
from gateway.index.intents import embed_pending
from gateway.index.lifetime import die_with_parent
from gateway.index.locks import Claims
from gateway.index.prose import write_prose
from gateway.index.prune import Pruner
from gateway.index.store import FileRecord, Store, damaged
from gateway.log import get_logger

__all__ = ["BATCH_FILES", "BuildStats", "Builder", "Poll"]

#: Files per transaction, and the longest a transaction gathers (seconds).
BATCH_FILES = 64
BATCH_S = 0.25
#: Checkouts whose content index a pass builds at once (threads; their files read by the builder's workers; at
#: most :data:`gateway.index.content.build.LARGE_AT_ONCE` of them with many files to read).
CONTENT_AT_ONCE = 16
#: Guards the counts several content threads add to one pass's BuildStats.
_STATS = threading.Lock()

if TYPE_CHECKING:  # the content index's (tantivy, numpy): imported only where it is built
    from gateway.index.content.build import ContentBuilder

log = get_logger("fedsearch.index")

#: Requests from searches: (namespace, path) pairs to index first.
Poll = Callable[[], list[tuple[str, str]]]


@dataclass(slots=True)
class BuildStats:
    """What one pass did."""

    listed: int = 0
    parsed: int = 0
    forgotten: int = 0
    bytes: int = 0
    embedded: int = 0  # declarations given vectors
    embed_s: float = 0.0  # of ``seconds``, embedding them
    content_read: int = 0  # files read into the content index
    content_bytes: int = 0
    content_s: float = 0.0  # of ``seconds``, building the content index
    pruned: int = 0  # roots dropped from the folder
    prune_s: float = 0.0  # of ``seconds``, surveying and pruning it
    seconds: float = 0.0


class Builder:
    """Brings the index up to date with the namespaces' files."""

    def __init__(
        self,
        store: Store,
        sources: Sequence[Source],
        rg: str | None = None,
        workers: int = 1,
        content: ContentBuilder | None = None,
    ) -> None:
        self.store = store
        #: The content index's builder (None: no content index); it goes first, each pass.
        self.content = content
        #: Processes parsing at once (forked, each ending with this process: gateway.index.lifetime);
        #: one parses in this process.
        self.workers = max(1, workers)
        self.sources = {s.namespace: s for s in sources}
        self.rg = rg if rg is not None else find_rg()
        #: Asked between files: whether to stop now (the parent went away).
        self.should_stop: Callable[[], bool] = lambda: False
        #: Keeps the folder within its bounds, last thing in a pass (None: nothing pruned).
        self.pruner: Pruner | None = None
        #: The roots' locks (gateway.index.locks): a root is built only while they hold it (None: every root,
        #: the caller answers for it).
        self.claims: Claims | None = None

    def held(self, sources: Sequence[Source]) -> list[Source]:
        """Those of ``sources`` whose root this builder holds the lock of (all where it takes none)."""
        claims = self.claims
        return list(sources) if claims is None else [s for s in sources if claims.holds(s.root)]

    def refresh(self, poll: Poll | None = None, sources: Sequence[Source] | None = None) -> BuildStats:
        """One pass over every namespace (or ``sources``): their content indexes first (what makes
        searches fast), then their declarations; ``poll`` is asked for search requests between files."""
        stats = BuildStats()
        started = time.monotonic()
        todo = self.held(list(self.sources.values()) if sources is None else sources)
        listings: dict[str, list[str]] = {}
        if self.content is not None and todo:
            with self.content.pool():  # its reading processes forked once for the whole pass
                listings = self.refresh_contents(todo, stats)
        for source in todo:
            if self.should_stop():
                break
            try:
                self.refresh_one(source, stats, poll, listings.get(source.namespace))
            except sqlite3.Error as exc:
                if damaged(exc):
                    raise  # the whole database's: let go of by the builder process, built anew
                self._failed(source, "declarations", exc)
        if self.pruner is not None and not self.should_stop():  # its own indexes first; then the others'
            self.prune(stats)
        stats.seconds = time.monotonic() - started
        if stats.parsed or stats.forgotten or stats.embedded or stats.content_read or stats.pruned:
            log.info(
                "index_pass",
                files=stats.listed,
                parsed=stats.parsed,
                forgotten=stats.forgotten,
                embedded=stats.embedded,
                content_files=stats.content_read,
                content_mb=round(stats.content_bytes / 1e6, 2),
                content_s=round(stats.content_s, 2),
                pruned=stats.pruned,
                prune_s=round(stats.prune_s, 2),
                mb=round(stats.bytes / 1e6, 2),
                seconds=round(stats.seconds, 2),
                mb_per_s=round(stats.bytes / 1e6 / stats.seconds, 2) if stats.seconds else None,
                db_mb=round(self.store.size_bytes() / 1e6, 2),
                rss_mb=_rss_mb(),
            )
        return stats

    def prune(self, stats: BuildStats) -> None:
        """This builder's roots marked used; the folder pruned when a survey is due (a failure is logged:
        the next one tries again)."""
        assert self.pruner is not None
        self.pruner.tick()
        if not self.pruner.due():
            return
        try:
            done = self.pruner.run(should_stop=self.should_stop)
        except (OSError, sqlite3.Error) as exc:
            log.warning("index_prune_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        stats.pruned += len(done.dropped)
        stats.prune_s += done.seconds

    def refresh_contents(self, sources: Sequence[Source], stats: BuildStats) -> dict[str, list[str]]:
        """One whole pass over the content indexes of ``sources``, :data:`CONTENT_AT_ONCE` checkouts at a time
        (each its own writer and commit: what one checkout waits for, a commit's flush to disk, another
        reads meanwhile, so many small checkouts build about as fast as a few big ones); every file rg lists
        in each, by namespace. A checkout that fails (a full disk) fails alone."""
        from concurrent.futures import ThreadPoolExecutor

        listings: dict[str, list[str]] = {}

        def one(source: Source) -> list[str] | None:
            if self.should_stop():
                return None
            try:
                return self._refresh_content(source, stats)
            except (OSError, ValueError) as exc:  # this root's (a full disk): the others go on
                self._failed(source, "content", exc)
                return None

        with ThreadPoolExecutor(min(CONTENT_AT_ONCE, len(sources)), thread_name_prefix="content") as threads:
            for source, listed in zip(sources, threads.map(one, sources), strict=True):
                if listed is None:
                    continue
                listings[source.namespace] = listed
                with contextlib.suppress(sqlite3.Error):  # how many files the declarations will have, said at once
                    self.store.mark(source.root, listed=sum(1 for _ in list_files(source, self.rg, listed)))
        return listings

    def refresh_content(self, source: Source, stats: BuildStats) -> list[str]:
        """One whole pass over one namespace's content index; every file rg lists in it."""
        listed = self._refresh_content(source, stats)
        with contextlib.suppress(sqlite3.Error):  # how many files the declarations will have, said at once
            self.store.mark(source.root, listed=sum(1 for _ in list_files(source, self.rg, listed)))
        return listed

    def _refresh_content(self, source: Source, stats: BuildStats) -> list[str]:
        """:meth:`refresh_content` but the declarations' count (it may run in a thread: no database here)."""
        from gateway.index.content.build import ContentStats

        assert self.content is not None
        started = time.monotonic()
        listed_ns = time.time_ns()
        listed = list_all(source, self.rg)
        done = ContentStats()
        self.content.should_stop = self.should_stop
        progress = None
        if (claims := self.claims) is not None:
            self.content.cover = claims.covering

            def progress(read: int, total: int) -> None:
                claims.report(source.root, "content", read, total)

        self.content.refresh(source, listed, listed_ns, done, progress)
        if done.read or done.removed:
            log.info("content_index_read", root=source.root, read=done.read, removed=done.removed, files=len(listed))
        with _STATS:
            stats.content_read += done.read
            stats.content_bytes += done.bytes
            stats.content_s += time.monotonic() - started
        return listed

    def refresh_one(
        self, source: Source, stats: BuildStats, poll: Poll | None = None, listed_all: Sequence[str] | None = None
    ) -> bool:
        """One pass over one namespace: list (unless ``listed_all`` gives every file rg lists),
        forget, parse, embed; whether it is built (nothing left)."""
        states = self.store.states(source.root)
        listed = list(list_files(source, self.rg, listed_all))
        stats.listed += len(listed)
        self.store.mark(source.root, listed=len(listed))
        present = set(listed)
        gone = [p for p in states if p not in present]
        if gone:
            self.store.forget(source.root, gone)
            stats.forgotten += len(gone)
        parsed = stats.parsed
        self._index(source, changed(states, source, listed), stats, poll)
        if stats.parsed > parsed:
            log.info("declarations_parsed", root=source.root, parsed=stats.parsed - parsed, files=len(listed))
        if self.should_stop():
            return False
        self._report(source, "embedding", 0, 0)
        done = embed_pending(self.store, source.root, self.should_stop, stats)
        if done:
            self.store.mark(source.root, built=True)
            files = (lambda: listed_all) if listed_all is not None else (lambda: list_all(source, self.rg))
            write_prose(self.store, source.root, files, self.should_stop)
        self._report(source, "", 0, 0)
        return done

    def _failed(self, source: Source, part: str, exc: Exception) -> None:
        """One root's part failed this pass (tried again at the next): logged, and said in its lock's record,
        the one place a builder that cannot write its index folder can say why."""
        why = _why(exc, self.store.path)
        log.warning("index_root_failed", root=source.root, part=part, error=why)
        if self.claims is not None:
            self.claims.fail(source.root, f"{part}: {why}")

    def _report(self, source: Source, phase: str, done: int, total: int) -> None:
        """How far the work on a root is, for whoever reads its lock (gateway.index.locks)."""
        if self.claims is not None:
            self.claims.report(source.root, phase, done, total)

    def requested(self, pairs: Sequence[tuple[str, str]]) -> int:
        """Index files a search asked for, if they are stale; how many were parsed."""
        stats = BuildStats()
        by_source: dict[str, list[str]] = {}
        for namespace, path in pairs:
            if namespace in self.sources and self.held([self.sources[namespace]]):
                by_source.setdefault(namespace, []).append(path)
        for namespace, paths in by_source.items():
            source = self.sources[namespace]
            known = self.store.lookup(source.root, paths)
            stale = [p for p in paths if (k := known.get(p)) is None or stat_of(source.root, p) != (k.size, k.mtime_ns)]
            self._index(source, stale, stats, None)
            embed_pending(self.store, source.root, self.should_stop, stats)
        return stats.parsed

    def _index(self, source: Source, paths: Sequence[str], stats: BuildStats, poll: Poll | None) -> None:
        batch: list[FileRecord] = []
        since = time.monotonic()
        with self._parsed(source, paths) as records:
            for done, record in enumerate(records, 1):
                self._report(source, "declarations", done, len(paths))
                if poll is not None and (asked := poll()):
                    self.requested(asked)
                if self.should_stop():
                    break
                if record is None:
                    continue
                batch.append(record)
                stats.parsed += 1
                stats.bytes += record.size
                if len(batch) >= BATCH_FILES or time.monotonic() - since >= BATCH_S:
                    self.store.put(source.root, batch)
                    batch, since = [], time.monotonic()
        if batch:
            self.store.put(source.root, batch)

    @contextlib.contextmanager
    def _parsed(self, source: Source, paths: Sequence[str]) -> Iterator[Iterator[FileRecord | None]]:
        """Each path read and parsed, in order: here, or by ``workers`` processes when there is enough."""
        if self.workers == 1 or len(paths) < 2 * BATCH_FILES:
            yield (index_file(source.root, path) for path in paths)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=die_with_parent,
            initargs=(os.getpid(),),
        )
        try:
            yield pool.map(index_file, itertools.repeat(source.root), paths, chunksize=16)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


#: Free bytes under which a write that failed is put down to a full disk (tantivy says only that its writer died).
FULL_BELOW = 1 << 20


def _why(exc: Exception, path: str | None) -> str:
    """Why a write failed, in words: the system's for an OSError, "No space left on device" where the disk is
    (nearly) full whatever the library said."""
    why = exc.strerror or str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
    if path is not None and "No space left" not in why:
        with contextlib.suppress(OSError):
            fs = os.statvfs(os.path.dirname(path))
            if fs.f_bavail * fs.f_frsize < FULL_BELOW:
                why = f"No space left on device ({why})"
    return why[:300]


def _rss_mb() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
