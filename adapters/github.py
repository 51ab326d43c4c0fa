"""The ``github`` backend: GitHub REST code search (``GET /search/code``).

Asking. Exact mode only (REST code search has no regex and no semantic mode). The term
goes bare when it is one plain word (so ``register_widget`` is sent as is), else quoted
``"..."`` with ``\\`` and ``"`` escaped; then the namespace's ``scope`` qualifiers
(``org:acme``, ``repo:a/b``); then ``language:`` for a single language and
``extension:``/``path:`` for a single include glob GitHub can express (see
:func:`glob_qualifier`). GitHub is case-insensitive and ignores punctuation, so every
file is verified locally, and :class:`gateway.query.globs.PathFilter` always runs last.

Reading. GitHub gives no line numbers, only ``text_matches`` fragments. For the files
of the page (``query.max_files`` at most) the raw content is fetched from the same
host (``/repos/{full_name}/contents/{path}?ref=``), concurrently but bounded, before
the deadline, stopping when the core rate limit runs out; the term is then found again
in each line (one hit per matching line, 1-based, columns in characters). A file whose
content cannot be had in time gets one path-level hit (``kind="file"``, line 1, the
matching fragment line or the path as text). File paths are
``"<repository.full_name>/<path>"``.

Files. A file ``<owner>/<name>/<path>`` is read from the contents API with the raw
media type (``GET /repos/{owner}/{name}/contents/{path}``), at the commit the search
that found it saw (its item's ``ref``) when that is known, else the default branch.
What was fetched to locate lines is kept too (by ``ETag``), so reading a file a search
just showed is a conditional request GitHub answers ``304`` without counting it
against the rate limit.

Capped. ``incomplete_results``, the 1000-result ceiling, and a ``total_count`` above
what was fetched make the result ``capped``.

The text helpers live in :mod:`adapters._text`, shared with the ``gitlab`` adapter.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import orjson
import yarl
from pydantic import Field, field_validator

from adapters._http import (
    HttpBackend,
    HttpSettings,
    HttpUrl,
    Paging,
    Request,
    error_message,
    http_error,
    retry_after,
)
from adapters._text import (
    Matcher,
    glob_qualifier,
    line_hits,
    literal_matcher,
    quote_term,
    seconds_left,
    split_lines,
)
from gateway.dedup.identity import git_identity
from gateway.errors import BackendError, NotFound, RateLimited, Rejected
from gateway.files import clean_path
from gateway.models import BackendResult, FileMatch, Hit, Mode, RemoteFile, SearchQuery, cut_text
from gateway.query.globs import PathFilter
from gateway.resilience.policy import UNHEDGED

__all__ = ["GitHubBackend", "GitHubSettings", "build_q"]

DEFAULT_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
TEXT_MATCH_JSON = "application/vnd.github.text-match+json"
RAW_JSON = "application/vnd.github.raw+json"
MAX_PER_PAGE = 100
RESULT_CEILING = 1000
RAW_MAX_BYTES = 1 << 20
#: GitHub's advice for a secondary rate limit that names no wait.
SECONDARY_WAIT = 60.0
#: The commits searches saw, remembered for this many files (a read asks for that commit).
KNOWN_REFS = 4096

_SCOPE = re.compile(r"(?:org|user):[A-Za-z0-9][A-Za-z0-9-]*|repo:[A-Za-z0-9._-]+/[A-Za-z0-9._-]+")
_FULL_NAME = re.compile(r"[A-Za-z0-9._-]+/[A-Za-z0-9._-]+")

# ---------------------------------------------------------------------------- GitHub


class GitHubSettings(HttpSettings):
    """A GitHub (or GitHub Enterprise ``https://host/api/v3``) code search namespace."""

    url: HttpUrl = Field(default=DEFAULT_URL, description="The REST API base URL.")
    scope: str = Field(default="", description="Qualifiers bounding the search: 'org:acme', 'repo:a/b', 'user:x'.")
    max_pages: int = Field(default=3, ge=1, le=10, description="Search pages asked at most per query.")
    raw_concurrency: int = Field(default=8, ge=1, le=32, description="Raw file fetches in flight.")
    fetch_lines: bool = Field(default=True, description="Fetch raw files to locate lines.")

    @field_validator("scope")
    @classmethod
    def _qualifiers(cls, value: str) -> str:
        for token in value.split():
            if not _SCOPE.fullmatch(token):
                raise ValueError(f"{token!r} is not org:NAME, user:NAME or repo:OWNER/NAME")
        return " ".join(value.split())


def build_q(query: SearchQuery, scope: str = "") -> str:
    """The ``q`` parameter: the term, the scope, then what GitHub can filter on."""
    parts = [quote_term(query.text)]
    if scope:
        parts.append(scope)
    if len(query.languages) == 1:
        parts.append(f"language:{query.languages[0]}")
    includes = [g for g in query.paths if not g.startswith("!")]
    if len(includes) == 1:
        qualifier = glob_qualifier(includes[0])
        if qualifier:
            parts.append(f"{qualifier[0]}:{qualifier[1]}")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class _Item:
    repo: str
    path: str
    ref: str
    fragments: tuple[str, ...]
    identity: str = ""  # the blob's sha, as git:<sha>

    @property
    def display(self) -> str:
        return f"{self.repo}/{self.path}"


def _parse_item(raw: Any) -> _Item:
    if not isinstance(raw, dict):
        raise BackendError("unexpected response shape: item is not an object")
    path, repo = raw.get("path"), raw.get("repository")
    name = repo.get("full_name") if isinstance(repo, dict) else None
    if not isinstance(path, str) or not path or not isinstance(name, str) or not _FULL_NAME.fullmatch(name):
        raise BackendError("unexpected response shape: item without path or repository")
    url = raw.get("url")
    ref = parse_qs(urlsplit(url).query).get("ref", [""])[0] if isinstance(url, str) else ""
    fragments = tuple(
        m["fragment"]
        for m in raw.get("text_matches") or ()
        if isinstance(m, dict) and m.get("property", "content") == "content" and isinstance(m.get("fragment"), str)
    )
    return _Item(repo=name, path=path.lstrip("/"), ref=ref, fragments=fragments, identity=git_identity(raw.get("sha")))


def _fallback_hit(item: _Item, find: Matcher, case_sensitive: bool) -> Hit | None:
    """A path-level hit from the fragments, or ``None`` if they show the match cannot be there."""
    for fragment in item.fragments:
        for line in split_lines(fragment):
            col = find(line)
            if col is not None:
                return Hit(line=1, kind="file", text=cut_text(line, col + 1))
    if find(item.path) is not None:
        return Hit(line=1, kind="file", text=cut_text(item.display))
    if case_sensitive:
        return None  # GitHub matched without regard to case; nothing shown matches with it
    first = next((ln for f in item.fragments for ln in split_lines(f) if ln.strip()), item.display)
    return Hit(line=1, kind="file", text=cut_text(first))


@dataclass(slots=True)
class _Pages(Paging):
    """What the search pages gave: candidate items in GitHub's order, and how complete they are."""

    items: list[_Item] = field(default_factory=list)
    fetched: int = 0
    total: int = 0
    ceiling: bool = False  # a later page was refused: past the 1000-result ceiling

    def result(self, files: list[FileMatch], max_files: int) -> BackendResult:
        reasons = list(self.reasons)
        if self.ceiling or self.total > RESULT_CEILING:
            reasons.append(f"GitHub serves only the first {RESULT_CEILING} of {self.total} results")
        elif self.total > self.fetched or len(self.items) > max_files:
            reasons.append(f"{self.total} results, {self.fetched} fetched")
        if not reasons:
            return BackendResult(files=files)
        # total_count counts files; once some were dropped locally it no longer bounds the answer
        known = max(self.total, len(files)) if self.fetched == len(files) else len(files)
        return self.partial(files, reasons, known)


class GitHubBackend(HttpBackend[GitHubSettings]):
    """GitHub REST code search; see the module docstring for what it asks and reads."""

    kind = "github"
    Settings = GitHubSettings
    modes: frozenset[Mode] = frozenset({"exact"})
    policy = UNHEDGED  # a rate-limited API (code search: 10 requests a minute)
    repository_paths = True
    reads = True

    def __init__(self, name: str, settings: GitHubSettings) -> None:
        super().__init__(name, settings)
        self._refs: OrderedDict[str, str] = OrderedDict()

    def _saw(self, item: _Item) -> None:
        if item.ref:
            self._refs[item.display] = item.ref
            self._refs.move_to_end(item.display)
            if len(self._refs) > KNOWN_REFS:
                self._refs.popitem(last=False)

    def _contents(self, repo: str, path: str, ref: str, max_bytes: int | None = None) -> Request:
        url = yarl.URL(
            f"{self.settings.url}/repos/{quote(repo, safe='/')}/contents/{quote(path, safe='/')}", encoded=True
        )
        return Request(
            url=url, params={"ref": ref} if ref else None, headers={"Accept": RAW_JSON}, accept=(), max_bytes=max_bytes
        )

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """``<owner>/<name>/<path>`` through the contents API (raw media type), conditionally."""
        owner, _, rest = clean_path(path).partition("/")
        name, _, inner = rest.partition("/")
        repo = f"{owner}/{name}"
        if not inner or not _FULL_NAME.fullmatch(repo):
            raise NotFound("no such file")
        display = f"{repo}/{inner}"
        request = self._contents(repo, inner, self._refs.get(display, ""))
        return await self.read_through(display, request, deadline)

    def headers(self) -> dict[str, str]:
        return super().headers() | {"X-GitHub-Api-Version": API_VERSION}

    async def search(self, query: SearchQuery) -> BackendResult:
        pages = await self._pages(query)
        files = await self._locate(pages.items[: query.max_files], query)
        return pages.result(files, query.max_files)

    async def _pages(self, query: SearchQuery) -> _Pages:
        """Search pages until the request has its files, the results end, or time or pages run out."""
        keep = PathFilter.build(query.paths, query.languages)
        per_page = max(1, min(MAX_PER_PAGE, query.max_files))
        params: dict[str, str | int] = {"q": build_q(query, self.settings.scope), "per_page": per_page}
        pages, seen, more = _Pages(), set[str](), True
        while more and len(pages.items) < query.max_files:
            if pages.page and not pages.go_on(query, self.settings.max_pages):
                break
            got = await pages.next(query, lambda page, until: self._page(params | {"page": page}, until))
            if got is None:
                break
            body, more = got
            if body is None:
                pages.ceiling = True
                break
            pages.total = max(pages.total, body["total_count"])
            if body["incomplete_results"]:
                pages.reasons.append("GitHub search timed out (incomplete_results)")
            for raw in body["items"]:
                pages.fetched += 1
                item = _parse_item(raw)
                self._saw(item)
                if item.display not in seen and keep(item.path):
                    seen.add(item.display)
                    pages.items.append(item)
            more = more and bool(body["items"]) and pages.fetched < min(pages.total, RESULT_CEILING)
        return pages

    async def _page(self, params: dict[str, str | int], until: float) -> tuple[Any | None, bool]:
        """One search page: the checked body (``None`` past the ceiling) and whether a next exists."""
        request = Request(url=f"{self.settings.url}/search/code", params=params, headers={"Accept": TEXT_MATCH_JSON})
        try:
            reply = await self.fetch(request, until)
        except _PastCeiling:
            if int(params["page"]) > 1:
                return None, False
            raise
        body = reply.json()
        has_next = "next" in reply.links if reply.links is not None else True
        if not (
            isinstance(body, dict)
            and isinstance(body.get("total_count"), int)
            and isinstance(body.get("incomplete_results"), bool)
            and isinstance(body.get("items"), list)
        ):
            raise BackendError("unexpected response shape: not a code search result")
        return body, has_next

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """Rate limits (primary and secondary) and 4xx, with GitHub's message."""
        if status >= 500:
            return None
        message = error_message(error)
        limited = (
            status == 429
            or headers.get("x-ratelimit-remaining") == "0"
            or "Retry-After" in headers
            or "rate limit" in message.lower()
        )
        if status in (403, 429) and limited:
            wait = retry_after(headers)
            if wait is None and "secondary rate limit" in message.lower():
                wait = SECONDARY_WAIT
            return RateLimited(f"HTTP {status}: rate limited", retry_after=wait)
        if status in (401, 403):
            return Rejected(f"HTTP {status}: not authorised")
        reason = f"HTTP {status}: {message}" if message else f"HTTP {status}"
        return _PastCeiling(reason) if status == 422 else http_error(status, reason)

    async def _locate(self, items: list[_Item], query: SearchQuery) -> list[FileMatch]:
        """Hits for each item: lines from the raw content, else one path-level hit."""
        find = literal_matcher(query.text, query.case_sensitive)
        contents: list[str | None] = [None] * len(items)
        phase = seconds_left(query)
        if self.settings.fetch_lines and items and phase > 0:
            contents = await self._fetch_all(items, time.monotonic() + phase)
        files: list[FileMatch] = []
        for item, content in zip(items, contents, strict=True):
            if content is None:
                hit = _fallback_hit(item, find, query.case_sensitive)
                hits = [hit] if hit else []
            else:
                hits = line_hits(split_lines(content), find, 1, query.context_lines)
                if not hits and find(item.path) is not None:
                    hits = [Hit(line=1, kind="file", text=cut_text(item.display))]
            if hits:
                files.append(
                    FileMatch(path=item.display, hits=tuple(hits), repository=item.repo, identity=item.identity)
                )
        return files

    async def _fetch_all(self, items: list[_Item], deadline: float) -> list[str | None]:
        """Raw contents fetched concurrently (bounded) until ``deadline``; ``None`` where missing."""
        gate = asyncio.Semaphore(self.settings.raw_concurrency)
        stop = asyncio.Event()  # set when the rate limit runs out: the rest fall back

        async def one(item: _Item) -> str | None:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())), gate:
                    if stop.is_set():
                        return None
                    return await self._raw(item, deadline, stop)
            except RateLimited:
                stop.set()
            except (BackendError, TimeoutError):
                pass
            return None

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(item)) for item in items]
        return [task.result() for task in tasks]

    async def _raw(self, item: _Item, deadline: float, stop: asyncio.Event) -> str | None:
        segments = item.path.split("/")
        if any(s in ("", ".", "..") for s in segments):
            return None
        request = self._contents(item.repo, item.path, item.ref, min(self.settings.max_bytes, RAW_MAX_BYTES))
        reply = await self.fetch(request, deadline)
        if reply.headers.get("x-ratelimit-remaining") == "0":
            stop.set()
        body, content_type = reply.body, reply.headers.get("Content-Type", "")
        if content_type.startswith("text/html"):
            return None  # a login wall or a proxy page, not the file
        if not content_type.startswith("application/json"):  # the raw file: a later read of it is a 304
            self.read_cache.put(item.display, RemoteFile(body, reply.headers.get("ETag", "")))
        else:  # the contents object, when the raw media type was not honoured
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError:
                return None
            if not isinstance(data, dict) or data.get("encoding") != "base64":
                return None
            try:
                body = base64.b64decode(str(data.get("content", "")))
            except (binascii.Error, ValueError):
                return None
        return body.decode("utf-8", errors="replace")


class _PastCeiling(Rejected):
    """GitHub refused a search page (422): past page 1, the 1000-result ceiling."""
