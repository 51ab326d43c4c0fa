"""What a request searches for, without pydantic: :class:`Criteria`, the RE2 check, the limits.

:func:`criteria_of` merges a request's fields and its query's filters (SPEC §7) into
the :class:`Criteria` every backend is asked with; :func:`check_regex` is the RE2 test
every regex meets before anything is sent anywhere. They read a request through
:class:`Fields`, so :class:`gateway.query.request.SearchRequest` (pydantic) and the one-shot
CLI's own request (:mod:`gateway.cli.quick`, which must not import pydantic) share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec
import re2

from gateway.query.globs import MAX_GLOBS, validate_glob
from gateway.query.languages import LANGUAGES, normalise
from gateway.query.syntax import ParsedQuery, escape, parse_query

if TYPE_CHECKING:
    from gateway.models import Mode, SearchQuery

__all__ = [
    "CURSOR_PATTERN",
    "DEPTH_FLOOR",
    "MAX_CURSOR",
    "MAX_LANGUAGES",
    "MAX_NAMESPACE_PATTERNS",
    "MAX_QUERY",
    "Criteria",
    "Fields",
    "backend_query",
    "check_regex",
    "criteria_of",
    "effective_case",
]

MAX_QUERY = 1000
MAX_NAMESPACE_PATTERNS = 64
MAX_LANGUAGES = 16
RE2_MAX_MEM = 8 << 20
MAX_CURSOR = 128
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"


class Criteria(msgspec.Struct, frozen=True):
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
    #: Copies of one content are one file group (SPEC §3, Duplicates): the field and ``dedup:`` both say so.
    dedup: bool = True

    @property
    def includes(self) -> bool:
        """Whether some include glob narrows the paths."""
        return bool(self.also_paths) or any(not p.startswith("!") for p in self.paths)


class Fields(Protocol):
    """The fields of a request that its criteria are made of."""

    @property
    def query(self) -> str: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def case_sensitive(self) -> bool | None: ...
    @property
    def dedup(self) -> bool: ...
    @property
    def paths(self) -> Sequence[str]: ...
    @property
    def languages(self) -> Sequence[str]: ...


class Asked(Protocol):
    """What a backend's query is made of: a validated request (:class:`gateway.query.request.SearchRequest`)."""

    @property
    def criteria(self) -> Criteria: ...
    @property
    def context_lines(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def timeout_ms(self) -> int: ...
    def effective_case(self) -> bool: ...


_CASES: dict[str, bool | None] = {"yes": True, "no": False, "auto": None}
_DEDUP: dict[str, bool] = {"yes": True, "no": False}


def _languages_of(parsed: ParsedQuery, request: Fields) -> tuple[str, ...]:
    typed: list[str] = []
    for name in parsed.values("lang"):
        lang = normalise(name)
        if lang is None:
            raise ValueError(f"query: unknown language {name!r} (lang:{name}; one of {', '.join(LANGUAGES)})")
        if lang not in typed:
            typed.append(lang)
    if not typed or not request.languages:
        return tuple(typed or request.languages)
    both = tuple(lang for lang in request.languages if lang in typed)
    if not both:
        raise ValueError(f"languages: none of {request.languages} is among lang: {typed} in the query")
    return both


def _case_of(parsed: ParsedQuery, request: Fields) -> bool | None:
    case = request.case_sensitive
    for value in parsed.values("case"):
        if value not in _CASES:
            raise ValueError(f"query: case:{value}: must be case:yes, case:no or case:auto")
        wanted = _CASES[value]
        if wanted is not None and case is not None and wanted != case:
            raise ValueError(f"case_sensitive: {case} conflicts with case:{value} in the query")
        case = case if wanted is None else wanted
    return case


def _dedup_of(parsed: ParsedQuery, request: Fields) -> bool:
    dedup = request.dedup
    for value in parsed.values("dedup"):
        wanted = _DEDUP.get(value)
        if wanted is None:
            raise ValueError(f"query: dedup:{value}: must be dedup:yes or dedup:no")
        if wanted and not request.dedup:
            raise ValueError(f"dedup: false conflicts with dedup:{value} in the query")
        dedup = dedup and wanted
    return dedup


def _paths_of(parsed: ParsedQuery, request: Fields) -> tuple[tuple[str, ...], tuple[str, ...]]:
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


def _pattern_of(parsed: ParsedQuery, request: Fields, symbols: tuple[str, ...]) -> tuple[str, Mode]:
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
    return "|".join(escape(s) for s in symbols), "regex"


def criteria_of(request: Fields) -> Criteria:
    """The criteria of a request (raises ValueError naming a field, ``field: message``)."""
    parsed = parse_query(request.query, request.mode == "regex")
    if not parsed.filters and not parsed.regex and parsed.pattern:
        return Criteria(
            parsed.pattern,
            request.mode,
            request.case_sensitive,
            paths=tuple(request.paths),
            languages=tuple(request.languages),
            dedup=request.dedup,
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
        dedup=_dedup_of(parsed, request),
    )


#: Ask each backend for this many files beyond the page, so fusion has depth.
DEPTH_FLOOR = 100


def backend_query(request: Asked, started: float, margin: float = 0.0) -> SearchQuery:
    """The backend-facing query of a request, with its absolute deadline (``started`` on
    ``time.monotonic()``), ``margin`` seconds before the request's own (kept for the answer's work)."""
    from gateway.models import SearchQuery

    criteria = request.criteria
    return SearchQuery(
        text=criteria.pattern,
        mode=criteria.mode,
        case_sensitive=request.effective_case(),
        paths=criteria.paths,
        languages=criteria.languages,
        context_lines=request.context_lines,
        max_files=max(DEPTH_FLOOR, request.offset + request.files),
        threshold=request.threshold,
        deadline=started + request.timeout_ms / 1000 - margin,
    )


def effective_case(criteria: Criteria) -> bool:
    """Whether matching is case-sensitive: explicit, or smart case on the pattern."""
    case = criteria.case_sensitive
    if case is not None:
        return case
    return any(ch.isupper() for ch in criteria.pattern)


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
