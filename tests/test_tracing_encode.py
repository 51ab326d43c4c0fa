"""The spans' OTLP bytes written by gateway.tracing.encode: the SDK encoder's message, exactly.

Spans are made by the SDK's own tracer (attributes of every kind the API takes, events, links,
remote parents, trace states, statuses) and ended into its processor; the bytes
:func:`gateway.tracing.encode.encode` writes are decoded with opentelemetry-proto and compared
with what the OTLP exporter's ``encode_spans`` builds from the same spans. The exporter that
sends them is checked against a real OTLP receiver (tests/otlp_receiver.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from opentelemetry.trace.span import TraceState

from gateway.tracing import encode as encoding
from gateway.tracing.encode import encode
from gateway.tracing.export import OtlpExporter
from gateway.tracing.setup import HashedResource
from tests.otlp_receiver import Receiver

KEYS = st.sampled_from(["a", "b", "fedsearch.files", "url.full", "é", "k" * 40])  # few: the cache is hit
SCALARS = (
    st.text(max_size=30)
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # past int64 too: the SDK drops those
    | st.floats(allow_nan=False)
    | st.binary(max_size=10)
    | st.sampled_from([0, 1, True, False, 0.0, -0.0, 1.0, ""])  # equal across types: never mixed up
)
VALUES = SCALARS | st.lists(st.text(max_size=5) | st.integers(-5, 5), max_size=3)
ATTRIBUTES = st.dictionaries(KEYS, VALUES, max_size=6)


class Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


SPAN = st.fixed_dictionaries(
    {
        "name": st.text(max_size=20),
        "kind": st.sampled_from(list(SpanKind)),
        "attributes": ATTRIBUTES,
        "events": st.lists(st.tuples(st.text(max_size=8), ATTRIBUTES), max_size=2),
        "status": st.sampled_from([None, StatusCode.OK, StatusCode.ERROR]),
        "description": st.sampled_from([None, "", "backend down"]),
        "parent": st.sampled_from(["none", "local", "remote"]),
        "state": st.booleans(),
        "link": st.booleans(),
    }
)


DEFAULTS: dict[str, Any] = {"kind": SpanKind.INTERNAL, "attributes": {}, "events": [], "status": None}
DEFAULTS |= {"description": None, "parent": "none", "state": False, "link": False}


def make(specs: list[dict[str, Any]], resources: Sequence[Resource], **common: Any) -> list[ReadableSpan]:
    """The spans as the SDK ends them (what a spec leaves out: :data:`DEFAULTS`), one provider
    (resource) per entry of ``resources``, in turn."""
    kept = Kept()
    tracers = []
    for resource in resources:
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(kept))
        tracers.append(provider.get_tracer("fedsearch", "1.0"))
    previous = None
    for i, given_spec in enumerate(specs):
        spec = {**DEFAULTS, **common, **given_spec}
        tracer = tracers[i % len(tracers)]
        state = TraceState([("vendor", "x1"), ("other", "y")]) if spec["state"] else TraceState()
        context: Context | None = None
        if spec["parent"] == "remote":
            remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=state)
            context = set_span_in_context(NonRecordingSpan(remote))
        elif spec["parent"] == "local" and previous is not None:
            context = set_span_in_context(previous)
        links = [Link(SpanContext(0x1, 0x2, is_remote=True), {"a": 1})] if spec["link"] else []
        span = tracer.start_span(spec["name"], context, spec["kind"], spec["attributes"], links)
        for name, attributes in spec["events"]:
            span.add_event(name, attributes)
        if spec["status"] is not None:
            span.set_status(spec["status"], spec["description"] if spec["status"] is StatusCode.ERROR else None)
        span.end()
        previous = span
    return kept.spans


def decoded(data: bytes) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    message.ParseFromString(data)
    return message


class TestEncode:
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(SPAN, min_size=1, max_size=6), st.integers(1, 2))
    def test_same_message_as_the_sdk(self, specs: list[dict[str, Any]], providers: int) -> None:
        """Whatever the spans hold, the bytes decode to the message the SDK's encoder builds."""
        logging.disable(logging.CRITICAL)  # the SDK warns of the values it drops
        try:
            resources = [HashedResource(Resource.create({"service.name": f"s{i}"})) for i in range(providers)]
            spans = make(specs, resources)
            assert decoded(encode(spans)) == encode_spans(spans)
            assert decoded(encode(spans)) == encode_spans(spans)  # again: from the cache this time
        finally:
            logging.disable(logging.NOTSET)

    def test_a_search_s_spans_are_the_sdk_s_bytes(self) -> None:
        """A search's spans (str, int, bool attributes, no links) come out byte for byte as the SDK's."""
        named = {"name": "fedsearch.namespace", "parent": "local", "events": [("retry", {"attempt": 1})]}
        specs = [
            {
                **named,
                "attributes": {"fedsearch.namespace": f"zoekt{i}", "fedsearch.files": 100, "fedsearch.kept": True},
            }
            for i in range(8)
        ]
        spans = make(specs, [HashedResource(Resource.create({"service.name": "fedsearch"}))])
        assert encode(spans) == encode_spans(spans).SerializePartialToString()

    def test_equal_values_of_other_types_are_not_confused(self) -> None:
        """1, True and 1.0 are equal in Python: the cache keeps each its own encoding."""
        resource = HashedResource(Resource.create({}))
        spans = make(
            [{"name": "n", "attributes": {"x": value}} for value in (1, True, 1.0, "1", 0, False, -0.0)],
            [resource],
        )
        values = [span.attributes[0].value for span in decoded(encode(spans)).resource_spans[0].scope_spans[0].spans]
        assert [v.WhichOneof("value") for v in values] == [
            "int_value",
            "bool_value",
            "double_value",
            "string_value",
            "int_value",
            "bool_value",
            "double_value",
        ]
        assert str(values[-1].double_value) == "-0.0"

    def test_the_cache_is_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Counts vary from search to search: the attribute cache is emptied at its size, never grows past it."""
        monkeypatch.setattr(encoding, "_KEPT", 10)
        spans = make(
            [{"name": "n", "attributes": {"files": i}} for i in range(25)],
            [HashedResource(Resource.create({}))],
        )
        assert decoded(encode(spans)) == encode_spans(spans)
        assert len(encoding._fields) <= 10


class TestExporter:
    def test_sends_what_the_sdk_would(self) -> None:
        """The exporter writes the bytes itself on this SDK, and a receiver decodes the SDK's message."""

        async def run() -> None:
            async with Receiver() as receiver:
                exporter = OtlpExporter(endpoint=receiver.url, timeout=5)
                assert exporter.direct
                spec = {"kind": SpanKind.SERVER, "events": [("retry", {"attempt": 2})], "status": StatusCode.ERROR}
                spans = make(
                    [
                        {**spec, "name": "POST /v1/search", "attributes": {"fedsearch.files": 3}, "parent": "none"},
                        {**spec, "name": "fedsearch.rank", "attributes": {}, "parent": "local"},
                    ],
                    [HashedResource(Resource.create({"service.name": "fedsearch"}))],
                    description="backend down",
                )
                result = await asyncio.to_thread(exporter.export, spans)
                assert result is SpanExportResult.SUCCESS
                await asyncio.to_thread(exporter.shutdown)
            root, rank = receiver.spans
            assert (root.service, root.name, root.attributes, root.events) == (
                "fedsearch",
                "POST /v1/search",
                {"fedsearch.files": 3},
                ("retry",),
            )
            assert (rank.parent_id, rank.trace_id, rank.status_code) == (root.span_id, root.trace_id, 2)

        asyncio.run(run())

    def test_a_batch_over_the_size_limit_is_dropped(self) -> None:
        """The SDK's size limit holds: a batch over it is not sent, the export fails."""
        exporter = OtlpExporter(endpoint="http://127.0.0.1:9/v1/traces", timeout=1, max_request_size=50)
        spans = make([{"name": "x" * 100}], [Resource({})])
        assert exporter.export(spans) is SpanExportResult.FAILURE
        exporter.shutdown()  # type: ignore[no-untyped-call]
