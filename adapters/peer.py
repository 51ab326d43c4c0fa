"""Another fedsearch gateway: ``POST <url>/v1/search``, its namespaces under ours.

Asking: the query becomes a complete ``SearchRequest`` (case explicit, ``files`` up
to 200 per page, ``hit_budget`` at its maximum so pages are cut by files only, a
``timeout_ms`` just inside our remaining deadline, ``namespaces`` the configured
remote globs). The peer's next-page action (the one whose ``offset`` moves on) is
followed, offset by offset, until ``query.max_files`` files are in or the deadline
is near; a peer that still had pages left makes the result ``capped``.

Reading: each FileGroup becomes a ``FileMatch`` whose ``namespace`` suffix is the remote
namespace, so ``rank`` shows it as ``<name>/<remote>``; files keep the peer's rank
order. The peer is asked with ``dedup`` false: it sends every copy with its content
``identity``, which passes through, so copies merge here with every other namespace's
(SPEC §3, Duplicates) and each child counts its own files. Each remote
``NamespaceStatus`` becomes a ``ChildStatus`` (a later page's failure wins over an
earlier ``ok``), and ``rank`` turns failed children into our own next actions. A 400
problem from the peer (a remote glob matching nothing, say) is a BackendError carrying
the peer's detail. The query's path filters are held locally too: a sub-namespace of a
kind that serves many repositories (its status names the kind) names files
``<repository>/<path>``, so there a path passes if it passes inside some repository it
may name.

Children: ``GET <url>/v1/namespaces`` lists the peer's namespaces, each with the
health and capabilities the peer declares (within the configured globs); they are
ours as ``<name>/<remote>``. Files: the peer is an AFI provider too, so its files are
read, stat'ed and listed through its ``/afi/read``, ``/afi/stat`` and ``/afi/list``
(:mod:`adapters._afi_files`): ``<remote namespace>/<path>`` is ``/<remote namespace>/<path>``
there.

Callers: a search names the caller it is for in ``X-Fedsearch-Client`` (its key here,
:mod:`gateway.resilience.callers`), so the peer shares its capacity between our callers,
not with us as one; the peer trusts it from a token it configures ``peer = true``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast, get_args

from pydantic import Field, field_validator

from adapters._afi_files import AfiFilesBackend, afi_error
from adapters._http import HttpSettings, HttpUrl, Request, error_field, map_client_errors
from gateway.backend import REPOSITORY_KINDS
from gateway.errors import BackendError, BackendTimeout, Rejected
from gateway.models import (
    MAX_INTENT,
    BackendResult,
    ChildNamespace,
    ChildStatus,
    FileMatch,
    Hit,
    Mode,
    SearchQuery,
    Status,
    cut_text,
)
from gateway.query.fields import check_namespace_patterns
from gateway.query.globs import PathFilter, namespace_matcher
from gateway.query.syntax import literal
from gateway.resilience.callers import CLIENT_HEADER, LOCAL, current
from gateway.sizing import MAX_CHAR_BUDGET

__all__ = ["PeerBackend", "PeerSettings", "build_request", "next_offset", "parse_page"]

#: The peer's own bounds (SPEC §2).
MAX_PAGE_FILES = 200
MAX_HIT_BUDGET = 5000
#: The request's sizing fields and ``dedup``, which a peer from before them refuses as unknown.
SIZING = ("char_budget", "hit_lines", "dedup")
#: The longest content identity taken from a peer.
MAX_IDENTITY = 160
MIN_TIMEOUT_MS = 100
MAX_TIMEOUT_MS = 60_000
MAX_OFFSET = 100_000
#: The most namespace patterns one peer request may carry (SPEC §2's bound).
MAX_PATTERNS = 64
#: Time kept back from the peer's ``timeout_ms`` for the transfer: this share, at least the floor.
MARGIN_SHARE = 0.1
MARGIN_FLOOR_S = 0.05
#: Another page is asked only with this much time left, and never more than this many pages.
MIN_PAGE_S = 0.15
MAX_PAGES = 50
_STATUSES: frozenset[str] = frozenset(get_args(Status))


class PeerSettings(HttpSettings):
    """``url`` of the peer gateway; ``namespaces`` the remote globs to search (all when empty)."""

    url: HttpUrl
    namespaces: list[str] = Field(default_factory=list, description="Remote namespace globs.")

    @field_validator("namespaces")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return check_namespace_patterns(value)


def peer_timeout_ms(remaining_s: float) -> int:
    """The peer's ``timeout_ms``: our remaining time less a margin, within the peer's bounds."""
    margin = max(MARGIN_FLOOR_S, remaining_s * MARGIN_SHARE)
    return min(MAX_TIMEOUT_MS, max(MIN_TIMEOUT_MS, int((remaining_s - margin) * 1000)))


def build_request(query: SearchQuery, offset: int = 0, namespaces: Sequence[str] = ()) -> dict[str, Any]:
    """The peer's ``SearchRequest`` for one page of ``query`` from ``offset``."""
    body: dict[str, Any] = {
        "query": literal(query.text, query.mode == "regex"),  # the peer reads the query syntax: none is meant
        "mode": query.mode,
        "case_sensitive": query.case_sensitive,
        "paths": list(query.paths),
        "languages": list(query.languages),
        "context_lines": query.context_lines,
        "files": max(1, min(MAX_PAGE_FILES, query.max_files)),
        "offset": offset,
        "hit_budget": MAX_HIT_BUDGET,
        "char_budget": MAX_CHAR_BUDGET,
        "hit_lines": None,  # every matched line: the page here cuts its own
        "timeout_ms": peer_timeout_ms(query.remaining()),
        "threshold": query.threshold,
        "dedup": False,  # every copy, each with its identity: copies are merged here, with ours
    }
    if namespaces:
        body["namespaces"] = list(namespaces)
    return body


def next_offset(answer: Mapping[str, Any], offset: int) -> int | None:
    """The offset of the peer's next-page action, if it offered one."""
    for action in answer.get("next") or ():
        if not isinstance(action, Mapping) or action.get("tool") != "search":
            continue
        args = action.get("args")
        if not isinstance(args, Mapping):
            continue
        moved = args.get("offset")
        if isinstance(moved, int) and not isinstance(moved, bool) and offset < moved <= MAX_OFFSET:
            return moved
    return None


def _lines(value: Any) -> tuple[str, ...]:
    return tuple(cut_text(str(line)) for line in value or ())


def _line_hit(line: Mapping[str, Any]) -> Hit:
    """One matched line of a peer's declaration hit."""
    number = int(line["line"])
    column = line.get("column")
    context = line.get("context") or {}
    return Hit(
        line=number,
        end_line=number,
        column=int(column) if column is not None else None,
        text=cut_text(str(line.get("text") or ""), column),
        before=_lines(context.get("before")),
        after=_lines(context.get("after")),
    )


def _hit(item: Mapping[str, Any], mode: Mode) -> Hit:
    """A peer's hit as ours; a declaration passes through whole (names, intent, span, lines)."""
    start = int(item["start_line"])
    end = int(item.get("end_line") or start)
    column = item.get("column")
    kind = str(item.get("kind") or "line")
    context = item.get("context") or {}
    score = item.get("score")
    declared = kind not in ("line", "file")
    return Hit(
        line=start,
        end_line=end if end > start else 0,
        column=int(column) if column is not None else None,
        text=cut_text(str(item.get("text") or ""), column),
        kind=kind,
        symbol=str(item.get("qualified_name") or item.get("name") or "") if declared else "",
        name=str(item.get("name") or "") if declared else "",
        intent=str(item.get("intent") or "")[:MAX_INTENT] if declared else "",
        lines=tuple(_line_hit(line) for line in item.get("lines") or ()) if declared else (),
        before=_lines(context.get("before")),
        after=_lines(context.get("after")),
        score=float(score) if mode == "semantic" and score is not None else None,
        reason=str(item.get("reason") or "")[:MAX_INTENT] if declared else "",
        terms=tuple(str(t) for t in item.get("matched_terms") or ()) if declared else (),
    )


def _hits(item: Mapping[str, Any], mode: Mode) -> tuple[Hit, ...]:
    """A peer's hit as ours: the file's own hit as the matched lines it holds (gathered again here,
    with this side's declarations), or as a path match where it holds none; any other whole."""
    if item.get("kind") == "file" and item.get("lines"):
        return tuple(_line_hit(line) for line in item["lines"])
    return (_hit(item, mode),)


def _child(status: Mapping[str, Any]) -> ChildStatus:
    raw = str(status.get("status"))
    state = cast(Status, raw) if raw in _STATUSES else "error"
    return ChildStatus(
        name=str(status["name"]),
        backend=str(status.get("backend") or "unknown"),
        status=state,
        took_ms=int(status.get("took_ms") or 0),
        files=int(status.get("files") or 0),
        hits=int(status.get("hits") or 0),
        error=str(status.get("error") or ("" if state == "ok" else raw)),
    )


def _listed(entry: Any) -> ChildNamespace:
    """One entry of the peer's ``/v1/namespaces`` as a child namespace, as the peer declares it."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ValueError("namespace entry without a name")
    capabilities = entry.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, Mapping) else {}
    modes = capabilities.get("modes")
    return ChildNamespace(
        name=entry["name"],
        backend=str(entry.get("backend") or "unknown"),
        health=str(entry.get("health") or "ok"),
        modes=tuple(str(m) for m in modes) if isinstance(modes, list) else (),
        read=capabilities.get("read") is True,
        list=capabilities.get("list") is True,
        file_paths=str(entry.get("file_paths") or "<path>"),
    )


def parse_page(answer: Any, mode: Mode) -> tuple[list[FileMatch], list[ChildStatus]]:
    """One peer answer as our files (the peer's order, remote namespace as suffix) and child statuses."""
    files: list[FileMatch] = []
    for group in answer["files"]:
        namespace = str(group["namespace"])
        if not namespace:
            raise ValueError("file group without a namespace")
        hits = tuple(hit for item in group["hits"] for hit in _hits(item, mode))
        if hits:
            identity = group.get("identity")
            identity = identity if isinstance(identity, str) and len(identity) <= MAX_IDENTITY else ""
            files.append(FileMatch(path=str(group["file_path"]), hits=hits, namespace=namespace, identity=identity))
    children = [_child(s) for s in answer.get("namespaces") or ()]
    return files, children


class _Gathered:
    """Files and child statuses gathered over the peer's pages."""

    def __init__(self, allowed: Sequence[Sequence[str]], keep: PathFilter) -> None:
        self.keep = keep  # the query's path filters, held here too (the peer applies them already)
        self.files: list[FileMatch] = []
        self.children: dict[str, ChildStatus] = {}
        self.seen: set[tuple[str, str]] = set()
        self.dropped = 0
        self.file_count = 0
        self.allow = [[namespace_matcher(p) for p in group] for group in allowed if group]

    def _allowed(self, namespace: str) -> bool:
        return all(any(match(namespace) for match in group) for group in self.allow)

    def _passes(self, file: FileMatch) -> bool:
        child = self.children.get(file.namespace)
        if child is not None and child.backend in REPOSITORY_KINDS:
            return self.keep.inside_some_repository(file.path)
        return self.keep(file.path)

    def add(self, answer: Mapping[str, Any], mode: Mode) -> None:
        files, children = parse_page(answer, mode)
        self.file_count = max(self.file_count, int(answer.get("file_count") or 0))
        for child in children:
            if not self._allowed(child.name):
                continue
            known = self.children.get(child.name)
            if known is None or (known.status == "ok" and child.status != "ok"):
                self.children[child.name] = child
        for file in files:
            key = (file.namespace, file.path)
            if not self._allowed(file.namespace) or not self._passes(file):
                self.dropped += 1
            elif key not in self.seen:
                self.seen.add(key)
                self.files.append(file)

    def result(self, status: Status = "ok", reason: str = "") -> BackendResult:
        count = None
        if not self.dropped and self.file_count > len(self.files):
            count = self.file_count
        return BackendResult(
            files=tuple(self.files),
            status=status,
            reason=reason,
            file_count=count,
            children=tuple(sorted(self.children.values(), key=lambda c: c.name)),
        )


def _forwarded() -> dict[str, str] | None:
    """The caller this search is for, named to the peer (its own caller there: docs/operations.md)."""
    key = current().key
    return None if key == LOCAL.key else {CLIENT_HEADER: key}


class PeerBackend(AfiFilesBackend[PeerSettings]):
    """Another fedsearch gateway; its namespaces appear as ``<name>/<remote namespace>``."""

    kind = "gateway"
    Settings = PeerSettings
    modes: frozenset[Mode] = frozenset({"exact", "regex", "semantic"})
    #: It serves namespaces of its own, ``<name>/<remote>`` (for the service's routing).
    serves_children = True

    def __init__(self, name: str, settings: PeerSettings) -> None:
        self._unsized = False  # the peer refused the sizing fields (SIZING): sent without them
        super().__init__(name, settings)
        self._children: tuple[ChildNamespace, ...] | None = None

    def remote_patterns(self, query: SearchQuery) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """(globs sent to the peer, groups of globs its answer is held to locally: each must match).

        A query naming sub-namespaces (``sub_namespaces``, filled by the service for
        ``<name>/<remote>`` patterns) asks for those; the configured globs still bound
        what is shown. More than the peer takes in one request: the configured globs
        are sent, and the ones asked hold the answer locally.
        """
        configured = tuple(self.settings.namespaces)
        asked = query.sub_namespaces
        if not asked:
            return configured, ()
        if len(asked) > MAX_PATTERNS:
            return configured, (configured, asked)
        return asked, (configured,)

    def declared_modes(self) -> frozenset[str]:
        """The modes the peer's namespaces declare, once they were listed (until then, all it may pass on)."""
        if not self._children:
            return frozenset(self.modes)
        return frozenset(m for child in self._children for m in child.modes if m in self.modes)

    async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
        """The peer's namespaces (``GET /v1/namespaces``) within the configured globs."""
        reply = await self.fetch(Request(url=self.settings.url + "/v1/namespaces"), deadline)
        async with map_client_errors():
            entries = reply.json()["namespaces"]
            allow = [namespace_matcher(p) for p in self.settings.namespaces]
            found = tuple(
                child
                for child in (_listed(entry) for entry in entries)
                if not allow or any(match(child.name) for match in allow)
            )
        self._children = found
        return found

    async def _page(self, body: dict[str, Any], query: SearchQuery) -> Any:
        if self._unsized:
            body = {k: v for k, v in body.items() if k not in SIZING}
        request = Request(url=self.settings.url + "/v1/search", method="POST", json=body, headers=_forwarded())
        try:
            reply = await self.fetch(request, query.deadline)
        except Rejected as exc:
            if self._unsized or not any(f"{name}:" in exc.reason for name in SIZING):
                raise
            self._unsized = True  # a peer from before answers were sized: it lists every line anyway
            return await self._page(body, query)
        answer = reply.json()
        if not isinstance(answer, Mapping):
            raise BackendError("unexpected response shape: not a JSON object")
        return answer

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """The peer's reason for a 400 problem (``field: detail``), short; an AFI ``Error`` (its
        file routes) as an AFI provider's."""
        if isinstance(error, Mapping) and "code" in error and "message" in error:
            return afi_error(status, error, headers)
        if status != 400:
            return None
        detail, field = error_field(error, "detail"), error_field(error, "field")
        if not detail:
            return Rejected("peer rejected the request (HTTP 400)")
        where = f"{field}: " if field else ""
        return Rejected(f"peer rejected the request: {where}{detail}"[:300])

    async def search(self, query: SearchQuery) -> BackendResult:
        sent, bound = self.remote_patterns(query)
        got = _Gathered(bound, PathFilter.build(query.paths, query.languages))
        offset = 0
        answer = await self._page(build_request(query, offset, sent), query)
        async with map_client_errors():  # an answer of the wrong shape: BackendError
            got.add(answer, query.mode)
        pages = 1
        while (moved := next_offset(answer, offset)) is not None:
            if len(got.files) >= query.max_files or query.remaining() < MIN_PAGE_S or pages >= MAX_PAGES:
                total = max(got.file_count, len(got.files))
                return got.result("capped", f"fetched {len(got.files)} of {total} files the peer matched")
            offset, pages = moved, pages + 1
            try:
                answer = await self._page(build_request(query, offset, sent), query)
                async with map_client_errors():
                    got.add(answer, query.mode)
            except BackendTimeout:
                return got.result("timeout", f"the peer's page at offset {offset} timed out")
            except BackendError as exc:
                return got.result("capped", f"the peer's page at offset {offset} failed: {exc.reason}")
        return got.result()
