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

import binascii
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

import aiohttp
import orjson
from pydantic import Field, model_validator

from adapters._http import HttpBackend, HttpSettings, RepoRegex, map_client_errors, read_json, token_from_env
from gateway.errors import BackendError, Unsupported
from gateway.globs import PathFilter, glob_to_regex
from gateway.languages import globs_for
from gateway.models import BackendResult, FileMatch, Hit, LazyHits, SearchQuery, cut_text

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
    (:mod:`gateway.resilience`) spreads requests over all of them, fails over and
    hedges through :meth:`ZoektBackend.search_replica`.
    """

    urls: list[str] = Field(default_factory=list, description="zoekt-webserver replicas.")
    repos: RepoRegex = Field(default="", description="Regex on repository names (zoekt `repo:`).")


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


def build_request(query: SearchQuery, repos: str = "") -> dict[str, Any]:
    """The JSON body of ``POST /api/search``."""
    files = max(1, query.max_files)
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


def _b64(value: Any) -> bytes:
    return binascii.a2b_base64(value or "", strict_mode=True)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _context(lines: Sequence[str], count: int, tail: bool) -> tuple[str, ...]:
    if count <= 0:
        return ()
    picked = lines[-count:] if tail else lines[:count]
    return tuple(cut_text(line) for line in picked)


def _context_run(value: Any, count: int, tail: bool) -> tuple[str, ...]:
    """Context lines from a base64 run of lines (each ending in a newline)."""
    if count <= 0 or not value:
        return ()
    text = _text(_b64(value))
    if not text:
        return ()
    if text.endswith("\n"):
        text = text[:-1]
    return _context([line.rstrip("\r") for line in text.split("\n")], count, tail)


class _Lines:
    """Hits of one file by line number: one per line, the column at its first match."""

    def __init__(self) -> None:
        self.by_line: dict[int, Hit] = {}

    def add(self, line: int, text: str, column: int | None, before: tuple[str, ...], after: tuple[str, ...]) -> None:
        old = self.by_line.get(line)
        if old is not None and (column is None or (old.column is not None and old.column <= column)):
            return
        self.by_line[line] = Hit(line=line, text=cut_text(text, column), column=column, before=before, after=after)

    def hits(self) -> tuple[Hit, ...]:
        return tuple(self.by_line[n] for n in sorted(self.by_line))


def _line_matches(lines: _Lines, matches: Sequence[Mapping[str, Any]], context: int) -> int | None:
    """Add line-mode matches; return the name-match column if the file name matched."""
    name_column: int | None = None
    for match in matches:
        raw = _b64(match["Line"])
        offsets = [int(f["LineOffset"]) for f in match.get("LineFragments") or ()]
        column = len(_text(raw[: min(offsets)])) + 1 if offsets else None
        if match.get("FileName"):
            name_column = column or 1
            continue
        lines.add(
            int(match["LineNumber"]),
            _text(raw).rstrip("\r\n"),
            column,
            _context_run(match.get("Before"), context, tail=True),
            _context_run(match.get("After"), context, tail=False),
        )
    return name_column


def _chunk_matches(lines: _Lines, chunks: Sequence[Mapping[str, Any]], context: int) -> int | None:
    """Add chunk-mode matches (rune columns, 1-based); return the name-match column if any."""
    name_column: int | None = None
    for chunk in chunks:
        if chunk.get("FileName"):
            starts = [int(r["Start"]["Column"]) for r in chunk.get("Ranges") or ()]
            name_column = min(starts, default=1)
            continue
        text = _text(_b64(chunk["Content"]))
        if text.endswith("\n"):
            text = text[:-1]
        content = [line.rstrip("\r") for line in text.split("\n")]
        first = int(chunk["ContentStart"]["LineNumber"])
        for rng in chunk.get("Ranges") or ():
            start = rng["Start"]
            index = int(start["LineNumber"]) - first
            if not 0 <= index < len(content):
                continue
            lines.add(
                int(start["LineNumber"]),
                content[index],
                int(start["Column"]),
                _context(content[max(0, index - context) : index], context, tail=True),
                _context(content[index + 1 : index + 1 + context], context, tail=False),
            )
    return name_column


def _load_lines(matches: Sequence[Mapping[str, Any]], context: int) -> tuple[Hit, ...]:
    lines = _Lines()
    _line_matches(lines, matches, context)
    return lines.hits()


def _lazy_file(raw: Mapping[str, Any], matches: Sequence[Mapping[str, Any]], context: int) -> FileMatch | None:
    """A line-mode file whose hits are decoded only if it is shown (one per distinct line)."""
    numbers: set[int] = set()
    symbol = False
    for m in matches:
        if not m.get("FileName"):
            numbers.add(int(m["LineNumber"]))
        if not symbol:
            for fragment in m.get("LineFragments") or ():
                if fragment.get("SymbolInfo"):
                    symbol = True
                    break
    if not numbers:
        return None
    path = f"{raw['Repository']}/{raw['FileName']}"
    return FileMatch(
        path=path,
        hits=LazyHits(len(numbers), functools.partial(_load_lines, matches, context), min(numbers), path),
        definition=symbol,
    )


def _file(raw: Mapping[str, Any], context: int) -> tuple[FileMatch | None, int]:
    """One zoekt FileMatch as ours (None if it has no hits), and how many matches zoekt counted in it."""
    if not raw.get("ChunkMatches"):
        matches = raw.get("LineMatches") or ()
        lazy = _lazy_file(raw, matches, context)
        if lazy is not None:
            return lazy, len(matches)
    name = str(raw["FileName"])
    lines = _Lines()
    if raw.get("ChunkMatches"):
        chunks = raw["ChunkMatches"]
        counted = sum(len(c.get("Ranges") or ()) for c in chunks)
        name_column = _chunk_matches(lines, chunks, context)
    else:
        matches = raw.get("LineMatches") or ()
        counted = len(matches)
        name_column = _line_matches(lines, matches, context)
    hits = lines.hits()
    if not hits and name_column is not None:
        hits = (Hit(line=1, text=cut_text(name, name_column), column=name_column, kind="file"),)
    if not hits:
        return None, counted
    symbol = any(c.get("SymbolInfo") for c in raw.get("ChunkMatches") or ())
    return FileMatch(path=f"{raw['Repository']}/{name}", hits=hits, definition=symbol), counted


def _caps(result: Mapping[str, Any], sent_files: int, sent_matches: int) -> list[str]:
    reasons: list[str] = []
    if skipped := int(result.get("FilesSkipped") or 0):
        reasons.append(f"zoekt stopped early in {skipped} files (match limit or time)")
    if shards := int(result.get("ShardsSkipped") or 0):
        reasons.append(f"zoekt skipped {shards} shards (time limit)")
    if crashes := int(result.get("Crashes") or 0):
        reasons.append(f"{crashes} zoekt shards crashed")
    if (found := int(result.get("FileCount") or 0)) > sent_files:
        reasons.append(f"zoekt matched {found} files and sent {sent_files}")
    if (counted := int(result.get("MatchCount") or 0)) > sent_matches:
        reasons.append(f"zoekt sent {sent_matches} of {counted} matches")
    return reasons


def parse_response(data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
    """Our result from zoekt's ``{"Result": ...}``, files by descending score."""
    result = data["Result"]
    raw_files: list[Mapping[str, Any]] = list(result.get("Files") or ())
    ranked = sorted(raw_files, key=lambda f: -float(f.get("Score") or 0.0))
    files: list[FileMatch] = []
    sent_matches = 0
    for raw in ranked:
        match, counted = _file(raw, query.context_lines)
        sent_matches += counted
        if match is not None and keep(str(raw["FileName"])):
            files.append(match)
    reasons = _caps(result, len(raw_files), sent_matches)
    if not reasons:
        return BackendResult(files=tuple(files))
    found = int(result.get("FileCount") or 0)
    return BackendResult(
        files=tuple(files), status="capped", reason="; ".join(reasons), file_count=max(found, len(files))
    )


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


    def replicas(self) -> int:
        """How many replicas serve this index."""
        return len(self.settings.endpoints)

    async def search(self, query: SearchQuery) -> BackendResult:
        return await self.search_replica(query, 0)

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        """Search on replica ``replica`` (an index into ``urls``)."""
        if query.mode not in self.modes:
            raise Unsupported(f"zoekt cannot search in {query.mode} mode")
        if self.settings.token_env and not token_from_env(self.settings.token_env):
            raise BackendError(f"token variable {self.settings.token_env} is not set")
        keep = PathFilter.build(query.paths, query.languages)
        body = build_request(query, self.settings.repos)
        url = self.settings.endpoints[replica].rstrip("/") + "/api/search"
        async with map_client_errors():
            async with self.session.post(
                url, json=body, timeout=self.budget(query.remaining()), allow_redirects=False
            ) as resp:
                if resp.status == 400:
                    raise BackendError(await _rejection(resp))
                data = await read_json(resp, self.settings.max_bytes)
            try:
                return parse_response(data, query, keep)
            except AttributeError as exc:
                raise BackendError("unexpected response shape") from exc
