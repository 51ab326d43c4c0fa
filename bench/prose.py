"""The docs that describe the code: sentences naming a declaration, as a field of it (issue 39, item 3).

Measured by bench/retrieval.py and not shipped: the gain was one question a half
(bench/README.md, issue 39). In the declarations' own FTS5 row it lowered every
answer (FTS5's bm25 normalises by the length of the whole row, so long prose buries a
well-documented declaration's name); it is kept here in a table of its own, its bm25
added to the row's at :data:`PROSE_WEIGHT`.

A checkout's prose (``.md``, ``.rst``, ``.txt`` files), the docstrings of its other
declarations, and the names of its tests (``test_secure_filename_unicode`` -> unicode)
are read for mentions of declarations' names. A mention is a name written as code
(```` `name` ````, ``name(``, ``.name``) or a name that cannot be an English word
(``secure_filename``, ``TestClient``); names shorter than :data:`MIN_NAME` and names
declared more than :data:`MAX_SHARED` times are left out. Each sentence mentioning one
becomes part of that declaration's prose, at most :data:`MAX_SENTENCES` of them (the
first met). :func:`attach_prose` writes one checkout's into the table ``declaration_prose``.

:func:`through_service` puts it in the service's search for ``bench/semantic.py --prose W[,half]``: its bm25 at
``W`` joins the fielded query's (a declaration only its prose names joins the candidates), and its words count in
coverage as another field (``half``: as half a word, as the body's do), the reason quoting its sentence as ``docs``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import gateway.index.reasons as reasons
import gateway.index.semantic as semantic
from gateway.index.fields import match_expression
from gateway.index.store import Store, WordHit
from gateway.index.words import query_terms, split_words

__all__ = ["PROSE_WEIGHT", "attach_prose", "mentions", "prose_scores", "through_service"]

#: The weight of prose's bm25 beside the declaration's own row's.
PROSE_WEIGHT = 0.5

PROSE_SUFFIXES = (".md", ".rst", ".txt")
MIN_NAME = 4
MAX_SHARED = 5
MAX_SENTENCES = 12
#: A prose file larger than this is not read (a changelog of a decade).
MAX_PROSE_BYTES = 512 * 1024
_SENTENCES = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`*])|\n\s*\n")
_CODE = re.compile(r"`{1,2}([A-Za-z_][\w.]*)(?:\(\))?`{1,2}|\b([A-Za-z_]\w*)\(|\.([A-Za-z_]\w*)\b")
_WORD = re.compile(r"\b([A-Za-z_]\w*)\b")
_SKIP = frozenset({"node_modules", ".git", "__pycache__", "vendor", "target", "dist", "build"})


def _distinct(name: str) -> bool:
    """Whether a name cannot be an English word: it holds ``_`` or a capital after its first letter."""
    return "_" in name.strip("_") or any(c.isupper() for c in name[1:])


def mentions(text: str, names: frozenset[str], bare: bool = True) -> Iterator[tuple[str, str]]:
    """(name, sentence) for each sentence of ``text`` naming one of ``names`` (see the module docstring)."""
    for sentence in _SENTENCES.split(text):
        found: set[str] = set()
        for match in _CODE.finditer(sentence):
            word = (match.group(1) or match.group(2) or match.group(3) or "").rsplit(".", 1)[-1]
            if word in names:
                found.add(word)
        for match in _WORD.finditer(sentence) if bare else ():
            word = match.group(1)
            if word in names and _distinct(word):
                found.add(word)
        flat = " ".join(sentence.split())
        for name in found:
            yield name, flat


def _prose_files(root: str) -> Iterator[str]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP and not d.startswith(".")]
        for name in files:
            if name.endswith(PROSE_SUFFIXES):
                yield os.path.join(folder, name)


def _read(path: str) -> str:
    try:
        if os.path.getsize(path) > MAX_PROSE_BYTES:
            return ""
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def attach_prose(store: Store, root: str, *, bare: bool = False, docs: bool = True, tests: bool = True) -> int:
    """Write the prose of a checkout's declarations from the sentences that name them; how many have some.
    ``bare``: names not written as code count too; ``docs``: other declarations' docstrings are read;
    ``tests``: test names."""
    db = store._db
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS declaration_prose USING fts5(prose, tokenize = 'porter unicode61')")
    rows = db.execute(
        "SELECT d.id, d.name FROM declarations d JOIN files f ON f.id = d.file_id "
        "WHERE f.root = ? AND d.kind != 'impl'",
        (root,),
    ).fetchall()
    by_name: dict[str, list[int]] = {}
    for rid, name in rows:
        if len(name) >= MIN_NAME:
            by_name.setdefault(name, []).append(rid)
    names = frozenset(n for n, ids in by_name.items() if len(ids) <= MAX_SHARED)
    found: dict[int, dict[str, None]] = {}

    def add(name: str, sentence: str, source: int | None = None) -> None:
        for rid in by_name[name]:
            if rid != source:
                sentences = found.setdefault(rid, {})
                if len(sentences) < MAX_SENTENCES:
                    sentences.setdefault(sentence)

    for path in _prose_files(root):
        for name, sentence in mentions(_read(path), names, bare):
            add(name, sentence)
    documented = db.execute(
        "SELECT w.rowid, w.doc FROM declaration_words w JOIN declarations d ON d.id = w.rowid "
        "JOIN files f ON f.id = d.file_id WHERE f.root = ? AND w.doc != ''",
        (root,),
    )
    for rid, doc in documented if docs else ():
        for name, sentence in mentions(doc, names, bare):
            add(name, sentence, rid)
    for _, name in rows if tests else ():  # tests named after what they exercise: their other words
        if name.startswith("test_"):
            parts = name[5:].split("_")
            for cut in range(len(parts) - 1, 0, -1):
                candidate = "_".join(parts[:cut])
                if candidate in names:
                    add(candidate, " ".join(split_words(" ".join(parts[cut:]))))
                    break
    rows_out = [(rid, " ".join(sentences)) for rid, sentences in found.items()]
    db.executemany("INSERT INTO declaration_prose (rowid, prose) VALUES (?, ?)", rows_out)
    return len(found)


def prose_scores(store: Store, root: str, query: str) -> dict[int, float]:
    """Declaration id -> the bm25 of its prose for ``query`` (those whose prose holds a word of it)."""
    match = match_expression(query_terms(query))
    if not match:
        return {}
    rows = store._db.execute(
        "SELECT p.rowid, -bm25(declaration_prose) FROM declaration_prose p JOIN declarations d ON d.id = p.rowid "
        "JOIN files f ON f.id = d.file_id WHERE declaration_prose MATCH ? AND f.root = ?",
        (match, root),
    )
    return dict(rows)


def through_service(weight: float, half: bool) -> None:
    """Make the service's semantic search read the prose table (bench/semantic.py ``--prose``; see the module
    docstring). Patches this process's classes: a bench's, never the product's."""
    by_words = semantic.Intents._by_words
    words_of = Store.words_of

    def _by_words(
        self: semantic.Intents, store: Store, terms: Any, limit: int, accept: Any, near: Any
    ) -> list[WordHit]:
        found = by_words(self, store, terms, limit, accept, near)
        match = match_expression(terms)
        if not match:
            return found
        rows = store._db.execute(
            "SELECT p.rowid, d.file_id, d.ordinal, -bm25(declaration_prose) FROM declaration_prose p "
            "JOIN declarations d ON d.id = p.rowid JOIN files f ON f.id = d.file_id "
            "WHERE declaration_prose MATCH ? AND f.root = ?",
            (match, self.root),
        ).fetchall()
        named = {r[0]: r for r in rows if r[1] in self.paths and (accept is None or accept(self.paths[r[1]]))}
        out = [
            WordHit(h.declaration_id, h.file_id, h.ordinal, h.score + weight * (named[h.declaration_id][3]))
            if h.declaration_id in named
            else h
            for h in found
        ]
        seen = {h.declaration_id for h in found}
        out += [WordHit(rid, f, o, weight * s) for rid, (_, f, o, s) in named.items() if rid not in seen]
        return sorted(out, key=lambda h: -h.score)[: semantic.depth(limit)]

    def _words_of(self: Store, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        out = words_of(self, ids)
        if not ids:
            return out
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(f"SELECT rowid, prose FROM declaration_prose WHERE rowid IN ({marks})", tuple(ids))
        for rid, prose in rows:
            texts = list(out.get(rid, ("",) * 7))
            texts[6] = prose
            out[rid] = tuple(texts)
        return out

    semantic.Intents._by_words = _by_words  # type: ignore[method-assign]
    Store.words_of = _words_of  # type: ignore[method-assign, assignment]
    if half:
        reasons._MINOR = frozenset({*reasons._MINOR, "prose"})
