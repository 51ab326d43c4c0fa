"""The request (SPEC §2): ``SearchRequest``, validated once, errors naming the field.

``parse_request`` turns raw JSON-like input into a request or an
:class:`~gateway.errors.InvalidRequest`; ``check_regex`` is the RE2 test every
regex meets before anything is sent anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from gateway.errors import InvalidRequest
from gateway.models import Mode
from gateway.query.criteria import (
    CURSOR_PATTERN,
    MAX_CURSOR,
    MAX_LANGUAGES,
    MAX_NAMESPACE_PATTERNS,
    Criteria,
    check_regex,
    criteria_of,
    effective_case,
)
from gateway.query.fields import (
    Glob,
    Language,
    NamespacePattern,
    Query,
    check_json_types,
    check_namespace_patterns,
    json_kinds,
)
from gateway.query.globs import MAX_GLOBS, check_globs
from gateway.query.languages import LANGUAGES, normalise
from gateway.sizing import DEFAULT_CHAR_BUDGET, DEFAULT_HIT_LINES, MAX_CHAR_BUDGET, MAX_HIT_LINES, MIN_CHAR_BUDGET

__all__ = ["Criteria", "SearchRequest", "check_regex", "did_you_mean", "parse_request", "problem_fields"]


class SearchRequest(BaseModel):
    """What a caller asks. Unknown fields are rejected so a typo never widens a search."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={"examples": [{"query": "import", "files": 10}]},  # matches in most checkouts
    )

    query: Query
    mode: Mode = Field(default="exact", description="exact | regex (RE2) | semantic.")
    namespaces: list[NamespacePattern] = Field(
        default_factory=list,
        max_length=MAX_NAMESPACE_PATTERNS,
        description="Namespace glob patterns; empty means every visible namespace.",
    )
    paths: list[Glob] = Field(
        default_factory=list,
        max_length=MAX_GLOBS,
        description="Globs on the file path inside the namespace, as rg's -g reads them (docs/api.md): a leading "
        "'!' excludes, and the last glob matching a path decides.",
    )
    languages: list[Language] = Field(
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
    char_budget: int = Field(
        default=DEFAULT_CHAR_BUDGET,
        ge=MIN_CHAR_BUDGET,
        le=MAX_CHAR_BUDGET,
        description="A further file joins the page only while the page's hits stay within about this many "
        "characters of JSON; the first file always joins, its hits' lines cut (hit_lines) to fit.",
    )
    hit_lines: int | None = Field(
        default=DEFAULT_HIT_LINES,
        ge=0,
        le=MAX_HIT_LINES,
        description="Each hit lists its first matched lines up to this many (line_count says how "
        "many it has; read_file reads its span); null lists every one.",
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
    dedup: bool = Field(
        default=True,
        description="Identical files in several namespaces are one file group (duplicates lists the other "
        "copies); false shows every copy.",
    )

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            check_json_types(_KINDS, data)
        return data

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
        return check_namespace_patterns(value)

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
        key = (self.query, self.mode, self.case_sensitive, self.paths, self.languages, self.dedup)
        private = self.__pydantic_private__  # read as a dict: pydantic's __getattr__ took ~5 µs a call
        cached = private.get("_criteria") if private is not None else None
        if cached is None or cached[0] != key:
            cached = (key, criteria_of(self))
            self._criteria = cached
        return cached[1]

    def effective_case(self) -> bool:
        """Whether matching is case-sensitive: explicit, or smart case on the pattern."""
        return effective_case(self.criteria)

    def args(self, **changes: Any) -> dict[str, Any]:
        """This request as complete JSON args, with ``changes`` applied (for next actions)."""
        data = self.model_dump(mode="json")
        data.update(changes)
        return data


#: Each numeric and boolean field's JSON kind, which a request must give it as.
_KINDS = json_kinds(SearchRequest.model_fields)


def did_you_mean(word: str, known: Iterable[str], most: int = 2) -> str | None:
    """The one of ``known`` closest to ``word`` (Levenshtein distance), if it is within ``most``."""
    best, best_distance = None, most + 1
    for name in known:
        distance = _distance(word, name, best_distance)
        if distance < best_distance:
            best, best_distance = name, distance
    return best


def _distance(a: str, b: str, stop: int) -> int:
    """The edit distance of ``a`` and ``b``, or ``stop`` as soon as it cannot be less."""
    if abs(len(a) - len(b)) >= stop:
        return stop
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        if min(current) >= stop:
            return stop
        previous = current
    return min(previous[-1], stop)


def problem_fields(exc: ValidationError, fields: Iterable[str] = ()) -> tuple[str, str]:
    """The first error of a pydantic ValidationError as (field, message); an unknown field names the
    one of ``fields`` it is likely a typo of (within an edit distance of 2)."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"]) or "body"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        near = did_you_mean(loc, fields)
        msg = f"unknown field (did you mean {near!r}?)" if near else "unknown field"
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
        field, msg = problem_fields(exc, SearchRequest.model_fields)
        raise InvalidRequest(field, msg) from None
