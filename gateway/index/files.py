"""A local namespace's files as the index sees them: which to index, and one file read and parsed.

Files are listed as searches select them (``rg --files``: ignore files honoured,
hidden files skipped, symlinks not followed, the namespace's excludes applied) and
kept when a grammar reads their extension. :func:`index_file` reads one file and
parses it, or says why it is not parsed (too large, binary, not UTF-8), and gives
nothing at all when the file changed while it was read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence

import msgspec

from gateway.index.grammars import language_of
from gateway.index.parse import declarations
from gateway.index.store import FileRecord

__all__ = ["MAX_PARSE_BYTES", "Source", "find_rg", "index_file", "list_all", "list_files", "stat_of"]

#: A file larger than this is not parsed (generated code, data): it gets line hits.
MAX_PARSE_BYTES = 2 * 1024 * 1024
#: Bytes looked at for a NUL, the sign of a binary file (as rg and git decide).
_BINARY_PROBE = 8192
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})


class Source(msgspec.Struct, frozen=True):
    """A local namespace to index: its name, root and exclude globs."""

    namespace: str
    root: str
    exclude: tuple[str, ...] = ()


def find_rg() -> str | None:
    """The ``rg`` of the ``ripgrep`` wheel beside this Python, else the one on PATH."""
    import sysconfig  # the builder's: a search lists no files

    here = os.path.join(sysconfig.get_path("scripts"), "rg")
    if os.access(here, os.X_OK):
        return here
    import shutil

    return shutil.which("rg")


def list_files(source: Source, rg: str | None, listed: Sequence[str] | None = None) -> Iterator[str]:
    """The namespace-relative paths of the files a grammar reads, as rg selects them (os.walk without rg),
    among ``listed`` (:func:`list_all`) when given."""
    if rg is None and listed is None:
        yield from _walk(source.root)
        return
    for path in list_all(source, rg) if listed is None else listed:
        if language_of(path) is not None:
            yield path


def list_all(source: Source, rg: str | None) -> list[str]:
    """Every file rg searches in the namespace (its excludes applied), namespace-relative; with no rg,
    those a grammar reads (a walk cannot know rg's ignore rules)."""
    if rg is None:
        return list(_walk(source.root))
    argv = [rg, "--files", "--null", "--no-config", "--no-messages"]
    for glob in source.exclude:
        argv += ["-g", "!" + glob]
    import subprocess  # the builder's: a search lists no files

    done = subprocess.run(argv, cwd=source.root, capture_output=True, check=False)
    return [raw.decode("utf-8", "surrogateescape").removeprefix("./") for raw in done.stdout.split(b"\0") if raw]


def _walk(root: str) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS]
        rel = os.path.relpath(dirpath, root)
        for name in filenames:
            if not name.startswith(".") and language_of(name) is not None:
                yield name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")


def stat_of(root: str, path: str) -> tuple[int, int] | None:
    """A file's (size, mtime_ns), None if it is not a regular file any more."""
    try:
        st = os.stat(os.path.join(root, path))
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_size, st.st_mtime_ns


def index_file(root: str, path: str, language: str | None = None) -> FileRecord | None:
    """One file read and parsed as it is now; None when it is gone, unreadable or changed while read."""
    language = language or language_of(path)
    if language is None:
        return None
    full = os.path.join(root, path)
    before = stat_of(root, path)
    if before is None:
        return None
    size, mtime = before
    if size > MAX_PARSE_BYTES:
        return FileRecord(path, size, mtime, language, None)
    try:
        with open(full, "rb") as handle:
            data = handle.read(MAX_PARSE_BYTES + 1)
    except OSError:
        return None
    if len(data) != size or stat_of(root, path) != before:
        return None  # changed while read: the next look takes it
    if b"\0" in data[:_BINARY_PROBE] or not _utf8(data):
        return FileRecord(path, size, mtime, language, None)
    found = declarations(data, language)
    return FileRecord(path, size, mtime, language, None if found is None else tuple(found))


def _utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def changed(states: dict[str, tuple[int, int]], source: Source, paths: Sequence[str]) -> list[str]:
    """The paths whose (size, mtime) differs from what the index holds, or that it does not hold."""
    out = []
    for path in paths:
        now = stat_of(source.root, path)
        if now is not None and states.get(path) != now:
            out.append(path)
    return out
