"""The answer (SPEC §3) described for JSON Schema: OpenAPI, MCP's output schema, tests.

pydantic models of the answer, field for field; the answer itself is built as plain
JSON-ready dicts by :func:`gateway.wire.build_response` and never validated against
these on a search (they are built for a schema only, when first asked for one).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.models import Status

__all__ = [
    "Context",
    "Copy",
    "FileGroup",
    "Limits",
    "LineItem",
    "NamespaceStatus",
    "NextAction",
    "ResultItem",
    "SearchResponse",
]

_STRICT = ConfigDict(
    frozen=True, extra="forbid", str_strip_whitespace=False, defer_build=True
)  # built for a schema, never on a search


class Context(BaseModel):
    model_config = _STRICT
    before: list[str]
    after: list[str]


class LineItem(BaseModel):
    """One matched line of a hit."""

    model_config = _STRICT
    line: int = Field(ge=1)
    column: int | None = Field(default=None, ge=1)
    text: str = Field(max_length=256)
    context: Context | None = None


class ResultItem(BaseModel):
    """One hit: a declaration with its matched lines inside it, or the file's own hit (``kind`` ``file``:
    its matched lines outside every declaration; none: its path matched). Every matched line of a file
    belongs to exactly one hit."""

    model_config = _STRICT
    id: int = Field(ge=0, lt=1 << 53)
    qualified_name: str = Field(description="A declaration's dotted chain of names; the file's own hit: its file_path.")
    kind: str = Field(description="function, method, class, ... or file (the file's own hit).")
    name: str
    file_path: str | None = Field(
        default=None,
        description="Its group's file_path; left out (with namespace) only where the first file alone passes "
        "char_budget with no lines listed.",
    )
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    intent: str | None = None
    matched: list[Literal["content", "path", "name", "intent"]]
    reason: str | None = None
    matched_terms: list[str] | None = None
    namespace: str | None = Field(default=None, description="Its group's namespace (left out as file_path is).")
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    line_count: int = Field(
        ge=0, description="The hit's matched lines, all of them: `lines` lists the first `limits.hit_lines`."
    )
    lines: list[LineItem] | None = None


class Copy(BaseModel):
    """Another copy of a file group's content: the same bytes in another place."""

    model_config = _STRICT
    namespace: str
    file_path: str


class FileGroup(BaseModel):
    """One file of one namespace with all of its hits; with dedup, the other copies of its content too."""

    model_config = _STRICT
    file_path: str
    namespace: str
    hit_count: int
    hits: list[ResultItem]
    duplicates: list[Copy] | None = Field(
        default=None,
        description="The other copies of this content (same bytes) that matched, in rank order; absent "
        "with dedup false or when there is none.",
    )
    identity: str | None = Field(
        default=None,
        description="With dedup false: the file's content identity where known (git:<blob id>, "
        "zoekt:<checksum>), for a caller that merges copies itself.",
    )


class Limits(BaseModel):
    model_config = _STRICT
    files: int
    offset: int
    hit_budget: int
    char_budget: int
    hit_lines: int | None = Field(description="Lines each hit of this page lists at most (null: all).")


class NextAction(BaseModel):
    """One call that widens this answer; make it verbatim."""

    model_config = _STRICT
    reason: str
    tool: str
    args: dict[str, Any]


class NamespaceStatus(BaseModel):
    model_config = _STRICT
    name: str
    backend: str
    status: Status
    took_ms: int
    files: int
    hits: int
    error: str | None = None


class SearchResponse(BaseModel):
    """A page of ranked file groups, with what was withheld and how to get it."""

    model_config = _STRICT
    files: list[FileGroup]
    file_count: int
    weak_filtered: int
    truncated: bool
    limits: Limits
    next: Annotated[list[NextAction], Field(default_factory=list)]
    note: str | None = None
    namespaces: list[NamespaceStatus]
    took_ms: int
