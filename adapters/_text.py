"""Pure helpers adapters share to write a backend's query and to read its answer.

Writing: the path and language filters as regexes (:func:`path_regexes`, one
:func:`glob_union` of ``(?:...)`` alternatives), a literal as a Go regex
(:func:`go_quote_meta`), a term bare or quoted (:func:`quote_term`), a glob as a
qualifier (:func:`glob_qualifier`). A backend's own path filter may only ever keep more
than :class:`gateway.query.globs.PathFilter`, which always runs last on what it sends: the
include and language regexes match at least every file the globs keep, the exclude regex
only paths they certainly drop (the excludes no later include overrides), and a qualifier
selects a superset.

Reading: GitHub sends fragments without line numbers, GitLab sends chunks without
offsets: both find the term again line by line (:func:`literal_matcher`,
:func:`line_hits`). Matching runs on RE2 (never Python ``re`` on user input); columns
are 1-based characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import re2

from gateway.models import Hit, SearchQuery, cut_text
from gateway.query.globs import drops_at_most, keeps_at_least
from gateway.query.languages import globs_for

__all__ = [
    "Matcher",
    "PathRegexes",
    "glob_qualifier",
    "glob_union",
    "go_quote_meta",
    "line_hits",
    "literal_matcher",
    "path_regexes",
    "quote_term",
    "seconds_left",
    "split_lines",
]

_BARE_TERM = re.compile(r"[^\s\"'\\:()]+")
_KEYWORDS = frozenset({"AND", "OR", "NOT"})
_EXTENSION_GLOB = re.compile(r"(?:\*\*/)?\*\.([A-Za-z0-9_+-]+)")
_QUALIFIER_VALUE = re.compile(r"[A-Za-z0-9._/-]+")
_GLOB_CHARS = frozenset("*?[]{}\\!")
_GO_META = frozenset("\\.+*?()|[]{}^$")


#: The 0-based character index of the first match in a line, or ``None``.
Matcher = Callable[[str], int | None]


def literal_matcher(text: str, case_sensitive: bool) -> Matcher:
    """Find ``text`` literally; case-insensitively unless ``case_sensitive``."""
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False
    pattern = re2.compile(re2.escape(text), options)

    def find(line: str) -> int | None:
        match = pattern.search(line)
        return None if match is None else match.start()

    return find


def split_lines(text: str) -> list[str]:
    """Lines as git numbers them: split on ``\\n`` only, a final newline ends the last line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def line_hits(lines: Sequence[str], find: Matcher, first_line: int = 1, context: int = 0) -> list[Hit]:
    """One hit per matching line of ``lines`` (the first numbered ``first_line``), with context."""
    hits: list[Hit] = []
    for i, line in enumerate(lines):
        col = find(line)
        if col is None:
            continue
        before = tuple(cut_text(x) for x in lines[max(0, i - context) : i]) if context else ()
        after = tuple(cut_text(x) for x in lines[i + 1 : i + 1 + context]) if context else ()
        number = first_line + i
        hits.append(
            Hit(
                line=number,
                end_line=number,
                column=col + 1,
                text=cut_text(line, col + 1),
                before=before,
                after=after,
            )
        )
    return hits


def glob_qualifier(glob: str) -> tuple[str, str] | None:
    """A backend qualifier selecting a superset of ``glob``'s files (a path inside a
    repository), or ``None``.

    ``*.py`` / ``**/*.py`` -> ``("extension", "py")``; an anchored glob whose leading
    components are literal -> ``("path", dir)`` for those literal directories.
    """
    glob = glob.strip("/")
    match = _EXTENSION_GLOB.fullmatch(glob)
    if match:
        return ("extension", match.group(1))
    if "/" not in glob:
        return None
    parts = glob.split("/")
    literal: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part) or part in ("", ".", ".."):
            break
        literal.append(part)
    if len(literal) == len(parts):
        literal.pop()  # the last component may be a file: keep only its directory
    value = "/".join(literal)
    if not literal or not _QUALIFIER_VALUE.fullmatch(value):
        return None
    return ("path", value)


def seconds_left(query: SearchQuery, keep_spare: bool = True) -> float:
    """Seconds a request may take: up to the deadline, less a spare to return partial results in."""
    left = query.remaining()
    return left - min(0.1, left * 0.2) if keep_spare else left


def quote_term(text: str) -> str:
    """The term bare when it is one plain word, else quoted with ``\\`` and ``"`` escaped."""
    if _BARE_TERM.fullmatch(text) and text.upper() not in _KEYWORDS and not text.startswith("-"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_quote_meta(text: str) -> str:
    """``text`` as a regular expression matching itself (Go's ``regexp.QuoteMeta``)."""
    return "".join("\\" + c if c in _GO_META else c for c in text)


def glob_union(globs: Iterable[str]) -> str:
    """One regex matching at least every file that one of the include ``globs`` matches (empty if
    there are none): :func:`gateway.query.globs.keeps_at_least`."""
    return keeps_at_least(globs)


@dataclass(frozen=True, slots=True)
class PathRegexes:
    """A query's path filters as regexes for a backend that takes them: each empty when there is none."""

    include: str  # at least every file the include globs keep
    language: str  # at least every file of the languages
    exclude: str  # only paths the ``!`` globs certainly drop


def path_regexes(query: SearchQuery) -> PathRegexes:
    """The query's include, language and exclude globs, each as one regex a remote backend may filter
    with: never dropping a file :class:`~gateway.query.globs.PathFilter` keeps."""
    return PathRegexes(
        include=glob_union(g for g in query.paths if not g.startswith("!")),
        language=glob_union(globs_for(query.languages)),
        exclude=drops_at_most(query.paths),
    )
