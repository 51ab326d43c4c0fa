"""One ``rg`` over several local namespaces, run to its end by this thread alone: the one-shot CLI's search.

A fan-out over ripgrep namespaces asking the same thing shares one rg among them
(:mod:`adapters.ripgrep.batch`); a one-shot process has nothing else to do meanwhile, so
it runs that same rg without an event loop: the same argument vector (``build_argv``)
from the same folder, its output in the same :class:`~adapters.ripgrep.output.OutputPipe`,
cut by the same :class:`~adapters.ripgrep.output.OutputReader` into each namespace's
:class:`~adapters.ripgrep.output.Collector` (``collector_for``, as
:class:`~adapters.ripgrep.backend.RipgrepBackend` builds it), looked at when rg exits, at
a tick once it began to write, or as it comes while it fills the pipe. Each namespace gets
what the backend would have answered: ``ok``, ``capped`` when its collector stopped at a
cap, ``timeout`` with the files found by the deadline, or the BackendError of rg's failure.

:func:`start` starts rg and returns at once, so the caller imports what it needs next
while rg searches; :meth:`Scan.results` reads it to the end. rg is killed and reaped in
every case.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import select
import time
from collections.abc import Callable, Sequence
from typing import Any

from adapters.ripgrep.identity import identities_for
from adapters.ripgrep.output import (
    DEFAULT_MAX_FILES,
    TICK_S,
    Collector,
    OutputReader,
    anchored,
    build_argv,
    collector_for,
    error_line,
    excludes,
    read_stderr,
)
from adapters.ripgrep.spawn import Child, OutputPipe, spawn
from gateway.errors import BackendError
from gateway.models import DEFAULT_MAX_HITS, BackendResult, SearchQuery, Status
from gateway.narrowing import Narrowed, Narrower

__all__ = ["Answer", "Scan", "Scans", "start"]

#: A namespace's answer: what the backend returns, or the BackendError it raises.
Answer = BackendResult | BackendError
_SIGKILL = 9


class Scan:
    """One rg over independent roots, and what each namespace answers (see the module)."""

    def __init__(self, roots: dict[str, str], query: SearchQuery, flags: Sequence[str] = ()) -> None:
        self.query = query
        self.flags = tuple(flags)  # rg's own options choosing the files it reads (see spawn.argv_of)
        self.names = list(roots)  # in the order asked
        self.roots = roots
        #: Each namespace's answer, once it has one; and when it got it (``time.monotonic()``).
        self.answers: dict[str, Answer] = {}
        self.answered_at: dict[str, float] = {}
        self.collectors: dict[str, Collector] = {}
        pairs = sorted((root.rstrip("/") + "/", name) for name, root in roots.items())
        self._prefixes = [prefix for prefix, _ in pairs]
        self._names = [name for _, name in pairs]
        self._pid = 0
        self._popen: Any = None  # a subprocess.Popen where rg runs from a folder of its own
        self._pidfd = -1
        self._stderr = -1
        self._kept = bytearray()
        self._pipe: OutputPipe | None = None
        self._reader = OutputReader(self._route, blocks=not query.context_lines)
        self._narrowed = False  # rg reads what the content index named (status 2, no message: a file gone)

    # --- start --------------------------------------------------------------------------

    def _spawn(self, rg: str, roots: dict[str, str], exclude: Sequence[str], early: Child | None) -> None:
        query = self.query
        cwd: str | None = None
        if len(roots) == 1 and any(map(anchored, excludes(query, exclude))):
            # rg skips what those excludes name relative to where it runs: from the root, the root given
            # absolute all the same (rg strips the folder it runs in), so its paths route as any other's
            cwd = next(iter(roots.values()))
        paths = tuple(roots.values())  # absolute roots, as batch.py gives them
        for name, root in roots.items():
            self.collectors[name].strip = len(root.rstrip("/")) + 1
        argv = build_argv(rg, query, exclude, paths, flags=self.flags)
        if early is not None and early.argv == argv and early.cwd == cwd:
            self._adopt(early)  # started before this query was built: the very rg it asks for
            return
        if early is not None:
            early.close()
        self._adopt(spawn(argv, cwd))

    def _spawn_named(self, rg: str, named: dict[str, Narrowed], exclude: Sequence[str]) -> None:
        """rg over the files and folders the content index named for each namespace (absolute)."""
        self._narrowed = True
        paths: list[str] = []
        for name, answer in named.items():
            self.collectors[name].strip = len(self._prefixes[self._names.index(name)])
            paths += [*answer.files, *answer.folders]
        self._adopt(spawn(build_argv(rg, self.query, exclude, paths, narrowed=True, flags=self.flags), None))

    def _adopt(self, child: Child) -> None:
        self._pid, self._popen, self._pidfd, self._stderr = child.pid, child.popen, child.pidfd, child.stderr
        self._pipe = child.pipe

    # --- reading ------------------------------------------------------------------------

    def _route(self, path: str) -> Collector | None:
        """The collector of the namespace whose root holds ``path`` (as batch.Router), None once capped."""
        i = bisect.bisect_right(self._prefixes, path) - 1
        if i < 0 or not path.startswith(self._prefixes[i]):
            return None
        collector = self.collectors[self._names[i]]
        return None if collector.capped else collector

    def _answer(self, name: str, answer: Answer) -> None:
        if name not in self.answers:
            self.answers[name] = answer
            self.answered_at[name] = time.monotonic()

    def _finish(self, name: str, status: Status, reason: str) -> None:
        if name not in self.answers:
            files = self.collectors[name].ranked()
            identities = identities_for(self.roots[name]) if files else None
            self._answer(name, BackendResult(files=files, status=status, reason=reason, identities=identities))

    def _settle_capped(self) -> bool:
        """Answer the namespaces that reached a cap; whether every namespace is answered."""
        for name, collector in self.collectors.items():
            if collector.capped:
                self._finish(name, "capped", collector.capped)
        return len(self.answers) == len(self.collectors)

    def _feed(self, chunk: bytes) -> bool:
        self._reader.feed_bytes(chunk)
        return not self._settle_capped()

    def _read_stderr(self) -> None:
        if self._stderr >= 0 and read_stderr(self._stderr, self._kept):
            os.close(self._stderr)
            self._stderr = -1

    def _exited(self, block: bool) -> int | None:
        """rg's return code once it exited and was reaped (negative: killed by that signal), else None."""
        if self._popen is not None:
            code: int | None = self._popen.wait() if block else self._popen.poll()
        else:
            pid, status = os.waitpid(self._pid, 0 if block else os.WNOHANG)
            code = None if pid == 0 else os.waitstatus_to_exitcode(status)
        if code is not None:
            self._pid = 0
        return code

    def _wait(self, timeout: float, readable: bool) -> int:
        """Until rg exits, ``timeout`` passes, or (if ``readable``) its output pipe holds something
        or was closed; the pipe's poll events (0: neither)."""
        assert self._pipe is not None
        poller = select.poll()
        for fd in (self._pidfd, self._stderr):
            if fd >= 0:
                poller.register(fd, select.POLLIN)
        if readable:
            poller.register(self._pipe.read_fd, select.POLLIN)
        if self._pidfd < 0:  # no pidfd: rg's exit is looked for at ticks
            timeout = min(timeout, TICK_S)
        ready = poller.poll(max(0.0, timeout) * 1000)
        self._read_stderr()
        return next((events for fd, events in ready if readable and fd == self._pipe.read_fd), 0)

    def results(self, meanwhile: Callable[[], object] | None = None) -> dict[str, Answer]:
        """Read rg to its end (or the deadline, or until every namespace is capped); each namespace's answer.

        ``meanwhile`` is called while rg still runs, once it is seen writing (there will be files
        to rank) and after each later read of its output: what the caller would do after rg,
        done while rg searches (:attr:`collectors` hold the files read so far)."""
        try:
            if self._pipe is not None:
                self._read(meanwhile)
        finally:
            self._close()
        return self.answers

    def _read(self, meanwhile: Callable[[], object] | None) -> None:
        pipe = self._pipe
        assert pipe is not None
        deadline = self.query.deadline
        quiet = True  # rg has written nothing yet: woken by its first output or its exit only
        streaming = False  # reading as rg writes: it fills the pipe faster than ticks empty it
        code: int | None = None
        while not pipe.ended:
            left = deadline - time.monotonic()
            if left <= 0 and code is None:
                self._hand_back()
                return
            events = self._wait(left if quiet else min(TICK_S, left), readable=quiet or streaming)
            written = events != 0
            if code is None:
                code = self._exited(block=False)
            if quiet and code is None:
                quiet = not written  # rg began to write: read at ticks from now (a first file is no read's worth)
                if events & select.POLLIN and meanwhile is not None:  # output, not only the pipe's end
                    meanwhile()
                continue
            taken = pipe.drain(self._feed)
            if len(self.answers) == len(self.collectors):
                return  # every namespace is capped: rg is killed
            if code is not None and not taken:
                break  # rg is gone; its output too (unless something else holds the pipe)
            streaming = taken >= pipe.capacity // 2
            if code is None and not streaming and taken and meanwhile is not None:
                meanwhile()  # at a tick, rg still running: there is time until the next
        self._reader.end()
        self._settle_capped()
        if code is None:
            code = self._exited(block=True)
        self._read_stderr()
        if code == 2 and pipe.read == 0 and not (self._narrowed and not self._kept.strip()):
            error = BackendError(error_line(bytes(self._kept)))
        elif code not in (0, 1, 2):
            error = BackendError(f"rg exited with status {code}")
        else:
            for name in self.collectors:
                self._finish(name, "ok", "")
            return
        for name in self.collectors:
            self._answer(name, error)

    def _hand_back(self) -> None:
        """The deadline: what the pipe holds is read, and each namespace gets what was found."""
        assert self._pipe is not None
        if len(self.answers) == len(self.collectors):
            return
        self._pipe.drain(self._feed)
        self._reader.end(eof=False)
        for name, collector in self.collectors.items():
            self._finish(name, "timeout", f"stopped at the deadline after {collector.started} files")

    def _close(self) -> None:
        """Kill rg if it still runs, reap it, close every descriptor."""
        if self._pid:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile: reaped below
                os.kill(self._pid, _SIGKILL)
            self._exited(block=True)
        for fd in (self._pidfd, self._stderr):
            if fd >= 0:
                os.close(fd)
        self._pidfd = self._stderr = -1
        if self._pipe is not None:
            self._pipe.close()


class Scans:
    """Two rg at once, as one :class:`Scan`: over the checkouts scanned whole, and over what the
    content index named of the others (``--max-depth 1`` would cut the first short)."""

    def __init__(self, query: SearchQuery, names: Sequence[str], parts: Sequence[Scan]) -> None:
        self.query = query
        self.names = list(names)
        self.parts = parts
        self.answers: dict[str, Answer] = {}
        self.answered_at: dict[str, float] = {}
        self.collectors: dict[str, Collector] = {}
        for part in parts:
            self.answers.update(part.answers)
            self.answered_at.update(part.answered_at)
            self.collectors.update(part.collectors)

    def results(self, meanwhile: Callable[[], object] | None = None) -> dict[str, Answer]:
        """Each rg read to its end in turn (both run meanwhile); every namespace's answer."""
        try:
            for i, part in enumerate(self.parts):
                self.answers.update(part.results(meanwhile if i == 0 else None))
                self.answered_at.update(part.answered_at)
        finally:
            for part in self.parts:
                part._close()
        return self.answers


def start(
    rg: str | None,
    roots: dict[str, str],
    query: SearchQuery,
    exclude: Sequence[str] = (),
    max_files: int = DEFAULT_MAX_FILES,
    max_hits: int = DEFAULT_MAX_HITS,
    early: Child | None = None,
    narrower: Narrower | None = None,
    flags: Sequence[str] = (),
) -> Scan | Scans:
    """Start one rg over ``roots`` (namespace -> folder, none inside another: discovered checkouts) for ``query``.

    ``early``, an rg started before ``query`` was built (:mod:`gateway.cli.early`), is adopted
    when it runs the very vector from the very folder this search would start; else it is
    killed and reaped, and the right rg started. What fails before rg runs is each
    namespace's answer at once (:attr:`Scan.answers`): no rg binary, a deadline already
    passed, a path filter that cannot be built, rg not starting.

    ``narrower``, the content index: the checkouts it narrows are searched by a second rg over
    the files and folders it names (one it narrows to nothing is answered at once), started
    with the first (:class:`Scans`). ``flags``: rg's own options choosing the files it reads
    (:func:`~adapters.ripgrep.spawn.argv_of`), given to every rg started.
    """
    named: dict[str, Narrowed] = {}
    nothing: list[str] = []
    if narrower is not None and rg is not None and query.remaining() > 0:
        try:
            accept = collector_for(query, exclude, max_files, max_hits).accept
        except BackendError:
            accept = None
        for name, root in roots.items():
            answer = narrower.narrow(root, query, accept)
            if isinstance(answer, Narrowed) and (answer.files or answer.folders):
                named[name] = answer
            elif isinstance(answer, Narrowed):
                nothing.append(name)
    if named or nothing:
        if early is not None:
            early.close()  # it scans every checkout
        whole = {n: r for n, r in roots.items() if n not in named and n not in nothing}
        parts = [_start(rg, whole, query, exclude, max_files, max_hits, None, flags=flags)] if whole else []
        if named:
            named_roots = {n: roots[n] for n in named}
            parts.append(_start(rg, named_roots, query, exclude, max_files, max_hits, None, named, flags))
        scans = Scans(query, list(roots), parts)
        now = time.monotonic()
        for name in nothing:
            scans.answers[name] = BackendResult()
            scans.answered_at[name] = now
        return scans
    return _start(rg, roots, query, exclude, max_files, max_hits, early, flags=flags)


def _start(
    rg: str | None,
    roots: dict[str, str],
    query: SearchQuery,
    exclude: Sequence[str],
    max_files: int,
    max_hits: int,
    early: Child | None,
    named: dict[str, Narrowed] | None = None,
    flags: Sequence[str] = (),
) -> Scan:
    """:func:`start`, for one rg (over ``named`` files and folders when given)."""
    scan = Scan(roots, query, flags)
    try:
        if rg is None:
            error = BackendError("the rg binary was not found (install the 'ripgrep' package)")
            scan.answers = dict.fromkeys(roots, error)
        elif query.remaining() <= 0:
            late = BackendResult(status="timeout", reason="the deadline passed before rg started")
            scan.answers = dict.fromkeys(roots, late)
        else:
            scan.collectors.update((name, collector_for(query, exclude, max_files, max_hits)) for name in roots)
            if named is not None:
                scan._spawn_named(rg, named, exclude)
            else:
                scan._spawn(rg, roots, exclude, early)
            early = None  # adopted, or closed there
    except BackendError as exc:
        scan.answers = dict.fromkeys(roots, exc)
    except OSError as exc:
        scan.answers = dict.fromkeys(roots, BackendError(f"cannot start rg: {exc.strerror or exc}"))
    finally:
        if early is not None:
            early.close()
    now = time.monotonic()
    scan.answered_at = dict.fromkeys(scan.answers, now)
    return scan
