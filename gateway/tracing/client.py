"""Tracing a call out to a backend or a peer gateway (imported once tracing is on).

:meth:`adapters._http.HttpBackend` sends every request through :func:`outgoing` (the current
span's W3C ``traceparent``/``tracestate`` added to its headers: a peer's spans join the
caller's trace under that namespace's span) and :func:`sent` (the HTTP conventions'
attributes of the call set on that span). Not a span of its own: a client span for each
request nearly doubled what a traced search costs (bench/README.md, issue 54). Nor aiohttp's
``TraceConfig`` hooks: with one installed, aiohttp builds a parameters object and sends a
signal for every step of every request (a connection taken, headers sent, each chunk read),
which cost more than the tracing itself.

A request made in the request's own span (a peer's children listed, a remote file read)
carries the trace but leaves the request's attributes as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Mapping
from typing import Any

from aiohttp import ClientResponse
from opentelemetry.trace import Span, SpanContext, SpanKind, get_current_span
from yarl import URL

__all__ = ["method_name", "outgoing", "sent", "traceparent"]

#: Methods named as they are; any other is ``_OTHER`` (the HTTP conventions).
_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})


def method_name(method: str) -> str:
    """``http.request.method``: a known method as it is, any other ``_OTHER`` (the HTTP conventions)."""
    return method if method in _METHODS else "_OTHER"


def traceparent(context: SpanContext) -> str:
    """W3C ``traceparent`` of a span (version 00)."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def outgoing(headers: Mapping[str, str] | None) -> dict[str, str]:
    """``headers`` with the current span's W3C trace context added (a new dict): what the SDK's
    ``TraceContextTextMapPropagator.inject`` writes, without its carrier and setter indirection."""
    carrier = dict(headers) if headers else {}
    context = get_current_span().get_span_context()
    if context.is_valid:
        carrier["traceparent"] = traceparent(context)
        if context.trace_state:
            carrier["tracestate"] = context.trace_state.to_header()
    return carrier


async def sent(method: str, url: str | URL, pending: Awaitable[ClientResponse]) -> ClientResponse:
    """``pending``'s response, the call's attributes set on the namespace's span it is made in."""
    span = _calling()
    if span is None:
        return await pending
    try:
        response = await pending
    except Exception as exc:  # not a cancellation (a hedge's loser, a deadline): nothing failed
        span.set_attributes({**_attributes(method, url), "error.type": type(exc).__qualname__})
        raise
    span.set_attributes({**_attributes(method, url), "http.response.status_code": response.status})
    return response


def _calling() -> Span | None:
    """The span a request out is made in, when it is a namespace's (ours, INTERNAL)."""
    span = get_current_span()
    return span if span.is_recording() and getattr(span, "kind", None) is SpanKind.INTERNAL else None


@functools.lru_cache(maxsize=256)
def _attributes(method: str, url: str | URL) -> dict[str, Any]:
    """The call's attributes (a backend's URL is the same at every call: worked out once).
    ``url.full`` without credentials, query or fragment (the query may carry the search)."""
    parsed = URL(url) if isinstance(url, str) else url
    return {
        "http.request.method": method_name(method),
        "url.full": str(parsed.with_user(None).with_query(None).with_fragment(None)),
        "server.address": parsed.host or "",
        "server.port": parsed.port or 0,
    }
