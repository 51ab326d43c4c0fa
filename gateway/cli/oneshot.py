"""A one-shot local ``fedsearch search`` without the service: no event loop, no pydantic.

``fedsearch search`` run without ``--server`` pays for its start-up on every search, and
most of what the service brings to it (asyncio for a fan-out, pydantic for the config and
the request, the cache) serves a long-lived process. When nothing needs the service, this
module answers instead, with the same answer as :meth:`SearchService.search
<gateway.service.SearchService.search>` (``tests/test_cli_quick.py`` compares them byte for byte):

1. the checkouts discovered under ``--root`` or here (no ``--config``, no
   ``$FEDSEARCH_CONFIG``: every namespace a ``ripgrep`` one with the default settings);
2. the request checked by :func:`~gateway.cli.quick.quick_request` (exact or regex, no
   cursor; anything it does not take certainly valid goes to the service, whose
   pydantic words the error);
3. its namespaces chosen as :meth:`SearchService.routes <gateway.service.SearchService.routes>`
   chooses them (``namespaces`` patterns, then the query's ``repo:`` filters), the
   backend's query as the service's (:func:`~gateway.query.criteria.backend_query`);
4. one rg over them all, run by :mod:`adapters.ripgrep.oneshot` (the fan-out's shared
   call, without the loop), most often started before any of this was imported
   (:mod:`gateway.cli.early`) and adopted here when it is the rg this request asks for;
5. the outcomes a fan-out would give, then the one ranking (:func:`~gateway.query.refine.refine`,
   :func:`~gateway.rank.settle`, :func:`~gateway.rank.page_of`, with the declaration
   index of the local namespaces) and the one conversion (:func:`~gateway.wire.build_response`).

The index (SQLite, tree-sitter) is opened only when there will be files to rank: once rg
is seen writing while it still runs (and who defines the query's name read then, while
rg searches: :meth:`~gateway.index.resolve.DeclarationIndex.prefetch`), or after rg when
it found files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gateway.cli.quick import QuickRequest
from gateway.errors import InvalidRequest, UnknownNamespace
from gateway.query.criteria import backend_query
from gateway.query.globs import namespace_matcher

if TYPE_CHECKING:
    import threading

    from adapters.ripgrep.identity import GitIdentities
    from adapters.ripgrep.oneshot import Scan, Scans
    from gateway.cli.early import Early
    from gateway.index.content.narrow import ContentIndex
    from gateway.index.resolve import DeclarationIndex
    from gateway.index.semantic import Reasons
    from gateway.models import FileMatch, SearchQuery
    from gateway.query.request import SearchRequest

__all__ = ["OneShot", "routes"]


def routes(names: Sequence[str], request: QuickRequest) -> list[str]:
    """The namespaces a request searches, as the service's ``routes`` picks them among local ones."""
    chosen = _resolve(names, request.namespaces)
    criteria = request.criteria
    if criteria.repos:
        try:
            named = set(_resolve(names, criteria.repos))
        except UnknownNamespace as exc:
            raise InvalidRequest(
                "query", f"no namespace matches {exc.pattern!r} (repo:{exc.pattern}){exc.known}"
            ) from None
        chosen = [n for n in chosen if n in named]
        if not chosen:
            repos = " ".join(f"repo:{p}" for p in criteria.repos)
            raise InvalidRequest("namespaces", f"no namespace matches both {request.namespaces} and {repos}")
    for pattern in criteria.skip_repos:
        skip = namespace_matcher(pattern)
        chosen = [n for n in chosen if not skip(n)]
    return chosen


def _resolve(names: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The names matching ``patterns`` (all when empty), in order; UnknownNamespace for a pattern matching none."""
    if not patterns:
        return list(names)
    whole: set[str] = set()
    for pattern in patterns:
        match = namespace_matcher(pattern)
        hits = [n for n in names if match(n)]
        if not hits:
            raise UnknownNamespace(pattern, names)
        whole.update(hits)
    return [n for n in names if n in whole]


class OneShot:
    """Searches discovered checkouts, ``roots`` (namespace -> absolute folder, in discovery order);
    ``flags``: rg's own options choosing the files it reads (``--hidden``, ``--no-ignore``), given to rg.
    The content index knows only the files rg reads without them: with them, rg scans."""

    def __init__(self, roots: dict[str, str], flags: Sequence[str] = ()) -> None:
        self.roots = roots
        self.flags = tuple(flags)
        self._index: DeclarationIndex | None = None
        self._content: ContentIndex | None = None

    def content(self, names: Sequence[str]) -> ContentIndex | None:
        """The content index of these checkouts, when theirs are complete and large enough to be worth it
        (:data:`~gateway.index.content.paths.CLI_MIN_BYTES`; else rg scans them)."""
        from gateway.discovery import default_index_dir
        from gateway.index.content.paths import CLI_MIN_BYTES, usable_bytes

        directory = default_index_dir()
        roots = [self.roots[n] for n in names]
        indexed = usable_bytes(directory, roots)
        if not indexed or indexed < CLI_MIN_BYTES:
            return None
        from gateway.index.content.narrow import ContentIndex

        self._content = ContentIndex(directory, roots)
        return self._content

    def start(self, request: QuickRequest, early: Early | None = None) -> tuple[Scan | Scans, float, int]:
        """Plan and start the search: rg runs when this returns (with when the search began).

        ``early``, an rg :func:`gateway.cli.early.speculate` started for this request, is
        adopted if it is the rg the request asks for (else killed); the search began then."""
        from adapters.ripgrep.oneshot import start
        from adapters.ripgrep.spawn import find_rg

        if early is not None:
            started, since_ns = early.started, early.since_ns
        else:
            started, since_ns = time.monotonic(), time.time_ns()
        child = early.take() if early is not None else None
        try:
            names = routes(list(self.roots), request)
            query = backend_query(request.as_request(), started)
        except BaseException:
            if child is not None:
                child.close()
            raise
        try:
            narrower = self.content(names) if query.mode in ("exact", "regex") and not self.flags else None
        except BaseException:
            if child is not None:
                child.close()
            raise
        return (
            start(
                find_rg(), {n: self.roots[n] for n in names}, query, early=child, narrower=narrower, flags=self.flags
            ),
            started,
            since_ns,
        )

    def search(self, request: QuickRequest, early: Early | None = None) -> dict[str, Any]:
        """The answer to ``request``: what ``SearchService.search`` answers (timing aside)."""
        scan, started, since_ns = self.start(request, early)
        from gateway.query.refine import declared, refine
        from gateway.rank import page_of, settle
        from gateway.wire import build_response

        wanted = request.as_request()
        outcomes = _outcomes(scan, started, _Meanwhile(self._open, scan, wanted))
        index = self._index_for(outcomes)
        among = {o.namespace: [f.path for f in o.result.files] for o in outcomes if o.result is not None}
        definitions = index.definitions(wanted, among) if index is not None else None
        if request.criteria.symbols and index is not None:  # sym: reads declarations (gateway.query.refine.declared)
            outcomes = list(declared(outcomes, index.resolver(wanted, since_ns)))
        whole = settle(wanted, refine(request.criteria, outcomes), False, definitions=definitions, since_ns=since_ns)
        resolve = index.resolver(wanted, whole.since_ns) if index is not None else None
        answer = build_response(wanted, page_of(wanted, whole, None, resolve), 0)
        answer["took_ms"] = round((time.monotonic() - started) * 1000)
        return answer

    def semantic(self, request: QuickRequest) -> dict[str, Any] | None:
        """The answer to a search by meaning, read from the intent index as
        :class:`~gateway.index.local.IntentSearch` reads it (without the service, its config and its event
        loop: issue 52), ranked as the service ranks it; None where a namespace's intent index is not built
        under this model (the service builds it, or says how far it is)."""
        from gateway.index.intents import intents_id

        started, since_ns = time.monotonic(), time.time_ns()
        names = routes(list(self.roots), request)
        wanted = request.as_request()
        query = backend_query(wanted, started)
        index = self._open()
        store = index.store()
        if store.intents_of() != intents_id():
            return None
        roots = {name: os.path.abspath(self.roots[name]) for name in names}
        if not all(store.progress(root).built for root in roots.values()):
            return None
        import threading

        from adapters.ripgrep.identity import identities_for

        # the checkouts' git blob ids (dedup) listed meanwhile, one git at a time, read when ranking
        listing = threading.Thread(target=_listed, args=([identities_for(self.roots[n]) for n in names],))
        listing.start()
        try:
            return self._by_meaning(request, wanted, query, roots, index, started, since_ns, listing)
        finally:
            listing.join()  # no git outlives the search

    def _by_meaning(
        self,
        request: QuickRequest,
        wanted: SearchRequest,
        query: SearchQuery,
        roots: dict[str, str],
        index: DeclarationIndex,
        started: float,
        since_ns: int,
        listing: threading.Thread,
    ) -> dict[str, Any]:
        """:meth:`semantic`'s answer, its namespaces' intent indexes built (``listing``: their blob ids)."""
        import functools

        import msgspec

        from adapters.ripgrep.identity import identities_for
        from gateway.index.model import model
        from gateway.index.semantic import Intents, Reasons, WordCounts
        from gateway.index.vocabulary import Vocabulary
        from gateway.models import BackendResult, Outcome
        from gateway.query.globs import PathFilter
        from gateway.query.refine import declared, refine
        from gateway.rank import page_of, settle
        from gateway.wire import build_response

        store = index.store()
        encoder = model()
        vocabulary = Vocabulary()
        if index.directory:  # the tokenizer and the vocabulary mapped, not loaded (written there the first time)
            folder = os.path.expanduser(index.directory)
            encoder.use_pieces(folder)
            vocabulary.load(store, encoder.dim, folder)
        else:
            vocabulary.sync(store, encoder.dim)
        accept = PathFilter.build(query.paths, query.languages)
        vector = functools.cache(lambda: encoder.embed_one(query.text))  # once for every checkout
        # the reasons of the hits a page may show only, written after ranking (a filter ranking does not
        # apply, as sym: and an AND of paths, reads the hits first: every hit's reason then)
        later = None if request.criteria.symbols or request.criteria.also_paths else Reasons()
        counts = WordCounts()  # the index is every checkout's: its words counted once
        outcomes = []
        for name, root in roots.items():
            intents = Intents(root, counts)
            intents.sync(store, encoder.dim)
            files = intents.search(
                store,
                query.text,
                vector,
                query.max_files,
                None if accept.is_open else accept,
                vocabulary,
                encoder.embed,
                later,
            )
            identities = identities_for(self.roots[name]) if files else None
            result = BackendResult(files=tuple(files), identities=identities)
            took_ms = round((time.monotonic() - started) * 1000)
            outcomes.append(Outcome(namespace=name, backend="ripgrep", status="ok", took_ms=took_ms, result=result))
        listing.join()  # the blob ids ranking reads
        among = {o.namespace: [f.path for f in o.result.files] for o in outcomes if o.result is not None}
        definitions = index.definitions(wanted, among)
        if request.criteria.symbols:
            outcomes = list(declared(outcomes, index.resolver(wanted, since_ns)))
        whole = settle(wanted, refine(request.criteria, outcomes), False, definitions=definitions, since_ns=since_ns)
        if later is not None:  # every file a page (this one, and the next's size) may show: settle's, no more
            written = [item._replace(file=_explained(item.file, later)) for item in whole.ordered]
            whole = msgspec.structs.replace(whole, ordered=written)
        answer = build_response(wanted, page_of(wanted, whole, None, index.resolver(wanted, whole.since_ns)), 0)
        answer["took_ms"] = round((time.monotonic() - started) * 1000)
        return answer

    def _index_for(self, outcomes: Sequence[Any]) -> DeclarationIndex | None:
        """The declaration index of the local namespaces, once some file is to be ranked (or opened
        already: while rg ran, once it wrote)."""
        if self._index is None and any(o.result is not None and o.result.files for o in outcomes):
            return self._open()
        return self._index

    def _open(self) -> DeclarationIndex:
        if self._index is None:
            from gateway.discovery import default_index_dir
            from gateway.index.files import Source
            from gateway.index.resolve import DeclarationIndex
            from gateway.index.roots import touch

            sources = [Source(name, os.path.abspath(root)) for name, root in self.roots.items()]
            self._index = DeclarationIndex(default_index_dir(), sources)
            touch(default_index_dir(), [s.root for s in sources])  # their last use: a search (pruning)
        return self._index

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        if self._content is not None:
            self._content.close()
            self._content = None


def _listed(identities: Sequence[GitIdentities]) -> None:
    """Load each checkout's blob ids (its ``git ls-files``), while the search runs."""
    for each in identities:
        each.claims()


def _explained(file: FileMatch, later: Reasons) -> FileMatch:
    """``file`` with the reasons of its hits written (:class:`~gateway.index.semantic.Reasons`)."""
    import msgspec

    hits = tuple(later.written(h) for h in file.hits)
    if all(a is b for a, b in zip(hits, file.hits, strict=True)):
        return file
    return msgspec.structs.replace(file, hits=hits)


class _Meanwhile:
    """What ranking would do after rg, done while rg runs (:meth:`Scan.results
    <adapters.ripgrep.oneshot.Scan.results>`'s ``meanwhile``): the first time, the index opened
    and who defines the query's name read; then, for the files read since, whether the index
    knows them and their path signals (:func:`gateway.rank.path_signals`, cached)."""

    def __init__(self, index: Callable[[], DeclarationIndex], scan: Scan | Scans, request: Any) -> None:
        self.index = index
        self.scan = scan
        self.request = request
        self.seen: dict[str, int] = {}  # namespace -> files looked at so far
        self.opened = False

    def __call__(self) -> None:
        from gateway.rank import path_signals

        index = self.index()
        if not self.opened:
            self.opened = True
            index.prefetch(self.request)
        for name, collector in self.scan.collectors.items():
            start = self.seen.get(name, 0)
            paths = collector.paths(start)
            self.seen[name] = start + len(paths)
            if paths:
                index.prefetch_parsed(name, paths)
                for path in paths:
                    path_signals(path)


def _outcomes(scan: Scan | Scans, started: float, on_output: Callable[[], object] | None = None) -> list[Any]:
    """What a fan-out makes of each namespace's answer (gateway.fanout's ``_one``), in route order
    (``on_output``: see :meth:`Scan.results <adapters.ripgrep.oneshot.Scan.results>`)."""
    from gateway.errors import BackendError
    from gateway.models import Outcome

    answers = scan.results(on_output)
    outcomes = []
    for name in scan.names:
        answer = answers[name]
        if isinstance(answer, BackendError):
            status, error, result = answer.status, answer.reason, None
        else:
            status, error, result = answer.status, answer.reason, answer
        if error:  # as the fan-out: a backend may echo what it was sent in its error text
            from gateway.log import scrub

            error = scrub(error)
        took_ms = round((scan.answered_at[name] - started) * 1000)
        outcomes.append(
            Outcome(namespace=name, backend="ripgrep", status=status, took_ms=took_ms, result=result, error=error)
        )
    return outcomes
