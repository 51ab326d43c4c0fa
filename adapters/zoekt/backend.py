"""Zoekt: ``POST /api/search`` on zoekt-webserver (started with ``-rpc``).

Asking: the query becomes one zoekt query string — ``repo:<repos>``, ``case:yes|no``,
``file:`` / ``-file:`` regexes for the path and language globs, then the pattern.
Zoekt reads a bare term as a regular expression, so exact mode escapes it as Go's
``regexp.QuoteMeta`` does; a term with spaces, quotes, parentheses or a colon is
double-quoted (zoekt unescapes ``\\x`` to ``x`` inside quotes, so backslashes are
doubled there). Options ask for ``query.max_files`` files, context lines, and a
``MaxWallTime`` just inside the remaining deadline.

Reading: line mode. ``Line`` is base64 bytes with its newline, ``LineNumber`` is
1-based, fragment offsets are bytes and become character columns; ``Before`` and
``After`` are base64 runs of context lines. A file's path is ``<repository>/<path>``
(``github.com/acme/widget-service/src/app.py``), so the same path in two
repositories stays two files; path globs apply to the path inside the repository.
Files come in zoekt's rank order (by ``Score``); a file matched only by its name
gets one ``kind="file"`` hit. Chunk-mode answers (``ChunkMatches``) are read too.

Files: a file is read with a search for exactly it (:mod:`adapters.zoekt.files`).

Capped when ``FilesSkipped``, ``ShardsSkipped`` or ``Crashes`` are non-zero, or
when zoekt found more files (``FileCount``) or matches (``MatchCount``) than it sent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Self

import msgspec
from pydantic import Field, model_validator

from adapters._coalesce import Call, Seat, share
from adapters._http import HttpBackend, HttpSettings, HttpUrl, RepoRegex, Request, Unreachable, error_field
from adapters._text import go_quote_meta, path_regexes
from adapters.zoekt.files import build_read, found, identity_of
from adapters.zoekt.read import DECODER, RepoRouter, has_symbols, parse_response, parse_shared
from gateway.errors import BackendCapped, BackendError, NotFound, Rejected
from gateway.files import MAX_READ_BYTES, clean_path, too_large
from gateway.models import BackendResult, RemoteFile, SearchQuery
from gateway.query.globs import PathFilter

__all__ = ["MAX_MEMBERS", "ZoektBackend", "ZoektSettings", "build_request", "parse_response", "zoekt_quote"]

#: Matches asked for per file of the page, and at least this many in all.
MATCHES_PER_FILE = 10
MIN_MATCHES = 500
#: Share of the remaining deadline zoekt may spend searching (the rest is transfer).
WALL_SHARE = 0.9
#: Namespaces in one shared request at most (the answer holds a page of files for each).
MAX_MEMBERS = 64
#: A read's answer carries the file in base64 (a third more) beside a little JSON.
READ_BODY_BYTES = MAX_READ_BYTES * 4 // 3 + (1 << 16)
_QUOTE_TRIGGERS = frozenset(' \t\r\n"():')


class ZoektSettings(HttpSettings):
    """``urls`` are replicas of one index; ``repos`` a regex on repository names.

    :meth:`ZoektBackend.search` asks the first replica; the resilience layer
    (:mod:`gateway.resilience.wrapper`) spreads requests over all of them, fails over and
    hedges through :meth:`ZoektBackend.search_replica`.
    """

    urls: list[HttpUrl] = Field(default_factory=list, description="zoekt-webserver replicas.")
    repos: RepoRegex = Field(default="", description="Regex on repository names (zoekt `repo:`).")
    coalesce: bool = Field(
        default=True,
        description="Share one request with the other namespaces asking the same server the same thing.",
    )

    @model_validator(mode="after")
    def _has_an_endpoint(self) -> Self:
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {self.url!r}")
        if not self.endpoints:
            raise ValueError("set `urls` (or `url`)")
        return self

    @property
    def endpoints(self) -> list[str]:
        return list(self.urls) or ([self.url.rstrip("/")] if self.url else [])


def zoekt_quote(value: str) -> str:
    """One zoekt query token: bare when that parses back unchanged, else double-quoted."""
    if value and value != "or" and not value.startswith("-") and not _QUOTE_TRIGGERS & set(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def repo_union(repos: Sequence[str]) -> str:
    """One ``repo:`` regex for several namespaces: empty (every repository) if one of them has none."""
    return "" if not all(repos) else "|".join(dict.fromkeys(f"(?:{r})" for r in repos))


def build_query(query: SearchQuery, repos: str = "") -> str:
    """The zoekt query string for ``query``."""
    parts: list[str] = []
    if repos:
        parts.append("repo:" + zoekt_quote(repos))
    parts.append("case:yes" if query.case_sensitive else "case:no")
    paths = path_regexes(query)
    parts.extend("file:" + zoekt_quote(r) for r in (paths.include, paths.language) if r)
    if paths.exclude:
        parts.append("-file:" + zoekt_quote(paths.exclude))
    pattern = go_quote_meta(query.text) if query.mode == "exact" else query.text
    parts.append(zoekt_quote(pattern))
    return " ".join(parts)


def build_request(query: SearchQuery, repos: str = "", members: int = 1) -> dict[str, Any]:
    """The JSON body of ``POST /api/search`` (for ``members`` namespaces: a page of files each)."""
    files = max(1, query.max_files) * members
    wall_ns = int(max(0.001, query.remaining() * WALL_SHARE) * 1e9)
    return {
        "Q": build_query(query, repos),
        "RepoIDs": None,
        "Opts": {
            "NumContextLines": query.context_lines,
            "MaxDocDisplayCount": files,
            "MaxMatchDisplayCount": max(MIN_MATCHES, MATCHES_PER_FILE * files),
            "MaxWallTime": wall_ns,
            "ChunkMatches": False,
        },
    }


class ZoektBackend(HttpBackend[ZoektSettings]):
    """A zoekt-webserver (its JSON API). Namespaces that ask one server the same thing at once
    share ONE request whose ``repo:`` filter is the union of theirs (:mod:`adapters._coalesce`);
    its answer is read once and each file handed to the namespaces whose ``repos`` matches
    its repository (an RE2 set). Zoekt ranks the shared answer as one: when it says the
    answer is capped, every member is told."""

    kind = "zoekt"
    Settings = ZoektSettings
    repository_paths = True
    reads = True

    def __init__(self, name: str, settings: ZoektSettings) -> None:
        super().__init__(name, settings)
        self.shares_calls = settings.coalesce

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """A file by a search for exactly it; a file read before is checked by its checksum first."""
        path = clean_path(path)
        if "/" not in path:
            raise NotFound("no such file")
        cached = self.read_cache.get(path)
        if cached is not None:
            file, _ = await self._ask_file(path, False, deadline)
            if file is not None and identity_of(file) == cached.identity:
                return self.read_cache.served(cached)
        file, content = await self._ask_file(path, True, deadline)
        if file is None or content is None:
            self.read_cache.drop(path)
            raise NotFound("no such file")
        got = RemoteFile(content, identity_of(file))
        self.read_cache.put(path, got)
        return got

    async def _ask_file(self, path: str, whole: bool, deadline: float) -> tuple[Any, bytes | None]:
        """The read's answer from the first replica that gives one."""
        wall_ns = int(max(0.001, (deadline - time.monotonic()) * WALL_SHARE) * 1e9)
        body = build_read(path, self.settings.repos, whole, wall_ns)
        endpoints = self.settings.endpoints
        for i, endpoint in enumerate(endpoints):
            request = Request(
                url=endpoint + "/api/search",
                method="POST",
                json=body,
                max_bytes=min(self.settings.max_bytes, READ_BODY_BYTES),
            )
            try:
                reply = await self.fetch(request, deadline)
            except BackendCapped:
                raise too_large() from None
            except Unreachable:
                if i + 1 == len(endpoints):
                    raise
                continue
            try:
                return found(reply.body, path)
            except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as exc:
                raise BackendError("unexpected response shape: not a zoekt search result") from exc
        raise NotFound("no such file")  # pragma: no cover - there is always an endpoint

    def replicas(self) -> int:
        return len(self.settings.endpoints)

    async def search(self, query: SearchQuery) -> BackendResult:
        return await self.search_replica(query, 0)

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        """Search on replica ``replica`` (an index into ``urls``), with the namespaces asking it too."""
        settings = self.settings
        if not settings.coalesce:
            return (await self.search_for(query, replica, [settings.repos]))[0]
        # Members share a request only when it would be the same request alone.
        key = (settings.endpoints[replica], query, settings.token_env, settings.max_bytes)

        async def send(seats: Sequence[Seat[str]]) -> None:
            results = await self.search_for(query, replica, [seat.value for seat in seats])
            for seat, result in zip(seats, results, strict=True):
                seat.answer(result)

        return await share(Call(key, send, query.deadline, max_members=MAX_MEMBERS), settings.repos)

    async def search_for(self, query: SearchQuery, replica: int, repos: list[str]) -> list[BackendResult]:
        """One request to replica ``replica`` for namespaces with these ``repos`` regexes; a result each."""
        keep = PathFilter.build(query.paths, query.languages)
        body = build_request(query, repos[0] if len(repos) == 1 else repo_union(repos), len(repos))
        url = self.settings.endpoints[replica] + "/api/search"
        reply = await self.fetch(Request(url=url, method="POST", json=body), query.deadline)
        try:
            data = DECODER.decode(reply.body)
        except msgspec.ValidationError as exc:
            raise BackendError(f"unexpected response shape: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise BackendError("invalid JSON in response") from exc
        symbols = has_symbols(reply.body)
        if len(repos) == 1:
            return [parse_response(data, query, keep, symbols)]
        return parse_shared(data, query, keep, RepoRouter(repos), len(repos), symbols)

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """zoekt's reason for a 400 (``{"Error": "..."}``), short."""
        if status != 400:
            return None
        message = error_field(error, "Error")
        return Rejected(f"zoekt rejected the query: {message[:200]}" if message else "HTTP 400")
