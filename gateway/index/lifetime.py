"""Every process an index build starts ends with the process that started it, however that one ends.

Three guards, each enough on its own for the case it covers:

- **The parent's end is the kernel's signal** (:func:`die_with_parent`): ``prctl(PR_SET_PDEATHSIG,
  SIGKILL)`` makes Linux kill the builder when the server (or CLI) that started it ends, by any
  signal, SIGKILL included; and its reading workers when the builder ends. It is set first thing
  in the new process, then the parent is checked again (it may have gone just before).
- **The end of its stdin** (:func:`watch_stdin`): the parent holds the only writing end of the
  builder's stdin, so its end, or its :meth:`~gateway.index.background.BuilderProcess.stop`, is
  end-of-file there. The builder then stops at its next file, and a thread that waits for that
  hang-up ends the builder's whole process group (its workers, its rg) :data:`GRACE_S` later if
  it has not ended by itself: a builder stuck in a call ends too.
- **Its process group** (:func:`end_group`): a builder leads a process group of its own (a
  terminal's Ctrl-C is the server's to handle), which holds everything it started; the parent
  ends the group, not just the builder, when the builder does not stop in time.

Like systemd's ``KillMode=control-group``: nothing of a build outlives the service.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import threading
import time

__all__ = ["GRACE_S", "die_with_parent", "end_group", "watch_stdin"]

#: How long a builder whose parent went away (or asked it to stop) has to stop by itself (seconds).
GRACE_S = 1.0
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> bool:
    """Have the kernel SIGKILL this process when ``parent`` ends (Linux); exit at once if it has ended
    already. Whether the kernel took it (not on other systems)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        taken = bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        taken = False
    if os.getppid() != parent:  # it ended before the kernel was asked
        os._exit(0)
    return taken


def end_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal every process of a group (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def watch_stdin(fd: int, grace_s: float = GRACE_S) -> threading.Event:
    """A thread that waits for ``fd`` (a pipe) to hang up, then gives this process ``grace_s`` to end by
    itself, then ends its process group (this process alone where it leads none); the event it sets at
    the hang-up (what the work asks between files)."""
    hung_up = threading.Event()

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLHUP | select.POLLERR)
        while True:
            try:
                events = poller.poll()
            except InterruptedError:  # pragma: no cover - retried by Python itself since 3.5
                continue
            if any(flags & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, flags in events):
                break
            time.sleep(0.05)  # only data is waiting: the main thread reads it
        hung_up.set()
        time.sleep(grace_s)
        if os.getpgrp() == os.getpid():
            end_group(os.getpgrp())
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    return hung_up
