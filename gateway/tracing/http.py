"""Tracing at the HTTP edge: the request's server span, its trace id logged and answered.

* :func:`tracing_middleware` (outermost: the request's log lines carry its ``trace_id``) continues
  the caller's W3C trace (``traceparent``, ``tracestate``) or starts one, names the span after the
  route (``POST /v1/search``), gives it the HTTP semantic conventions' attributes, and answers
  with the span's ``traceparent``; :func:`add_traceparent` sets that header when a response is
  prepared (a stream's too). Only installed while tracing is on.
* the calls out (to a backend, to a peer gateway) are :mod:`gateway.tracing.client`'s.

Never recorded: headers (a token is one), the query string (unless ``[tracing] record_query``),
a URL's credentials. ``url.full`` is scheme, host, port and path.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import Span, SpanKind, StatusCode, format_trace_id, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.log import scrub
from gateway.tracing import spans as tracing
from gateway.tracing.client import method_name, traceparent

__all__ = ["TRACEPARENT", "add_traceparent", "tracing_middleware"]

#: The request's ``traceparent`` as answered (a request key: read when its response is prepared).
TRACEPARENT = web.RequestKey("traceparent", str)
#: The status an answer that never was is logged with (the request middleware's convention).
_CLIENT_CLOSED = 499
_W3C = TraceContextTextMapPropagator()


def _server_attributes(request: web.Request, route: str | None) -> dict[str, Any]:
    url = request.url
    attributes: dict[str, Any] = {
        "http.request.method": method_name(request.method),
        "url.scheme": request.scheme,
        "url.path": request.path,
        "network.protocol.version": f"{request.version.major}.{request.version.minor}",
    }
    if route is not None:
        attributes["http.route"] = route
    if url.host:
        attributes["server.address"] = url.host
    if url.port is not None:
        attributes["server.port"] = url.port
    if request.remote:
        attributes["client.address"] = request.remote
    agent = request.headers.get("User-Agent")
    if agent:
        attributes["user_agent.original"] = scrub(agent)
    if tracing.record_query() and request.query_string:
        attributes["url.query"] = scrub(request.query_string)
    return attributes


def _route(request: web.Request) -> str | None:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


@web.middleware
async def tracing_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The request's server span; its trace id bound into the request's log lines. The span is
    started and made current by hand (``start_as_current_span`` wraps two generator context
    managers around the same): an exception leaves its status unset (its message may quote the
    query); a 5xx answer sets it."""
    tracer = tracing.tracer()
    if tracer is None:  # not started yet, or stopped
        return await handler(request)
    route = _route(request)
    method = method_name(request.method)
    span = tracer.start_span(
        f"{method} {route}" if route is not None else method,
        context=_W3C.extract(request.headers),
        kind=SpanKind.SERVER,
        attributes=_server_attributes(request, route),
    )
    token = attach(set_span_in_context(span))
    request[TRACEPARENT] = traceparent(span.get_span_context())
    try:
        with structlog.contextvars.bound_contextvars(trace_id=format_trace_id(span.get_span_context().trace_id)):
            response = await handler(request)
    except web.HTTPException as exc:
        _end(span, token, exc.status)
        raise
    except BaseException:  # the caller went away (the error middleware answers any other error)
        _end(span, token, _CLIENT_CLOSED)
        raise
    _end(span, token, response.status)
    return response


def _end(span: Span, token: Token[Context], status: int) -> None:
    """The request's span ends with its answer's status (a 5xx sets its status), current no more."""
    if status >= 500:
        span.set_status(StatusCode.ERROR)
        span.set_attributes({"http.response.status_code": status, "error.type": str(status)})
    else:
        span.set_attribute("http.response.status_code", status)
    detach(token)
    span.end()


async def add_traceparent(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the request span's ``traceparent`` in the answer's headers."""
    value = request.get(TRACEPARENT)
    if value is not None:
        response.headers["traceparent"] = value
