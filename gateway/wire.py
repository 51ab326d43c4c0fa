"""The answer (SPEC §3) and the ONE conversion that builds it.

The answer is built as plain JSON-ready dicts by :func:`build_response`, the only
function that turns a ranked answer into wire form, so HTTP, MCP and the CLI cannot
drift apart. ``SearchResponse`` and its parts describe it for JSON Schema (OpenAPI,
MCP output schema): pydantic models in :mod:`gateway.schema`, still importable from
here but imported only when asked for (a one-shot CLI search imports no pydantic).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, NamedTuple

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (_hashlib) at every one-shot search
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

from gateway.models import FLAT, Hit, LazyHits, gather
from gateway.rank import Ranked, RankedFile
from gateway.signals import QueryMatcher

if TYPE_CHECKING:  # types only: the one-shot CLI builds its answer without pydantic (gateway.cli.quick)
    from gateway.query.request import SearchRequest
    from gateway.schema import FileGroup, Limits, LineItem, NamespaceStatus, NextAction, ResultItem, SearchResponse

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

_ID_MASK = (1 << 53) - 1


def _id_prefix(namespace: str, file_path: str) -> bytes:
    return f"{namespace}\x00{file_path}\x00".encode("utf-8", "replace")


def _hit_id(prefix: bytes, start_line: int, end_line: int) -> int:
    key = prefix + b"%d\x00%d" % (start_line, end_line)
    return int.from_bytes(blake2b(key, digest_size=7).digest(), "big") & _ID_MASK


#: The schema models, imported from :mod:`gateway.schema` when first asked for.
_SCHEMA = frozenset(
    ("FileGroup", "Limits", "LineItem", "NamespaceStatus", "NextAction", "ResultItem", "SearchResponse")
)


def __getattr__(name: str) -> Any:
    if name in _SCHEMA:
        from gateway import schema

        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the ONE conversion ------------------------------------------------------------


class _FileOf(NamedTuple):
    """What every hit of one file shares in its wire form, computed once per file."""

    namespace: str
    path: str
    name: str  # the file's base name
    id_prefix: bytes


def _own(
    of: _FileOf, hit: Hit, path_match: bool, with_context: bool, semantic: bool, listed: int | None
) -> dict[str, Any]:
    """The file's own hit (:func:`gateway.models.gather`): named by the file, its matched lines outside every
    declaration (none: a path match), the first ``listed`` of them (None: all)."""
    lines = hit.lines
    matched = ["content", "path"] if lines and path_match else ["content"] if lines else ["path"]
    item: dict[str, Any] = {
        "id": _hit_id(of.id_prefix, hit.line, hit.last_line),
        "qualified_name": of.path,
        "kind": "file",
        "name": of.name,
        "file_path": of.path,
        "start_line": hit.line,
        "end_line": hit.last_line,
        "matched": matched,
        "namespace": of.namespace,
    }
    if semantic:  # present iff the mode is semantic
        item["score"] = hit.score if hit.score is not None else 0.0
    _list_lines(item, lines, with_context, listed)
    return item


def _list_lines(item: dict[str, Any], lines: tuple[Hit, ...], with_context: bool, listed: int | None) -> None:
    """A hit's ``line_count`` and its first ``listed`` lines (None: all; the key only where one is listed)."""
    item["line_count"] = len(lines)
    shown = lines if listed is None else lines[:listed]
    if shown:
        item["lines"] = [_line(line, with_context) for line in shown]


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
    of: _FileOf,
    hit: Hit,
    matches: QueryMatcher | None,
    path_match: bool,
    with_context: bool,
    semantic: bool,
    listed: int | None,
) -> dict[str, Any]:
    """A declaration hit: its span, names and intent, and its first ``listed`` matched lines (None:
    all) with how many it has (a semantic one: its reason). It has no text or column of its own
    (they were its first line's)."""
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
    if semantic:
        item["score"] = hit.score if hit.score is not None else 0.0
    _list_lines(item, hit.lines, with_context, listed)
    return item


def _group(
    item: RankedFile, request: SearchRequest, matches: QueryMatcher | None, listed: int | None
) -> dict[str, Any]:
    path = item.file.path
    namespace = item.namespace
    with_context = request.context_lines > 0
    semantic = request.mode == "semantic"
    of = _FileOf(namespace, path, posixpath.basename(path), _id_prefix(namespace, path))
    hits = [
        _own(of, hit, item.path_match, with_context, semantic, listed)
        if hit.kind in FLAT
        else _declaration(of, hit, matches, item.path_match, with_context, semantic, listed)
        for hit in gather(item.file.hits, path)
    ]
    group: dict[str, Any] = {"file_path": path, "namespace": namespace, "hit_count": len(hits), "hits": hits}
    if item.duplicates:
        group["duplicates"] = [{"namespace": ns, "file_path": copy} for ns, copy in item.duplicates]
    elif item.identity and not request.criteria.dedup:  # what a caller merging copies itself (a peer) merges by
        group["identity"] = item.identity
    return group


def _flat(item: RankedFile) -> bool:
    """Whether a file's hits are all lines or paths (no declaration among them: no name to match)."""
    hits = item.file.hits
    return isinstance(hits, LazyHits) or all(hit.kind in FLAT for hit in hits)


def _matcher(request: SearchRequest) -> QueryMatcher | None:
    try:
        return QueryMatcher(request)
    except Exception:  # a regex RE2 cannot take here: no name or intent signal
        return None


def build_response(request: SearchRequest, ranked: Ranked, took_ms: int) -> dict[str, Any]:
    """The answer to ``request`` as JSON-ready data: the only place an answer is built."""
    matches = _matcher(request) if any(not _flat(item) for item in ranked.page) else None
    groups = [_group(item, request, matches, ranked.hit_lines) for item in ranked.page]
    if ranked.bare:  # the first file alone passes the budget: its hits leave their group's fields to it
        for group in groups:
            for hit in group["hits"]:
                del hit["file_path"], hit["namespace"]
    answer: dict[str, Any] = {
        "files": groups,
        "file_count": ranked.file_count,
        "weak_filtered": ranked.weak_filtered,
        "truncated": ranked.truncated,
        "limits": {
            "files": request.files,
            "offset": request.offset,
            "hit_budget": request.hit_budget,
            "char_budget": request.char_budget,
            "hit_lines": ranked.hit_lines,
        },
    }
    if ranked.next:
        answer["next"] = ranked.next
    if ranked.note:
        answer["note"] = ranked.note
    answer["namespaces"] = ranked.statuses
    answer["took_ms"] = took_ms
    return answer
