"""An AFI provider (Agent Filesystem Interface v0.1, HTTP binding): ``POST <url>/afi/search``.

Discovery: ``GET <url>/.afi/manifest.json`` is read before the first search and kept
for the backend's life; a failed search drops it, so the next one reads it again.
Only modes the manifest declares in ``search.modes`` are asked for; the rest are
``Unsupported``.

Asking: AFI exact search is case-sensitive, so a case-insensitive exact query is
sent as an escaped regex with flag ``i`` (when the provider declares ``regex``).
Regex mode sends ``{"regex", "flags"}`` (AFI regexes are ECMAScript; RE2's common
syntax reads the same), semantic mode ``{"semantic", "threshold"}``. The scope is
``"/"``, or the literal directory of a single include glob; path and language
filters are applied here, since AFI search has only a path prefix.

Paging: ``next_cursor`` is followed while the deadline allows, until ``max_files``
files are complete (a file is complete once a later file's match has arrived) or a
match cap is reached; a cursor left then makes the result ``capped``, and the last,
possibly incomplete, file is dropped unless it is the only one.

Reading: matches are grouped by ``path`` in first-seen order (the provider's
virtual path without its leading ``/``); several matches on one line are one hit,
at the first column. AFI ``Error`` objects map to our errors: ``rate_limited``/429
-> RateLimited (``retry_after``), ``unauthorized`` -> BackendError("unauthorized"),
``unsupported`` -> Unsupported, anything else -> BackendError.

Files: ``stat``, ``list`` and ``read`` go to the provider's own (:mod:`adapters._afi_files`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapters._afi_files import AfiFilesBackend, afi_error
from adapters._http import HttpSettings, HttpUrl, Request, map_client_errors
from gateway.errors import BackendError, BackendTimeout, RateLimited, Unsupported
from gateway.models import BackendResult, FileMatch, Hit, Mode, SearchQuery, Status, cut_text
from gateway.query.globs import PathFilter

__all__ = ["AfiBackend", "AfiSettings", "Manifest", "afi_error", "afi_query", "ecma_escape", "scope_of"]

MANIFEST_PATH = "/.afi/manifest.json"
SEARCH_PATH = "/afi/search"
#: Matches asked per page: this many per wanted file, within these bounds and the manifest's max.
MATCHES_PER_FILE = 10
MIN_LIMIT = 100
MAX_LIMIT = 1000
#: Stop following cursors after this many matches (per wanted file, at least the floor).
HIT_CAP_PER_FILE = 50
HIT_CAP_FLOOR = 2000
#: Another page is asked only with this much time left.
MIN_PAGE_S = 0.05
_ECMA_SYNTAX = frozenset("^$\\.*+?()[]{}|/")
_GLOB_META = frozenset("*?[]{}\\")


class AfiSettings(HttpSettings):
    """``url``: the provider's base URL (``/.afi/manifest.json`` lives under it)."""

    url: HttpUrl


@dataclass(frozen=True, slots=True)
class Manifest:
    """What the provider declared: its search modes and the most matches per page."""

    modes: frozenset[str]
    max_results: int | None = None

    @classmethod
    def parse(cls, data: Any) -> Manifest:
        if not isinstance(data, Mapping):
            raise BackendError("AFI manifest is not a JSON object")
        capabilities = data.get("capabilities")
        search = data.get("search")
        if (isinstance(capabilities, list) and "search" not in capabilities) or not isinstance(search, Mapping):
            raise Unsupported("the AFI provider does not offer search")
        modes = search.get("modes")
        if not isinstance(modes, list) or not modes:
            raise Unsupported("the AFI provider declares no search modes")
        most = search.get("max_results")
        valid = isinstance(most, int) and not isinstance(most, bool) and most > 0
        return cls(frozenset(str(m) for m in modes), most if valid else None)


def ecma_escape(text: str) -> str:
    """``text`` as an ECMAScript (and RE2) regex matching itself: syntax characters escaped."""
    return "".join("\\" + c if c in _ECMA_SYNTAX else c for c in text)


def _regex(pattern: str, case_sensitive: bool) -> dict[str, Any]:
    return {"regex": pattern} if case_sensitive else {"regex": pattern, "flags": "i"}


def afi_query(query: SearchQuery, manifest: Manifest) -> str | dict[str, Any]:
    """The AFI ``SearchQuery`` for ``query``, or Unsupported if the provider cannot do it."""
    modes = manifest.modes
    if query.mode == "exact":
        if query.case_sensitive and "exact" in modes:
            return query.text
        if "regex" in modes:
            return _regex(ecma_escape(query.text), query.case_sensitive)
        why = "exact" if query.case_sensitive else "case-insensitive (it has no regex mode)"
        raise Unsupported(f"the AFI provider cannot search {why}")
    if query.mode not in modes:
        raise Unsupported(f"the AFI provider cannot search in {query.mode} mode")
    if query.mode == "regex":
        return _regex(query.text, query.case_sensitive)
    return {"semantic": query.text, "threshold": query.threshold}


def scope_of(paths: Sequence[str]) -> str:
    """The AFI search path: the literal directory of a single include glob, else ``/``."""
    includes = [g for g in paths if not g.startswith("!")]
    if len(includes) != 1:
        return "/"
    parts = includes[0].strip("/").split("/")
    if len(parts) < 2 or includes[0].startswith("**"):
        return "/"
    literal: list[str] = []
    for part in parts[:-1]:
        if _GLOB_META & set(part) or part in ("", ".", ".."):
            break
        literal.append(part)
    return "/" + "/".join(literal) if literal else "/"


class _Collected:
    """Matches grouped by file in first-seen order, one hit per line (first column wins)."""

    def __init__(self, keep: Callable[[str], bool], semantic: bool, context: int) -> None:
        self.keep = keep
        self.semantic = semantic
        self.context = context
        self.files: dict[str, dict[int, Hit]] = {}
        self.matches = 0
        self.last = ""
        self.incomplete: dict[str, str] = {}

    def add(self, match: Mapping[str, Any]) -> None:
        self.matches += 1
        path = str(match["path"]).lstrip("/")
        line = int(match["line"])
        if not path or line < 1:
            raise ValueError("match without a path or line")
        self.last = path
        if not self.keep(path):
            return
        column = match.get("column")
        col = int(column) if column is not None else None
        hits = self.files.setdefault(path, {})
        old = hits.get(line)
        if old is not None and (col is None or (old.column is not None and old.column <= col)):
            return
        context = match.get("context") or {}
        n = self.context
        before = [cut_text(str(s)) for s in context.get("before") or ()]
        after = [cut_text(str(s)) for s in context.get("after") or ()]
        score = match.get("score")
        hits[line] = Hit(
            line=line,
            text=cut_text(str(match.get("text") or ""), col),
            column=col,
            before=tuple(before[-n:]) if n else (),
            after=tuple(after[:n]) if n else (),
            score=float(score) if self.semantic and score is not None else None,
        )

    def complete(self) -> int:
        """Files no later match can add to (all but the one seen last)."""
        return len(self.files) - (self.last in self.files)

    def note_incomplete(self, value: Any) -> None:
        """Keep a fedsearch provider's ``x-incomplete``: its namespaces that did not answer fully."""
        for item in value if isinstance(value, list) else ():
            if isinstance(item, Mapping) and item.get("name"):
                self.incomplete[str(item["name"])] = str(item.get("status") or "error")

    def result(self, status: Status = "ok", reason: str = "") -> BackendResult:
        """The files gathered; with a cursor left (status not ok) the last file may be partial."""
        paths = list(self.files)
        if status != "ok" and len(paths) > 1 and paths[-1] == self.last:
            paths = paths[:-1]  # the last file may have more hits on the next page
        files = tuple(FileMatch(path=p, hits=tuple(self.files[p][n] for n in sorted(self.files[p]))) for p in paths)
        if self.incomplete:
            failed = ", ".join(f"{name} ({state})" for name, state in sorted(self.incomplete.items())[:5])
            more = f" and {len(self.incomplete) - 5} more" if len(self.incomplete) > 5 else ""
            said = f"the provider's namespaces did not all answer: {failed}{more}"
            status, reason = ("capped" if status == "ok" else status), "; ".join(filter(None, [reason, said]))
        count = len(self.files) if len(self.files) > len(files) else None
        return BackendResult(files=files, status=status, reason=reason, file_count=count)


class AfiBackend(AfiFilesBackend[AfiSettings]):
    """A provider of the Agent Filesystem Interface, searched over its HTTP binding."""

    kind = "afi"
    Settings = AfiSettings
    modes: frozenset[Mode] = frozenset({"exact", "regex", "semantic"})

    def __init__(self, name: str, settings: AfiSettings) -> None:
        super().__init__(name, settings)
        self._manifest: Manifest | None = None
        self._manifest_lock = asyncio.Lock()

    async def manifest(self, query: SearchQuery) -> Manifest:
        """The provider's manifest, read once and kept until a search fails."""
        async with self._manifest_lock:
            if self._manifest is None:
                reply = await self.fetch(Request(url=self.settings.url + MANIFEST_PATH), query.deadline)
                self._manifest = Manifest.parse(reply.json())
            return self._manifest

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        return afi_error(status, error, headers)

    def declared_modes(self) -> frozenset[str]:
        """The modes the provider's manifest declares, once it was read (until then, all it may do)."""
        manifest = self._manifest
        return frozenset(self.modes) if manifest is None else frozenset(m for m in manifest.modes if m in self.modes)

    async def _page(self, body: dict[str, Any], query: SearchQuery) -> Mapping[str, Any]:
        request = Request(url=self.settings.url + SEARCH_PATH, method="POST", json=body)
        page = (await self.fetch(request, query.deadline)).json()
        if not isinstance(page, Mapping) or not isinstance(page.get("matches"), list):
            raise BackendError("unexpected response shape: no matches list")
        return page

    async def search(self, query: SearchQuery) -> BackendResult:
        manifest = await self.manifest(query)
        wanted = max(1, query.max_files)
        limit = min(MAX_LIMIT, max(MIN_LIMIT, MATCHES_PER_FILE * wanted))
        if manifest.max_results is not None:
            limit = min(limit, manifest.max_results)
        body: dict[str, Any] = {"query": afi_query(query, manifest), "path": scope_of(query.paths), "limit": limit}
        try:
            return await self._collect(body, query)
        except RateLimited:
            raise
        except BackendError:
            self._manifest = None  # read it again next time: the provider may have changed
            raise

    async def _collect(self, body: dict[str, Any], query: SearchQuery) -> BackendResult:
        """Follow ``next_cursor`` within the deadline and the match budget."""
        wanted = max(1, query.max_files)
        cap = max(HIT_CAP_FLOOR, HIT_CAP_PER_FILE * wanted)
        got = _Collected(PathFilter.build(query.paths, query.languages), query.mode == "semantic", query.context_lines)
        first = True
        while True:
            try:
                page = await self._page(body, query)
                async with map_client_errors():
                    for match in page["matches"]:
                        got.add(match)
                    got.note_incomplete(page.get("x-incomplete"))
            except BackendTimeout:
                if first:
                    raise
                return got.result("timeout", "the AFI provider's next page timed out")
            except BackendError as exc:
                if first:
                    raise
                return got.result("capped", f"the AFI provider's next page failed: {exc.reason}")
            first = False
            cursor = page.get("next_cursor")
            if not cursor:
                return got.result()
            if not isinstance(cursor, str):
                raise BackendError("unexpected response shape: next_cursor is not a string")
            if got.complete() >= wanted or got.matches >= cap or query.remaining() < MIN_PAGE_S:
                why = f"stopped after {got.matches} matches in {len(got.files)} files; the AFI provider has more"
                return got.result("capped", why)
            body["cursor"] = cursor
