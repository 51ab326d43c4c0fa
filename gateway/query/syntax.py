"""The query syntax (SPEC §7): the filters users type in Sourcegraph, GitHub and Zoekt.

Parsed here and nowhere else, so every surface reads a query alike::

    repo:flask lang:python -file:tests/ "repo:x" /def \\w+_for/

A filter is ``key:value`` (no space after the colon) with one of the keys of
:data:`KEYS`; ``-file:``/``-repo:`` (and their short forms) exclude. Any other
``word:`` is text (``std::vector``, ``http://x``, ``lang: str``). A term that starts
with a double quote and ends with one (followed by a space or the end) is literal
text, ``\\"`` standing for a quote and ``\\\\`` for a backslash inside it; a filter's
value may be quoted too (``file:"my dir/"``). The pattern is what is left, its terms
joined by single spaces; ``/RE/`` as the whole pattern is a regex.

A query with no filter, no quoted term and no ``/RE/`` is returned as it came,
spaces and all: such a query means exactly what it meant before the syntax existed.

:func:`literal` goes the other way: the query text that means ``text`` and nothing
else (for a backend that parses this syntax itself: a peer gateway).
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["KEYS", "Filter", "Key", "ParsedQuery", "escape", "literal", "parse_query", "with_pattern"]

#: What a regex must escape to match itself, in RE2 and in rg's regex crate alike (the crate's own
#: ``regex::escape`` set). Not ``re2.escape``: it escapes every punctuation mark, and ``\<`` and ``\>``,
#: literal to RE2, are word boundaries to rg (``Vec<u8>`` would match nothing).
_META = frozenset("\\.+*?()|[]{}^$#&-~")


def escape(text: str) -> str:
    """``text`` as a regex that matches exactly it, read alike by RE2 (validation) and rg."""
    return "".join("\\" + ch if ch in _META else ch for ch in text)


Key = Literal["repo", "file", "lang", "case", "dedup", "sym"]

#: Filter keys as typed -> what they filter.
KEYS: dict[str, Key] = {
    "repo": "repo",
    "r": "repo",
    "ns": "repo",
    "file": "file",
    "f": "file",
    "path": "file",
    "lang": "lang",
    "l": "lang",
    "language": "lang",
    "case": "case",
    "dedup": "dedup",
    "sym": "sym",
}
#: Keys whose ``-key:`` form excludes.
NEGATABLE: frozenset[Key] = frozenset({"repo", "file"})


class Filter(msgspec.Struct, frozen=True):
    """One ``key:value`` of a query: ``key`` canonical, ``negated`` for a ``-key:`` form."""

    key: Key
    value: str
    negated: bool
    text: str  # as typed


class ParsedQuery(msgspec.Struct, frozen=True):
    """A query taken apart: the pattern to search for, and the filters."""

    pattern: str
    #: The whole pattern was ``/RE/`` (``pattern`` is then RE).
    regex: bool
    filters: tuple[Filter, ...]

    def values(self, key: Key, *, negated: bool = False) -> tuple[str, ...]:
        """The values of the filters with this key (of the ``-key:`` forms when ``negated``)."""
        return tuple(f.value for f in self.filters if f.key == key and f.negated == negated)


class _Term(msgspec.Struct, frozen=True):
    text: str
    quoted: bool


def _quoted(text: str, start: int) -> tuple[str, int] | None:
    """The content of the quoted term opening at ``start`` and where it ends, if it is one."""
    out: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in '"\\':
            out.append(text[i + 1])
            i += 2
        elif c == '"':
            end = i + 1
            if end < n and not text[end].isspace():
                return None  # "ok"; and the like are code, not a quoted term
            return "".join(out), end
        else:
            out.append(c)
            i += 1
    return None


def _filter(text: str, start: int) -> tuple[Filter, int] | None:
    """The filter at ``start`` and where it ends, if the word there is one."""
    negated = text.startswith("-", start)
    colon = text.find(":", start)
    if colon < 0:
        return None
    word = text[start + negated : colon]
    key = KEYS.get(word)
    if key is None or (negated and key not in NEGATABLE):
        return None
    at = colon + 1
    if at >= len(text) or text[at].isspace():
        return None  # "lang: str" is text
    if text[at] == '"':
        found = _quoted(text, at)
        if found is not None:
            value, end = found
            if value:
                return Filter(key, value, negated, text[start:end]), end
    end = _word_end(text, at)
    return Filter(key, text[at:end], negated, text[start:end]), end


def _word_end(text: str, start: int) -> int:
    i = start
    while i < len(text) and not text[i].isspace():
        i += 1
    return i


def _scan(text: str) -> tuple[list[_Term], list[Filter]]:
    terms: list[_Term] = []
    filters: list[Filter] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        if text[i] == '"':
            found = _quoted(text, i)
            if found is not None:
                terms.append(_Term(found[0], True))
                i = found[1]
                continue
        got = _filter(text, i)
        if got is not None:
            filters.append(got[0])
            i = got[1]
            continue
        end = _word_end(text, i)
        terms.append(_Term(text[i:end], False))
        i = end
    return terms, filters


def _slashed(text: str) -> str | None:
    """RE of ``/RE/``, else None."""
    if len(text) >= 3 and text.startswith("/") and text.endswith("/"):
        return text[1:-1]
    return None


def parse_query(text: str, regex_mode: bool = False) -> ParsedQuery:
    """Take ``text`` apart. In regex mode a quoted term is escaped, so it stays literal."""
    terms, filters = _scan(text)
    quoted = any(t.quoted for t in terms)
    if not quoted:
        source = text.strip() if not filters else " ".join(t.text for t in terms)
        inner = _slashed(source)
        if inner is not None:
            return ParsedQuery(inner, True, tuple(filters))
        if not filters:
            return ParsedQuery(text, False, ())
    pattern = " ".join(escape(t.text) if t.quoted and regex_mode else t.text for t in terms)
    return ParsedQuery(pattern, False, tuple(filters))


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _plain(text: str, regex_mode: bool) -> bool:
    parsed = parse_query(text, regex_mode)
    return not parsed.filters and not parsed.regex and parsed.pattern == text


def literal(text: str, regex_mode: bool = False) -> str:
    """A query that means ``text`` (a literal, or in regex mode a regex) and nothing else."""
    if _plain(text, regex_mode):
        return text
    if not regex_mode:
        return _quote(text)
    # RE2 reads an escaped punctuation mark as itself: escape what the syntax would read
    out: list[str] = []
    i, n = 0, len(text)
    at_word = True
    while i < n:
        c = text[i]
        if at_word and not c.isspace():
            if c in '"/':
                out.append("\\")
            elif _filter(text, i) is not None:
                colon = text.index(":", i)
                out.append(text[i:colon] + "\\")
                i = colon
                c = text[i]
        out.append(c)
        at_word = c.isspace()
        i += 1
    return "".join(out)


def _hex(c: str) -> str:
    return f"\\x{{{ord(c):x}}}"


def _term(pattern: str, regex_mode: bool) -> str:
    """One term, free of spaces, that means ``pattern`` beside filters."""
    if not regex_mode:
        if pattern and not any(c.isspace() for c in pattern) and _plain(pattern, False):
            return pattern
        return _quote(pattern)
    protected = literal(pattern, True)
    out: list[str] = []
    i = 0
    while i < len(protected):
        c = protected[i]
        if c == "\\" and i + 1 < len(protected):
            escaped = protected[i + 1]  # an escaped space is a space: spelt out like any other
            out.append(_hex(escaped) if escaped.isspace() else protected[i : i + 2])
            i += 2
            continue
        out.append(_hex(c) if c.isspace() else c)
        i += 1
    return "".join(out)


def with_pattern(query: str, pattern: str, regex_mode: bool) -> str:
    """``query`` with its filters as typed, searching ``pattern`` (a regex when ``regex_mode``) instead."""
    filters = [f.text for f in parse_query(query, regex_mode).filters]
    if not filters:
        return literal(pattern, regex_mode)
    return " ".join([*filters, _term(pattern, regex_mode)])
