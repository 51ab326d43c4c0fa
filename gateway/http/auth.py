"""Bearer tokens -> what a caller may see, and the one uniform 401 (SPEC §4, §5; invariant 7).

* :class:`TokenTable` holds the ``[[tokens]]`` of the config: a name, the sha256 of
  the bearer token (never the token) and namespace globs. A presented token is
  hashed as *bytes* and its digest compared with every configured digest through
  :func:`hmac.compare_digest` (no early exit), so a non-ASCII token is just a wrong
  token, never a 500.
* :func:`auth_middleware` reads ``Authorization: Bearer <token>`` from the raw
  header bytes and sets ``request[ACCESS]`` to the token's namespace predicate.
  Missing, malformed, repeated and unknown tokens all get the same answer: 401 with
  ``WWW-Authenticate: Bearer realm="fedsearch"`` and a fixed body, problem+json on
  ``/v1`` (and every other route), an AFI ``Error`` with code ``unauthorized`` on
  ``/afi`` and ``/.afi``.
* Open routes (:data:`OPEN_ROUTES`): ``/healthz``, ``/readyz``, ``/openapi.json``
  and ``/.afi/manifest.json`` (a client reads it to learn that auth is required).
  A token there is optional: a valid one gives that token's view, anything else
  gives :func:`nobody`'s (the manifest lists only ``exact``; ``/readyz`` no count).
  ``/openapi.json`` is a static schema with no namespace in it; so are the web page
  and its files (:data:`~gateway.http.page.PAGE_ROUTES`), which ask for a token.
* ``/metrics`` needs a token, and :func:`visible_metrics` leaves out every series
  whose ``namespace`` label the token may not see.
* :class:`BearerAuth` does the same for an ASGI app (MCP over streamable HTTP), and
  :func:`stdio_access` turns ``fedsearch mcp --token`` into that token's access.
* With no tokens configured access is open: ``ACCESS`` stays unset (everything).
  The table follows the config in force, so a reload can add or drop tokens.
* Both also say who the caller is, for fair admission (:mod:`gateway.resilience.callers`):
  the token's principal (its ``weight`` and quota; a ``peer`` token's forwarded
  ``X-Fedsearch-Client``), else the client id or the peer address; the middleware serves the
  request for it (:func:`~gateway.resilience.callers.calling`), :class:`BearerAuth` leaves it
  in the scope's ``state`` under :data:`PRINCIPAL_STATE`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from gateway.config import Config, TokenConfig
from gateway.errors import InvalidRequest
from gateway.http.middleware import ACCESS
from gateway.http.page import PAGE_ROUTES
from gateway.http.problems import PROBLEM_TYPE, problem
from gateway.log import get_logger, redact_values
from gateway.query.globs import namespace_matcher
from gateway.resilience.callers import CLIENT_HEADER, Principal, calling, identify
from gateway.service import Access

__all__ = [
    "ACCESS_STATE",
    "CHALLENGE",
    "OPEN_ROUTES",
    "PRINCIPAL_STATE",
    "STDIO",
    "UNAUTHORIZED_DETAIL",
    "BearerAuth",
    "Caller",
    "TokenTable",
    "auth_middleware",
    "bearer_token",
    "is_afi_path",
    "is_loopback",
    "nobody",
    "refusal",
    "stdio_access",
    "stdio_principal",
    "tokens_of",
    "unauthorized",
    "visible_metrics",
    "warn_if_open",
]

#: Routes answered without a token (resource canonical paths); the web page holds no namespace.
OPEN_ROUTES = frozenset({"/healthz", "/readyz", "/openapi.json", "/.afi/manifest.json", *PAGE_ROUTES})
CHALLENGE = 'Bearer realm="fedsearch"'
#: A presented token longer than this (bytes) is malformed (aiohttp caps a header at 8190).
MAX_TOKEN_BYTES = 4096
UNAUTHORIZED_DETAIL = "a valid bearer token is required"

log = get_logger("fedsearch.auth")


def nobody(name: str) -> bool:
    """The access of a caller without a valid token on an open route: no namespace."""
    return False


class _NamespaceAccess:
    """What a token may see: namespaces matching its globs. ``identity`` tells tokens apart (the cache's keys)."""

    __slots__ = ("_matchers", "identity")

    def __init__(self, globs: Sequence[str], identity: str) -> None:
        self._matchers = [namespace_matcher(glob) for glob in globs]
        self.identity = identity

    def __call__(self, name: str) -> bool:
        return any(match(name) for match in self._matchers)


@dataclass(frozen=True, slots=True)
class Caller:
    """A configured token: its name (for logs), what it may see, and who it is to admission."""

    name: str
    digest: bytes
    access: Callable[[str], bool]
    principal: Principal


def _principal(token: TokenConfig) -> Principal:
    return Principal(token.name, token.weight, token.rate, token.burst, token.peer)


class TokenTable:
    """The configured bearer tokens, by sha256 digest."""

    def __init__(self, tokens: Sequence[TokenConfig]) -> None:
        self._callers = tuple(
            Caller(
                token.name,
                bytes.fromhex(token.sha256),
                _NamespaceAccess(token.namespaces, token.sha256.lower()),
                _principal(token),
            )
            for token in tokens
        )

    def __bool__(self) -> bool:
        return bool(self._callers)

    def __len__(self) -> int:
        return len(self._callers)

    def lookup(self, token: bytes | str | None) -> Caller | None:
        """The caller whose token this is, or None; every digest is compared, in constant time each."""
        if token is None:
            return None
        raw = token.encode("utf-8", "surrogateescape") if isinstance(token, str) else token
        if not raw or len(raw) > MAX_TOKEN_BYTES:
            return None
        digest = hashlib.sha256(raw).digest()
        found: Caller | None = None
        for caller in self._callers:
            if hmac.compare_digest(digest, caller.digest) and found is None:
                found = caller
        return found


def bearer_token(values: Sequence[bytes]) -> bytes | None:
    """The token of the ``Authorization`` header values (raw bytes); None unless exactly one Bearer."""
    if len(values) != 1:
        return None
    scheme, _, rest = values[0].strip(b" \t").partition(b" ")
    token = rest.strip(b" \t")
    if scheme.lower() != b"bearer" or not token or b" " in token or b"\t" in token:
        return None
    return token


def _authorization(request: web.BaseRequest) -> list[bytes]:
    return [value for name, value in request.raw_headers if name.lower() == b"authorization"]


def is_afi_path(path: str) -> bool:
    return path == "/afi" or path.startswith(("/afi/", "/.afi/"))


def refusal(path: str, status: int, title: str, detail: str, afi_code: str, field: str | None = None) -> web.Response:
    """An error answered before any handler ran: an AFI Error under /afi and /.afi, else problem+json."""
    if is_afi_path(path):
        return web.Response(
            body=orjson.dumps({"code": afi_code, "message": detail}), status=status, content_type="application/json"
        )
    body = orjson.dumps(problem(status, title, detail, field))
    return web.Response(body=body, status=status, content_type=PROBLEM_TYPE)


def unauthorized(path: str) -> web.Response:
    """The one 401: the same bytes whatever was wrong with the token."""
    response = refusal(path, 401, "Unauthorized", UNAUTHORIZED_DETAIL, "unauthorized")
    response.headers["WWW-Authenticate"] = CHALLENGE
    return response


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127/8, ::1, ::ffff:127.x)."""
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def warn_if_open(config: Config, host: str, surface: str = "http") -> bool:
    """Log a warning when ``host`` is reachable from the network and no token is configured."""
    if config.tokens or is_loopback(host):
        return False
    log.warning(
        "open_access",
        surface=surface,
        host=host,
        detail="no [[tokens]] configured: anyone who reaches this address sees every namespace",
    )
    return True


def _route(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else ""


_TABLES: dict[int, tuple[Sequence[TokenConfig], TokenTable]] = {}


def tokens_of(config: Config) -> TokenTable:
    """The token table of ``config`` (built once per config; a reload brings a new one)."""
    key = id(config.tokens)
    cached = _TABLES.get(key)
    if cached is None or cached[0] is not config.tokens:
        if len(_TABLES) >= 16:
            _TABLES.clear()
        cached = (config.tokens, TokenTable(config.tokens))
        _TABLES[key] = cached
    return cached[1]


def auth_middleware(tables: Callable[[web.Request], TokenTable]) -> Middleware:
    """The middleware that sets ``request[ACCESS]`` from the bearer token, or answers 401.

    ``tables(request)`` gives the token table in force (the config can be reloaded);
    an empty table means open access: ``ACCESS`` is left unset.
    """

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        table = tables(request)
        client = request.headers.get(CLIENT_HEADER)
        if not table:
            with calling(identify(None, client=client, address=request.remote)):
                return await handler(request)
        caller = table.lookup(bearer_token(_authorization(request)))
        if caller is None:
            if _route(request) in OPEN_ROUTES:
                request[ACCESS] = nobody
                return await handler(request)
            log.info("auth_refused", route=_route(request) or "unmatched")
            return unauthorized(request.path)
        request[ACCESS] = caller.access
        with (
            structlog.contextvars.bound_contextvars(caller=caller.name),
            calling(identify(caller.principal, client=client)),
        ):
            return await handler(request)

    return middleware


class _Visible:
    """A registry view with only the series a caller may see (``collect()`` is all Prometheus needs)."""

    def __init__(self, registry: Any, access: Callable[[str], bool]) -> None:
        self._registry = registry
        self._access = access

    def collect(self) -> Iterator[Any]:
        for family in self._registry.collect():
            kept = Metric(family.name, family.documentation, family.type, family.unit)
            kept.samples = [s for s in family.samples if self._shown(s.labels)]
            yield kept

    def _shown(self, labels: dict[str, str]) -> bool:
        namespace = labels.get("namespace")
        return namespace is None or self._access(namespace)


def visible_metrics(registry: Any, access: Callable[[str], bool] | None) -> bytes:
    """The Prometheus text of ``registry`` without the namespaces ``access`` hides."""
    if access is None:
        return bytes(generate_latest(registry))
    return bytes(generate_latest(_Visible(registry, access)))


# --- ASGI (MCP over HTTP) and local sessions ---------------------------------------------

#: Where :class:`BearerAuth` leaves the caller's access in the ASGI scope's ``state``.
ACCESS_STATE = "fedsearch_access"
#: Where it leaves the caller's principal (:class:`~gateway.resilience.callers.Principal`).
PRINCIPAL_STATE = "fedsearch_principal"

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class BearerAuth:
    """ASGI middleware (MCP over HTTP): a configured bearer token, else the uniform 401 problem.

    The caller's access goes into the scope's ``state`` under :data:`ACCESS_STATE`.
    """

    def __init__(self, app: ASGIApp, table: TokenTable) -> None:
        self.app = app
        self.table = table

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        values = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        caller = self.table.lookup(bearer_token(values))
        if caller is None:
            await self._refuse(scope, send)
            return
        state = dict(scope.get("state") or {})
        state[ACCESS_STATE] = caller.access
        client = next((v for n, v in scope.get("headers", ()) if n.lower() == _CLIENT_HEADER_BYTES), None)
        state[PRINCIPAL_STATE] = identify(caller.principal, client=client.decode("latin-1") if client else None)
        await self.app({**scope, "state": state}, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, send: Any) -> None:
        log.info("auth_refused", surface="asgi")
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = orjson.dumps(problem(401, "Unauthorized", UNAUTHORIZED_DETAIL))
        headers = [
            (b"content-type", PROBLEM_TYPE.encode()),
            (b"www-authenticate", CHALLENGE.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


_CLIENT_HEADER_BYTES = CLIENT_HEADER.lower().encode()
#: The caller of a local MCP session without a token.
STDIO = Principal("session:stdio")


def stdio_access(config: Config, token: str | None, env: Mapping[str, str] | None = None) -> Access:
    """The access of a local session (MCP stdio): everything (the local user), or ``--token``'s view.

    ``token`` is the token itself or ``env:VAR``; a token the config does not know,
    or a config without ``[[tokens]]``, is InvalidRequest naming ``token``.
    """
    caller = _stdio_caller(config, token, env)
    if caller is None:
        return None
    return caller.access


def stdio_principal(config: Config, token: str | None, env: Mapping[str, str] | None = None) -> Principal:
    """Who a local session (MCP stdio) is to admission: ``--token``'s principal, else :data:`STDIO`."""
    caller = _stdio_caller(config, token, env)
    return STDIO if caller is None else caller.principal


def _stdio_caller(config: Config, token: str | None, env: Mapping[str, str] | None) -> Caller | None:
    if token is None:
        return None
    environ = os.environ if env is None else env
    value: str | None = token
    if token.startswith("env:"):
        value = environ.get(token[4:])
        if not value:
            raise InvalidRequest("token", f"environment variable {token[4:]!r} is not set")
    redact_values([value])
    table = TokenTable(config.tokens)
    if not table:
        raise InvalidRequest("token", "the config has no [[tokens]] to check it against")
    caller = table.lookup(value)
    if caller is None:
        raise InvalidRequest("token", "not a configured token")
    return caller
