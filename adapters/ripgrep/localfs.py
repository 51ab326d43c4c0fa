"""Safe reads by relative path inside one local directory: ``LocalTree(root)``.

Every path goes through :meth:`LocalTree.resolve` first. It accepts ``/``-separated
paths relative to the root (a leading ``/`` is stripped, ``.`` and ``a/..`` are
normalised) and answers :class:`gateway.errors.NotFound` - the same error, with no
detail - for anything that does not exist or that it will not show: NUL bytes,
``..`` leaving the root, a path whose real path (symlinks resolved) lies outside
the root's real path, anything under a ``.git`` directory, and files that are
neither regular files nor directories (FIFOs, devices).

Reading a directory with ``read_*`` is a caller error: ``InvalidRequest("path", ...)``.
Bad ranges are ``InvalidRequest`` naming ``start_line``/``end_line``/``offset``/
``length``. Percent-decoding is the caller's job. The tree is synchronous; async
callers run it in a thread (``asyncio.to_thread``).

The check resolves symlinks before opening, so a symlink swapped between the check
and the read (a race by someone who can write into the root) is not defended
against; the roots are checkouts that the operator controls.
"""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from gateway.errors import InvalidRequest, NotFound
from gateway.index.realpaths import real_root

__all__ = ["MAX_LINES", "MAX_TEXT_BYTES", "LocalTree"]

#: At most this many lines from one ``read_lines`` call.
MAX_LINES = 2000
#: ``read_text`` refuses files larger than this (bytes).
MAX_TEXT_BYTES = 16 * 1024 * 1024

_HIDDEN = ".git"


class LocalTree:
    """Read access to the files under ``root``; no path ever leaves it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(real_root(os.fspath(root)))
        self._prefix = str(self.root).rstrip(os.sep) + os.sep

    def _inside(self, real: str) -> bool:
        if real == str(self.root):
            return True
        if not real.startswith(self._prefix):
            return False
        return _HIDDEN not in real[len(self._prefix) :].split(os.sep)

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` under the root; NotFound for anything it will not show."""
        if "\x00" in path:
            raise NotFound(path.replace("\x00", "\\0"))
        rel = path.lstrip("/")
        if PurePosixPath(rel).is_absolute():  # pragma: no cover - cannot happen after lstrip on POSIX
            raise NotFound(path)
        parts: list[str] = []
        for part in rel.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise NotFound(path)
                parts.pop()
                continue
            if part == _HIDDEN:
                raise NotFound(path)
            parts.append(part)
        real = os.path.realpath(os.path.join(self.root, *parts))
        if not self._inside(real):
            raise NotFound(path)
        try:
            mode = os.stat(real).st_mode
        except (OSError, ValueError):
            raise NotFound(path) from None
        if not (stat_mod.S_ISREG(mode) or stat_mod.S_ISDIR(mode)):
            raise NotFound(path)
        return Path(real)

    def _file(self, path: str) -> Path:
        real = self.resolve(path)
        if real.is_dir():
            raise InvalidRequest("path", "is a directory")
        return real

    def read_text(self, path: str) -> str:
        """The whole file as text (UTF-8, undecodable bytes replaced)."""
        real = self._file(path)
        with _open(real, path) as fh:
            data = fh.read(MAX_TEXT_BYTES + 1)
        if len(data) > MAX_TEXT_BYTES:
            raise InvalidRequest("path", f"file larger than {MAX_TEXT_BYTES} bytes; read a range")
        return data.decode("utf-8", errors="replace")

    def read_lines(
        self,
        path: str,
        start_line: int = 1,
        end_line: int | None = None,
        max_lines: int = MAX_LINES,
    ) -> tuple[list[str], int]:
        """Lines ``start_line..end_line`` (1-based, inclusive, at most ``max_lines``) and the total."""
        if start_line < 1:
            raise InvalidRequest("start_line", "must be at least 1")
        if end_line is not None and end_line < start_line:
            raise InvalidRequest("end_line", "must not be before start_line")
        last = start_line + max(1, max_lines) - 1
        if end_line is not None:
            last = min(last, end_line)
        real = self._file(path)
        lines: list[str] = []
        total = 0
        with _open(real, path) as fh:
            for raw in fh:
                total += 1
                if start_line <= total <= last:
                    lines.append(raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8", errors="replace"))
        return lines, total

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all the rest if ``None``) from byte ``offset``."""
        if offset < 0:
            raise InvalidRequest("offset", "must not be negative")
        if length is not None and length < 0:
            raise InvalidRequest("length", "must not be negative")
        real = self._file(path)
        with _open(real, path) as fh:
            fh.seek(offset)
            return fh.read() if length is None else fh.read(length)

    def stat(self, path: str) -> dict[str, Any]:
        """``{"type": "file"|"dir", "size": bytes, "mtime": seconds}``."""
        real = self.resolve(path)
        try:
            st = os.stat(real)
        except OSError:
            raise NotFound(path) from None
        kind = "dir" if stat_mod.S_ISDIR(st.st_mode) else "file"
        return {"type": kind, "size": st.st_size, "mtime": st.st_mtime}

    def list_dir(self, path: str = "") -> list[dict[str, Any]]:
        """The entries of a directory, sorted by name: ``{"name", "type", "size"}``.

        ``.git``, entries whose symlink target leaves the root (or is broken) and
        special files are left out.
        """
        real = self.resolve(path)
        if not real.is_dir():
            raise InvalidRequest("path", "is not a directory")
        try:
            names = os.listdir(real)
        except OSError:
            raise NotFound(path) from None
        entries: list[dict[str, Any]] = []
        for name in sorted(names):
            if name == _HIDDEN:
                continue
            target = os.path.realpath(os.path.join(real, name))
            if not self._inside(target):
                continue
            try:
                st = os.stat(target)
            except (OSError, ValueError):
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                entries.append({"name": name, "type": "dir", "size": st.st_size})
            elif stat_mod.S_ISREG(st.st_mode):
                entries.append({"name": name, "type": "file", "size": st.st_size})
        return entries


def _open(real: Path, path: str) -> BinaryIO:
    """Open a resolved regular file for binary reading; NotFound if that fails."""
    try:
        return open(real, "rb")
    except OSError:
        raise NotFound(path) from None
