"""Whether the content index still tells the truth about a checkout: what changed since it was built.

A file the engine holds is *clean* when it is what was read: the same (size, mtime, ctime:
a copy that kept an old mtime still has a new ctime), and read at least :data:`RACY_NS`
after it was last written (otherwise a second write within
the file system's timestamp granularity could have left its (size, mtime) unchanged:
git's "racily clean" entries). A file the engine does not hold is clean when it does not
exist, or when its folder was listed after it was last written (rg does not list it:
it is ignored or hidden). Anything else is *stale*, and a search reads its folder as a
scan would (rg over the folder, one level deep), so a stale index never hides a match.

A folder holding a folder the index never listed means files the index knows nothing
about, in a place one level of a folder does not reach: the whole checkout is scanned
until a builder lists it again.

:func:`check` looks at every file and folder of a manifest (the one-shot CLI, at every
search; a server, once, when it begins to follow a checkout); :func:`clean` at one path
(a server, for the paths its file watcher reported).
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Iterable

from gateway.index.content.layout import Entry, Folder, Manifest

__all__ = ["RACY_NS", "Staleness", "check", "clean", "file_stat", "folder_clean", "parent", "stale"]

#: A file read sooner than this after it was written may have changed again unseen (2 s:
#: coarser than any file system's timestamps but FAT's).
RACY_NS = 2_000_000_000


def parent(path: str) -> str:
    """The root-relative folder of a root-relative path ("" for the root)."""
    return path.rpartition("/")[0]


def _stat(path: str) -> tuple[int, int, int, int] | None:
    """(size, mtime_ns, ctime_ns, mode) of a path (not followed), None when it is not there."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode


def file_stat(path: str) -> tuple[int, int, int] | None:
    """(size, mtime_ns, ctime_ns) of a regular file, None when it is not one (any more)."""
    now = _stat(path)
    if now is None or not stat_module.S_ISREG(now[3]):
        return None
    return now[0], now[1], now[2]


def _entry_clean(entry: Entry, now: tuple[int, int, int, int] | None) -> bool:
    return (
        now is not None
        and stat_module.S_ISREG(now[3])
        and now[0] == entry.size
        and now[1] == entry.mtime_ns
        and now[2] == entry.ctime_ns
        and entry.read_ns - max(entry.mtime_ns, entry.ctime_ns) >= RACY_NS
    )


def _folder_clean(folder: Folder, now: tuple[int, int, int, int] | None) -> bool:
    return now is not None and now[1] == folder.mtime_ns and folder.listed_ns - folder.mtime_ns >= RACY_NS


def folder_clean(root: str, rel: str, manifest: Manifest) -> bool:
    """Whether a folder (root-relative) holds the files it held when the index listed it."""
    folder = manifest.folders.get(rel)
    return folder is not None and _folder_clean(folder, _stat(os.path.join(root, rel) if rel else root))


def clean(root: str, path: str, manifest: Manifest) -> bool:
    """Whether a file (root-relative) is what the index says of it (see the module)."""
    now = _stat(os.path.join(root, path))
    entry = manifest.files.get(path)
    if entry is not None:
        return _entry_clean(entry, now)
    if now is None:
        return True
    rel = parent(path)
    folder = manifest.folders.get(rel)
    if folder is None or not _folder_clean(folder, _stat(os.path.join(root, rel) if rel else root)):
        return False
    return folder.listed_ns - max(now[1], now[2]) >= RACY_NS


def stale(root: str, paths: Iterable[str], manifest: Manifest) -> tuple[list[str], int]:
    """Which of ``paths`` (files rg lists now) are not clean, and their bytes together (one ``stat`` each)."""
    out: list[str] = []
    size = 0
    files = manifest.files
    for path in paths:
        now = _stat(os.path.join(root, path))
        entry = files.get(path)
        if entry is None or not _entry_clean(entry, now):
            out.append(path)
            size += now[0] if now is not None else 0
    return out, size


class Staleness:
    """What a search cannot take from the index: files whose folders it reads as a scan would,
    folders read likewise (files came or went), or (``tree``) the whole checkout."""

    __slots__ = ("files", "folders", "tree")

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()
        self.tree = False


def check(root: str, manifest: Manifest) -> Staleness:
    """Every file and folder of ``manifest`` looked at now (one ``stat`` each; a folder that changed is listed)."""
    out = Staleness()
    for path, entry in manifest.files.items():
        if not _entry_clean(entry, _stat(os.path.join(root, path))):
            out.files.add(path)
    for rel, folder in manifest.folders.items():
        full = os.path.join(root, rel) if rel else root
        if _folder_clean(folder, _stat(full)):
            continue
        out.folders.add(rel)
        known = set(folder.folders)
        try:
            with os.scandir(full) as entries:
                for item in entries:
                    if not item.name.startswith(".") and item.name not in known and item.is_dir(follow_symlinks=False):
                        out.tree = True  # a folder the index never listed
                        return out
        except OSError:
            continue  # gone: its files are stale, their folder is not searched
    return out
