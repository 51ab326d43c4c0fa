"""Changes to local checkouts as Linux inotify reports them, so the content index is never stale.

A search must see every change made before it started. The kernel queues an inotify event
within the syscall that causes it, so draining the non-blocking inotify fd when a search
starts sees every change completed before it: no polling, no sleep, no third-party package
(``ctypes`` on libc's ``inotify_*`` calls). :meth:`Watcher.read` turns the queue into
:class:`Change` values:

- ``"file"``: one file's content, attributes or presence changed; the index re-reads it.
- ``"tree"``: the set of files may have changed in a way not followed file by file (a
  directory made, deleted or moved, a watched one gone, an ignore file changed, the queue
  overflowed, a directory not watchable). The index of that root cannot be trusted until the
  root is listed again; the caller then calls :meth:`Watcher.add` with its directories again
  (watches held are kept) and drops the root when that returns False.

Names starting with "." are hidden (``rg`` never searches them): their events are dropped,
except the ignore files', and hidden directories are never watched.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import struct
from collections.abc import Iterable
from ctypes import c_char_p, c_int, c_uint32
from types import TracebackType
from typing import Literal, NamedTuple

__all__ = ["IGNORE_FILES", "Change", "Event", "Watcher", "parse_events"]

#: Files whose change alters which files rg searches: any event on one is a "tree" change.
IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_EXCL_UNLINK, IN_ISDIR = 0x1000000, 0x2000000, 0x4000000, 0x40000000
_FILE_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
_MASK = _FILE_EVENTS | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
_HEADER = struct.Struct("=iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
_BUFFER = 1 << 16
_SIGNATURES = {
    "inotify_init1": [c_int],
    "inotify_add_watch": [c_int, c_char_p, c_uint32],
    "inotify_rm_watch": [c_int, c_int],
}


class Change(NamedTuple):
    """What changed: ``path`` is relative to ``root`` ("/" separators), "" for the root itself."""

    root: str
    path: str
    kind: Literal["file", "tree"]


class Event(NamedTuple):
    """One ``struct inotify_event``; ``name`` is "" when the event is about the watched directory itself."""

    wd: int
    mask: int
    cookie: int
    name: str


def parse_events(data: bytes) -> list[Event]:
    """The events in ``data``, bytes read from an inotify fd (a truncated last event is dropped)."""
    events, offset = [], 0
    while offset + _HEADER.size <= len(data):
        wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size + length
        if offset > len(data):
            break
        name = data[offset - length : offset].split(b"\0", 1)[0]
        events.append(Event(wd, mask, cookie, os.fsdecode(name)))
    return events


@functools.cache
def _libc() -> ctypes.CDLL:
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # TypeError off POSIX, AttributeError without inotify
        for name, args in _SIGNATURES.items():
            getattr(libc, name).argtypes = args
    except (OSError, AttributeError, TypeError) as exc:
        raise OSError(errno.ENOSYS, f"inotify is not available: {exc}") from exc
    return libc


def _call(name: str, *args: int | bytes) -> int:
    """libc's ``name(*args)`` (each returns an int); OSError with its errno when it returns -1."""
    if (result := int(getattr(_libc(), name)(*args))) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


class Watcher:
    """An inotify instance following the directories of one or more roots (see the module docstring)."""

    def __init__(self, follow_new: bool = True) -> None:
        """``follow_new``: watch a directory made inside a watched one at once (and what it holds); the
        content index says False: it lists a checkout again after any tree change and then watches the
        folders rg searches, so an ignored ``node_modules`` or ``build`` made meanwhile is never watched."""
        self.follow_new = follow_new
        self._fd = _call("inotify_init1", os.O_NONBLOCK | os.O_CLOEXEC)
        self._roots: dict[str, None] = {}  # insertion-ordered
        self._wds: dict[int, list[tuple[str, str]]] = {}  # one wd may be one directory of several roots

    def fileno(self) -> int:
        return self._fd

    def roots(self) -> frozenset[str]:
        return frozenset(self._roots)

    def add(self, root: str, dirs: Iterable[str]) -> bool:
        """Watch these directories of ``root`` ("" is the root); False if one could not be (one gone is skipped)."""
        self._roots.setdefault(root, None)
        try:
            for rel in dirs:
                self._watch(root, rel)
        except OSError:
            return False
        return True

    def add_every(self, root: str, dirs: Iterable[str]) -> bool:
        """Watch these directories of ``root``; whether every one of them is watched now (one gone, or one
        that could not be watched: False). Asking again for a directory watched already is one syscall."""
        self._roots.setdefault(root, None)
        try:
            return all(self._watch(root, rel) for rel in dirs)
        except OSError:
            return False

    def remove(self, root: str) -> None:
        """Stop watching ``root``: none of its events, queued or later, is reported."""
        self._forget(root, "")
        self._roots.pop(root, None)

    def read(self) -> list[Change]:
        """Every change queued now, without blocking, duplicates coalesced in order of first appearance."""
        chunks: list[bytes] = []
        while self._fd >= 0:
            try:
                chunks.append(os.read(self._fd, _BUFFER))
            except BlockingIOError:
                break
            except OSError:
                return [Change(root, "", "tree") for root in self._roots]
        return self.changes(parse_events(b"".join(chunks)))

    def changes(self, events: Iterable[Event]) -> list[Change]:
        """What ``events`` mean; directories created are watched at once (``read()`` feeds it, tests too)."""
        out: dict[Change, None] = {}
        for event in events:
            out.update(dict.fromkeys(self._event(event)))
        return list(out)

    def _event(self, event: Event) -> list[Change]:
        mask, name = event.mask, event.name
        if mask & IN_Q_OVERFLOW:  # events were lost: every root must be listed again
            return [Change(root, "", "tree") for root in self._roots]
        if mask & (IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF | IN_UNMOUNT):
            entries = self._wds.pop(event.wd, []) if mask & IN_IGNORED else list(self._wds.get(event.wd, []))
            if mask & IN_MOVE_SELF:  # it lives at a path we do not know any more, and so do its subdirectories
                for root, rel in entries:
                    self._forget(root, rel)
            return [Change(root, rel, "tree") for root, rel in entries]
        changes = []
        for root, rel in list(self._wds.get(event.wd, [])):
            path = f"{rel}/{name}" if rel and name else rel or name
            if not name:
                if mask & IN_ISDIR:
                    changes.append(Change(root, path, "tree"))  # the directory's own attributes
            elif name in IGNORE_FILES and not mask & IN_ISDIR:
                changes.append(Change(root, path, "tree"))
            elif name.startswith("."):
                continue
            elif mask & IN_ISDIR:
                changes.append(Change(root, path, "tree"))
                if mask & IN_MOVED_FROM:
                    self._forget(root, path)
                if self.follow_new and mask & (IN_CREATE | IN_MOVED_TO) and not self._watch_tree(root, path):
                    changes.append(Change(root, "", "tree"))
            elif mask & _FILE_EVENTS:
                changes.append(Change(root, path, "file"))
        return changes

    def _watch(self, root: str, rel: str) -> bool:
        """Watch ``root``/``rel``; whether it is watched (False: it is gone or not a directory), OSError if it
        cannot be watched."""
        try:
            wd = _call("inotify_add_watch", self._fd, os.fsencode(os.path.join(root, rel) if rel else root), _MASK)
        except (FileNotFoundError, NotADirectoryError):
            return False
        entries = self._wds.setdefault(wd, [])
        if (root, rel) not in entries:
            entries.append((root, rel))
        return True

    def _watch_tree(self, root: str, rel: str) -> bool:
        """Watch a new directory and its subdirectories not hidden (made before the watch began); False on a failure."""
        stack = [rel]
        while stack:
            rel = stack.pop()
            try:
                self._watch(root, rel)
                with os.scandir(os.path.join(root, rel)) as entries:
                    subdirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return False
            stack.extend(f"{rel}/{name}" for name in subdirs if not name.startswith("."))
        return True

    def _forget(self, root: str, rel: str) -> None:
        """Stop following ``rel`` of ``root`` and its subdirectories ("" is all); a wd nobody follows is removed."""
        for wd, entries in list(self._wds.items()):
            kept = [(r, d) for r, d in entries if r != root or (rel and d != rel and not d.startswith(rel + "/"))]
            if kept:
                self._wds[wd] = kept
                continue
            del self._wds[wd]
            with contextlib.suppress(OSError):  # gone with its directory already
                _call("inotify_rm_watch", self._fd, wd)  # its IN_IGNORED then finds no entry: dropped

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._wds.clear()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
