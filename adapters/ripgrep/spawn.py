"""Starting ``rg``: its binary, its argument vector, the pipe it writes into, and the started process.

The standard library alone: a one-shot ``fedsearch search`` starts rg from here before it
imports what reads and ranks rg's output (msgspec, re2, the models), so that those imports
run while rg searches (:mod:`gateway.cli.early`). :mod:`adapters.ripgrep.output` builds the
same vector from a :class:`~gateway.models.SearchQuery` (:func:`argv_of`), and
:mod:`adapters.ripgrep.oneshot` adopts a process started early only when its vector and
folder are the ones it would have started itself (:func:`spawn`).
"""

from __future__ import annotations

import os
import sys

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the pipe keeps its size
    fcntl = None  # type: ignore[assignment]

TYPE_CHECKING = False  # typing, contextlib, functools and collections not imported: a listing starts rg sooner
if TYPE_CHECKING:  # the event loop only where rg is watched from one (the one-shot CLI reads rg without)
    import asyncio
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["PIPE_BYTES", "PIPE_BYTES_DEFAULT", "Child", "OutputPipe", "argv_of", "find_rg", "spawn"]

#: The size asked for rg's output pipe (Linux grants up to /proc/sys/fs/pipe-max-size,
#: 1 MiB by default), and the size assumed where a pipe's size cannot be known.
PIPE_BYTES = 1024 * 1024
PIPE_BYTES_DEFAULT = 16 * 1024
_SIGKILL = 9


_found: list[str | None] = []


def find_rg() -> str | None:
    """The ``rg`` of the ``ripgrep`` wheel (beside this Python), else the one on PATH (looked for once)."""
    if not _found:
        _found.append(_find_rg())
    return _found[0]


def _find_rg() -> str | None:
    name = "rg.exe" if os.name == "nt" else "rg"
    if sys.prefix != sys.base_prefix and os.name != "nt":  # a venv: its scripts are in its bin/, as sysconfig says
        scripts = os.path.join(sys.prefix, "bin")  # without loading sysconfig's data at every start
    else:
        import sysconfig

        scripts = sysconfig.get_path("scripts")
    candidate = os.path.join(scripts, name)
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    import shutil  # with bz2 and lzma: not at start-up, for the rare rg found on PATH

    return shutil.which("rg")


def argv_of(
    rg: str,
    text: str,
    *,
    exact: bool,
    case_sensitive: bool,
    context_lines: int,
    excludes: Sequence[str] = (),
    roots: Sequence[str] = (".",),
    from_stdin: bool = False,
    narrowed: bool = False,
    flags: Sequence[str] = (),
) -> list[str]:
    """rg's argument vector: ``text`` (literal when ``exact``) over ``roots``, without the files
    the ``excludes`` globs name; output with file names ended by NUL, one block per file.
    ``from_stdin``: the pattern is not in it, rg reads it from stdin (``-f -``: a warm rg,
    :mod:`adapters.ripgrep.warm`). ``narrowed``: ``roots`` are what the content index named
    (:mod:`gateway.narrowing`): files, and folders read one level deep; a file gone meanwhile
    is no error message (``--no-messages``). ``flags``: rg's own options choosing which files it
    reads (``--hidden``, ``--no-ignore``: the CLI's ``--hidden`` and ``-u``), as given."""
    argv = [rg, "--no-config", "--null", "--heading", "--with-filename", "--line-number", "--column"]
    argv += ["--no-context-separator", "--color=never"]
    if narrowed:
        argv += ["--max-depth", "1", "--no-messages"]
    if exact:
        argv.append("-F")
    argv.append("-s" if case_sensitive else "-i")
    if context_lines > 0:
        argv += ["-C", str(context_lines)]
    argv += flags
    for glob in excludes:
        argv += ["-g", "!" + glob]
    argv += ["-f", "-"] if from_stdin else ["-e", text]
    argv += ["--", *roots]
    return argv


class OutputPipe:
    """The pipe rg writes its output into, as large as the system allows, read when we choose.

    asyncio would read a subprocess's pipe whenever it holds anything: one wake-up of
    this process per file rg prints, each taking a core from rg's own threads (rg ran
    measurably slower read that way: bench/README.md). With a large pipe, rg writes on
    undisturbed and its output is read in a few large reads: when rg exits, or at a tick
    while it runs (``output.TICK_S``), from its first output on (before it, ticks only took a
    core from rg). A tick that finds the pipe half full or more reads as rg writes until
    it is not: rg must never wait on us long (a pipe can be small: past the user's
    pipe-user-pages-soft, a page).
    """

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()  # both close-on-exec; rg gets its copy as stdout
        os.set_blocking(self.read_fd, False)
        self.capacity = PIPE_BYTES_DEFAULT
        try:  # Linux only, and within pipe-max-size
            self.capacity = fcntl.fcntl(self.write_fd, fcntl.F_GETPIPE_SZ)
            # Refused past the user's pipe-user-pages-soft: the pipe keeps the size it was given.
            self.capacity = fcntl.fcntl(self.write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (OSError, AttributeError):
            pass
        self.read = 0  # bytes read so far
        self.ended = False  # the writer is gone and everything was read

    def started(self) -> None:
        """rg holds the write end now: close ours, so that rg's exit ends the output."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    async def wait(self, exited: asyncio.Future[int], tick: float | None, readable: bool) -> None:
        """Until rg exits, ``tick`` seconds pass (None: no timer), or (if ``readable``) the pipe holds something."""
        import asyncio

        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()

        def wake(*_: object) -> None:
            if not waiter.done():
                waiter.set_result(None)

        timer = loop.call_later(tick, wake) if tick is not None else None
        exited.add_done_callback(wake)
        if readable:
            loop.add_reader(self.read_fd, wake)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            exited.remove_done_callback(wake)
            if readable:
                loop.remove_reader(self.read_fd)

    def drain(self, feed: Callable[[bytes], bool]) -> int:
        """Feed what the pipe holds now, a pipeful at most (``feed`` answers whether to go on); bytes read."""
        total = 0
        while not self.ended and total < self.capacity:
            try:
                chunk = os.read(self.read_fd, self.capacity - total)
            except BlockingIOError:
                break
            if not chunk:
                self.ended = True
                break
            total += len(chunk)
            if not feed(chunk):
                break
        self.read += total
        return total

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)
        self.read_fd = self.write_fd = -1


class Child:
    """A started rg: its vector and folder, its process, its output pipe and its stderr (non-blocking)."""

    def __init__(self, argv: list[str], cwd: str | None) -> None:
        self.argv = argv
        self.cwd = cwd
        self.pid = 0
        self.popen: Any = None  # a subprocess.Popen where rg runs from a folder of its own
        self.pidfd = -1
        self.stderr = -1
        self.pipe = OutputPipe()

    def close(self) -> None:
        """Kill rg if it still runs, reap it, close every descriptor (a child that was not adopted)."""
        if self.pid:
            try:  # noqa: SIM105 - contextlib is not imported at a listing's start
                os.kill(self.pid, _SIGKILL)
            except ProcessLookupError:
                pass
            if self.popen is not None:
                self.popen.wait()
            else:
                os.waitpid(self.pid, 0)
            self.pid = 0
        for fd in (self.pidfd, self.stderr):
            if fd >= 0:
                os.close(fd)
        self.pidfd = self.stderr = -1
        self.pipe.close()


def spawn(argv: list[str], cwd: str | None = None) -> Child:
    """Start rg as ``argv`` from ``cwd`` (None: here), its stdin /dev/null; OSError when it cannot start."""
    child = Child(argv, cwd)
    pipe = child.pipe
    try:
        err_read, err_write = os.pipe()
    except OSError:
        pipe.close()
        raise
    try:
        if cwd is None:  # as Popen starts it without a cwd: posix_spawn, no Python between fork and exec
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, pipe.write_fd, 1),
                (os.POSIX_SPAWN_DUP2, err_write, 2),
            ]
            child.pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        else:
            import subprocess

            child.popen = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=pipe.write_fd, stderr=err_write, close_fds=False
            )
            child.pid = child.popen.pid
    except OSError:
        os.close(err_read)
        pipe.close()
        raise
    finally:
        os.close(err_write)
    pipe.started()
    child.stderr = err_read
    os.set_blocking(err_read, False)
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            child.pidfd = pidfd_open(child.pid)
        except OSError:  # pragma: no cover - a kernel before 5.3, or a seccomp filter
            child.pidfd = -1
    return child
