"""The tracer this process records with, and what the hot path asks of it (see :mod:`gateway.tracing`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.trace import Span, Tracer

    from gateway.tracing.current import CurrentSpan, RequestSpan

__all__ = ["annotate", "event", "install", "on", "record_query", "request", "span", "tracer", "uninstall"]

_tracer: Tracer | None = None
_current: type[CurrentSpan] | None = None
_request: type[RequestSpan] | None = None
_record_query = False
_OFF: AbstractContextManager[None] = contextlib.nullcontext()


def on() -> bool:
    """Whether spans are recorded in this process."""
    return _tracer is not None


def tracer() -> Tracer | None:
    """The tracer spans are recorded with (None while off)."""
    return _tracer


def record_query() -> bool:
    """Whether the query text may go on a span (``[tracing] record_query``)."""
    return _record_query


def install(tracer: Tracer, *, query: bool = False) -> None:
    """Record spans with ``tracer`` from now on (:func:`gateway.tracing.setup.start`)."""
    global _tracer, _current, _request, _record_query
    from gateway.tracing.current import CurrentSpan, RequestSpan

    _tracer, _current, _request, _record_query = tracer, CurrentSpan, RequestSpan, query


def uninstall() -> None:
    """Record no more spans (:func:`gateway.tracing.setup.stop`)."""
    global _tracer, _record_query
    _tracer, _record_query = None, False


def span(name: str, attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[Span | None]:
    """A child of the current span, current inside, with ``attributes`` from its start (None while
    tracing is off: build no attributes for it then). An exception through it leaves its status
    unset: the SDK's status would carry the exception's message, which may quote the query (the
    namespace's span says how its backend failed)."""
    tracer, current = _tracer, _current
    if tracer is None or current is None:
        return _OFF
    return current(tracer, name, attributes)


def request(name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[Span | None]:
    """The span of a request that did not come over HTTP (an MCP tool call), current inside, its
    trace id in the log lines (None while off)."""
    tracer, opened = _tracer, _request
    if tracer is None or opened is None:
        return _OFF
    return opened(tracer, name, attributes)


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span (the request's, from the service); nothing while off."""
    if _tracer is None:
        return
    from opentelemetry.trace import get_current_span

    get_current_span().set_attributes(attributes)


def event(name: str, attributes: Mapping[str, Any]) -> None:
    """An event on the current span (a retry, a hedge, a breaker's change); nothing while off."""
    if _tracer is None:
        return
    from opentelemetry.trace import get_current_span

    get_current_span().add_event(name, attributes)
