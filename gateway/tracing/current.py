"""A span made current for a block, the SDK's tracer used plainly (imported once tracing starts).

:func:`gateway.tracing.span` hands out a :class:`CurrentSpan`: the span starts with its
attributes, is attached as the current context for the block and ends after it. That is what
``Tracer.start_as_current_span`` does, without the two generator context managers it wraps
``use_span`` in, and with the exception handling fedsearch wants (an exception leaves the span's
status unset: the SDK's message would quote the query). Measured on the 2-core machine: 11
spans a request in 900 us instead of 1,200 (bench/README.md, issue 54).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from types import TracebackType
from typing import Any

import structlog
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import Span, SpanKind, Tracer, format_trace_id, set_span_in_context

__all__ = ["CurrentSpan", "RequestSpan"]


class CurrentSpan:
    """``with CurrentSpan(tracer, name, attributes) as span:`` the span is current inside, ended after."""

    __slots__ = ("_attributes", "_kind", "_name", "_span", "_token", "_tracer")

    def __init__(
        self, tracer: Tracer, name: str, attributes: Mapping[str, Any] | None, kind: SpanKind = SpanKind.INTERNAL
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes
        self._kind = kind
        self._token: Token[Context] | None = None
        self._span: Span | None = None

    def __enter__(self) -> Span:
        span = self._tracer.start_span(self._name, kind=self._kind, attributes=self._attributes)
        self._token = attach(set_span_in_context(span))
        self._span = span
        return span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._token is not None:
            detach(self._token)
        if self._span is not None:
            self._span.end()


class RequestSpan(CurrentSpan):
    """The span of a request that came in other than over HTTP (an MCP tool call): a SERVER span,
    a child of the caller's when the transport brought its context (the MCP SDK makes a
    ``_meta.traceparent`` current), its ``trace_id`` bound into the log lines inside."""

    __slots__ = ("_bound",)

    def __init__(self, tracer: Tracer, name: str, attributes: Mapping[str, Any] | None) -> None:
        super().__init__(tracer, name, attributes, SpanKind.SERVER)
        self._bound: Mapping[str, Any] = {}

    def __enter__(self) -> Span:
        span = super().__enter__()
        self._bound = structlog.contextvars.bind_contextvars(trace_id=format_trace_id(span.get_span_context().trace_id))
        return span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        structlog.contextvars.reset_contextvars(**self._bound)
        super().__exit__(kind, exc, traceback)
