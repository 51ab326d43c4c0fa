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
  its root and ``.git``. A namespace without a tree answers ``unsupported`` to
  stat/list/read inside it. Blocking file I/O runs in a thread.
* ``read`` follows AFI: a range that starts at or past the end is an empty ``200``
  (``eof``), not an error; ``X-AFI-EOF`` says whether the last byte was sent.
* Cursors are opaque (base64url JSON) and carry a digest of the request they page,
  so a cursor from another query or path is ``invalid_request``. Search pages whole
  files through :meth:`SearchService.search` and cuts matches by ``limit``; the
  cursor holds the file offset *and* the match index within that file, so nothing is
  lost or repeated, even inside a file with more matches than ``limit``.

Access: the caller's namespace predicate is ``request.get(gateway.middleware.ACCESS)`` (absent
or None = everything), the same request key every HTTP route reads; auth middleware
sets it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import math
import mimetypes
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any
from urllib.parse import unquote

import orjson
import re2
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.backend import FileTree
from gateway.errors import BackendUnavailable, InvalidRequest, NotFound, Unsupported
from gateway.globs import MAX_GLOB_LENGTH, validate_glob
from gateway.log import get_logger
from gateway.middleware import ACCESS, json_response
from gateway.models import Mode
from gateway.reload import service_of
from gateway.service import Access, SearchService
from gateway.wire import SearchRequest, parse_request, problem_fields

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

MANIFEST_PATH = "/.afi/manifest.json"
MAX_PATH = 4096
MAX_RESULTS = 500
DEFAULT_RESULTS = 100
MAX_LIST = 1000
MAX_READ = 8 << 20
CONTEXT_LINES = 2
#: Files per search round trip to the service (its maximum).
SEARCH_FILES = 200
MAX_HIT_BUDGET = 5000
MAX_FILE_OFFSET = 100_000
MAX_NAMESPACE_PATTERNS = 64
DIR_TYPE = "inode/directory"
_SNIFF = 1024
_EPOCH = 0.0
_MODES: tuple[Mode, ...] = ("exact", "regex", "semantic")
_STATUS = {"not_found": 404, "invalid_path": 404, "unauthorized": 401, "unsupported": 405,
           "rate_limited": 429, "conflict": 409, "internal": 500, "invalid_request": 400}
_MIME = mimetypes.MimeTypes()  # Python's built-in table only: the same answer on every host
_GLOB_SPECIAL = frozenset("*?[]{},")
_READ_HEADERS = {"Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff",
                 "Content-Security-Policy": "sandbox; default-src 'none'"}

log = get_logger("fedsearch.afi")

try:
    VERSION = metadata.version("fedsearch")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    VERSION = "0"


class AfiError(Exception):
    """An AFI ``Error``: ``code`` picks the HTTP status."""

    def __init__(
        self, code: str, message: str, path: str | None = None, retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.path, self.retry_after = code, message, path, retry_after
        self.status = status or _STATUS[code]

    def response(self) -> web.Response:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.path is not None:
            body["path"] = self.path
        seconds = None if self.retry_after is None else max(1, math.ceil(self.retry_after))
        if seconds is not None:
            body["retry_after"] = seconds
        resp = json_response(body, status=self.status)
        if seconds is not None:
            resp.headers["Retry-After"] = str(seconds)
        return resp


def _translate(exc: Exception, path: str | None) -> AfiError:
    """Any exception as the AFI error a caller may see (one table, most specific first)."""
    if isinstance(exc, AfiError):
        return exc
    if isinstance(exc, NotFound):
        return AfiError("not_found", "no such path", path)
    if isinstance(exc, InvalidRequest):
        if exc.field == "path":
            return AfiError("invalid_path", exc.message, path)
        return AfiError("invalid_request", str(exc))
    if isinstance(exc, Unsupported):
        return AfiError("unsupported", exc.reason, path)
    if isinstance(exc, BackendUnavailable) and exc.retry_after is not None:
        return AfiError("rate_limited", "the backend asked us to come back later", path, exc.retry_after)
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return AfiError("invalid_request", "body too large", status=413)
    log.error("afi_internal_error", error=type(exc).__name__, exc_info=exc)
    return AfiError("internal", "the provider could not answer", path)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _afi(handler: Handler) -> Handler:
    """Answer every failure of ``handler`` as an AFI Error (never problem+json)."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except Exception as exc:
            return _translate(exc, request.query.get("path")).response()

    return wrapped


def _context(request: web.Request) -> tuple[SearchService, Access]:

    access: Access = request.get(ACCESS)
    return service_of(request), access


# --- paths ---------------------------------------------------------------------------


def normalise(raw: str) -> str:
    """An absolute AFI path as a clean relative one (``""`` is the root); else invalid_path."""
    if len(raw) > MAX_PATH:
        raise AfiError("invalid_path", f"longer than {MAX_PATH} characters")
    if not raw.startswith("/"):
        raise AfiError("invalid_path", "must be absolute (start with /)", raw)
    if "\x00" in raw or "\\" in raw:
        raise AfiError("invalid_path", "NUL or backslash in path", raw)
    parts: list[str] = []
    for part in raw.split("/"):
        _check_encoding(part, raw)
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise AfiError("invalid_path", "escapes the root", raw)
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _check_encoding(part: str, raw: str) -> None:
    """Refuse a component whose leftover (even multiply) percent-encoding hides a trick."""
    probe = part
    for _ in range(4):
        decoded = unquote(probe)
        if decoded == probe:
            return
        if decoded in (".", "..") or any(c in decoded for c in "/\\\x00"):
            raise AfiError("invalid_path", "percent-encoded '.', '..', '/', '\\' or NUL in path", raw)
        probe = decoded


@dataclass(frozen=True, slots=True)
class Target:
    """Where a normalised path lands in the virtual tree."""

    rel: str  # relative to the virtual root; "" is the root
    namespace: str | None  # the longest visible namespace prefixing rel
    inner: str  # the path inside that namespace ("" is its root)
    children: tuple[str, ...]  # virtual directories right under rel (namespaces below it)

    @property
    def path(self) -> str:
        return "/" + self.rel


def locate(rel: str, names: Sequence[str]) -> Target:
    """Resolve ``rel`` against the visible namespace ``names``."""
    best: str | None = None
    for name in names:
        if (rel == name or rel.startswith(name + "/")) and (best is None or len(name) > len(best)):
            best = name
    inner = rel[len(best) + 1 :] if best is not None else ""
    prefix = rel + "/" if rel else ""
    kids = sorted({n[len(prefix) :].split("/", 1)[0] for n in names if n.startswith(prefix) and n != rel})
    return Target(rel, best, inner, tuple(kids))


def _param(request: web.Request, name: str) -> str:
    value = request.query.get(name)
    if value is None:
        raise AfiError("invalid_request", f"{name}: required")
    return value


def _int_param(request: web.Request, name: str, default: int | None) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise AfiError("invalid_request", f"{name}: must be a non-negative integer")
    return int(value)


# --- entries -------------------------------------------------------------------------


def _time(ts: float | None) -> str:
    return datetime.fromtimestamp(ts or _EPOCH, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(path: str, kind: str, size: int, mtime: float | None, ctype: str, **attrs: Any) -> dict[str, Any]:
    stamp = _time(mtime)
    entry: dict[str, Any] = {"path": path, "type": kind, "size": size, "mtime": stamp, "ctime": stamp,
                             "content_type": ctype}
    if mtime is not None:
        entry["etag"] = f'"{round(mtime * 1e6):x}-{size:x}"'
    if attrs:
        entry["attributes"] = attrs
    return entry


def _directory(path: str, mtime: float | None = None, **attrs: Any) -> dict[str, Any]:
    return _entry(path, "directory", 0, mtime, DIR_TYPE, **attrs)


def _content_type(tree: FileTree, inner: str, head: bytes | None = None) -> str:
    """The MIME type by name, else ``text/plain`` unless the first bytes hold a NUL."""
    guessed, _ = _MIME.guess_type(inner, strict=False)
    if guessed:
        return guessed
    if head is None:
        head = tree.read_bytes(inner, 0, _SNIFF)
    return "application/octet-stream" if b"\x00" in head[:_SNIFF] else "text/plain"


def _tree_entry(tree: FileTree, inner: str, path: str) -> dict[str, Any]:
    st = tree.stat(inner)
    if st["type"] == "dir":
        return _directory(path, st["mtime"])
    return _entry(path, "file", int(st["size"]), st["mtime"], _content_type(tree, inner))


def _namespace_entry(service: SearchService, name: str, access: Access) -> dict[str, Any]:
    """A namespace's root directory (sync: call in a thread)."""
    backend = service.backend(name, access)
    tree = backend.tree()
    mtime = tree.stat("")["mtime"] if tree is not None else None
    return _directory("/" + name, mtime, **{"x-backend": backend.kind, "x-readable": tree is not None})


def _tree_of(service: SearchService, target: Target, access: Access) -> FileTree:
    if target.namespace is None:
        raise NotFound(target.rel)
    backend = service.backend(target.namespace, access)
    tree = backend.tree()
    if tree is None:
        raise AfiError("unsupported", f"{backend.kind} namespaces cannot be listed or read", target.path)
    return tree


def _stat(service: SearchService, target: Target, access: Access) -> dict[str, Any]:
    if not target.rel:
        return _directory("/")
    if target.namespace is None:
        if target.children:
            return _directory(target.path)
        raise NotFound(target.rel)
    if not target.inner:
        return _namespace_entry(service, target.namespace, access)
    try:
        return _tree_entry(_tree_of(service, target, access), target.inner, target.path)
    except (NotFound, AfiError):
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
    target = locate(normalise(raw), service.visible(access))
    return json_response(await asyncio.to_thread(_stat, service, target, access))


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


def _children(service: SearchService, target: Target, access: Access) -> dict[str, str | None]:
    """Child name -> its path inside the namespace tree, or None for a virtual directory."""
    names: dict[str, str | None] = {}
    if target.namespace is not None:
        try:
            tree = _tree_of(service, target, access)
            for child in tree.list_dir(target.inner):
                names[child["name"]] = f"{target.inner}/{child['name']}".lstrip("/")
        except (NotFound, AfiError):
            if not target.children:
                raise
    elif target.rel and not target.children:
        raise NotFound(target.rel)
    names.update(dict.fromkeys(target.children))
    return names


def _list_page(
    service: SearchService, target: Target, access: Access, match: Callable[[str], bool],
    after: str | None, limit: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of entries, and the name the next page starts after (None: last page)."""
    children = _children(service, target, access)
    names = sorted(n for n in children if match(n) and (after is None or n > after))
    visible = set(service.visible(access))
    entries: list[dict[str, Any]] = []
    base = target.path.rstrip("/")
    for name in names[:limit]:
        inner = children[name]
        try:
            if inner is None:
                full = f"{target.rel}/{name}".lstrip("/")
                entries.append(_namespace_entry(service, full, access) if full in visible
                               else _directory(f"/{full}"))
            else:
                entries.append(_tree_entry(_tree_of(service, target, access), inner, f"{base}/{name}"))
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
    target = locate(rel, service.visible(access))
    entries, last = await asyncio.to_thread(_list_page, service, target, access, match, after, limit)
    body: dict[str, Any] = {"entries": entries}
    if last is not None:
        body["next_cursor"] = _encode_cursor({"a": last, "t": token})
    return json_response(body)


# --- read ----------------------------------------------------------------------------


def _read_range(tree: FileTree, inner: str, offset: int, want: int) -> tuple[bytes, int, str]:
    st = tree.stat(inner)
    if st["type"] == "dir":
        raise AfiError("invalid_path", "is a directory")
    total = int(st["size"])
    body = tree.read_bytes(inner, offset, want) if offset < total and want else b""
    head = body if offset == 0 and len(body) >= min(total, _SNIFF) else None
    grown = offset + len(body) if body else 0  # the file grew since stat
    return body, max(total, grown), _content_type(tree, inner, head)


def _bytes_response(body: bytes, total: int, offset: int, ranged: bool, ctype: str) -> web.Response:
    whole = offset == 0 and len(body) >= total
    headers = dict(_READ_HEADERS)
    headers["X-AFI-EOF"] = "true" if offset + len(body) >= total else "false"
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
    target = locate(normalise(raw), service.visible(access))
    if not target.inner:
        if target.rel and target.namespace is None and not target.children:
            raise NotFound(target.rel)
        raise AfiError("invalid_path", "is a directory", target.path)
    tree = _tree_of(service, target, access)
    body, total, ctype = await asyncio.to_thread(_read_range, tree, target.inner, offset, want)
    return _bytes_response(body, total, offset, ranged, ctype)


# --- manifest --------------------------------------------------------------------------

_AUTH: web.AppKey[tuple[str, ...]] = web.AppKey("afi_auth_methods")


def _auth_methods(request: web.Request) -> tuple[str, ...]:
    methods: tuple[str, ...] = request.app.get(_AUTH) or ()
    return methods


def manifest(service: SearchService, access: Access, auth_methods: Sequence[str] = ()) -> dict[str, Any]:
    """The discovery manifest for one caller: modes are those its namespaces can search in."""
    modes: set[str] = {"exact"}  # mandatory at profile 2
    for name in service.visible(access):
        modes |= service.backend(name, access).modes
    return {
        "afi_version": "0.1",
        "provider": "fedsearch",
        "provider_version": VERSION,
        "profile": 2,
        "capabilities": ["stat", "list", "read", "search"],
        "search": {"modes": [m for m in _MODES if m in modes], "max_results": MAX_RESULTS,
                   "x-ordering": "relevance"},
        "path": {"case_sensitive": True, "max_length": MAX_PATH},
        "auth": {"required": bool(auth_methods), "methods": list(auth_methods)},
    }


async def get_manifest(request: web.Request) -> web.Response:
    service, access = _context(request)
    return json_response(manifest(service, access, _auth_methods(request)))


# --- cursors ---------------------------------------------------------------------------


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts), digest_size=8).hexdigest()


def _encode_cursor(data: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(data)).rstrip(b"=").decode("ascii")


def _decode_cursor(cursor: str, token: str) -> dict[str, Any]:
    """The cursor's data, checked to belong to the request whose digest is ``token``."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        data = orjson.loads(raw)
    except (binascii.Error, ValueError):
        raise AfiError("invalid_request", "cursor: not a cursor of this provider") from None
    if not isinstance(data, dict) or data.get("t") != token:
        raise AfiError("invalid_request", "cursor: belongs to another request")
    return data


# --- search ------------------------------------------------------------------------------

_FORBID = ConfigDict(frozen=True, extra="forbid")


class _Regex(BaseModel):
    model_config = _FORBID
    regex: str
    flags: str = ""


class _Semantic(BaseModel):
    model_config = _FORBID
    semantic: str
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)


class _SearchBody(BaseModel):
    model_config = _FORBID
    query: str | _Regex | _Semantic
    path: str = "/"
    limit: int = Field(default=DEFAULT_RESULTS, ge=1)
    cursor: str | None = Field(default=None, max_length=4096)


def _search_fields(query: str | _Regex | _Semantic) -> dict[str, Any]:
    """The SearchRequest fields an AFI query asks for."""
    if isinstance(query, str):
        return {"query": query, "mode": "exact", "case_sensitive": True}
    if isinstance(query, _Semantic):
        return {"query": query.semantic, "mode": "semantic", "threshold": query.threshold}
    if not set(query.flags) <= set("imsu"):
        raise AfiError("invalid_request", "query.flags: a subset of 'imsu'")
    inline = "".join(f for f in "ms" if f in query.flags)
    text = f"(?{inline}){query.regex}" if inline else query.regex
    return {"query": text, "mode": "regex", "case_sensitive": "i" not in query.flags}


def _glob_literal(inner: str) -> str:
    glob = "/" + "".join("\\" + c if c in _GLOB_SPECIAL else c for c in inner)
    if len(glob) > MAX_GLOB_LENGTH:
        raise AfiError("invalid_path", "too long to search under")
    return glob


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a search under one path covers: namespace patterns, path globs, namespace names."""

    patterns: list[str]
    paths: list[str]
    names: list[str]


def _scope(service: SearchService, target: Target, access: Access) -> _Scope:
    """The namespaces and path globs that a search under ``target`` covers (sync: in a thread)."""
    visible = service.visible(access)
    if not target.rel:
        return _Scope([], [], visible)
    under = [n for n in visible if n.startswith(target.rel + "/")]
    if target.namespace is None:
        if not under:
            raise NotFound(target.rel)
        few = len(under) <= MAX_NAMESPACE_PATTERNS
        return _Scope(under if few else [target.rel + "/*"], [], under)
    if not target.inner:
        names = [target.namespace, *under]
        few = len(names) <= MAX_NAMESPACE_PATTERNS
        return _Scope(names if few else [target.namespace, target.rel + "/*"], [], names)
    tree = service.backend(target.namespace, access).tree()
    if tree is not None:
        tree.stat(target.inner)  # NotFound (cloaked alike) for what the tree will not show
    return _Scope([target.namespace], [_glob_literal(target.inner)], [target.namespace])


def afi_matches(answer: Mapping[str, Any], semantic: bool, threshold: float) -> list[list[dict[str, Any]]]:
    """The AFI Matches of a search answer: one list per file group, in the answer's order.

    This is the only conversion from the wire answer to AFI matches. Path-only hits
    are left out (AFI search returns text matches), and so are semantic hits under
    ``threshold``: ``score`` is present iff the search is semantic.
    """
    out: list[list[dict[str, Any]]] = []
    for group in answer["files"]:
        namespace = group["namespace"]
        matches: list[dict[str, Any]] = []
        for item in group["hits"]:
            score = item.get("score", 0.0)
            if item["kind"] == "file" or (semantic and score < threshold):
                continue
            match: dict[str, Any] = {"path": f"/{namespace}/{item['file_path'].lstrip('/')}",
                                     "line": item["start_line"]}
            if "column" in item:
                match["column"] = item["column"]
            match["text"] = item["text"]
            context = item.get("context")
            if context and (context["before"] or context["after"]):
                match["context"] = context
            if semantic:
                match["score"] = score
            if item["end_line"] != item["start_line"]:
                match["x-end-line"] = item["end_line"]
            match["x-namespace"] = namespace
            matches.append(match)
        out.append(matches)
    return out


def _cut(groups: list[list[dict[str, Any]]], first: int, skip: int, limit: int,
         more: bool) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
    """``limit`` matches from match ``skip`` of file ``first``, and where the next page starts."""
    out: list[dict[str, Any]] = []
    for i, matches in enumerate(groups):
        start = skip if i == 0 else 0
        taken = matches[start : start + limit - len(out)]
        out.extend(taken)
        if start + len(taken) < len(matches):
            return out, (first + i, start + len(taken))
    return out, ((first + len(groups), 0) if more else None)


def _failure(answer: Mapping[str, Any]) -> AfiError | None:
    """The error to give when every namespace asked failed and nothing matched."""
    statuses = answer["namespaces"]
    if answer["files"] or not statuses or any(s["status"] == "ok" for s in statuses):
        return None
    if all(s["status"] == "unsupported" for s in statuses):
        return AfiError("unsupported", "no namespace under this path can search in this mode")
    names = ", ".join(f"{s['name']} ({s['status']})" for s in statuses[:5])
    return AfiError("internal", f"every namespace failed: {names}")


async def post_search(request: web.Request) -> web.Response:
    service, access = _context(request)
    try:
        data = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise AfiError("invalid_request", f"body: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AfiError("invalid_request", "body: must be a JSON object")
    try:
        body = _SearchBody.model_validate({k: v for k, v in data.items() if not k.startswith("x-")})
    except ValidationError as exc:
        field, msg = problem_fields(exc)
        raise AfiError("invalid_request", f"{field}: {msg}") from None
    fields = _search_fields(body.query)
    limit = min(body.limit, MAX_RESULTS)
    rel = normalise(body.path)
    target = locate(rel, service.visible(access))
    try:
        scope = await asyncio.to_thread(_scope, service, target, access)
    except NotFound:
        raise AfiError("not_found", "no such path", body.path) from None
    mode: Mode = fields["mode"]
    if not any(mode in service.backend(n, access).modes for n in scope.names):
        raise AfiError("unsupported", f"no namespace under {target.path} can search in {mode} mode")
    token = _digest("search", fields, rel)
    first, skip = 0, 0
    if body.cursor is not None:
        state = _decode_cursor(body.cursor, token)
        f, h = state.get("f"), state.get("h")
        if not (type(f) is int and type(h) is int and 0 <= f <= MAX_FILE_OFFSET and h >= 0):
            raise AfiError("invalid_request", "cursor: not a cursor of this provider")
        first, skip = f, h
    request_data = {**fields, "namespaces": scope.patterns, "paths": scope.paths,
                    "context_lines": CONTEXT_LINES,
                    "files": SEARCH_FILES, "offset": first,
                    "hit_budget": MAX_HIT_BUDGET,  # whole files beyond the cut: full pages
                    "timeout_ms": service.config.defaults.timeout_ms}
    search = parse_request(request_data)
    answer = await service.search(search, access)
    failure = _failure(answer)
    if failure is not None:
        raise failure
    groups = afi_matches(answer, mode == "semantic", search.threshold)
    matches, after = _cut(groups, first, skip, limit, _next_page(answer, search, first + len(groups)))
    out: dict[str, Any] = {"matches": matches}
    if after is not None:
        out["next_cursor"] = _encode_cursor({"f": after[0], "h": after[1], "t": token})
    incomplete = [{k: s[k] for k in ("name", "status", "error") if k in s}
                  for s in answer["namespaces"] if s["status"] != "ok"]
    if incomplete:
        out["x-incomplete"] = incomplete
    return json_response(out)


def _next_page(answer: Mapping[str, Any], search: SearchRequest, end: int) -> bool:
    """Whether the service offered the page of files that starts at ``end``."""
    wanted = search.args(offset=end)
    return any(action["args"] == wanted for action in answer.get("next", ()))


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

