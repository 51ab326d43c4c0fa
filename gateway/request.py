"""The request (SPEC §2): ``SearchRequest``, validated once, errors naming the field.

``parse_request`` turns raw JSON-like input into a request or an
:class:`~gateway.errors.InvalidRequest`; ``check_regex`` is the RE2 test every
regex meets before anything is sent anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from gateway.errors import InvalidRequest
from gateway.globs import MAX_GLOBS, check_globs, validate_glob
from gateway.languages import LANGUAGES, normalise
from gateway.models import Mode
from gateway.syntax import ParsedQuery, parse_query

__all__ = ["Criteria", "SearchRequest", "check_regex", "parse_request", "problem_fields"]

MAX_QUERY = 1000
MAX_NAMESPACE_PATTERNS = 64
MAX_LANGUAGES = 16
RE2_MAX_MEM = 8 << 20
MAX_CURSOR = 128
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"


@dataclass(frozen=True, slots=True)
class Criteria:
    """What a request searches for: its fields and its query's filters (SPEC §7) merged.

    Where the query and a field both filter, both must hold: namespaces in both
    ``repos`` and the request's ``namespaces``, languages in both, and a path that
    passes ``paths`` (what every backend applies) and ``also_paths`` too (include
    globs of the query when the request has its own: checked on what comes back).
    """

    pattern: str
    mode: Mode
    case_sensitive: bool | None
    repos: tuple[str, ...] = ()
    skip_repos: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    also_paths: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()

    @property
    def includes(self) -> bool:
        """Whether some include glob narrows the paths."""
        return bool(self.also_paths) or any(not p.startswith("!") for p in self.paths)


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
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CURSOR,
        pattern=CURSOR_PATTERN,
        description="Opaque; set only by next actions: later pages come from the first page's snapshot.",
    )

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

    _criteria: tuple[tuple[Any, ...], Criteria] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _syntax(self) -> SearchRequest:
        criteria = self.criteria  # model-level errors have no location: each names its field
        if criteria.mode == "regex":
            try:
                check_regex(criteria.pattern)
            except ValueError as exc:
                raise ValueError(f"query: {exc}") from None
        return self

    @property
    def criteria(self) -> Criteria:
        """The query's filters and the fields merged (computed once; raises ValueError naming a field)."""
        key = (self.query, self.mode, self.case_sensitive, self.paths, self.languages)
        if self._criteria is None or self._criteria[0] != key:
            self._criteria = (key, _criteria(self))
        return self._criteria[1]

    def effective_case(self) -> bool:
        """Whether matching is case-sensitive: explicit, or smart case on the pattern."""
        case = self.criteria.case_sensitive
        if case is not None:
            return case
        return any(ch.isupper() for ch in self.criteria.pattern)

    def args(self, **changes: Any) -> dict[str, Any]:
        """This request as complete JSON args, with ``changes`` applied (for next actions)."""
        data = self.model_dump(mode="json")
        data.update(changes)
        return data


_CASES: dict[str, bool | None] = {"yes": True, "no": False, "auto": None}


def _languages_of(parsed: ParsedQuery, request: SearchRequest) -> tuple[str, ...]:
    typed: list[str] = []
    for name in parsed.values("lang"):
        lang = normalise(name)
        if lang is None:
            raise ValueError(f"query: unknown language {name!r} (lang:{name})")
        if lang not in typed:
            typed.append(lang)
    if not typed or not request.languages:
        return tuple(typed or request.languages)
    both = tuple(lang for lang in request.languages if lang in typed)
    if not both:
        raise ValueError(f"languages: none of {request.languages} is among lang: {typed} in the query")
    return both


def _case_of(parsed: ParsedQuery, request: SearchRequest) -> bool | None:
    case = request.case_sensitive
    for value in parsed.values("case"):
        if value not in _CASES:
            raise ValueError(f"query: case:{value}: must be case:yes, case:no or case:auto")
        wanted = _CASES[value]
        if wanted is not None and case is not None and wanted != case:
            raise ValueError(f"case_sensitive: {case} conflicts with case:{value} in the query")
        case = case if wanted is None else wanted
    return case


def _paths_of(parsed: ParsedQuery, request: SearchRequest) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(globs every backend applies, include globs also checked on the answer)."""
    includes = parsed.values("file")
    excludes = tuple("!" + g for g in parsed.values("file", negated=True))
    for glob in (*includes, *excludes):
        try:
            validate_glob(glob)
        except ValueError as exc:
            raise ValueError(f"query: {exc}: file:{glob.removeprefix('!')}") from None
    if len(includes) + len(excludes) + len(request.paths) > MAX_GLOBS:
        raise ValueError(f"query: at most {MAX_GLOBS} path globs with the request's paths")
    own = any(not p.startswith("!") for p in request.paths)
    if includes and own:  # both must hold: the request's go to the backends, the query's are checked after
        return (*request.paths, *excludes), includes
    return (*includes, *request.paths, *excludes), ()


def _pattern_of(parsed: ParsedQuery, request: SearchRequest, symbols: tuple[str, ...]) -> tuple[str, Mode]:
    mode: Mode = request.mode
    if parsed.regex:
        if mode == "semantic":
            raise ValueError("query: /RE/ is a regex, which mode semantic does not search")
        return parsed.pattern, "regex"
    if parsed.pattern:
        return parsed.pattern, mode
    if not symbols:
        raise ValueError("query: nothing to search for besides the filters")
    if mode == "semantic":
        return " ".join(symbols), mode
    if len(symbols) == 1 and mode == "exact":
        return symbols[0], mode
    return "|".join(re2.escape(s) for s in symbols), "regex"


def _criteria(request: SearchRequest) -> Criteria:
    parsed = parse_query(request.query, request.mode == "regex")
    if not parsed.filters and not parsed.regex and parsed.pattern:
        return Criteria(
            parsed.pattern,
            request.mode,
            request.case_sensitive,
            paths=tuple(request.paths),
            languages=tuple(request.languages),
        )
    symbols = parsed.values("sym")
    pattern, mode = _pattern_of(parsed, request, symbols)
    paths, also = _paths_of(parsed, request)
    for pattern_glob in (*parsed.values("repo"), *parsed.values("repo", negated=True)):
        if len(pattern_glob) > 256:
            raise ValueError(f"query: namespace pattern longer than 256 characters: repo:{pattern_glob[:40]}…")
    return Criteria(
        pattern,
        mode,
        _case_of(parsed, request),
        repos=parsed.values("repo"),
        skip_repos=parsed.values("repo", negated=True),
        paths=paths,
        also_paths=also,
        languages=_languages_of(parsed, request),
        symbols=symbols,
    )


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


_NEWLINE_ESCAPES = ("\\n", "\\x0A", "\\x0a", "\\x{A}", "\\x{a}", "\\x{0A}", "\\x{0a}")


def _line_break(pattern: str) -> int | None:
    """Index of a line break the pattern names (a newline, ``\\n`` or ``\\x0A``), else None:
    searches are line by line, and ripgrep refuses such a pattern outright."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "\n":
            return i
        if pattern[i] == "\\":
            if pattern.startswith(_NEWLINE_ESCAPES, i):
                return i
            i += 2
            continue
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
    at = _line_break(pattern)
    if at is not None:
        raise ValueError(f"invalid regex: a line break at {at + 1} never matches: searches are line by line")


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
