"""What HTTP says besides the answer, as pydantic models for the OpenAPI document.

The problem object (RFC 9457), ``/v1/query``'s query taken apart, ``/v1/namespaces``'
list, the page's file view, outline and facets, and the data of each Server-Sent Event
of ``/v1/search/stream`` (SPEC §8). Like
:mod:`gateway.schema` they describe JSON that is built elsewhere as plain dicts; they
are built for a schema only (``defer_build``), never on a request.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.models import Mode
from gateway.schema import FileGroup

__all__ = ["Facets", "FileOutline", "FileView", "FilesEvent", "NamespaceList", "Problem", "ProgressEvent", "QueryParts"]

_STRICT = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Problem(BaseModel):
    """An RFC 9457 problem: what went wrong, and the offending input in ``field``."""

    model_config = _STRICT
    type: str
    title: str
    status: int = Field(ge=400, le=599)
    detail: str
    field: str | None = Field(default=None, description="The offending field, parameter, header or part of the URL.")
    retry_after: int | None = Field(default=None, ge=1, description="503: seconds to wait before asking again.")


class Filter(BaseModel):
    model_config = _STRICT
    key: str
    value: str
    negated: bool
    text: str


class QueryParts(BaseModel):
    """A request's query taken apart: the pattern searched for, its mode and case, the filters."""

    model_config = _STRICT
    query: str
    pattern: str
    mode: Mode
    case_sensitive: bool
    filters: list[Filter]


class IndexHolder(BaseModel):
    """The process holding a local namespace's root lock (gateway.index.locks)."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)
    pid: int
    since: str | None = Field(default=None, description="When it took the lock (UTC, ISO 8601).")
    held_s: float | None = None
    renewed_s: float | None = Field(default=None, description="Seconds since it last renewed its lease.")
    stuck: bool = Field(description="Its lease ran out: alive, holding, and not renewing.")
    phase: str | None = Field(default=None, description="What it is doing: content, declarations, embedding.")
    done: int | None = Field(default=None, description="Files of this phase done so far.")
    total: int | None = Field(default=None, description="Files of this phase in all.")


class IndexState(BaseModel):
    """A local namespace's content index (SPEC §5)."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)
    state: Literal["off", "building", "waiting", "ready", "stale"] = Field(
        description="ready: searches use it; waiting: another process holds this root's lock (holder); "
        "off and stale say why in reason. Until ready, the namespace is scanned: answers are the same."
    )
    files: int
    bytes: int
    built_s: float
    reason: str | None = None
    holder: IndexHolder | None = None


class Namespace(BaseModel):
    """One visible namespace: its backend kind, health and capabilities (a local one's index too)."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)
    name: str
    backend: str
    health: str
    capabilities: dict[str, Any] | None = None
    file_paths: str | None = Field(default=None, description="<path>, <repository>/<path> or <namespace>/<path>.")
    index: IndexState | None = Field(default=None, description="A local namespace's content index.")


class NamespaceList(BaseModel):
    model_config = _STRICT
    namespaces: list[Namespace]


class FilesEvent(BaseModel):
    """``files``: the provisional first page so far; each replaces the one before."""

    model_config = _STRICT
    files: list[FileGroup]
    file_count: int = Field(ge=0)


class ProgressEvent(BaseModel):
    """``progress``: namespaces settled of those asked, and the files known to match so far."""

    model_config = _STRICT
    done: int = Field(ge=0)
    total: int = Field(ge=0)
    file_count: int = Field(ge=0)


class FileView(BaseModel):
    """``/v1/view``: the slice ``/v1/files`` reads, each line plain text or ``[class, text]`` runs."""

    model_config = _STRICT
    namespace: str
    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=0)
    total_lines: int = Field(ge=0)
    next_start_line: int | None = Field(default=None, ge=1, description="Where the next slice starts, if any.")
    # A run is a list of two strings, not a tuple: a tuple's prefixItems made schemathesis 4.32 call the
    # response schema invalid once a stateful test read a whole file's view (issue 52).
    lines: list[str | list[Annotated[list[str], Field(min_length=2, max_length=2)]]] = Field(
        description="Each line: its text, or its runs as [token class, text] (the page's stylesheet colours them)."
    )


class Symbol(BaseModel):
    """One declaration of a file, in order; a nested one follows its parent with ``depth`` one more."""

    model_config = _STRICT
    kind: str
    name: str
    qualified_name: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    depth: int = Field(ge=0)


class FileOutline(BaseModel):
    """``/v1/outline``: a file's declarations from the index ([] where it knows none)."""

    model_config = _STRICT
    namespace: str
    path: str
    outline: list[Symbol]


class Facets(BaseModel):
    """``/v1/facets``: an answer's files counted over its snapshot, each facet [[value, files], ...], most first."""

    model_config = _STRICT
    file_count: int = Field(ge=0)
    namespaces: list[tuple[str, int]]
    languages: list[tuple[str, int]]
    folders: list[tuple[str, int]]
