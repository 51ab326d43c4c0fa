"""The one-shot CLI's request, checked without pydantic: :class:`QuickRequest`.

A one-shot ``fedsearch search`` must not pay for pydantic (its import and the first
model's schema are most of what a search costs at start-up, bench/README.md), and
what it asks is typed already: argparse made the ints and the lists. :func:`quick_request`
takes such a request only when it certainly is a valid :class:`~gateway.query.request.SearchRequest`
(exact types, within every bound, criteria and regex sound) and otherwise answers None:
the caller then validates with pydantic, which accepts what is merely unusual and words
every error exactly as HTTP does. So bad input gets the same errors, by construction.

A :class:`QuickRequest` has what ranking, paging and the wire conversion read of a
request (the same fields, ``criteria``, ``effective_case()``, ``args()``), with the
values pydantic would have given it; ``tests/test_cli_quick.py`` holds it to
``SearchRequest`` field for field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from gateway.errors import InvalidRequest
from gateway.query.criteria import (
    MAX_LANGUAGES,
    MAX_NAMESPACE_PATTERNS,
    MAX_QUERY,
    Criteria,
    check_regex,
    criteria_of,
    effective_case,
)
from gateway.query.globs import MAX_GLOBS, check_globs
from gateway.query.languages import normalise
from gateway.sizing import DEFAULT_CHAR_BUDGET, DEFAULT_HIT_LINES, MAX_CHAR_BUDGET, MAX_HIT_LINES, MIN_CHAR_BUDGET

if TYPE_CHECKING:
    from gateway.models import Mode
    from gateway.query.request import SearchRequest

__all__ = ["BOUNDS", "DEFAULTS", "QuickRequest", "quick_request"]

#: SearchRequest's fields in its order, with their defaults (lists: empty).
DEFAULTS: dict[str, Any] = {
    "query": None,
    "mode": "exact",
    "namespaces": [],
    "paths": [],
    "languages": [],
    "case_sensitive": None,
    "context_lines": 0,
    "files": 20,
    "offset": 0,
    "hit_budget": 100,
    "char_budget": DEFAULT_CHAR_BUDGET,
    "hit_lines": DEFAULT_HIT_LINES,
    "timeout_ms": 5000,
    "threshold": 0.5,
    "cursor": None,
    "dedup": True,
}
#: The bounds of SearchRequest's numbers (inclusive).
BOUNDS: dict[str, tuple[float, float]] = {
    "context_lines": (0, 10),
    "files": (1, 200),
    "offset": (0, 100_000),
    "hit_budget": (1, 5000),
    "char_budget": (MIN_CHAR_BUDGET, MAX_CHAR_BUDGET),
    "hit_lines": (0, MAX_HIT_LINES),
    "timeout_ms": (100, 60_000),
    "threshold": (0.0, 1.0),
}
_LISTS = {"namespaces": MAX_NAMESPACE_PATTERNS, "paths": MAX_GLOBS, "languages": MAX_LANGUAGES}
#: Modes the one-shot search runs itself (semantic: where every namespace's intent index is built, issue 52).
_MODES = ("exact", "regex", "semantic")


class QuickRequest:
    """A valid request, as :class:`~gateway.query.request.SearchRequest` would hold it (see the module)."""

    __slots__ = (*DEFAULTS, "criteria")

    query: str
    mode: Mode
    namespaces: list[str]
    paths: list[str]
    languages: list[str]
    case_sensitive: bool | None
    context_lines: int
    files: int
    offset: int
    hit_budget: int
    char_budget: int
    hit_lines: int | None
    timeout_ms: int
    threshold: float
    cursor: str | None
    dedup: bool
    criteria: Criteria

    def __init__(self, values: Mapping[str, Any]) -> None:
        for name, default in DEFAULTS.items():
            value = values.get(name, default)
            setattr(self, name, list(value) if isinstance(value, list) else value)
        self.criteria = criteria_of(self)

    def effective_case(self) -> bool:
        """Whether matching is case-sensitive: explicit, or smart case on the pattern."""
        return effective_case(self.criteria)

    def args(self, **changes: Any) -> dict[str, Any]:
        """This request as complete JSON args, with ``changes`` applied (for next actions)."""
        data: dict[str, Any] = {}
        for name in DEFAULTS:
            value = getattr(self, name)
            data[name] = list(value) if isinstance(value, list) else value
        data.update(changes)
        return data

    def as_request(self) -> SearchRequest:
        """This request where ranking and the wire conversion take a SearchRequest: it reads as one."""
        return cast("SearchRequest", self)


def _strings(value: Any, most: int) -> bool:
    return type(value) is list and len(value) <= most and all(type(v) is str for v in value)


def _number(name: str, value: Any) -> bool:
    low, high = BOUNDS[name]
    if name == "hit_lines" and value is None:  # every line
        return True
    if name == "threshold":
        return type(value) in (int, float) and low <= value <= high
    return type(value) is int and low <= value <= high


def _checked(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """``data`` as SearchRequest's validators would leave it, or None where one might object."""
    if not data.keys() <= DEFAULTS.keys() or data.get("cursor") is not None:
        return None  # unknown fields are errors; a cursor is the service's (snapshots)
    query = data.get("query")
    if type(query) is not str or not 0 < len(query) <= MAX_QUERY or not query.strip() or "\x00" in query:
        return None
    if data.get("mode", "exact") not in _MODES or type(data.get("case_sensitive", False)) not in (bool, type(None)):
        return None
    if type(data.get("dedup", True)) is not bool:
        return None
    values = dict(data)
    for name, most in _LISTS.items():
        if name in data and not _strings(data[name], most):
            return None
    for name in BOUNDS:
        if name in data and not _number(name, data[name]):
            return None
    if "threshold" in values:
        values["threshold"] = float(values["threshold"])
    if any(not p or len(p) > 256 or "\x00" in p for p in values.get("namespaces", ())):
        return None
    try:
        check_globs(values.get("paths", ()))
    except InvalidRequest:
        return None
    languages: list[str] = []
    for name in values.get("languages", ()):
        lang = normalise(name)
        if lang is None:
            return None
        if lang not in languages:
            languages.append(lang)
    if "languages" in values:
        values["languages"] = languages
    return values


def quick_request(data: Mapping[str, Any]) -> QuickRequest | None:
    """The request ``data`` describes, when it certainly is valid; else None (ask pydantic)."""
    values = _checked(data)
    if values is None:
        return None
    try:
        request = QuickRequest(values)
        if request.criteria.mode == "regex":
            check_regex(request.criteria.pattern)
    except ValueError:
        return None
    if request.criteria.mode not in _MODES:
        return None
    return request
