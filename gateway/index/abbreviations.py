"""Words code shortens: a question's ``parameters`` is the code's ``params``, its ``config`` the code's ``cfg``.

Identifiers abbreviate the words people ask in (``buildURL(url, params)``,
``maxLen``, ``ctx``), and neither a stemmer nor the model's vectors join the two forms
(``parameters`` and ``params`` stem apart). :data:`GROUPS` lists the common ones, each
group the forms of one word: general usage across languages, written down once (not
learnt from a checkout; bench/README.md says what the list's author had seen of the
questions that measure it). A word is matched by its light stem
(:func:`gateway.index.words.stem`), so ``parameters``, ``parameter`` and ``params``
find their group.

:func:`alike` gives each word of a question the other forms of its group: a search
asks for them as it asks for the word itself (the same weight; those held by more than
:data:`MAX_SHARE` of the declarations are not asked for), and a declaration
holding one holds the word (:func:`gateway.index.reasons.explain`; its reason says
``param (for parameters)``). Short forms that stand for several words (``res``:
result, response, resource) and those that are stop words or keywords (``def``,
``func``, ``var``) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.index.words import stem

__all__ = ["GROUPS", "MAX_SHARE", "alike"]

#: A form held by more than this share of the index's declarations stays out of the FTS5 query (it still counts
#: in coverage, read from the candidates' fields, and the bm25 part does not count the word where no form of it
#: is asked for): the rows a common form (``id``, ``max``) matches are what it could cost. At 110,075
#: declarations no share from 0.002 to 1 cost measurably more than none, side by side; 0.01 is what the names
#: half and the calibration set of bench/semantic.py's questions prefer (bench/README.md, issue 39).
MAX_SHARE = 0.01

#: Each group: a word and the forms code writes it in (none a stop word: a question's stop words are not
#: asked for).
GROUPS: tuple[tuple[str, ...], ...] = (
    ("address", "addr"),
    ("administrator", "admin"),
    ("allocate", "alloc"),
    ("application", "app"),
    ("argument", "arg", "args"),
    ("attribute", "attr"),
    ("authentication", "authorization", "auth"),
    ("average", "avg"),
    ("boolean", "bool"),
    ("buffer", "buf"),
    ("button", "btn"),
    ("callback", "cb"),
    ("calculate", "calc"),
    ("certificate", "cert"),
    ("character", "char"),
    ("column", "col"),
    ("command", "cmd"),
    ("configuration", "config", "cfg", "conf"),
    ("connection", "conn"),
    ("context", "ctx"),
    ("coordinate", "coord"),
    ("count", "cnt"),
    ("current", "cur", "curr"),
    ("database", "db"),
    ("delete", "del"),
    ("delimiter", "delim"),
    ("description", "desc"),
    ("destination", "dest", "dst"),
    ("dictionary", "dict"),
    ("difference", "diff"),
    ("dimension", "dim"),
    ("directory", "dir"),
    ("document", "doc"),
    ("element", "elem"),
    ("environment", "env"),
    ("error", "err"),
    ("escape", "esc"),
    ("event", "evt"),
    ("exception", "exc"),
    ("execute", "exec"),
    ("expression", "expr"),
    ("extension", "ext"),
    ("format", "fmt"),
    ("frequency", "freq"),
    ("generate", "gen"),
    ("header", "hdr"),
    ("identifier", "id"),
    ("image", "img"),
    ("implementation", "impl"),
    ("increment", "inc"),
    ("index", "idx"),
    ("information", "info"),
    ("initialize", "initialise", "initialization", "init"),
    ("integer", "int"),
    ("iterator", "iterate", "iter"),
    ("language", "lang"),
    ("length", "len"),
    ("library", "lib"),
    ("location", "loc"),
    ("manager", "mgr"),
    ("maximum", "max"),
    ("memory", "mem"),
    ("message", "msg"),
    ("millisecond", "ms"),
    ("minimum", "min"),
    ("miscellaneous", "misc"),
    ("multiple", "multi"),
    ("normalize", "normalise", "norm"),
    ("number", "num"),
    ("object", "obj"),
    ("operation", "op"),
    ("option", "opt", "opts"),
    ("original", "orig"),
    ("package", "pkg"),
    ("parameter", "param", "params"),
    ("password", "passwd", "pwd"),
    ("pointer", "ptr"),
    ("position", "pos"),
    ("previous", "prev"),
    ("process", "proc"),
    ("property", "prop", "props"),
    ("random", "rand"),
    ("receive", "recv"),
    ("reference", "ref"),
    ("repository", "repo"),
    ("request", "req"),
    ("response", "resp"),
    ("separator", "sep"),
    ("sequence", "seq"),
    ("server", "srv"),
    ("service", "svc"),
    ("signature", "sig"),
    ("socket", "sock"),
    ("source", "src"),
    ("specification", "spec"),
    ("standard", "std"),
    ("statistics", "stats"),
    ("synchronize", "synchronous", "sync"),
    ("system", "sys"),
    ("table", "tbl"),
    ("template", "tmpl", "tpl"),
    ("temporary", "temp", "tmp"),
    ("text", "txt"),
    ("timestamp", "ts"),
    ("token", "tok"),
    ("transaction", "txn"),
    ("utility", "util", "utils"),
    ("vector", "vec"),
    ("version", "ver"),
    ("window", "win"),
)


def _by_stem() -> dict[str, tuple[str, ...]]:
    """Each form's stem, and those of its inflections (the light stem takes ``processes`` to another stem than
    ``process``), to its group."""
    out: dict[str, tuple[str, ...]] = {}
    for group in GROUPS:
        for word in group:
            for key in _stems(word):
                out.setdefault(key, group)
    return out


def _stems(word: str) -> set[str]:
    """The light stems of a word and of its inflections."""
    return {stem(word + end) for end in ("", "s", "es", "ed", "ing")}


_BY_STEM = _by_stem()


def alike(terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each of ``terms`` with the other forms of its group (none a form of one of ``terms``: an inflection of it
    has its stem); terms without any left out."""
    stems = {stem(t) for t in terms}
    out: dict[str, tuple[str, ...]] = {}
    for term in terms:
        group = _BY_STEM.get(stem(term), ())
        others: list[str] = []
        for word in group:
            if not _stems(word) & stems and not any(stem(word) in _stems(o) for o in others):
                others.append(word)
        if others:
            out[term] = tuple(others)
    return out
