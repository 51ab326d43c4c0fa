"""One lock a root: who builds a checkout's indexes, whether it is alive, and whether it is stuck.

Each indexed checkout (a *root*) has its own lock file under ``[index] dir``::

    locks/<digest of the real root path>.lock   {"pid": 123, "since": 1796000000.0, "root": "/abs",
                                                 "phase": "content", "done": 412, "total": 1310}
                                                its mtime: the holder's last renewal of its lease

A builder takes a root's lock before it writes anything of that root (its content index, its
declaration rows, its prose) and holds it as long as it keeps the root up to date: a server's
builder for the server's life, ``fedsearch index`` for its pass. Roots are locked one by
one, so a builder that waits for one root (another process builds it) builds the others
meanwhile, and nothing one stuck process holds stalls the rest of the folder.

- **A holder that died lets go.** The lock is a POSIX record lock (``fcntl.lockf``): the kernel
  releases it when its process ends, however it ends, and a forked child never inherits it (a
  reading worker left behind by a killed builder holds nothing). Its holder's pid is the
  kernel's answer (``F_GETLK``), not what a file says.
- **A holder that is alive but stuck is seen.** Holding is a lease: the holder renews it
  (:meth:`RootLock.renew`, the file's mtime, no bytes written: it works on a full disk)
  between files and batches, at most every :data:`RENEW_S`; a lease not renewed for
  :data:`LEASE_S` is *stuck* (:attr:`Holder.stuck`). A long call that cannot renew on its
  own (a commit, a merge, a VACUUM) is :meth:`RootLock.covering`: a thread renews meanwhile,
  for :data:`COVER_S` at most, so a call that never returns is stuck in the end.
- **How far it is.** The holder's record says what it is doing (``phase``: content, declarations,
  embedding) and how far (``done`` of ``total`` files), rewritten in place at renewals: the record
  is padded to :data:`RECORD_BYTES` when the lock is taken, so a rewrite never needs a new block
  (a full disk does not stop it).
- POSIX locks belong to a process, and closing ANY descriptor of the file lets go of them. So a
  process opens each lock file once (:data:`_held`), never to read it while it holds it, and
  two holders in one process (tests, the CLI) exclude each other through that table.

Standard library only: the one-shot CLI and ``/v1/namespaces`` read holders.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from gateway.index.content.paths import digest
from gateway.index.realpaths import real_root

__all__ = [
    "COVER_S",
    "HOLDER_S",
    "LEASE_S",
    "LOCKS",
    "RENEW_S",
    "Claims",
    "Holder",
    "Holders",
    "RootLock",
    "holder",
    "lock_path",
]

#: The folder of lock files under ``[index] dir``.
LOCKS = "locks"
#: A lease not renewed for this long is stuck (seconds): longer than any step between two renewals.
LEASE_S = 60.0
#: A holder renews at most this often (seconds).
RENEW_S = 1.0
#: The longest a thread renews the lease through one long call (:meth:`RootLock.covering`).
COVER_S = 600.0

#: The holder's record is padded to this many bytes when it takes the lock (rewrites stay in place).
RECORD_BYTES = 512

#: ``struct flock`` on Linux (short type, short whence, off_t start, off_t len, pid_t pid, padding).
_FLOCK = "hhqqi4x"

#: lock path -> the lock this process holds on it (a POSIX lock is the process's: one opening a file).
_held: dict[str, RootLock] = {}
_table = threading.Lock()


def lock_path(directory: str, root: str) -> str:
    """The lock file of one root (the same file by any symlink to it, as its content index folder)."""
    return os.path.join(os.path.expanduser(directory), LOCKS, f"{digest(real_root(root))}.lock")


@dataclass(frozen=True, slots=True)
class Holder:
    """The process holding a root's lock: its pid, since when and when it last renewed (epoch seconds,
    0 where it could not be read, as on a full disk)."""

    pid: int
    since: float
    renewed: float
    mine: bool = False  # this process holds it
    phase: str = ""  # what it is doing: content, declarations, embedding ("" unknown)
    done: int = 0
    total: int = 0
    failed: str = ""  # why its last try at the root failed (a full disk), until it gets further

    def stuck(self, now: float | None = None) -> bool:
        """Whether its lease ran out: alive, holding, and not renewing."""
        if not self.renewed:
            return False
        return (time.time() if now is None else now) - self.renewed > LEASE_S

    def describe(self, now: float | None = None) -> dict[str, object]:
        """``holder`` of ``/v1/namespaces`` (SPEC §5): the pid, since when (UTC), for how long, the lease."""
        now = time.time() if now is None else now
        out: dict[str, object] = {"pid": self.pid}
        if self.since:
            out["since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
            out["held_s"] = round(max(0.0, now - self.since), 1)
        if self.renewed:
            out["renewed_s"] = round(max(0.0, now - self.renewed), 1)
        out["stuck"] = self.stuck(now)
        if self.phase:
            out.update(phase=self.phase, done=self.done, total=self.total)
        if self.failed:
            out["failed"] = self.failed
        return out

    def words(self, now: float | None = None) -> str:
        """What a namespace waiting for it says."""
        now = time.time() if now is None else now
        held = f" for {_span(now - self.since)}" if self.since else ""
        if self.stuck(now):
            return (
                f"pid {self.pid} has held this checkout's index lock{held} and has not renewed its lease for "
                f"{_span(now - self.renewed)}: it looks stuck (searches scan meanwhile)"
            )
        return f"another process (pid {self.pid}) builds this checkout's index{held}; searches scan meanwhile"


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


class RootLock:
    """This process's hold (or wish to hold) on one root's lock."""

    def __init__(self, directory: str, root: str) -> None:
        self.root = root
        self.path = lock_path(directory, root)
        self.fd: int | None = None
        self.since = 0.0
        self._renewed = 0.0  # time.monotonic() of the last renewal
        self._doing: tuple[str, int, int, str] = ("", 0, 0, "")  # (phase, done, total, failed) reported
        self._written: tuple[str, int, int, str] | None = None  # what the record on disk says

    @property
    def held(self) -> bool:
        return self.fd is not None

    def take(self) -> bool:
        """Take the lock if nobody holds it (at once, never waiting); whether this holds it now.
        Raises OSError when the lock file cannot be made (a folder that cannot be written)."""
        if self.fd is not None:
            return True
        with _table:
            if self.path in _held:  # another holder in this process (a POSIX lock would let both in)
                return False
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    return False
                raise
            self.fd = fd
            _held[self.path] = self
        self.since = time.time()
        self._doing, self._written = ("", 0, 0, ""), None
        with contextlib.suppress(OSError):  # who holds it, for readers (on a full disk they read the pid alone)
            os.ftruncate(fd, 0)
            self._write(fd)
        self._renewed = 0.0
        self.renew()
        return True

    def _write(self, fd: int) -> None:
        """The record, padded to RECORD_BYTES, written over the old one in place."""
        phase, done, total, failed = self._doing
        record: dict[str, object] = {"pid": os.getpid(), "since": self.since, "root": self.root}
        if phase:
            record.update(phase=phase, done=done, total=total)
        if failed:
            record["failed"] = failed[:300]
        data = json.dumps(record).encode()
        os.pwrite(fd, data + b" " * max(0, RECORD_BYTES - len(data)), 0)
        self._written = self._doing

    def report(self, phase: str, done: int, total: int) -> None:
        """Say how far the work on this root is (written at the next renewal); a failure said before is over."""
        self._doing = (phase, done, total, "")

    def fail(self, why: str) -> None:
        """Say why the work on this root failed (a full disk), at once: the one place a builder that cannot write
        its index can say so (the record is rewritten in place)."""
        self._doing = (self._doing[0], self._doing[1], self._doing[2], why)
        if self.fd is not None:
            with contextlib.suppress(OSError):
                self._write(self.fd)

    def renew(self) -> None:
        """Renew the lease (at most every RENEW_S; the file's mtime: nothing written, never raises)."""
        fd = self.fd
        now = time.monotonic()
        if fd is None or now - self._renewed < RENEW_S:
            return
        self._renewed = now
        with contextlib.suppress(OSError):
            if self._doing != self._written:
                self._write(fd)  # in place: its mtime is the renewal too
            else:
                os.utime(fd)

    def covering(self, limit_s: float = COVER_S) -> contextlib.AbstractContextManager[None]:
        """Renew from a thread through a long call that cannot renew itself, for ``limit_s`` at most."""
        return _renewing(self.renew, limit_s)

    def release(self) -> None:
        """Let go (the file stays: removing it could part two processes that opened it from a third)."""
        with _table:
            fd, self.fd = self.fd, None
            if fd is None:
                return
            _held.pop(self.path, None)
            with contextlib.suppress(OSError):
                fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)


@contextlib.contextmanager
def _renewing(renew: Callable[[], None], limit_s: float) -> Iterator[None]:
    """``renew`` called every RENEW_S from a thread while the block runs, for ``limit_s`` at most."""
    done = threading.Event()

    def renewing() -> None:
        ends = time.monotonic() + limit_s
        while not done.wait(RENEW_S) and time.monotonic() < ends:
            renew()

    thread = threading.Thread(target=renewing, name="lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def holder(directory: str, root: str) -> Holder | None:
    """Who holds a root's lock (None: nobody, or it cannot be known); never raises."""
    path = lock_path(directory, root)
    with _table:
        mine = _held.get(path)
    if mine is not None:
        return Holder(os.getpid(), mine.since, time.time(), True, *mine._doing)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
        except OSError:
            return None
        kind, _, _, _, pid = struct.unpack(_FLOCK, answer)
        if kind == fcntl.F_UNLCK:
            return None
        since, phase, done, total = 0.0, "", 0, 0
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, KeyError):
            record = json.loads(os.pread(fd, 4096, 0) or b"{}")
            if record.get("pid") == pid or pid <= 0:
                pid = pid if pid > 0 else int(record["pid"])
                since = float(record.get("since", 0.0))
                phase, done, total = (
                    str(record.get("phase", "")),
                    int(record.get("done", 0)),
                    int(record.get("total", 0)),
                )
        renewed = 0.0
        with contextlib.suppress(OSError):
            renewed = os.fstat(fd).st_mtime
        return Holder(pid, since, renewed, False, phase, done, total)
    finally:
        os.close(fd)


#: How long a lock's holder, once read, is taken as known (seconds): reading every holder's record at every
#: ``/v1/namespaces`` cost 117-124 ms of CPU an answer over 1,248 building checkouts, taken from the builder by
#: whoever polls for readiness.
HOLDER_S = 1.0


class Holders:
    """Who holds the locks of the roots of one index folder, each read at most once every HOLDER_S (answers
    that name a building checkout's holder: ``/v1/namespaces``, a semantic answer while its index builds)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._seen: dict[str, tuple[float, Holder | None]] = {}  # root: (when read, its holder)

    def get(self, root: str) -> Holder | None:
        """Who holds ``root``'s lock (None: nobody, or it cannot be known), as read at most HOLDER_S ago."""
        now = time.monotonic()
        seen = self._seen.get(root)
        if seen is not None and now - seen[0] < HOLDER_S:
            return seen[1]
        by = holder(self.directory, root)
        self._seen[root] = (now, by)
        return by


class Claims:
    """One builder's locks on its roots: those it holds, and those it waits for (another process holds
    them; taken when they are let go)."""

    def __init__(self, directory: str, roots: Iterable[str]) -> None:
        self.locks = {root: RootLock(directory, root) for root in dict.fromkeys(roots)}
        self.error = ""  # why no lock could be made, if none could (a folder that cannot be written)
        self._renewed = 0.0  # time.monotonic() of the last renewal

    def take(self) -> list[str]:
        """Take what is free of the roots not held yet; the roots taken now."""
        taken = []
        for root, lock in self.locks.items():
            if lock.held:
                continue
            try:
                if lock.take():
                    taken.append(root)
                self.error = ""
            except OSError as exc:
                self.error = exc.strerror or str(exc)
        return taken

    def holds(self, root: str) -> bool:
        lock = self.locks.get(root)
        return lock is not None and lock.held

    def report(self, root: str, phase: str, done: int, total: int) -> None:
        """How far the work on ``root`` is (see :meth:`RootLock.report`)."""
        lock = self.locks.get(root)
        if lock is not None:
            lock.report(phase, done, total)

    def fail(self, root: str, why: str) -> None:
        """Why the work on ``root`` failed (see :meth:`RootLock.fail`)."""
        lock = self.locks.get(root)
        if lock is not None:
            lock.fail(why)

    def waiting(self) -> list[str]:
        """The roots another process holds."""
        return [root for root, lock in self.locks.items() if not lock.held]

    def renew(self) -> None:
        """Renew every held lease (at most every RENEW_S: cheap enough to ask between any two files)."""
        now = time.monotonic()
        if now - self._renewed < RENEW_S:
            return
        self._renewed = now
        for lock in self.locks.values():
            lock.renew()

    def covering(self, limit_s: float = COVER_S) -> contextlib.AbstractContextManager[None]:
        """Renew every held lease from one thread through a long call (see :meth:`RootLock.covering`)."""
        return _renewing(self.renew, limit_s)

    def release(self) -> None:
        for lock in self.locks.values():
            lock.release()
