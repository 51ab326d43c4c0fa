"""Turning tracing on and off: the SDK's provider, a batch processor, the OTLP/HTTP exporter.

Spans leave from the SDK's :class:`BatchSpanProcessor`: ending a span appends it to a bounded
queue (``max_queue``, 2048 by default; a full queue drops, it never blocks) and one thread
exports batches of them over OTLP HTTP/protobuf (the SDK's exporter, the request's bytes written
by :mod:`gateway.tracing.encode`: :mod:`gateway.tracing.export`). A collector that is down or unreachable is
that thread's problem alone: the exporter's retries sleep there, a search never waits for them.
It is said once (``tracing_export_failed``, a warning) and again only after an export got
through (``tracing_export_recovered``); the SDK's own exporter lines (one per retry) are muted.
A full queue (the collector down or slow) drops each new span with a warning of the SDK's, one a
span: it is said once instead (``tracing_spans_dropped``), as a line of ours.

The provider is this process's own, not the SDK's global one: two services in one process
(tests) do not fight over it, and :func:`stop` leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from gateway.log import get_logger
from gateway.tracing import spans as tracing
from gateway.tracing.config import DEFAULT_SERVICE_NAME, TracingSettings
from gateway.tracing.export import OtlpExporter

__all__ = ["QUEUE_LOGGER", "STOP_S", "DroppedOnce", "HashedResource", "ParentOrAll", "WarnOnce", "start", "stop"]

#: The most a shutdown waits for the last spans to leave.
STOP_S = 5.0
#: The processor's batch (the SDK's default), never over the queue.
_BATCH = 512
#: The logger the SDK's batch processor warns with at each span a full queue drops ("Queue full, ...").
QUEUE_LOGGER = "opentelemetry.sdk._shared_internal"

log = get_logger("fedsearch.tracing")

_provider: TracerProvider | None = None
_exporter: WarnOnce | None = None
_dropped: DroppedOnce | None = None


class WarnOnce(SpanExporter):
    """An exporter that says once that its collector cannot be reached, not at every batch."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        #: The last export failed (the collector is down, as far as we know).
        self.down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's bug must not end the export thread
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            if self.down:
                self.down = False
                log.info("tracing_export_recovered", endpoint=self.endpoint)
        elif not self.down:
            self.down = True
            log.warning(
                "tracing_export_failed",
                endpoint=self.endpoint,
                spans=len(spans),
                detail="spans are dropped until the collector answers; searches are not affected",
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


class DroppedOnce(logging.Filter):
    """The SDK's warning at each span a full queue drops (on :data:`QUEUE_LOGGER`), said once as a line of
    ours; its other lines pass."""

    def __init__(self, endpoint: str) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Queue full"):
            return True
        if not self.said:
            self.said = True
            log.warning(
                "tracing_spans_dropped",
                endpoint=self.endpoint,
                detail="the span queue is full (the collector down or slow): new spans are dropped until "
                "it drains; searches are not affected",
            )
        return False


def _endpoint(settings: TracingSettings, env: Mapping[str, str]) -> str:
    """Where spans go: the section's URL, else the SDK's variables, else localhost (as the SDK reads them)."""
    if settings.endpoint:
        return settings.endpoint
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    return base.rstrip("/") + "/v1/traces"


class HashedResource(Resource):
    """A :class:`Resource` hashed once. The OTLP encoder groups every span it sends by its
    resource, and the SDK's ``Resource.__hash__`` serializes all the attributes to JSON each
    time: 8-10 us a span on the 2-core machine, a tenth to a quarter of encoding one. A
    resource never changes (its attributes are immutable), so its hash need not either."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def _resource(settings: TracingSettings, env: Mapping[str, str]) -> Resource:
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    name = settings.service_name or (None if named else DEFAULT_SERVICE_NAME)
    return HashedResource(Resource.create({"service.name": name} if name else {}))  # the variables merged in by the SDK


class ParentOrAll(Sampler):
    """``ParentBased(ALWAYS_ON)``'s decisions (a caller's flag followed, every new trace recorded),
    the parent looked up once: the SDK's pair asks the context for it twice and goes through two
    samplers, a fifth of what starting a span costs on the event loop."""

    _description: str = ParentBased(ALWAYS_ON).get_description()  # type: ignore[no-untyped-call]

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = get_current_span(parent_context).get_span_context()
        if not parent.is_valid:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, None)
        if parent.trace_flags.sampled:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, parent.trace_state)
        return SamplingResult(Decision.DROP, None, parent.trace_state)

    def get_description(self) -> str:
        return self._description


def _sampler(settings: TracingSettings) -> Sampler | None:
    """A share of new traces, a caller's decision followed; None: the SDK's (``OTEL_TRACES_SAMPLER``).
    All or none decide as a ratio of 1 or 0 would, without its arithmetic at every span."""
    ratio = settings.sample_ratio
    if ratio is None:
        return None
    if ratio >= 1.0:
        return ParentOrAll()
    if ratio <= 0.0:
        return ParentBased(ALWAYS_OFF)
    return ParentBased(TraceIdRatioBased(ratio))


def start(settings: TracingSettings, env: Mapping[str, str] | None = None) -> None:
    """Record spans from now on and export them (again: the previous provider is replaced)."""
    global _provider, _exporter, _dropped
    env = os.environ if env is None else env
    if _provider is not None:
        _provider.shutdown()
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)  # one line of ours, not one a retry
    endpoint = _endpoint(settings, env)
    _mute_drops(DroppedOnce(endpoint))
    exporter = WarnOnce(OtlpExporter(endpoint=endpoint, timeout=settings.timeout_s), endpoint)
    queue = settings.max_queue
    processor = BatchSpanProcessor(
        exporter,
        max_queue_size=queue,
        max_export_batch_size=min(_BATCH, queue) if queue is not None else None,
    )
    provider = TracerProvider(resource=_resource(settings, env), sampler=_sampler(settings))
    provider.add_span_processor(processor)
    _provider, _exporter = provider, exporter
    tracing.install(provider.get_tracer("fedsearch"), query=settings.record_query)
    log.info("tracing_started", endpoint=endpoint)


def _mute_drops(dropped: DroppedOnce | None) -> None:
    """``dropped`` (None: nothing) in place of the filter the last start put on :data:`QUEUE_LOGGER`."""
    global _dropped
    queue_log = logging.getLogger(QUEUE_LOGGER)
    if _dropped is not None:
        queue_log.removeFilter(_dropped)
    _dropped = dropped
    if dropped is not None:
        queue_log.addFilter(dropped)


def _shutdown(provider: TracerProvider, exporter: WarnOnce | None) -> None:
    if exporter is not None and exporter.down:
        exporter.shutdown()  # the last batch would only wait out the exporter's retries
    provider.shutdown()


async def stop() -> None:
    """Record no more spans; the last ones are sent, in a thread of their own waited for at most STOP_S
    (a collector that hangs never holds up the process's exit)."""
    global _provider, _exporter
    provider, exporter = _provider, _exporter
    tracing.uninstall()
    _provider = _exporter = None
    _mute_drops(None)
    if provider is None:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finished() -> None:
        if not done.done():
            done.set_result(None)

    def run() -> None:
        try:
            _shutdown(provider, exporter)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(finished)

    threading.Thread(target=run, name="fedsearch-tracing-stop", daemon=True).start()
    try:
        await asyncio.wait_for(done, STOP_S)
    except TimeoutError:
        log.warning("tracing_stop_slow", detail=f"spans not sent within {STOP_S:g} s are dropped")
