"""Code-aware signals shared by ranking and adapters: does a string hold the query, which name
does the query name, does a line define that name, is a path vendored, generated, minified,
a test, an example or documentation.

Pure functions of their arguments, no I/O.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import re2

from gateway.models import MAX_TEXT, FileMatch, Hit, LazyHits, Mode, cut_text

if TYPE_CHECKING:  # a type only: the one-shot CLI ranks its own request without pydantic (gateway.cli.quick)
    from gateway.query.request import SearchRequest

__all__ = [
    "DEFINITION_SCAN",
    "DefinitionTest",
    "QueryMatcher",
    "declared",
    "defines",
    "definition_test",
    "demoted",
    "normal_name",
    "query_name",
    "secondary",
]

#: What comes before the keyword of a definition line (for ``re.match``). Possessive
#: (``*+``, ``++``): giving whitespace back can never help a keyword match, and not
#: trying it makes a miss on an indented line much cheaper.
_PREFIX = (
    r"\s*+(?:export\s++)?(?:default\s++)?(?:pub(?:\([\w:]+\))?\s++)?(?:public\s++|private\s++|protected\s++)?"
    r"(?:static\s++)?(?:async\s++)?(?:abstract\s++)?"
)
#: Keywords that introduce a definition of the name after them (``impl X`` does not define X).
_KEYWORDS = (
    r"(?:def|class|func|fn|struct|interface|type|trait|enum|module|function|object|record|"
    r"message|service|protocol|typedef|macro_rules!|defmodule|defn|let|const|var|val)\b"
)
#: Between the keyword and the name: ``*`` (a generator), a Go receiver, qualifiers (``self.``, ``Foo::``).
_BEFORE_NAME = r"(?:\s|\*)*+(?:\([^)\n]*+\)\s*+)?(?:[\w$]++(?:\.|::))*+"


# The five large regexes below are compiled when first used: compiling them at import was
# ~5 ms of a one-shot search that matched nothing (and so needed none of them). Each is a
# module constant compiled by its own cached function, so every ``re`` call keeps a fixed
# pattern (tests/test_security: caller input goes to RE2 only).

#: Vendored, generated, minified.
_DEMOTED_PATTERN = (
    r"(?:^|/)(?:vendor|vendored|node_modules|third_party|third-party|external|bower_components|"
    r"dist|site-packages|\.yarn)/"
    r"|\.min\.(?:js|css)$|\.bundle\.js$|[._-]pb2(?:_grpc)?\.pyi?$|\.pb\.(?:go|cc|h)$|"
    r"[._]generated\.|\.gen\.|_gen\.go$|(?:^|/)generated/|\.lock$|-lock\.json$|\.map$"
)
#: Tests, examples, benchmarks and documentation: where a name is used rather than defined.
_SECONDARY_PATTERN = (
    r"(?:^|/)(?:tests?|testing|__tests__|__mocks__|spec|specs|testdata|fixtures|e2e|"
    r"examples?|samples?|demos?|docs?|documentation|benches|benchmarks?)/"
    r"|(?:^|/)(?:test_[^/]*|[^/]*_test\.[^/]+|[^/]*_tests\.[^/]+|conftest\.py)$"
    r"|\.(?:test|spec|stories|bench)\.[^/.]+$"
    r"|\.(?:md|rst|txt|adoc|ipynb)$"
)
#: A literal every match of _DEMOTED holds one of, and of _SECONDARY (in any case): without one, the
#: regex is not run (a path's signals are computed for every file of an answer, once per process).
_DEMOTED_MARKS = (
    *("vendor", "node_modules", "third", "external", "bower_components", "dist/", "site-packages/", ".yarn/"),
    *(".min.", ".bundle.js", "pb2", ".pb.", "generated", ".gen.", "_gen.go", ".lock", "-lock.json", ".map"),
)
_SECONDARY_MARKS = (
    *("test", "spec", "mock", "fixture", "e2e", "example", "sample", "demo", "doc", "bench", "stories"),
    *(".md", ".rst", ".txt", ".adoc", ".ipynb"),
)
#: The characters IGNORECASE matches to an ASCII letter besides its own two cases (re._casefix, _sre).
_FOLD = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")
#: A dotted or ``::`` path of identifiers (``Flask.url_for``, ``std::vector``, ``a->b``).
_PATH = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+")
#: A definition line, capturing the name it defines: ``def url_for``, ``class Flask(``, ``func (s *S) Serve``.
_DEFINES_PATTERN = _PREFIX + _KEYWORDS + _BEFORE_NAME + r"([A-Za-z_$][\w$]*)"
#: The same on rg's ASCII match lines (``line:column:text``) held as bytes: str ``\s`` also
#: matches ``\x1c``-``\x1f``, bytes ``\s`` does not, so they are added.
_ASCII_DEFINES = (_PREFIX + _KEYWORDS + _BEFORE_NAME).replace(r"\s", r"[\s\x1c-\x1f]").encode("ascii")
_RAW_DEFINES_PATTERN = rb"\d++:\d*+:" + _ASCII_DEFINES + rb"([A-Za-z_$][\w$]*)"
#: ... anywhere after a newline in a block of such lines. The pattern cannot run from one
#: line into the next: every line starts with a digit, and nothing after the first ``\s``
#: of a definition can.
_RAW_DEFINES_AFTER_PATTERN = rb"\n\d++:\d*+:" + _ASCII_DEFINES + rb"([A-Za-z_$][\w$]*)"


@functools.cache
def _DEMOTED() -> re.Pattern[str]:  # named as the constant it stands for
    return re.compile(_DEMOTED_PATTERN)


@functools.cache
def _SECONDARY() -> re.Pattern[str]:
    return re.compile(_SECONDARY_PATTERN, re.IGNORECASE)


@functools.cache
def _DEFINES() -> re.Pattern[str]:
    return re.compile(_DEFINES_PATTERN)


@functools.cache
def _RAW_DEFINES() -> re.Pattern[bytes]:
    return re.compile(_RAW_DEFINES_PATTERN)


@functools.cache
def _RAW_DEFINES_AFTER() -> re.Pattern[bytes]:
    return re.compile(_RAW_DEFINES_AFTER_PATTERN)


@functools.cache
def _LINE_DEFINES() -> re.Pattern[bytes]:
    return re.compile(_ASCII_DEFINES + rb"([A-Za-z_$][\w$]*)")


#: A regex that is an identifier, maybe between word boundaries or anchors.
_REGEX_IDENTIFIER = re.compile(r"(?:\\b|\^)?([A-Za-z_][A-Za-z0-9_]*)(?:\\b|\$)?")


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


@functools.lru_cache(maxsize=1024)
def query_name(text: str, mode: Mode) -> str | None:
    """The name a query asks about, if it names one.

    An identifier is its own name; a dotted or ``::`` path names its last part
    (``Flask.url_for``: ``url_for``); a definition typed out names what it defines
    (``def url_for``, ``class Flask(``). A regex names something only when it is an
    identifier (maybe between ``\\b``). Anything else names nothing.
    """
    text = text.strip()
    if mode == "regex":
        found = _REGEX_IDENTIFIER.fullmatch(text)
        return found.group(1) if found else None
    if mode != "exact":
        return None
    if _IDENTIFIER.fullmatch(text):
        return text
    if _PATH.fullmatch(text):
        return re.split(r"\.|::|->", text)[-1]
    typed = _DEFINES().match(text)
    return typed.group(1) if typed else None


def normal_name(text: str) -> str:
    """A name as file names spell it: lower case, no ``_`` or ``-`` (``MultiDict`` ~ ``multidict``)."""
    return text.lower().replace("_", "").replace("-", "")


class DefinitionTest:
    """Whether a line defines one name: the regex test for files the declaration index does not know.

    A line defines the name when it reads as a definition (a keyword such as ``def``,
    ``class``, ``func``, ``fn``, ``struct``, ``interface``, ``type``) of exactly that
    name: ``class X(BaseModel)`` defines X, not BaseModel. :meth:`text` tests a line;
    :meth:`raw` and :meth:`raw_block` test rg's ASCII match lines (``line:column:text``)
    without decoding them.
    """

    __slots__ = ("_raw", "_whole", "name", "sensitive")

    def __init__(self, name: str, sensitive: bool) -> None:
        self.name = name
        self.sensitive = sensitive
        self._raw = name.encode("utf-8") if sensitive else name.lower().encode("utf-8")
        self._whole: Any = None  # the name as a whole identifier, an RE2 pattern over bytes (caller input: RE2)

    def names(self, name: str) -> bool:
        """Whether a declaration's name is this one."""
        return name == self.name if self.sensitive else name.lower() == self.name.lower()

    def text(self, line: str) -> bool:
        found = _DEFINES().match(line)
        return found is not None and self.names(found.group(1))

    def _raw_names(self, name: bytes) -> bool:
        return (name if self.sensitive else name.lower()) == self._raw

    def raw(self, line: bytes) -> bool:
        """:meth:`text` on one ASCII match line as rg prints it."""
        found = _RAW_DEFINES().match(line)
        return found is not None and self._raw_names(found.group(1))

    def line(self, raw: bytes, offset: int | None = None) -> bool:
        """:meth:`text` on one line as a backend sent it (UTF-8 bytes, its line ending kept or not) as a
        hit would hold it: cut (:func:`~gateway.models.cut_text`) around its first match at byte
        ``offset``. An ASCII line that needs no cut is tested without decoding it."""
        raw = raw.rstrip(b"\r\n")
        if len(raw) <= MAX_TEXT and raw.isascii():
            found = _LINE_DEFINES().match(raw)
            return found is not None and self._raw_names(found.group(1))
        column = len(raw[:offset].decode("utf-8", "replace")) + 1 if offset is not None else None
        return self.text(cut_text(raw.decode("utf-8", "replace"), column))

    def plain(self, raw: bytes) -> bool:
        """Whether :meth:`lines` can test ``raw`` (one line, its ending stripped): ASCII, no newline, no cut needed."""
        return len(raw) <= MAX_TEXT and raw.isascii() and b"\n" not in raw

    def lines(self, lines: Sequence[bytes]) -> set[int]:
        """The indices of the ``lines`` (each :meth:`plain`) that define the name: what :meth:`text` says
        of each. One pass over them all finds the lines holding the name as a whole identifier (a
        literal search, at C speed); only those are tested, one call each."""
        if self._whole is None:
            options = re2.Options()
            options.case_sensitive = self.sensitive
            options.log_errors = False
            self._whole = re2.compile(
                rb"(?m)(?:^|[^\w$])(" + re2.escape(self.name.encode("utf-8")) + rb")(?:[^\w$]|$)", options
            )
        blob = b"\n".join(lines)
        starts = list(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
        defines, name = _LINE_DEFINES().match, self._raw_names
        out: set[int] = set()
        for found in self._whole.finditer(blob):
            at = bisect.bisect_right(starts, found.start(1)) - 1
            if at not in out and (defined := defines(lines[at])) is not None and name(defined.group(1)):
                out.add(at)
        return out

    def raw_block(self, body: bytes, end: int) -> bool:
        """:meth:`raw` on any line of an ASCII block of match lines that starts before ``end``."""
        if self.raw(body):
            return True
        return any(self._raw_names(found.group(1)) for found in _RAW_DEFINES_AFTER().finditer(body, 0, end))


@functools.lru_cache(maxsize=256)
def definition_test(text: str, mode: Mode, sensitive: bool) -> DefinitionTest | None:
    """The definition test for what a query names, or None when it names nothing."""
    name = query_name(text, mode)
    return DefinitionTest(name, sensitive) if name else None


#: Hits scanned per file for a definition (a backend lists its best lines first).
DEFINITION_SCAN = 16


def declared(hit: Hit) -> bool:
    """Whether a hit is a declaration (not a line or a path)."""
    return hit.kind not in ("line", "file")


def defines(file: FileMatch, test: DefinitionTest | None) -> bool:
    """The backend's word on a definition (its own, or its undecoded hits'), else whether one of
    the first hits defines the name."""
    if file.definition is not None:
        return file.definition
    hits = file.hits
    if isinstance(hits, LazyHits):
        said = hits.definition()
        if said is not None:
            return said
    if test is None:
        return False
    first: Sequence[Hit] = hits[:DEFINITION_SCAN]
    return any((declared(h) and test.names(h.name or h.symbol.rpartition(".")[2])) or test.text(h.text) for h in first)


@functools.lru_cache(maxsize=1 << 16)
def demoted(path: str) -> bool:
    """Whether a path is vendored, generated or minified (paths recur across queries: cached)."""
    for mark in _DEMOTED_MARKS:
        if mark in path:
            return _DEMOTED().search(path) is not None
    return False


@functools.lru_cache(maxsize=1 << 16)
def secondary(path: str) -> bool:
    """Whether a path is a test, an example, a benchmark or documentation."""
    folded = (path if path.isascii() else path.translate(_FOLD)).lower()
    for mark in _SECONDARY_MARKS:
        if mark in folded:
            return _SECONDARY().search(path) is not None
    return False


@functools.lru_cache(maxsize=1 << 16)
def file_stem(path: str) -> str:
    """A file's base name without its extension (as ``posixpath.splitext``: leading dots are
    no extension), as :func:`normal_name` spells it."""
    base = path.rpartition("/")[2]
    stem, dot, _ = base.rpartition(".")
    return normal_name(stem if dot and stem.strip(".") else base)
