"""Spans to OTLP protobuf bytes: the SDK exporter's ``encode_spans`` message, written directly.

The OTLP exporter's own encoder builds a protobuf object for every attribute (a ``KeyValue``
holding an ``AnyValue``), another for every span, and its upb messages copy each of them again
into the span, the scope, the resource and the request that hold it: 50 to 60 us a span on the
2-core machine, half of what tracing a search costs (bench/README.md, issue 54, third pass).
Here each attribute's field is worked out once and kept (a search's spans repeat the same
names, kinds, URLs and statuses: ``(key, value)`` pairs seen before are a dict lookup), and a
span's bytes are joined from its fields in the wire format. Decoded, the bytes are the message
``encode_spans`` builds (``tests/test_tracing_encode.py`` checks it, property-based); whatever
is not a str, bool, int or float value, and any span with links, goes through the SDK's own
encoding of that part.

Only the batch processor's one export thread calls :func:`encode`.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_resource,
    _encode_value,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

__all__ = ["encode"]

_logger = logging.getLogger("opentelemetry.exporter.otlp.proto.common._internal")
_INT64 = (-(1 << 63), 1 << 63)
#: Attribute fields kept at most (a search's counts vary; its names, kinds and URLs repeat).
_KEPT = 8192
#: ``Span.kind``: the SDK's kinds as OTLP numbers them (0 is unspecified).
_KINDS = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
#: ``Span.flags``: the context's is-remote bit is known (0x100), and set (0x200) for a remote parent.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_Q = struct.Struct("<Q")
_I = struct.Struct("<I")
_D = struct.Struct("<d")

_fields: dict[tuple[bytes, str, type, object], bytes] = {}
_headers: dict[object, bytes] = {}


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((n,)) for n in range(0x80)]


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _value(value: Any) -> bytes:
    """An ``AnyValue``'s bytes (a str that is not valid UTF-8 raises, as it does in the SDK)."""
    kind = type(value)
    if kind is str:
        return _delimited(b"\x0a", value.encode())
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int and _INT64[0] <= value < _INT64[1]:
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if kind is float:
        return b"\x21" + _D.pack(value)
    return bytes(_encode_value(value).SerializePartialToString())


def _field(tag: bytes, key: str, value: Any) -> bytes | None:
    """A ``KeyValue`` field; None: the SDK's encoding fails on it too (it logs and drops the attribute)."""
    try:
        kv = _delimited(b"\x0a", key.encode()) if key else b""
        return _delimited(tag, kv + _delimited(b"\x12", _value(value)))
    except Exception as error:
        _logger.exception("Failed to encode key %s: %s", key, error)
        return None


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> list[bytes]:
    """Each attribute as its ``KeyValue`` field (``tag``), in order; a pair seen before from the cache."""
    if not attributes:
        return []
    fields = _fields
    out = []
    for key, value in attributes.items():
        kind = type(value)
        cached = kind is str or kind is bool or kind is int  # not float: -0.0 == 0.0
        if cached:
            field = fields.get((tag, key, kind, value))
            if field is not None:
                out.append(field)
                continue
        field = _field(tag, key, value)
        if field is None:
            continue
        if cached:
            if len(fields) >= _KEPT:
                fields.clear()
            fields[(tag, key, kind, value)] = field
        out.append(field)
    return out


def _span(span: ReadableSpan) -> bytes:
    """``ScopeSpans.spans``: a ``Span`` message (field numbers from opentelemetry-proto's trace.proto)."""
    if not span.links:
        try:
            return _delimited(b"\x12", _span_fields(span))
        except UnicodeEncodeError:  # a name or state the SDK cannot encode either: its error
            pass
    return _delimited(b"\x12", bytes(_encode_span(span).SerializePartialToString()))


def _span_fields(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None  # a span the SDK ended has one
    parts = [b"\x0a\x10" + context.trace_id.to_bytes(16, "big"), b"\x12\x08" + context.span_id.to_bytes(8, "big")]
    state = context.trace_state
    if state:
        parts.append(_delimited(b"\x1a", ",".join(f"{k}={v}" for k, v in state.items()).encode()))
    parent = span.parent
    if parent:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))
    if span.name:
        parts.append(_delimited(b"\x2a", span.name.encode()))
    parts.append(b"\x30" + _SMALL[_KINDS[span.kind]])
    if span.start_time:
        parts.append(b"\x39" + _Q.pack(span.start_time))
    if span.end_time:
        parts.append(b"\x41" + _Q.pack(span.end_time))
    parts += _attributes(b"\x4a", span.attributes)
    if span.dropped_attributes:
        parts.append(b"\x50" + _varint(span.dropped_attributes))
    for event in span.events:
        fields = [b"\x09" + _Q.pack(event.timestamp)] if event.timestamp else []
        if event.name:
            fields.append(_delimited(b"\x12", event.name.encode()))
        fields += _attributes(b"\x1a", event.attributes)
        if event.dropped_attributes:
            fields.append(b"\x20" + _varint(event.dropped_attributes))
        parts.append(_delimited(b"\x5a", b"".join(fields)))
    if span.dropped_events:
        parts.append(b"\x60" + _varint(span.dropped_events))
    if span.dropped_links:
        parts.append(b"\x70" + _varint(span.dropped_links))
    status = span.status
    if status is not None:
        fields = [_delimited(b"\x12", status.description.encode())] if status.description else []
        if status.status_code.value:
            fields.append(b"\x18" + _varint(status.status_code.value))
        parts.append(_delimited(b"\x7a", b"".join(fields)))
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0)
    parts.append(b"\x85\x01" + _I.pack(flags))
    return b"".join(parts)


def _resource_header(resource: Resource) -> bytes:
    """``ResourceSpans.resource`` (its bytes kept: a process has one resource)."""
    header = _headers.get(resource)
    if header is None:
        header = _delimited(b"\x0a", bytes(_encode_resource(resource).SerializePartialToString()))
        _headers[resource] = header
    return header


def _scope_header(scope: InstrumentationScope | None) -> bytes:
    """``ScopeSpans.scope`` (kept: a process has one tracer)."""
    key = ("scope", scope)
    header = _headers.get(key)
    if header is None:
        header = _delimited(b"\x0a", bytes(_encode_instrumentation_scope(scope).SerializePartialToString()))  # type: ignore[arg-type]
        _headers[key] = header
    return header


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest``'s bytes: the spans grouped by resource, then by scope, in
    the order first seen, as the SDK's ``encode_spans`` groups them."""
    grouped: dict[Resource, dict[InstrumentationScope | None, list[bytes]]] = {}
    for span in spans:
        scopes = grouped.setdefault(span.resource, {})
        scopes.setdefault(span.instrumentation_scope or None, []).append(_span(span))
    out = []
    for resource, scopes in grouped.items():
        fields = [_resource_header(resource)]
        for scope, encoded in scopes.items():
            scope_fields = [_scope_header(scope), *encoded]
            if scope is not None and scope.schema_url:
                scope_fields.append(_delimited(b"\x1a", scope.schema_url.encode()))
            fields.append(_delimited(b"\x12", b"".join(scope_fields)))
        if resource.schema_url:
            fields.append(_delimited(b"\x1a", resource.schema_url.encode()))
        out.append(_delimited(b"\x0a", b"".join(fields)))
    if len(_headers) > 64:  # resources or tracers made and dropped (tests): keep none for long
        _headers.clear()
    return b"".join(out)
