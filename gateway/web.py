"""The aiohttp app: factory, one cleanup context owning the service, problem+json errors.

Routes are thin: each parses its input, calls :class:`SearchService`, and returns
the JSON that :func:`gateway.wire.build_response` built. Cross-cutting concerns
(request id, problem+json mapping) live in :mod:`gateway.middleware`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from aiohttp import web

from gateway.config import Config
from gateway.errors import InvalidRequest
from gateway.log import get_logger
from gateway.middleware import SERVICE, error_middleware, json_response, request_id_middleware
from gateway.service import SearchService

__all__ = ["SERVICE", "create_app", "read_json_body"]

log = get_logger("fedsearch.web")


async def read_json_body(request: web.Request) -> Any:
    """The request body as JSON, or InvalidRequest naming ``body``."""
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"invalid JSON: {exc}") from None


async def post_search(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    data = await read_json_body(request)
    return json_response(await service.search_json(data))


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


def create_app(
    config: Config,
    service_factory: Callable[[Config], SearchService] | None = None,
) -> web.Application:
    """The gateway's aiohttp application over ``config``."""
    app = web.Application(
        middlewares=[request_id_middleware, error_middleware],
        client_max_size=config.server.max_body_bytes,
    )
    factory = service_factory or SearchService

    async def service_ctx(app: web.Application) -> AsyncIterator[None]:
        service = factory(config)
        app[SERVICE] = service
        log.info("service_ready", namespaces=len(service.visible()), source=config.source)
        try:
            yield
        finally:
            await service.aclose()

    app.cleanup_ctx.append(service_ctx)
    app.router.add_post("/v1/search", post_search)
    app.router.add_get("/healthz", healthz)
    return app
