"""Which checkouts the index folder holds, when each was last used, and which a running process uses.

Every indexed checkout (a *root*) has a marker under ``<[index] dir>/roots/``::

    roots/
        <digest of the root>.json   {"root": "/abs/path", "names": ["flask", ...]}; its mtime: last use
        live/<pid>-<token>.json     ["/abs/root", ...]: the roots of one running builder, locked by it

Last use is the marker's mtime: a search or a build that uses a root sets it to now
(:func:`touch`), at most every :data:`TOUCH_S` per root and process, with one ``utime``
and no lock, so nothing waits for it. ``names`` are the namespace names configs gave the
root (what ``fedsearch index --status`` shows); a builder writes the marker whole when it
starts (:func:`register`), only where a name is new.

A root in use by a running process: each background builder, for as long as it lives,
holds an exclusive ``flock`` on a ``live/`` file listing its roots (:class:`Live`, taken
before it waits for the index lock, so a builder that waits is seen too). A pruner that
can take that lock knows its owner is gone and removes the file; one that cannot reads
the roots in it and leaves them alone (:func:`in_use`). The kernel lets go of a flock when
its process dies, however it dies, so a crashed server never pins its roots.

Standard library only: the one-shot CLI touches the roots it searches.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping

from gateway.index.content.paths import digest

__all__ = [
    "TOUCH_S",
    "Live",
    "Marker",
    "folder_bytes",
    "in_use",
    "marker_path",
    "markers",
    "markers_of",
    "register",
    "remove",
    "roots_dir",
    "touch",
]

#: A root's last use is written at most this often by one process (seconds).
TOUCH_S = 300.0

#: root -> when this process last wrote its last use (``time.monotonic()``).
_touched: dict[str, float] = {}


def folder_bytes(directory: str) -> int:
    """Every file under the index folder together (bytes): what ``[index] max_bytes`` bounds."""
    total = 0
    for dirpath, _, names in os.walk(os.path.expanduser(directory)):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name), follow_symlinks=False).st_size
    return total


def roots_dir(directory: str) -> str:
    """The folder of root markers under ``[index] dir``."""
    return os.path.join(os.path.expanduser(directory), "roots")


def marker_path(directory: str, root: str) -> str:
    """The marker of one root (``root`` absolute)."""
    return os.path.join(roots_dir(directory), f"{digest(root)}.json")


class Marker:
    """One root's marker as read: the root, the names configs gave it, its last use (epoch seconds)."""

    __slots__ = ("last_used", "names", "path", "root")

    def __init__(self, path: str, root: str, names: tuple[str, ...], last_used: float) -> None:
        self.path = path
        self.root = root
        self.names = names
        self.last_used = last_used


def _write(path: str, data: bytes) -> None:
    aside = f"{path}.{os.getpid()}.tmp"
    try:
        with open(aside, "wb") as handle:
            handle.write(data)
        os.replace(aside, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(aside)
        raise


def _read(path: str) -> Marker | None:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read())
            last_used = os.fstat(handle.fileno()).st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("root"), str):
        return None
    names = tuple(str(n) for n in data.get("names", ()) if isinstance(n, str))
    return Marker(path, data["root"], names, last_used)


def touch(directory: str, roots: Iterable[str]) -> None:
    """Record that ``roots`` are used now: each marker's mtime set, at most every TOUCH_S a root in
    this process; a root without a marker is left so (:func:`register` writes one). Never raises."""
    now = time.monotonic()
    for root in roots:
        if now - _touched.get(root, -TOUCH_S) < TOUCH_S:
            continue
        _touched[root] = now
        with contextlib.suppress(OSError):
            os.utime(marker_path(directory, root))


def register(directory: str, roots: Mapping[str, Iterable[str]]) -> None:
    """Record that ``roots`` (root -> namespace names a config gives it) are used now, their markers
    written where there is none or a name is new (else only their mtime set). Never raises: a folder
    that cannot be written keeps no last use."""
    now = time.monotonic()
    for root, names in roots.items():
        path = marker_path(directory, root)
        found = _read(path)
        known = set(found.names) if found is not None and found.root == root else set()
        wanted = set(names) | known
        try:
            if found is not None and found.root == root and wanted == known:
                os.utime(path)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                _write(path, json.dumps({"root": root, "names": sorted(wanted)}).encode())
        except OSError:
            continue
        _touched[root] = now


def markers(directory: str) -> dict[str, Marker]:
    """Every root's marker under ``directory``: root -> marker."""
    out: dict[str, Marker] = {}
    folder = roots_dir(directory)
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".json") and entry.is_file():
                found = _read(entry.path)
                if found is not None:
                    out[found.root] = found
    return out


def markers_of(directory: str, roots: Iterable[str]) -> dict[str, Marker]:
    """The markers of some roots (those that have one): root -> marker."""
    out: dict[str, Marker] = {}
    for root in roots:
        found = _read(marker_path(directory, root))
        if found is not None and found.root == root:
            out[root] = found
    return out


def remove(directory: str, root: str) -> None:
    """Forget a root's marker (it was pruned)."""
    with contextlib.suppress(OSError):
        os.remove(marker_path(directory, root))
    _touched.pop(root, None)


class Live:
    """This process's claim on its roots: a ``live/`` file it holds locked for as long as it lives."""

    def __init__(self, directory: str, roots: Iterable[str]) -> None:
        import fcntl
        import secrets

        folder = os.path.join(roots_dir(directory), "live")
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{os.getpid()}-{secrets.token_hex(4)}.json")
        aside = self.path + ".tmp"
        fd = os.open(aside, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # locked before it has its name: no pruner sees it unlocked
            os.write(fd, json.dumps(sorted(set(roots))).encode())
            os.replace(aside, self.path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.remove(aside)
            raise
        self.fd: int | None = fd

    def close(self) -> None:
        """Let go of the roots (the file removed, then its lock released)."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)
        os.close(fd)


def in_use(directory: str, mine: Iterable[str] = ()) -> set[str]:
    """The roots a running builder holds (``mine``, this process's, among them); the files of builders
    that are gone are removed on the way."""
    import fcntl

    out = set(mine)
    folder = os.path.join(roots_dir(directory), "live")
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its builder runs: its roots are in use
                with contextlib.suppress(ValueError, OSError):
                    held = json.loads(os.read(fd, 1 << 24) or b"[]")
                    out.update(str(r) for r in held if isinstance(r, str))
                continue
            with contextlib.suppress(OSError):
                os.remove(path)  # its builder is gone (the kernel let go of its lock)
        finally:
            os.close(fd)
    return out
