"""Cross-cutting HTTP concerns as ``(request, handler)`` middleware.

* ``request_id_middleware`` binds a request id (the caller's ``X-Request-Id`` if it
  is sane, else a fresh one) into structlog's contextvars and echoes it back.
* ``error_middleware`` maps the gateway's errors to RFC 9457 problem+json through
  one table; nothing escapes as a bare 500.
* ``methods_middleware`` answers ``OPTIONS`` with 204 and ``Allow``, and gives every
  405 its ``Allow`` (RFC 9110 §15.5.6), on every route. It sends no CORS headers: the
  gateway has no CORS setting, so a browser on another origin is refused, as it should be.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
import structlog
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from gateway.errors import GatewayError, InvalidRequest, NotFound, Overloaded, Unsupported
from gateway.http.problems import PROBLEM_TYPE, problem, problem_for
from gateway.http.reload import SERVICE
from gateway.log import get_logger

__all__ = [
    "ACCESS",
    "SERVICE",
    "error_middleware",
    "json_response",
    "methods_middleware",
    "problem_response",
    "request_id_middleware",
]

#: The caller's access predicate, set per request by auth middleware (None: everything).
ACCESS = web.RequestKey("access", object)
#: The status logged for a request that ended without an answer (nginx's convention).
CLIENT_CLOSED = 499
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

log = get_logger("fedsearch.http")


def json_response(data: Any, status: int = 200, content_type: str = "application/json") -> web.Response:
    """Serialise once with orjson."""
    return web.Response(body=orjson.dumps(data), status=status, content_type=content_type)


def problem_response(status: int, title: str, detail: str, field: str | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(problem(status, title, detail, field)),
        status=status,
        content_type=PROBLEM_TYPE,
    )


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    given = request.headers.get("X-Request-Id", "")
    request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
    started = time.monotonic()
    with structlog.contextvars.bound_contextvars(request_id=request_id):
        status = CLIENT_CLOSED  # unless an answer is made: the client left, or shutdown cut it
        try:
            response = await handler(request)
            response.headers["X-Request-Id"] = request_id
            status = response.status
            return response
        finally:
            log.info(
                "request_done",
                method=request.method,
                route=_route(request),
                status=status,
                took_ms=round((time.monotonic() - started) * 1000),
            )


def _route(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else "unmatched"


_HTTP_TITLES = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 413: "Payload too large"}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except (InvalidRequest, NotFound, Unsupported, Overloaded) as exc:  # the caller's lot, not ours
        return _problem_of(exc)
    except GatewayError as exc:
        log.warning("gateway_error", error=type(exc).__name__)
        return _problem_of(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return problem_response(413, "Payload too large", exc.text or "body too large", "body")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        title = _HTTP_TITLES.get(exc.status, exc.reason)
        return problem_response(exc.status, title, exc.text or exc.reason)
    except Exception as exc:  # never a bare 500
        log.error("unhandled_error", error=type(exc).__name__, exc_info=exc)
        return _problem_of(exc)


def _problem_of(exc: BaseException) -> web.Response:
    body = problem_for(exc)
    response = web.Response(body=orjson.dumps(body), status=body["status"], content_type=PROBLEM_TYPE)
    if "retry_after" in body:
        response.headers["Retry-After"] = str(body["retry_after"])
    return response


async def allowed_methods(request: web.Request) -> list[str]:
    """The methods some route of ``request``'s path takes, OPTIONS among them once there is one (a
    catch-all route, AFI's for its unknown operations, takes none)."""
    methods: set[str] = set()
    for resource in request.app.router.resources():
        _, allowed = await resource.resolve(request)
        if hdrs.METH_ANY not in allowed:
            methods.update(allowed)
    return sorted({*methods, hdrs.METH_OPTIONS}) if methods else []


@web.middleware
async def methods_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method == hdrs.METH_OPTIONS:
        allowed = await allowed_methods(request)
        if allowed:
            return web.Response(status=204, headers={hdrs.ALLOW: ", ".join(allowed)})
    response = await handler(request)
    if response.status == 405 and hdrs.ALLOW not in response.headers:
        response.headers[hdrs.ALLOW] = ", ".join(await allowed_methods(request))
    return response
