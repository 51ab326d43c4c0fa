"""The wire contract (SPEC §2, §3): the request, the answer, and the ONE conversion.

``SearchRequest`` validates a caller's request once, naming the offending field.
``SearchResponse`` and its parts describe the answer for JSON Schema (OpenAPI, MCP
output schema); the answer itself is built as plain JSON-ready dicts by
:func:`build_response`, the only function that turns ranked outcomes into an
answer, so HTTP, MCP and the CLI cannot drift apart.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.errors import InvalidRequest
from gateway.globs import MAX_GLOBS, check_globs
from gateway.languages import normalise
from gateway.models import Hit, Mode

if TYPE_CHECKING:
    from gateway.rank import Ranked, RankedFile

__all__ = [
    "FileGroup",
    "Limits",
    "NamespaceStatus",
    "NextAction",
    "ResultItem",
    "SearchRequest",
    "SearchResponse",
    "build_response",
    "hit_id",
    "parse_request",
    "problem_fields",
]

MAX_QUERY = 1000
MAX_NAMESPACE_PATTERNS = 64
MAX_LANGUAGES = 16
RE2_MAX_MEM = 8 << 20

_STRICT = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class SearchRequest(BaseModel):
    """What a caller asks. Unknown fields are rejected so a typo never widens a search."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={"examples": [{"query": "register_widget", "files": 10}]},
    )

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY,
        description="What to look for: a literal string (exact), an RE2 regex, or a phrase (semantic).",
    )
    mode: Mode = Field(default="exact", description="exact | regex (RE2) | semantic.")
    namespaces: list[str] = Field(
        default_factory=list,
        max_length=MAX_NAMESPACE_PATTERNS,
        description="Namespace glob patterns; empty means every visible namespace.",
    )
    paths: list[str] = Field(
        default_factory=list,
        max_length=MAX_GLOBS,
        description="Include globs on the file path; a leading '!' excludes.",
    )
    languages: list[str] = Field(
        default_factory=list,
        max_length=MAX_LANGUAGES,
        description="Languages by file extension, e.g. python, go.",
    )
    case_sensitive: bool | None = Field(
        default=None, description="null = smart case: sensitive iff the query has an upper-case letter."
    )
    context_lines: int = Field(default=0, ge=0, le=10, description="Lines before and after each hit.")
    files: int = Field(default=20, ge=1, le=200, description="Files per page.")
    offset: int = Field(default=0, ge=0, le=100_000, description="Files to skip (paging).")
    hit_budget: int = Field(
        default=100, ge=1, le=5000, description="A further file joins the page only within this many hits."
    )
    timeout_ms: int = Field(default=5000, ge=100, le=60_000, description="The whole answer's deadline.")
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="Semantic hits below it are weak.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if "\x00" in value:
            raise ValueError("must not contain NUL")
        return value

    @field_validator("namespaces")
    @classmethod
    def _namespace_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern or len(pattern) > 256 or "\x00" in pattern:
                raise ValueError(f"invalid namespace pattern {pattern!r}")
        return value

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        try:
            check_globs(value)
        except InvalidRequest as exc:
            raise ValueError(exc.message) from None
        return value

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        out: list[str] = []
        for name in value:
            lang = normalise(name)
            if lang is None:
                raise ValueError(f"unknown language {name!r}")
            if lang not in out:
                out.append(lang)
        return out

    @model_validator(mode="after")
    def _regex(self) -> SearchRequest:
        if self.mode == "regex":
            try:
                check_regex(self.query)
            except ValueError as exc:  # model-level errors have no location: name it
                raise ValueError(f"query: {exc}") from None
        return self

    def effective_case(self) -> bool:
        """Whether matching is case-sensitive: explicit, or smart case."""
        if self.case_sensitive is not None:
            return self.case_sensitive
        return any(ch.isupper() for ch in self.query)

    def args(self, **changes: Any) -> dict[str, Any]:
        """This request as complete JSON args, with ``changes`` applied (for next actions)."""
        data = self.model_dump(mode="json")
        data.update(changes)
        return data


_RE2_HINTS = (
    *((f"invalid escape sequence: \\{d}", "backreferences are not supported (RE2)") for d in "123456789"),
    ("invalid perl operator: (?=", "lookahead is not supported (RE2)"),
    ("invalid perl operator: (?!", "negative lookahead is not supported (RE2)"),
    ("invalid perl operator: (?<", "lookbehind is not supported (RE2)"),
    ("invalid repetition size", "repetition counts are limited to 1000 (RE2)"),
)


def _re2_reason(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    for needle, hint in _RE2_HINTS:
        if needle in text:
            return f"{text} ({hint})"
    return text


def _bare_brace(pattern: str) -> int | None:
    """Index of what RE2 accepts but ripgrep and other backends refuse, else None: a ``{``
    that is not a repetition ``{n}``, ``{n,}``, ``{n,m}`` (RE2 reads it literally), or the
    escapes ``\\C``, ``\\Q``, ``\\E``; classes and other escapes are skipped."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and pattern[i + 1] in "CQE":
                return i
            if i + 2 < n and pattern[i + 1] in "pP" and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                i = n if end < 0 else end + 1
                continue
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("[^]", i) or pattern.startswith("[]", i):
                i += 3 if pattern[i + 1] == "^" else 2
                continue
        elif c == "{":
            j = i + 1
            while j < n and pattern[j].isdigit():
                j += 1
            digits = j > i + 1
            if j < n and pattern[j] == ",":
                j += 1
                while j < n and pattern[j].isdigit():
                    j += 1
            if not digits or j >= n or pattern[j] != "}":
                return i
            i = j
        i += 1
    return None


def check_regex(pattern: str) -> None:
    """Compile ``pattern`` with RE2 or raise ValueError with RE2's reason (and a hint)."""
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        raise ValueError(f"invalid RE2 regex: {_re2_reason(exc)}") from None
    at = _bare_brace(pattern)
    if at is not None and pattern[at] == "{":
        raise ValueError(f"invalid regex: '{{' at {at + 1} is not a repetition; write \\{{ for a literal brace")
    if at is not None:
        raise ValueError(f"invalid regex: {pattern[at:at + 2]!r} at {at + 1} is not supported by every backend")


def problem_fields(exc: ValidationError) -> tuple[str, str]:
    """The first error of a pydantic ValidationError as (field, message)."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"]) or "body"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
        if not err["loc"] and ": " in msg:
            loc, _, msg = msg.partition(": ")
    return loc, msg


def parse_request(data: Any) -> SearchRequest:
    """Validate raw JSON-like input into a SearchRequest, or raise InvalidRequest."""
    if not isinstance(data, Mapping):
        raise InvalidRequest("body", "must be a JSON object")
    try:
        return SearchRequest.model_validate(data)
    except ValidationError as exc:
        field, msg = problem_fields(exc)
        raise InvalidRequest(field, msg) from None


_ID_MASK = (1 << 53) - 1


def hit_id(namespace: str, file_path: str, start_line: int, end_line: int) -> int:
    """A stable id below 2**53 for one hit."""
    return _hit_id(_id_prefix(namespace, file_path), start_line, end_line)


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


Status = Literal["ok", "capped", "timeout", "error", "unavailable", "unsupported"]


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
