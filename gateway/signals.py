"""Code-aware signals shared by ranking and adapters: does a string hold the query, does a
line define something, is a path vendored, generated or minified.

Pure functions of their arguments, no I/O.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

from gateway.models import FileMatch
from gateway.request import SearchRequest

__all__ = [
    "DEFINITION_ASCII_PATTERN",
    "DEFINITION_SCAN",
    "QueryMatcher",
    "defines",
    "demoted",
    "looks_like_definition",
]

#: What a definition's line looks like (for ``re.match``). Possessive (``*+``, ``++``):
#: giving whitespace back can never help a keyword match, and not trying it makes a
#: miss on an indented line about 6x cheaper.
_DEFINITION_PATTERN = (
    r"\s*+(?:export\s++)?(?:default\s++)?(?:pub(?:\([\w:]+\))?\s++)?(?:public\s++|private\s++|protected\s++)?"
    r"(?:static\s++)?(?:async\s++)?(?:abstract\s++)?"
    r"(?:def|class|func|fn|struct|interface|type|trait|enum|impl|module|function|object|record|"
    r"message|service|protocol|typedef|macro_rules!|defmodule|defn|let|const|var|val)\b"
)
_DEFINITION = re.compile(_DEFINITION_PATTERN)
#: The same test for an ASCII line held as bytes (for an adapter that keeps its lines
#: undecoded until they make the page and sets ``FileMatch.definition`` itself). It
#: answers as the text test does on ASCII: str ``\\s`` also matches ``\\x1c``-``\\x1f``,
#: bytes ``\\s`` does not, so they are added.
DEFINITION_ASCII_PATTERN = _DEFINITION_PATTERN.replace(r"\s", r"[\s\x1c-\x1f]").encode("ascii")
_DEMOTED = re.compile(  # vendored, generated, minified
    r"(?:^|/)(?:vendor|vendored|node_modules|third_party|third-party|external|bower_components|"
    r"dist|site-packages|\.yarn)/"
    r"|\.min\.(?:js|css)$|\.bundle\.js$|[._-]pb2(?:_grpc)?\.pyi?$|\.pb\.(?:go|cc|h)$|"
    r"[._]generated\.|\.gen\.|_gen\.go$|(?:^|/)generated/|\.lock$|-lock\.json$|\.map$"
)


class QueryMatcher:
    """Whether a string contains the query, as the request's mode and case decide."""

    def __init__(self, request: SearchRequest) -> None:
        self.sensitive = request.effective_case()
        self.literal: str | None = None
        self.regex: Any = None
        criteria = request.criteria
        if criteria.mode == "regex":
            options = re2.Options()
            options.case_sensitive = self.sensitive
            options.log_errors = False
            self.regex = re2.compile(criteria.pattern, options)
        else:
            text = criteria.pattern
            self.literal = text if self.sensitive else text.lower()

    def __call__(self, value: str) -> bool:
        if self.literal is not None:
            return self.literal in (value if self.sensitive else value.lower())
        return bool(self.regex.search(value))


#: Hits scanned per file for a definition (a backend lists its best lines first).
DEFINITION_SCAN = 16


def looks_like_definition(text: str) -> bool:
    """Whether a line looks like it defines something (the test :func:`defines` applies)."""
    return _DEFINITION.match(text) is not None


def defines(file: FileMatch) -> bool:
    """The backend's word on a definition, else whether one of the first hits looks like one."""
    if file.definition is not None:
        return file.definition
    definition = _DEFINITION.match
    return any(
        hit.symbol or hit.kind not in ("line", "file") or definition(hit.text) for hit in file.hits[:DEFINITION_SCAN]
    )


@functools.lru_cache(maxsize=1 << 16)
def demoted(path: str) -> bool:
    """Whether a path is vendored, generated or minified (paths recur across queries: cached)."""
    return _DEMOTED.search(path) is not None
