"""A file's lines as classed token runs, by Pygments, for the page's file view.

A line is a list of ``[class, text]`` runs (adjacent runs of one class merged), or the
plain string where the file's language is unknown. The classes are a small palette
(:data:`CLASSES`), not Pygments' ~80 short names: the page's stylesheet colours each
(``.t-k``, ``.t-s``, ...), and an answer stays small. Nothing here writes markup:
the page puts every run in as text.

A slice of a file is lexed after up to :data:`LEAD` lines read before it (given by the
caller), so a slice that starts inside a docstring or a block comment is coloured as
one, and those lines are then dropped.
"""

from __future__ import annotations

import functools
import posixpath

from pygments.lexer import Lexer
from pygments.lexers import find_lexer_class_for_filename
from pygments.token import (
    Comment,
    Generic,
    Keyword,
    Name,
    Number,
    Operator,
    String,
    Token,
    _TokenType,
)
from pygments.util import ClassNotFound

__all__ = ["CLASSES", "LEAD", "Line", "highlight"]

#: Lines read before a slice and lexed with it, then dropped.
LEAD = 100
#: Token type -> the page's class: the most specific type listed wins (a type inherits its parent's).
CLASSES: dict[_TokenType, str] = {
    Comment: "c",
    Comment.Preproc: "k",
    Keyword: "k",
    Keyword.Constant: "m",
    Keyword.Type: "t",
    Operator.Word: "k",
    Name.Builtin: "b",
    Name.Builtin.Pseudo: "b",
    Name.Class: "t",
    Name.Exception: "t",
    Name.Decorator: "d",
    Name.Function: "f",
    Name.Attribute: "f",
    Name.Tag: "k",
    Name.Constant: "m",
    String: "s",
    String.Doc: "c",
    String.Interpol: "k",
    String.Escape: "m",
    Number: "m",
    Generic.Heading: "h",
    Generic.Subheading: "h",
    Generic.Deleted: "del",
    Generic.Inserted: "ins",
    Generic.Emph: "em",
    Generic.Strong: "h",
}
#: A line: plain text, or ``[class, text]`` runs ("" for text with no class).
Line = str | list[list[str]]


@functools.cache
def _class_of(ttype: _TokenType) -> str:
    kind: _TokenType | None = ttype
    while kind is not None and kind is not Token:
        got = CLASSES.get(kind)
        if got is not None:
            return got
        kind = kind.parent
    return ""


@functools.lru_cache(maxsize=1024)
def _lexer(name: str) -> Lexer | None:
    """The lexer for a file name (``Makefile``, ``app.py``)."""
    try:
        found = find_lexer_class_for_filename(name)
    except ClassNotFound:
        return None
    if found is None:
        return None
    # stripnl=False: a leading or trailing blank line is a line; ensurenl: the last one ends
    lexer: Lexer = found(stripnl=False, ensurenl=True)
    return lexer


def lexer_for(path: str) -> Lexer | None:
    """The lexer for ``path``, None where no language is known for its name."""
    return _lexer(posixpath.basename(path))


def highlight(path: str, lines: list[str], lead: list[str] | None = None) -> list[Line]:
    """``lines`` of the file at ``path`` as runs; ``lead``: the lines just before them, lexed and dropped.
    Plain strings where no lexer knows the name, or where lexing would not give the text back
    (a stray carriage return, which Pygments reads as a line end)."""
    lexer = lexer_for(path)
    lead = lead or []
    if lexer is None or any("\r" in line for line in lines) or any("\r" in line for line in lead):
        return list(lines)
    out: list[Line] = []
    runs: list[list[str]] = []
    skip = len(lead)
    for ttype, value in lexer.get_tokens("\n".join((*lead, *lines)) + "\n"):
        cls = _class_of(ttype)
        parts = value.split("\n")
        for k, part in enumerate(parts):
            if k:  # a line ends
                if skip:
                    skip -= 1
                else:
                    out.append(runs)
                runs = []
            if not part or skip:
                continue
            if runs and runs[-1][0] == cls:
                runs[-1][1] += part
            else:
                runs.append([cls, part])
    if len(out) != len(lines) or any(
        "".join(text for _, text in got) != line for got, line in zip(out, lines, strict=False) if isinstance(got, list)
    ):
        return list(lines)  # the lexer changed the text (it should not): shown plain rather than wrong
    return out
