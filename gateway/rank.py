"""Fusion, grouping, paging and next actions: pure functions over outcomes, no I/O.

Files are the ranked unit. A file's score is its namespace's weighted reciprocal
rank, ``weight / (K + rank)`` with ``K = 60`` and ``rank`` its 1-based place in its
backend's own order, times the code-aware factors of :mod:`gateway.signals` (inline in
:func:`fuse`'s one pass per file). Factors are positive and independent
of weights, so a higher namespace weight never lowers a file. Ties break by
namespace, then path: the order is total and deterministic.

A page takes files whole, in rank order, from ``offset``: the first always joins,
a further one only while the page's hits stay within ``hit_budget``, and never
more than ``files``. The next page starts where this one stopped, so paging from
offset 0 yields every file once, in one global order.
"""

from __future__ import annotations

import functools
import heapq
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import re2

from gateway.models import FileMatch, Hit, LazyHits, Outcome
from gateway.request import SearchRequest
from gateway.signals import QueryMatcher, defines, demoted

__all__ = [
    "Fused",
    "K",
    "Ranked",
    "RankedFile",
    "fuse",
    "page",
    "rank",
]

K = 60
MAX_OFFSET = 100_000
MAX_TIMEOUT_MS = 60_000
PATH_NAME_BOOST = 2.0
PATH_BOOST = 1.3
DEFINITION_BOOST = 1.5
DEMOTION = 0.3


class RankedFile(NamedTuple):
    """A file of one namespace with its fused score and what it matched (a tuple: one per file)."""

    namespace: str
    file: FileMatch
    score: float
    path_match: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranked:
    """Everything the wire conversion needs, computed once."""

    page: list[RankedFile]
    file_count: int
    weak_filtered: int
    truncated: bool
    next: list[dict[str, Any]]
    note: str | None
    statuses: list[dict[str, Any]]
    offset: int


# --- fusion -------------------------------------------------------------------------

#: A RankedFile from its four fields without a Python-level ``__new__`` (one per file).
_ranked: Callable[[tuple[str, FileMatch, float, bool]], RankedFile] = functools.partial(tuple.__new__, RankedFile)


class Fused(NamedTuple):
    """What :func:`fuse` gives: the files in global order (the first ``limit`` of them), and counts."""

    ordered: list[RankedFile]
    total: int  # files after fusion, all of them
    weak: int  # hits dropped as weak
    counts: dict[str, tuple[int, int]]  # (files, hits) by namespace


def fuse(request: SearchRequest, outcomes: Sequence[Outcome], limit: int | None = None) -> Fused:
    """All matching files in global order (the first ``limit``), the weak hits dropped, and per-namespace counts.

    A file's score is its namespace's weight / (K + its place there), times the code
    signals: the query in its name (PATH_NAME_BOOST) or path (PATH_BOOST), a definition
    among its first hits (DEFINITION_BOOST), vendored/generated/minified (DEMOTION).
    This is the hot loop of a wide answer, one pass per file: the signals are inline
    and each file's sort key is built once. Only the files ``limit`` asks for are put
    in order (a heap selection: a page needs its first files, not all 20,000 sorted)
    and made :class:`RankedFile`.
    """
    matcher = QueryMatcher(request)
    literal, sensitive = matcher.literal, matcher.sensitive
    semantic = request.mode == "semantic"
    threshold = request.threshold
    weak = 0
    counts: dict[str, tuple[int, int]] = {}
    #: (-score, namespace, path, file, path_match): ordered as they are, (namespace, path) being unique.
    entries: list[tuple[float, str, str, FileMatch, bool]] = []
    at: dict[tuple[str, str], int] = {}  # where each (namespace, path) is in entries
    for outcome in outcomes:
        result = outcome.result
        if result is None:
            continue
        place = own_files = own_hits = 0
        weight = outcome.weight
        base = outcome.namespace
        for file in result.files:
            hits = file.hits
            if semantic:
                strong: tuple[Hit, ...] | LazyHits = tuple(h for h in hits if h.score is None or h.score >= threshold)
                weak += len(hits) - len(strong)
                hits = strong
            count = len(hits)
            if not count:
                continue
            namespace = f"{base}/{file.namespace}" if file.namespace else base
            path = file.path
            key = (namespace, path)
            seen = at.get(key)
            if seen is not None:  # a backend named one file twice: keep its best place
                if own_files:  # this outcome's counts so far, where the first one may be counted
                    files, nhits = counts.get(base, (0, 0))
                    counts[base] = (files + own_files, nhits + own_hits)
                    own_files = own_hits = 0
                first = entries[seen]
                both = _merge(first[3], hits)
                entries[seen] = (*first[:3], both, first[4])
                files, nhits = counts[namespace]
                counts[namespace] = (files, nhits + len(both.hits) - len(first[3].hits))
                continue
            place += 1
            if hits is not file.hits:
                file = FileMatch(path=path, hits=hits, namespace=file.namespace, definition=file.definition)
            path_match = literal in (path if sensitive else path.lower()) if literal is not None else matcher(path)
            score = weight / (K + place)
            if path_match:
                score *= PATH_NAME_BOOST if matcher(posixpath.basename(path)) else PATH_BOOST
            if file.definition or (file.definition is None and defines(file)):
                score *= DEFINITION_BOOST
            if demoted(path):
                score *= DEMOTION
            at[key] = len(entries)
            entries.append((-score, namespace, path, file, path_match))
            if namespace is base:
                own_files += 1
                own_hits += count
            else:
                files, nhits = counts.get(namespace, (0, 0))
                counts[namespace] = (files + 1, nhits + count)
        if own_files:
            files, nhits = counts.get(base, (0, 0))
            counts[base] = (files + own_files, nhits + own_hits)
    # (namespace, path) is unique: files themselves are never compared
    top = heapq.nsmallest(limit, entries) if limit is not None and limit < len(entries) else sorted(entries)
    return Fused([_ranked((ns, file, -neg, matched)) for neg, ns, _, file, matched in top], len(entries), weak, counts)


def _merge(file: FileMatch, more: Sequence[Hit]) -> FileMatch:
    seen = {(h.line, h.last_line) for h in file.hits}
    extra = tuple(h for h in more if (h.line, h.last_line) not in seen)
    hits = tuple(sorted((*file.hits, *extra), key=lambda h: (h.line, h.last_line)))
    return FileMatch(path=file.path, hits=hits, namespace=file.namespace)


def page(ordered: Sequence[RankedFile], offset: int, files: int, hit_budget: int) -> list[RankedFile]:
    """Files whole, in order, from ``offset``: the first always, the rest within the budget."""
    out: list[RankedFile] = []
    used = 0
    for item in ordered[offset:]:
        n = len(item.file.hits)
        if out and (used + n > hit_budget or len(out) >= files):
            break
        out.append(item)
        used += n
    return out


# --- what was withheld, and how to get it ----------------------------------------------


def _action(reason: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"reason": reason, "tool": "search", "args": args}


def _top_directory(outcome: Outcome) -> str | None:
    """The top-level directory holding most of a namespace's returned files."""
    if outcome.result is None:
        return None
    tally: dict[str, int] = {}
    for file in outcome.result.files:
        head, sep, _ = file.path.partition("/")
        if sep:
            tally[head] = tally.get(head, 0) + 1
    if not tally:
        return None
    return min(tally, key=lambda d: (-tally[d], d))


def _fallback(request: SearchRequest, unsupported: Sequence[Outcome]) -> list[dict[str, Any]]:
    """ONE action for every namespace that cannot search in the request's mode: all of them, in a mode they can."""
    if not unsupported:
        return []
    names = [o.namespace for o in unsupported]
    which = names[0] if len(names) == 1 else f"{_plural(len(names), 'namespace')} ({_names(names)})"
    base = {"namespaces": names, "offset": 0}
    if request.mode != "exact":
        return [
            _action(
                f"{which} cannot search in {request.mode} mode: search as exact text",
                request.args(**base, mode="exact"),
            )
        ]
    return [
        _action(
            f"{which} cannot search in exact mode: search as a regex",
            request.args(**base, mode="regex", query=re2.escape(request.query)),
        )
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _names(names: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _quoted(query: str) -> str:
    """The query between quotes as typed (``repr`` would double its backslashes)."""
    return f'"{query}"' if "'" in query else f"'{query}'"


def _widen(request: SearchRequest, outcome: Outcome) -> list[dict[str, Any]]:
    """Actions that reach what one namespace could not give (one that cannot do the mode: :func:`_fallback`)."""
    ns = outcome.namespace
    alone = request.namespaces == [ns]
    base = {"namespaces": [ns], "offset": 0}
    status = outcome.status
    why = outcome.error or status
    said = "" if why in (status, "timed out") else f" ({why})"  # never "timed out (timed out)"
    if status == "timeout" and request.timeout_ms < MAX_TIMEOUT_MS:
        more = min(MAX_TIMEOUT_MS, request.timeout_ms * 4)
        return [_action(f"{ns} timed out{said}: give it {more} ms alone", request.args(**base, timeout_ms=more))]
    if status in ("error", "unavailable"):
        when = f" after {outcome.retry_after:.0f} s" if outcome.retry_after else ""
        return [_action(f"{ns} failed{said}: retry it alone{when}", request.args(**base))]
    if not alone:
        return [_action(f"{ns} was {status}{said}: search it alone", request.args(**base))]
    actions: list[dict[str, Any]] = []
    top = _top_directory(outcome)
    if top is not None and len(request.paths) < 31:
        if not any(not p.startswith("!") for p in request.paths):
            actions.append(
                _action(
                    f"{ns} was {status}{said}: narrow to {top}/",
                    request.args(**base, paths=[*request.paths, f"{top}/**"]),
                )
            )
        actions.append(
            _action(f"{ns} was {status}{said}: skip {top}/", request.args(**base, paths=[*request.paths, f"!{top}/**"]))
        )
    if not actions:
        actions.append(_action(f"{ns} was {status}{said}: search it again", request.args(**base)))
    return actions


def _statuses(outcomes: Sequence[Outcome], counts: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for o in outcomes:
        files, hits = counts.get(o.namespace, (0, 0))
        status: dict[str, Any] = {
            "name": o.namespace,
            "backend": o.backend,
            "status": o.status,
            "took_ms": o.took_ms,
            "files": files,
            "hits": hits,
        }
        if o.error:
            status["error"] = o.error
        out.append(status)
        if o.result is not None:
            for child in o.result.children:
                name = f"{o.namespace}/{child.name}"
                cfiles, chits = counts.get(name, (child.files, child.hits))
                entry: dict[str, Any] = {
                    "name": name,
                    "backend": child.backend,
                    "status": child.status,
                    "took_ms": child.took_ms,
                    "files": cfiles,
                    "hits": chits,
                }
                if child.error:
                    entry["error"] = child.error
                out.append(entry)
    out.sort(key=lambda s: s["name"])
    return out


def _note(
    request: SearchRequest,
    shown: int,
    total: int,
    weak: int,
    outcomes: Sequence[Outcome],
    failed: Sequence[Outcome],
) -> str | None:
    """Why an answer is empty or partial, in words. A namespace that cannot search in the
    request's mode did not fail: it is said apart."""
    if not outcomes:
        return "no namespace to search: none is configured or visible to this caller"
    unable = [o.namespace for o in failed if o.status == "unsupported"]
    broken = [o for o in failed if o.status != "unsupported"]
    cannot = f"{_names(unable)} cannot search in {request.mode} mode" if unable else ""
    if shown == 0:
        if broken and len(broken) + len(unable) == len(outcomes):
            what = ", ".join(f"{o.namespace} ({o.status})" for o in broken[:5])
            more = f" and {len(broken) - 5} more" if len(broken) > 5 else ""
            also = f"; {cannot}" if cannot else ""
            return f"every namespace failed: {what}{more}{also}; see namespaces and next"
        if unable and len(unable) == len(outcomes):
            return f"no namespace asked can search in {request.mode} mode ({_names(unable)}); see next"
        if total and request.offset >= total:
            return f"offset {request.offset} is past the last of {total} matching files"
        if weak:
            return (
                f"everything matched was weak: {weak} hits scored under threshold "
                f"{request.threshold}; lower threshold to see them"
            )
        filtered = " with these path/language filters" if request.paths or request.languages else ""
        searched = len(outcomes) - len(unable)
        partial = f"; {_plural(len(broken), 'namespace')} did not answer fully" if broken else ""
        partial += f"; {cannot}" if cannot else ""
        return f"nothing matched {_quoted(request.query)} in {_plural(searched, 'namespace')}{filtered}{partial}"
    if broken:
        also = f"; {cannot}" if cannot else ""
        of = _plural(len(outcomes), "namespace")
        return f"{len(broken)} of {of} did not answer fully{also}; see namespaces and next"
    if unable:
        return f"{cannot}; see next"
    return None


def _failed_children(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Sub-namespaces (of a peer gateway) that did not answer fully, as outcomes of their own."""
    return [
        Outcome(
            namespace=f"{o.namespace}/{c.name}", backend=c.backend, status=c.status, took_ms=c.took_ms, error=c.error
        )
        for o in outcomes
        if o.result is not None
        for c in o.result.children
        if c.status != "ok"
    ]


def _unreturned(outcomes: Sequence[Outcome]) -> int:
    """Files backends said matched beyond those they sent (the count stays a lower bound)."""
    extra = 0
    for o in outcomes:
        if o.result is not None and o.result.file_count is not None:
            extra += max(0, o.result.file_count - len(o.result.files))
    return extra


def rank(request: SearchRequest, outcomes: Sequence[Outcome]) -> Ranked:
    """Fuse, page and explain: the whole ranked answer for one request."""
    # two pages' worth of files: the next page's range is said as it will be (budget included)
    ordered, total, weak, counts = fuse(request, outcomes, limit=request.offset + 2 * request.files)
    shown = page(ordered, request.offset, request.files, request.hit_budget)
    end = request.offset + len(shown)
    actions: list[dict[str, Any]] = []
    if end < total and shown and end <= MAX_OFFSET:
        following = len(page(ordered, end, request.files, request.hit_budget))
        span = f"file {end + 1}" if following == 1 else f"files {end + 1}-{end + following}"
        actions.append(_action(f"next page: {span} of {total}", request.args(offset=end)))
    failed = sorted((o for o in outcomes if o.status != "ok"), key=lambda o: o.namespace)
    everywhere = sorted([*failed, *_failed_children(outcomes)], key=lambda o: o.namespace)
    actions.extend(_fallback(request, [o for o in everywhere if o.status == "unsupported"]))
    actions.extend(a for o in everywhere if o.status != "unsupported" for a in _widen(request, o))
    return Ranked(
        page=shown,
        file_count=total + _unreturned(outcomes),
        weak_filtered=weak,
        truncated=bool(actions),
        next=actions,
        note=_note(request, len(shown), total, weak, outcomes, failed),
        statuses=_statuses(outcomes, counts),
        offset=request.offset,
    )
