"""The AFI provider (Agent Filesystem Interface v0.1 draft, HTTP binding; SPEC §4).

Every namespace the caller may see is one directory of a single virtual tree: file
``src/app.py`` of namespace ``flask`` is ``/flask/src/app.py``. A namespace name may
hold ``/`` (``team/repo``): a path belongs to the longest visible namespace that
prefixes it on a component boundary; the components above it (``/team``) are
virtual directories. :func:`add_afi_routes` adds ``GET /.afi/manifest.json``,
``GET /afi/stat|list|read`` and ``POST /afi/search``; any other operation or method
under ``/afi/`` is ``unsupported``.

* Errors are AFI ``Error`` objects ``{code, message, path?, retry_after?}`` with AFI's
  status mapping, plus ``invalid_request`` (400) for bad parameters. What a caller may
  not see is ``not_found``, exactly like what does not exist.
* Paths are normalised as AFI says (``.``, ``..``, ``//``, trailing ``/``). A ``..``
  above ``/``, NUL, a backslash, a relative path, or a percent-encoded ``..``/NUL/
  backslash still there after the query string's own decoding is ``invalid_path``.
  The namespace's :class:`~gateway.backend.FileTree` then refuses symlinks leaving
  its root and ``.git``. A remote namespace is read through its backend
  (:meth:`SearchService.view <gateway.service.SearchService.view>`): a peer's children
  are directories of their own (``/peer/flask``); a backend that cannot list (or read)
  answers ``unsupported``, naming the file's URL where the backend gives one. A
  remote listing's entries are as the backend listed them (no stat each). Blocking
  local file I/O runs in a thread.
* ``read`` sends an ``ETag`` (a local file's modification time and size, a remote
  one's identity from its backend) and answers ``If-None-Match`` with ``304``.
* ``read`` follows AFI: a range that starts at or past the end is an empty ``200``
  (``eof``), not an error; ``X-AFI-EOF`` says whether the last byte was sent.
* Cursors are opaque (base64url JSON) and carry a digest of the request they page,
  so a cursor from another query or path is ``invalid_request``. Search pages whole
  files through :meth:`SearchService.search` and cuts matches by ``limit``; the
  cursor holds the file offset *and* the match index within that file, so nothing is
  lost or repeated, even inside a file with more matches than ``limit``.

Access: the caller's namespace predicate is ``request.get(gateway.http.middleware.ACCESS)`` (absent
or None = everything), the same request key every HTTP route reads; auth middleware
sets it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import re2
from aiohttp import web

from gateway.afi.base import (
    _EPOCH,
    _MIME,
    _MODES,
    _READ_HEADERS,
    _SNIFF,
    DIR_TYPE,
    MANIFEST_PATH,
    MAX_LIST,
    MAX_PATH,
    MAX_READ,
    MAX_RESULTS,
    VERSION,
    AfiError,
    Target,
    _afi,
    _context,
    _decode_cursor,
    _digest,
    _encode_cursor,
    _int_param,
    _param,
    locate,
    normalise,
)
from gateway.afi.search import afi_matches, post_search
from gateway.errors import NotFound, Unsupported
from gateway.files import LocalView, View, local_etag
from gateway.http.middleware import json_response
from gateway.query.globs import validate_glob
from gateway.service import Access, SearchService

__all__ = [
    "MANIFEST_PATH",
    "MAX_PATH",
    "MAX_RESULTS",
    "AfiError",
    "Target",
    "add_afi_routes",
    "afi_matches",
    "locate",
    "manifest",
    "normalise",
]

# --- entries -------------------------------------------------------------------------


def _time(ts: float | None) -> str:
    return datetime.fromtimestamp(ts or _EPOCH, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(path: str, kind: str, size: int, mtime: float | None, ctype: str, **attrs: Any) -> dict[str, Any]:
    stamp = _time(mtime)
    entry: dict[str, Any] = {
        "path": path,
        "type": kind,
        "size": size,
        "mtime": stamp,
        "ctime": stamp,
        "content_type": ctype,
    }
    if mtime is not None:
        entry["etag"] = local_etag(mtime, size)
    if attrs:
        entry["attributes"] = attrs
    return entry


def _directory(path: str, mtime: float | None = None, **attrs: Any) -> dict[str, Any]:
    return _entry(path, "directory", 0, mtime, DIR_TYPE, **attrs)


async def _content_type(view: View, inner: str, head: bytes | None = None) -> str:
    """The MIME type by name, else ``text/plain`` unless the first bytes hold a NUL."""
    guessed, _ = _MIME.guess_type(inner, strict=False)
    if guessed:
        return guessed
    if head is None:
        head, _, _ = await view.read_bytes(inner, 0, _SNIFF)
    return "application/octet-stream" if b"\x00" in head[:_SNIFF] else "text/plain"


async def _file_entry(view: View, inner: str, path: str) -> dict[str, Any]:
    st = await view.stat(inner)
    if st["type"] == "dir":
        return _directory(path, st["mtime"])
    return _entry(path, "file", int(st["size"]), st["mtime"], await _content_type(view, inner))


def _listed_entry(listed: dict[str, Any], inner: str, path: str) -> dict[str, Any]:
    """An entry from a remote listing as it came (a stat of each would be a request each)."""
    if listed["type"] == "dir":
        return _directory(path)
    guessed, _ = _MIME.guess_type(inner, strict=False)
    return _entry(path, "file", int(listed["size"]), None, guessed or "text/plain")


def _described(service: SearchService, access: Access) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in service.namespaces(access)}


async def _namespace_entry(
    service: SearchService, name: str, access: Access, listed: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A namespace's root directory: its backend kind, and whether its files can be read (``listed``:
    :func:`_described`, when many are asked at once)."""
    described = (listed if listed is not None else _described(service, access)).get(name)
    view = service.view(name, access)
    mtime = (await view.stat(""))["mtime"] if isinstance(view, LocalView) else None
    kind = described["backend"] if described else service.backend(name, access).kind
    readable = bool(described["capabilities"]["read"]) if described else True
    return _directory("/" + name, mtime, **{"x-backend": kind, "x-readable": readable})


def _view_of(service: SearchService, target: Target, access: Access) -> View:
    if target.namespace is None:
        raise NotFound(target.rel)
    return service.view(target.namespace, access)


async def _stat(service: SearchService, target: Target, access: Access) -> dict[str, Any]:
    if not target.rel:
        return _directory("/")
    if target.namespace is None:
        if target.children:
            return _directory(target.path)
        raise NotFound(target.rel)
    if not target.inner:
        return await _namespace_entry(service, target.namespace, access)
    try:
        return await _file_entry(_view_of(service, target, access), target.inner, target.path)
    except (NotFound, AfiError, Unsupported):
        if target.children:  # a namespace nested inside another one's directory
            return _directory(target.path)
        raise


def _manifest_bytes(request: web.Request) -> bytes:
    return orjson.dumps(manifest(*_context(request), _auth_methods(request)))


async def get_stat(request: web.Request) -> web.Response:
    raw = _param(request, "path")
    if raw == MANIFEST_PATH:
        size = len(_manifest_bytes(request))
        return json_response(_entry(MANIFEST_PATH, "file", size, None, "application/json"))
    service, access = _context(request)
    target = locate(normalise(raw), await service.learned_names(access))
    return json_response(await _stat(service, target, access))


# --- list ----------------------------------------------------------------------------


def _name_matcher(glob: str | None) -> Callable[[str], bool]:
    if not glob:
        return lambda name: True
    if "/" in glob:
        raise AfiError("invalid_request", "glob: applies to names; must not contain '/'")
    try:
        regex = re2.compile(validate_glob(glob))
    except ValueError as exc:
        raise AfiError("invalid_request", f"glob: {exc}") from None
    return lambda name: bool(regex.search(name))


_Child = tuple[str, dict[str, Any]] | None


async def _children(service: SearchService, target: Target, access: Access) -> tuple[View | None, dict[str, _Child]]:
    """The directory's view, and each child name -> (its path inside the namespace, its listed entry),
    or None for a virtual directory (a namespace below)."""
    names: dict[str, _Child] = {}
    view: View | None = None
    if target.namespace is not None:
        try:
            view = _view_of(service, target, access)
            for child in await view.list_dir(target.inner):
                names[child["name"]] = (f"{target.inner}/{child['name']}".lstrip("/"), child)
        except (NotFound, AfiError, Unsupported):
            if not target.children:
                raise
    elif target.rel and not target.children:
        raise NotFound(target.rel)
    names.update(dict.fromkeys(target.children))
    return view, names


async def _list_page(
    service: SearchService,
    target: Target,
    access: Access,
    match: Callable[[str], bool],
    after: str | None,
    limit: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of entries, and the name the next page starts after (None: last page)."""
    view, children = await _children(service, target, access)
    names = sorted(n for n in children if match(n) and (after is None or n > after))
    visible = set(service.names(access))
    listed = _described(service, access)
    entries: list[dict[str, Any]] = []
    base = target.path.rstrip("/")
    for name in names[:limit]:
        child = children[name]
        try:
            if child is None:
                full = f"{target.rel}/{name}".lstrip("/")
                entries.append(
                    await _namespace_entry(service, full, access, listed) if full in visible else _directory(f"/{full}")
                )
            elif isinstance(view, LocalView):
                entries.append(await _file_entry(view, child[0], f"{base}/{name}"))
            else:
                entries.append(_listed_entry(child[1], child[0], f"{base}/{name}"))
        except NotFound:  # gone since it was listed
            continue
    return entries, (names[limit - 1] if len(names) > limit else None)


async def get_list(request: web.Request) -> web.Response:
    service, access = _context(request)
    rel = normalise(_param(request, "path"))
    limit = min(MAX_LIST, _int_param(request, "limit", MAX_LIST) or 0)
    if limit < 1:
        raise AfiError("invalid_request", "limit: must be at least 1")
    glob = request.query.get("glob")
    match = _name_matcher(glob)
    token = _digest("list", rel, glob or "")
    cursor = request.query.get("cursor")
    after = _decode_cursor(cursor, token).get("a") if cursor else None
    if after is not None and not isinstance(after, str):
        raise AfiError("invalid_request", "cursor: not a cursor of this provider")
    target = locate(rel, await service.learned_names(access))
    entries, last = await _list_page(service, target, access, match, after, limit)
    body: dict[str, Any] = {"entries": entries}
    if last is not None:
        body["next_cursor"] = _encode_cursor({"a": last, "t": token})
    return json_response(body)


# --- read ----------------------------------------------------------------------------


def _bytes_response(body: bytes, total: int, offset: int, ranged: bool, ctype: str, etag: str = "") -> web.Response:
    whole = offset == 0 and len(body) >= total
    headers = dict(_READ_HEADERS)
    headers["X-AFI-EOF"] = "true" if offset + len(body) >= total else "false"
    if etag:
        headers["ETag"] = etag
    if ranged or not whole:
        end = offset + len(body) - 1
        headers["Content-Range"] = f"bytes {offset}-{end}/{total}" if body else f"bytes */{total}"
    status = 206 if body and not whole else 200
    return web.Response(body=body, status=status, headers=headers, content_type=ctype)


async def get_read(request: web.Request) -> web.Response:
    raw = _param(request, "path")
    offset = _int_param(request, "offset", 0) or 0
    length = _int_param(request, "length", None)
    want = MAX_READ if length is None else min(length, MAX_READ)
    ranged = "offset" in request.query or "length" in request.query
    if raw == MANIFEST_PATH:
        data = _manifest_bytes(request)
        return _bytes_response(data[offset : offset + want], len(data), offset, ranged, "application/json")
    service, access = _context(request)
    target = locate(normalise(raw), await service.learned_names(access))
    if not target.inner:
        if target.rel and target.namespace is None and not target.children:
            raise NotFound(target.rel)
        raise AfiError("invalid_path", "is a directory", target.path)
    view = _view_of(service, target, access)
    asked = request.headers.get("If-None-Match")
    if asked and not ranged:  # a copy the caller keeps, still the same: nothing is read, nothing sent
        etag = await view.etag(target.inner)
        if etag and asked == etag:
            return web.Response(status=304, headers={"ETag": etag, **_READ_HEADERS})
    body, total, etag = await view.read_bytes(target.inner, offset, want)
    head = body if offset == 0 and len(body) >= min(total, _SNIFF) else None
    ctype = await _content_type(view, target.inner, head)
    return _bytes_response(body, total, offset, ranged, ctype, etag)


# --- manifest --------------------------------------------------------------------------

_AUTH: web.AppKey[tuple[str, ...]] = web.AppKey("afi_auth_methods")


def _auth_methods(request: web.Request) -> tuple[str, ...]:
    methods: tuple[str, ...] = request.app.get(_AUTH) or ()
    return methods


def manifest(service: SearchService, access: Access, auth_methods: Sequence[str] = ()) -> dict[str, Any]:
    """The discovery manifest for one caller: modes are those its namespaces can search in."""
    modes: set[str] = {"exact"}  # mandatory at profile 2
    whole = service.visible(access)
    for name in whole:
        modes |= service.backend(name, access).declared_modes()
    for entry in service.namespaces(access):
        if entry["name"] not in whole:  # a peer's child the caller sees alone: the modes its peer declares
            modes |= {m for m in entry["capabilities"]["modes"] if m in _MODES}
    return {
        "afi_version": "0.1",
        "provider": "fedsearch",
        "provider_version": VERSION,
        "profile": 2,
        "capabilities": ["stat", "list", "read", "search"],
        "search": {"modes": [m for m in _MODES if m in modes], "max_results": MAX_RESULTS, "x-ordering": "relevance"},
        "path": {"case_sensitive": True, "max_length": MAX_PATH},
        "auth": {"required": bool(auth_methods), "methods": list(auth_methods)},
    }


async def get_manifest(request: web.Request) -> web.Response:
    service, access = _context(request)
    return json_response(manifest(service, access, _auth_methods(request)))


# --- routes ------------------------------------------------------------------------------


async def _unsupported(request: web.Request) -> web.Response:
    raise AfiError("unsupported", f"{request.method} {request.path} is not an operation of this provider")


def add_afi_routes(app: web.Application, auth_methods: Sequence[str] = ()) -> None:
    """Add the AFI provider's routes to ``app``; ``auth_methods`` (e.g. ``["bearer"]``)
    makes the manifest say auth is required."""
    app[_AUTH] = tuple(auth_methods)
    router = app.router
    router.add_get(MANIFEST_PATH, _afi(get_manifest))
    router.add_get("/afi/stat", _afi(get_stat))
    router.add_get("/afi/list", _afi(get_list))
    router.add_get("/afi/read", _afi(get_read))
    router.add_post("/afi/search", _afi(post_search))
    router.add_route("*", "/afi/{operation:.*}", _afi(_unsupported))
