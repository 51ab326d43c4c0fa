"""The aiohttp app: factory, one cleanup context owning the service, the routes of SPEC §4.

Routes are thin: each parses its input, calls :class:`SearchService`, and returns
the JSON that :func:`gateway.wire.build_response` built. Cross-cutting concerns
(request id, problem+json mapping, metrics) are middleware.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.afi.routes import add_afi_routes
from gateway.config import Config
from gateway.errors import InvalidRequest
from gateway.http.auth import TokenTable, auth_middleware, nobody, tokens_of, visible_metrics
from gateway.http.metrics import Metrics
from gateway.http.middleware import (
    ACCESS,
    SERVICE,
    error_middleware,
    json_response,
    methods_middleware,
    request_id_middleware,
)
from gateway.http.openapi import document
from gateway.http.page import add_page_routes
from gateway.http.params import check_utf8_path, get_params, parameter_names, read_json_body, search_data
from gateway.http.reload import ServiceHolder, service_middleware, service_of
from gateway.http.stream import stream_search
from gateway.log import get_logger
from gateway.service import SearchService
from gateway.tracing.config import tracing_settings

__all__ = ["ACCESS", "SERVICE", "create_app", "get_params", "read_json_body"]

log = get_logger("fedsearch.web")

METRICS = web.AppKey("metrics", Metrics)


def _access(request: web.Request) -> Any:
    return request.get(ACCESS)


async def search(request: web.Request) -> web.Response:
    """POST /v1/search (a JSON body) and GET /v1/search (query parameters)."""
    service = service_of(request)
    with parameter_names(request):
        data = await search_data(request)
        return json_response(await service.search_json(data, _access(request)))


async def get_namespaces(request: web.Request) -> web.Response:
    return json_response({"namespaces": await service_of(request).list_namespaces(_access(request))})


def _line_param(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(name, "must be an integer") from None


async def get_file(request: web.Request) -> web.Response:
    check_utf8_path(request.raw_path)
    service = service_of(request)
    access = _access(request)
    namespace, path = await service.file_of(request.match_info["rest"], access)
    result = await service.read_file(
        namespace, path, _line_param(request, "start_line"), _line_param(request, "end_line"), access
    )
    text = "".join(line + "\n" for line in result["lines"])
    response = web.Response(text=text, content_type="text/plain", charset="utf-8")
    response.headers["X-Start-Line"] = str(result["start_line"])
    response.headers["X-End-Line"] = str(result["end_line"])
    response.headers["X-Total-Lines"] = str(result["total_lines"])
    if "next_start_line" in result:  # a slice: where the next one starts
        response.headers["X-Next-Start-Line"] = str(result["next_start_line"])
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
    return web.Response(body=document(), content_type="application/json")


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

    traced = tracing_settings(config.tracing, os.environ)
    outermost: list[Any] = []
    if traced is not None:  # the SDK is imported only now: off, tracing costs not even that
        from gateway.tracing.http import tracing_middleware

        outermost.append(tracing_middleware)
    app = web.Application(
        middlewares=[
            *outermost,  # first: the request's log line carries its trace id
            request_id_middleware,
            metrics.middleware,
            methods_middleware,  # before auth: a preflight carries no token
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

        def prepare(new: SearchService) -> None:
            metrics.attach(new)
            new.start_serving()

        prepare(service)

        holder = ServiceHolder(service, prepare=prepare)
        app[SERVICE] = holder
        log.info("service_ready", namespaces=len(service.visible()), source=config.source)
        try:
            yield
        finally:
            await holder.aclose()

    app.cleanup_ctx.append(service_ctx)
    if traced is not None:
        from gateway.tracing.http import add_traceparent
        from gateway.tracing.setup import start, stop

        async def tracing_ctx(app: web.Application) -> AsyncIterator[None]:
            start(traced)
            yield
            await stop()  # after the service: the spans of its last requests leave too

        app.cleanup_ctx.insert(0, tracing_ctx)
        app.on_response_prepare.append(add_traceparent)
    router = app.router
    router.add_post("/v1/search", search)
    router.add_get("/v1/search", search)
    router.add_post("/v1/search/stream", stream_search)
    router.add_get("/v1/search/stream", stream_search)
    router.add_get("/v1/namespaces", get_namespaces)
    router.add_get("/v1/files/{rest:.+}", get_file)
    router.add_get("/healthz", healthz)
    router.add_get("/readyz", readyz)
    router.add_get("/metrics", get_metrics)
    router.add_get("/openapi.json", get_openapi)
    add_page_routes(app)
    # last: it owns /afi/* (unknown AFI operations answer `unsupported`)
    add_afi_routes(app, auth_methods=("bearer",) if initial else ())
    return app
