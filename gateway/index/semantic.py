"""Semantic search over one checkout's intent index: vectors in memory, scored with the query's words.

:class:`Intents` holds a checkout's vectors as one float32 matrix (one row per
declaration) loaded from the database and kept in step with it: when the database
changed (at most every :data:`SYNC_S`), only the rows whose id it has not seen are read
and those gone are dropped. A process's first search of a checkout reads no vectors but
its candidates' (a one-shot ``fedsearch search --semantic`` would otherwise read every
checkout's, 42,008 rows for sqlalchemy, to use a few hundred: issue 52); the matrix is
loaded by the second (a process that searches again is a server), or at once where the
model must answer alone.

A search (:meth:`Intents.search`) ranks a checkout's declarations by the fielded BM25
index (SQLite FTS5, :mod:`gateway.index.fields`): the question's words, any of them,
weighted by the field they are found in, the other forms of those the code shortens at
the same weight (:mod:`gateway.index.abbreviations`: ``params`` for ``parameters``), and the
code's words nearest to each by the model's vectors at a lower weight
(:mod:`gateway.index.vocabulary`, query expansion), and the sentences of the checkout's
docs that name a declaration (:mod:`gateway.index.prose`, their bm25 at half weight);
it reads the best :func:`depth` of them, and
the declarations whose name *is* a one-word query. Each gets a score in [0, 1]
(:func:`words_score`): its words' raw score, half from its bm25 per word of the question
the index holds (:data:`BM25_HALF` gives 0.25), half the share of what the question's words
say that it holds (each word weighed by its rarity in the index, a word no declaration
holds left out; those only in its body, path or docs count half), mixed with the cosine
of its vector and the query's (:func:`cosine_part`, :data:`MODEL_WEIGHT` of the whole: the
model reranks what the words found), put on the answer's scale by :func:`calibrated`
(:data:`WEAK_RAW` is the default threshold, 0.5); and 1 for a declaration whose name is
the query (an exact name still wins); its reason says which words were found in which
field (:func:`gateway.index.reasons.explain`).

Where no word of the question is in the index, the model answers instead: the cosine
of the query's vector and each declaration's (a matrix-vector product; 100,000
declarations take a few milliseconds), the best :func:`depth` scored by
:func:`score_of`: the cosine mapped piecewise linearly (:data:`COS_FLOOR` and under to
0, :data:`COS_HALF` to 0.5, :data:`COS_FULL` and over to 1), lifted by the query's
words in the name, signature and intent. Fusing the two rankings (reciprocal rank
fusion) did not pay on the paraphrased questions, nor did the model's own best
declarations added to what the words found (bench/README.md, issue 39).

Declarations scoring 0 are not hits; the rest are, those under the request's threshold
included (ranking counts those in ``weak_filtered``); a file shows its :data:`PER_FILE` best,
best first (ties in line order). Files come best first, ties by path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

import gateway.index.abbreviations as abbreviations
import gateway.index.prose as prose
import gateway.index.vocabulary as vocab
from gateway.index.abbreviations import alike
from gateway.index.fields import WEIGHTS, match_expression
from gateway.index.intents import vectors_of
from gateway.index.reasons import Coverage, explain, word_weights
from gateway.index.store import Candidate, Store, WordHit
from gateway.index.vocabulary import Vocabulary, Words, expansion_words
from gateway.index.words import query_terms, split_words, terms_in
from gateway.models import FileMatch, Hit, cut_text

__all__ = [
    "COS_FLOOR",
    "COS_FULL",
    "COS_HALF",
    "MODEL_WEIGHT",
    "PER_FILE",
    "WEAK_RAW",
    "Intents",
    "Reasons",
    "Scored",
    "WordCounts",
    "calibrated",
    "cosine_part",
    "depth",
    "score_of",
    "words_score",
]

#: Cosines at or under COS_FLOOR score 0, COS_HALF 0.5, COS_FULL and over 1. Measured on
#: bench/semantic.py's questions: a declaration's cosine to an unrelated question has a median
#: of 0.08 and a 99th percentile of 0.49; the expected answers' median is 0.47, their first
#: quartile 0.37; so the default threshold (0.5) keeps about three answers in four and drops
#: all but a few in a hundred of the rest, before the query's words lift a score.
COS_FLOOR = 0.15
COS_HALF = 0.35
COS_FULL = 0.8
#: Weights of the query's words found in a declaration's name, and in its signature or intent.
NAME_WEIGHT = 0.5
TEXT_WEIGHT = 0.5
#: The bm25 per word of the question that gives half the bm25 part (0.25): chosen on the first half of
#: bench/semantic.py's questions (the names half) for recall@10 and MRR@10 at the default threshold (0.5),
#: among 1.0, 0.7, 0.5, 0.4 and 0.3 (bench/README.md, issue 39); the paraphrased half checks it.
BM25_HALF = 0.7
#: The share of a declaration's raw score that is its vector's cosine to the query's (:func:`cosine_part`), the
#: rest its words' (half bm25, half coverage): the model reranks what the words found. Chosen on the names half
#: and the calibration set with every hit shown, among 0, 0.1, 0.15, 0.2, 0.25 and 0.3 (0, 0.15 and 0.2 tie on
#: recall, the best; 0.2 has the best MRR; bench/README.md, issue 39); the paraphrased half and the fresh part
#: check it.
MODEL_WEIGHT = 0.2
#: The raw score that the default threshold (0.5) stands for: under it a hit is weak. Chosen on the calibration
#: set (the third part of bench/semantic.py's questions, over other declarations than the two halves, which
#: check it): the first quartile of the right answers' scores where the ranking puts them in the first ten
#: (0.4257; a bar at or under it keeps three in four), and where a hit stops being right more often than the first
#: ten's average hit (0.42; bench/README.md, issue 39).
WEAK_RAW = 0.425
#: Hits a file shows at most (its best ones).
PER_FILE = 3
#: Words whose counts (of the declarations holding them) a checkout's searches keep, at most.
MAX_COUNTS = 10_000
#: How long a matrix is trusted while the database changes (seconds).
SYNC_S = 1.0
#: Declarations scored in full per search: at least this many, else one per file wanted (reading and
#: scoring them is most of a search's time after the matrix product).
MIN_DEPTH = 100
MAX_DEPTH = 2000


def depth(max_files: int) -> int:
    """How many of the best declarations by cosine a search looks at closely."""
    return min(MAX_DEPTH, max(MIN_DEPTH, max_files))


def words_score(bm25: float, terms: int, coverage: float, cosine: float | None = None) -> float:
    """A declaration's score in [0, 1], :func:`calibrated`: half from its bm25 per word of the query the index
    holds and the FTS5 query asks for, itself or a form of it (``terms`` of them; BM25_HALF gives 0.25), half
    the share of what the query's words say that it holds (``coverage``, :func:`gateway.index.reasons.explain`);
    with the ``cosine`` of its vector and the query's, that much mixed with :func:`cosine_part` at
    :data:`MODEL_WEIGHT` (None: no vector yet, the words alone)."""
    per_word = max(0.0, bm25) / max(1, terms)
    raw = 0.5 * per_word / (per_word + BM25_HALF) + 0.5 * min(1.0, coverage)
    if cosine is not None:
        raw = (1.0 - MODEL_WEIGHT) * raw + MODEL_WEIGHT * cosine_part(cosine)
    return calibrated(raw)


def cosine_part(cosine: float) -> float:
    """A cosine in [0, 1]: piecewise linear, :data:`COS_FLOOR` and under 0, :data:`COS_HALF` 0.5,
    :data:`COS_FULL` and over 1."""
    if cosine <= COS_HALF:
        return max(0.0, 0.5 * (cosine - COS_FLOOR) / (COS_HALF - COS_FLOOR))
    return min(1.0, 0.5 + 0.5 * (cosine - COS_HALF) / (COS_FULL - COS_HALF))


def calibrated(raw: float) -> float:
    """A raw score in [0, 1] on the answer's scale: linear on either side of :data:`WEAK_RAW`, which becomes the
    default threshold (0.5); 0 and 1 stay, and the order of any two scores is kept."""
    if raw < WEAK_RAW:
        return 0.5 * max(0.0, raw) / WEAK_RAW
    return min(1.0, 0.5 + 0.5 * (raw - WEAK_RAW) / (1.0 - WEAK_RAW))


def _normal(text: str) -> str:
    return "".join(split_words(text))


@dataclass(frozen=True, slots=True)
class Scored:
    """A declaration's score and what earned it."""

    score: float
    reason: str
    terms: tuple[str, ...]


def score_of(cosine: float, terms: Sequence[str], query: str, candidate: Candidate) -> Scored:
    """The hybrid score of one declaration (see the module docstring), its reason and matched terms."""
    semantic = cosine_part(cosine)
    named = terms_in(terms, split_words(candidate.qualified_name)) if terms else []
    in_signature = terms_in(terms, candidate.signature) if terms else []
    in_intent = terms_in(terms, candidate.intent) if terms and candidate.intent else []
    texts = set(in_signature) | set(in_intent)
    lexical = 0.0
    if terms:
        lexical = (NAME_WEIGHT * len(named) + TEXT_WEIGHT * len(texts)) / len(terms)
    score = semantic + (1.0 - semantic) * min(1.0, lexical)
    if _normal(query) == _normal(candidate.name):
        score = 1.0
    if candidate.intent and len(in_intent) >= len(in_signature):
        reason, found = candidate.intent, in_intent
    else:
        reason, found = candidate.signature or candidate.qualified_name, in_signature
    return Scored(round(score, 4), reason, tuple(found))


_Explained = tuple[
    Sequence[str],
    Sequence[str],
    Candidate,
    Mapping[str, float],
    Mapping[str, Sequence[str]],
    float,
    Mapping[str, Sequence[str]],
]


class Reasons:
    """Hits scored without their reasons, and what :func:`~gateway.index.reasons.explain` needs to write them.

    A search scores every candidate (a hundred a checkout) by its coverage alone
    (:class:`~gateway.index.reasons.Coverage`); a one-shot search by meaning writes the reasons of the
    hits of the files a page may show (:meth:`written`, after ranking), the same reasons the search would
    have written: 784 reasons of 8 checkouts were half a one-shot search's time (issue 52)."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[Hit, _Explained]] = {}

    def add(self, hit: Hit, args: _Explained) -> None:
        """A hit scored, its reason to be written from ``args`` (those of :func:`explain`)."""
        self._pending[id(hit)] = (hit, args)

    def written(self, hit: Hit) -> Hit:
        """``hit`` with its reason, where it is one of :meth:`add`'s (as is, else)."""
        entry = self._pending.get(id(hit))
        if entry is None or entry[0] is not hit:
            return hit
        reason, matched, _ = explain(*entry[1])
        return msgspec.structs.replace(hit, reason=reason, terms=matched)


class WordCounts:
    """How many declarations the fielded index holds, and how many of them hold each word: the index is every
    checkout's, so the checkouts' :class:`Intents` of one process may share one (a one-shot search of 8 checkouts
    counted the same words 8 times: issue 52). Counted once while the database is unchanged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}  # word -> declarations holding it, as of _counted
        self._total: int | None = None  # declarations in the fielded index, as of _counted
        self._counted = -1

    def __call__(self, store: Store, version: int, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """The declarations, and how many hold each of ``terms``, as of the database's ``version``."""
        with self._lock:
            if self._counted != version:
                self._counts.clear()
                self._total = None
                self._counted = version
            missing = [t for t in terms if t.isalnum() and t not in self._counts]
            if missing or self._total is None:
                total, counts = store.word_counts(missing)
                if len(self._counts) > MAX_COUNTS:
                    self._counts.clear()
                self._counts.update(counts)
                self._total = total
            known = {t: self._counts.get(t, 0) for t in terms}
            return self._total, known


class Intents:
    """One checkout's intent vectors in memory, in step with the database."""

    def __init__(self, root: str, counts: WordCounts | None = None) -> None:
        """``counts``: shared with the other checkouts' (of one database), else its own."""
        self.root = root
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.file_of = np.zeros(0, dtype=np.int64)  # per row: its file's id
        self.ordinal = np.zeros(0, dtype=np.int64)  # per row: its declaration's ordinal in the file
        self._rows: dict[int, tuple[int, int, int]] = {}  # intent row id -> (file id, first row, count)
        self._start: dict[int, int] = {}  # file id -> its first row
        self.paths: dict[int, str] = {}  # file id -> path
        self._version = -1
        self._synced = 0.0
        self._lock = threading.Lock()
        self._full = False  # whether the matrix holds the vectors (else only the rows' files and ordinals)
        self._searches = 0
        self._dim = 0
        self._words = counts if counts is not None else WordCounts()

    def __len__(self) -> int:
        return int(self.file_of.shape[0])

    # --- keeping in step -------------------------------------------------------------

    def sync(self, store: Store, dim: int) -> None:
        """Read what changed in the database since the last look (at most every SYNC_S)."""
        with self._lock:
            self._dim = dim
            if self._searches and not self._full:  # searched before: keep the vectors in memory from now on
                self._load_all(store)
                return
            now = time.monotonic()
            if self._version >= 0 and now - self._synced < SYNC_S:
                return
            version = store.data_version()
            self._synced = now
            if version == self._version:
                return
            self._reload(store, dim)
            self._version = version

    def changed(self) -> None:
        """This process wrote to the database (its own commits do not change data_version)."""
        self._version = -1

    def _load_all(self, store: Store) -> None:
        """Read every vector: the matrix kept in step from now on."""
        self._rows, self._start, self._full = {}, {}, True
        self._reload(store, self._dim)
        self._version = store.data_version()
        self._synced = time.monotonic()

    def _reload(self, store: Store, dim: int) -> None:
        if not self._full:
            self._reload_rows(store)
            return
        ids = store.intent_ids(self.root)
        kept = [rid for rid in self._rows if rid in ids]
        new = [rid for rid in ids if rid not in self._rows]
        if not new and len(kept) == len(self._rows):
            return
        parts: list[np.ndarray] = []
        files: list[np.ndarray] = []
        ordinals: list[np.ndarray] = []
        rows: dict[int, tuple[int, int, int]] = {}
        at = 0
        for rid in kept:
            file_id, first, count = self._rows[rid]
            if count:
                parts.append(self.matrix[first : first + count])
                files.append(np.full(count, file_id, dtype=np.int64))
                ordinals.append(np.arange(count, dtype=np.int64))
            rows[rid] = (file_id, at, count)
            at += count
        for rid, file_id, count, blob in store.intent_rows(new):
            if count:
                parts.append(vectors_of(blob, count, dim))
                files.append(np.full(count, file_id, dtype=np.int64))
                ordinals.append(np.arange(count, dtype=np.int64))
            rows[rid] = (file_id, at, count)
            at += count
        self.matrix = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
        self.file_of = np.concatenate(files) if files else np.zeros(0, dtype=np.int64)
        self.ordinal = np.concatenate(ordinals) if ordinals else np.zeros(0, dtype=np.int64)
        self._rows = rows
        self._placed(store)

    def _reload_rows(self, store: Store) -> None:
        """The rows' files and ordinals without their vectors (read for the candidates alone)."""
        counts = store.intent_counts(self.root)
        if counts.keys() == self._rows.keys():
            return
        rows: dict[int, tuple[int, int, int]] = {}
        at = 0
        for rid, (file_id, count) in counts.items():
            rows[rid] = (file_id, at, count)
            at += count
        counted = list(rows.values())
        sizes = np.array([c for _, _, c in counted], dtype=np.int64)
        firsts = np.array([a for _, a, _ in counted], dtype=np.int64)
        self.matrix = np.zeros((0, self._dim), dtype=np.float32)
        self.file_of = np.repeat(np.array([f for f, _, _ in counted], dtype=np.int64), sizes)
        self.ordinal = np.arange(at, dtype=np.int64) - np.repeat(firsts, sizes)  # 0, 1, ... within each file
        self._rows = rows
        self._placed(store)

    def _placed(self, store: Store) -> None:
        """Each file's first row, and the paths of the files held."""
        self._start = {file_id: first for file_id, first, _ in self._rows.values()}
        gone = set(self.paths) - set(self._start)
        for file_id in gone:
            del self.paths[file_id]
        missing = [f for f in self._start if f not in self.paths]
        if missing:
            self.paths.update(store.paths_of(missing))

    # --- searching -------------------------------------------------------------------

    def search(
        self,
        store: Store,
        query: str,
        vector: Callable[[], np.ndarray],
        limit: int,
        accept: Callable[[str], bool] | None,
        vocabulary: Vocabulary | None = None,
        embed: Words | None = None,
        later: Reasons | None = None,
    ) -> list[FileMatch]:
        """The files holding the best declarations for ``query``, best first, each with its hits in line order:
        ranked by the fielded BM25 index, the question's words and their neighbours in ``vocabulary`` (the
        words' vectors by ``embed``), mixed with the model's cosine (``vector()``, the query's); by the cosine
        alone where no word of the query is in it. With ``later``, the hits the words found come without their
        reasons, which ``later`` writes for the hits a page may show (:class:`Reasons`)."""
        terms = query_terms(query)
        same = alike(terms)
        total, held = self._count(store, _with_forms(terms, same))
        near, rare = self._expansions(store, terms, held, vocabulary, embed)
        most = abbreviations.MAX_SHARE * total  # a form held by more is not asked for
        asked = [*terms, *(f for f in held if f not in terms and held[f] <= most)]
        found = self._by_words(store, asked, limit, accept, rare)
        exact = self._exact(store, query, accept)
        by_file: dict[int, list[Hit]] = {}
        if found or exact:
            chosen = {(h.file_id, h.ordinal): h for h in found}
            candidates = store.candidates([*chosen, *exact])
            ids = [c.id for c in candidates]
            fields = store.words_of(ids) if ids else {}
            cosines = self._cosines(store, vector, candidates) if MODEL_WEIGHT > 0 else {}
            # coverage weighs a word with alike forms by its most held form; the bm25 part divides by the words
            # asked for, themselves or by a form
            weights = word_weights(total, {t: max(held[f] for f in (t, *same.get(t, ()))) for t in terms})
            asked_for = sum(1 for t in weights if any(held[f] and f in asked for f in (t, *same.get(t, ()))))
            share = vocab.EXPANSION_WEIGHT
            covered = Coverage(terms, weights, near, share, same) if later is not None else None
            for candidate in candidates:
                key = (candidate.file_id, candidate.ordinal)
                word_hit = chosen.get(key)
                texts = fields.get(candidate.id, ())
                if covered is None:
                    reason, matched, coverage = explain(terms, texts, candidate, weights, near, share, same)
                else:  # the reason written once a page may show it (Reasons.written)
                    reason, matched, coverage = "", (), covered(texts)
                score = words_score(word_hit.score if word_hit else 0.0, asked_for, coverage, cosines.get(key))
                scored = Scored(1.0 if key in exact else round(score, 4), reason, matched)
                hit = _hit(candidate, scored)
                if later is not None:
                    later.add(hit, (terms, texts, candidate, weights, near, share, same))
                by_file.setdefault(candidate.file_id, []).append(hit)
        else:
            by_file = self._by_cosine(store, query, terms, vector, limit, accept)
        self._searches += 1
        return self._files(by_file, limit)

    def _expansions(
        self,
        store: Store,
        terms: Sequence[str],
        counts: Mapping[str, int],
        vocabulary: Vocabulary | None,
        embed: Words | None,
    ) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        """The code's words near the question's (:meth:`Vocabulary.neighbours`) that the index holds, and those
        of them held by at most :data:`~gateway.index.vocabulary.MAX_SHARE` of its declarations (the fielded
        query's); none where no word of the question (nor an alike form: ``counts``) is indexed (the model
        answers there)."""
        if vocabulary is None or embed is None or not len(vocabulary) or vocab.NEIGHBOURS <= 0:
            return {}, {}
        if not any(counts.values()):
            return {}, {}
        near = vocabulary.neighbours(terms, embed, vocab.NEIGHBOURS, vocab.SIMILARITY)
        total, held = self._count(store, expansion_words(near))
        most = vocab.MAX_SHARE * total
        kept = {t: tuple(w for w in words if held.get(w, 0) > 0) for t, words in near.items()}
        rare = {t: tuple(w for w in words if held[w] <= most) for t, words in kept.items()}
        return {t: w for t, w in kept.items() if w}, {t: w for t, w in rare.items() if w}

    def _count(self, store: Store, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """How many declarations the index holds, and how many hold each word (:class:`WordCounts`)."""
        return self._words(store, self._version, terms)

    def _by_words(
        self,
        store: Store,
        terms: Sequence[str],
        limit: int,
        accept: Callable[[str], bool] | None,
        near: Mapping[str, Sequence[str]],
    ) -> list[WordHit]:
        match = match_expression(terms)
        if not match:
            return []
        also = match_expression(expansion_words(near))
        wanted = None if accept is not None else depth(limit)
        weight = vocab.EXPANSION_WEIGHT
        times = max(1, round(1 / weight)) if weight > 0 else 1  # the question's words weigh `times` a neighbour
        found = store.ranked_words(self.root, match, WEIGHTS, wanted, also if weight > 0 else "", times)
        if prose.WEIGHT > 0:
            found = self._with_prose(store, match, found, wanted)
        if accept is not None:
            found = [h for h in found if accept(self.paths.get(h.file_id) or "")][: depth(limit)]
        return [h for h in found if h.file_id in self.paths]

    def _with_prose(self, store: Store, match: str, found: list[WordHit], wanted: int | None) -> list[WordHit]:
        """The fielded index's declarations with the bm25 of their prose added at :data:`~gateway.index.prose.WEIGHT`
        (:mod:`gateway.index.prose`), and those only their prose holds; best first, ``wanted`` of them (None: all).
        Only the prose's ``wanted`` best are read (what the rest would add is less than any of theirs)."""
        named = {h.declaration_id: h for h in store.ranked_prose(self.root, match, wanted)}
        if not named:
            return found
        out = [
            WordHit(h.declaration_id, h.file_id, h.ordinal, h.score + prose.WEIGHT * p.score)
            if (p := named.pop(h.declaration_id, None))
            else h
            for h in found
        ]
        out += [WordHit(h.declaration_id, h.file_id, h.ordinal, prose.WEIGHT * h.score) for h in named.values()]
        out.sort(key=lambda h: -h.score)
        return out if wanted is None else out[:wanted]

    def _cosines(
        self, store: Store, vector: Callable[[], np.ndarray], candidates: Sequence[Candidate]
    ) -> dict[tuple[int, int], float]:
        """The cosine of each candidate's vector and the query's (``vector()``), by (file id, ordinal): those of
        its rows the matrix holds (a file whose words are written before its vectors has none yet)."""
        rows: dict[tuple[int, int], int] = {}
        files: set[int] = set()
        for c in candidates:
            files.add(c.file_id)
            at = self._start.get(c.file_id, -1) + c.ordinal
            if 0 <= at < len(self.file_of) and self.file_of[at] == c.file_id:  # its file's rows, one per declaration
                rows[(c.file_id, c.ordinal)] = at
        if not rows:
            return {}
        if not self._full:  # the candidates' files' vectors alone
            held = {f: (count, blob) for f, count, blob in store.file_vectors(sorted(files))}
            pairs = [key for key in rows if key[0] in held and key[1] < held[key[0]][0]]
            if not pairs:
                return {}
            width = 2 * self._dim  # float16
            picked = b"".join(held[f][1][o * width : (o + 1) * width] for f, o in pairs)
            values = vectors_of(picked, len(pairs), self._dim) @ vector()
            return dict(zip(pairs, values.tolist(), strict=True))
        values = self.matrix[list(rows.values())] @ vector()
        return dict(zip(rows, values.tolist(), strict=True))

    def _exact(self, store: Store, query: str, accept: Callable[[str], bool] | None) -> set[tuple[int, int]]:
        """Declarations named exactly what a one-word query says (an exact name still wins)."""
        words = query.split()
        if len(words) != 1:
            return set()
        wanted = _normal(words[0])
        return {
            (file_id, ordinal)
            for file_id, ordinal, name in store.named([words[0]])
            if _normal(name) == wanted and file_id in self.paths and (accept is None or accept(self.paths[file_id]))
        }

    def _by_cosine(
        self,
        store: Store,
        query: str,
        terms: Sequence[str],
        vector: Callable[[], np.ndarray],
        limit: int,
        accept: Callable[[str], bool] | None,
    ) -> dict[int, list[Hit]]:
        """The model's answer (where no word of the query is in the fielded index): the best cosines."""
        if not self._full:
            self._load_all(store)
        matrix = self.matrix
        if not len(matrix):
            return {}
        cosines = matrix @ vector()
        if accept is not None:
            allowed = {f for f, p in self.paths.items() if accept(p)}
            cosines = np.where(np.isin(self.file_of, list(allowed)), cosines, -1.0)
        top = min(depth(limit), len(cosines))
        best = np.argpartition(-cosines, top - 1)[:top]
        chosen = [int(r) for r in best if cosines[r] > -1.0]
        pairs = [(int(self.file_of[r]), int(self.ordinal[r])) for r in chosen]
        cosine_at = {pair: float(cosines[r]) for pair, r in zip(pairs, chosen, strict=True)}
        by_file: dict[int, list[Hit]] = {}
        for candidate in store.candidates(pairs):
            cosine = cosine_at.get((candidate.file_id, candidate.ordinal))
            if cosine is None:
                continue
            scored = score_of(cosine, terms, query, candidate)
            if scored.score > 0.0:
                by_file.setdefault(candidate.file_id, []).append(_hit(candidate, scored))
        return by_file

    def _files(self, by_file: dict[int, list[Hit]], limit: int) -> list[FileMatch]:
        ranked = sorted(
            by_file.items(),
            key=lambda item: (-max(h.score or 0.0 for h in item[1]), self.paths.get(item[0], "")),
        )
        out = []
        for file_id, hits in ranked[:limit]:
            if file_id in self.paths:
                shown = sorted(hits, key=lambda h: (-(h.score or 0.0), h.line, h.last_line))[:PER_FILE]
                out.append(FileMatch(path=self.paths[file_id], hits=tuple(shown)))
        return out


def _with_forms(terms: Sequence[str], same: Mapping[str, Sequence[str]]) -> list[str]:
    """The question's words and their alike forms (:func:`gateway.index.abbreviations.alike`), each once."""
    return list(dict.fromkeys(f for t in terms for f in (t, *same.get(t, ()))))


def _hit(candidate: Candidate, scored: Scored) -> Hit:
    text = cut_text(candidate.signature or candidate.qualified_name)
    return Hit(
        line=candidate.start_line,
        end_line=candidate.end_line,
        text=text,
        kind=candidate.kind,
        symbol=candidate.qualified_name,
        name=candidate.name,
        intent=candidate.intent,
        score=scored.score,
        reason=scored.reason,
        terms=scored.terms,
    )
