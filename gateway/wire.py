"""The answer (SPEC §3) and the ONE conversion that builds it.

``SearchResponse`` and its parts describe the answer for JSON Schema (OpenAPI, MCP
output schema); the answer itself is built as plain JSON-ready dicts by
:func:`build_response`, the only function that turns a ranked answer into wire
form, so HTTP, MCP and the CLI cannot drift apart.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from gateway.models import Hit, Status
from gateway.rank import Ranked, RankedFile
from gateway.request import SearchRequest

__all__ = [
    "FileGroup",
    "Limits",
    "NamespaceStatus",
    "NextAction",
    "ResultItem",
    "SearchResponse",
    "build_response",
]

_STRICT = ConfigDict(
    frozen=True, extra="forbid", str_strip_whitespace=False, defer_build=True
)  # built for a schema, never on a search


_ID_MASK = (1 << 53) - 1


def _id_prefix(namespace: str, file_path: str) -> bytes:
    return f"{namespace}\x00{file_path}\x00".encode("utf-8", "replace")


def _hit_id(prefix: bytes, start_line: int, end_line: int) -> int:
    key = prefix + b"%d\x00%d" % (start_line, end_line)
    return int.from_bytes(hashlib.blake2b(key, digest_size=7).digest(), "big") & _ID_MASK


# --- the answer, for JSON Schema ------------------------------------------------------


class Context(BaseModel):
    model_config = _STRICT
    before: list[str]
    after: list[str]


class ResultItem(BaseModel):
    """One hit: a line span in one file, optionally a symbol."""

    model_config = _STRICT
    id: int = Field(ge=0, lt=1 << 53)
    qualified_name: str
    kind: str
    name: str
    file_path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    intent: str | None = None
    matched: list[Literal["content", "path", "name", "intent"]]
    reason: str | None = None
    matched_terms: list[str] | None = None
    namespace: str
    text: str = Field(max_length=256)
    column: int | None = Field(default=None, ge=1)
    context: Context | None = None
    score: float | None = Field(default=None, ge=0.0, le=1.0)


class FileGroup(BaseModel):
    """One file of one namespace with all of its hits."""

    model_config = _STRICT
    file_path: str
    namespace: str
    hit_count: int
    hits: list[ResultItem]


class Limits(BaseModel):
    model_config = _STRICT
    files: int
    offset: int
    hit_budget: int


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


# --- the ONE conversion ------------------------------------------------------------


class _FileOf(NamedTuple):
    """What every hit of one file shares in its wire form, computed once per file."""

    namespace: str
    path: str
    name: str  # the file's base name
    qualified: str  # "namespace:path:"
    id_prefix: bytes


def _item(of: _FileOf, hit: Hit, matched: list[str], with_context: bool, semantic: bool) -> dict[str, Any]:
    end = hit.last_line
    symbol = hit.symbol
    item: dict[str, Any] = {
        "id": _hit_id(of.id_prefix, hit.line, end),
        "qualified_name": f"{of.qualified}{symbol or hit.line}",
        "kind": hit.kind,
        "name": symbol or of.name,
        "file_path": of.path,
        "start_line": hit.line,
        "end_line": end,
        "matched": matched,
        "namespace": of.namespace,
        "text": hit.text,
    }
    if hit.column is not None:
        item["column"] = hit.column
    if with_context:
        item["context"] = {"before": list(hit.before), "after": list(hit.after)}
    if semantic:  # present iff the mode is semantic
        item["score"] = hit.score if hit.score is not None else 0.0
    return item


def _group(item: RankedFile, request: SearchRequest) -> dict[str, Any]:
    path = item.file.path
    namespace = item.namespace
    content = ["content", "path"] if item.path_match else ["content"]
    path_only = ["path"]
    with_context = request.context_lines > 0
    semantic = request.mode == "semantic"
    of = _FileOf(namespace, path, posixpath.basename(path), f"{namespace}:{path}:", _id_prefix(namespace, path))
    hits = [
        _item(of, hit, path_only if hit.kind == "file" else content, with_context, semantic) for hit in item.file.hits
    ]
    return {"file_path": path, "namespace": namespace, "hit_count": len(hits), "hits": hits}


def build_response(request: SearchRequest, ranked: Ranked, took_ms: int) -> dict[str, Any]:
    """The answer to ``request`` as JSON-ready data: the only place an answer is built."""
    answer: dict[str, Any] = {
        "files": [_group(item, request) for item in ranked.page],
        "file_count": ranked.file_count,
        "weak_filtered": ranked.weak_filtered,
        "truncated": ranked.truncated,
        "limits": {"files": request.files, "offset": request.offset, "hit_budget": request.hit_budget},
    }
    if ranked.next:
        answer["next"] = ranked.next
    if ranked.note:
        answer["note"] = ranked.note
    answer["namespaces"] = ranked.statuses
    answer["took_ms"] = took_ms
    return answer
