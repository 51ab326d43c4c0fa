"""What every HTTP adapter shares: one ClientSession per backend, error mapping at the edge.

* :class:`HttpBackend` owns one lazily created ``aiohttp.ClientSession`` with explicit
  connect/read timeouts (aiohttp's 300 s default is never in force) and closes it.
* :func:`map_client_errors` turns aiohttp, JSON and OS errors into the gateway's
  :mod:`gateway.errors` tree, most specific first, the original chained.
* :func:`read_body` / :func:`read_json` check the status (rate limits with their
  ``Retry-After`` / ``x-ratelimit-reset``, 5xx, redirects — never followed), the
  content type, and cap the body size before parsing it once with orjson.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, TypeVar

import aiohttp
import orjson
import re2
from pydantic import AfterValidator, Field

from gateway.backend import AsyncBackend, BackendSettings
from gateway.errors import (
    BackendCapped,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    RateLimited,
    Rejected,
    Transient,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ConnectionLost",
    "HttpBackend",
    "HttpSettings",
    "RepoRegex",
    "Unreachable",
    "check_status",
    "http_error",
    "map_client_errors",
    "read_body",
    "read_json",
    "retry_after",
    "token_from_env",
]

DEFAULT_MAX_BYTES = 32 << 20
CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 30.0


class HttpSettings(BackendSettings):
    """Keys every HTTP adapter understands besides its own."""

    url: str = Field(default="", description="The backend's base URL.")
    token_env: str | None = Field(default=None, description="Environment variable holding the token.")
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1024, description="Response size cap.")


class Unreachable(BackendUnavailable, Transient):
    """Refused, not connected in time, or answered 502/503/504: a retry (elsewhere, later) may work."""


class ConnectionLost(BackendError, Transient):
    """The connection was closed or reset before the answer was whole: a retry may work."""


def _re2_regex(value: str) -> str:
    if value:
        try:
            re2.compile(value)
        except re2.error as exc:
            raise ValueError(f"invalid regex: {exc}") from None
    return value


#: A settings field holding a backend-side regex (``repos``): checked with RE2 at load.
RepoRegex = Annotated[str, AfterValidator(_re2_regex)]


def token_from_env(name: str | None) -> str | None:
    """The secret in environment variable ``name`` (never logged, never in the config)."""
    if not name:
        return None
    value = os.environ.get(name)
    return value or None


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait, from ``Retry-After`` (seconds or HTTP date) or ``x-ratelimit-reset``."""
    now = time.time() if now is None else now
    value = headers.get("Retry-After")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - now)
    reset = headers.get("x-ratelimit-reset") or headers.get("RateLimit-Reset")
    if reset and reset.strip().isdigit():
        n = float(reset)
        # epoch seconds (GitHub, GitLab) or delta seconds (IETF draft)
        return max(0.0, n - now) if n > 1_000_000_000 else n
    return None


def http_error(status: int, reason: str) -> BackendError:
    """The error of an HTTP status: a 4xx is the query refused (the backend is up), else a failure."""
    return Rejected(reason) if 400 <= status < 500 else BackendError(reason)


def check_status(resp: aiohttp.ClientResponse) -> None:
    """Raise the gateway error a non-2xx status means; 3xx is refused, never followed."""
    status = resp.status
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        raise BackendError(f"HTTP {status}: redirect refused")
    headers = resp.headers
    exhausted = headers.get("x-ratelimit-remaining") == "0" or headers.get("RateLimit-Remaining") == "0"
    if status == 429 or (status == 403 and (exhausted or "Retry-After" in headers)):
        wait = retry_after(headers)
        raise RateLimited(f"HTTP {status}: rate limited", retry_after=wait)
    if status in (401, 403):
        raise Rejected(f"HTTP {status}: not authorised")
    if status in (502, 503, 504):
        raise Unreachable(f"HTTP {status}", retry_after=retry_after(headers))
    raise http_error(status, f"HTTP {status}")


async def read_body(
    resp: aiohttp.ClientResponse, max_bytes: int = DEFAULT_MAX_BYTES, content_type: str | tuple[str, ...] = ""
) -> bytes:
    """The body of a 2xx response, at most ``max_bytes`` (else BackendCapped).

    ``content_type`` is the media type (or types) accepted; anything else is an error.
    """
    check_status(resp)
    if content_type and not resp.headers.get("Content-Type", "").startswith(content_type):
        got = resp.headers.get("Content-Type", "none").split(";")[0]
        raise BackendError(f"wrong content type {got!r}")
    length = resp.content_length
    if length is not None and length > max_bytes:
        raise BackendCapped(f"response of {length} bytes over the {max_bytes}-byte cap")
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > max_bytes:
            raise BackendCapped(f"response over the {max_bytes}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(
    resp: aiohttp.ClientResponse,
    max_bytes: int = DEFAULT_MAX_BYTES,
    content_type: str | tuple[str, ...] = "application/json",
) -> Any:
    """The JSON body of a 2xx response, parsed once with orjson."""
    body = await read_body(resp, max_bytes, content_type)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BackendError("invalid JSON in response") from exc


def _mapped(exc: BaseException) -> BackendError | None:
    """The gateway error a transport failure means, most specific first; None: not ours to map."""
    if isinstance(exc, BackendError) or not isinstance(exc, Exception):
        return None
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Unreachable("cannot connect: timed out")
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return BackendTimeout("timed out")
    if isinstance(exc, aiohttp.ClientSSLError):
        return BackendUnavailable(f"TLS failure: {type(exc).__name__}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Unreachable(f"cannot connect: {exc.os_error.strerror or 'refused'}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ConnectionLost("connection closed by the server")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ConnectionLost("connection reset mid-body")
    if isinstance(exc, aiohttp.ClientOSError):
        return ConnectionLost(f"connection error: {exc.strerror or type(exc).__name__}")
    if isinstance(exc, aiohttp.ClientError):
        return BackendError(f"HTTP client error: {type(exc).__name__}")
    if isinstance(exc, orjson.JSONDecodeError | UnicodeDecodeError):
        return BackendError("undecodable response")
    if isinstance(exc, KeyError | TypeError | ValueError | IndexError | AttributeError):
        return BackendError(f"unexpected response shape: {type(exc).__name__}")
    return None


class _ClientErrors:
    """The context of :func:`map_client_errors` (a class: a generator-based one costs more per request)."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        mapped = None if exc is None else _mapped(exc)
        if mapped is not None:
            raise mapped from exc


_CLIENT_ERRORS = _ClientErrors()


def map_client_errors() -> _ClientErrors:
    """Translate transport failures into the gateway's errors, once, at the edge (``async with``)."""
    return _CLIENT_ERRORS


S = TypeVar("S", bound=HttpSettings)


def _dumps(value: Any) -> str:
    """JSON request bodies through orjson (aiohttp's default is the stdlib's)."""
    return orjson.dumps(value).decode()


class HttpBackend(AsyncBackend[S]):
    """A backend reached over HTTP: one persistent session, closed by :meth:`aclose`."""

    def __init__(self, name: str, settings: S) -> None:
        super().__init__(name, settings)
        self._session: aiohttp.ClientSession | None = None

    #: How the ``token_env`` secret is sent: in this header, after this scheme (None: bare).
    #: Backends without auth of their own get it as a bearer token, for a proxy in front.
    auth_header: ClassVar[str] = "Authorization"
    auth_scheme: ClassVar[str | None] = "Bearer"

    def headers(self) -> dict[str, str]:
        """Headers sent with every request: identity, JSON, and the token in the API's own header."""
        headers = {"User-Agent": "fedsearch/0.1", "Accept": "application/json"}
        token = token_from_env(self.settings.token_env)
        if token:
            headers[self.auth_header] = f"{self.auth_scheme} {token}" if self.auth_scheme else token
        return headers

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(
                total=None, connect=CONNECT_TIMEOUT, sock_connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT
            )
            self._session = aiohttp.ClientSession(
                timeout=timeout,
                headers=self.headers(),
                connector=aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True),
                trust_env=False,
                json_serialize=_dumps,
            )
        return self._session

    @staticmethod
    def budget(deadline_s: float) -> aiohttp.ClientTimeout:
        """A per-request timeout that ends at the query's deadline."""
        return aiohttp.ClientTimeout(total=max(0.001, deadline_s), connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await asyncio.sleep(0)
