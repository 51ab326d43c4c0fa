"""Building the declaration index in the background: a low-priority process beside the server.

:class:`Builder` does the work: for each local namespace it lists the files a grammar
reads, forgets the ones that are gone and parses the ones whose (size, mtime)
changed, committing in small batches so readers see progress and the write lock is
never held long. Files asked for by a search (:meth:`BuilderProcess.prioritise`: a
page met them unindexed or stale) go first. Then it embeds the declarations of the
parsed files that have no intent vectors yet (:mod:`gateway.index.intents`), and once a
pass has left nothing of a checkout to parse or embed, marks it built: from then on its
semantic searches are complete; and, where its declarations changed, writes again the
sentences of its docs that name them (:mod:`gateway.index.prose`).

:class:`BuilderProcess` runs it as ``python -m gateway.index`` under
``nice``: parsing holds the GIL (measured: a thread parsing left the event loop 7 %
of its time), so it never runs inside a serving process. It rescans every
``refresh_s``. Processes sharing one index folder (``serve --workers``, a reload)
each start one; an exclusive lock on ``<dir>/index.lock`` lets exactly one work, the
others wait for it. A builder ends when its parent closes its stdin, or dies.

Each pass ends by keeping the folder within its bounds (:mod:`gateway.index.prune`: the
roots unused for ``keep_days`` or gone, then the least recently used past ``max_bytes``),
a survey every PRUNE_S; a builder claims its roots for its whole life, waiting for the lock
or not (:class:`~gateway.index.roots.Live`), so no other builder prunes them.

A *one-pass* builder (:func:`start_once`: what a process without a background builder,
the CLI, starts to catch its namespaces up before a semantic search) takes the lock,
forks into the background and makes one pass, whether or not its parent is still
there; when another builder holds the lock it ends at once (that one is doing the work).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.index.files import Source, changed, find_rg, index_file, list_all, list_files, stat_of
from gateway.index.intents import embed_pending
from gateway.index.prose import write_prose
from gateway.index.prune import DEFAULT_KEEP_DAYS, DEFAULT_MAX_BYTES, Pruner
from gateway.index.roots import Live, register
from gateway.index.store import FileRecord, Store
from gateway.log import get_logger

__all__ = [
    "BATCH_FILES",
    "BuildStats",
    "Builder",
    "BuilderProcess",
    "content_builder",
    "hold_lock",
    "lock_held",
    "main",
    "start_once",
]

#: Files per transaction, and the longest a transaction gathers (seconds).
BATCH_FILES = 64
BATCH_S = 0.25
LOCK_NAME = "index.lock"
#: The exit code of a one-pass builder that found another at work.
BUSY = 3

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
        #: Processes parsing at once (forked: only where the process has no other threads, as the
        #: builder process has none); one parses in this process.
        self.workers = max(1, workers)
        self.sources = {s.namespace: s for s in sources}
        self.rg = rg if rg is not None else find_rg()
        #: Asked between files: whether to stop now (the parent went away).
        self.should_stop: Callable[[], bool] = lambda: False
        #: Keeps the folder within its bounds, last thing in a pass (None: nothing pruned).
        self.pruner: Pruner | None = None

    def refresh(self, poll: Poll | None = None, sources: Sequence[Source] | None = None) -> BuildStats:
        """One pass over every namespace (or ``sources``): their content indexes first (what makes
        searches fast), then their declarations; ``poll`` is asked for search requests between files."""
        stats = BuildStats()
        started = time.monotonic()
        todo = list(self.sources.values()) if sources is None else list(sources)
        listings: dict[str, list[str]] = {}
        if self.content is not None and todo:
            with self.content.pool():  # its reading processes forked once for the whole pass
                for source in todo:
                    if self.should_stop():
                        break
                    listings[source.namespace] = self.refresh_content(source, stats)
        for source in todo:
            if self.should_stop():
                break
            self.refresh_one(source, stats, poll, listings.get(source.namespace))
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

    def refresh_content(self, source: Source, stats: BuildStats) -> list[str]:
        """One whole pass over one namespace's content index; every file rg lists in it."""
        from gateway.index.content.build import ContentStats

        assert self.content is not None
        started = time.monotonic()
        listed_ns = time.time_ns()
        listed = list_all(source, self.rg)
        done = ContentStats()
        self.content.should_stop = self.should_stop
        self.content.refresh(source, listed, listed_ns, done)
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
        self._index(source, changed(states, source, listed), stats, poll)
        if self.should_stop():
            return False
        done = embed_pending(self.store, source.root, self.should_stop, stats)
        if done:
            self.store.mark(source.root, built=True)
            files = (lambda: listed_all) if listed_all is not None else (lambda: list_all(source, self.rg))
            write_prose(self.store, source.root, files, self.should_stop)
        return done

    def requested(self, pairs: Sequence[tuple[str, str]]) -> int:
        """Index files a search asked for, if they are stale; how many were parsed."""
        stats = BuildStats()
        by_source: dict[str, list[str]] = {}
        for namespace, path in pairs:
            if namespace in self.sources:
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
            for record in records:
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

        pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
        try:
            yield pool.map(index_file, itertools.repeat(source.root), paths, chunksize=16)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _rss_mb() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# --- the process -------------------------------------------------------------------


class _Requests:
    """JSON lines ``[namespace, path]`` on stdin, read without blocking; ``closed`` at EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False
        self._pending = b""

    def wait(self, timeout: float, also: int = -1) -> list[tuple[str, str]]:
        """Requests that arrive within ``timeout`` seconds (those already there at once); it returns
        early too when the descriptor ``also`` (a file watcher's) can be read."""
        if self.closed:
            return []
        ready, _, _ = select.select([self.fd, *([also] if also >= 0 else [])], [], [], max(0.0, timeout))
        if self.fd not in ready:
            return []
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.closed = True
            return []
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        out: list[tuple[str, str]] = []
        for line in lines:
            with contextlib.suppress(ValueError, TypeError):
                namespace, path = json.loads(line)
                out.append((str(namespace), str(path)))
        return out

    def poll(self) -> list[tuple[str, str]]:
        return self.wait(0.0)


def _lock(directory: str, requests: _Requests, wait: bool = True) -> int | None:
    """Wait for the index lock (None: the parent went away first, or it is held and ``wait`` is False)."""
    import fcntl

    fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if not wait:
                os.close(fd)
                return None
            requests.wait(1.0)  # their requests are the working builder's to serve
            if requests.closed:
                os.close(fd)
                return None


def main() -> int:
    """``python -m gateway.index``: the spec on stdin's first line, requests after it."""
    from gateway.log import configure

    configure()
    spec = json.loads(sys.stdin.buffer.readline())
    directory = os.path.expanduser(spec["dir"])
    sources = [Source(s["namespace"], s["root"], tuple(s.get("exclude", ()))) for s in spec["sources"]]
    once = bool(spec.get("once", False))
    with contextlib.suppress(OSError):
        os.nice(10)
    requests = _Requests(sys.stdin.fileno())
    names: dict[str, list[str]] = {}
    for source in sources:
        names.setdefault(source.root, []).append(source.namespace)
    live: Live | None = None
    try:
        os.makedirs(directory, exist_ok=True)
        register(directory, names)
        if not once:  # its roots are in use while it lives, waiting for the lock or not
            live = Live(directory, names)
        lock = _lock(directory, requests, wait=not once)
    except OSError as exc:
        log.warning("index_builder_off", error=exc.strerror or str(exc))
        return 0
    if lock is None:
        return BUSY if once else 0
    if once and os.fork():  # the parent ends now; the child keeps the lock (the same open file)
        os._exit(0)
    if once:
        os.setsid()
        with contextlib.suppress(OSError):
            live = Live(directory, names)
    try:
        return _serve(spec, directory, sources, names, requests, once)
    finally:
        if live is not None:
            live.close()


def _serve(
    spec: dict[str, Any],
    directory: str,
    sources: list[Source],
    names: dict[str, list[str]],
    requests: _Requests,
    once: bool,
) -> int:
    """The builder's life once it holds the lock: one pass (``once``), or passes until the parent goes."""
    workers = int(spec.get("workers", 1))
    refresh_s = float(spec.get("refresh_s", 60.0))
    store = Store.open(directory, busy_s=10.0)
    if store.path is None:  # in memory: nobody could read what it built
        return 0
    builder = Builder(store, sources, workers=workers, content=content_builder(spec, directory, workers))
    builder.pruner = Pruner(
        directory,
        store,
        names,
        keep_days=float(spec.get("keep_days", DEFAULT_KEEP_DAYS)),
        max_bytes=int(spec.get("max_bytes", DEFAULT_MAX_BYTES)),
    )
    if builder.content is not None:
        builder.content.make_room = builder.pruner.make_room
    if once:
        builder.refresh()
        return 0
    builder.should_stop = lambda: requests.closed
    follower = _follower(builder)
    while not requests.closed:
        try:
            builder.refresh(requests.poll)
        except Exception as exc:  # a pass that failed (a worker died, the disk is full) is tried again later
            log.warning("index_pass_failed", error=f"{type(exc).__name__}: {exc}"[:300])
        if follower is not None:
            follower.watch()
        deadline = time.monotonic() + refresh_s
        while not requests.closed and (left := deadline - time.monotonic()) > 0:
            due = follower.wait_s() if follower is not None else None
            asked = requests.wait(left if due is None else min(left, due), follower.fileno() if follower else -1)
            if asked:
                builder.requested(asked)
            if follower is not None:
                _follow(follower)
    if follower is not None:
        follower.close()
    return 0


def content_builder(spec: dict[str, Any], directory: str, workers: int) -> ContentBuilder | None:
    """The content index's builder the spec asks for (None: ``content`` off, or tantivy missing)."""
    if not spec.get("content", False):
        return None
    try:
        from gateway.index.content.build import ContentBuilder
    except ImportError as exc:  # pragma: no cover - a broken install
        log.warning("content_index_off", error=str(exc)[:200])
        return None
    return ContentBuilder(directory, workers=workers, max_bytes=int(spec.get("max_bytes", DEFAULT_MAX_BYTES)))


def _follower(builder: Builder) -> Any:
    """The builder's file watcher over its content indexes (None: no content index, or no inotify)."""
    if builder.content is None:
        return None
    from gateway.index.content.follow import Follower

    def files(source: Source, paths: list[str]) -> None:
        builder.requested([(source.namespace, p) for p in paths if p.rpartition(".")[2]])

    def tree(source: Source) -> None:
        builder.refresh(sources=[source])

    try:
        return Follower(builder.content, list(builder.sources.values()), files, tree)
    except OSError as exc:
        log.info("content_index_not_following", reason=exc.strerror or str(exc))
        return None


def _follow(follower: Any) -> None:
    """Take the watcher's changes; update what is due (a failure is logged, the next pass retries)."""
    try:
        follower.take()
        follower.apply()
    except Exception as exc:
        log.warning("index_update_failed", error=f"{type(exc).__name__}: {exc}"[:300])


def _spec(
    directory: str,
    sources: Sequence[Source],
    refresh_s: float,
    workers: int,
    once: bool = False,
    content: bool = False,
    max_bytes: int | None = None,
    keep_days: float | None = None,
) -> dict[str, Any]:
    return {
        "dir": directory,
        "sources": [{"namespace": s.namespace, "root": s.root, "exclude": list(s.exclude)} for s in sources],
        "refresh_s": refresh_s,
        "workers": workers,
        "once": once,
        "content": content,
        **({"max_bytes": max_bytes} if max_bytes is not None else {}),
        **({"keep_days": keep_days} if keep_days is not None else {}),
    }


def start_once(
    directory: str,
    sources: Sequence[Source],
    workers: int = 1,
    content: bool = False,
    *,
    max_bytes: int | None = None,
    keep_days: float | None = None,
) -> bool:
    """Start a one-pass builder in the background; False if another builder holds the index (or it failed).

    The process started takes the lock, forks the builder into a session of its own and
    ends at once (reaped here): the builder outlives this process if it must, holding the
    lock until its pass is done (:func:`lock_held`).
    """
    spec = _spec(directory, sources, 60.0, workers, True, content, max_bytes=max_bytes, keep_days=keep_days)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gateway.index"],
            input=json.dumps(spec).encode() + b"\n",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("index_builder_failed", error=str(exc)[:200])
        return False
    return done.returncode == 0


def hold_lock(directory: str, waiting: Callable[[], object], wait_s: float | None = None) -> int | None:
    """The index folder's lock, held (its descriptor: closing it lets go); ``waiting`` is called once
    if another builder holds it first, then this waits for it: without end, or ``wait_s`` seconds and
    None if it is still held (a running server's builder holds it for the server's whole life)."""
    import fcntl

    fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        waiting()
    if wait_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            continue
    os.close(fd)
    return None


def lock_held(directory: str) -> bool:
    """Whether a builder is at work on the index under ``directory``."""
    import fcntl

    try:
        fd = os.open(os.path.join(os.path.expanduser(directory), LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the file releases a lock taken here
    return False


class BuilderProcess:
    """The parent's handle on a builder process."""

    def __init__(
        self,
        directory: str,
        sources: Sequence[Source],
        refresh_s: float,
        workers: int = 1,
        content: bool = False,
        max_bytes: int | None = None,
        keep_days: float | None = None,
    ) -> None:
        self.spec = _spec(
            directory, sources, refresh_s, workers, content=content, max_bytes=max_bytes, keep_days=keep_days
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (a failure is logged: searches go on with what the index has)."""
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.index"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                process_group=0,  # a terminal's Ctrl-C stops the server, which ends this by closing its stdin
            )
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(self.spec).encode() + b"\n")
            self.proc.stdin.flush()
            os.set_blocking(self.proc.stdin.fileno(), False)
        except OSError as exc:
            log.warning("index_builder_failed", error=exc.strerror or str(exc))
            self.stop()

    def prioritise(self, namespace: str, paths: Sequence[str]) -> None:
        """Ask for files to be indexed first (dropped if the pipe is full: the next pass takes them)."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        data = b"".join(json.dumps([namespace, p]).encode() + b"\n" for p in paths)
        with contextlib.suppress(OSError):
            proc.stdin.write(data)
            proc.stdin.flush()

    def stop(self, timeout: float = 2.0) -> None:
        """End the process: its stdin closed, then killed if it lingers."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
