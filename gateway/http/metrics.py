"""Prometheus metrics (names start with ``fedsearch_``), one registry per app.

HTTP: requests by route and status, latency histograms, in-flight gauge.
Namespaces: outcome counters by status and latency histograms, fed by the
service's outcome observers. Cache: events by name (answers served from cache,
shared in flight or computed; snapshots stored, served or missed) and the bytes
held by the in-process store.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.cache.results import EVENTS
from gateway.cache.store import MemoryStore
from gateway.models import Outcome

if TYPE_CHECKING:
    from gateway.service import SearchService

__all__ = ["Metrics"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The gateway's metrics and the middleware and observer that feed them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "fedsearch_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "fedsearch_http_request_duration_seconds",
            "HTTP request latency",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge("fedsearch_http_in_flight", "HTTP requests in flight", registry=self.registry)
        self.outcomes = Counter(
            "fedsearch_namespace_outcomes",
            "Namespace outcomes by status",
            ["namespace", "backend", "status"],
            registry=self.registry,
        )
        self.backend_latency = Histogram(
            "fedsearch_namespace_duration_seconds",
            "Namespace search latency",
            ["namespace", "backend"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        #: (namespace, backend, status) -> its outcome counter and latency histogram series.
        self._series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self.cache_events = Counter(
            "fedsearch_cache_events",
            "Cache events: answers hit/shared/missed, snapshots",
            ["event"],
            registry=self.registry,
        )
        self._cache_series = {event: self.cache_events.labels(event) for event in EVENTS}
        self.cache_bytes = Gauge(
            "fedsearch_cache_bytes", "Bytes held by the in-process cache store (0 with Redis)", registry=self.registry
        )

    def attach(self, service: SearchService) -> None:
        """Feed these metrics from ``service`` (its namespace outcomes and cache events)."""
        service.observers.append(self.observe)
        service.cache.observers.append(self.observe_cache)
        store = service.cache.store
        self.cache_bytes.set_function(lambda: store.bytes if isinstance(store, MemoryStore) else 0)

    def observe_cache(self, event: str) -> None:
        self._cache_series[event].inc()

    def observe(self, outcome: Outcome) -> None:
        """Count one namespace's outcome (the labelled series looked up once per label set)."""
        key = (outcome.namespace, outcome.backend, outcome.status)
        series = self._series.get(key)
        if series is None:  # labels() validates and locks each time: looked up once per label set
            series = (self.outcomes.labels(*key), self.backend_latency.labels(outcome.namespace, outcome.backend))
            self._series[key] = series
        series[0].inc()
        series[1].observe(outcome.took_ms / 1000)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        started = time.monotonic()
        status = 500
        self.in_flight.inc()
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.in_flight.dec()
            method = request.method if request.method in _METHODS else "other"  # bounded label values
            self.requests.labels(method, route, str(status)).inc()
            self.latency.labels(route).observe(time.monotonic() - started)

    async def handler(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
