"""Path globs as rg's ``-g`` reads them, compiled to RE2: the one meaning ``paths`` has everywhere.

A request's ``paths`` are applied in many places: by rg itself (the excludes it can apply
exactly), to the output of every local and remote backend, to the content index's candidates,
to the CLI's listings. Each must keep the very files ``rg -g G1 -g G2 ...`` keeps when run at
the namespace's root, so the meaning is defined once, here, ported from rg's own code
(ripgrep 14.1: the ``ignore`` crate's gitignore lines used as overrides, globset 0.4.14's
syntax), and every surface calls it:

* A glob is one gitignore line. A leading ``!`` makes it an exclude (``\\!`` is a literal
  ``!``); trailing blanks are dropped unless escaped (``\\ ``); a leading ``#`` would make a
  comment rg skips, so it is refused (``\\#`` is a literal ``#``).
* Without a ``/`` (a trailing one aside) a glob matches the name of a file or folder at any
  depth (``*.py``, ``tests``); with one, a leading ``/`` too, it matches the whole path from the
  namespace's root (``src/*.py``, ``/setup.py``). ``**/x`` is ``x`` at any depth, ``a/**``
  everything inside ``a``, ``a/**/b`` ``b`` at any depth inside ``a``; ``*`` and ``?`` never match
  ``/`` (a ``**`` not between slashes is a ``*``); ``[...]`` is a class (``[!...]`` negated),
  ``{a,b}`` an alternation (not nested), ``\\`` escapes. A trailing ``/`` matches folders only.
* Globs are ordered: for a path, the last glob that matches it decides.
* Folders are judged as rg walks them: each folder of a file's path, from the root down, is
  skipped with all it holds when the last glob matching it is an exclude (``!tests`` and
  ``!tests/*`` both drop everything in ``tests/``). A folder matched by an include includes
  nothing by that: its files must match themselves (``src/*`` keeps ``src/x.py``, not
  ``src/a/x.py``).
* Then the file: the last glob matching it decides; matched by none, it is left out when
  some include glob exists and kept otherwise.
* Languages narrow on top: the file's name must match a glob of one of them.
* Matching is on a path's UTF-8 bytes, as rg's (a ``?`` is one byte).

The one difference with rg, on purpose: rg lets an include glob (and ``-t``) bring back hidden
and ignored files that match it; here a namespace's files are those rg searches by default,
and globs and languages only narrow them.

No Python ``re`` ever runs on a glob: globs are translated by hand and compiled with RE2.
:class:`PathFilter` asks one RE2 set per path in the common case (see its docstring).
Remote backends filter with regexes that may only keep more than PathFilter, which always
runs last on their results (:func:`keeps_at_least`, :func:`drops_at_most`).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import msgspec
import re2

from gateway.errors import InvalidRequest
from gateway.query.languages import globs_for

__all__ = [
    "MAX_BRACES",
    "MAX_GLOBS",
    "MAX_GLOB_LENGTH",
    "MAX_STARS",
    "PathFilter",
    "anywhere",
    "check_globs",
    "drops_at_most",
    "glob_to_regex",
    "keeps_at_least",
    "namespace_matcher",
    "rg_excludes",
    "skips_folder",
    "validate_glob",
]

MAX_GLOB_LENGTH = 256
MAX_GLOBS = 32
MAX_STARS = 16
MAX_BRACES = 8

Regex = Any  # google-re2 ships no type hints

#: What rg's ``str::trim_end`` drops from a glob's end (Unicode White_Space), unless ``\\ `` ends it.
_BLANKS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
#: RE2 syntax outside a class, escaped in str patterns.
_SPECIAL = frozenset("\\.^$|?*+()[]{}")
#: RE2 syntax inside a class, escaped in str patterns.
_CLASS_SPECIAL = frozenset("\\[]^-")
#: The highest ASCII code point: a byte at most this is a whole character of UTF-8.
_ASCII_MAX = 0x7F

# Tokens of a parsed glob (globset's): a literal is its one character; the others are these
# names (never one character), a class or an alternation.
_ANY = "any"  # ?
_ZERO_OR_MORE = "zero-or-more"  # *
_RECURSIVE_PREFIX = "recursive-prefix"  # **/ first
_RECURSIVE_SUFFIX = "recursive-suffix"  # /** last
_RECURSIVE_ZERO_OR_MORE = "recursive-zero-or-more"  # /**/


class _Class(NamedTuple):
    negated: bool
    ranges: tuple[tuple[str, str], ...]


class _Alternates(NamedTuple):
    branches: tuple[tuple[_Token, ...], ...]


_Token = str | _Class | _Alternates

#: The body of the glob ``**`` (globset's special case: everything).
_EVERYTHING = ".*"
_RECURSIVE = {
    _RECURSIVE_PREFIX: "(?:/?|.*/)",
    _RECURSIVE_SUFFIX: "/.*",
    _RECURSIVE_ZERO_OR_MORE: "(?:/|/.*/)",
}


class _Mode(enum.Enum):
    """How a glob becomes a regex: the exact one, or one a remote engine (UTF-8 characters) can run."""

    BYTES = "bytes"  # exact, on a path's UTF-8 bytes (RE2 in Latin-1): rg's own meaning
    TEXT = "text"  # on characters; as exact as characters allow (names, validation)
    WIDE = "wide"  # on characters; matches at least what BYTES matches
    NARROW = "narrow"  # on characters; matches only what BYTES matches


class _Never(Exception):
    """A NARROW regex cannot match anything (a class with no ASCII member)."""


# --- parsing (globset 0.4.14's Parser, as ripgrep 14.1 runs it) ---------------------------------


class _Parser:
    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.at = 0
        self.prev: str | None = None
        self.cur: str | None = None
        self.stack: list[list[_Token]] = [[]]

    def bump(self) -> str | None:
        self.prev = self.cur
        if self.at < len(self.glob):
            self.cur = self.glob[self.at]
            self.at += 1
        else:
            self.cur = None
        return self.cur

    def peek(self) -> str | None:
        return self.glob[self.at] if self.at < len(self.glob) else None

    def push(self, token: _Token) -> None:
        self.stack[-1].append(token)

    def parse(self) -> tuple[_Token, ...]:
        while (c := self.bump()) is not None:
            if c == "?":
                self.push(_ANY)
            elif c == "*":
                self.star()
            elif c == "[":
                self.klass()
            elif c == "{":
                if len(self.stack) > 1:
                    raise ValueError("invalid glob: nested '{' (rg refuses it)")
                self.stack.append([])
            elif c == "}":  # closes the alternation; one that none opened matches nothing (as globset)
                branches: list[tuple[_Token, ...]] = []
                while len(self.stack) >= 2:
                    branches.append(tuple(self.stack.pop()))
                self.push(_Alternates(tuple(reversed(branches))))
            elif c == "," and len(self.stack) > 1:
                self.stack.append([])
            elif c == "\\":
                escaped = self.bump()
                if escaped is None:
                    raise ValueError("invalid glob: a '\\' at its end escapes nothing")
                self.push(escaped)
            else:
                self.push(c)
        if len(self.stack) > 1:
            raise ValueError("unclosed '{' in glob")
        return tuple(self.stack[0])

    def star(self) -> None:
        prev = self.prev
        if self.peek() != "*":
            self.push(_ZERO_OR_MORE)
            return
        self.bump()
        if not self.stack[-1]:
            if self.peek() not in (None, "/"):
                self.push(_ZERO_OR_MORE)
                self.push(_ZERO_OR_MORE)
            else:
                self.push(_RECURSIVE_PREFIX)
                self.bump()
            return
        if prev != "/" and (len(self.stack) <= 1 or prev not in (",", "{")):
            self.push(_ZERO_OR_MORE)
            self.push(_ZERO_OR_MORE)
            return
        following = self.peek()
        if following is None:
            self.bump()
            suffix = True
        elif following in (",", "}") and len(self.stack) >= 2:
            suffix = True
        elif following == "/":
            self.bump()
            suffix = False
        else:
            self.push(_ZERO_OR_MORE)
            self.push(_ZERO_OR_MORE)
            return
        last = self.stack[-1].pop()
        if last in (_RECURSIVE_PREFIX, _RECURSIVE_SUFFIX):
            self.push(last)
        else:  # the '/' before it is part of it
            self.push(_RECURSIVE_SUFFIX if suffix else _RECURSIVE_ZERO_OR_MORE)

    def klass(self) -> None:
        negated = self.peek() in ("!", "^")
        if negated:
            self.bump()
        ranges: list[tuple[str, str]] = []
        first, in_range = True, False
        while True:
            c = self.bump()
            if c is None:
                raise ValueError("unclosed '[' in glob")
            if c == "]" and not first:
                break
            if c == "-" and not first and not in_range:
                in_range = True
            elif in_range:
                low = ranges[-1][0]
                if c < low:
                    raise ValueError(f"invalid glob: the range {low}-{c} is backwards")
                ranges[-1] = (low, c)
                in_range = False
            else:
                ranges.append((c, c))
            first = False
        if in_range:
            ranges.append(("-", "-"))
        self.push(_Class(negated, tuple(ranges)))


class _Rule(NamedTuple):
    """One glob as rg reads it: its tokens, whether it excludes, whether it matches folders only."""

    tokens: tuple[_Token, ...]
    exclude: bool
    only_dir: bool


def _line(glob: str) -> tuple[str, bool, bool]:
    """(the glob globset is given, exclude, folders only): the ``ignore`` crate's ``add_line``."""
    line = glob if glob.endswith("\\ ") else glob.rstrip(_BLANKS)
    exclude = absolute = False
    if line.startswith(("\\!", "\\#")):
        line = line[1:]
    else:
        if line.startswith("!"):
            exclude, line = True, line[1:]
        if line.startswith("/"):
            absolute, line = True, line[1:]
    only_dir = line.endswith("/")
    if only_dir:
        line = line[:-1]
        if line.endswith("\\"):
            line = line[:-1]
    if not line:
        raise ValueError("invalid glob: nothing but blanks and '/'")
    if not absolute and "/" not in line and not (line.startswith("**/") or line == "**"):
        line = "**/" + line  # a name at any depth
    if line.endswith("/**"):
        line += "/*"  # inside the folder, not the folder itself
    return line, exclude, only_dir


@functools.lru_cache(maxsize=4096)
def _rule(glob: str) -> _Rule:
    """A request's glob (``!`` and all) parsed, or ValueError."""
    if glob.startswith("#"):
        raise ValueError("invalid glob: a leading '#' makes a comment to rg (write '\\#' for a '#')")
    line, exclude, only_dir = _line(glob)
    return _Rule(_Parser(line).parse(), exclude, only_dir)


# --- regexes ------------------------------------------------------------------------------------


def _byte_literal(ch: str) -> str:
    """One character as globset writes it: its UTF-8 bytes, each a literal byte."""
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    return "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))


def _text_literal(ch: str, in_class: bool = False) -> str:
    special = _CLASS_SPECIAL if in_class else _SPECIAL
    if ch in special:
        return "\\" + ch
    if ord(ch) < 0x20 or ord(ch) == _ASCII_MAX:
        return f"\\x{{{ord(ch):x}}}"
    return ch


def _class(token: _Class, mode: _Mode) -> str:
    if mode is _Mode.BYTES:  # as globset: a non-ASCII character is its bytes, each a member
        members = "".join(
            _byte_literal(low) if low == high else f"{_byte_literal(low)}-{_byte_literal(high)}"
            for low, high in token.ranges
        )
        return f"[{'^' if token.negated else ''}{members}]"
    ascii_only = all(high.isascii() for _, high in token.ranges)
    if mode is _Mode.WIDE and (token.negated or not ascii_only):
        return "(?s:.)?"  # it matched one byte, maybe a piece of a character the tokens beside it finish
    ranges = token.ranges
    if mode is _Mode.NARROW:  # its ASCII members only: each a whole character, a byte BYTES matches too
        ranges = tuple((low, min(high, chr(_ASCII_MAX))) for low, high in ranges if low.isascii())
        if not ranges and not token.negated:
            raise _Never
    members = "".join(
        _text_literal(low, True) if low == high else f"{_text_literal(low, True)}-{_text_literal(high, True)}"
        for low, high in ranges
    )
    if token.negated and mode is _Mode.NARROW:
        return f"[^{members}\\x{{80}}-\\x{{10ffff}}]"
    return f"[{'^' if token.negated else ''}{members}]"


def _regex(tokens: Sequence[_Token], mode: _Mode) -> str:
    out: list[str] = []
    for token in tokens:
        if isinstance(token, _Class):
            out.append(_class(token, mode))
        elif isinstance(token, _Alternates):
            parts: list[str] = []
            for branch in token.branches:
                try:
                    part = _regex(branch, mode)
                except _Never:
                    continue
                if part:
                    parts.append(part)
            if parts:
                out.append("(?:" + "|".join(parts) + ")")
            elif mode is _Mode.NARROW and any(token.branches):
                raise _Never
        elif token == _ANY:
            out.append({_Mode.WIDE: "[^/]?", _Mode.NARROW: "[\\x00-\\x2e\\x30-\\x7f]"}.get(mode, "[^/]"))
        elif token == _ZERO_OR_MORE:
            out.append("[^/]*")
        elif token in _RECURSIVE:
            out.append(_RECURSIVE[token])
        else:
            out.append(_byte_literal(token) if mode is _Mode.BYTES else _text_literal(token))
    return "".join(out)


def _body(rule: _Rule, mode: _Mode) -> str:
    """The unanchored regex of the paths ``rule`` matches (whole paths; folders too unless told)."""
    if rule.tokens == (_RECURSIVE_PREFIX,):
        return _EVERYTHING
    return _regex(rule.tokens, mode)


def glob_to_regex(glob: str) -> str:
    """An anchored RE2 pattern (on characters) for the paths ``glob`` matches, a leading ``!`` aside."""
    return "^(?:" + _body(_rule(glob), _Mode.TEXT) + ")$"


@functools.lru_cache(maxsize=4096)
def _checked(glob: str) -> str:
    rule = _rule(glob)
    try:
        re2.compile(_body(rule, _Mode.BYTES).encode("ascii"), _latin1())
        re2.compile(_body(rule, _Mode.TEXT))
    except re2.error as exc:
        raise ValueError(f"invalid glob: {exc}") from exc
    return "^(?:" + _body(rule, _Mode.TEXT) + ")$"


def validate_glob(glob: str) -> str:
    """Check one glob's size and syntax; return its RE2 pattern (:func:`glob_to_regex`) or raise ValueError."""
    raw = glob[1:] if glob.startswith("!") else glob
    if not raw.strip("/"):
        raise ValueError("empty glob")
    if len(glob) > MAX_GLOB_LENGTH:
        raise ValueError(f"glob longer than {MAX_GLOB_LENGTH} characters")
    if raw.count("*") > MAX_STARS or raw.count("{") > MAX_BRACES:
        raise ValueError("glob too complex")
    if "\x00" in raw:
        raise ValueError("NUL byte in glob")
    return _checked(glob)


def check_globs(globs: Sequence[str], field: str = "paths") -> None:
    """Validate a request's globs, raising InvalidRequest that names ``field``."""
    if len(globs) > MAX_GLOBS:
        raise InvalidRequest(field, f"at most {MAX_GLOBS} globs")
    for i, glob in enumerate(globs):
        try:
            validate_glob(glob)
        except ValueError as exc:
            raise InvalidRequest(f"{field}[{i}]", f"{exc}: {glob!r}") from None


# --- what rg and remote backends may apply themselves ------------------------------------------


def anywhere(glob: str) -> bool:
    """Whether rg matches ``glob`` (an exclude's, ``!`` taken off) alike wherever it runs and whatever
    roots it is given: it names a file or folder by its name alone (no ``/`` but a trailing one, or
    ``**/`` first and none after; no negated class, which can match a ``/``). Others are matched on
    the path from rg's working directory. Told from the text alone (so :mod:`gateway.cli.listing`
    decides alike without RE2), erring towards "no"."""
    line = glob.removesuffix("/")
    name = line[3:] if line.startswith("**/") else line
    return not glob.startswith("/") and "/" not in name and "[!" not in name and "[^" not in name


def rg_excludes(paths: Sequence[str]) -> list[str]:
    """The exclude globs (``!`` taken off) of ``paths`` that no later include can override: those after
    the last include. rg may skip what they name itself (``-g '!glob'``): it only removes files the
    path filter removes too (the last glob matching them, or a folder of theirs, is an exclude)."""
    last = max((i for i, glob in enumerate(paths) if not glob.startswith("!")), default=-1)
    return [glob[1:] for glob in paths[last + 1 :]]


def keeps_at_least(globs: Iterable[str]) -> str:
    """One regex (on characters, anchored) matching at least every file that one of the include
    ``globs`` matches (folder-only globs, which match no file, left out); "" for none.

    A file :class:`PathFilter` keeps past some include matches one of them: this regex, as a remote
    filter, never drops it."""
    bodies: dict[str, None] = {}
    for glob in globs:
        rule = _rule(glob)
        if not rule.only_dir:
            bodies[_body(rule, _Mode.WIDE)] = None
    return "|".join(f"(?:^(?:{b})$)" for b in bodies)


def drops_at_most(paths: Sequence[str]) -> str:
    """One regex (on characters, anchored) matching only paths that :class:`PathFilter` drops for
    ``paths``: a file or a folder above it that an exclude no later include overrides matches; ""
    for none. As a remote ``-file:`` filter it never drops a file the filter keeps."""
    bodies: dict[str, None] = {}
    for glob in rg_excludes(paths):
        rule = _rule("!" + glob)
        try:
            body = _body(rule, _Mode.NARROW)
        except _Never:
            continue
        bodies[f"^(?:{body})" + ("/" if rule.only_dir else "(?:/|$)")] = None
    return "|".join(f"(?:{b})" for b in bodies)


# --- the path filter ----------------------------------------------------------------------------

#: Codes of a PathFilter set's patterns, beside a file pattern's own (2 * its glob's index, + 1 for
#: an exclude): a language's glob; an exclude that nothing follows, matching a folder above the file;
#: an exclude some include follows, matching a folder above the file.
_LANGUAGE, _PRUNED, _MAYBE_PRUNED = -1, -2, -3


def _latin1() -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    return options


class PathFilter(msgspec.Struct, frozen=True):
    """Decides locally whether a namespace-relative path passes a request's ``paths`` and ``languages``
    (the module says how).

    One RE2 set, anchored at the start and run on the path's UTF-8 bytes, holds for each glob that
    can match a file its pattern (``glob$``), for each exclude one matching a folder above the file
    (``glob/``), and each language's globs: one match per path answers, unless an exclude that some
    later include may override matches a folder above the file; then its folders are judged one by
    one (``folders``: a set of every glob, whole paths).
    """

    matcher: Regex | None  # the set; None: nothing to filter on
    codes: tuple[int, ...]  # for each pattern of the set, what it is (see _LANGUAGE)
    folders: Regex | None  # every glob, whole paths: the slow path; None without excludes
    excludes: tuple[bool, ...]  # for each glob, whether it excludes
    includes: bool  # some glob includes: a file no glob matches is left out
    languages: bool  # the name must match a language's glob

    @classmethod
    def build(cls, paths: Sequence[str], languages: Sequence[str] = ()) -> PathFilter:
        """The filter for ``paths`` and ``languages`` (raises ValueError on a bad glob).

        Built once per distinct pair and kept (every namespace of every request asks,
        and compiling its globs is most of what a filter costs).
        """
        return _build(tuple(paths), tuple(languages))

    @property
    def is_open(self) -> bool:
        return self.matcher is None and not self.includes

    def __call__(self, path: str) -> bool:
        matcher = self.matcher
        if matcher is None:  # no glob but folder-only includes (no file passes), or none at all
            return not self.includes
        data = path.lstrip("/").encode("utf-8", "surrogateescape")
        hits = matcher.Match(data)
        if not hits:
            return not (self.includes or self.languages)
        last, language, maybe = -1, False, False
        codes = self.codes
        for hit in hits:
            code = codes[hit]
            if code > last:
                last = code
            elif code == _PRUNED:
                return False
            elif code == _LANGUAGE:
                language = True
            elif code == _MAYBE_PRUNED:
                maybe = True
        if (self.languages and not language) or (last & 1 if last >= 0 else self.includes):
            return False
        return not (maybe and self._pruned(data))

    def _pruned(self, data: bytes) -> bool:
        """Whether a folder of the file ``data`` is skipped: the last glob matching it excludes."""
        folders = self.folders
        if folders is None:
            return False
        at = data.find(b"/")
        while at > 0:
            hits = folders.Match(data[:at])
            if hits and self.excludes[max(hits)]:
                return True
            at = data.find(b"/", at + 1)
        return False

    def inside_some_repository(self, path: str) -> bool:
        """Whether ``path``, ``<repository>/<path>`` with a repository name of unknown length,
        passes as the path inside the repository for some split of it (SPEC §5)."""
        path = path.lstrip("/")
        at = path.find("/") + 1
        while at > 0:
            if self(path[at:]):
                return True
            at = path.find("/", at) + 1
        return False


def _set(anchor: str, patterns: Iterable[str]) -> Regex:
    made = getattr(re2.Set, anchor)(_latin1())
    for pattern in patterns:
        made.Add(pattern.encode("ascii"))
    made.Compile()
    return made


@functools.lru_cache(maxsize=1024)
def _build(paths: tuple[str, ...], languages: tuple[str, ...]) -> PathFilter:
    for glob in paths:
        validate_glob(glob)
    rules = [_rule(glob) for glob in paths]
    bodies = [_body(rule, _Mode.BYTES) for rule in rules]
    last_include = max((i for i, rule in enumerate(rules) if not rule.exclude), default=-1)
    patterns: list[str] = []
    codes: list[int] = []
    for i, (rule, body) in enumerate(zip(rules, bodies, strict=True)):
        if not rule.only_dir:
            patterns.append(f"(?:{body})$")
            codes.append(2 * i + rule.exclude)
        if rule.exclude:
            patterns.append(f"(?:{body})/")
            codes.append(_PRUNED if i > last_include else _MAYBE_PRUNED)
    for glob in globs_for(languages):
        patterns.append(f"(?:{_body(_rule(glob), _Mode.BYTES)})$")
        codes.append(_LANGUAGE)
    has_excludes = any(rule.exclude for rule in rules)
    return PathFilter(
        matcher=_set("MatchSet", patterns) if patterns else None,
        codes=tuple(codes),
        folders=_set("FullMatchSet", bodies) if has_excludes and last_include >= 0 else None,
        excludes=tuple(rule.exclude for rule in rules),
        includes=last_include >= 0,
        languages=bool(languages),
    )


def skips_folder(paths: Sequence[str], folder: str) -> bool:
    """Whether rg, given ``paths`` as ``-g`` where they are anchored, skips ``folder`` (a path from there) with
    all it holds: the last glob matching it, or one of the folders it is in, is an exclude."""
    if not any(glob.startswith("!") for glob in paths):
        return False
    matcher, excludes = _folder_rules(tuple(paths))
    data = folder.strip("/").encode("utf-8", "surrogateescape")
    at = data.find(b"/")
    while True:
        hits = matcher.Match(data if at < 0 else data[:at])
        if hits and excludes[max(hits)]:
            return True
        if at < 0:
            return False
        at = data.find(b"/", at + 1)


@functools.lru_cache(maxsize=256)
def _folder_rules(paths: tuple[str, ...]) -> tuple[Regex, tuple[bool, ...]]:
    for glob in paths:
        validate_glob(glob)
    rules = [_rule(glob) for glob in paths]
    return _set("FullMatchSet", [_body(rule, _Mode.BYTES) for rule in rules]), tuple(r.exclude for r in rules)


def namespace_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate for namespace names: ``*`` matches anything (``/`` included), ``?`` one char."""
    out: list[str] = []
    for ch in pattern:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append("\\" + ch if ch in _SPECIAL else ch)
    regex = re2.compile("^" + "".join(out) + "$")
    return lambda name: bool(regex.match(name))
