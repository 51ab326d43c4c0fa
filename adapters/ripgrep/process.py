"""A child process (``rg``) run by :class:`subprocess.Popen` and watched from the event loop.

asyncio's subprocess layer puts a transport and a protocol on every pipe, and an
exit reaches the coroutine waiting for it through the child watcher, a thread-safe
wake-up and four more turns of the loop. For a search that is a few hundred
microseconds before rg starts and after it ends, serial with rg itself. A
:class:`Child` is watched directly: its exit through a pidfd the loop polls (Linux
5.3+), else through a thread blocked in ``waitpid``; its stderr is read as it comes,
the first :data:`STDERR_KEEP` bytes kept. Its stdout is whatever descriptor the
caller hands in (rg's :class:`~adapters.ripgrep.output.OutputPipe`).

Started without a working directory of its own, the child is started by
``posix_spawn``: Popen uses it only when it need not ``chdir`` or close descriptors
in the child, else it runs its own code between ``vfork`` and ``exec``, which is much
slower to start rg (bench/README.md has the figures).

The child is reaped by this class alone: :meth:`close` after :attr:`exited` is done
(kill it first to stop it early) leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Sequence

from adapters.ripgrep.output import STDERR_KEEP, read_stderr

__all__ = ["STDERR_KEEP", "Child"]


class Child:
    """A started child: :attr:`exited` is its return code once it was reaped."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        stdout: int,
        stdin: int | None = None,
        pidfd: bool = True,
        nice: int = 0,
    ) -> None:
        """Start ``argv`` (its first item a path) with ``stdout`` as its stdout and ``stdin``
        (None: /dev/null) as its stdin; raises OSError if it cannot start.

        Without a ``cwd`` the child is started by ``posix_spawn`` (see the module's
        note), else by ``vfork``. Descriptors are not closed one by one in the child: every
        descriptor Python opens is close-on-exec, so the child inherits only its stdio.
        ``nice`` lowers its priority as soon as it started (before it starts its threads,
        which inherit it): set without a ``preexec_fn``, which would cost ``posix_spawn``.
        """
        loop = asyncio.get_running_loop()
        err_read, err_write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=stdout,
                stderr=err_write,
                close_fds=False,
            )
        except BaseException:
            os.close(err_read)
            raise
        finally:
            os.close(err_write)
        if nice:
            with contextlib.suppress(OSError):  # gone already, or not ours to lower: it runs as it is
                os.setpriority(os.PRIO_PROCESS, self._proc.pid, nice)
        self._loop = loop
        self.exited: asyncio.Future[int] = loop.create_future()
        self._kept = bytearray()
        self._stderr = err_read
        os.set_blocking(err_read, False)
        loop.add_reader(err_read, self._read_stderr)
        self._pidfd = _pidfd_of(self._proc.pid) if pidfd else -1
        if self._pidfd >= 0:
            loop.add_reader(self._pidfd, self._reap)
        else:  # no pidfds here: a thread waits (Popen's lock keeps kill() from racing it)
            loop.run_in_executor(None, self._proc.wait).add_done_callback(self._waited)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The return code once reaped (negative: killed by that signal), else None."""
        return self._proc.returncode

    @property
    def stderr(self) -> bytes:
        """The first bytes the child wrote to its stderr (all of them once it exited)."""
        return bytes(self._kept)

    def kill(self) -> None:
        """SIGKILL, unless it was reaped already (its pid could be someone else's by now)."""
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def stop(self) -> None:
        """Kill it if it still runs, and wait until it was reaped."""
        if not self.exited.done():
            self.kill()
            await asyncio.shield(self.exited)

    def close(self) -> None:
        """Stop watching and close its descriptors (call once it exited)."""
        self._unwatch()
        self._close_stderr()

    def reap_now(self) -> None:
        """Kill it, wait for it here (not in the loop, which may be gone) and close everything."""
        self.kill()
        self._proc.wait()
        self.close()

    # --- the loop's side ----------------------------------------------------------------

    def _reap(self) -> None:
        code = self._proc.poll()
        if code is None:  # pragma: no cover - a pidfd is readable only once the child ended
            return
        self._unwatch()
        self._read_stderr()  # what is left of it: the child is gone, so up to its end
        if not self.exited.done():
            self.exited.set_result(code)

    def _waited(self, waited: asyncio.Future[int]) -> None:
        if not waited.cancelled():
            self._reap()

    def _unwatch(self) -> None:
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def _read_stderr(self) -> None:
        if self._stderr >= 0 and read_stderr(self._stderr, self._kept):
            self._close_stderr()

    def _close_stderr(self) -> None:
        if self._stderr >= 0:
            self._loop.remove_reader(self._stderr)
            os.close(self._stderr)
            self._stderr = -1


def _pidfd_of(pid: int) -> int:
    """A pidfd for ``pid``, or -1 where the kernel or Python has none."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:  # pragma: no cover - not Linux, or Python built without it
        return -1
    try:
        return int(pidfd_open(pid))
    except OSError:  # pragma: no cover - a kernel before 5.3, or a seccomp filter
        return -1
