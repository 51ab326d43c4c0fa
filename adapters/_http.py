"""The HTTP adapter template: an adapter is a request builder and a response parser.

An HTTP adapter writes two pure functions of the query and its settings: one builds a
:class:`Request`, one turns the backend's answer into a
:class:`~gateway.models.BackendResult` (both tested alone, no server needed). Everything
else is done here, once, the same way for every backend:

* **settings**: :class:`HttpSettings` (``url`` an :data:`HttpUrl`, ``token_env``,
  ``max_bytes``);
* **the session**: one ``aiohttp.ClientSession`` per backend with explicit connect/read
  timeouts (aiohttp's 300 s default is never in force), never trusting the environment's
  proxies, the token in the API's own header (:attr:`HttpBackend.auth_header`);
* **sending** (:meth:`HttpBackend.fetch`, :meth:`HttpBackend.stream`): a token variable
  that is not set fails before anything is sent; the request ends at the deadline
  exactly; redirects are refused, never followed;
* **the status**: rate limits with their wait (``Retry-After``, ``x-ratelimit-reset``),
  401/403, 502/503/504 (transient), other 4xx (the query refused: the backend is up) and
  5xx, each with the backend's own reason from its error body when the adapter reads it
  (:meth:`HttpBackend.refusal`, given that body as JSON with the token already cut out);
* **the body**: its content type checked, its size capped as it is read, JSON parsed once;
* **errors**: aiohttp, JSON and OS errors become :mod:`gateway.errors`, most specific
  first, the original chained (:func:`map_client_errors`);
* **files** (:meth:`HttpBackend.read_through`): a remote file read whole under
  :data:`gateway.files.MAX_READ_BYTES`, a 404 :class:`~gateway.errors.NotFound`, kept in the
  backend's :class:`~gateway.files.ReadCache` by its ``ETag`` and asked again as a
  conditional request (``If-None-Match``: a 304 sends nothing back); while the backend
  rate-limits us, the copy kept is served.

:class:`JsonBackend` is the whole adapter for the usual backend (one request, one JSON
answer): ``request(query)`` and ``parse(data, query, keep)``. ``adapters/hound.py`` is
an example. The helpers for writing queries and reading answers are in
:mod:`adapters._text`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import email.utils
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, TypeVar

import aiohttp
import orjson
import re2
import yarl
from multidict import CIMultiDictProxy, MultiDictProxy
from pydantic import AfterValidator, Field

from adapters._text import seconds_left
from gateway import tracing
from gateway.backend import AsyncBackend, BackendSettings
from gateway.errors import (
    BackendCapped,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    NotFound,
    RateLimited,
    Rejected,
    Transient,
)
from gateway.files import MAX_READ_BYTES, ReadCache, too_large
from gateway.log import REDACTED
from gateway.models import BackendResult, FileMatch, RemoteFile, SearchQuery, Status
from gateway.query.globs import PathFilter

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ConnectionLost",
    "HttpBackend",
    "HttpSettings",
    "HttpUrl",
    "JsonBackend",
    "Paging",
    "Reply",
    "RepoRegex",
    "Request",
    "Unreachable",
    "error_field",
    "error_message",
    "map_client_errors",
    "retry_after",
    "token_from_env",
]

DEFAULT_MAX_BYTES = 32 << 20
CONNECT_TIMEOUT = 3.0
READ_TIMEOUT = 30.0
#: How much of an error answer is read for the backend's reason.
ERROR_BODY_BYTES = 4096
#: A paged search asks no further page with less than this left.
PAGE_RESERVE_S = 0.2


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {value!r}")
    return value.rstrip("/")


def _re2_regex(value: str) -> str:
    if value:
        try:
            re2.compile(value)
        except re2.error as exc:
            raise ValueError(f"invalid regex: {exc}") from None
    return value


#: A settings field holding a backend's base URL: http(s) only, without a trailing slash.
HttpUrl = Annotated[str, AfterValidator(_http_url)]
#: A settings field holding a backend-side regex (``repos``): checked with RE2 at load.
RepoRegex = Annotated[str, AfterValidator(_re2_regex)]


class HttpSettings(BackendSettings):
    """Keys every HTTP adapter understands besides its own (an adapter makes ``url`` required or gives a default)."""

    url: str = Field(default="", description="The backend's base URL.")
    token_env: str | None = Field(default=None, description="Environment variable holding the token.")
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1024, description="Response size cap.")


class Unreachable(BackendUnavailable, Transient):
    """Refused, not connected in time, or answered 502/503/504: a retry (elsewhere, later) may work."""


class ConnectionLost(BackendError, Transient):
    """The connection was closed or reset before the answer was whole: a retry may work."""


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


def status_error(status: int, headers: Mapping[str, str]) -> BackendError:
    """The gateway error a non-2xx status means when the backend's body says nothing more."""
    if 300 <= status < 400:
        return BackendError(f"HTTP {status}: redirect refused")
    exhausted = headers.get("x-ratelimit-remaining") == "0" or headers.get("RateLimit-Remaining") == "0"
    if status == 429 or (status == 403 and (exhausted or "Retry-After" in headers)):
        return RateLimited(f"HTTP {status}: rate limited", retry_after=retry_after(headers))
    if status in (401, 403):
        return Rejected(f"HTTP {status}: not authorised")
    if status in (502, 503, 504):
        return Unreachable(f"HTTP {status}", retry_after=retry_after(headers))
    return http_error(status, f"HTTP {status}")


def error_field(error: Any, *keys: str) -> str:
    """The text at ``keys`` in a JSON error body (``error_field(e, "error", "message")``), or ``""``."""
    for key in keys:
        if not isinstance(error, Mapping):
            return ""
        error = error.get(key)
    return error if isinstance(error, str) else ""


def error_message(error: Any) -> str:
    """A short, single-line message from a REST API's error body (``message``, else ``error``;
    GitLab's ``{"message": {"field": [...]}}`` joined)."""
    message: Any = (error.get("message") or error.get("error")) if isinstance(error, Mapping) else None
    if isinstance(message, Mapping):
        message = message.get("error") or "; ".join(f"{k}: {v}" for k, v in message.items())
    return " ".join(message.split())[:160] if isinstance(message, str) else ""


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


T = TypeVar("T")


@dataclass(slots=True)
class Paging:
    """How far a search paged over several requests got. A failure on the first page is the
    search's; a later one ends the paging, keeping what came (``timeout`` or ``capped``)."""

    page: int = 0
    status: Status = "ok"
    reasons: list[str] = field(default_factory=list)

    def until(self, query: SearchQuery) -> float:
        """When this page's request must end: at the deadline for the first page; a little
        before it for a later one, to hand back in time what the earlier ones gave."""
        return query.deadline if self.page <= 1 else time.monotonic() + seconds_left(query)

    def go_on(self, query: SearchQuery, max_pages: int) -> bool:
        """Whether another page may be asked: fewer than ``max_pages`` so far, and time for one."""
        return self.page < max_pages and query.remaining() >= PAGE_RESERVE_S

    async def next(self, query: SearchQuery, send: Callable[[int, float], Awaitable[T]]) -> T | None:
        """The next page, ``send(page, until)``; None once a later page failed (its failure noted)."""
        self.page += 1
        try:
            return await send(self.page, self.until(query))
        except BackendError as exc:
            if self.page <= 1:
                raise
            self.status = "timeout" if isinstance(exc, BackendTimeout) else "capped"
            self.reasons.append(f"page {self.page}: {exc.reason}")
            return None

    def partial(self, files: list[FileMatch], reasons: list[str], file_count: int | None) -> BackendResult:
        """The result of a search that did not get everything: ``capped``, or ``timeout`` if a page did."""
        status: Status = "capped" if self.status == "ok" else self.status
        return BackendResult(files=files, status=status, reason="; ".join(reasons), file_count=file_count)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request to a backend, as an adapter's request builder writes it.

    ``accept`` lists the content types taken as the answer (empty: any); with
    ``untyped`` an answer without a Content-Type is taken too (Go servers that sniff).
    ``max_bytes`` caps this answer below the settings' cap.
    """

    url: str | yarl.URL
    method: str = "GET"
    params: Mapping[str, str | int] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = None
    accept: tuple[str, ...] = ("application/json",)
    untyped: bool = False
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A 2xx answer: its body (whole, under the cap), headers and ``Link`` relations."""

    body: bytes
    headers: CIMultiDictProxy[str]
    links: MultiDictProxy[MultiDictProxy[str | yarl.URL]] | None = None

    def json(self) -> Any:
        """The body parsed once with orjson."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise BackendError("invalid JSON in response") from exc


def _dumps(value: Any) -> str:
    """JSON request bodies through orjson (aiohttp's default is the stdlib's)."""
    return orjson.dumps(value).decode()


S = TypeVar("S", bound=HttpSettings)


class HttpBackend(AsyncBackend[S]):
    """A backend reached over HTTP: one persistent session, closed by :meth:`aclose`."""

    #: How the ``token_env`` secret is sent: in this header, after this scheme (None: bare).
    #: Backends without auth of their own get it as a bearer token, for a proxy in front.
    auth_header: ClassVar[str] = "Authorization"
    auth_scheme: ClassVar[str | None] = "Bearer"

    def __init__(self, name: str, settings: S) -> None:
        super().__init__(name, settings)
        self.token_env = settings.token_env
        self._session: aiohttp.ClientSession | None = None
        #: The remote files it read, by path, each with its ETag.
        self.read_cache = ReadCache()

    def headers(self) -> dict[str, str]:
        """Headers sent with every request: identity, JSON, and the token in the API's own header."""
        headers = {"User-Agent": "fedsearch/0.1", "Accept": "application/json"}
        token = token_from_env(self.token_env)
        if token:
            headers[self.auth_header] = f"{self.auth_scheme} {token}" if self.auth_scheme else token
        return headers

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """The error a failing status means by the backend's own word (``error``: its body as
        JSON, the token cut out; None if not JSON), or None for the usual mapping."""
        return None

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

    async def fetch(self, request: Request, until: float) -> Reply:
        """Send ``request``; its checked 2xx answer, read whole. ``until``: when it must have ended."""
        self._check_token()
        async with map_client_errors(), asyncio.timeout_at(until), await self._send(request) as resp:
            await self._check(resp, request)
            body = await self._read(resp, request.max_bytes or self.settings.max_bytes)
            links = resp.links if "Link" in resp.headers else None
            return Reply(body, resp.headers, links)

    @contextlib.asynccontextmanager
    async def stream(self, request: Request, until: float) -> AsyncIterator[aiohttp.ClientResponse]:
        """Send ``request``; its checked 2xx response, for the caller to read as it comes (under
        its own deadline: a stream cut there may still be worth its partial answer)."""
        self._check_token()
        async with map_client_errors():
            async with asyncio.timeout_at(until):
                resp = await self._send(request)
            try:
                async with asyncio.timeout_at(until):
                    await self._check(resp, request)
                yield resp
            finally:
                resp.release()

    async def fetch_file(self, request: Request, until: float, validator: str = "") -> Reply | None:
        """Send a file request: its 2xx answer read whole (under the read cap); None for a 304
        when ``validator`` (an ETag) was sent; NotFound for a 404."""
        self._check_token()
        headers = dict(request.headers or {})
        if validator:
            headers["If-None-Match"] = validator
        cap = min(self.settings.max_bytes, MAX_READ_BYTES)
        sent = Request(
            url=request.url, method=request.method, params=request.params, json=request.json, headers=headers, accept=()
        )
        try:
            async with map_client_errors(), asyncio.timeout_at(until), await self._send(sent) as resp:
                if resp.status == 304 and validator:
                    return None
                if resp.status == 404:
                    raise NotFound("no such file")
                await self._check(resp, sent)
                return Reply(await self._read(resp, cap), resp.headers)
        except BackendCapped:
            raise too_large() from None

    async def read_through(self, key: str, request: Request, until: float) -> RemoteFile:
        """The file ``request`` asks for, through the read cache under ``key`` (see the module docstring)."""
        cached = self.read_cache.get(key)
        try:
            reply = await self.fetch_file(request, until, cached.identity if cached is not None else "")
        except RateLimited:
            if cached is None:
                raise
            return self.read_cache.served(cached)  # the copy kept, while the backend will not answer
        except NotFound:
            self.read_cache.drop(key)
            raise
        if reply is None:
            if cached is None:  # pragma: no cover - a 304 is only asked for with a copy kept
                raise BackendError("HTTP 304 without a copy kept")
            return self.read_cache.served(cached)
        file = RemoteFile(reply.body, reply.headers.get("ETag", ""))
        self.read_cache.put(key, file)
        return file

    def _check_token(self) -> None:
        if self.token_env and not token_from_env(self.token_env):
            raise BackendError(f"token variable {self.token_env} is not set")

    def _send(self, request: Request) -> Awaitable[aiohttp.ClientResponse]:
        """The response to ``request``, to be awaited; with tracing on, the request carries the
        current span's trace and its attributes go on that span (:mod:`gateway.tracing.client`)."""
        if not tracing.on():
            return self._request(request, request.headers)
        from gateway.tracing import client

        return client.sent(request.method, request.url, self._request(request, client.outgoing(request.headers)))

    def _request(self, request: Request, headers: Mapping[str, str] | None) -> Awaitable[aiohttp.ClientResponse]:
        url, params = request.url, request.params
        return self.session.request(
            request.method, url, params=params, json=request.json, headers=headers, allow_redirects=False
        )

    async def _check(self, resp: aiohttp.ClientResponse, request: Request) -> None:
        """Raise the error a non-2xx status means, in the backend's words where it gives them;
        then refuse a content type the request does not accept."""
        status = resp.status
        if 300 <= status < 400:
            raise status_error(status, resp.headers)
        if status >= 400 or status < 200:
            body = await resp.content.read(ERROR_BODY_BYTES)
            secret = token_from_env(self.token_env)
            if secret:
                body = body.replace(secret.encode(), REDACTED.encode())
            error: Any = None
            with contextlib.suppress(orjson.JSONDecodeError):
                error = orjson.loads(body)
            raise self.refusal(status, error, resp.headers) or status_error(status, resp.headers)
        if request.accept:
            got = resp.headers.get("Content-Type", "")
            if not got.startswith(request.accept) and not (request.untyped and not got):
                raise BackendError(f"wrong content type {got.split(';')[0] or 'none'!r}")

    @staticmethod
    async def _read(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
        """The body, at most ``max_bytes`` (else BackendCapped), never held beyond the cap."""
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

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await asyncio.sleep(0)


class JsonBackend(HttpBackend[S]):
    """A backend asked once a search, answering one JSON document: the adapter is two functions."""

    @abc.abstractmethod
    def request(self, query: SearchQuery) -> Request:
        """The request for ``query`` (a pure function of it and the settings)."""

    @abc.abstractmethod
    def parse(self, data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
        """Our result from the backend's answer; ``keep`` says whether a path inside a
        repository passes the query's path and language filters."""

    async def search(self, query: SearchQuery) -> BackendResult:
        keep = PathFilter.build(query.paths, query.languages)
        reply = await self.fetch(self.request(query), query.deadline)
        async with map_client_errors():
            return self.parse(reply.json(), query, keep)
