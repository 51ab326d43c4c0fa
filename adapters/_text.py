"""Text helpers shared by adapters that must find a term again in text a backend sent.

GitHub sends fragments without line numbers, GitLab sends chunks without offsets:
both find the term again line by line. Matching runs on RE2 (never Python ``re`` on
user input); columns are 1-based characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import re2

from gateway.models import Hit, SearchQuery, cut_text

__all__ = [
    "Matcher",
    "error_message",
    "glob_qualifier",
    "line_hits",
    "literal_matcher",
    "quote_term",
    "seconds_left",
    "split_lines",
]

_BARE_TERM = re.compile(r"[^\s\"'\\:()]+")
_KEYWORDS = frozenset({"AND", "OR", "NOT"})
_EXTENSION_GLOB = re.compile(r"(?:\*\*/)?\*\.([A-Za-z0-9_+-]+)")
_QUALIFIER_VALUE = re.compile(r"[A-Za-z0-9._/-]+")
_GLOB_CHARS = frozenset("*?[]{}\\!")


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


def glob_qualifier(glob: str, skip: int) -> tuple[str, str] | None:
    """A backend qualifier selecting a superset of ``glob``'s files, or ``None``.

    ``*.py`` / ``**/*.py`` -> ``("extension", "py")``; an anchored glob whose leading
    components are literal -> ``("path", dir)`` for the literal directories after the
    first ``skip`` components (the repository prefix of our file paths).
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
    dirs = literal[skip:]
    value = "/".join(dirs)
    if not dirs or not _QUALIFIER_VALUE.fullmatch(value):
        return None
    return ("path", value)


def seconds_left(query: SearchQuery, keep_spare: bool = True) -> float:
    """Seconds a request may take: up to the deadline, less a spare to return partial results in."""
    left = query.remaining()
    return left - min(0.1, left * 0.2) if keep_spare else left


def error_message(body: bytes, secret: str | None) -> str:
    """A short, single-line message from an API error body, with ``secret`` scrubbed."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    message: Any = (data.get("message") or data.get("error")) if isinstance(data, dict) else None
    if isinstance(message, dict):
        message = message.get("error") or "; ".join(f"{k}: {v}" for k, v in message.items())
    if not isinstance(message, str):
        return ""
    text = " ".join(message.split())[:160]
    return text.replace(secret, "***") if secret else text


def quote_term(text: str) -> str:
    """The term bare when it is one plain word, else quoted with ``\\`` and ``"`` escaped."""
    if _BARE_TERM.fullmatch(text) and text.upper() not in _KEYWORDS and not text.startswith("-"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
