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
middleware and the client hooks that carry W3C ``traceparent``/``tracestate``.

Spans (docs/operations.md lists their attributes): the request (``POST /v1/search``), the
admission wait, each namespace, each HTTP call to a backend or peer, the content index's
narrowing and the rg that confirms, declarations and semantic scoring, merge and rank,
snapshot write and cursor read. Retries, hedges and breaker changes are events on the
namespace's span. Never a token; the query text only with ``[tracing] record_query``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.tracing.spans import annotate, event, install, on, record_query, span, tracer, uninstall

if TYPE_CHECKING:
    from aiohttp import TraceConfig

__all__ = [
    "annotate",
    "client_hooks",
    "event",
    "install",
    "on",
    "record_query",
    "span",
    "tracer",
    "uninstall",
]


def client_hooks() -> list[TraceConfig] | None:
    """aiohttp client hooks for a new session: each request a span, its trace in the headers
    (:mod:`gateway.tracing.http`); None while off (a session opened then is never traced)."""
    if tracer() is None:
        return None
    from gateway.tracing.http import client_trace_config

    return [client_trace_config()]
