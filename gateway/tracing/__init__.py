"""Tracing with OpenTelemetry's SDK: off by default, and then free.

The hot path asks one question, :func:`on` (a module global read), or opens :func:`span`,
which is a shared ``nullcontext`` yielding None while tracing is off: no span, no
attribute dict, no ``opentelemetry`` import (a one-shot CLI search never imports it).
Call sites set attributes only on a span they were given::

    with tracing.span("fedsearch.rank") as span:
        whole = settle(...)
        if span is not None:
            span.set_attribute("fedsearch.files", whole.file_count)

:func:`gateway.tracing.setup.start` turns it on (the HTTP app does, from ``[tracing]`` or
``OTEL_*``: :mod:`gateway.tracing.config`, imported apart: a one-shot CLI search that ranks
through a module importing this one never imports pydantic); :mod:`gateway.tracing.http` has the server
middleware, :mod:`gateway.tracing.client` what a call out to a backend or a peer carries (W3C
``traceparent``/``tracestate``) and records.

Spans (docs/operations.md lists their attributes): the request (``POST /v1/search``; over MCP
the tool call, :func:`request`), the
admission wait, each namespace (with the HTTP attributes of its call to a backend or peer), the content index's
narrowing and the rg that confirms, declarations and semantic scoring, merge and rank,
snapshot write and cursor read. Retries, hedges and breaker changes are events on the
namespace's span. Never a token; the query text only with ``[tracing] record_query``.
"""

from __future__ import annotations

from gateway.tracing.spans import annotate, event, install, on, record_query, request, span, tracer, uninstall

__all__ = [
    "annotate",
    "event",
    "install",
    "on",
    "record_query",
    "request",
    "span",
    "tracer",
    "uninstall",
]
