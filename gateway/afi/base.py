"""The AFI provider's common ground: its errors, the request context, paths and parameters.

See :mod:`gateway.afi.routes` for the provider as a whole.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import mimetypes
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from gateway.errors import BackendUnavailable, InvalidRequest, NotFound, Overloaded, Unsupported
from gateway.http.middleware import ACCESS, json_response
from gateway.http.reload import service_of
from gateway.log import get_logger
from gateway.models import Mode
from gateway.service import Access, SearchService

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
_STATUS = {
    "not_found": 404,
    "invalid_path": 404,
    "unauthorized": 401,
    "unsupported": 405,
    "rate_limited": 429,
    "conflict": 409,
    "internal": 500,
    "invalid_request": 400,
}
_MIME = mimetypes.MimeTypes()  # Python's built-in table only: the same answer on every host
_GLOB_SPECIAL = frozenset("*?[]{},")
_READ_HEADERS = {
    "Accept-Ranges": "bytes",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
}

log = get_logger("fedsearch.afi")

try:
    VERSION = metadata.version("fedsearch")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    VERSION = "0"


class AfiError(Exception):
    """An AFI ``Error``: ``code`` picks the HTTP status."""

    def __init__(
        self,
        code: str,
        message: str,
        path: str | None = None,
        retry_after: float | None = None,
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
    if isinstance(exc, Overloaded):
        return AfiError("rate_limited", exc.detail, path, exc.retry_after)
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
