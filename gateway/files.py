"""Files of a namespace read alike, local or remote: the one read path every surface shares.

A local namespace has a :class:`~gateway.backend.FileTree` (a checkout, read in a
thread). A remote one reads through its backend (:meth:`AsyncBackend.read_file
<gateway.backend.AsyncBackend.read_file>`): the whole file, under the same bounds as a
local read — at most :data:`MAX_READ_BYTES`, within a deadline, through the resilience
layer. :func:`view` gives either one as a :class:`View` (``stat``, ``list_dir``,
``read_bytes``, ``read_lines``), which is what ``/v1/files``, ``read_file``, the AFI
routes and ``fedsearch read`` call.

:class:`ReadCache` is what a remote backend keeps of what it read: each path's content
with the backend's identity for it (a blob sha, an ``ETag``, a zoekt ``Checksum``), in
at most :data:`CACHE_BYTES`. A read asks the backend whether that identity still holds
(a conditional request): when it does, nothing is sent back and the content is
served from the cache (GitHub counts no rate limit for it).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.errors import InvalidRequest, NotFound
from gateway.models import RemoteFile

if TYPE_CHECKING:
    from gateway.backend import AsyncBackend, FileTree

__all__ = [
    "CACHE_BYTES",
    "MAX_READ_BYTES",
    "Cached",
    "LocalView",
    "ReadCache",
    "RemoteView",
    "View",
    "clean_path",
    "lines_of",
    "local_etag",
    "remote_etag",
    "too_large",
]

#: A remote file is read whole, up to this many bytes (a local ``read_text`` takes as many).
MAX_READ_BYTES = 16 << 20
#: What one backend keeps of the files it read.
CACHE_BYTES = 32 << 20
#: A file larger than this share of the cache is not kept.
_LARGEST_SHARE = 4


@dataclass(frozen=True, slots=True)
class Cached:
    """What a :class:`ReadCache` holds of one path."""

    identity: str
    data: bytes
    mtime: float | None
    at: float


class ReadCache:
    """Contents by path, each with its identity, least recently used dropped first, bounded in bytes."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Cached] = OrderedDict()
        self._size = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str) -> Cached | None:
        found = self._entries.get(path)
        if found is not None:
            self._entries.move_to_end(path)
        return found

    def put(self, path: str, file: RemoteFile) -> None:
        """Keep ``file`` for ``path`` (only with an identity: without one it could never be checked)."""
        self.drop(path)
        if not file.identity or len(file.data) > self.max_bytes // _LARGEST_SHARE:
            return
        self._entries[path] = Cached(file.identity, file.data, file.mtime, time.monotonic())
        self._size += len(file.data)
        while self._size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self._size -= len(old.data)

    def served(self, cached: Cached) -> RemoteFile:
        """``cached`` as a read's answer (counted as a hit)."""
        self.hits += 1
        return RemoteFile(cached.data, cached.identity, cached.mtime)

    def drop(self, path: str) -> None:
        old = self._entries.pop(path, None)
        if old is not None:
            self._size -= len(old.data)


def clean_path(path: str) -> str:
    """A remote path as sent on: relative, ``/``-separated; NotFound for anything leaving its root."""
    if "\x00" in path or "\\" in path:
        raise NotFound("no such file")
    parts = path.strip("/").split("/")
    if any(part in ("", ".", "..") for part in parts) and path.strip("/"):
        raise NotFound("no such file")
    return "/".join(p for p in parts if p)


def too_large(size: int | None = None) -> InvalidRequest:
    """The error for a remote file over the read cap."""
    got = f" ({size} bytes)" if size is not None else ""
    return InvalidRequest("path", f"file larger than {MAX_READ_BYTES} bytes{got}: too large to read remotely")


def local_etag(mtime: float | None, size: int) -> str:
    """A local file's ETag: its modification time (microseconds) and size."""
    return f'"{round((mtime or 0.0) * 1e6):x}-{size:x}"'


def remote_etag(identity: str) -> str:
    """A remote file's ETag from the backend's identity for it (``""`` when it gave none)."""
    if not identity or identity.startswith(('"', 'W/"')):
        return identity
    return '"' + identity.replace('"', "") + '"'


def lines_of(data: bytes, start: int, end: int | None, max_lines: int) -> tuple[list[str], int]:
    """Lines ``start..end`` (1-based, inclusive, at most ``max_lines``) of ``data`` and the total,
    numbered as :meth:`LocalTree.read_lines <adapters.ripgrep.localfs.LocalTree.read_lines>` numbers them."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    last = start + max(1, max_lines) - 1
    if end is not None:
        last = min(last, end)
    lines = [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in raw[start - 1 : last]]
    return lines, len(raw)


class View(Protocol):
    """Async read access to one namespace's files (paths relative to it)."""

    async def stat(self, path: str) -> dict[str, Any]: ...

    async def list_dir(self, path: str) -> list[dict[str, Any]]: ...

    async def read_bytes(self, path: str, offset: int, length: int | None) -> tuple[bytes, int, str]:
        """``length`` bytes from ``offset`` (the rest when None), the file's size, and its ETag."""
        ...

    async def read_lines(self, path: str, start: int, end: int | None, max_lines: int) -> tuple[list[str], int]: ...

    async def etag(self, path: str) -> str:
        """The file's ETag (``""``: none), without reading it where that can be avoided."""
        ...


class LocalView:
    """A :class:`~gateway.backend.FileTree`, its blocking calls run in a thread."""

    def __init__(self, tree: FileTree) -> None:
        self.tree = tree

    async def stat(self, path: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.tree.stat, path)

    async def list_dir(self, path: str) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.tree.list_dir, path)

    async def read_bytes(self, path: str, offset: int, length: int | None) -> tuple[bytes, int, str]:
        def read() -> tuple[bytes, int, str]:
            st = self.tree.stat(path)
            if st["type"] == "dir":
                raise InvalidRequest("path", "is a directory")
            total = int(st["size"])
            body = self.tree.read_bytes(path, offset, length) if offset < total and length != 0 else b""
            grown = max(total, offset + len(body) if body else 0)  # the file may have grown since stat
            return body, grown, local_etag(st["mtime"], total)

        return await asyncio.to_thread(read)

    async def read_lines(self, path: str, start: int, end: int | None, max_lines: int) -> tuple[list[str], int]:
        return await asyncio.to_thread(self.tree.read_lines, path, start, end, max_lines)

    async def etag(self, path: str) -> str:
        st = await self.stat(path)
        return "" if st["type"] == "dir" else local_etag(st["mtime"], int(st["size"]))


class RemoteView:
    """A remote backend's files under ``prefix`` (a peer's sub-namespace), each read once per view.

    ``deadline`` gives the absolute time (``time.monotonic()``) a call must end by.
    """

    def __init__(self, backend: AsyncBackend[Any], deadline: Callable[[], float], prefix: str = "") -> None:
        self.backend = backend
        self.deadline = deadline
        self.prefix = prefix
        self._read: dict[str, RemoteFile] = {}

    def _path(self, path: str) -> str:
        inner = clean_path(path)
        return f"{self.prefix}/{inner}".strip("/") if self.prefix else inner

    async def _bounded(self, call: Awaitable[Any]) -> Any:
        try:
            async with asyncio.timeout_at(self.deadline()):
                return await call
        except TimeoutError:
            from gateway.errors import BackendTimeout

            raise BackendTimeout(f"{self.backend.kind} did not answer in time") from None

    async def file(self, path: str) -> RemoteFile:
        """The whole file (read once for this view)."""
        full = self._path(path)
        found = self._read.get(full)
        if found is None:
            if not full:
                raise InvalidRequest("path", "is a directory")
            found = await self._bounded(self.backend.read_file(full, self.deadline()))
            if len(found.data) > MAX_READ_BYTES:
                raise too_large(len(found.data))
            self._read[full] = found
        return found

    async def stat(self, path: str) -> dict[str, Any]:
        full = self._path(path)
        if self.backend.lists:
            stat: dict[str, Any] = await self._bounded(self.backend.stat_file(full, self.deadline()))
            return stat
        if not full:
            return {"type": "dir", "size": 0, "mtime": None}
        got = await self.file(path)
        return {"type": "file", "size": len(got.data), "mtime": got.mtime}

    async def list_dir(self, path: str) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = await self._bounded(self.backend.list_files(self._path(path), self.deadline()))
        return listed

    async def read_bytes(self, path: str, offset: int, length: int | None) -> tuple[bytes, int, str]:
        got = await self.file(path)
        end = len(got.data) if length is None else offset + length
        return got.data[offset:end], len(got.data), remote_etag(got.identity)

    async def read_lines(self, path: str, start: int, end: int | None, max_lines: int) -> tuple[list[str], int]:
        return lines_of((await self.file(path)).data, start, end, max_lines)

    async def etag(self, path: str) -> str:
        return remote_etag((await self.file(path)).identity)
