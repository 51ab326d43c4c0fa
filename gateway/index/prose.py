"""The docs that describe the code: the sentences of a checkout that name a declaration, as a field of it.

People ask in the words a project's docs use ("mock out a transport ... rather than
making actual network requests" says httpx's guide of ``MockTransport``), and those
words are often in neither the declaration's name nor its docstring. So the builder
reads, once a pass has changed a checkout (:func:`write_prose`):

- its prose files (``.md``, ``.rst``, ``.txt``) among those its namespace lists (ignore
  files and excludes applied, as a search sees them; at most :data:`MAX_FILES` of them,
  :data:`MAX_FILE_BYTES` each, :data:`MAX_BYTES` in all, vendored folders aside);
- the docstrings of its declarations (another declaration's docstring that names one);
- the names of its tests (``test_secure_filename_unicode`` -> "unicode", for
  ``secure_filename``).

Only prose in the project's main language joins (:mod:`gateway.index.language`): the
language most of its docstrings are in (English where none tells); a docs file laid out as
a translation into another (``docs/de/``, ``README.de.md``, ``i18n/``) is not read, and a
sentence a cheap check finds in another language or script is left out.

A mention is a name written as code (```` `name` ````, ``name(``, ``.name``); names
shorter than :data:`MIN_NAME` and names declared more than :data:`MAX_SHARED` times are
left out (too common to say which). Each sentence naming a declaration joins its prose,
at most :data:`MAX_SENTENCES` of them (the first met), in a table of its own
(``declaration_prose``): in the declaration's own row, bm25's length normalisation
buried a well-documented declaration's name under its prose.

A search (:meth:`gateway.index.semantic.Intents.search`) asks the prose too: its bm25,
weighed :data:`WEIGHT`, joins the declaration's own (a declaration only its prose names
becomes a candidate), and its words count in coverage as half a word, as a body's do
(:func:`gateway.index.reasons.explain`), the reason quoting the sentence:
``docs: "During testing it can often be useful to mock out a transport..."``.
The weight and the half were chosen on bench/semantic.py's names half and calibration
set and checked on a fourth part written before any run (bench/README.md, issue 39).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator

from gateway.index.language import main_language, path_languages, spoken_in
from gateway.index.store import Store
from gateway.index.words import split_words

__all__ = ["WEIGHT", "mentions", "write_prose"]

#: The prose's bm25 beside the declaration's own (0: prose is not asked).
WEIGHT = 0.5
SUFFIXES = (".md", ".rst", ".txt")
MIN_NAME = 4
MAX_SHARED = 5
MAX_SENTENCES = 12
#: A sentence is kept to this many characters (a paragraph without a full stop, a code block): uncut, the prose
#: made the bench's database 62.0 MB instead of 37.1; at 1,000 41.7 MB, and the names half and the calibration
#: set answer as well or better (400: 41.0 MB, one calibration question fewer; bench/README.md, issue 39).
SENTENCE_CHARS = 1000
#: A prose file larger than this is not read (a changelog of a decade), nor more than MAX_FILES files or
#: MAX_BYTES in all of one checkout.
MAX_FILE_BYTES = 512 * 1024
MAX_FILES = 5000
MAX_BYTES = 32 * 1024 * 1024
_SENTENCES = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`*])|\n\s*\n")
_CODE = re.compile(r"`{1,2}([A-Za-z_][\w.]*)(?:\(\))?`{1,2}|\b([A-Za-z_]\w*)\(|\.([A-Za-z_]\w*)\b")
_SKIP = frozenset({"node_modules", "vendor", "target", "dist", "build", "third_party", "__pycache__"})


def mentions(text: str, names: frozenset[str]) -> Iterator[tuple[str, str]]:
    """(name, sentence) for each sentence of ``text`` naming one of ``names`` as code."""
    for sentence in _SENTENCES.split(text):
        found: set[str] = set()
        for match in _CODE.finditer(sentence):
            word = (match.group(1) or match.group(2) or match.group(3) or "").rsplit(".", 1)[-1]
            if word in names:
                found.add(word)
        if found:
            flat = " ".join(sentence.split())[:SENTENCE_CHARS]
            for name in found:
                yield name, flat


def _texts(root: str, paths: Iterable[str], main: str) -> Iterator[str]:
    """The texts of the prose files among ``paths`` (namespace-relative, as the namespace lists them), within the
    bounds, vendored and built folders and translations into another language than ``main`` aside."""
    files = read = 0
    prose = sorted(rel for rel in paths if rel.endswith(SUFFIXES) and _SKIP.isdisjoint(rel.split("/")[:-1]))
    translated = path_languages(prose)
    for rel in prose:
        if translated.get(rel, main) != main:
            continue
        path = os.path.join(root, rel)
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES or read + size > MAX_BYTES:
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        files += 1
        read += size
        yield text
        if files >= MAX_FILES:
            return


def write_prose(
    store: Store, root: str, listed: Callable[[], Iterable[str]], should_stop: Callable[[], bool] = lambda: False
) -> int | None:
    """Write a checkout's prose if its declarations changed since it was last written; how many declarations
    have some (None: nothing to do, or stopped). ``listed`` gives the checkout's files as its namespace lists
    them (:func:`gateway.index.files.list_all`: ignore files and the namespace's excludes applied), asked only
    when the prose is written."""
    if store.prose_written(root):
        return None
    names, docs = store.prose_sources(root)
    by_name: dict[str, list[int]] = {}
    for rid, name in names:
        if len(name) >= MIN_NAME:
            by_name.setdefault(name, []).append(rid)
    named = frozenset(n for n, ids in by_name.items() if len(ids) <= MAX_SHARED)
    found: dict[int, dict[str, None]] = {}
    main = main_language(doc for _, doc in docs)

    def add(name: str, sentence: str, source: int | None = None) -> None:
        if not spoken_in(sentence, main):  # evidence in the code's language only
            return
        for rid in by_name[name]:
            if rid != source:
                sentences = found.setdefault(rid, {})
                if len(sentences) < MAX_SENTENCES:
                    sentences.setdefault(sentence)

    for text in _texts(root, listed(), main):
        if should_stop():
            return None
        for name, sentence in mentions(text, named):
            add(name, sentence)
    for rid, doc in docs:
        for name, sentence in mentions(doc, named):
            add(name, sentence, rid)
    for _, name in names:  # tests named after what they exercise: their other words
        if name.startswith("test_"):
            parts = name[5:].split("_")
            for cut in range(len(parts) - 1, 0, -1):
                candidate = "_".join(parts[:cut])
                if candidate in named:
                    add(candidate, " ".join(split_words(" ".join(parts[cut:]))))
                    break
    store.put_prose(root, [(rid, " ".join(sentences)) for rid, sentences in found.items()])
    return len(found)
