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

Files: Hound serves no file content, so a read is :class:`~gateway.errors.Unsupported`,
naming the file's URL where Hound's ``/api/v1/repos`` gives the repository's
(``url-pattern``'s ``base-url``, at the revision the last search saw, else ``HEAD``).

Capped when a repository reports more files (``FilesWithMatch``) than it sent, or
sent as many lines as the ``limit`` (later files are then dropped uncounted). A
search error comes back as ``{"Error": ...}`` with HTTP 200 and is raised as a
:class:`~gateway.errors.BackendError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import re2
from pydantic import Field

from adapters._http import HttpSettings, HttpUrl, JsonBackend, Request
from adapters._text import path_regexes
from gateway.errors import BackendError, NotFound, Rejected, Unsupported
from gateway.files import clean_path
from gateway.log import scrub
from gateway.models import BackendResult, FileMatch, Hit, RemoteFile, SearchQuery, cut_text

__all__ = ["HoundBackend", "HoundSettings", "build_params", "parse_response"]

#: Matched lines per repository Hound may return (its own default).
LINE_LIMIT = 5000
#: Hound clamps ``ctx`` to this.
MAX_CONTEXT = 20
YES, NO = "fosho", "nope"
#: Hound's default ``url-pattern`` (``config/config.go``).
DEFAULT_BASE_URL = "{url}/blob/{rev}/{path}{anchor}"
#: The repository list is asked again after this long.
REPOS_TTL_S = 300.0


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
    return FileMatch(path=f"{repo}/{raw['Filename']}", hits=hits, repository=repo)


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


def web_url(repo: Mapping[str, Any], rev: str, path: str) -> str:
    """The file's page on the repository's host, as Hound's UI links it (``url-pattern``)."""
    url = str(repo.get("url") or "")
    if url.startswith("git@") and ":" in url:  # git@host:owner/name.git
        host, _, rest = url[4:].partition(":")
        url = f"https://{host}/{rest}"
    url = url.removesuffix(".git")
    pattern = repo.get("url-pattern")
    base = str(pattern.get("base-url") or DEFAULT_BASE_URL) if isinstance(pattern, Mapping) else DEFAULT_BASE_URL
    return base.replace("{url}", url).replace("{rev}", rev or "HEAD").replace("{path}", path).replace("{anchor}", "")


class HoundBackend(JsonBackend[HoundSettings]):
    """A Hound server."""

    kind = "hound"
    Settings = HoundSettings
    repository_paths = True

    def __init__(self, name: str, settings: HoundSettings) -> None:
        super().__init__(name, settings)
        self._revisions: dict[str, str] = {}
        self._repos: tuple[float, Mapping[str, Any]] | None = None

    def request(self, query: SearchQuery) -> Request:
        return Request(url=self.settings.url + "/api/v1/search", params=build_params(query, self.settings.repos))

    def parse(self, data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
        result = parse_response(data, query, keep)
        for repo, found in (data.get("Results") or {}).items():
            if isinstance(found, Mapping) and isinstance(found.get("Revision"), str) and len(self._revisions) < 4096:
                self._revisions[str(repo)] = found["Revision"]
        return result

    async def _repo_list(self, deadline: float) -> Mapping[str, Any]:
        if self._repos is None or time.monotonic() - self._repos[0] > REPOS_TTL_S:
            reply = await self.fetch(Request(url=self.settings.url + "/api/v1/repos"), deadline)
            repos = reply.json()
            if not isinstance(repos, Mapping):
                raise BackendError("unexpected response shape: not a repository map")
            self._repos = (time.monotonic(), repos)
        return self._repos[1]

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """Unsupported: Hound serves no content. The error names the file's URL where Hound gives one."""
        path = clean_path(path)
        try:
            repos = await self._repo_list(deadline)
        except BackendError:
            repos = {}
        key = max((k for k in repos if path.startswith(k + "/")), key=len, default=None)
        if key is None:
            if repos:
                raise NotFound("no such file")
            raise Unsupported("hound namespaces cannot be read (Hound serves no file content)")
        url = web_url(repos[key], self._revisions.get(key, ""), path[len(key) + 1 :])
        raise Unsupported(f"hound namespaces cannot be read (Hound serves no file content); the file is at {url}")
