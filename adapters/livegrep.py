"""livegrep: ``GET /api/v1/search/<index>``.

Asking: ``q`` in livegrep's query language, the operators first — ``repo:<repos>``,
``file:`` (the path globs, or else the language globs: livegrep takes one) and
``-file:`` as regexes, ``max_matches:N`` (enough lines for the page) — then the pattern
as RE2 (exact mode escaped as Go's ``regexp.QuoteMeta``). Operators come first so that
a ``(`` inside a character class cannot swallow them; in the pattern, spaces become
``\\x20`` (livegrep trims and splits on them) and the colon after a word livegrep
knows as an operator (``file:``, ``repo:``...) is escaped. ``fold_case`` carries the
case choice and ``regex=true``.

Reading: ``lno`` is 1-based and ``bounds`` count characters, so the column is
``bounds[0] + 1``; ``context_before`` comes nearest line first and is turned round.
A file's path is ``<tree>/<path>``, so the same path in two repositories stays two
files; path globs apply to the path inside the repository. Files come in the order of
their first result; ``file_results`` (path-only matches) become ``kind="file"`` hits.
livegrep sets no Content-Type of its own (Go sniffs ``text/plain``), so JSON or plain
text is accepted and anything else refused.

Capped when ``info.why`` is not ``NONE`` (``MATCH_LIMIT``, ``TIMEOUT``).

Files: livegrep serves no file content over its API, so a read is
:class:`~gateway.errors.Unsupported`, naming the file's URL where ``/api/v1/repos``
gives the tree's ``url_pattern`` (``{name}``, ``{basename}``, ``{version}`` (the one the
last search saw, else ``HEAD``), ``{path}``, ``{lno}``).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import re2
from pydantic import Field

from adapters._http import HttpSettings, HttpUrl, JsonBackend, RepoRegex, Request, error_field
from adapters._text import go_quote_meta, path_regexes
from gateway.errors import BackendError, NotFound, Rejected, Unsupported
from gateway.files import clean_path
from gateway.models import BackendResult, FileMatch, Hit, RemoteFile, SearchQuery, cut_text

__all__ = ["LivegrepBackend", "LivegrepSettings", "build_params", "parse_response", "protect"]

#: Matching lines asked for per file of the page, and at least livegrep's default.
MATCHES_PER_FILE = 10
MIN_MATCHES = 50
ACCEPTED_TYPES = ("application/json", "text/plain")
_OPERATOR_COLON = re2.compile(r"(file|path|repo|tags|case|lit|max_matches):")
#: The repository list is asked again after this long.
REPOS_TTL_S = 300.0
_SPACES = {" ": "\\x20", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\v": "\\v"}


class LivegrepSettings(HttpSettings):
    """``url`` of the livegrep web server, ``index`` its backend id (empty: the first one)."""

    url: HttpUrl
    index: str = Field(default="", description="livegrep backend id (`/api/v1/search/<index>`).")
    repos: RepoRegex = Field(default="", description="Optional regex on repository names (livegrep `repo:`).")


def _no_spaces(regex: str) -> str:
    """``regex`` with every whitespace character written as an escape (same meaning in RE2)."""
    out: list[str] = []
    i = 0
    while i < len(regex):
        c = regex[i]
        if c == "\\" and i + 1 < len(regex):
            nxt = regex[i + 1]
            out.append(_SPACES[nxt] if nxt in _SPACES else c + nxt)
            i += 2
            continue
        out.append(_SPACES.get(c, c))
        i += 1
    return "".join(out)


def protect(regex: str) -> str:
    """``regex`` written so that livegrep's query parser hands it to RE2 unchanged."""
    return str(_OPERATOR_COLON.sub(r"\1\\:", _no_spaces(regex)))


def max_matches(query: SearchQuery) -> int:
    return max(MIN_MATCHES, MATCHES_PER_FILE * max(1, query.max_files))


def build_query(query: SearchQuery, repos: str = "") -> str:
    """The ``q`` parameter for ``query``."""
    ops: list[str] = []
    if repos:
        ops.append("repo:" + _no_spaces(repos))
    paths = path_regexes(query)
    include = paths.include or paths.language
    if include:
        ops.append("file:" + _no_spaces(include))
    if paths.exclude:
        ops.append("-file:" + _no_spaces(paths.exclude))
    ops.append(f"max_matches:{max_matches(query)}")
    pattern = go_quote_meta(query.text) if query.mode == "exact" else query.text
    return " ".join([*ops, protect(pattern)])


def build_params(query: SearchQuery, repos: str = "") -> dict[str, str]:
    """The query parameters of the search request."""
    return {
        "q": build_query(query, repos),
        "fold_case": "false" if query.case_sensitive else "true",
        "regex": "true",
    }


def _context(values: Any, count: int, nearest_first: bool) -> tuple[str, ...]:
    if count <= 0:
        return ()
    lines = [str(v) for v in values or ()][:count]
    if nearest_first:
        lines.reverse()
    return tuple(cut_text(line) for line in lines)


def _reason(why: str, query: SearchQuery) -> str:
    if why == "MATCH_LIMIT":
        return f"livegrep stopped at {max_matches(query)} matching lines"
    if why == "TIMEOUT":
        return "livegrep timed out; results are partial"
    return f"livegrep stopped early ({why[:40]})"


def parse_response(data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
    """Our result from livegrep's ``{"info": ..., "results": [...], "file_results": [...]}``."""
    n = query.context_lines
    files: dict[str, dict[int, Hit]] = {}
    trees: dict[str, str] = {}  # file -> its tree (repository)
    for result in data["results"]:
        if not keep(str(result["path"])):
            continue
        key = f"{result['tree']}/{result['path']}"
        hits = files.get(key)
        if hits is None:
            hits = files[key] = {}
            trees[key] = str(result["tree"])
        number = int(result["lno"])
        column = int(result["bounds"][0]) + 1
        old = hits.get(number)
        if old is not None and old.column is not None and old.column <= column:
            continue
        line = str(result["line"])
        hits[number] = Hit(
            line=number,
            text=cut_text(line, column),
            column=column,
            before=_context(result.get("context_before"), n, nearest_first=True),
            after=_context(result.get("context_after"), n, nearest_first=False),
        )
    names: dict[str, Hit] = {}
    for result in data.get("file_results") or ():
        path = f"{result['tree']}/{result['path']}"
        if path in files or path in names or not keep(str(result["path"])):
            continue
        column = int(result["bounds"][0]) + 1
        trees[path] = str(result["tree"])
        names[path] = Hit(line=1, text=cut_text(str(result["path"]), column), column=column, kind="file")
    matches = [FileMatch(path=p, hits=tuple(h[k] for k in sorted(h)), repository=trees[p]) for p, h in files.items()]
    matches.extend(FileMatch(path=p, hits=(hit,), repository=trees[p]) for p, hit in names.items())
    why = str((data.get("info") or {}).get("why") or "NONE")
    if why == "NONE":
        return BackendResult(files=tuple(matches))
    return BackendResult(files=tuple(matches), status="capped", reason=_reason(why, query))


def web_url(pattern: str, tree: str, version: str, path: str) -> str:
    """A file's page from its tree's ``url_pattern``, filled as livegrep's UI fills it."""
    if "/{path}" in pattern:
        path = path.lstrip("/")
    basename = tree.split("/")[1] if "/" in tree else tree
    filled = pattern.replace("{lno}", "1").replace("{version}", version or "HEAD").replace("{name}", tree)
    return filled.replace("{basename}", basename).replace("{path}", path)


class LivegrepBackend(JsonBackend[LivegrepSettings]):
    """A livegrep web server (its JSON API)."""

    kind = "livegrep"
    Settings = LivegrepSettings
    repository_paths = True

    def __init__(self, name: str, settings: LivegrepSettings) -> None:
        super().__init__(name, settings)
        self._versions: dict[str, str] = {}
        self._urls: tuple[float, Mapping[str, str]] | None = None

    async def _tree_urls(self, deadline: float) -> Mapping[str, str]:
        """Tree -> url_pattern of the configured index (the first one when none is set)."""
        if self._urls is None or time.monotonic() - self._urls[0] > REPOS_TTL_S:
            request = Request(url=self.settings.url + "/api/v1/repos", accept=ACCEPTED_TYPES, untyped=True)
            data = (await self.fetch(request, deadline)).json()
            by_index = data.get("repo_urls") if isinstance(data, Mapping) else None
            if not isinstance(by_index, Mapping):
                raise BackendError("unexpected response shape: no repo_urls")
            index = self.settings.index or next(iter(by_index), "")
            urls = by_index.get(index)
            known = {str(k): str(v) for k, v in urls.items()} if isinstance(urls, Mapping) else {}
            self._urls = (time.monotonic(), known)
        return self._urls[1]

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """Unsupported: livegrep serves no content. The error names the file's URL where livegrep gives one."""
        path = clean_path(path)
        try:
            urls = await self._tree_urls(deadline)
        except BackendError:
            urls = {}
        tree = max((t for t in urls if path.startswith(t + "/")), key=len, default=None)
        if tree is None:
            if urls:
                raise NotFound("no such file")
            raise Unsupported("livegrep namespaces cannot be read (livegrep serves no file content)")
        if not urls[tree]:
            raise Unsupported("livegrep namespaces cannot be read (livegrep serves no file content)")
        url = web_url(urls[tree], tree, self._versions.get(tree, ""), path[len(tree) + 1 :])
        raise Unsupported(f"livegrep namespaces cannot be read (livegrep serves no file content); the file is at {url}")

    def request(self, query: SearchQuery) -> Request:
        index = urllib.parse.quote(self.settings.index, safe="")
        url = f"{self.settings.url}/api/v1/search/{index}"
        return Request(url=url, params=build_params(query, self.settings.repos), accept=ACCEPTED_TYPES, untyped=True)

    def parse(self, data: Any, query: SearchQuery, keep: Callable[[str], bool]) -> BackendResult:
        result = parse_response(data, query, keep)
        for found in data["results"]:
            if isinstance(found.get("version"), str) and len(self._versions) < 4096:
                self._versions[str(found["tree"])] = found["version"]
        return result

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """livegrep's reason for a 400 (``{"error": {"code", "message"}}``), short."""
        if status != 400:
            return None
        message = error_field(error, "error", "message") or error_field(error, "error", "code")
        return Rejected(f"livegrep rejected the query: {message[:200]}" if message else "HTTP 400")
