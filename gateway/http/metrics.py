"""Prometheus metrics (names start with ``fedsearch_``), one registry per app.

HTTP: requests by route and status, latency histograms, in-flight gauge.
Namespaces: outcome counters by status and latency histograms, fed by the
service's outcome observers. Cache: events by name (answers served from cache,
shared in flight or computed; snapshots stored, served or missed) and the bytes
held by the in-process store. Admission (:mod:`gateway.resilience.admission`): local
scans running, waiting and allowed at once, requests admitted, refused or shed,
scans that waited until their deadline, how long scans waited and ran; the event loop's
tasks (a leak shows there first). Callers (issue 53, :class:`CallerLabels`): requests admitted,
shed and refused by reason, scans queued and waiting now, and their wait, by caller: the
first ``[server] metrics_callers`` callers by name (the configured tokens first), the rest
``other``. The content index: searches it narrowed and scans by the
reason it could not, and each local namespace's index files, bytes, last build's seconds and
whether searches use it, read from the index when scraped; the index folder's bytes (every
file under ``[index] dir``) and its bound.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.cache.results import EVENTS
from gateway.cache.store import MemoryStore
from gateway.models import Outcome
from gateway.resilience.admission import ScanQueue

if TYPE_CHECKING:
    from gateway.service import SearchService

__all__ = ["OTHER", "CallerLabels", "ContentIndexCollector", "Metrics"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: What admission decides about a request with local work.
_DECISIONS = ("admitted", "refused", "shed")
#: The label of every caller past the named ones.
OTHER = "other"


class CallerLabels:
    """Caller keys -> at most ``named`` label values plus :data:`OTHER` (bounded cardinality).

    The callers named first (the configured tokens, in config order) keep their name, then
    each new caller takes a free name until ``named`` are taken; every later one is
    ``other``. A caller keeps its label for the process's life, so its series only grow.
    """

    def __init__(self, named: int) -> None:
        self.named = named
        self._labels: dict[str, str] = {}

    def name(self, keys: list[str]) -> None:
        """Give ``keys`` their own names first (while names are left)."""
        for key in keys:
            self.label(key)

    def label(self, key: str) -> str:
        found = self._labels.get(key)
        if found is not None:
            return found
        if len(self._labels) < self.named:
            self._labels[key] = key
            return key
        return OTHER

    def __len__(self) -> int:
        return len(self._labels)


def _tasks() -> int:
    """The event loop's tasks (0 when asked from outside a running loop)."""
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:
        return 0


class ContentIndexCollector:
    """The content index's figures, read from the current service's index at each scrape."""

    def __init__(self) -> None:
        self.service: SearchService | None = None

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        service = self.service
        searches = CounterMetricFamily(
            "fedsearch_content_index_searches",
            "Local checkouts searched: narrowed by the content index, or scanned whole (and why)",
            labels=["outcome"],
        )
        families = {
            name: GaugeMetricFamily(f"fedsearch_content_index_{name}", text, labels=["namespace"])
            for name, text in (
                ("files", "Files in a local namespace's content index"),
                ("bytes", "Bytes on disk of a local namespace's content index"),
                ("build_seconds", "Seconds the last whole build of a local namespace's content index took"),
                ("ready", "1 when searches of a local namespace use its content index"),
            )
        }
        content = service.content if service is not None else None
        if service is not None and content is not None and service.index is not None:
            for outcome, count in sorted(content.outcomes.items()):
                searches.add_metric([outcome], count)
            for name, source in service.index.sources.items():
                index = content.describe(source.root, service.index.builder_pid())
                families["files"].add_metric([name], index["files"])
                families["bytes"].add_metric([name], index["bytes"])
                families["build_seconds"].add_metric([name], index["built_s"])
                families["ready"].add_metric([name], 1.0 if index["state"] == "ready" else 0.0)
        folder = GaugeMetricFamily(
            "fedsearch_index_folder_bytes", "Bytes of every file under [index] dir (what max_bytes bounds)"
        )
        bound = GaugeMetricFamily("fedsearch_index_folder_max_bytes", "[index] max_bytes: the index folder's bound")
        declarations = service.index if service is not None else None
        if declarations is not None and declarations.directory is not None:
            from gateway.index.roots import folder_bytes

            folder.add_metric([], folder_bytes(declarations.directory))
            if declarations.max_bytes is not None:
                bound.add_metric([], declarations.max_bytes)
        return [searches, *families.values(), folder, bound]


class _CallerSeries:
    """One caller label's series, looked up once (``labels()`` validates and locks each time)."""

    def __init__(self, metrics: Metrics, label: str) -> None:
        self._metrics = metrics
        self._label = label
        self._decisions: dict[str, Counter] = {}
        self.queued = metrics.caller_queued.labels(label)
        self.waiting = metrics.caller_waiting.labels(label)
        self.wait = metrics.caller_wait.labels(label)

    def decision(self, event: str) -> Counter:
        found = self._decisions.get(event)
        if found is None:
            found = self._decisions[event] = self._metrics.caller_requests.labels(self._label, event)
        return found


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

        self.admission = Counter(
            "fedsearch_admission",
            "Requests with local work admitted, refused (503) or shed (their local namespaces not searched)",
            ["decision"],
            registry=self.registry,
        )
        self._decisions = {decision: self.admission.labels(decision) for decision in _DECISIONS}
        self.scans_expired = Counter(
            "fedsearch_scans_expired",
            "Local scans whose deadline came while they waited for a slot",
            registry=self.registry,
        )
        self.scan_wait = Histogram(
            "fedsearch_scan_wait_seconds",
            "Time a local scan waited for a slot",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.scan_duration = Histogram(
            "fedsearch_scan_duration_seconds",
            "Time a local scan held its slot (scans that ran to their end)",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.scans_running = Gauge("fedsearch_scans_running", "Local scans running", registry=self.registry)
        self.scans_queued = Gauge("fedsearch_scans_queued", "Local scans waiting for a slot", registry=self.registry)
        self.scans_max = Gauge(
            "fedsearch_scans_max", "Local scans allowed at once ([server] max_scans)", registry=self.registry
        )
        self.callers = CallerLabels(0)
        self.caller_requests = Counter(
            "fedsearch_caller_requests",
            "Requests by caller: admitted, shed, refused_capacity (503), refused_share or refused_quota (429)",
            ["caller", "decision"],
            registry=self.registry,
        )
        self.caller_queued = Counter(
            "fedsearch_caller_queued", "Local scans by caller that waited", ["caller"], registry=self.registry
        )
        self.caller_waiting = Gauge(
            "fedsearch_caller_waiting", "Local scans by caller waiting now", ["caller"], registry=self.registry
        )
        self.caller_wait = Histogram(
            "fedsearch_caller_queue_wait_seconds",
            "Time a caller's local scan waited for a slot",
            ["caller"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self._caller_series: dict[str, _CallerSeries] = {}
        self.tasks = Gauge("fedsearch_event_loop_tasks", "Tasks of the event loop", registry=self.registry)
        self.tasks.set_function(_tasks)
        self.content = ContentIndexCollector()
        self.registry.register(self.content)

    def attach(self, service: SearchService) -> None:
        """Feed these metrics from ``service`` (its namespace outcomes, cache events and scan queue)."""
        service.observers.append(self.observe)
        service.cache.observers.append(self.observe_cache)
        self.content.service = service
        store = service.cache.store
        self.cache_bytes.set_function(lambda: store.bytes if isinstance(store, MemoryStore) else 0)
        scans: ScanQueue = service.scans
        if self.observe_scans not in scans.observers:  # a reloaded service keeps its predecessor's queue
            scans.observers.append(self.observe_scans)
            scans.caller_observers.append(self.observe_caller)
        named = service.config.server.metrics_callers
        if self.callers.named != named:
            self.callers.named = max(named, len(self.callers))  # names given stay given
        self.callers.name([token.name for token in service.config.tokens])
        self.scans_running.set_function(lambda: scans.running)
        self.scans_queued.set_function(lambda: scans.queued)
        self.scans_max.set_function(lambda: scans.max_scans)

    def observe_scans(self, event: str, seconds: float) -> None:
        """Count one event of the scan queue (:data:`gateway.resilience.admission.EVENTS`)."""
        decision = self._decisions.get(event)
        if decision is not None:
            decision.inc()
        elif event == "waited":
            self.scan_wait.observe(seconds)
        elif event == "scanned":
            self.scan_duration.observe(seconds)
        elif event == "expired":
            self.scans_expired.inc()

    def observe_caller(self, event: str, key: str, seconds: float) -> None:
        """Count one caller event of the scan queue (:data:`gateway.resilience.admission.CALLER_EVENTS`)."""
        label = self.callers.label(key)
        series = self._caller_series.get(label)
        if series is None:
            series = self._caller_series[label] = _CallerSeries(self, label)
        if event == "waited":
            series.wait.observe(seconds)
        elif event == "queued":
            series.queued.inc()
            series.waiting.inc()
        elif event == "dequeued":
            series.waiting.dec()
        else:
            series.decision(event).inc()

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
