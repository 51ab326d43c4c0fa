"""Files over the AFI binding (``/afi/stat``, ``/afi/list``, ``/afi/read``): the ``afi`` and peer adapters.

Every fedsearch gateway is an AFI provider too, so a peer's files are read the same way
as an AFI provider's: ``path`` is the provider's virtual path without its leading ``/``.

* ``read``: ``GET /afi/read?path=`` whole (a ``206`` range is followed by the next one
  until ``X-AFI-EOF``), under :data:`gateway.files.MAX_READ_BYTES`; kept by its ``ETag``
  and asked again with ``If-None-Match`` (a ``304`` sends nothing back).
* ``stat``: the entry, as ``{"type": "file"|"dir", "size", "mtime"}``.
* ``list``: the entries of a directory, ``next_cursor`` followed up to :data:`MAX_ENTRIES`.

AFI ``Error`` objects become our errors (:func:`afi_error`); ``not_found`` and
``invalid_path`` (both 404) are :class:`~gateway.errors.NotFound`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from adapters._http import HttpBackend, Request, S, Unreachable, error_field, http_error, retry_after
from gateway.errors import BackendError, NotFound, RateLimited, Rejected, Unsupported
from gateway.files import MAX_READ_BYTES, clean_path, too_large
from gateway.models import RemoteFile

__all__ = ["MAX_ENTRIES", "AfiFilesBackend", "afi_error", "afi_list", "afi_read", "afi_stat"]

#: A listing stops after this many entries.
MAX_ENTRIES = 10_000
#: Pages of a listing asked at most.
MAX_LIST_PAGES = 20
MAX_MESSAGE = 200


def afi_error(status: int, error: Any, headers: Mapping[str, str]) -> BackendError:
    """The gateway error an AFI ``Error`` reply (or a bare failing status) means."""
    code = error_field(error, "code")[:40]
    message = error_field(error, "message")[:MAX_MESSAGE]
    if code == "rate_limited" or status == 429:
        wait = error.get("retry_after") if isinstance(error, Mapping) else None
        seconds = float(wait) if isinstance(wait, int | float) and not isinstance(wait, bool) else None
        return RateLimited(
            f"rate limited: {message or f'HTTP {status}'}",
            retry_after=seconds if seconds is not None else retry_after(headers),
        )
    if code == "unauthorized" or status == 401:
        return Rejected("unauthorized")
    if code == "unsupported":
        return Unsupported(f"AFI unsupported: {message}" if message else "AFI unsupported")
    what = f"AFI {code}" if code else f"HTTP {status}"
    if status in (502, 503, 504):
        return Unreachable(f"{what}: {message}" if message else what, retry_after(headers))
    return http_error(status, f"{what}: {message}" if message else what)


def _absolute(path: str) -> str:
    return "/" + clean_path(path)


def _mtime(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _entry(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or raw.get("type") not in ("file", "directory"):
        raise BackendError("unexpected response shape: not an AFI entry")
    kind = "dir" if raw["type"] == "directory" else "file"
    size = raw.get("size")
    return {
        "type": kind,
        "size": size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else 0,
        "mtime": _mtime(raw.get("mtime")),
        "path": str(raw.get("path") or ""),
    }


async def _json(backend: HttpBackend[Any], url: str, params: dict[str, str | int], until: float) -> Any:
    reply = await backend.fetch_file(Request(url=url, params=params), until)
    if reply is None:  # pragma: no cover - no validator was sent
        raise BackendError("HTTP 304 to an unconditional request")
    return reply.json()


async def afi_stat(backend: HttpBackend[Any], path: str, until: float) -> dict[str, Any]:
    """``GET /afi/stat``: the entry of ``path``."""
    entry = _entry(await _json(backend, backend.settings.url + "/afi/stat", {"path": _absolute(path)}, until))
    return {k: entry[k] for k in ("type", "size", "mtime")}


async def afi_list(backend: HttpBackend[Any], path: str, until: float) -> list[dict[str, Any]]:
    """``GET /afi/list``: the entries of directory ``path`` by name, cursors followed."""
    params: dict[str, str | int] = {"path": _absolute(path)}
    out: list[dict[str, Any]] = []
    for _ in range(MAX_LIST_PAGES):
        page = await _json(backend, backend.settings.url + "/afi/list", params, until)
        if not isinstance(page, Mapping) or not isinstance(page.get("entries"), list):
            raise BackendError("unexpected response shape: no entries list")
        for raw in page["entries"]:
            entry = _entry(raw)
            name = entry["path"].rstrip("/").rpartition("/")[2]
            if name:
                out.append({"name": name, "type": entry["type"], "size": entry["size"]})
        cursor = page.get("next_cursor")
        if not isinstance(cursor, str) or not cursor or len(out) >= MAX_ENTRIES:
            break
        params["cursor"] = cursor
    return sorted(out[:MAX_ENTRIES], key=lambda e: e["name"])


def _more(headers: Mapping[str, str], got: int) -> bool:
    """Whether a read's answer left part of the file unsent (``X-AFI-EOF``, else ``Content-Range``)."""
    eof = headers.get("X-AFI-EOF")
    if eof is not None:
        return eof == "false"
    total = headers.get("Content-Range", "").rpartition("/")[2]
    return total.isdigit() and int(total) > got


async def afi_read(backend: HttpBackend[Any], path: str, until: float) -> RemoteFile:
    """``GET /afi/read``: the whole file, through the backend's read cache (see the module docstring)."""
    absolute = _absolute(path)
    if absolute == "/":
        raise NotFound("no such file")
    url = backend.settings.url + "/afi/read"
    cache = backend.read_cache
    cached = cache.get(absolute)
    try:
        reply = await backend.fetch_file(
            Request(url=url, params={"path": absolute}), until, cached.identity if cached is not None else ""
        )
    except RateLimited:
        if cached is None:
            raise
        return cache.served(cached)  # the copy kept, while the provider will not answer
    except NotFound:
        cache.drop(absolute)
        raise
    if reply is None:
        if cached is None:  # pragma: no cover - a 304 is only asked for with a copy kept
            raise BackendError("HTTP 304 without a copy kept")
        return cache.served(cached)
    chunks, size, headers = [reply.body], len(reply.body), reply.headers
    while _more(headers, size):  # a provider that sends a file in ranges: the rest, range by range
        more = await backend.fetch_file(Request(url=url, params={"path": absolute, "offset": size}), until)
        if more is None or not more.body:
            break
        size += len(more.body)
        if size > MAX_READ_BYTES:
            raise too_large()
        chunks.append(more.body)
        headers = more.headers
    whole = RemoteFile(b"".join(chunks), reply.headers.get("ETag", ""))
    cache.put(absolute, whole)
    return whole


class AfiFilesBackend(HttpBackend[S]):
    """An HTTP backend whose files are read over the AFI binding (the ``afi`` and peer adapters)."""

    reads = True
    lists = True

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        return await afi_read(self, path, deadline)

    async def stat_file(self, path: str, deadline: float) -> dict[str, Any]:
        return await afi_stat(self, path, deadline)

    async def list_files(self, path: str, deadline: float) -> list[dict[str, Any]]:
        return await afi_list(self, path, deadline)
