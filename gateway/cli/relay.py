"""rg run for a listing, its output passed on as rg printed it (or as a resolver says) and its exit known.

rg writes into a pipe as large as the system allows (:class:`~adapters.ripgrep.spawn.OutputPipe`),
read when rg exits or at a tick while it runs, never at each of its writes: a wake-up for each
file it prints would take a core from rg's own threads (the one-shot search reads rg the same
way, :mod:`adapters.ripgrep.oneshot`). A tick that finds the pipe half full or more reads on at
once, so rg seldom waits. Its stderr is kept (the first :data:`STDERR_KEEP` bytes) and said once it
ended, as rg said it.

An rg may be started before its caller knows it is the one to run (:func:`scanning`): it
searches meanwhile, and is read only once chosen, else killed.

With a resolver, rg prints NUL-ended paths (``--null``): each record, a path and what follows it
(``-c``'s count, ``--vimgrep``'s match), is printed with the path the resolver gives, or left out,
followed by ``:`` as rg prints it (a NUL with ``-0``; no path at all with ``-I``, but ``-l``'s).
"""

from __future__ import annotations

import os
import select
import sys

from adapters.ripgrep.spawn import Child, spawn
from gateway.errors import BackendError

TYPE_CHECKING = False  # typing, contextlib and collections not imported: a listing starts rg without them
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    #: How a path rg printed is printed: the path to print, or None to leave the record out.
    Resolve = Callable[[str], str | None]

__all__ = ["NONE_SEARCHED", "STDERR_KEEP", "Started", "relay", "scanning"]

EXIT_OK, EXIT_NOTHING, EXIT_ALL_FAILED = 0, 1, 3
#: How much of rg's stderr is kept and said (an error message; the rest is read and dropped).
STDERR_KEEP = 4096
#: How often rg's output is looked at while it runs (ms).
TICK_MS = 10
#: How rg says it searched no file at all (exit 2): its filters (--max-depth 0, globs) left none, nothing
#: failed; passed on as rg said it, and nothing matched (1).
NONE_SEARCHED = b"rg: No files were searched"


class Started:
    """An rg started before the request's plan is known (its output left in its pipe until it is chosen)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.child: Child | None = _spawn(argv)

    def ended(self) -> bool:
        """Whether rg ended (it is not reaped: :func:`relay` reads it to its end all the same)."""
        if self.child is None:
            return True
        return os.waitid(os.P_PID, self.child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def take(self) -> Child:
        """The started rg, handed over to :func:`relay`."""
        child, self.child = self.child, None
        if child is None:
            raise ValueError("taken already")
        return child


class scanning:
    """rg started as ``argv`` (None: none) while the caller plans; killed at the end unless taken
    (``with scanning(argv) as started``; a class, not ``contextlib.contextmanager``: a listing's start
    does without contextlib)."""

    def __init__(self, argv: list[str] | None) -> None:
        self.started = Started(argv) if argv is not None else None

    def __enter__(self) -> Started | None:
        return self.started

    def __exit__(self, *_: object) -> None:
        if self.started is not None and self.started.child is not None:
            self.started.child.close()


def relay(
    runs: Sequence[tuple[list[str], Resolve | None]],
    paths_only: bool,
    started: Child | None = None,
    *,
    null: bool = False,
    names: bool = True,
) -> int:
    """Run each rg (``argv``, resolver) at once and pass their outputs on in turn; the exit code: 0 when
    something was printed, 3 when nothing was and an rg failed (not one that searched no file), else 1.
    ``paths_only``: rg prints paths alone (``-l``, ``--files``), else ``path:rest`` lines. ``started``: the
    first rg, started already. ``null``, ``names``: how a resolved path is printed (``-0``: NUL-ended;
    ``-I``: not at all)."""
    children: list[Child] = [started] if started is not None else []
    try:
        for argv, _ in runs[len(children) :]:
            children.append(_spawn(argv))
        printed, failed, said = 0, False, bytearray()
        for child, (_, resolve) in zip(children, runs, strict=True):
            before = len(said)
            shown, code = _pump(child, resolve, paths_only, said, null, names)
            printed += shown
            searched_none = said.startswith(NONE_SEARCHED, before)  # a filter or --max-depth left no file: no failure
            failed = failed or (code not in (0, 1) and not searched_none)
        if said:
            sys.stderr.write(said.decode("utf-8", "replace"))
        if printed:
            return EXIT_OK
        return EXIT_ALL_FAILED if failed else EXIT_NOTHING
    finally:
        for child in children:
            child.close()


def _spawn(argv: list[str]) -> Child:
    try:
        return spawn(argv)
    except OSError as exc:
        raise BackendError(f"cannot start rg: {exc.strerror or exc}") from None


def _drain(fd: int, most: int) -> tuple[list[bytes], bool]:
    """What the non-blocking ``fd`` holds now (``most`` bytes at most), and whether it ended."""
    chunks: list[bytes] = []
    taken = 0
    while taken < most:
        try:
            chunk = os.read(fd, most - taken)
        except BlockingIOError:
            return chunks, False
        if not chunk:
            return chunks, True
        chunks.append(chunk)
        taken += len(chunk)
    return chunks, False


def _pump(
    child: Child, resolve: Resolve | None, paths_only: bool, said: bytearray, null: bool = False, names: bool = True
) -> tuple[int, int]:
    """rg's output written out (through ``resolve`` when given) and its stderr kept in ``said``, until
    it ended: (records printed, or 1 for output passed as it came; rg's exit code)."""
    out = sys.stdout.buffer
    sys.stdout.flush()
    records = _Records(resolve, paths_only, out.write, null, names) if resolve is not None else None
    pipe = child.pipe
    poller = select.poll()
    if child.pidfd >= 0:
        poller.register(child.pidfd, select.POLLIN)  # its exit wakes us; else ticks only
    printed, ended, wait = 0, False, TICK_MS
    while not ended:
        poller.poll(wait)
        chunks, ended = _drain(pipe.read_fd, pipe.capacity)
        if child.stderr >= 0:
            for chunk in _drain(child.stderr, 1 << 16)[0]:
                said += chunk[: max(0, STDERR_KEEP - len(said))]
        if chunks and records is not None:
            printed += records.feed(b"".join(chunks))
        elif chunks:
            out.write(b"".join(chunks))
            printed = 1
        out.flush()
        wait = 0 if sum(map(len, chunks)) >= pipe.capacity // 2 else TICK_MS  # it writes fast: read on
    if records is not None:
        printed += records.end()
        out.flush()
    _, status = os.waitpid(child.pid, 0)
    child.pid = 0  # reaped: closing it kills nothing
    if child.stderr >= 0:
        for chunk in _drain(child.stderr, 1 << 16)[0]:
            said += chunk[: max(0, STDERR_KEEP - len(said))]
    return printed, os.waitstatus_to_exitcode(status)


class _Records:
    """rg's ``--null`` output cut into records (a path and what follows it), each printed as ``resolve`` says."""

    def __init__(
        self,
        resolve: Resolve,
        paths_only: bool,
        write: Callable[[bytes], object],
        null: bool = False,
        names: bool = True,
    ) -> None:
        self.resolve = resolve
        self.paths_only = paths_only  # -l, --files: NUL-ended paths; else "path NUL rest" lines
        self.end_mark = b"\0" if paths_only else b"\n"
        self.write = write
        self.pending = b""
        self.path_end = b"\0" if null else b"\n"  # after a path alone (-0: a NUL, as rg)
        self.separator = b"\0" if null else b":"  # between a path and what follows it
        self.names = names  # -I: the path left out (rg prints -l's all the same)

    def feed(self, chunk: bytes) -> int:
        """Print the records ``chunk`` completes; how many were printed."""
        *records, self.pending = (self.pending + chunk).split(self.end_mark)
        out: list[bytes] = []
        for record in records:
            if self.paths_only:
                path, rest = record, b""
            else:
                path, nul, rest = record.partition(b"\0")
                if not nul:  # rg prints no path for one file searched alone (-c): as it printed it
                    out.append(record + b"\n")
                    continue
            shown = self.resolve(os.fsdecode(path))
            if shown is None:
                continue
            if self.paths_only:
                out.append(os.fsencode(shown) + self.path_end)
            else:
                out.append((os.fsencode(shown) + self.separator if self.names else b"") + rest + b"\n")
        if out:
            self.write(b"".join(out))
        return len(out)

    def end(self) -> int:
        """rg ended: its last record, had it no end mark."""
        if not self.pending:
            return 0
        return self.feed(self.end_mark)
