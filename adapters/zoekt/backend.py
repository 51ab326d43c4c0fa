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

Capped when ``FilesSkipped``, ``ShardsSkipped`` or ``Crashes`` are non-zero, or
when zoekt found more files (``FileCount``) or matches (``MatchCount``) than it sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self

import aiohttp
import msgspec
import orjson
from pydantic import Field, model_validator

from adapters._http import HttpBackend, HttpSettings, RepoRegex, map_client_errors, read_body, token_from_env
from adapters.zoekt.batch import Coalescer, RepoRouter
from adapters.zoekt.read import DECODER, parse_response, parse_shared
from gateway.errors import BackendError, Rejected, Unsupported
from gateway.globs import PathFilter, glob_to_regex
from gateway.languages import globs_for
from gateway.models import BackendResult, SearchQuery

__all__ = ["ZoektBackend", "ZoektSettings", "build_request", "parse_response", "zoekt_quote"]

#: Matches asked for per file of the page, and at least this many in all.
MATCHES_PER_FILE = 10
MIN_MATCHES = 500
#: Share of the remaining deadline zoekt may spend searching (the rest is transfer).
WALL_SHARE = 0.9
_QUOTE_TRIGGERS = frozenset(' \t\r\n"():')
_GO_META = frozenset("\\.+*?()|[]{}^$")


class ZoektSettings(HttpSettings):
    """``urls`` are replicas of one index; ``repos`` a regex on repository names.

    :meth:`ZoektBackend.search` asks the first replica; the resilience layer
    (:mod:`gateway.resilience.wrapper`) spreads requests over all of them, fails over and
    hedges through :meth:`ZoektBackend.search_replica`.
    """

    urls: list[str] = Field(default_factory=list, description="zoekt-webserver replicas.")
    repos: RepoRegex = Field(default="", description="Regex on repository names (zoekt `repo:`).")
    coalesce: bool = Field(
        default=True,
        description="Share one request with the other namespaces asking the same server the same thing.",
    )

    @model_validator(mode="after")
    def _has_an_endpoint(self) -> Self:
        for url in self.endpoints:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"not an http(s) URL: {url!r}")
        if not self.endpoints:
            raise ValueError("set `urls` (or `url`)")
        return self

    @property
    def endpoints(self) -> list[str]:
        return list(self.urls) or ([self.url] if self.url else [])


def go_quote_meta(text: str) -> str:
    """``text`` as a regular expression matching itself (Go's ``regexp.QuoteMeta``)."""
    return "".join("\\" + c if c in _GO_META else c for c in text)


def zoekt_quote(value: str) -> str:
    """One zoekt query token: bare when that parses back unchanged, else double-quoted."""
    if value and value != "or" and not value.startswith("-") and not _QUOTE_TRIGGERS & set(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def regex_union(globs: Iterable[str]) -> str:
    """One regex matching a path selected by any of ``globs`` (empty if there are none)."""
    return "|".join(f"(?:{glob_to_regex(g)})" for g in globs)


def repo_union(repos: list[str]) -> str:
    """One ``repo:`` regex for several namespaces: empty (every repository) if one of them has none."""
    return "" if not all(repos) else "|".join(dict.fromkeys(f"(?:{r})" for r in repos))


def build_query(query: SearchQuery, repos: str = "") -> str:
    """The zoekt query string for ``query``."""
    parts: list[str] = []
    if repos:
        parts.append("repo:" + zoekt_quote(repos))
    parts.append("case:yes" if query.case_sensitive else "case:no")
    include = regex_union(g for g in query.paths if not g.startswith("!"))
    language = regex_union(globs_for(query.languages))
    exclude = regex_union(g[1:] for g in query.paths if g.startswith("!"))
    parts.extend("file:" + zoekt_quote(r) for r in (include, language) if r)
    if exclude:
        parts.append("-file:" + zoekt_quote(exclude))
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


async def _rejection(resp: aiohttp.ClientResponse) -> str:
    """The reason zoekt gave for a 400 (``{"Error": "..."}``), short."""
    body = await resp.content.read(4096)
    try:
        message = str(orjson.loads(body).get("Error") or "")
    except (orjson.JSONDecodeError, AttributeError):
        message = ""
    return f"zoekt rejected the query: {message[:200]}" if message else "HTTP 400"


class ZoektBackend(HttpBackend[ZoektSettings]):
    """A zoekt-webserver (its JSON API)."""

    kind = "zoekt"
    Settings = ZoektSettings

    @property
    def shares_calls(self) -> bool:  # type: ignore[override]
        return self.settings.coalesce

    def replicas(self) -> int:
        """How many replicas serve this index."""
        return len(self.settings.endpoints)

    async def search(self, query: SearchQuery) -> BackendResult:
        return await self.search_replica(query, 0)

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        """Search on replica ``replica`` (an index into ``urls``), with the namespaces asking it too."""
        if query.mode not in self.modes:
            raise Unsupported(f"zoekt cannot search in {query.mode} mode")
        if self.settings.token_env and not token_from_env(self.settings.token_env):
            raise BackendError(f"token variable {self.settings.token_env} is not set")
        if self.settings.coalesce:
            return await COALESCER.search(self, query, replica)
        return (await self.search_for(query, replica, [self.settings.repos]))[0]

    async def search_for(self, query: SearchQuery, replica: int, repos: list[str]) -> list[BackendResult]:
        """One request to replica ``replica`` for namespaces with these ``repos`` regexes; a result each."""
        keep = PathFilter.build(query.paths, query.languages)
        body = build_request(query, repos[0] if len(repos) == 1 else repo_union(repos), len(repos))
        url = self.settings.endpoints[replica].rstrip("/") + "/api/search"
        async with map_client_errors():
            async with self.session.post(
                url, json=body, timeout=self.budget(query.remaining()), allow_redirects=False
            ) as resp:
                if resp.status == 400:
                    raise Rejected(await _rejection(resp))
                raw = await read_body(resp, self.settings.max_bytes, "application/json")
            try:
                data = DECODER.decode(raw)
            except msgspec.ValidationError as exc:
                raise BackendError(f"unexpected response shape: {exc}") from exc
            except msgspec.DecodeError as exc:
                raise BackendError("invalid JSON in response") from exc
            if len(repos) == 1:
                return [parse_response(data, query, keep)]
            return parse_shared(data, query, keep, RepoRouter(repos), len(repos))


#: Namespaces on one zoekt server asked the same thing at once share one request.
COALESCER = Coalescer()
