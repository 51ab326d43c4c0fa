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

from gateway.models import Hit, LazyHits, Status
from gateway.rank import Ranked, RankedFile
from gateway.request import SearchRequest
from gateway.signals import QueryMatcher

__all__ = [
    "FileGroup",
    "Limits",
    "LineItem",
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


class LineItem(BaseModel):
    """One matched line of a declaration hit."""

    model_config = _STRICT
    line: int = Field(ge=1)
    column: int | None = Field(default=None, ge=1)
    text: str = Field(max_length=256)
    context: Context | None = None


class ResultItem(BaseModel):
    """One hit: a declaration with its matched lines, a matched line, or a path (``kind`` says which)."""

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
    lines: list[LineItem] | None = None


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


def _line(hit: Hit, with_context: bool) -> dict[str, Any]:
    line: dict[str, Any] = {"line": hit.line}
    if hit.column is not None:
        line["column"] = hit.column
    line["text"] = hit.text
    if with_context:
        line["context"] = {"before": list(hit.before), "after": list(hit.after)}
    return line


def _by_meaning(hit: Hit, name: str) -> list[str]:
    """The signals of a semantic hit: where its matched terms are (by meaning alone: its intent, else its name)."""
    matched = []
    if any(term in name.lower() for term in hit.terms):
        matched.append("name")
    if hit.intent and (any(term in hit.intent.lower() for term in hit.terms) or not matched):
        matched.append("intent")
    return matched or ["name"]


def _declaration(
    of: _FileOf, hit: Hit, matches: QueryMatcher | None, path_match: bool, with_context: bool, semantic: bool
) -> dict[str, Any]:
    """A declaration hit: its span, names and intent, and its matched lines (a semantic one: its reason)."""
    end = hit.last_line
    name = hit.name or hit.symbol.rpartition(".")[2]
    matched: list[str] = []
    if semantic and not hit.lines:
        matched = _by_meaning(hit, name)
    else:
        named = matches is not None and matches(name)
        if named:
            matched.append("name")
        if hit.intent and matches is not None and matches(hit.intent):
            matched.append("intent")
        if len(hit.lines) > (1 if named else 0):
            matched.append("content")
    if path_match:
        matched.append("path")
    item: dict[str, Any] = {
        "id": _hit_id(of.id_prefix, hit.line, end),
        "qualified_name": hit.symbol or name,
        "kind": hit.kind,
        "name": name,
        "file_path": of.path,
        "start_line": hit.line,
        "end_line": end,
    }
    if hit.intent:
        item["intent"] = hit.intent
    item["matched"] = matched or ["content"]
    if hit.reason:
        item["reason"] = hit.reason
        item["matched_terms"] = list(hit.terms)
    item["namespace"] = of.namespace
    item["text"] = hit.text
    if hit.column is not None:
        item["column"] = hit.column
    if with_context:
        item["context"] = {"before": list(hit.before), "after": list(hit.after)}
    if semantic:
        item["score"] = hit.score if hit.score is not None else 0.0
    if hit.lines:
        item["lines"] = [_line(line, with_context) for line in hit.lines]
    return item


def _group(item: RankedFile, request: SearchRequest, matches: QueryMatcher | None) -> dict[str, Any]:
    path = item.file.path
    namespace = item.namespace
    content = ["content", "path"] if item.path_match else ["content"]
    path_only = ["path"]
    with_context = request.context_lines > 0
    semantic = request.mode == "semantic"
    of = _FileOf(namespace, path, posixpath.basename(path), f"{namespace}:{path}:", _id_prefix(namespace, path))
    hits = [
        _item(of, hit, path_only if hit.kind == "file" else content, with_context, semantic)
        if hit.kind in ("line", "file")
        else _declaration(of, hit, matches, item.path_match, with_context, semantic)
        for hit in item.file.hits
    ]
    return {"file_path": path, "namespace": namespace, "hit_count": len(hits), "hits": hits}


def _flat(item: RankedFile) -> bool:
    """Whether a file's hits are all lines or paths (no declaration among them: no name to match)."""
    hits = item.file.hits
    return isinstance(hits, LazyHits) or all(hit.kind in ("line", "file") for hit in hits)


def _matcher(request: SearchRequest) -> QueryMatcher | None:
    try:
        return QueryMatcher(request)
    except Exception:  # a regex RE2 cannot take here: no name or intent signal
        return None


def build_response(request: SearchRequest, ranked: Ranked, took_ms: int) -> dict[str, Any]:
    """The answer to ``request`` as JSON-ready data: the only place an answer is built."""
    matches = _matcher(request) if any(not _flat(item) for item in ranked.page) else None
    answer: dict[str, Any] = {
        "files": [_group(item, request, matches) for item in ranked.page],
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
