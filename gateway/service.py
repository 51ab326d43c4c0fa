"""SearchService: resolve namespaces -> admit -> fan out -> rank -> answer. Every surface calls it.

The service owns the backends (opened from the config, closed in reverse order),
resolves a request's namespace patterns against what the caller may see before
anything is sent anywhere, admits it to the local scan queue (or refuses it,
:class:`~gateway.errors.Overloaded`: :mod:`gateway.resilience.admission`) and returns
the wire answer built by :func:`gateway.wire.build_response`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from gateway.backend import AsyncBackend
from gateway.cache import open_cache
from gateway.cache.keys import access_key
from gateway.catalog.children import MIN_AGE_S, SEARCH_SHARE
from gateway.catalog.namespaces import Catalog
from gateway.config import CacheConfig, Config, DefaultsConfig, NamespaceConfig, ServerConfig
from gateway.errors import InvalidRequest
from gateway.fanout import Route, fan_out
from gateway.files import LocalView, RemoteView, View
from gateway.index.local import with_semantic
from gateway.index.setup import INDEX_OFF, content_for, index_for
from gateway.log import get_logger, redact_values
from gateway.models import Outcome, SearchQuery
from gateway.query.criteria import backend_query
from gateway.query.refine import declared, refine
from gateway.query.request import SearchRequest, parse_request
from gateway.rank import Resolve, Whole, page_of, settle
from gateway.registry import load_kind
from gateway.resilience.admission import Estimate, ScanQueue
from gateway.resilience.wrapper import wrap
from gateway.serving import IDLE
from gateway.streaming import Plan, SearchStream
from gateway.tracing import annotate, record_query, span
from gateway.tracing import on as tracing_on
from gateway.view.facets import Facets
from gateway.wire import build_response

__all__ = ["Access", "Plan", "SearchService", "SearchStream", "open_backend"]

#: What a caller may see: a predicate on namespace names (None: everything).
Access = Callable[[str], bool] | None

#: read_file and /v1/files return at most this many lines.
MAX_READ_LINES = 2000
#: A slice read without an end line: about what an answer costs an agent (gateway.sizing).
READ_LINES = 400
READ_CHARS = 40_000
#: A person's slice (the page's file view, SPEC §9): the whole file up to this many lines, then slices.
VIEW_LINES = 20_000
VIEW_CHARS = 4_000_000
#: The most of a request's time kept from its backends for the answer's own work (learnt: below).
ANSWER_SHARE = 0.1
#: From this many local namespaces, ruling them out (:meth:`SearchService._rule_out`) runs in a thread.
RULE_OUT_IN_THREAD = 64

log = get_logger("fedsearch.service")


def open_backend(ns: NamespaceConfig) -> AsyncBackend[Any]:
    """Instantiate the adapter of one configured namespace, behind the resilience layer."""
    cls = load_kind(ns.backend, f"namespaces.{ns.name}.backend")
    backend = cls(ns.name, ns.settings)
    if backend.token_env:
        redact_values([os.environ.get(backend.token_env)])
    return wrap(backend)


def _log_search(outcomes: Sequence[Outcome], files: int, took_ms: int) -> None:
    """One line for a search: how many namespaces answered how, and the slowest one.

    A namespace that did not answer ``ok`` has its own ``namespace_done`` line at info
    (:mod:`gateway.fanout`); the others only at debug, so a search over a thousand
    namespaces is one line here, not a thousand.
    """
    statuses: dict[str, int] = {}
    for outcome in outcomes:
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    slowest = max(outcomes, key=lambda o: o.took_ms, default=None)
    log.info(
        "search_done",
        namespaces=len(outcomes),
        statuses=statuses,
        files=files,
        took_ms=took_ms,
        **({"slowest": slowest.namespace, "slowest_ms": slowest.took_ms} if slowest is not None else {}),
    )


def _in_order(routes: Sequence[Route], searched: Sequence[Outcome], ruled: dict[str, Outcome]) -> list[Outcome]:
    """Every route's outcome in route order: those searched (in their order) and those ruled out."""
    found = iter(searched)
    return [ruled[route.namespace] if route.namespace in ruled else next(found) for route in routes]


def _asked(plan: Plan, outcomes: Sequence[Outcome]) -> Sequence[Outcome]:
    """``outcomes`` with the sub-namespaces their routes asked (what their next actions search again)."""
    asked = {r.namespace: r.sub_namespaces for r in plan.routes if r.sub_namespaces}
    if not asked:
        return outcomes
    return [replace(o, asked=asked[o.namespace]) if o.namespace in asked else o for o in outcomes]


def _annotate(plan: Plan) -> None:
    """What the request's span tells of its search: never a token, the query only where it may."""
    request = plan.request
    attributes: dict[str, Any] = {
        "fedsearch.mode": request.criteria.mode,
        "fedsearch.namespaces": len(plan.routes),
        "fedsearch.cursor": request.cursor is not None,
    }
    if record_query():
        attributes["fedsearch.query"] = str(request.query)
    annotate(attributes)


@dataclass(frozen=True, slots=True)
class _Entry:
    config: NamespaceConfig
    backend: AsyncBackend[Any]


class SearchService:
    """The core: one instance per process, shared by HTTP, MCP and the CLI."""

    def __init__(
        self,
        config: Config,
        backends: Mapping[str, AsyncBackend[Any]] | None = None,
        *,
        process_cache: bool = True,
        scans: ScanQueue | None = None,
    ) -> None:
        """``process_cache=False`` for a one-shot process (the CLI): no in-process store (nobody could page it);
        ``scans``: the local scan queue to share (a reloaded service keeps its predecessor's)."""
        self.config = config
        given = backends or {}
        self._entries = {
            ns.name: _Entry(ns, given[ns.name] if ns.name in given else open_backend(ns)) for ns in config.namespaces
        }
        #: Names: configured namespaces and peers' children (:mod:`gateway.catalog.namespaces`).
        self.catalog = Catalog(self._entries)
        #: Called with every namespace outcome (metrics hook into this).
        self.observers: list[Callable[[Outcome], None]] = []
        #: Snapshots for cursors, cached answers, single-flight (:mod:`gateway.cache`).
        self.cache = open_cache(config.cache, process=process_cache)
        self._access_keys: dict[int, tuple[Access, bytes]] = {}
        #: The declaration index of the local namespaces (None: none, or disabled).
        self.index = index = index_for(config)
        if index is not None:  # local namespaces search by meaning from its intent index
            for name in index.sources:
                entry = self._entries[name]
                self._entries[name] = _Entry(entry.config, with_semantic(index, entry.backend))
        #: Their content index, which narrows what rg reads (None: none, or ``[index] content = false``).
        self.content = content = content_for(index)
        if index is not None and content is not None:
            for name in index.sources:
                self._entries[name].backend.use_index(content)
        #: The checkout each namespace searches through the content index, by name (what ``_rule_out`` asks of).
        self._indexed_roots = {
            name: root for name, entry in self._entries.items() if (root := entry.backend.indexed_root()) is not None
        }
        #: Each ruled-out namespace's outcome, by name, with the route it was made for (:meth:`_ruled_outcome`).
        self._ruled: dict[str, tuple[Route, Outcome]] = {}
        #: At most ``[server] max_scans`` local scans at once; admission (:mod:`gateway.resilience.admission`).
        self.scans = scans if scans is not None else ScanQueue(config.server.max_scans)
        #: How long an answer takes once its backends are done or cut (ranking, the page), learnt:
        #: the backends' deadline comes that much (at most ANSWER_SHARE) before the request's,
        #: so an answer cut at its deadline is still on time.
        self.answer_time = Estimate()
        #: What backends of one kind share once serving (:meth:`start_serving`), by its type.
        self.shared: dict[type, Any] = {}

    @classmethod
    def with_backends(
        cls, backends: Sequence[AsyncBackend[Any]], weights: Mapping[str, float] | None = None, **config: Any
    ) -> SearchService:
        """A service over ready-made backends (tests, embedding): one namespace each."""
        weights = weights or {}
        namespaces = tuple(
            NamespaceConfig(name=b.name, backend=b.kind, settings=b.settings, weight=weights.get(b.name, 1.0))
            for b in backends
        )
        cfg = Config(
            server=ServerConfig(**config.get("server", {})),
            defaults=DefaultsConfig(**config.get("defaults", {})),
            namespaces=namespaces,
            source="embedded",
            cache=CacheConfig(**config.get("cache", {})),
        )
        return cls(cfg, {b.name: b for b in backends})

    def start_serving(self) -> None:
        """What a long-lived server starts (the CLI does not): the declaration index's builder,
        the content index's file watcher, and the backends' own (rg started ahead of each search)."""
        self.start_indexing()
        if self.content is not None:
            self.content.follow()
        for entry in self._entries.values():
            entry.backend.start_serving(self.shared)

    def start_indexing(self) -> None:
        """Build the declaration index in the background (servers do; the CLI does not)."""
        if self.index is not None:
            self.index.start()

    def close_index(self) -> None:
        """Stop the background builder and close the index database and the content index."""
        if self.index is not None:
            self.index.close()
        if self.content is not None:
            self.content.close()

    async def aclose(self) -> None:
        """Close the index, every backend (in reverse order of opening), then the cache."""
        self.close_index()
        await self.catalog.children.aclose()
        for entry in reversed(list(self._entries.values())):
            try:
                await entry.backend.aclose()
            except Exception as exc:  # closing must go on for the others
                log.warning("backend_close_failed", namespace=entry.config.name, error=type(exc).__name__)
        await self.cache.aclose()

    # --- namespaces ----------------------------------------------------------------

    def visible(self, access: Access = None) -> list[str]:
        """The configured namespace names this caller may see, in config order."""
        return self.catalog.visible(access)

    def names(self, access: Access = None) -> list[str]:
        """Every namespace name this caller may see: configured ones and the known children of peers."""
        return self.catalog.names(access)

    def backend(self, name: str, access: Access = None) -> AsyncBackend[Any]:
        """The backend holding a visible namespace (a peer's for its children); NotFound otherwise
        (cloaked like a missing one)."""
        return self.catalog.owner(name, access)[0]

    def resolve(self, patterns: Sequence[str], access: Access = None) -> list[Route]:
        """Routes for the visible namespaces matching ``patterns`` (all when empty); see
        :meth:`gateway.catalog.namespaces.Catalog.resolve`."""
        return self.catalog.resolve(patterns, access)

    def namespaces(self, access: Access = None) -> list[dict[str, Any]]:
        """Name, backend kind, health, capabilities and file path form of each visible namespace,
        the known children of peers among them (:meth:`list_namespaces` lists them first); a local
        namespace's ``index`` too (SPEC §5)."""
        items = self.catalog.describe(access)
        index = self.index
        for item in items:
            source = index.sources.get(item["name"]) if index is not None else None
            if index is not None and source is not None:
                content = self.content
                item["index"] = content.describe(source.root, index.builder_pid()) if content else dict(INDEX_OFF)
            elif (entry := self._entries.get(item["name"])) is not None and entry.backend.tree() is not None:
                item["index"] = dict(INDEX_OFF)  # local, no index
        return items

    async def list_namespaces(self, access: Access = None) -> list[dict[str, Any]]:
        """:meth:`namespaces`, the children of peers listed again when their list is old."""
        await self.catalog.children.refresh()
        return self.namespaces(access)

    async def learn(self, request: SearchRequest, access: Access = None) -> None:
        """List peers' children again where they are old and this request needs them (its patterns
        are matched against them, or the caller may see only some of them), within a share of
        its deadline."""
        catalog = self.catalog
        if not catalog.children.parents:
            return
        criteria = request.criteria
        if not (request.namespaces or criteria.repos or criteria.skip_repos) and not catalog.partial(access):
            return
        await catalog.children.refresh(within=self._timeout_s(request) * SEARCH_SHARE)

    def _timeout_s(self, request: SearchRequest) -> float:
        default_ms = self.config.defaults.timeout_ms
        return (request.timeout_ms if "timeout_ms" in request.model_fields_set else default_ms) / 1000

    async def plan_learned(self, request: SearchRequest, access: Access = None) -> Plan:
        """:meth:`plan`, after :meth:`learn` (its clock started before); a pattern matching no child
        is asked of the peers again once (their list may be a little old) before it is a 400."""
        started = time.monotonic()
        await self.learn(request, access)
        try:
            return self.plan(request, access, started)
        except InvalidRequest:
            share = self._timeout_s(request) * SEARCH_SHARE
            if not await self.catalog.children.refresh(older_than=MIN_AGE_S, within=share):
                raise
            return self.plan(request, access, started)

    # --- search --------------------------------------------------------------------

    def query_for(self, request: SearchRequest, started: float) -> SearchQuery:
        """The backend-facing query of a request, with its absolute deadline."""
        return backend_query(request, started, margin=self.answer_margin(request.timeout_ms))

    def answer_margin(self, timeout_ms: int) -> float:
        """Seconds of a request's deadline kept from its backends for its answer's own work: what
        that took lately (mean and two deviations), at most ANSWER_SHARE of the deadline."""
        return min(self.answer_time.cost(), ANSWER_SHARE * timeout_ms / 1000)

    def access_key(self, access: Access) -> bytes:
        """The caller's identity for the cache: its token and the namespaces it may see (remembered)."""
        seen = self._access_keys.get(id(access))
        if seen is not None and seen[0] is access:
            return seen[1]
        if len(self._access_keys) >= 256:
            self._access_keys.clear()
        key = access_key(self.visible(access), access)
        self._access_keys[id(access)] = (access, key)
        return key

    def routes(self, request: SearchRequest, access: Access = None) -> list[Route]:
        """The routes of a request: its ``namespaces`` and its query's ``repo:`` filters both hold."""
        criteria = request.criteria
        return self.catalog.route(request.namespaces, criteria.repos, criteria.skip_repos, access)

    def plan(self, request: SearchRequest, access: Access = None, started: float | None = None) -> Plan:
        """Everything a search needs before anything is sent; InvalidRequest if it cannot start.
        ``started``: when the request's clock started (now, unless given)."""
        started = time.monotonic() if started is None else started
        since_ns = time.time_ns()  # a file modified after this may not be what the backend read
        default_ms = self.config.defaults.timeout_ms
        if "timeout_ms" not in request.model_fields_set and request.timeout_ms != default_ms:
            request = request.model_copy(update={"timeout_ms": default_ms})  # [defaults] timeout_ms
        return Plan(request, self.routes(request, access), started, since_ns, self.access_key(access))

    async def run(self, plan: Plan, on_outcome: Callable[[Outcome], None] | None = None) -> dict[str, Any]:
        """Answer a plan: from a snapshot or the cache, or by fanning out; ``on_outcome`` hears of
        each namespace as it settles (when this request's own fan-out runs)."""
        index = self.index
        if tracing_on():
            _annotate(plan)

        fanned: list[float] = []

        async def fan(request: SearchRequest, everything: bool) -> Whole:
            query = self.query_for(request, plan.started)
            searched, ruled = await self._rule_out(plan.routes, query)
            outcomes: Sequence[Outcome] = []
            with self.scans.admit(searched, query) as routes:  # Overloaded, or past a quota, before anything is sent
                if on_outcome is not None:
                    for outcome in ruled.values():  # settled already: heard of first
                        on_outcome(outcome)
                if routes:
                    outcomes = _asked(plan, await fan_out(routes, query, self.config.server.concurrency, on_outcome))
            fanned.append(min(time.monotonic(), query.deadline))  # the answer's own time starts
            for observe in self.observers:
                for outcome in outcomes:
                    observe(outcome)
            if ruled:
                outcomes = _in_order(plan.routes, outcomes, ruled)
            with span("fedsearch.rank") as current:  # merge and rank every namespace's files
                whole = settle(
                    request,
                    refine(request.criteria, self._declared(request, outcomes, plan.since_ns)),
                    everything,
                    definitions=index.definitions(request) if index is not None else None,
                    since_ns=plan.since_ns,
                )
                if current is not None:
                    current.set_attributes({"fedsearch.namespaces": len(outcomes), "fedsearch.files": whole.file_count})
            if log.is_enabled_for(logging.INFO):
                _log_search(outcomes, whole.file_count, round((time.monotonic() - plan.started) * 1000))
            return whole

        IDLE.begin()
        try:
            answer = await self.cache.search(
                plan.request, plan.access_key, plan.started, fan, self._resolver(plan.request)
            )
        finally:
            IDLE.end()
        if fanned:
            self.answer_time.observe(time.monotonic() - fanned[0])
        return answer

    async def _rule_out(
        self, routes: Sequence[Route], query: SearchQuery
    ) -> tuple[Sequence[Route], dict[str, Outcome]]:
        """The routes to search, and the outcomes of the local namespaces whose content index proves that no
        file of theirs can match (``ok``, no file: what searching them would answer), which are not searched."""
        content = self.content
        if content is None or query.mode not in ("exact", "regex"):
            return routes, {}
        indexed = self._indexed_roots
        local = [(route, root) for route in routes if (root := indexed.get(route.namespace)) is not None]
        if not local:
            return routes, {}
        if len(local) < RULE_OUT_IN_THREAD:
            verdicts = content.ruled_out([root for _, root in local], query)
        else:  # it may wait for a checkout's lock (held while a search reads its engine)
            verdicts = await asyncio.to_thread(content.ruled_out, [root for _, root in local], query)
        ruled = {
            route.namespace: self._ruled_outcome(route) for (route, _), out in zip(local, verdicts, strict=True) if out
        }
        if not ruled:
            return routes, {}
        return [route for route in routes if route.namespace not in ruled], ruled

    def _ruled_outcome(self, route: Route) -> Outcome:
        """A ruled-out namespace's outcome (``ok``, no file, 0 ms): made once for its route (the catalog keeps
        each namespace's route), as a frozen outcome can be shared."""
        made = self._ruled.get(route.namespace)
        if made is None or made[0] is not route:
            outcome = Outcome(
                namespace=route.namespace, backend=route.backend.kind, status="ok", took_ms=0, weight=route.weight
            )
            made = self._ruled[route.namespace] = (route, outcome)
        return made[1]

    def _declared(self, request: SearchRequest, outcomes: Sequence[Outcome], since_ns: int) -> Sequence[Outcome]:
        """For a ``sym:`` query, every file's hits as declarations before the filter reads them: a local
        namespace's hits are lines until a page is cut, and ``sym:`` keeps declarations only (SPEC §7)."""
        index = self.index
        if not request.criteria.symbols or index is None:
            return outcomes
        return declared(outcomes, index.resolver(request, since_ns))

    def _resolver(self, request: SearchRequest) -> Callable[[int], Resolve | None] | None:
        """What makes a page's files final (declarations), for a ranking begun at a time (ns)."""
        index = self.index
        if index is None:
            return None
        return lambda since_ns: index.resolver(request, since_ns)

    def provisional(self, plan: Plan, outcomes: Sequence[Outcome]) -> dict[str, Any]:
        """The answer as it would be with only ``outcomes`` in (a stream's provisional page)."""
        request, index = plan.request, self.index
        definitions = index.definitions(request) if index is not None else None
        asked = self._declared(request, _asked(plan, outcomes), plan.since_ns)
        whole = settle(request, refine(request.criteria, asked), definitions=definitions, since_ns=plan.since_ns)
        resolve = index.resolver(request, plan.since_ns) if index is not None else None
        return build_response(request, page_of(request, whole, resolve=resolve), 0)

    async def search(self, request: SearchRequest, access: Access = None) -> dict[str, Any]:
        """Answer one validated request for a caller."""
        return await self.run(await self.plan_learned(request, access))

    def stream(self, request: SearchRequest, access: Access = None) -> SearchStream:
        """A search whose namespaces are heard of as they settle (InvalidRequest at once if it cannot
        start; Overloaded at once if the scan queue would refuse it now, before a stream begins)."""
        return SearchStream(self, self._admissible(self.plan(request, access)))

    async def open_stream(self, request: SearchRequest, access: Access = None) -> SearchStream:
        """:meth:`stream`, the peers' children learned first (:meth:`plan_learned`)."""
        return SearchStream(self, self._admissible(await self.plan_learned(request, access)))

    def _admissible(self, plan: Plan) -> Plan:
        """``plan``, unless the scan queue would refuse it now (Overloaded): a stream is refused
        before it begins (a live cursor's page needs no scan)."""
        request = plan.request
        if request.cursor is None:
            remaining = plan.started + request.timeout_ms / 1000 - time.monotonic()
            self.scans.check(plan.routes, request.criteria.mode, remaining)
        return plan

    async def facets(self, request: SearchRequest, access: Access = None) -> Facets | None:
        """The facets of the snapshot ``request``'s cursor names, counted over every file it ranked;
        None when there is none (expired, another request's or caller's, or no cache)."""
        plan = self.plan(request, access)  # the request as its search read it ([defaults] applied)
        return await self.cache.facets(plan.request, plan.access_key)

    async def search_json(self, data: Any, access: Access = None) -> dict[str, Any]:
        """Validate raw request data (raises InvalidRequest naming the field), then answer it."""
        return await self.search(parse_request(data), access)

    # --- files ---------------------------------------------------------------------

    def split_path(self, virtual: str, access: Access = None) -> tuple[str, str]:
        """``<namespace>/<path>`` -> (namespace, path), the longest visible namespace winning."""
        return self.catalog.split_path(virtual, access)

    async def learned_names(self, access: Access = None) -> list[str]:
        """:meth:`names`, the peers' children learned first when the caller may see only some."""
        await self._learn_for(access)
        return self.names(access)

    async def file_of(self, virtual: str, access: Access = None) -> tuple[str, str]:
        """:meth:`split_path`, the peers' children learned first when the caller may see only some."""
        await self._learn_for(access)
        return self.split_path(virtual, access)

    async def _learn_for(self, access: Access) -> None:
        if self.catalog.partial(access):
            await self.catalog.children.refresh()

    def view(self, namespace: str, access: Access = None) -> View:
        """Read access to a visible namespace's files, local or remote (NotFound otherwise)."""
        backend, prefix = self.catalog.owner(namespace, access)
        tree = backend.tree()
        if tree is not None:
            return LocalView(tree)
        deadline = time.monotonic() + self.config.defaults.timeout_ms / 1000
        return RemoteView(backend, lambda: deadline, prefix)

    async def read_file(
        self,
        namespace: str,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        access: Access = None,
        *,
        most_lines: int = READ_LINES,
        most_chars: int | None = READ_CHARS,
    ) -> dict[str, Any]:
        """Lines of one file, never outside the namespace root: a local checkout's, or a remote
        backend's where it offers content (:mod:`gateway.files`). A slice sized for an agent whatever
        range is asked (SPEC §4): at most ``most_lines`` lines, cut where they pass ``most_chars``
        characters (None: no such cut; the CLI asks for up to MAX_READ_LINES, the page's file view for
        VIEW_LINES and VIEW_CHARS: a person's, SPEC §9).
        ``next_start_line`` says where the next slice starts when lines of the range asked (to the
        file's end without ``end_line``) are left; a ``start_line`` past the end is an error naming it."""
        start = 1 if start_line is None else start_line
        if start < 1:
            raise InvalidRequest("start_line", "must be at least 1")
        if end_line is not None and end_line < start:
            raise InvalidRequest("end_line", "must not be before start_line")
        if self.catalog.children.parents and self.catalog.partial(access):
            await self.catalog.children.refresh()
        most = max(1, min(most_lines, VIEW_LINES))
        lines, total = await self.view(namespace, access).read_lines(path, start, end_line, most)
        if start > max(total, 1):
            raise InvalidRequest("start_line", f"{start} is past the end of {path} ({total} lines)")
        if most_chars is not None:
            lines = _within_chars(lines, most_chars)
        end = start + len(lines) - 1 if lines else start - 1
        result: dict[str, Any] = {
            "namespace": namespace,
            "path": path,
            "start_line": start,
            "end_line": end,
            "total_lines": total,
            "lines": lines,
        }
        if end < total and (end_line is None or end_line > end):
            result["next_start_line"] = end + 1
        return result


#: What a line costs besides its characters, in the larger of its two forms: JSON's quotes and comma,
#: or the numbered text's number, tab and newline.
LINE_COST = 8


def _within_chars(lines: list[str], most: int) -> list[str]:
    """The first ``lines`` that stay within ``most`` characters as a reader gets them (a JSON string
    each, its quotes, backslashes and tabs escaped; or numbered text): at least one."""
    used = 0
    for i, line in enumerate(lines):
        used += len(line) + LINE_COST + line.count('"') + line.count("\\") + line.count("\t")
        if used > most and i:
            return lines[:i]
    return lines
