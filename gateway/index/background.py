"""The background builder process: ``python -m gateway.index``, one a server (or a catching-up CLI).

:class:`BuilderProcess` runs :class:`~gateway.index.builder.Builder` as ``python -m
gateway.index`` under ``nice``: parsing holds the GIL (measured: a thread parsing left the
event loop 7 % of its time), so it never runs inside a serving process. The spec comes on
stdin's first line; files a search wants first (:meth:`BuilderProcess.prioritise`) come as
JSON lines after it. It passes over its roots every ``refresh_s``, and follows their
changes between passes (:mod:`gateway.index.content.follow`).

**Locks.** A builder takes each root's lock on its own (:mod:`gateway.index.locks`) and
builds the roots it holds, holding them for its whole life. A root another process holds
is *waiting*: it is tried again every :data:`WAIT_S`, and built as soon as it is let go, which
the kernel does when its holder ends, however it ends. Processes sharing one index folder
(``serve --workers``, two servers, ``fedsearch index``) thus build each root once, and one
process stuck on one root stalls nothing else. Each builder also claims its roots for its
life (:class:`~gateway.index.roots.Live`), held or waited for, so no pruner drops them.

**Its end** (:mod:`gateway.index.lifetime`): it ends when its parent does, however the parent
ends (the kernel's parent-death signal; the end of its stdin, then its whole process group
after a grace), and when the parent closes its stdin (:meth:`BuilderProcess.stop`): at its
next file, or killed with everything it started after :data:`~gateway.index.lifetime.GRACE_S`.
A build killed at any point loses nothing committed and never misleads a search: the
next builder resumes it (docs/content-index.md, "On disk, and faults").

A *one-pass* builder (:func:`start_once`: what a process without a background builder, the
CLI, starts to catch its namespaces up before a semantic search) makes one pass over the
roots it can take and ends; it ends with the CLI too, and the next search finds what it
committed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.index.builder import Builder
from gateway.index.files import Source
from gateway.index.lifetime import GRACE_S, die_with_parent, end_group, watch_stdin
from gateway.index.locks import Claims, holder
from gateway.index.prune import DEFAULT_KEEP_DAYS, DEFAULT_MAX_BYTES, Pruner
from gateway.index.roots import Live, register
from gateway.index.store import Store, damaged
from gateway.log import get_logger

if TYPE_CHECKING:  # the content index's (tantivy, numpy): imported only where it is built
    from gateway.index.content.build import ContentBuilder
    from gateway.index.content.follow import Follower

__all__ = ["BUILDER_NICE", "WAIT_S", "BuilderProcess", "content_builder", "main", "start_once"]

#: The builder runs this much nicer than its server, and nicer than a search's rg (its SCAN_NICE, 10):
#: a search at a server's start (10,000 checkouts to build) gets the CPU before the background build.
BUILDER_NICE = 15

#: How often a builder tries again to take the roots another process holds (seconds).
WAIT_S = 1.0

log = get_logger("fedsearch.index")


class _Requests:
    """JSON lines ``[namespace, path]`` on stdin, read without blocking; ``closed`` at EOF."""

    def __init__(self, fd: int, hung_up: threading.Event | None = None) -> None:
        self.fd = fd
        self._closed = False
        self._pending = b""
        #: Set by a thread when the pipe hangs up (gateway.index.lifetime.watch_stdin): closed, whatever is unread.
        self.hung_up = hung_up or threading.Event()

    @property
    def closed(self) -> bool:
        """Whether the parent closed the pipe, or went away."""
        return self._closed or self.hung_up.is_set()

    def wait(self, timeout: float, also: int = -1) -> list[tuple[str, str]]:
        """Requests that arrive within ``timeout`` seconds (those already there at once); it returns
        early too when the descriptor ``also`` (a file watcher's) can be read."""
        if self.closed:
            return []
        poller = select.poll()  # not select.select: a builder holding a lock a checkout has descriptors past 1,024
        for fd in (self.fd, *([also] if also >= 0 else [])):
            poller.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(max(0.0, timeout) * 1000)]
        if self.fd not in ready:
            return []
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self._closed = True
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


def main() -> int:
    """``python -m gateway.index``: the spec on stdin's first line, requests after it."""
    from gateway.log import configure

    configure()
    spec = json.loads(sys.stdin.buffer.readline())
    parent = int(spec.get("parent") or 0)
    if parent:
        die_with_parent(parent)
    hung_up = watch_stdin(sys.stdin.fileno())
    directory = os.path.expanduser(spec["dir"])
    sources = [Source(s["namespace"], s["root"], tuple(s.get("exclude", ()))) for s in spec["sources"]]
    with contextlib.suppress(OSError):  # its parent set it as it started (``nice``): never back up
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        wanted = int(spec.get("nice", mine + BUILDER_NICE))
        if wanted > mine:
            os.setpriority(os.PRIO_PROCESS, 0, min(19, wanted))
    requests = _Requests(sys.stdin.fileno(), hung_up)
    names: dict[str, list[str]] = {}
    for source in sources:
        names.setdefault(source.root, []).append(source.namespace)
    claims = Claims(directory, names)
    live: Live | None = None
    try:
        os.makedirs(directory, exist_ok=True)
        register(directory, names)
        live = Live(directory, names)  # its roots are in use while it lives, held or waited for
    except OSError as exc:
        log.warning("index_builder_off", error=exc.strerror or str(exc))
    try:
        return _serve(spec, directory, sources, names, requests, claims)
    finally:
        claims.release()
        if live is not None:
            live.close()


def _builder(
    spec: dict[str, Any], directory: str, sources: list[Source], names: dict[str, list[str]], again: bool = False
) -> Builder | None:
    """The builder over the folder's database (None: it cannot be on disk, nobody could read it; ``again``:
    asked again after that, said quietly)."""
    workers = int(spec.get("workers", 1))
    store = Store.open(directory, busy_s=10.0, check=True, quiet=again)  # a damaged database is rebuilt
    if store.path is None:
        store.close()
        return None
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
    return builder


def _serve(
    spec: dict[str, Any],
    directory: str,
    sources: list[Source],
    names: dict[str, list[str]],
    requests: _Requests,
    claims: Claims,
) -> int:
    """The builder's life: one pass over the roots it can take (``once``), or passes until the parent goes."""
    once = bool(spec.get("once", False))
    refresh_s = float(spec.get("refresh_s", 60.0))
    claims.take()
    if claims.error:
        log.warning("index_builder_off", error=claims.error)
    elif waiting := claims.waiting():  # another process holds them: taken when it lets go
        holders = {root: by.pid for root in waiting if (by := holder(directory, root)) is not None}
        log.info("index_roots_waiting", roots=waiting, holders=holders)

    def should_stop() -> bool:
        claims.renew()  # asked between any two files: the leases show it is alive and not stuck
        return requests.closed

    builder: Builder | None = None
    follower: Follower | None = None
    tries = 0
    while not requests.closed:
        if builder is None:  # again each pass while the folder cannot hold the database (a full disk)
            builder = _builder(spec, directory, sources, names, again=tries > 0)
            tries += 1
            if builder is not None:
                builder.claims = claims
                builder.should_stop = should_stop
                follower = None if once else _follower(builder)
        if builder is not None:
            try:
                builder.refresh(requests.poll)
            except Exception as exc:  # a pass that failed (a worker died, the disk is full) is tried again later
                _failed(builder, exc)
            if follower is not None:
                follower.follow([s for s in sources if claims.holds(s.root)])
                follower.watch()
        if once:
            return 0
        deadline = time.monotonic() + refresh_s
        while not requests.closed and (left := deadline - time.monotonic()) > 0:
            steps = [left, WAIT_S if claims.waiting() else left]
            if follower is not None and (due := follower.wait_s()) is not None:
                steps.append(due)
            step = min(steps)
            asked = requests.wait(step, follower.fileno() if follower is not None else -1)
            claims.renew()
            if builder is None:
                continue
            if asked:
                builder.requested(asked)
            if follower is not None:
                _follow(follower)
            if claims.waiting() and (taken := set(claims.take())):
                _take_over(builder, follower, [s for s in sources if s.root in taken], requests)
    if follower is not None:
        follower.close()
    return 0


def _take_over(builder: Builder, follower: Follower | None, sources: list[Source], requests: _Requests) -> None:
    """Roots another process let go of (it ended, or built them and ended): built now, then followed."""
    log.info("index_roots_taken", roots=sorted({s.root for s in sources}))
    try:
        builder.refresh(requests.poll, sources=sources)
    except Exception as exc:
        _failed(builder, exc)
    if follower is not None:
        follower.follow(sources)
        follower.watch()


def _failed(builder: Builder, exc: Exception) -> None:
    """A pass that failed, logged; a database it found damaged is let go of, so the next pass builds a new one."""
    log.warning("index_pass_failed", error=f"{type(exc).__name__}: {exc}"[:300])
    if damaged(exc):
        builder.store.discard(str(exc)[:200])


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


def _follower(builder: Builder) -> Follower | None:
    """The builder's file watcher over its content indexes (None: no content index, or no inotify)."""
    if builder.content is None:
        return None
    from gateway.index.content.follow import Follower

    def files(source: Source, paths: list[str]) -> None:
        builder.requested([(source.namespace, p) for p in paths if p.rpartition(".")[2]])

    def tree(source: Source) -> None:
        builder.refresh(sources=[source])

    try:
        return Follower(builder.content, [], files, tree)
    except OSError as exc:
        log.info("content_index_not_following", reason=exc.strerror or str(exc))
        return None


def _follow(follower: Follower) -> None:
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


class BuilderProcess:
    """The parent's handle on a builder process (one pass with ``once``, else for the parent's life)."""

    def __init__(
        self,
        directory: str,
        sources: Sequence[Source],
        refresh_s: float,
        workers: int = 1,
        content: bool = False,
        max_bytes: int | None = None,
        keep_days: float | None = None,
        *,
        once: bool = False,
    ) -> None:
        self.spec = _spec(
            directory, sources, refresh_s, workers, once, content, max_bytes=max_bytes, keep_days=keep_days
        )
        self.proc: subprocess.Popen[bytes] | None = None
        #: Set once the spec is all in the pipe (requests go after it; until then they are dropped).
        self._sent = threading.Event()

    @property
    def pid(self) -> int | None:
        """The builder's pid while it runs (None before it starts and once it is stopped)."""
        proc = self.proc
        return proc.pid if proc is not None else None

    def running(self) -> bool:
        proc = self.proc
        return proc is not None and proc.poll() is None

    def start(self) -> None:
        """Start the process (a failure is logged: searches go on with what the index has).

        Started from the main thread, it asks the kernel to end it when this process ends (a parent-death
        signal follows the thread that started a process, and the main thread ends last); from another
        thread, the end of its stdin alone ends it."""
        spec = dict(self.spec)
        if threading.current_thread() is threading.main_thread():
            spec["parent"] = os.getpid()
        spec["nice"] = nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + BUILDER_NICE)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.index"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                process_group=0,  # its group holds all it starts; a terminal's Ctrl-C is this process's to handle
            )
            with contextlib.suppress(OSError):  # nice from its first instruction: its imports (a second of CPU)
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, nice)  # go after a starting server's, not beside
            assert self.proc.stdin is not None
            self._sent.clear()
            # Sent from a thread: the builder reads it once its imports are done, and a spec larger than the
            # pipe (10,000 checkouts: 800 KB) would hold the server's start that long. The thread writes to
            # its own copy of the descriptor: closed by stop() meanwhile, the number could be another file's.
            fd = os.dup(self.proc.stdin.fileno())
            data = json.dumps(spec).encode() + b"\n"
            threading.Thread(target=self._send, args=(fd, data), name="fedsearch-builder-spec", daemon=True).start()
        except OSError as exc:
            log.warning("index_builder_failed", error=exc.strerror or str(exc))
            self.stop()

    def _send(self, fd: int, data: bytes) -> None:
        """Write the spec to the builder's stdin (its copy ``fd``, closed after), then let requests follow it
        without blocking; nothing when the builder ended meanwhile."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
            os.set_blocking(fd, False)  # the pipe's: the requests' writes never block the event loop
        except OSError:
            return
        finally:
            os.close(fd)
        self._sent.set()

    def prioritise(self, namespace: str, paths: Sequence[str]) -> None:
        """Ask for files to be indexed first (dropped if the pipe is full, or the spec not all sent yet: the
        next pass takes them)."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.poll() is not None or not self._sent.is_set():
            return
        data = b"".join(json.dumps([namespace, p]).encode() + b"\n" for p in paths)
        with contextlib.suppress(OSError):
            proc.stdin.write(data)
            proc.stdin.flush()

    def stop(self, timeout: float = GRACE_S + 1.0) -> None:
        """End the process and all it started: its stdin closed (it stops at its next file), then its whole
        process group killed if it lingers past ``timeout``, and once it has ended (what it left behind)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            end_group(proc.pid)
            proc.wait()
        end_group(proc.pid)  # its reading workers, had it been killed on its own


def start_once(
    directory: str,
    sources: Sequence[Source],
    workers: int = 1,
    content: bool = False,
    *,
    max_bytes: int | None = None,
    keep_days: float | None = None,
) -> BuilderProcess:
    """A one-pass builder, started: it builds the roots it can take, and ends when done or when this process
    closes it (:meth:`BuilderProcess.stop`) or ends."""
    builder = BuilderProcess(
        directory, sources, 60.0, workers, content, max_bytes=max_bytes, keep_days=keep_days, once=True
    )
    builder.start()
    return builder
