"""The aiohttp app: factory, one cleanup context owning the service, the routes of SPEC §4.

Routes are thin: each parses its input, calls :class:`SearchService`, and returns
the JSON that :func:`gateway.wire.build_response` built. Cross-cutting concerns
(request id, problem+json mapping, metrics) are middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web
from multidict import MultiMapping
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.afi.routes import add_afi_routes
from gateway.config import Config
from gateway.errors import InvalidRequest
from gateway.http.auth import TokenTable, auth_middleware, nobody, tokens_of, visible_metrics
from gateway.http.metrics import Metrics
from gateway.http.middleware import ACCESS, SERVICE, error_middleware, json_response, request_id_middleware
from gateway.http.openapi import openapi
from gateway.http.reload import ServiceHolder, service_middleware, service_of
from gateway.log import get_logger
from gateway.request import SearchRequest
from gateway.service import SearchService

__all__ = ["ACCESS", "SERVICE", "check_utf8", "create_app", "get_params", "read_json_body"]

log = get_logger("fedsearch.web")

METRICS = web.AppKey("metrics", Metrics)

#: GET /v1/search query parameters -> SearchRequest fields (lists are repeatable).
_SCALARS = {
    "q": "query",
    "mode": "mode",
    "case": "case_sensitive",
    "context": "context_lines",
    "files": "files",
    "offset": "offset",
    "hit_budget": "hit_budget",
    "timeout_ms": "timeout_ms",
    "threshold": "threshold",
}
_LISTS = {"ns": "namespaces", "path": "paths", "lang": "languages"}
_PARAM_OF = {field: param for param, field in {**_SCALARS, **_LISTS}.items()}
_CASE = {"true": True, "1": True, "false": False, "0": False, "smart": None, "": None}


def _utf8(part: str) -> str | None:
    """A percent-encoded query-string part, decoded; None if its bytes are not UTF-8."""
    try:
        return unquote_to_bytes(part.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_utf8(raw_query: str) -> None:
    """InvalidRequest naming the first parameter of a raw query string that is not UTF-8 once
    percent-decoded (aiohttp decodes it with U+FFFD in place of the bytes: a search for
    something nobody asked for)."""
    for pair in raw_query.split("&"):
        key, _, value = pair.partition("=")
        name = _utf8(key)
        if name is None:
            raise InvalidRequest("query string", "a parameter name is not valid UTF-8")
        if _utf8(value) is None:
            raise InvalidRequest(name, "is not valid UTF-8")


def get_params(query: MultiMapping[str], raw: str | None = None) -> dict[str, Any]:
    """The SearchRequest data that GET /v1/search's query parameters describe (``raw``: the
    query string as sent, checked to be UTF-8)."""
    if raw:
        check_utf8(raw)
    data: dict[str, Any] = {}
    for key in query:
        if key in _LISTS:
            data[_LISTS[key]] = query.getall(key)
        elif key in _SCALARS:
            values = query.getall(key)
            if len(values) > 1:
                raise InvalidRequest(key, "given more than once")
            data[_SCALARS[key]] = values[0]
        else:
            raise InvalidRequest(key, "unknown parameter")
    if "case_sensitive" in data:
        value = str(data["case_sensitive"]).lower()
        if value not in _CASE:
            raise InvalidRequest("case", "must be true, false or smart")
        data["case_sensitive"] = _CASE[value]
    return data


async def read_json_body(request: web.Request) -> Any:
    """The request body as JSON, or InvalidRequest naming ``body``."""
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"invalid JSON: {exc}") from None


def _access(request: web.Request) -> Any:
    return request.get(ACCESS)


async def post_search(request: web.Request) -> web.Response:
    service = service_of(request)
    data = await read_json_body(request)
    return json_response(await service.search_json(data, _access(request)))


async def get_search(request: web.Request) -> web.Response:
    service = service_of(request)
    try:
        data = get_params(request.query, request.rel_url.raw_query_string)
        return json_response(await service.search_json(data, _access(request)))
    except InvalidRequest as exc:
        field = exc.field.split(".")[0]
        if field in SearchRequest.model_fields and field in _PARAM_OF:
            raise InvalidRequest(_PARAM_OF[field], exc.message) from None
        raise


async def get_namespaces(request: web.Request) -> web.Response:
    return json_response({"namespaces": service_of(request).namespaces(_access(request))})


def _line_param(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(name, "must be an integer") from None


async def get_file(request: web.Request) -> web.Response:
    service = service_of(request)
    access = _access(request)
    namespace, path = service.split_path(request.match_info["rest"], access)
    result = await service.read_file(
        namespace, path, _line_param(request, "start_line"), _line_param(request, "end_line"), access
    )
    text = "".join(line + "\n" for line in result["lines"])
    response = web.Response(text=text, content_type="text/plain", charset="utf-8")
    response.headers["X-Start-Line"] = str(result["start_line"])
    response.headers["X-End-Line"] = str(result["end_line"])
    response.headers["X-Total-Lines"] = str(result["total_lines"])
    return response


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    holder = request.app.get(SERVICE)
    if holder is None:
        return json_response({"status": "starting"}, status=503)
    access = _access(request)
    if access is nobody:  # an open route without a valid token: not even a count
        return json_response({"status": "ready"})
    return json_response({"status": "ready", "namespaces": len(holder.current.visible(access))})


async def get_metrics(request: web.Request) -> web.Response:
    """Prometheus text; with tokens, only the namespaces the caller may see appear in labels."""
    body = visible_metrics(request.app[METRICS].registry, _access(request))
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def get_openapi(request: web.Request) -> web.Response:
    return json_response(openapi())


def create_app(
    config: Config,
    service_factory: Callable[[Config], SearchService] | None = None,
) -> web.Application:
    """The gateway's aiohttp application over ``config``."""
    metrics = Metrics()
    initial = TokenTable(config.tokens)

    def tokens(request: web.Request) -> TokenTable:
        holder = request.app.get(SERVICE)
        return initial if holder is None else tokens_of(holder.current.config)

    app = web.Application(
        middlewares=[
            request_id_middleware,
            metrics.middleware,
            auth_middleware(tokens),
            error_middleware,
            service_middleware,
        ],
        client_max_size=config.server.max_body_bytes,
    )
    app[METRICS] = metrics
    factory = service_factory or SearchService

    async def service_ctx(app: web.Application) -> AsyncIterator[None]:
        service = factory(config)
        service.observers.append(metrics.observe)
        holder = ServiceHolder(service, prepare=lambda new: new.observers.append(metrics.observe))
        app[SERVICE] = holder
        log.info("service_ready", namespaces=len(service.visible()), source=config.source)
        try:
            yield
        finally:
            await holder.aclose()

    app.cleanup_ctx.append(service_ctx)
    router = app.router
    router.add_post("/v1/search", post_search)
    router.add_get("/v1/search", get_search)
    router.add_get("/v1/namespaces", get_namespaces)
    router.add_get("/v1/files/{rest:.+}", get_file)
    router.add_get("/healthz", healthz)
    router.add_get("/readyz", readyz)
    router.add_get("/metrics", get_metrics)
    router.add_get("/openapi.json", get_openapi)
    # last: it owns /afi/* (unknown AFI operations answer `unsupported`)
    add_afi_routes(app, auth_methods=("bearer",) if initial else ())
    return app
