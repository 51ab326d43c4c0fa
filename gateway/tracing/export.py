"""The SDK's OTLP/HTTP span exporter, sending the bytes :mod:`gateway.tracing.encode` writes.

Everything but the encoding is the SDK's: its settings (``OTEL_EXPORTER_OTLP_*``), its HTTP
client (retries, timeout, compression, headers), its size limit and its metrics. Its own
``export`` builds the request with ``encode_spans`` (protobuf objects for every attribute,
copied into every message that holds them), which was half of what a traced search cost; this
one sends the same message's bytes, written directly. Should a later SDK lack the parts this
relies on, the SDK's own ``export`` runs (:attr:`OtlpExporter.direct` says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from gateway.tracing.encode import encode

__all__ = ["OtlpExporter"]


class OtlpExporter(OTLPSpanExporter):
    """:class:`OTLPSpanExporter` with the request's bytes written by :func:`gateway.tracing.encode.encode`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The bytes are written here (the SDK's parts this needs are where they were).
        self.direct = all(hasattr(self, name) for name in ("_client", "_metrics", "_max_request_size", "_shutdown"))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.direct or self._shutdown:
            return super().export(spans)
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = encode(spans)
            except Exception as error:  # as the SDK's: the batch is dropped, the thread goes on
                result.error = error
                return SpanExportResult.FAILURE
            if 0 < self._max_request_size < len(data):  # the SDK's limit, measured before compression
                result.error = ValueError(f"a span batch of {len(data)} bytes is over {self._max_request_size}")
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                if sent.status_code is not None:
                    result.error_attrs = {"http.response.status_code": sent.status_code}
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
