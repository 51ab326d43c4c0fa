"""Tracing at the HTTP edges: the request's server span, and a client span for each call out.

* :func:`tracing_middleware` (outermost: the request's log lines carry its ``trace_id``) continues
  the caller's W3C trace (``traceparent``, ``tracestate``) or starts one, names the span after the
  route (``POST /v1/search``), gives it the HTTP semantic conventions' attributes, and answers
  with the span's ``traceparent``; :func:`add_traceparent` sets that header when a response is
  prepared (a stream's too). Only installed while tracing is on.
* :func:`client_trace_config`: aiohttp's client hooks; each request to a backend or a peer
  gateway carries the current span (the namespace's) in its headers, so a peer's spans join
  the caller's trace under that namespace, and that span gets the request's HTTP attributes.

Never recorded: headers (a token is one), the query string (unless ``[tracing] record_query``),
a URL's credentials. ``url.full`` is scheme, host, port and path.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import structlog
from aiohttp import TraceConfig, TraceRequestEndParams, TraceRequestExceptionParams, TraceRequestStartParams, web
from aiohttp.typedefs import Handler
from opentelemetry.trace import (
    Span,
    SpanKind,
    StatusCode,
    format_span_id,
    format_trace_id,
    get_current_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from yarl import URL

from gateway.log import scrub
from gateway.tracing import spans as tracing

__all__ = ["TRACEPARENT", "add_traceparent", "client_trace_config", "tracing_middleware"]

#: The request's ``traceparent`` as answered (a request key: read when its response is prepared).
TRACEPARENT = web.RequestKey("traceparent", str)
#: Methods named as they are; any other is ``_OTHER`` (the HTTP conventions).
_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
#: The status an answer that never was is logged with (the request middleware's convention).
_CLIENT_CLOSED = 499
_W3C = TraceContextTextMapPropagator()


def _method(method: str) -> str:
    return method if method in _METHODS else "_OTHER"


def _traceparent(span: Span) -> str:
    context = span.get_span_context()
    flags = int(context.trace_flags)
    return f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-{flags:02x}"


def _server_attributes(request: web.Request, route: str | None) -> dict[str, Any]:
    url = request.url
    attributes: dict[str, Any] = {
        "http.request.method": _method(request.method),
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
    """The request's server span; its trace id bound into the request's log lines."""
    tracer = tracing.tracer()
    if tracer is None:  # not started yet, or stopped
        return await handler(request)
    route = _route(request)
    method = _method(request.method)
    with tracer.start_as_current_span(
        f"{method} {route}" if route is not None else method,
        context=_W3C.extract(request.headers),
        kind=SpanKind.SERVER,
        attributes=_server_attributes(request, route),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        request[TRACEPARENT] = _traceparent(span)
        status = _CLIENT_CLOSED
        with structlog.contextvars.bound_contextvars(trace_id=format_trace_id(span.get_span_context().trace_id)):
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(StatusCode.ERROR)
                    span.set_attribute("error.type", str(status))


async def add_traceparent(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the request span's ``traceparent`` in the answer's headers."""
    value = request.get(TRACEPARENT)
    if value is not None:
        response.headers["traceparent"] = value


def client_trace_config() -> TraceConfig:
    """aiohttp client hooks: the current span's context (the namespace's) sent in each request's
    headers, and the HTTP conventions' attributes of its last request set on it (a span of its
    own for each request would double what a traced search costs: bench/README.md, issue 54)."""

    async def start(_: Any, __: SimpleNamespace, params: TraceRequestStartParams) -> None:
        _W3C.inject(params.headers)

    async def end(_: Any, __: SimpleNamespace, params: TraceRequestEndParams) -> None:
        span = _calling()
        if span is not None:
            status = params.response.status
            span.set_attributes({**_client_attributes(params.method, params.url), "http.response.status_code": status})

    async def failed(_: Any, __: SimpleNamespace, params: TraceRequestExceptionParams) -> None:
        span = _calling()
        exc = params.exception
        if span is not None and isinstance(exc, Exception):  # not a cancellation (a hedge's loser, a deadline)
            span.set_attributes({**_client_attributes(params.method, params.url), "error.type": type(exc).__qualname__})

    config = TraceConfig()
    config.on_request_start.append(start)
    config.on_request_end.append(end)
    config.on_request_exception.append(failed)
    config.freeze()
    return config


def _calling() -> Span | None:
    """The span a request out is made in, when it is one of ours (a namespace's): a request made
    in the request's own span (a peer's children listed, a remote file read) leaves it as it is."""
    span = get_current_span()
    return span if span.is_recording() and getattr(span, "kind", None) is SpanKind.INTERNAL else None


def _client_attributes(method: str, url: URL) -> dict[str, Any]:
    return {
        "http.request.method": _method(method),
        "url.full": str(url.with_user(None).with_query(None).with_fragment(None)),
        "server.address": url.host or "",
        "server.port": url.port or 0,
    }
