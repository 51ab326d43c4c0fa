"""The words of a declaration, field by field: what the fielded BM25 index (SQLite FTS5) holds.

Each declaration is one row of :data:`FIELDS`, every field a run of lower-case words
(identifiers split at ``_``, digits and case: ``parse_options_header`` -> parse options
header), which FTS5's ``porter`` tokenizer stems:

- ``name``: its own name (``secure_filename`` -> secure filename);
- ``qualified``: the names enclosing it (``Flask.url_for`` -> flask);
- ``params``: the other words of its signature (parameters, types), keywords aside;
- ``doc``: its whole docstring (Python) or the comment block above it, not only the
  first sentence the intent keeps;
- ``body``: the identifiers its body uses, each word once, at most :data:`BODY_WORDS`;
- ``path``: its file's path, extension aside (``src/werkzeug/utils.py`` -> src werkzeug utils);
- ``prose``: left empty here (the docs that describe it; see bench/README.md, issue 39).

:data:`WEIGHTS` are each field's weight in ``bm25()``, tuned on bench/semantic.py's
first half of questions and checked on its second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gateway.index.words import STOPWORDS, split_words

__all__ = [
    "BODY_WORDS",
    "FIELDS",
    "WEIGHTS",
    "body_words",
    "doc_text",
    "field_texts",
    "match_expression",
    "path_words",
]

FIELDS = ("name", "qualified", "params", "doc", "body", "path", "prose")
#: bm25() weights, in FIELDS order: tuned on the first half of bench/semantic.py's questions by coordinate
#: ascent on MRR@10 from (5, 2, 2, 3, 1, 1, 2), checked on the second (bench/README.md, issue 39). The path
#: earned nothing; prose is not written (its weight untuned).
WEIGHTS = (8.0, 0.5, 1.0, 3.0, 1.0, 0.0, 2.0)
#: Words of a body kept (the first ones met, each once): a class's body is all its methods'.
BODY_WORDS = 200
#: Lines looked at for a Python docstring after a declaration's first line.
DOC_LINES = 12

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT = re.compile(r"^\s*(?://+!?|/\*+|\*+/?|#+(?!\[)|--) ?")
_DOCSTRING = re.compile(r"^\s*[rRbBuU]?(\"\"\"|''')(.*?)\1", re.DOTALL | re.MULTILINE)
#: Words of code that say nothing of what it does.
_CODE_WORDS = frozenset(
    {
        "if",
        "else",
        "elif",
        "for",
        "while",
        "return",
        "def",
        "class",
        "self",
        "none",
        "true",
        "false",
        "null",
        "nil",
        "in",
        "is",
        "not",
        "and",
        "or",
        "import",
        "from",
        "as",
        "try",
        "except",
        "finally",
        "raise",
        "with",
        "pass",
        "func",
        "fn",
        "let",
        "const",
        "var",
        "mut",
        "pub",
        "impl",
        "this",
        "new",
        "err",
        "ok",
        "str",
        "int",
        "string",
        "bool",
        "i",
        "x",
        "s",
        "v",
        "k",
        "n",
    }
)


def _words(text: str) -> str:
    return " ".join(split_words(text))


def path_words(path: str) -> str:
    """A file path's words, its extension aside, each once."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return " ".join(dict.fromkeys(split_words(stem)))


def doc_text(lines: Sequence[str], start_line: int, end_line: int, intent: str) -> tuple[str, int]:
    """A declaration's whole docstring (the first triple-quoted string of its first lines, after its
    first line) or the comment block right above it, its intent when neither is found; and the line
    its body starts after the docstring (its second line where it has none)."""
    first = max(0, start_line - 1)
    head = "\n".join(lines[first : min(end_line, start_line + DOC_LINES)])
    found = _DOCSTRING.search(head)
    if found and found.start(1) > head.find("\n") >= 0:
        return found.group(2), start_line + head.count("\n", 0, found.end())
    above: list[str] = []
    at = first - 1
    while at >= 0 and _COMMENT.match(lines[at]) and len(above) < 200:
        above.append(_COMMENT.sub("", lines[at], count=1))
        at -= 1
    return ("\n".join(reversed(above)) if above else intent), start_line


def body_words(lines: Sequence[str], after: int, end_line: int, own: set[str]) -> str:
    """The words of the identifiers a declaration's body uses (its lines after ``after``), each once,
    its own names aside."""
    seen: dict[str, None] = {}
    for line in lines[after : max(after, end_line)]:
        for token in _IDENT.findall(line):
            for word in split_words(token):
                if len(word) > 1 and word not in _CODE_WORDS and word not in own:
                    seen.setdefault(word)
        if len(seen) >= BODY_WORDS:
            break
    return " ".join(list(seen)[:BODY_WORDS])


def field_texts(
    name: str, qualified_name: str, signature: str, intent: str, start: int, end: int, lines: Sequence[str], path: str
) -> tuple[str, ...]:
    """One declaration's row of FIELDS (``lines``: its file's lines; empty: no doc or body beyond the intent)."""
    own = set(split_words(qualified_name))
    enclosing = qualified_name[: -len(name)] if qualified_name.endswith(name) else qualified_name
    params = dict.fromkeys(w for w in split_words(signature) if w not in STOPWORDS and w not in own)
    doc, after = doc_text(lines, start, end, intent) if lines else (intent, start)
    return (
        _words(name),
        _words(enclosing),
        " ".join(params),
        doc,
        body_words(lines, after, end, own) if lines else "",
        path_words(path),
        "",
    )


def match_expression(terms: Sequence[str]) -> str:
    """The FTS5 query for a question's words: any of them (bm25 ranks by how many, and which)."""
    quoted = [f'"{t}"' for t in terms if t.isalnum()]
    return " OR ".join(quoted)
