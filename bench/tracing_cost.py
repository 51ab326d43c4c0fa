"""tracing_cost: what tracing a search costs in process, the spans alone (issue 54).

    .venv/bin/python bench/tracing_cost.py [--tree DIR] [--rounds 10] [--requests 300]

A traced search over 8 Zoekt namespaces is 11 spans (the request, 8 namespaces with their
backend call's HTTP attributes, rank, the snapshot write) and about 100 attributes. This makes
them as the gateway does (its ``gateway.tracing`` modules: the span context manager, the
outgoing ``traceparent``, the namespace's attributes) into the SDK's provider with the gateway's
resource and sampler, then encodes them as its exporter does (this tree: ``gateway.tracing.encode``;
a tree without it: the OTLP exporter's ``encode_spans``): CPU microseconds a
request, the minimum and median of the rounds. ``--tree DIR`` measures another source tree too
(``git archive REV | tar -x -C DIR``), each in its own process, rounds alternating.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
URL = "http://127.0.0.1:23000/api/search"
SERVER: dict[str, Any] = {
    "http.request.method": "POST",
    "url.scheme": "http",
    "url.path": "/v1/search",
    "network.protocol.version": "1.1",
    "http.route": "/v1/search",
    "server.address": "127.0.0.1",
    "server.port": 8080,
    "client.address": "127.0.0.1",
    "user_agent.original": "Python/3.11 aiohttp/3.14",
}


def measure(requests: int) -> tuple[float, float]:
    """(making, encoding) CPU seconds a request, in this process, over the tree on sys.path."""
    from opentelemetry.context import attach, detach
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind, set_span_in_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    from yarl import URL as Url

    import gateway.tracing.setup as setup
    from gateway.tracing import spans as tracing
    from gateway.tracing.config import TracingSettings

    kept: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            kept.extend(spans)
            return SpanExportResult.SUCCESS

    hundred = TracingSettings(sample_ratio=1.0)  # as overhead.py's traced gateways sample
    provider = TracerProvider(resource=setup._resource(hundred, {}), sampler=setup._sampler(hundred))
    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    tracer = provider.get_tracer("fedsearch")
    tracing.install(tracer)
    w3c = TraceContextTextMapPropagator()
    url = Url(URL)
    try:  # this tree: the calls out traced by gateway.tracing.client
        from gateway.tracing import client

        def namespace(i: int) -> None:
            named = {"fedsearch.namespace": f"zoekt{i}", "fedsearch.backend.kind": "zoekt"}
            with tracing.span("fedsearch.namespace", named) as span:  # type: ignore[call-arg,unused-ignore]
                assert span is not None
                client.outgoing({"User-Agent": "fedsearch/0.1"})
                span.set_attributes({**client._attributes("POST", url), "http.response.status_code": 200})
                span.set_attributes({"fedsearch.status": "ok", "fedsearch.files": 100, "fedsearch.hits": 300})
    except ImportError:  # the code before: aiohttp's hooks (their signals are not counted here)
        from gateway.tracing import http

        def namespace(i: int) -> None:
            with tracing.span("fedsearch.namespace") as span:
                assert span is not None
                w3c.inject({"User-Agent": "fedsearch/0.1"})
                span.set_attributes({**http._client_attributes("POST", url), "http.response.status_code": 200})  # type: ignore[attr-defined,unused-ignore]
                named = {"fedsearch.namespace": f"zoekt{i}", "fedsearch.backend.kind": "zoekt"}
                span.set_attributes({**named, "fedsearch.status": "ok", "fedsearch.files": 100, "fedsearch.hits": 300})

    def search() -> None:
        root = tracer.start_span("POST /v1/search", w3c.extract({}), SpanKind.SERVER, dict(SERVER))
        token = attach(set_span_in_context(root))
        tracing.annotate({"fedsearch.mode": "text", "fedsearch.namespaces": 8, "fedsearch.cursor": False})
        for i in range(8):
            namespace(i)
        with tracing.span("fedsearch.rank") as span:
            assert span is not None
            span.set_attributes({"fedsearch.namespaces": 8, "fedsearch.files": 800})
        with tracing.span("fedsearch.snapshot.write") as span:
            assert span is not None
            span.set_attributes({"fedsearch.files": 800, "fedsearch.kept": True})
        root.set_attribute("http.response.status_code", 200)
        detach(token)
        root.end()

    search()
    kept.clear()
    started = time.process_time()
    for _ in range(requests):
        search()
    making = (time.process_time() - started) / requests
    try:  # this tree: the request's bytes written by gateway.tracing.encode
        from gateway.tracing.encode import encode
    except ImportError:  # the code before: the exporter's encode_spans

        def encode(spans: Sequence[ReadableSpan]) -> bytes:
            return bytes(encode_spans(spans).SerializePartialToString())

    started = time.process_time()
    for i in range(0, len(kept), 512):
        encode(kept[i : i + 512])
    encoding = (time.process_time() - started) / requests
    return making, encoding


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", default=[], help="another fedsearch source tree")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a round in this process (the tree on sys.path)
    args = parser.parse_args()
    if args.one:
        making, encoding = measure(args.requests)
        print(making, encoding)
        return
    trees = {"this": HERE.parent, **{Path(t).name: Path(t).resolve() for t in args.tree}}
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            done = subprocess.run(
                [sys.executable, str(HERE / "tracing_cost.py"), "--one", "1", "--requests", str(args.requests)],
                capture_output=True,
                text=True,
                check=True,
                cwd=tree,
                env={"PYTHONPATH": str(tree), "PATH": ""},
            )
            making, encoding = (float(x) for x in done.stdout.split())
            found[name].append((making, encoding))
    print(f"11 spans a search, {args.requests} searches a round, {args.rounds} rounds: CPU us a search, min / median")
    for name, rows in found.items():
        making_us = [m * 1e6 for m, _ in rows]
        encoding_us = [e * 1e6 for _, e in rows]
        total_us = [(m + e) * 1e6 for m, e in rows]
        print(
            f"{name:12} making {min(making_us):6.0f} / {statistics.median(making_us):6.0f}   "
            f"encoding {min(encoding_us):6.0f} / {statistics.median(encoding_us):6.0f}   "
            f"a search {min(total_us):6.0f} / {statistics.median(total_us):6.0f}"
        )


if __name__ == "__main__":
    main()
