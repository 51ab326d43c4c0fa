"""The ``gitlab`` backend: GitLab blob search (``GET /api/v4/{projects|groups}/:id/search?scope=blobs``).

Asking. ``search`` holds the term and then the blob filters GitLab can apply:
``extension:`` for a single language (``py*`` when its extensions share a prefix, as
GitLab's filters take ``*`` globs) or a ``*.ext`` glob, and ``path:`` for the literal
directories of a single anchored include glob (GitLab matches ``path:`` anywhere in
the path, a superset). The term is sent as written for ``basic`` search (a fixed
string for ``git grep``; a term with a word that GitLab would take for a filter,
``path:x`` or ``-path:x``, is refused), quoted for
``advanced`` (Elasticsearch phrase), bare-or-quoted for ``zoekt``. Regex mode needs
``search_type = "zoekt"`` (exact code search, sent with ``regex=true``); elsewhere it
is :class:`Unsupported`, as is semantic mode. GitLab ignores case, so every line is
verified locally (literal, or RE2 for a regex) with the query's case sensitivity,
and :class:`gateway.query.globs.PathFilter` always runs last.

Reading. A blob is a ``data`` chunk of whole lines, the first numbered ``startline``,
without match offsets: the term is found again in each line (one hit per matching
line, 1-based, columns in characters; context from inside the chunk). Chunks of one
file are merged. A file whose chunks hold no matching line but whose path matches
(GitLab's file-name hits) gets one ``kind="file"`` hit. File paths are
``"<project>/<path>"``: the configured ``project`` as written (path or id) for a
project namespace, the blob's numeric ``project_id`` for a group namespace (a blob
does not name its project; resolving names would cost a request per project).

Files. ``<project>/<path>`` is read from the repository files API,
``GET /api/v4/projects/:id/repository/files/:path/raw?ref=`` (the configured ``ref``, else
``HEAD``: the default branch), kept by its ``ETag`` and asked again conditionally.

Capped. A missing ``x-total`` header (GitLab omits it past 10,000 results) or pages
left unfetched (``x-next-page``) make the result ``capped``. GitLab returns the
chunks of a file together, so the last file of a page may continue on the next: when
paging stops early that file is left out (it is counted in ``file_count``). Basic search
lists file-name hits before content hits, so a file found by name on a fetched page
can still have line hits on a page that was not fetched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self
from urllib.parse import quote

import re2
import yarl
from pydantic import Field, field_validator, model_validator

from adapters._http import HttpBackend, HttpSettings, HttpUrl, Paging, Request, error_message, http_error
from adapters._text import (
    Matcher,
    glob_qualifier,
    line_hits,
    literal_matcher,
    quote_term,
    split_lines,
)
from gateway.dedup.identity import git_identity
from gateway.errors import BackendError, NotFound, Unsupported
from gateway.files import clean_path
from gateway.models import BackendResult, FileMatch, Hit, Mode, RemoteFile, SearchQuery, cut_text
from gateway.query.globs import PathFilter
from gateway.query.languages import globs_for
from gateway.resilience.policy import UNHEDGED

__all__ = ["GitLabBackend", "GitLabSettings", "build_search", "regex_matcher"]

DEFAULT_URL = "https://gitlab.com"
MAX_PER_PAGE = 100
SearchType = Literal["basic", "advanced", "zoekt"]

_ID = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")
_FILTER_LIKE = re.compile(r"(?:^|\s)-?(?:filename|path|extension|blob):")
_EXTENSION = re.compile(r"\*\.([A-Za-z0-9_+-]+)")


class GitLabSettings(HttpSettings):
    """A GitLab group or project searched for blobs."""

    url: HttpUrl = Field(default=DEFAULT_URL, description="The GitLab instance (without /api/v4).")
    group: str | None = Field(default=None, description="Group id or full path (exclusive with project).")
    project: str | None = Field(default=None, description="Project id or full path (exclusive with group).")
    ref: str | None = Field(default=None, description="Branch or tag searched (project only).")
    search_type: SearchType | None = Field(default=None, description="basic, advanced or zoekt.")
    max_pages: int = Field(default=5, ge=1, le=20, description="Search pages asked at most per query.")

    @field_validator("url")
    @classmethod
    def _without_api(cls, value: str) -> str:
        return value.removesuffix("/api/v4")

    @field_validator("group", "project")
    @classmethod
    def _an_id(cls, value: str | None) -> str | None:
        if value is not None and not _ID.fullmatch(value.strip("/")):
            raise ValueError("must be a numeric id or a full path like 'acme/widget-service'")
        return value.strip("/") if value is not None else None

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.group is None) == (self.project is None):
            raise ValueError("set exactly one of 'group' or 'project'")
        if self.ref is not None and self.project is None:
            raise ValueError("'ref' applies to a project only")
        return self


def regex_matcher(pattern: str, case_sensitive: bool) -> Matcher:
    """Find the RE2 ``pattern``; case-insensitively unless ``case_sensitive``."""
    try:
        regex = re2.compile(pattern if case_sensitive else "(?i)" + pattern)
    except re2.error as exc:
        raise BackendError(f"invalid regex: {exc}") from exc

    def find(line: str) -> int | None:
        match = regex.search(line)
        return None if match is None else int(match.start())

    return find


def _language_extension(languages: tuple[str, ...]) -> str | None:
    if len(languages) != 1:
        return None
    exts: list[str] = []
    for glob in globs_for(languages):
        match = _EXTENSION.fullmatch(glob)
        if match is None:
            return None
        exts.append(match.group(1))
    if len(exts) == 1:
        return exts[0]
    prefix = exts[0]
    while prefix and not all(e.startswith(prefix) for e in exts):
        prefix = prefix[:-1]
    return prefix + "*" if prefix else None


def _term(query: SearchQuery, search_type: SearchType | None) -> str:
    text = query.text
    if query.mode == "regex":
        return text.replace(" ", "\\x20").replace("\t", "\\t")
    if search_type == "advanced":
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if search_type == "zoekt":
        return quote_term(text)
    if _FILTER_LIKE.search(text):
        raise Unsupported("GitLab basic search would read this query as a filter")
    return text


def build_search(query: SearchQuery, search_type: SearchType | None = None) -> str:
    """The ``search`` parameter: the term, then the filters GitLab can apply."""
    parts = [_term(query, search_type)]
    extension = _language_extension(query.languages)
    if extension:
        parts.append(f"extension:{extension}")
    includes = [g for g in query.paths if not g.startswith("!")]
    if len(includes) == 1:
        qualifier = glob_qualifier(includes[0])
        if qualifier and qualifier[0] == "extension" and extension:
            qualifier = None if qualifier[1] == extension else qualifier
        if qualifier:
            parts.append(f"{qualifier[0]}:{qualifier[1]}")
    return " ".join(parts)


def _blob(raw: Any) -> tuple[str, str, int, int | None, str]:
    """(path, data, startline, project_id, identity: its blob ``id`` as ``git:<id>``) of one blob, or BackendError."""
    if not isinstance(raw, dict):
        raise BackendError("unexpected response shape: blob is not an object")
    path = raw.get("path") or raw.get("filename")
    data, start, project = raw.get("data"), raw.get("startline"), raw.get("project_id")
    if not isinstance(path, str) or not path or not isinstance(data, str):
        raise BackendError("unexpected response shape: blob without path or data")
    if not isinstance(start, int) or start < 1:
        raise BackendError("unexpected response shape: blob without startline")
    project = project if isinstance(project, int) else None
    return path.lstrip("/"), data, start, project, git_identity(raw.get("id"))


@dataclass(slots=True)
class _Collected(Paging):
    """Blobs read so far, merged by file in first-seen order, and how complete they are."""

    hits: dict[str, dict[int, Hit]] = field(default_factory=dict)  # display path -> line -> hit
    path_match: dict[str, bool] = field(default_factory=dict)
    repository: dict[str, str] = field(default_factory=dict)  # display path -> its project
    identity: dict[str, str] = field(default_factory=dict)  # display path -> its blob's identity
    last: str = ""  # the file of the last blob read: it may go on on the next page
    pages: str = ""
    more: bool = True

    def add(self, display: str, repository: str, path_matches: bool, hits: list[Hit], identity: str = "") -> None:
        lines = self.hits.setdefault(display, {})
        if identity:
            self.identity.setdefault(display, identity)
        self.path_match.setdefault(display, path_matches)
        self.repository.setdefault(display, repository)
        for hit in hits:
            lines.setdefault(hit.line, hit)
        self.last = display

    def matched(self) -> list[str]:
        return [p for p, h in self.hits.items() if h or self.path_match[p]]

    def result(self) -> BackendResult:
        files = [
            FileMatch(
                path=p,
                hits=tuple(h[n] for n in sorted(h)) or (Hit(line=1, kind="file", text=cut_text(p)),),
                repository=self.repository[p],
                identity=self.identity.get(p, ""),
            )
            for p, h in self.hits.items()
            if h or self.path_match[p]
        ]
        reasons = list(dict.fromkeys(self.reasons))
        if not self.more and not reasons:
            return BackendResult(files=files)
        known = len(files)
        if self.more:
            reasons.append(f"stopped after page {self.page} of {self.pages}")
            if len(files) > 1 and files[-1].path == self.last:
                files.pop()  # its chunks may go on on the next page
        return self.partial(files, reasons, known)


class GitLabBackend(HttpBackend[GitLabSettings]):
    """GitLab blob search in one group or project; see the module docstring. Regex mode
    only with ``search_type = "zoekt"`` (GitLab's exact code search)."""

    kind = "gitlab"
    Settings = GitLabSettings
    auth_header = "PRIVATE-TOKEN"
    auth_scheme = None
    policy = UNHEDGED  # search is rate-limited per user (gitlab.com: 10 a minute): never hedged
    modes: frozenset[Mode] = frozenset({"exact"})
    repository_paths = True
    reads = True

    def __init__(self, name: str, settings: GitLabSettings) -> None:
        super().__init__(name, settings)
        if settings.search_type == "zoekt":
            self.modes = frozenset({"exact", "regex"})

    @property
    def endpoint(self) -> yarl.URL:
        project, group = self.settings.project, self.settings.group or ""
        kind, ident = ("projects", project) if project else ("groups", group)
        return yarl.URL(f"{self.settings.url}/api/v4/{kind}/{quote(ident, safe='')}/search", encoded=True)

    def split(self, path: str) -> tuple[str, str]:
        """``<project>/<path>`` -> (project, path inside it); NotFound if it names no project of ours."""
        path = clean_path(path)
        project = self.settings.project
        if project is not None:
            if not path.startswith(project + "/"):
                raise NotFound("no such file")
            return project, path[len(project) + 1 :]
        ident, _, inner = path.partition("/")
        if not ident.isdigit() or not inner:
            raise NotFound("no such file")
        return ident, inner

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        """A file through ``repository/files/:path/raw``, conditionally (its ETag)."""
        project, inner = self.split(path)
        url = yarl.URL(
            f"{self.settings.url}/api/v4/projects/{quote(project, safe='')}/repository/files/"
            f"{quote(inner, safe='')}/raw",
            encoded=True,
        )
        request = Request(url=url, params={"ref": self.settings.ref or "HEAD"}, accept=())
        return await self.read_through(f"{project}/{inner}", request, deadline)

    def _prefix(self, project_id: int | None) -> str:
        if self.settings.project:
            return self.settings.project
        if project_id is None:
            raise BackendError("unexpected response shape: group blob without project_id")
        return str(project_id)

    def _params(self, query: SearchQuery) -> dict[str, str | int]:
        params: dict[str, str | int] = {
            "scope": "blobs",
            "search": build_search(query, self.settings.search_type),
        }
        if self.settings.ref:
            params["ref"] = self.settings.ref
        if self.settings.search_type:
            params["search_type"] = self.settings.search_type
        if query.mode == "regex":
            params["regex"] = "true"
        params["per_page"] = max(1, min(MAX_PER_PAGE, query.max_files))
        return params

    async def search(self, query: SearchQuery) -> BackendResult:
        find = (
            regex_matcher(query.text, query.case_sensitive)
            if query.mode == "regex"
            else literal_matcher(query.text, query.case_sensitive)
        )
        keep = PathFilter.build(query.paths, query.languages)
        params = self._params(query)
        got = _Collected()
        while got.more:
            page = await got.next(query, lambda n, until: self._page(params | {"page": n}, until))
            if page is None:
                break
            blobs, headers = page
            if not headers.get("x-total", "").strip():
                got.reasons.append("GitLab gave no x-total (over 10,000 results)")
            for raw in blobs:
                path, data, start, project, identity = _blob(raw)
                prefix = self._prefix(project)
                if keep(path):
                    hits = line_hits(split_lines(data), find, start, query.context_lines)
                    got.add(f"{prefix}/{path}", prefix, find(path) is not None, hits, identity)
            got.more = bool(headers.get("x-next-page", "").strip()) and bool(blobs)
            got.pages = headers.get("x-total-pages", "").strip() or "more"
            if len([p for p in got.matched() if p != got.last]) >= query.max_files:
                break
            if not got.go_on(query, self.settings.max_pages):
                break
        return got.result()

    async def _page(self, params: Mapping[str, str | int], until: float) -> tuple[list[Any], Mapping[str, str]]:
        reply = await self.fetch(Request(url=self.endpoint, params=params), until)
        body = reply.json()
        if not isinstance(body, list):
            raise BackendError("unexpected response shape: not a list of blobs")
        return body, reply.headers

    def refusal(self, status: int, error: Any, headers: Mapping[str, str]) -> BackendError | None:
        """GitLab's own message for 400/404/422 (rate limits and 5xx: the usual mapping)."""
        if status not in (400, 404, 422):
            return None
        message = error_message(error)
        lowered = message.lower()
        if status == 400 and ("not available" in lowered or "not supported" in lowered):
            return Unsupported(f"HTTP 400: {message}")
        if status == 404:
            return BackendError("HTTP 404: project or group not found (or not visible to the token)")
        return http_error(status, f"HTTP {status}: {message}" if message else f"HTTP {status}")
