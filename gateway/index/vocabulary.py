"""The code's own words, near a question's: query expansion by the model's word vectors.

A question asks in its words ("attach a sub application") what the code says in its
own (``Mux.Mount``). The **vocabulary** is the words of the declarations' names,
enclosing names and parameters (:func:`code_words`, the fields ``name``, ``qualified``
and ``params`` of :mod:`gateway.index.fields`), each with the model's vector of it
(:mod:`gateway.index.model`: the mean of its tokens' embeddings, as any text's). The
builder adds the words it has not seen while it writes the fields (one table of the
database, each word embedded once), never a search.

For each word of a question, :meth:`Vocabulary.neighbours` gives the :data:`NEIGHBOURS`
words of the vocabulary nearest to it whose cosine is at least :data:`SIMILARITY`,
leaving out the word's own forms (one's light stem the other's prefix: ``upload``,
``uploaded``; the fielded index finds those already). A search
(:meth:`gateway.index.semantic.Intents.search`) adds those held by at most
:data:`MAX_SHARE` of the declarations to its FTS5 query, each weighing
:data:`EXPANSION_WEIGHT` of a word of the question; and a declaration that lacks a word
of the question but holds one of its neighbours (any the index holds) counts the word
by that weight in its coverage (:func:`gateway.index.reasons.explain`), its reason
naming it: ``name: stop (for cancel)``. Where no word of the question is indexed there
is nothing to expand from: the model answers alone.

The vocabulary only grows (up to :data:`MAX_WORDS`): a word whose declarations are gone
stays, and matches nothing. Vectors of another model empty it
(:meth:`gateway.index.store.Store.use_intents`), and the builder embeds it again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gateway.index.store import Store
from gateway.index.words import STOPWORDS, stem

__all__ = [
    "EXPANSION_WEIGHT",
    "MAX_SHARE",
    "MAX_WORDS",
    "NEIGHBOURS",
    "SIMILARITY",
    "Vocabulary",
    "code_words",
    "same_word",
]

#: Neighbours added per word of a question, at most; the cosine each must have with the word's vector; and their
#: weight against the word's 1, in the bm25 part of the score and in coverage. Chosen together on the calibration
#: set alone (the third part of bench/semantic.py's questions) at the default threshold: the best recall@10 (then
#: MRR@10) of 66 settings (1-8 neighbours, bars 0.25-0.5, weights 0.3-0.7) whose first ten hits are in an expected
#: declaration's file, and are one, about as often as without expansion (bench/README.md, issue 39); the two halves
#: check it.
NEIGHBOURS = 5
SIMILARITY = 0.3
EXPANSION_WEIGHT = 0.5  # 1 / a whole number: the FTS5 query gives the question's words that many times
#: A neighbour held by more than this share of the index's declarations stays out of the FTS5 query (it still
#: counts in coverage): the rows it matches are what an expanded search costs (every neighbour in the query: the
#: fielded query 113 ms median at 110,075 declarations, against 32 ms unexpanded). Chosen for the time budget among
#: 0.002, 0.005 and 0.01, checked on the calibration set (bench/README.md, issue 39).
MAX_SHARE = 0.002
#: Words the vocabulary keeps, at most (the builder adds none beyond): 51 MB of vectors in a searching process,
#: a few milliseconds a question. The 12 checkouts of bench/semantic.py (22,015 declarations) have 3,695.
MAX_WORDS = 50_000
#: Questions whose neighbours a vocabulary keeps in memory, at most.
NEAR_KEPT = 256
#: The shortest word kept, and the fields (of gateway.index.fields.FIELDS, by index) the words come from.
MIN_LENGTH = 3
_FIELDS = (0, 1, 2)

Words = Callable[[Sequence[str]], npt.NDArray[np.float32]]


def code_words(fields: Sequence[str]) -> set[str]:
    """The vocabulary's words in one declaration's fields: those of its name, enclosing names and parameters
    (already split into lower-case words), letters only, at least :data:`MIN_LENGTH` long, stop words aside."""
    out: set[str] = set()
    for at in _FIELDS:
        if at < len(fields):
            out.update(w for w in fields[at].split() if len(w) >= MIN_LENGTH and w.isalpha() and w not in STOPWORDS)
    return out


def same_word(a: str, b: str) -> bool:
    """Whether two words are forms of one (one's light stem a prefix of the other's): the index finds it already."""
    x, y = stem(a), stem(b)
    return x.startswith(y) or y.startswith(x)


class Vocabulary:
    """The database's vocabulary in memory (one unit vector a word), read again as the builder adds to it."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self._last = 0
        self._lock = threading.Lock()
        #: neighbours() by (terms, count, bar) while the words are unchanged: every checkout of a search asks
        #: for the same ones (8 matrix products of a one-shot search of 8 checkouts, 75 ms: issue 52)
        self._near: dict[tuple[tuple[str, ...], int, float], dict[str, tuple[str, ...]]] = {}

    def __len__(self) -> int:
        return len(self.words)

    def load(self, store: Store, dim: int, folder: str) -> None:
        """:meth:`sync` in a process that reads the vocabulary once (a one-shot search): the words the
        database held when the vocabulary was last mapped are read from that mapped copy in ``folder``
        (:func:`_mapped`; written there first where it is missing or copies other rows), only those added
        since from the database (6,224 rows of vectors took 25-50 ms to read, their copy 1 ms: issue 52)."""
        path = os.path.join(folder, f"vocabulary-{_digest(store.path or '')}.bin") if store.path else None
        if path is not None and not self.words:
            mapped = _mapped(path, store, dim)
            if mapped is not None:
                with self._lock:
                    self.words, self.matrix, self._last = mapped
        read = self._last
        self.sync(store, dim)
        if path is not None and self._last != read and self.words:
            _map(path, store, dim, self.words, self.matrix, self._last)

    def sync(self, store: Store, dim: int) -> None:
        """Read the words added since the last look (the caller calls it when the database changed)."""
        with self._lock:
            if self._last and store.vocabulary_last() < self._last:  # emptied (another model): read again
                self.words, self._last, self._near = [], 0, {}
            rows = store.vocabulary_since(self._last)
            if not rows:
                return
            vectors = np.frombuffer(b"".join(v for _, _, v in rows), dtype="<f2").reshape(len(rows), dim)
            fresh = vectors.astype(np.float32)
            self.matrix = np.concatenate([self.matrix, fresh]) if len(self.words) else fresh
            self.words.extend(w for _, w, _ in rows)
            self._last = rows[-1][0]
            self._near = {}

    def neighbours(
        self,
        terms: Sequence[str],
        embed: Words,
        count: int = NEIGHBOURS,
        bar: float = SIMILARITY,
    ) -> dict[str, tuple[str, ...]]:
        """Each word of ``terms``' nearest words in the vocabulary (``embed`` gives the words' vectors): at most
        ``count``, each with a cosine of at least ``bar``, none a form of the word or of another of ``terms``;
        words without any left out. The same ``terms`` are answered from memory while the words are unchanged
        (``embed`` is the model's whose vectors the vocabulary holds)."""
        key = (tuple(terms), count, bar)
        known = self._near.get(key)
        if known is not None:
            return dict(known)
        found = self._neighbours(terms, embed, count, bar)
        if len(self._near) >= NEAR_KEPT:
            self._near = {}
        self._near[key] = found
        return dict(found)

    def _neighbours(self, terms: Sequence[str], embed: Words, count: int, bar: float) -> dict[str, tuple[str, ...]]:
        matrix, words = self.matrix, self.words
        wanted = [t for t in terms if t.isalpha()]
        if not len(words) or not wanted or count <= 0:
            return {}
        cosines = matrix @ embed(wanted).T  # (words, terms)
        out: dict[str, tuple[str, ...]] = {}
        for j, term in enumerate(wanted):
            column = cosines[:, j]
            top = min(len(column), 4 * count + 8)
            best = np.argpartition(-column, top - 1)[:top]
            chosen: list[str] = []
            for row in sorted(best, key=lambda r: -column[r]):
                if column[row] < bar or len(chosen) >= count:
                    break
                word = words[row]
                if not any(same_word(word, t) for t in terms) and not any(same_word(word, c) for c in chosen):
                    chosen.append(word)
            if chosen:
                out[term] = tuple(chosen)
        return out


#: The mapped vocabulary's layout (a change writes it again).
MAPPED = "vocabulary/1"
_ALIGN = 64


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _mapped(path: str, store: Store, dim: int) -> tuple[list[str], npt.NDArray[np.float32], int] | None:
    """The words, vectors and last row of the vocabulary mapped at ``path``, where it copies this database's
    rows (the same file, model and recipe, and its rows up to its last one still those); None else."""
    import json
    import struct

    try:
        with open(path, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
            words = handle.read(header["words"]).decode("utf-8").split("\n") if header["rows"] else []
        if (
            header.get("format") != MAPPED
            or header.get("file") != list(store.identity or ())
            or header.get("intents") != store.intents_of()
            or header.get("dim") != dim
            or len(words) != header["rows"]
            or store.vocabulary_mark(header["last"]) != (header["rows"], header["word"])
        ):
            return None
        matrix = np.memmap(path, dtype=np.float32, mode="r", offset=header["offset"], shape=(header["rows"], dim))
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    return words, matrix, int(header["last"])


def _map(path: str, store: Store, dim: int, words: Sequence[str], matrix: npt.NDArray[np.float32], last: int) -> None:
    """Write the vocabulary's words and vectors (float32, as read) to ``path``, for :func:`_mapped` (a new file put
    in place at once; nothing where it cannot be written)."""
    import contextlib
    import json
    import struct

    text = "\n".join(words).encode("utf-8")
    header = {
        "format": MAPPED,
        "file": list(store.identity or ()),
        "intents": store.intents_of(),
        "dim": dim,
        "rows": len(words),
        "last": last,
        "word": words[-1],
        "words": len(text),
        "offset": 0,
    }
    while True:  # the vectors start aligned, after the header and the words (the offset is in the header)
        encoded = json.dumps(header).encode("utf-8")
        offset = -(-(8 + len(encoded) + len(text)) // _ALIGN) * _ALIGN
        if header["offset"] == offset:
            break
        header["offset"] = offset
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(struct.pack("<Q", len(encoded)) + encoded + text)
            handle.write(b"\0" * (offset - 8 - len(encoded) - len(text)))
            handle.write(np.ascontiguousarray(matrix, dtype=np.float32).tobytes())
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def expansion_words(expansions: Mapping[str, Iterable[str]]) -> list[str]:
    """The neighbours of every word, each once, in order."""
    return list(dict.fromkeys(w for words in expansions.values() for w in words))
