"""An OTLP/HTTP traces receiver for tests: an aiohttp server on 127.0.0.1 that decodes what it is
sent with ``opentelemetry-proto`` (as a collector would) and keeps every span."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["Received", "Receiver"]


@dataclass(frozen=True, slots=True)
class Received:
    """One span as the collector saw it (ids in hex, attributes as plain values)."""

    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: tuple[str, ...]
    status_code: int


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind is not None else None


class Receiver:
    """``POST /v1/traces``: ExportTraceServiceRequest in, ExportTraceServiceResponse out."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests = 0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _export(self, request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        found: list[Received] = []
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Received(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            events=tuple(e.name for e in span.events),
                            status_code=span.status.code,
                        )
                    )
        async with self._changed:
            self.requests += 1
            self.spans.extend(found)
            self._changed.notify_all()
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1/traces"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def of_trace(self, trace_id: str) -> list[Received]:
        return [s for s in self.spans if s.trace_id == trace_id]

    async def wait_for(self, done: Any, seconds: float = 30.0) -> None:
        """Until ``done(self)`` holds (a test's guard, not a timing assertion)."""
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(lambda: done(self))
