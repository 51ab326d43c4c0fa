"""The request (SPEC §2): ``SearchRequest``, validated once, errors naming the field.

``parse_request`` turns raw JSON-like input into a request or an
:class:`~gateway.errors.InvalidRequest`; ``check_regex`` is the RE2 test every
regex meets before anything is sent anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.errors import InvalidRequest
from gateway.globs import MAX_GLOBS, check_globs
from gateway.languages import LANGUAGES, normalise
from gateway.models import Mode

__all__ = ["SearchRequest", "check_regex", "parse_request", "problem_fields"]

MAX_QUERY = 1000
MAX_NAMESPACE_PATTERNS = 64
MAX_LANGUAGES = 16
RE2_MAX_MEM = 8 << 20


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
                raise ValueError(f"unknown language {name!r} (one of {', '.join(LANGUAGES)})")
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
        raise ValueError(f"invalid regex: {pattern[at : at + 2]!r} at {at + 1} is not supported by every backend")


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
