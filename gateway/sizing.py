"""What a page costs its reader in characters: the budget's defaults and the estimate paging uses.

A page takes files whole in rank order (SPEC §3 invariant 6): the first always joins, a further
one only while the page stays within ``hit_budget`` hits and about ``char_budget`` characters of
JSON. Every declaration hit of a shown file is present (invariant 1); what is cut is the
*lines* listed inside a declaration hit, past ``hit_lines``, and the hit says so (``line_count``
is how many it has; ``start_line``-``end_line`` the span ``read_file`` reads). When the first
file alone would pass ``char_budget``, the page lists fewer lines in each hit (down to none)
until it fits, and ``limits.hit_lines`` says how many it listed.

The defaults size an answer for an agent (about 40,000 characters: an MCP result carries the
JSON twice, as ``structuredContent`` and as text); a person's surfaces (the web page, the human
CLI, a browser's ``GET /v1/search``) send :data:`PERSON` instead: the files asked for, unless
they are truly enormous.

:func:`file_chars` estimates a file group's JSON from its hits without building it (the wire
conversion does that once, for the files shown): each hit's fixed part (its keys, id, numbers,
punctuation) is a constant measured on real answers, its strings are counted as they are (a
control character, six characters once JSON escapes it, counts as one: code holds few).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # annotations only: the CLI reads the budgets without importing msgspec
    from gateway.models import FileMatch, Hit

__all__ = [
    "DEFAULT_CHAR_BUDGET",
    "DEFAULT_HIT_LINES",
    "MAX_CHAR_BUDGET",
    "MAX_HIT_LINES",
    "MIN_CHAR_BUDGET",
    "PERSON",
    "Fit",
    "copies_chars",
    "file_chars",
    "fit_lines",
]

#: About the characters of JSON an agent's page holds (MCP's and the API's default).
DEFAULT_CHAR_BUDGET = 40_000
MIN_CHAR_BUDGET = 1_000
MAX_CHAR_BUDGET = 10_000_000
#: Matched lines a declaration hit lists by default (the first ones).
DEFAULT_HIT_LINES = 3
MAX_HIT_LINES = 100_000
#: What a person's surfaces send: every file asked for unless truly enormous (5,000 hits or two
#: million characters), three lines a declaration (the web page links the rest; the CLI asks
#: for every line itself, as rg prints them).
PERSON: dict[str, Any] = {"hit_budget": 5000, "char_budget": 2_000_000}

#: A file group's fixed characters (its keys and counts), a hit's (keys, id, span, kind,
#: ``matched``, punctuation) and a listed line's (``{"line":..,"column":..,"text":""}``),
#: measured on the answers of bench/answer_size.py (the estimate is within ~10 % of them).
FILE_CHARS = 60
HIT_CHARS = 136
LINE_CHARS = 34
CONTEXT_CHARS = 30
LINES_CHARS = 10
#: A hit's ``"file_path":"","namespace":"",`` (the values aside): what a bare hit leaves out.
NAMED_CHARS = 30
#: A group's ``"duplicates":[]`` key, and each copy's ``{"namespace":"","file_path":""}``.
COPIES_CHARS = 16
COPY_CHARS = 32


def _context(hit: Hit) -> int:
    if not hit.before and not hit.after:
        return 0
    return CONTEXT_CHARS + sum(len(line) + 3 for line in hit.before) + sum(len(line) + 3 for line in hit.after)


def file_chars(file: FileMatch, namespace: str, lines: int | None, bare: bool = False) -> int:
    """About the characters of ``file``'s group as the wire writes it (its hits gathered: the file's own
    hit and declarations), listing up to ``lines`` lines in each hit (None: all); ``bare``: its hits
    without the ``file_path`` and ``namespace`` the group already says. Decodes a file's lazily kept
    hits (a page's are decoded anyway)."""
    path = file.path
    named = len(path) + len(namespace)
    each = HIT_CHARS + (0 if bare else NAMED_CHARS + named)
    total = FILE_CHARS + named
    for hit in file.hits:
        total += each + len(hit.intent) + len(hit.reason)
        if hit.kind in ("line", "file"):  # the file's own: named by the file (its path, its base name)
            total += len(path) + len(path) - path.rfind("/") - 1
        else:
            total += len(hit.name) + len(hit.symbol) + sum(len(t) + 3 for t in hit.terms)
        shown = hit.lines if lines is None else hit.lines[:lines]
        total += sum(LINE_CHARS + len(line.text) + _context(line) for line in shown)
        if shown:  # its "lines" key
            total += LINES_CHARS
    return total


def copies_chars(copies: tuple[tuple[str, str], ...]) -> int:
    """The characters a group's ``duplicates`` adds (none without copies)."""
    if not copies:
        return 0
    return COPIES_CHARS + sum(COPY_CHARS + len(namespace) + len(path) for namespace, path in copies)


class Fit(NamedTuple):
    """How the page's first file is written to fit: the lines each hit lists (None: all), whether its
    hits leave out the ``file_path``/``namespace`` their group says (``bare``), and its characters then."""

    lines: int | None
    bare: bool
    size: int


def fit_lines(file: FileMatch, namespace: str, lines: int | None, budget: int) -> Fit:
    """How the page's first file fits ``budget`` (SPEC §3 invariant 6): its hits list fewer lines (at most
    ``lines``), down to none; then they leave out the fields that repeat their group's; never is a hit
    left out, so a file of very many hits may still pass the budget (``size`` says by how much)."""
    size = file_chars(file, namespace, lines)
    if size <= budget:
        return Fit(lines, False, size)
    if lines is None:
        most = max((len(hit.lines) for hit in file.hits), default=0)
        lines = min(most, DEFAULT_HIT_LINES + 1)
    for fewer in range(lines - 1, -1, -1):
        size = file_chars(file, namespace, fewer)
        if size <= budget:
            return Fit(fewer, False, size)
    return Fit(0, True, file_chars(file, namespace, 0, bare=True))
