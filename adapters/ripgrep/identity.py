"""A local checkout's content identities: git blob ids from ``git ls-files -s``, changed files hashed.

``git ls-files -s --debug -z`` (one subprocess per root, once) gives every tracked file's
blob id with the size and modification time git recorded for it. A file whose size and
time are still those is that blob (git itself trusts the same test, and marks an entry
written in the same instant as its file with size 0, so that one is looked at again);
any other file is hashed the way git does (``blob <size>\\0`` then the bytes), and the
result kept for that size and time. Nothing here writes to the checkout or its index.

A search asks :meth:`GitIdentities.claimed` of every file it answers with (a dict
lookup) and :meth:`GitIdentities.exact` only of files whose claim another file shares
(a stat; reading the file only where it changed). A server loads and checks every
file once at start-up (:meth:`GitIdentities.warm`, in a thread); a one-shot search
loads the blob ids when it first needs them. A root that is not in a git checkout, or a
file git does not track and that never changed, has no identity: it is never merged.
"""

from __future__ import annotations

import os
import queue
import re
import select
import stat
import threading
import time

from gateway.dedup.identity import GIT, blob_id

__all__ = ["MAX_HASHED_BYTES", "GitIdentities", "identities_for", "parse_ls_files", "warm_later"]

#: A changed file larger than this is not hashed (it has no identity).
MAX_HASHED_BYTES = 16 << 20
#: A file modified this recently is hashed again next time (it may still be changing).
SETTLE_NS = 2_000_000_000
#: The longest git may take to list a checkout.
GIT_TIMEOUT_S = 30.0
_SIGKILL = 9  # signal.SIGKILL, without importing signal (as adapters.ripgrep.spawn)

_ENTRY = re.compile(
    rb"(\d{6}) ([0-9a-f]{40,64}) (\d)\t([^\0]*)\0"
    rb"  ctime: [^\n]*\n  mtime: (\d+):(\d+)\n  dev: [^\n]*\n  uid: [^\n]*\n  size: (\d+)\t"
)
_REGULAR = (b"100644", b"100755")

#: path -> (blob id, modification time in ns, size) as git recorded them.
Entries = dict[str, tuple[str, int, int]]


def parse_ls_files(out: bytes) -> Entries:
    """``git ls-files -s --debug -z``'s output as entries: regular files at stage 0 only."""
    entries: Entries = {}
    for mode, blob, stage, path, seconds, nanos, size in _ENTRY.findall(out):
        if stage != b"0" or mode not in _REGULAR:
            continue
        name = os.fsdecode(path)
        entries[name] = (blob.decode("ascii"), int(seconds) * 1_000_000_000 + int(nanos), int(size))
    return entries


class GitIdentities:
    """The identities of one root's files (see the module docstring); safe to share between threads."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._entries: Entries | None = None
        self._claims: dict[str, str] | None = None  # path -> what it was when last looked at (git:<id>)
        self._hashed: dict[str, tuple[int, int, str]] = {}  # path -> (mtime ns, size, identity)
        self._lock = threading.Lock()
        #: What loading cost: seconds in git, and files listed (bench/dedup.py reports them).
        self.load_s = 0.0

    def _load(self) -> Entries:
        entries = self._entries
        if entries is not None:
            return entries
        with self._lock:
            if self._entries is None:
                started = time.perf_counter()
                entries = self._ls_files()
                self._claims = {path: GIT + entry[0] for path, entry in entries.items()}
                self._entries = entries
                self.load_s = time.perf_counter() - started
            return self._entries

    def _ls_files(self) -> Entries:
        argv = ["git", "-C", self.root, "ls-files", "-s", "--debug", "-z"]
        out = _output(argv, {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}, GIT_TIMEOUT_S)
        return parse_ls_files(out) if out is not None else {}

    def __len__(self) -> int:
        return len(self._load())

    def claims(self) -> dict[str, str]:
        """What each file was when last looked at, by path: its blob id in git's index, or its hash
        where it had changed (loaded on first use)."""
        claims = self._claims
        if claims is None:
            self._load()
            claims = self._claims or {}
        return claims

    def claimed(self, path: str) -> str:
        """What one file was when last looked at (:meth:`claims`)."""
        return self.claims().get(path, "")

    def exact(self, path: str) -> str:
        """The file's identity now: its blob id where git's record of it still holds, else its bytes hashed."""
        full = os.path.join(self.root, path)
        try:
            st = os.stat(full)
        except OSError:
            return ""
        if not stat.S_ISREG(st.st_mode):
            return ""
        mtime, size = st.st_mtime_ns, st.st_size
        entry = self._load().get(path)
        if entry is not None and entry[1] == mtime and entry[2] == size:
            return GIT + entry[0]
        hashed = self._hashed.get(path)
        if hashed is not None and hashed[0] == mtime and hashed[1] == size:
            return hashed[2]
        return self._hash(path, full, mtime, size)

    def _hash(self, path: str, full: str, mtime: int, size: int) -> str:
        if size > MAX_HASHED_BYTES:
            return ""
        try:
            with open(full, "rb") as handle:
                data = handle.read(MAX_HASHED_BYTES + 1)
        except OSError:
            return ""
        if len(data) != size:  # it changed while read
            return ""
        identity = GIT + blob_id(data)
        if mtime < time.time_ns() - SETTLE_NS:
            self._hashed[path] = (mtime, size, identity)
            if self._claims is not None:
                self._claims[path] = identity
        return identity

    def warm(self) -> int:
        """Load the blob ids and check every tracked file now (hashing those that changed); how many
        were hashed. A server runs this once at start-up, in a thread."""
        changed = 0
        for path, (_, mtime, size) in list(self._load().items()):
            full = os.path.join(self.root, path)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if st.st_mtime_ns == mtime and st.st_size == size:
                continue
            if stat.S_ISREG(st.st_mode) and self._hash(path, full, st.st_mtime_ns, st.st_size):
                changed += 1
        return changed


def _output(argv: list[str], env: dict[str, str], timeout_s: float) -> bytes | None:
    """What ``argv`` printed, or None when it could not start, failed or ran past ``timeout_s`` (then killed).

    posix_spawn and a pipe, as rg is started (:mod:`adapters.ripgrep.spawn`): ``subprocess`` would
    cost a one-shot search its import (tests/test_cli_admin.py counts them)."""
    try:
        read_fd, write_fd = os.pipe()
    except OSError:
        return None
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, write_fd, 1),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    try:
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions)
    except OSError:
        os.close(read_fd)
        return None
    finally:
        os.close(write_fd)
    chunks: list[bytes] = []
    killed = False
    deadline = time.monotonic() + timeout_s
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    try:
        while True:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0 or not poller.poll(left_ms):
                os.kill(pid, _SIGKILL)
                killed = True
                break
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    if killed or os.waitstatus_to_exitcode(status) != 0:
        return None
    return b"".join(chunks)


_SHARED: dict[str, GitIdentities] = {}
_SHARED_LOCK = threading.Lock()


def identities_for(root: str) -> GitIdentities:
    """The one :class:`GitIdentities` of ``root`` in this process (every namespace and scan over it shares it)."""
    found = _SHARED.get(root)
    if found is None:
        with _SHARED_LOCK:
            found = _SHARED.setdefault(root, GitIdentities(root))
    return found


_WARMING: queue.SimpleQueue[GitIdentities] = queue.SimpleQueue()
_warmer: threading.Thread | None = None
_queued: set[str] = set()


def warm_later(identities: GitIdentities) -> None:
    """Warm ``identities`` (:meth:`GitIdentities.warm`) in the one background thread that warms
    every root in turn, once each: a server's 32 checkouts are not 32 gits at once."""
    global _warmer
    with _SHARED_LOCK:
        if identities.root in _queued:
            return
        _queued.add(identities.root)
        _WARMING.put(identities)
        if _warmer is None or not _warmer.is_alive():
            _warmer = threading.Thread(target=_warm_all, name="fedsearch-identities", daemon=True)
            _warmer.start()


#: Roots warmed back to back; past them (a server of thousands of checkouts), the warming thread rests as
#: long as each warm took, so that its gits take at most half a core from the first searches.
WARM_BURST = 64
#: While a search runs in this process, the warming thread waits before its next root (its git and its
#: parsing take a core and the GIL from the search), at most this long a root: under constant load it goes on.
WARM_YIELD_S = 1.0
_YIELD_STEP_S = 0.01


def _warm_all() -> None:
    from gateway.serving import IDLE  # the searches running in this process (a server's: the CLI never warms)

    warmed = 0
    while True:
        try:
            identities = _WARMING.get(timeout=1.0)
        except queue.Empty:
            return
        waited = 0.0
        while IDLE.active and waited < WARM_YIELD_S:
            time.sleep(_YIELD_STEP_S)
            waited += _YIELD_STEP_S
        started = time.monotonic()
        try:
            identities.warm()
        except Exception as exc:  # pragma: no cover - a root gone meanwhile: searched without a warm start
            from gateway.log import get_logger  # the one-shot CLI never warms: it imports no logging

            get_logger("fedsearch.identity").warning(
                "identities_warm_failed", root=identities.root, error=type(exc).__name__
            )
        warmed += 1
        if warmed > WARM_BURST:
            time.sleep(time.monotonic() - started)
