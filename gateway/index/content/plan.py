"""Query planning: the grams every file holding a match of a search must contain.

The content index (:mod:`gateway.index.content.grams`) holds each file's distinct folded grams;
:func:`plan` turns a search into a boolean condition over them (a :data:`Need`) that
every file rg would report satisfies. The index only narrows: rg reads the candidates
and confirms, so a plan may let through files without a match (precision is secondary)
but must never keep out one with a match (soundness is absolute). ``None`` means nothing
can be required: the caller scans.

A literal asks for the grams of its bytes, ASCII-folded like the index. A case-sensitive
character is its UTF-8 bytes (rg confirms the case); a case-insensitive one is its folded
byte when ASCII (the index reads KELVIN SIGN and LONG S as ``k``/``s``, the only other
characters ``rg -i`` equates with ASCII letters) and breaks the literal otherwise, as its
case variants have other bytes. A regex is parsed with Python's own parser, after
refusing the syntax that Python could read as narrower than Rust's regex crate (rg's
engine) does: POSIX and nested classes, class set operations, ``\\p``, ``\\b{start}``,
``\\<``, whitespace in ``{ 2 }``, verbose mode, unknown escapes. The parse tree is then
analysed as in Russ Cox's "Regular Expression Matching with a Trigram Index": each node
is either a small *exact* set of the byte strings it can match, or unknown with a
:data:`Need`; concatenation multiplies exact sets while they stay small, alternation
unites them (else an :class:`Or`), ``x*`` requires nothing, ``x+`` what ``x`` requires.
Lookarounds, backreferences and anything unrecognised give ``None``. Plans are
normalised and bounded: at most :data:`MAX_OPTIONS` options an :class:`Or` (more: always
true) and :data:`MAX_GRAMS` grams a plan (grams are dropped from conjunctions only).

The same analysis over quads (``width`` :data:`~gateway.index.content.grams.QUAD`: four-byte
grams, cut and folded alike) plans a checkout's second bitset (:mod:`~gateway.index.content.summary`):
its :class:`Gram` codes are then quads, and only that bitset is asked them.

Soundness is over the bytes rg searches: a file rg transcodes (UTF-16 with a BOM) holds
other bytes than its matches, and is the index builder's to keep a candidate.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Collection, Iterable
from collections.abc import Set as AbstractSet
from typing import Any, TypeAlias

import msgspec

from gateway.index.content.grams import GRAM, fold, text_codes

__all__ = ["MAX_GRAMS", "MAX_OPTIONS", "And", "Gram", "Need", "Or", "grams_of", "plan", "satisfied"]

#: Options an :class:`Or` may hold; a larger one is always true.
MAX_OPTIONS = 64
#: Distinct grams a plan may mention.
MAX_GRAMS = 48
_MAX_EXACT = 64  # strings in an exact set
_MAX_LENGTH = 32  # bytes in a string of an exact set
_MAX_CLASS = 8  # characters of a class taken as an exact set
_MAX_PATTERN = 1024  # characters of a literal planned (a longer regex is scanned)

_parser: Any = importlib.import_module("re._parser")
_IGNORECASE: int = _parser.SRE_FLAG_IGNORECASE
_VERBOSE: int = _parser.SRE_FLAG_VERBOSE
_MAXREPEAT: int = _parser.MAXREPEAT
_SENSITIVE, _INSENSITIVE, _ALWAYS = 0, 1, 2  # the case of a region: "always" is the caller's -i


class Gram(msgspec.Struct, frozen=True):
    """The file holds this gram."""

    code: int


class And(msgspec.Struct, frozen=True):
    """The file satisfies every part."""

    parts: tuple[Need, ...]


class Or(msgspec.Struct, frozen=True):
    """The file satisfies at least one option."""

    options: tuple[Need, ...]


Need: TypeAlias = Gram | And | Or
_Cond: TypeAlias = Need | None  # None: always true
_Exact: TypeAlias = frozenset[bytes]
_EMPTY: _Exact = frozenset({b""})


def satisfied(need: Need, grams: Collection[int]) -> bool:
    """Whether a file with these grams (a set is best; anything else is read into one) meets ``need``."""
    if not isinstance(grams, AbstractSet):
        grams = set(grams)  # the index's numpy array, a list...
    if isinstance(need, Gram):
        return need.code in grams
    if isinstance(need, And):
        return all(satisfied(part, grams) for part in need.parts)
    return any(satisfied(option, grams) for option in need.options)


def grams_of(need: Need) -> frozenset[int]:
    """Every gram the plan mentions."""
    if isinstance(need, Gram):
        return frozenset({need.code})
    children = need.parts if isinstance(need, And) else need.options
    return frozenset().union(*(grams_of(child) for child in children))


def plan(text: str, *, regex: bool, case_sensitive: bool, width: int = GRAM) -> Need | None:
    """What every file holding a match contains; None when nothing can be required (the caller scans).
    ``width`` QUAD: the same analysis over quads (four-byte grams), whose :class:`Gram` codes are quads."""
    if any(ch in text for ch in "\n\r\0") or (regex and (len(text) > _MAX_PATTERN or _foreign(text))):
        return None
    try:
        text.encode("utf-8")  # a lone surrogate cannot reach rg
        if not regex:  # rg -F: one literal
            head = text[:_MAX_PATTERN]  # a match holds all of it; more would be trimmed anyway
            literal = ((_parser.LITERAL, ord(ch)) for ch in head)
            info = _concat(literal, _SENSITIVE if case_sensitive else _ALWAYS, width)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # Python's FutureWarnings mark syntax Rust reads otherwise
                tree = _parser.parse(text, 0)
            flags: int = tree.state.flags
            if flags & _VERBOSE:
                return None
            case = _ALWAYS if not case_sensitive else _INSENSITIVE if flags & _IGNORECASE else _SENSITIVE
            info = _concat(tree, case, width)
    except Exception:  # refused by Python, a lookaround, or anything unforeseen: scan
        return None
    return _trim(info.need(width), MAX_GRAMS)


def _char(code: int, insensitive: bool) -> bytes | None:
    """A character's folded bytes; None when unknown (line ends, NUL, non-ASCII in a case-insensitive region)."""
    if code in (0, 10, 13):
        return None
    if code < 128:
        return fold(bytes((code,)))
    return None if insensitive else chr(code).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Syntax that Rust's regex reads otherwise than Python's parser.

_ESCAPES = frozenset("dDwWsSbBAntrfvx")  # backslash + ASCII letter that means the same to both
_CLASS_ESCAPES = frozenset("dDwWsSntrfvx")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_QUANTIFIER = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")  # the only braces Python and Rust read alike


def _foreign(pattern: str) -> bool:
    """Whether ``pattern`` uses syntax that Python's parser could read narrower than Rust's regex."""
    i, n, in_class, first = 0, len(pattern), False, 0
    while i < n:
        ch, pair = pattern[i], pattern[i : i + 2]
        if ch == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped == "" or escaped in "<>" or escaped.isdigit():
                return True
            if escaped.isascii() and escaped.isalpha():
                if escaped not in (_CLASS_ESCAPES if in_class else _ESCAPES):
                    return True
                if escaped == "x":
                    if not _HEX2.fullmatch(pattern, i + 2, i + 4):
                        return True
                    i += 2
                if escaped in "bB" and pattern[i + 2 : i + 3] == "{":  # \b{start} and kin
                    return True
            i += 2
        elif in_class:
            if ch == "[" or pair in ("&&", "--", "~~", "||"):
                return True
            in_class = not (ch == "]" and i > first)
            i += 1
        elif ch == "[":
            i += 2 if pattern[i + 1 : i + 2] == "^" else 1
            if pattern[i : i + 1] == ":":
                return True  # [:alpha:] reads as a POSIX class to some engines
            in_class, first = True, i  # a "]" first is a member
        elif ch == "{" and not _QUANTIFIER.match(pattern, i):
            return True  # Rust reads "a{ 2 }" as a quantifier, Python as a literal
        elif pair == "(?":
            j = i + 2
            while j < n and (pattern[j].isalpha() or pattern[j] == "-") and pattern[j] != "P":
                if pattern[j] not in "ims-":
                    return True  # (?x) (?U) (?u) (?a) ...
                j += 1
            if pattern[j : j + 1] == "#":
                return True
            i = j
        else:
            i += 1
    return in_class


# ---------------------------------------------------------------------------------------------
# The analysis of the parse tree.


class _Info(msgspec.Struct, frozen=True):
    """What a node can match: exactly one of ``exact`` (its strings) or ``required`` (its need)."""

    exact: _Exact | None = None
    required: _Cond = None

    def need(self, width: int) -> _Cond:
        return _need_of(self.exact, width) if self.exact is not None else self.required


_UNKNOWN = _Info()


def _product(left: _Exact, right: _Exact) -> _Exact | None:
    """Every concatenation, or None when too many or too long."""
    if len(left) * len(right) > _MAX_EXACT or max(map(len, left)) + max(map(len, right)) > _MAX_LENGTH:
        return None
    return frozenset(a + b for a in left for b in right)


def _concat(items: Iterable[tuple[Any, Any]], case: int, width: int) -> _Info:
    """A sequence: exact sets multiplied while small, then turned into needs and ANDed."""
    current, exact, needs = _EMPTY, True, []
    for op, av in items:
        info = _node(op, av, case, width)
        if info.exact is None:
            needs += [_need_of(current, width), info.required]
            current, exact = _EMPTY, False
            continue
        product = _product(current, info.exact)
        if product is None:  # keep the last bytes of each string: grams across the cut
            needs.append(_need_of(current, width))
            product = _product(frozenset(s[1 - width :] for s in current), info.exact)
            current, exact = info.exact if product is None else product, False
        else:
            current = product
    return _Info(exact=current) if exact else _Info(required=_and([*needs, _need_of(current, width)]))


def _node(op: Any, av: Any, case: int, width: int) -> _Info:
    name = op.name
    if name == "LITERAL":
        known = _char(av, case != _SENSITIVE)
        return _UNKNOWN if known is None else _Info(exact=frozenset({known}))
    if name == "IN":
        return _class(av, case != _SENSITIVE)
    if name == "AT":  # ^ $ \b \B \A: zero-width
        return _Info(exact=_EMPTY)
    if name in ("ANY", "NOT_LITERAL", "CATEGORY"):
        return _UNKNOWN
    if name == "BRANCH":
        infos = [_concat(branch, case, width) for branch in av[1]]
        if all(info.exact is not None for info in infos):
            union = frozenset().union(*(info.exact or () for info in infos))
            if len(union) <= _MAX_EXACT:
                return _Info(exact=union)
        return _Info(required=_or(info.need(width) for info in infos))
    if name == "SUBPATTERN":
        _group, add, remove, body = av
        if (add | remove) & _VERBOSE:
            raise ValueError("verbose")
        if case != _ALWAYS:  # (?i:...) and (?-i:...); the caller's -i holds everywhere
            case = _INSENSITIVE if add & _IGNORECASE else _SENSITIVE if remove & _IGNORECASE else case
        return _concat(body, case, width)
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        return _repeat(av[0], av[1], _concat(av[2], case, width), width)
    raise ValueError(f"cannot plan {name}")  # lookarounds, backreferences, atomic, possessive


def _class(items: Any, insensitive: bool) -> _Info:
    """A small class of plain characters as an exact set; anything else unknown."""
    members: set[bytes] = set()
    for op, av in items:
        if op.name == "LITERAL":
            codes = [av]
        elif op.name == "RANGE" and av[1] - av[0] < _MAX_CLASS:
            codes = list(range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY, large ranges
            return _UNKNOWN
        for code in codes:
            known = _char(code, insensitive)
            if known is None:
                return _UNKNOWN
            members.add(known)
    return _Info(exact=frozenset(members)) if 0 < len(members) <= _MAX_CLASS else _UNKNOWN


def _repeat(low: int, high: int, child: _Info, width: int) -> _Info:
    """``x{low,high}``: exact while the counts are few and small, else what one ``x`` requires."""
    if high == 0:
        return _Info(exact=_EMPTY)
    if child.exact is not None and high != _MAXREPEAT and high <= _MAX_EXACT:
        union: set[bytes] = set()
        power: _Exact | None = _EMPTY
        for count in range(high + 1):
            if power is None:
                break
            if count >= low:
                union |= power
            if count < high:
                power = _product(power, child.exact)
        else:
            if len(union) <= _MAX_EXACT:
                return _Info(exact=frozenset(union))
    return _UNKNOWN if low == 0 else _Info(required=child.need(width))


# ---------------------------------------------------------------------------------------------
# Building and bounding needs.


def _grams(data: bytes, width: int) -> list[int]:
    """The grams of ``data`` in the order they occur, each once."""
    return list(dict.fromkeys(text_codes(data, width)))


def _need_of(strings: Iterable[bytes], width: int) -> _Cond:
    """A match holds one of ``strings``: an Or over them of the AND of their grams."""
    return _or(_and(Gram(code) for code in _grams(s, width)) if len(s) >= width else None for s in sorted(strings))


def _terms(need: Need) -> tuple[Need, ...]:
    """What ``need`` ANDs: its parts, or itself."""
    return need.parts if isinstance(need, And) else (need,)


def _and(parts: Iterable[_Cond]) -> _Cond:
    seen: dict[Need, None] = {}
    for part in parts:
        if part is not None:
            seen.update(dict.fromkeys(_terms(part)))
    if len(seen) <= 1:
        return next(iter(seen), None)
    return And(tuple(seen))


def _or(options: Iterable[_Cond]) -> _Cond:
    by_terms: dict[frozenset[Need], Need] = {}
    for option in options:
        if option is None:
            return None
        for each in option.options if isinstance(option, Or) else (option,):
            by_terms.setdefault(frozenset(_terms(each)), each)
            if len(by_terms) > 4 * MAX_OPTIONS:
                return None
    # A or (A and B) is A: drop the options that hold every term of another.
    kept = [need for terms, need in by_terms.items() if not any(other < terms for other in by_terms)]
    if not kept or len(kept) > MAX_OPTIONS:
        return None
    if len(kept) == 1:
        return kept[0]
    # (A and X) or (B and X) is X and (A or B).
    common = frozenset.intersection(*(frozenset(_terms(need)) for need in kept))
    if not common:
        return Or(tuple(kept))
    rest = _or(_and(term for term in _terms(need) if term not in common) for need in kept)
    return _and([*(term for term in _terms(kept[0]) if term in common), rest])


def _trim(need: _Cond, budget: int) -> _Cond:
    """``need`` weakened to mention at most ``budget`` grams: parts of ANDs dropped, never options."""
    if need is None or len(grams_of(need)) <= budget:
        return need
    if isinstance(need, Or):
        share = budget // len(need.options)
        return _or(_trim(option, share) for option in need.options) if share else None
    if isinstance(need, Gram):
        return None  # budget 0
    kept: list[Need] = []
    used: frozenset[int] = frozenset()
    for part in need.parts:
        trimmed = _trim(part, budget - len(used))
        if trimmed is not None and len(used | grams_of(trimmed)) <= budget:
            kept.append(trimmed)
            used |= grams_of(trimmed)
    return _and(kept)
