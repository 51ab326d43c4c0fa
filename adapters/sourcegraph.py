"""Sourcegraph: the streaming search API, ``GET /.api/search/stream`` (server-sent events).

Asking: ``q`` in the keyword pattern syntax (``t=keyword``, ``v=V3``, chunk matches
``cm=t``): ``repo:<repos>``, ``file:`` / ``-file:`` regexes for the path and language
globs, ``case:yes`` when case-sensitive, then the pattern — exact mode as a quoted
literal (``"a \\"b\\""``: Sourcegraph unescapes ``\\\\`` and ``\\"`` inside quotes),
regex mode slash-delimited (``/a\\/b/``, backslashes doubled the same way) — and
finally ``count:`` (enough matches for the page) and ``timeout:`` (just inside the
remaining deadline). The token from ``token_env`` goes in ``Authorization: token <t>``.

Reading: events are parsed as they arrive, under the ``max_bytes`` cap, until
``done``. Sourcegraph lines and columns are 0-based (columns in characters); ours are
1-based. A file's path is ``<repository>/<path>``, so the same path in two
repositories stays two files; path globs apply to the path inside the repository.
Files come in the order Sourcegraph streamed them; a path-only match becomes one
``kind="file"`` hit.

Files. ``<repository>/<path>`` is read from the raw endpoint,
``GET <url>/<repository>[@<commit>]/-/raw/<path>``: at the commit the search that found
it saw, when that is known; else the repository is found among those searches named
(the longest that prefixes the path), else tried as ``host/owner/name`` and then the
other splits of the path, one request each, until one exists. Kept by ``ETag`` and
asked again conditionally.

Capped when ``progress.skipped`` names a limit (``display``, ``shard-match-limit``,
``shard-timeout``, missing or cloning repositories...; the by-design exclusions of
archived repositories and forks do not count), when an ``alert`` or ``error`` event
comes after some results, when the stream ends before ``done`` or outgrows
``max_bytes``. An ``alert`` or ``error`` with no results (a query Sourcegraph could not
process) is a :class:`~gateway.errors.BackendError` naming it; the deadline passing
mid-stream returns what came with status ``timeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import re2
import yarl
from pydantic import Field

from adapters._http import HttpBackend, HttpSettings, HttpUrl, RepoRegex, Request
from adapters._text import path_regexes
from gateway.errors import BackendError, NotFound
from gateway.files import clean_path
from gateway.models import BackendResult, FileMatch, Hit, RemoteFile, SearchQuery, Status, cut_text
from gateway.query.globs import PathFilter

__all__ = ["SourcegraphBackend", "SourcegraphSettings", "SseParser", "build_params", "build_query"]

EVENT_STREAM = "text/event-stream"
#: Matches asked for (``count:``) per file of the page, and at least this many in all.
MATCHES_PER_FILE = 25
MIN_COUNT = 100
#: Share of the remaining deadline Sourcegraph may spend searching; its own cap is a minute.
WALL_SHARE = 0.9
MAX_TIMEOUT_S = 60
#: Skipped reasons that are deliberate defaults, not a limit this query ran into.
BY_DESIGN = frozenset({"excluded-archive", "repository-fork"})
#: Files whose repository and commit a search saw, remembered for reads.
KNOWN_FILES = 4096
#: Splits of a path tried as ``<repository>/<path>`` at most, and their order (components
#: in the repository's name: ``host/owner/name`` first).
SPLIT_ORDER = (3, 2, 4, 1, 5, 6)
_BARE = re2.compile(r"^[A-Za-z0-9_.]+$")
_KEYWORDS = frozenset({"and", "or", "not"})


class SourcegraphSettings(HttpSettings):
    """``url`` of the instance, ``token_env`` naming the access token's variable, ``repos`` a regex."""

    url: HttpUrl
    repos: RepoRegex = Field(default="", description="Regex on repository names (Sourcegraph `repo:`).")


def _quoted(value: str, delimiter: str = '"') -> str:
    escaped = value.replace("\\", "\\\\").replace(delimiter, "\\" + delimiter)
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return delimiter + escaped + delimiter


def field_value(value: str) -> str:
    """A filter value: bare when it has no spaces, quotes or parentheses, else quoted."""
    if value and not any(c.isspace() or c in "\"'()" for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pattern(query: SearchQuery) -> str:
    """The search pattern: a literal (bare when plainly a word) or a ``/regex/``."""
    if query.mode == "regex":
        return _quoted(query.text, "/")
    if _BARE.search(query.text) and query.text.lower() not in _KEYWORDS:
        return query.text
    return _quoted(query.text)


def match_count(query: SearchQuery) -> int:
    return max(MIN_COUNT, MATCHES_PER_FILE * max(1, query.max_files))


def go_duration(seconds: float) -> str:
    """A Go duration just inside ``seconds`` (whole seconds, or milliseconds under one)."""
    wall = min(MAX_TIMEOUT_S, seconds * WALL_SHARE)
    return f"{int(wall)}s" if wall >= 1 else f"{max(1, int(wall * 1000))}ms"


def build_query(query: SearchQuery, repos: str = "") -> str:
    """The ``q`` parameter for ``query``."""
    parts: list[str] = []
    if repos:
        parts.append("repo:" + field_value(repos))
    paths = path_regexes(query)
    parts.extend("file:" + field_value(r) for r in (paths.include, paths.language) if r)
    if paths.exclude:
        parts.append("-file:" + field_value(paths.exclude))
    if query.case_sensitive:
        parts.append("case:yes")
    parts.append(pattern(query))
    parts.append(f"count:{match_count(query)}")
    parts.append(f"timeout:{go_duration(query.remaining())}")
    return " ".join(parts)


def build_params(query: SearchQuery, repos: str = "") -> dict[str, str]:
    """The query parameters of the stream request."""
    count = str(match_count(query))
    return {"q": build_query(query, repos), "v": "V3", "t": "keyword", "cm": "t", "display": count}


class SseParser:
    """Incremental server-sent-events parser: feed bytes, get ``(event, data)`` pairs.

    Lenient as Sourcegraph's stream needs: ``\\r\\n`` or ``\\n`` line ends, several
    ``data:`` lines joined by newlines, comments and stray lines ignored.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0
        self._event = ""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        self._buf += chunk
        events: list[tuple[str, bytes]] = []
        start = 0
        while (end := self._buf.find(b"\n", max(start, self._scanned))) >= 0:
            line = bytes(self._buf[start:end]).rstrip(b"\r")
            start = end + 1
            self._scanned = start
            if not line:
                if self._data or self._event:
                    events.append((self._event or "message", b"\n".join(self._data)))
                self._event, self._data = "", []
                continue
            name, colon, value = line.partition(b":")
            if not colon:
                continue
            value = value[1:] if value.startswith(b" ") else value
            if name == b"event":
                self._event = value.decode("utf-8", "replace").strip()
            elif name == b"data":
                self._data.append(value)
        del self._buf[:start]
        self._scanned = len(self._buf)
        return events


class _Collector:
    """Files and their hits as match events arrive, in arrival order."""

    def __init__(self, query: SearchQuery, keep: Callable[[str], bool]) -> None:
        self.context = query.context_lines
        self.keep = keep
        self.files: dict[str, dict[int, Hit]] = {}
        self.names: dict[str, Hit] = {}
        self.seen: dict[str, tuple[str, str]] = {}  # display path -> (repository, commit)

    def _add(self, path: str, line: int, text: str, column: int, before: Sequence[str], after: Sequence[str]) -> None:
        hits = self.files.setdefault(path, {})
        old = hits.get(line)
        if old is not None and old.column is not None and old.column <= column:
            return
        hits[line] = Hit(
            line=line,
            text=cut_text(text, column),
            column=column,
            before=tuple(cut_text(b) for b in before),
            after=tuple(cut_text(a) for a in after),
        )

    def matches(self, items: Sequence[Mapping[str, Any]]) -> None:
        for item in items:
            kind = item.get("type")
            if kind not in ("content", "path") or not self.keep(str(item["path"])):
                continue
            path = f"{item['repository']}/{item['path']}"
            self.files.setdefault(path, {})
            self.seen[path] = (str(item["repository"]), str(item.get("commit") or ""))
            for chunk in item.get("chunkMatches") or ():
                self._chunk(path, chunk)
            for line in item.get("lineMatches") or ():
                offsets = [int(o[0]) for o in line.get("offsetAndLengths") or ()]
                column = min(offsets, default=0) + 1
                self._add(path, int(line["lineNumber"]) + 1, str(line["line"]), column, (), ())
            starts = [int(r["start"]["column"]) for r in item.get("pathMatches") or ()]
            if (starts or kind == "path") and path not in self.names:
                column = min(starts, default=0) + 1
                name = str(item["path"])
                self.names[path] = Hit(line=1, text=cut_text(name, column), column=column, kind="file")

    def _chunk(self, path: str, chunk: Mapping[str, Any]) -> None:
        content = [line.rstrip("\r") for line in str(chunk["content"]).split("\n")]
        first = int(chunk["contentStart"]["line"])
        n = self.context
        for rng in chunk.get("ranges") or ():
            start = rng["start"]
            index = int(start["line"]) - first
            if not 0 <= index < len(content):
                continue
            before = content[max(0, index - n) : index] if n else []
            after = content[index + 1 : index + 1 + n] if n else []
            self._add(path, int(start["line"]) + 1, content[index], int(start["column"]) + 1, before, after)

    def result(self) -> list[FileMatch]:
        out: list[FileMatch] = []
        for path, hits in self.files.items():
            repository = self.seen[path][0]
            if hits:
                out.append(FileMatch(path=path, hits=tuple(hits[n] for n in sorted(hits)), repository=repository))
            elif path in self.names:
                out.append(FileMatch(path=path, hits=(self.names[path],), repository=repository))
        return out


def _skipped(progress: Mapping[str, Any] | None) -> list[str]:
    reasons: list[str] = []
    for skip in (progress or {}).get("skipped") or ():
        if skip.get("reason") in BY_DESIGN:
            continue
        text = str(skip.get("title") or skip.get("reason") or "skipped")
        if text not in reasons:
            reasons.append(text)
    return reasons


def _problem(alert: Mapping[str, Any] | None, error: str) -> str:
    if error:
        return f"sourcegraph error: {error[:200]}"
    if alert:
        title = str(alert.get("title") or "alert")
        description = str(alert.get("description") or "")
        return f"sourcegraph: {title}" + (f": {description[:200]}" if description else "")
    return ""


class _Stream:
    """One search's stream: what came, and how it ended."""

    def __init__(self, query: SearchQuery, keep: Callable[[str], bool]) -> None:
        self.collector = _Collector(query, keep)
        self.progress: Mapping[str, Any] | None = None
        self.alert: Mapping[str, Any] | None = None
        self.error = ""
        self.done = False
        self.cut = ""  # why reading stopped early: "size" or "deadline"

    def on(self, name: str, data: bytes) -> None:
        if name == "done":
            self.done = True
        elif name == "matches":
            self.collector.matches(orjson.loads(data))
        elif name == "progress":
            self.progress = orjson.loads(data)
        elif name == "alert":
            self.alert = orjson.loads(data)
        elif name == "error":
            self.error = str(orjson.loads(data).get("message") or "error")

    def result(self, max_bytes: int) -> BackendResult:
        files = self.collector.result()
        problem = _problem(self.alert, self.error)
        if problem and not files:
            raise BackendError(problem)
        reasons = [problem] if problem else []
        status: Status = "capped"
        if self.cut == "deadline":
            status = "timeout"
            reasons.append("deadline reached mid-stream")
        elif self.cut == "size":
            reasons.append(f"stream over the {max_bytes}-byte cap")
        elif not self.done:
            if not files:
                raise BackendError("stream ended before done")
            reasons.append("stream ended before done")
        reasons.extend(_skipped(self.progress))
        if not reasons:
            return BackendResult(files=tuple(files))
        return BackendResult(files=tuple(files), status=status, reason="; ".join(reasons))


async def _consume(resp: aiohttp.ClientResponse, stream: _Stream, max_bytes: int) -> None:
    """Feed the body to ``stream`` event by event, under the byte cap, until ``done``."""
    parser = SseParser()
    room = max_bytes
    async for chunk in resp.content.iter_any():
        over = len(chunk) > room
        for name, data in parser.feed(chunk[:room] if over else chunk):
            stream.on(name, data)
            if stream.done:
                return
        if over:
            stream.cut = "size"
            return
        room -= len(chunk)


class SourcegraphBackend(HttpBackend[SourcegraphSettings]):
    """A Sourcegraph instance, through its streaming search API."""

    kind = "sourcegraph"
    Settings = SourcegraphSettings
    repository_paths = True
    reads = True

    auth_scheme = "token"

    def __init__(self, name: str, settings: SourcegraphSettings) -> None:
        super().__init__(name, settings)
        self._seen: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def _remember(self, seen: Mapping[str, tuple[str, str]]) -> None:
        for path, where in seen.items():
            self._seen[path] = where
            self._seen.move_to_end(path)
        while len(self._seen) > KNOWN_FILES:
            self._seen.popitem(last=False)

    def _candidates(self, path: str) -> list[tuple[str, str, str]]:
        """(repository, commit, path inside it) to try for ``path``, the likeliest first."""
        known = self._seen.get(path)
        if known is not None:
            return [(known[0], known[1], path[len(known[0]) + 1 :])]
        parts = path.split("/")
        named = {repo for repo, _ in self._seen.values()}
        splits = sorted((n for n in range(1, len(parts)) if "/".join(parts[:n]) in named), reverse=True)
        splits += [n for n in SPLIT_ORDER if n < len(parts) and n not in splits]
        return [("/".join(parts[:n]), "", "/".join(parts[n:])) for n in splits]

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """A file through the raw endpoint (see the module docstring)."""
        path = clean_path(path)
        for repo, commit, inner in self._candidates(path):
            where = f"{quote(repo, safe='/')}@{quote(commit, safe='')}" if commit else quote(repo, safe="/")
            url = f"{self.settings.url}/{where}/-/raw/{quote(inner, safe='/')}"
            request = Request(url=yarl.URL(url, encoded=True), headers={"Accept": "*/*"}, accept=())
            try:
                return await self.read_through(path, request, deadline)
            except NotFound:
                if time.monotonic() >= deadline:
                    break
        raise NotFound("no such file")

    def headers(self) -> dict[str, str]:
        return super().headers() | {"Accept": EVENT_STREAM}

    async def search(self, query: SearchQuery) -> BackendResult:
        stream = _Stream(query, PathFilter.build(query.paths, query.languages))
        request = Request(
            url=self.settings.url + "/.api/search/stream",
            params=build_params(query, self.settings.repos),
            accept=(EVENT_STREAM,),
        )
        async with self.stream(request, query.deadline) as resp:
            try:
                async with asyncio.timeout_at(query.deadline):
                    await _consume(resp, stream, self.settings.max_bytes)
            except TimeoutError:
                if not stream.collector.result():
                    raise
                stream.cut = "deadline"
            self._remember(stream.collector.seen)
            return stream.result(self.settings.max_bytes)
