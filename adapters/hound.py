"""Hound: ``GET /api/v1/search``.

Asking: ``q`` is the pattern — exact mode sends it with ``literal=true`` (Hound
quotes it itself), regex mode as RE2 — with ``i`` for case folding, ``repos`` from the
settings (``*`` for all), ``files`` / ``excludeFiles`` regexes for the path globs
(Hound takes one include regex, so when both path and language globs are given the
language globs are checked here), ``ctx`` context lines, ``rng=:N`` for
``query.max_files`` files per repository, and Hound's usual 5,000-line ``limit``.

Reading: ``LineNumber`` is 1-based; Hound sends no match offsets, so the column is
found by running the same pattern (with RE2) over the line. A file's path is
``<repo key>/<path>``, so the same path in two repositories stays two files; path
globs apply to the path inside the repository. Files come in Hound's order
(repositories by key, then files as listed).

Capped when a repository reports more files (``FilesWithMatch``) than it sent, or
sent as many lines as the ``limit`` (later files are then dropped uncounted). A
search error comes back as ``{"Error": ...}`` with HTTP 200 and is raised as a
:class:`~gateway.errors.BackendError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import re2
from pydantic import Field

from adapters._http import HttpSettings, HttpUrl, JsonBackend, Request
from adapters._text import path_regexes
from gateway.errors import Rejected
from gateway.log import scrub
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery, cut_text

__all__ = ["HoundBackend", "HoundSettings", "build_params", "parse_response"]

#: Matched lines per repository Hound may return (its own default).
LINE_LIMIT = 5000
#: Hound clamps ``ctx`` to this.
MAX_CONTEXT = 20
YES, NO = "fosho", "nope"


class HoundSettings(HttpSettings):
    """``url`` of houndd, ``repos`` the repository keys to search (comma-separated, ``*`` for all)."""

    url: HttpUrl
    repos: str = Field(default="*", min_length=1, description="Hound repo keys, comma-separated, or *.")


def build_params(query: SearchQuery, repos: str = "*") -> dict[str, str]:
    """The query parameters of ``GET /api/v1/search``."""
    paths = path_regexes(query)
    return {
        "q": query.text,
        "repos": repos,
        "i": NO if query.case_sensitive else YES,
        "files": paths.include or paths.language,
        "excludeFiles": paths.exclude,
        "literal": "true" if query.mode == "exact" else "false",
        "ctx": str(min(MAX_CONTEXT, max(0, query.context_lines))),
        "limit": str(LINE_LIMIT),
        "rng": f":{max(1, query.max_files)}",
        "stats": YES,
    }


def matcher(query: SearchQuery) -> Callable[[str], int | None]:
    """The 1-based character column of the first match in a line (None if RE2 disagrees)."""
    options = re2.Options()
    options.case_sensitive = query.case_sensitive
    options.literal = query.mode == "exact"
    options.log_errors = False
    try:
        regex = re2.compile(query.text, options)
    except re2.error:
        return lambda line: None

    def column(line: str) -> int | None:
        found = regex.search(line)
        return None if found is None else int(found.start()) + 1

    return column


def _lines(values: Any, count: int, tail: bool) -> tuple[str, ...]:
    lines: Sequence[str] = [str(v) for v in values or ()]
    if count <= 0:
        return ()
    return tuple(cut_text(v) for v in (lines[-count:] if tail else lines[:count]))


def _file(repo: str, raw: Mapping[str, Any], query: SearchQuery, column: Callable[[str], int | None]) -> FileMatch:
    by_line: dict[int, Hit] = {}
    for match in raw["Matches"] or ():
        number = int(match["LineNumber"])
        if number in by_line:
            continue
        line = str(match["Line"])
        col = column(line)
        by_line[number] = Hit(
            line=number,
            text=cut_text(line, col),
            column=col,
            before=_lines(match.get("Before"), query.context_lines, tail=True),
            after=_lines(match.get("After"), query.context_lines, tail=False),
        )
    hits = tuple(by_line[n] for n in sorted(by_line))
    return FileMatch(path=f"{repo}/{raw['Filename']}", hits=hits)


def parse_response(data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
    """Our result from Hound's ``{"Results": {repo: {...}}}``."""
    if data.get("Error"):
        raise Rejected(f"hound rejected the query: {scrub(str(data['Error']))[:200]}")
    column = matcher(query)
    files: list[FileMatch] = []
    sent = found = 0
    at_limit: list[str] = []
    for repo, result in (data.get("Results") or {}).items():
        matches = result.get("Matches") or ()
        sent += len(matches)
        found += max(int(result.get("FilesWithMatch") or 0), len(matches))
        if sum(len(m.get("Matches") or ()) for m in matches) >= LINE_LIMIT:
            at_limit.append(str(repo))
        for raw in matches:
            if keep(str(raw["Filename"])):
                match = _file(str(repo), raw, query, column)
                if match.hits:
                    files.append(match)
    reasons: list[str] = []
    if found > sent:
        reasons.append(f"hound matched {found} files and sent {sent}")
    if at_limit:
        reasons.append(f"hound stopped at its {LINE_LIMIT}-line limit in {', '.join(at_limit[:3])}")
    if not reasons:
        return BackendResult(files=tuple(files))
    return BackendResult(files=tuple(files), status="capped", reason="; ".join(reasons), file_count=found)


class HoundBackend(JsonBackend[HoundSettings]):
    """A Hound server."""

    kind = "hound"
    Settings = HoundSettings

    def request(self, query: SearchQuery) -> Request:
        return Request(url=self.settings.url + "/api/v1/search", params=build_params(query, self.settings.repos))

    def parse(self, data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
        return parse_response(data, query, keep)
