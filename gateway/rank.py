"""Fusion, grouping, paging and next actions: pure functions over outcomes, no I/O.

Files are the ranked unit. A file's score is its namespace's weighted reciprocal
rank, ``weight / (K + rank)`` with ``K = 60`` and ``rank`` its 1-based place in its
backend's own order, times the code-aware factors of :mod:`gateway.signals` (inline in
:func:`fuse`'s one pass per file). Factors are positive and independent
of weights, so a higher namespace weight never lowers a file. Ties break by
namespace, then path: the order is total and deterministic.

A page takes files whole, in rank order, from ``offset``: the first always joins,
a further one only while the page's hits stay within ``hit_budget`` and its JSON
within about ``char_budget`` characters (:mod:`gateway.sizing`), and never more
than ``files``. The next page starts where this one stopped, so paging from
offset 0 yields every file once, in one global order.
"""

from __future__ import annotations

import functools
import heapq
import posixpath
from collections.abc import Callable, Container, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import msgspec
from msgspec.structs import replace

from gateway.dedup.group import Deferred, Entry, by_claim
from gateway.dedup.identity import Identities
from gateway.models import FileMatch, Hit, LazyHits, Outcome, gathered
from gateway.query.syntax import escape, with_pattern
from gateway.signals import (
    QueryMatcher,
    defines,
    definition_test,
    demoted,
    file_stem,
    normal_name,
    query_name,
    secondary,
)
from gateway.sizing import MAX_CHAR_BUDGET, Fit, copies_chars, file_chars, fit_lines

if TYPE_CHECKING:  # a type only: the one-shot CLI ranks its own request without pydantic (gateway.cli.quick)
    from gateway.query.request import SearchRequest

__all__ = [
    "EXACT",
    "NOT",
    "OTHER_CASE",
    "Definitions",
    "Fused",
    "K",
    "Known",
    "Ordering",
    "Ranked",
    "RankedFile",
    "Resolve",
    "Whole",
    "fuse",
    "page",
    "page_of",
    "path_signals",
    "rank",
    "settle",
]

K = 60
MAX_OFFSET = 100_000
MAX_TIMEOUT_MS = 60_000
PATH_NAME_BOOST = 2.0
PATH_BOOST = 1.3
DEFINITION_BOOST = 12.0
#: A declaration of the name in another case (``Engine`` for ``engine``, smart case being off).
OTHER_CASE_BOOST = 3.0
DEMOTION = 0.3

NOT, OTHER_CASE, EXACT = 0, 1, 2


class Known(NamedTuple):
    """What the declaration index knows of one namespace's files, for the name a query asks about:
    two lookups :func:`fuse` makes inline (C-level, a file each), not a call."""

    defining: Mapping[str, int]  # the files declaring it: EXACT, or OTHER_CASE (only in another case)
    parsed: Container[str]  # the files whose declarations it knows (any other: unknown)

    def __call__(self, path: str) -> int | None:
        """Whether ``path`` declares the name: EXACT, OTHER_CASE or NOT; None where unknown."""
        defined = self.defining.get(path)
        if defined is None and path in self.parsed:
            return NOT
        return defined


#: Per namespace, what the declaration index knows of which files declare the name asked about.
Definitions = Mapping[str, Known]
_BOOSTS = (1.0, OTHER_CASE_BOOST, DEFINITION_BOOST)


#: The other copies of a file group's content, in rank order: (namespace, path) each.
Copies = tuple[tuple[str, str], ...]


class RankedFile(NamedTuple):
    """A file of one namespace with its fused score and what it matched (a tuple: one per file);
    ``duplicates`` the other copies of its content (SPEC §3, Duplicates), ``identity`` its content
    identity where it is known exactly (with dedup off: what a peer reading the answer merges by)."""

    namespace: str
    file: FileMatch
    score: float
    path_match: bool = False
    duplicates: Copies = ()
    identity: str = ""


class Ranked(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the wire conversion needs, computed once."""

    page: list[RankedFile]
    file_count: int
    weak_filtered: int
    truncated: bool
    next: list[dict[str, Any]]
    note: str | None
    statuses: list[dict[str, Any]]
    offset: int
    more: bool = False  # a next page exists (its action is the first of ``next``)
    #: The matched lines each hit of the page lists (None: all; see gateway.sizing).
    hit_lines: int | None = None
    #: Whether the page's hits leave out the ``file_path``/``namespace`` their group says (gateway.sizing.Fit).
    bare: bool = False
    #: The characters the page's files could take (``char_budget`` less the rest of the answer).
    room: int = MAX_CHAR_BUDGET


_ENCODE = msgspec.json.Encoder().encode

# --- fusion -------------------------------------------------------------------------

#: A RankedFile from its six fields without a Python-level ``__new__`` (one per file).
_ranked: Callable[[tuple[str, FileMatch, float, bool, Copies, str]], RankedFile] = functools.partial(
    tuple.__new__, RankedFile
)


class Fused(NamedTuple):
    """What :func:`fuse` gives: the files in global order (the first ``limit`` of them), and counts."""

    ordered: Sequence[RankedFile]
    total: int  # files after fusion, all of them
    weak: int  # hits dropped as weak
    counts: dict[str, tuple[int, int]]  # (files, hits) by namespace


def fuse(
    request: SearchRequest,
    outcomes: Sequence[Outcome],
    limit: int | None = None,
    lazy: bool = False,
    definitions: Definitions | None = None,
) -> Fused:
    """All matching files in global order (the first ``limit``), the weak hits dropped, and per-namespace counts.

    A file's score is its namespace's weight / (K + its place there) (in semantic mode,
    times its best hit's score: one model's scores compare across namespaces), times the code
    signals: it defines the name the query asks about (DEFINITION_BOOST, or
    OTHER_CASE_BOOST for a declaration in another case: from ``definitions``, the
    declaration index, where it knows the file; else the backend's word or the regex
    test on its first hits), its file name is that name
    with case, ``_`` and ``-`` ignored (PATH_NAME_BOOST; PATH_BOOST when the name is
    only part of it), or else the query is in its name (PATH_NAME_BOOST) or path
    (PATH_BOOST); vendored/generated/minified (DEMOTION), and for a query that names
    something or asks by meaning, tests, examples and docs (DEMOTION).
    This is the hot loop of a wide answer, one pass per file: the signals are inline
    and each file's sort key is built once. Only the files ``limit`` asks for are put
    in order (a heap selection: a page needs its first files, not all 20,000 sorted)
    and made :class:`RankedFile`; with ``lazy`` the rest stay behind them, put in order
    when read (an :class:`Ordering`).

    With ``dedup`` (the request's, SPEC §3), the files of one content identity are one entry,
    the best-ranked copy's, listing the others as its ``duplicates``: claims are gathered in
    the pass (a dict keyed on identity) and merged (:func:`gateway.dedup.group.by_claim`); a
    group a local checkout's claim made is looked at again only when it reaches the selected
    files (:class:`gateway.dedup.group.Deferred`), and split where a copy changed. Each
    namespace's counts keep its own files. Without ``dedup``, the selected files of a local
    checkout get their exact identity (said on the wire for a caller merging copies itself).
    """
    matcher = QueryMatcher(request)
    literal, sensitive = matcher.literal, matcher.sensitive
    criteria = request.criteria
    name = query_name(criteria.pattern, criteria.mode)
    wanted = normal_name(name) if name else None
    test = definition_test(criteria.pattern, criteria.mode, sensitive)
    semantic = criteria.mode == "semantic"
    minor_demoted = wanted is not None or semantic  # tests, examples and docs demoted too
    threshold = request.threshold
    dedup = criteria.dedup
    weak = 0
    counts: dict[str, tuple[int, int]] = {}
    #: (-score, namespace, path, file, path_match, copies, identity): ordered as they are, (namespace,
    #: path) being unique.
    entries: list[_Entry] = []
    claims: dict[str, int] = {}  # with dedup: claimed identity -> the first entry claiming it
    shared: dict[str, list[int]] = {}  # claimed identity -> the entries claiming it, where two or more do
    local: dict[str, Identities] = {}  # namespaces whose identities are only claimed: looked at again when shown
    at: dict[tuple[str, str], int] = {}  # where each (namespace, path) is in entries
    for outcome in outcomes:
        result = outcome.result
        if result is None or not result.files:  # most of a thousand namespaces' (ruled out, or no match)
            continue
        place = own_files = own_hits = 0
        weight = outcome.weight
        base = outcome.namespace
        known = definitions.get(base) if definitions else None
        declaring, parsed = (known.defining.get, known.parsed) if known is not None else (None, ())
        identities = result.identities
        if identities is not None:
            local[base] = identities
        claim_of = identities.claims().get if dedup and identities is not None else None
        for file in result.files:
            hits = file.hits
            best = 1.0
            if semantic:
                strong: tuple[Hit, ...] | LazyHits = tuple(h for h in hits if h.score is None or h.score >= threshold)
                weak += len(hits) - len(strong)
                hits = strong
                best = max((h.score for h in strong if h.score is not None), default=1.0)
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
                entries[seen] = (*first[:3], both, *first[4:])
                files, nhits = counts[namespace]
                counts[namespace] = (files, nhits + len(both.hits) - len(first[3].hits))
                continue
            place += 1
            if hits is not file.hits:
                file = replace(file, hits=hits)
            path_match = literal in (path if sensitive else path.lower()) if literal is not None else matcher(path)
            score = weight * best / (K + place)
            stem, demote, minor = path_signals(path)
            if wanted is not None and wanted in stem:  # MultiDict ~ multidict.py
                score *= PATH_NAME_BOOST if wanted == stem else PATH_BOOST
                path_match = True
            elif path_match:
                score *= PATH_NAME_BOOST if matcher(posixpath.basename(path)) else PATH_BOOST
            defined = declaring(path) if declaring is not None else None
            if defined is None:
                defined = NOT if path in parsed else EXACT if defines(file, test) else NOT
            score *= _BOOSTS[defined]
            if demote or (minor and minor_demoted):
                score *= DEMOTION
            at[key] = here = len(entries)
            identity = file.identity
            if dedup:
                if not identity and claim_of is not None:
                    identity = claim_of(path, "")
                if identity:
                    earliest = claims.setdefault(identity, here)
                    if earliest != here:
                        shared.setdefault(identity, [earliest]).append(here)
            entries.append((-score, namespace, path, file, path_match, (), identity))
            if namespace is base:
                own_files += 1
                own_hits += count
            else:
                files, nhits = counts.get(namespace, (0, 0))
                counts[namespace] = (files + 1, nhits + count)
        if own_files:
            files, nhits = counts.get(base, (0, 0))
            counts[base] = (files + own_files, nhits + own_hits)
    groups: dict[int, list[Entry]] = {}
    if shared:
        entries, groups = by_claim(entries, shared.values())
    deferred = Deferred(local, groups) if groups or (local and not dedup) else None
    top = _select(entries, limit)
    while deferred is not None and deferred.settle(entries, top):  # a shown group's copy changed: split
        top = _select(entries, limit)
    ordered = _ranked_all(top, deferred, dedup)
    if lazy and len(ordered) < len(entries):
        return Fused(Ordering(entries, ordered, deferred, dedup), len(entries), weak, counts)
    return Fused(ordered, len(entries), weak, counts)


_Entry = Entry


def _select(entries: list[_Entry], limit: int | None) -> list[_Entry]:
    """The first ``limit`` entries in order ((namespace, path) is unique: files are never compared)."""
    return heapq.nsmallest(limit, entries) if limit is not None and limit < len(entries) else sorted(entries)


def _ranked_all(ordered: Sequence[_Entry], deferred: Deferred | None, dedup: bool = True) -> list[RankedFile]:
    """Entries as RankedFiles: with dedup, each with the other copies of its content; without, each with
    its file's exact identity (a local one looked at now)."""
    if deferred is None:
        return [
            _ranked((ns, file, -neg, matched, copies, ident)) for neg, ns, _, file, matched, copies, ident in ordered
        ]
    if dedup:
        return [_ranked((e[1], e[3], -e[0], e[4], deferred.copies(e), e[6])) for e in ordered]
    return [_ranked((e[1], e[3], -e[0], e[4], e[5], deferred.identity(e))) for e in ordered]


@functools.lru_cache(maxsize=1 << 16)
def path_signals(path: str) -> tuple[str, bool, bool]:
    """A path's file stem (:func:`file_stem`), whether it is :func:`demoted` and whether it is
    :func:`secondary`: one cache lookup a file in :func:`fuse` (paths recur across queries)."""
    return file_stem(path), demoted(path), secondary(path)


class Ordering(Sequence[RankedFile]):
    """Every fused file in global order, put in order only as far as it is read.

    The first files (a page's worth, found by heap selection) are ready; reading past
    them sorts all of them, once. A snapshot keeps this, so keeping one costs page 1
    nothing more, and the first later page pays for the sort.
    """

    __slots__ = ("_dedup", "_deferred", "_entries", "_known")

    def __init__(
        self, entries: list[_Entry], known: list[RankedFile], deferred: Deferred | None = None, dedup: bool = True
    ) -> None:
        self._entries: list[_Entry] | None = entries
        self._known = known
        self._deferred = deferred  # what fusion left to look at once files are shown (gateway.dedup.group)
        self._dedup = dedup

    def __len__(self) -> int:
        return len(self._known) if self._entries is None else len(self._entries)

    @overload
    def __getitem__(self, index: int) -> RankedFile: ...

    @overload
    def __getitem__(self, index: slice) -> list[RankedFile]: ...

    def __getitem__(self, index: int | slice) -> RankedFile | list[RankedFile]:
        if self._entries is not None:
            if isinstance(index, slice):
                start, stop, step = index.indices(len(self._entries))
                beyond = max(start, stop) > len(self._known) if step > 0 else True
            else:
                beyond = index < 0 or index >= len(self._known)
            if beyond:
                deferred = self._deferred
                if deferred is not None and self._dedup:
                    deferred.settle_all(self._entries)
                ordered = sorted(self._entries)
                self._known = _ranked_all(ordered, deferred, self._dedup)
                self._entries = None
        return self._known[index]

    def ready(self) -> list[RankedFile]:
        """The files already in order (at least the first page's)."""
        return self._known

    def files(self) -> list[FileMatch]:
        """Every file, in no particular order (without putting them in order)."""
        if self._entries is None:
            return [item.file for item in self._known]
        return [entry[3] for entry in self._entries]

    def sources(self) -> list[tuple[str, str]]:
        """Every file's (namespace, path), in no particular order (without putting them in order)."""
        if self._entries is None:
            return [(item.namespace, item.file.path) for item in self._known]
        return [(entry[1], entry[3].path) for entry in self._entries]


def _merge(file: FileMatch, more: Sequence[Hit]) -> FileMatch:
    seen = {(h.line, h.last_line) for h in file.hits}
    extra = tuple(h for h in more if (h.line, h.last_line) not in seen)
    hits = tuple(sorted((*file.hits, *extra), key=lambda h: (h.line, h.last_line)))
    return FileMatch(path=file.path, hits=hits, namespace=file.namespace, identity=file.identity)


def page(
    ordered: Sequence[RankedFile],
    offset: int,
    files: int,
    hit_budget: int,
    char_budget: int = MAX_CHAR_BUDGET,
    lines: int | None = None,
) -> tuple[list[RankedFile], Fit]:
    """Files whole, in order, from ``offset``, their hits gathered (the file's own hit): the first always,
    the rest within both budgets; and how the page is written (:class:`gateway.sizing.Fit`: the lines
    each hit lists, ``lines`` or fewer where the first file needs it; whether its hits are bare; its size)."""
    out: list[RankedFile] = []
    used = chars = 0
    fit = Fit(lines, False, 0)
    for item in ordered[offset : offset + files]:
        file = gathered(item.file)  # the file's own hit: its lines outside declarations, one hit
        if file is not item.file:
            item = item._replace(file=file)
        n = len(file.hits)
        if not out:
            fit = fit_lines(file, item.namespace, lines, char_budget)
            size = fit.size
        elif used + n > hit_budget or len(out) >= files:
            break
        else:
            size = file_chars(file, item.namespace, fit.lines)
            if chars + size > char_budget:
                break
        out.append(item)
        used += n
        chars += size + copies_chars(item.duplicates)
    return out, fit._replace(size=chars)


def _decoded(items: Sequence[RankedFile]) -> bool:
    """Whether every file's hits are at hand (sizing a lazily kept file would decode it)."""
    return all(not isinstance(item.file.hits, LazyHits) or item.file.hits.decoded() for item in items)


# --- what was withheld, and how to get it ----------------------------------------------


def _action(reason: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"reason": reason, "tool": "search", "args": args}


def _top_directory(outcome: Outcome) -> str | None:
    """The top-level directory holding most of a namespace's returned files (inside their
    repository, where a backend serves many: ``paths`` globs match there)."""
    if outcome.result is None:
        return None
    tally: dict[str, int] = {}
    for file in outcome.result.files:
        head, sep, _ = file.inner_path.partition("/")
        if sep:
            tally[head] = tally.get(head, 0) + 1
    if not tally:
        return None
    return min(tally, key=lambda d: (-tally[d], d))


def _fallback(request: SearchRequest, unsupported: Sequence[Outcome]) -> list[dict[str, Any]]:
    """ONE action for every namespace that cannot search in the request's mode: all of them, in a mode they can."""
    if not unsupported:
        return []
    names = [n for o in unsupported for n in o.asked_names()]
    which = names[0] if len(names) == 1 else f"{_plural(len(names), 'namespace')} ({_names(names)})"
    base = {"namespaces": names, "offset": 0}
    criteria = request.criteria
    if criteria.mode != "exact":
        return [
            _action(
                f"{which} cannot search in {criteria.mode} mode: search as exact text",
                request.args(
                    **base, mode="exact", query=with_pattern(request.query, criteria.pattern, regex_mode=False)
                ),
            )
        ]
    return [
        _action(
            f"{which} cannot search in exact mode: search as a regex",
            request.args(
                **base, mode="regex", query=with_pattern(request.query, escape(criteria.pattern), regex_mode=True)
            ),
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
    criteria = request.criteria
    names = outcome.asked_names()  # never wider than what was searched (a peer asked for some of its own)
    alone = request.namespaces == names or (not request.namespaces and list(criteria.repos) == names)
    base = {"namespaces": names, "offset": 0}
    status = outcome.status
    why = outcome.error or status
    said = "" if why in (status, "timed out") else f" ({why})"  # never "timed out (timed out)"
    if status == "timeout" and request.timeout_ms < MAX_TIMEOUT_MS:
        more = min(MAX_TIMEOUT_MS, request.timeout_ms * 4)
        return [_action(f"{ns} timed out{said}: give it {more} ms alone", request.args(**base, timeout_ms=more))]
    if status in ("error", "unavailable"):
        when = f" after {outcome.retry_after:.0f} s" if outcome.retry_after else ""
        return [_action(f"{ns} failed{said}: retry it alone{when}", request.args(**base))]
    if criteria.mode == "semantic" and status == "capped":  # an index still building: narrowing would not help
        return [_action(f"{ns} was {status}{said}: search it again", request.args(**base))]
    if not alone:
        return [_action(f"{ns} was {status}{said}: search it alone", request.args(**base))]
    actions: list[dict[str, Any]] = []
    top = _top_directory(outcome)
    if top is not None and len(criteria.paths) + len(criteria.also_paths) < 31:
        if not criteria.includes:
            actions.append(
                _action(
                    f"{ns} was {status}{said}: narrow to {top}/",
                    # first: the request's excludes after it still hold (the last glob matching a path decides)
                    request.args(**base, paths=[f"{top}/**", *request.paths]),
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


_QUESTION_WORDS = frozenset(
    [
        "how",
        "what",
        "where",
        "which",
        "why",
        "who",
        "when",
        "does",
        "do",
        "is",
        "are",
        "can",
        "find",
        "show",
        "get",
        "list",
        "code",
        "function",
        "that",
        "the",
        "to",
        "for",
        "of",
        "a",
        "an",
        "in",
    ]
)


def reads_as_question(pattern: str) -> bool:
    """Whether an exact pattern reads as a question or a description (words of prose, not code): a
    question mark, or four or more plain words at least one of which is a common word of English."""
    if pattern.rstrip().endswith("?"):
        return True
    words = pattern.split()
    return len(words) >= 4 and all(w.isalpha() for w in words) and any(w.lower() in _QUESTION_WORDS for w in words)


def _note(
    request: SearchRequest,
    shown: int,
    total: int,
    weak: int,
    asked: int,
    failed: Sequence[Outcome],
) -> str | None:
    """Why an answer is empty or partial, in words. A namespace that cannot search in the
    request's mode did not fail: it is said apart."""
    if not asked:
        return "no namespace to search: none is configured or visible to this caller"
    unable = [o.namespace for o in failed if o.status == "unsupported"]
    broken = [o for o in failed if o.status != "unsupported"]
    cannot = f"{_names(unable)} cannot search in {request.criteria.mode} mode" if unable else ""
    if request.criteria.mode == "semantic" and broken:  # say why (an intent index still building)
        why = "; ".join(f"{o.namespace}: {o.error}" for o in broken[:3] if o.error)
        cannot = f"{why}; {cannot}" if why and cannot else why or cannot
    if shown == 0:
        if broken and len(broken) + len(unable) == asked:
            what = ", ".join(f"{o.namespace} ({o.status})" for o in broken[:5])
            more = f" and {len(broken) - 5} more" if len(broken) > 5 else ""
            also = f"; {cannot}" if cannot else ""
            return f"every namespace failed: {what}{more}{also}; see namespaces and next"
        if unable and len(unable) == asked:
            return f"no namespace asked can search in {request.criteria.mode} mode ({_names(unable)}); see next"
        if total and request.offset >= total:
            return f"offset {request.offset} is past the last of {total} matching files"
        if weak:
            return (
                f"everything matched was weak: {weak} hits scored under threshold "
                f"{request.threshold}; lower threshold to see them"
            )
        criteria = request.criteria
        filtered = " with these path/language filters" if criteria.paths or criteria.languages else ""
        searched = asked - len(unable)
        partial = f"; {_plural(len(broken), 'namespace')} did not answer fully" if broken else ""
        partial += f"; {cannot}" if cannot else ""
        if criteria.mode == "exact" and reads_as_question(criteria.pattern):
            partial += "; it reads like a question: mode semantic searches by meaning"
        return f"nothing matched {_quoted(request.query)} in {_plural(searched, 'namespace')}{filtered}{partial}"
    if broken:
        also = f"; {cannot}" if cannot else ""
        of = _plural(asked, "namespace")
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


class Whole(msgspec.Struct, frozen=True, kw_only=True):
    """What a ranked answer is whatever its page: a cursor's snapshot keeps exactly this.

    ``ordered`` holds files in global order from the ``first``-th (0 unless a part of
    the order was loaded); ``failed`` are the namespaces that did not answer fully,
    without their results; ``widen`` the actions that reach what they could not give.
    """

    ordered: Sequence[RankedFile]
    total: int
    file_count: int
    weak: int
    statuses: list[dict[str, Any]]
    widen: list[dict[str, Any]]
    failed: list[Outcome]
    asked: int
    first: int = 0
    #: When the search began (wall clock, ns): a file modified after it may not be what was read.
    since_ns: int = 0


#: Makes the files a page may show final (their hits as declarations): given the files in
#: order, the offset, the most files a page takes and the hit budget, the same list with
#: those files replaced (in order, at least until the page is full).
Resolve = Callable[[list[RankedFile], int, int, int], list[RankedFile]]


def settle(
    request: SearchRequest,
    outcomes: Sequence[Outcome],
    everything: bool = False,
    *,
    definitions: Definitions | None = None,
    since_ns: int = 0,
) -> Whole:
    """Fuse and explain, for every page: the files up to this request's page in order (with ``everything``,
    the others behind them, in order when read). ``definitions`` tells fusion which files define the
    name asked about (the declaration index)."""
    # two pages' worth of files: the next page's range is said as it will be (budget included)
    ordered, total, weak, counts = fuse(
        request, outcomes, request.offset + 2 * request.files, lazy=everything, definitions=definitions
    )
    failed = sorted((o for o in outcomes if o.status != "ok"), key=lambda o: o.namespace)
    everywhere = sorted([*failed, *_failed_children(outcomes)], key=lambda o: o.namespace)
    widen = _fallback(request, [o for o in everywhere if o.status == "unsupported"])
    widen.extend(a for o in everywhere if o.status != "unsupported" for a in _widen(request, o))
    return Whole(
        ordered=ordered,
        total=total,
        file_count=total + _unreturned(outcomes),
        weak=weak,
        statuses=_statuses(outcomes, counts),
        widen=widen,
        failed=[replace(o, result=None) for o in failed],
        asked=len(outcomes),
        since_ns=since_ns,
    )


def page_of(request: SearchRequest, whole: Whole, cursor: str | None = None, resolve: Resolve | None = None) -> Ranked:
    """The page ``request`` asks for; its next-page action carries ``cursor`` (a snapshot of ``whole``).

    ``resolve`` turns the hits of the files this page may show into declarations before the
    page is cut, so the hit budget counts declarations.
    """
    start = request.offset - whole.first
    rest = _rest(request, whole)
    room = max(request.char_budget // 2, request.char_budget - rest)
    budgets = (request.files, request.hit_budget, room, request.hit_lines)
    if resolve is None:
        shown, fit = page(whole.ordered, start, *budgets)
    else:
        window = resolve(list(whole.ordered[start : start + request.files]), 0, request.files, request.hit_budget)
        shown, fit = page(window, 0, *budgets)
    end = request.offset + len(shown)
    # copies a group held that changed since looked at are split off once read (gateway.dedup.group)
    grown = max(0, whole.first + len(whole.ordered) - whole.total)
    total = whole.total + grown
    actions: list[dict[str, Any]] = []
    more = end < total and bool(shown) and end <= MAX_OFFSET
    if more:
        args = request.args(offset=end, cursor=cursor)
        span = f"from file {end + 1}"  # where it starts, when its files are not all at hand
        nxt = whole.ordered[end - whole.first : end - whole.first + request.files]
        if resolve is None and len(nxt) >= min(request.files, total - end) and _decoded(nxt):
            # the next page as it will be, its budgets included (with declarations, or files kept
            # undecoded, its files' hits are only known once it is shown)
            following = len(page(nxt, 0, *budgets)[0])
            span = f"file {end + 1}" if following == 1 else f"files {end + 1}-{end + following}"
        actions.append(_action(f"next page: {span} of {total}", args))
    over = _over(request, shown[0], fit._replace(size=fit.size + rest)) if fit.bare and fit.size > room else None
    if over is not None:
        actions.append(over[1])
    actions.extend(whole.widen)
    return Ranked(
        page=shown,
        file_count=whole.file_count + grown,
        weak_filtered=whole.weak,
        truncated=bool(actions),
        next=actions,
        note=_joined(_note(request, len(shown), total, whole.weak, whole.asked, whole.failed), over and over[0]),
        statuses=whole.statuses,
        offset=request.offset,
        more=more,
        hit_lines=fit.lines,
        bare=fit.bare,
        room=room,
    )


#: An answer's own fields besides its files, namespaces and actions (counts, limits, a note, punctuation).
ENVELOPE_CHARS = 400


def _rest(request: SearchRequest, whole: Whole) -> int:
    """About the characters of the answer besides its files (its namespaces' statuses, its actions, a next
    page's, known before the page is cut): the page's files take ``char_budget`` less these, but never
    less than half of it."""
    rest = ENVELOPE_CHARS + len(_ENCODE(whole.statuses)) + len(_ENCODE(whole.widen))
    if whole.total > request.offset + 1:  # a next page's action: the whole request, a cursor, a reason
        rest += len(_ENCODE(request.args())) + 100
    return rest


def _joined(*notes: str | None) -> str | None:
    said = [note for note in notes if note]
    return "; ".join(said) if said else None


#: The characters a glob takes literally only escaped (``paths`` globs, SPEC §2).
_GLOB_SPECIAL = frozenset("*?[]{}\\!")


def _over(request: SearchRequest, first: RankedFile, fit: Fit) -> tuple[str, dict[str, Any]]:
    """What an answer whose first file alone passes ``char_budget`` (no lines listed, its hits bare; ``fit.size``
    the answer's characters then) withheld, in words, and the search that gets it: that file alone, with the
    budget its lines need."""
    file = first.file
    inner = "/" + "".join("\\" + c if c in _GLOB_SPECIAL else c for c in file.inner_path)
    needed = file_chars(file, first.namespace, request.hit_lines) + copies_chars(first.duplicates) + ENVELOPE_CHARS
    budget = min(MAX_CHAR_BUDGET, max(request.char_budget + 1, needed + needed // 10))
    hits = _plural(len(file.hits), "hit")
    note = (
        f"{first.namespace}/{file.path} alone passes char_budget {request.char_budget} (about {fit.size} "
        f"characters): its {hits} list no lines and leave file_path and namespace to their group; next "
        f"searches that file alone with the budget its lines need, or read_file a hit's span"
    )
    action = _action(
        f"the lines of {first.namespace}/{file.path}'s {hits}",
        request.args(namespaces=[first.namespace], paths=[inner], offset=0, cursor=None, char_budget=budget),
    )
    return note, action


def rank(
    request: SearchRequest,
    outcomes: Sequence[Outcome],
    *,
    definitions: Definitions | None = None,
    resolve: Resolve | None = None,
) -> Ranked:
    """Fuse, page and explain: the whole ranked answer for one request (no snapshot)."""
    return page_of(request, settle(request, outcomes, definitions=definitions), resolve=resolve)
