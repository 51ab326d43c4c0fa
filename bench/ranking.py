"""ranking: "find the definition" queries over real repositories, fedsearch beside two naive orderings.

    .venv/bin/python bench/ranking.py [--corpus DIR] [--per-repo N] [--misses]

The corpus is public repositories, one folder each under ``--corpus`` (default
``$FEDSEARCH_CORPUS`` or ``/work/corpus``), outside the checkout and never committed.
Each language's set is in :data:`SETS`; a missing folder is skipped, and with none at
all the script says how to get them and exits 0 (CI has no network). To lay one out::

    git clone --depth 1 https://github.com/encode/httpx /work/corpus/httpx   # any clone or snapshot

Per repository: its declaration index is built (the figures say how fast); the
queries are names declared exactly once outside tests (tests, examples, docs and
benchmarks as :func:`gateway.signals.secondary` says; ``impl`` blocks are not
declarations of a name), at least four characters long, found in at least
:data:`MIN_FILES` files; up to ``--per-repo`` of them, chosen by a stable hash. Each
is searched as typed (exact, smart case) in its own namespace, warm index; the rank
of the defining file is compared with two naive orderings of the same files (rg's
count per file): path order, and most matched lines first.

Prints, per language: queries, top-1, top-3 and MRR@10 for each ordering: fedsearch
with its index warm, fedsearch with no index (the regex definition test alone: what a
search gets before the index has reached a file), path order, most lines first.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import Config, DefaultsConfig, IndexConfig, NamespaceConfig, ServerConfig
from gateway.index.builder import Builder
from gateway.index.files import Source, find_rg
from gateway.index.store import Store
from gateway.log import configure
from gateway.query.request import parse_request
from gateway.registry import load_kind
from gateway.service import SearchService
from gateway.signals import secondary

#: Language -> (its grammars, its repositories under the corpus). Not the Pallets projects,
#: requests, FastAPI, pydantic or SQLAlchemy: those are kept for an independent check.
SETS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "python": (frozenset({"python"}), ("httpx", "rich")),
    "go": (frozenset({"go"}), ("cobra", "gin")),
    "typescript": (frozenset({"typescript", "tsx"}), ("zod", "hono")),
    "rust": (frozenset({"rust"}), ("ripgrep", "axum")),
}
MIN_FILES = 3
MIN_LENGTH = 4
TOP = 10


@dataclasses.dataclass(frozen=True)
class Query:
    repo: str
    name: str
    path: str  # the defining file


def _stable(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def candidates(store: Store, root: str, languages: frozenset[str]) -> dict[str, str]:
    """Names declared exactly once outside tests in the checkout at ``root`` (files of ``languages``) -> their file."""
    seen: dict[str, list[str]] = {}
    for name, kind, path, language in store.declared(root):
        if kind != "impl" and language in languages and not secondary(path):
            seen.setdefault(name, []).append(path)
    return {
        name: paths[0]
        for name, paths in seen.items()
        if len(paths) == 1 and len(name) >= MIN_LENGTH and not name.startswith("__")
    }


def counts(rg: str, root: Path, name: str) -> dict[str, int]:
    """Matched lines per file as rg counts them (fixed string, smart case), as fedsearch searches."""
    done = subprocess.run(
        [rg, "--no-config", "-c", "-S", "-F", "--null", "-e", name],
        cwd=root,
        capture_output=True,
        check=False,
    )
    out: dict[str, int] = {}
    for line in done.stdout.splitlines():
        path, _, count = line.partition(b"\0")
        out[path.decode("utf-8", "replace").removeprefix("./")] = int(count)
    return out


def rank_of(order: list[str], target: str) -> int | None:
    return order.index(target) + 1 if target in order else None


def summary(ranks: list[int | None]) -> tuple[float, float, float]:
    n = len(ranks)
    top1 = sum(1 for r in ranks if r == 1) / n
    top3 = sum(1 for r in ranks if r is not None and r <= 3) / n
    mrr = sum(1 / r for r in ranks if r is not None and r <= TOP) / n
    return top1, top3, mrr


def service_for(repos: dict[str, Path], index_dir: str, indexed: bool = True) -> SearchService:
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
        index=IndexConfig(dir=index_dir, enabled=indexed),
    )
    return SearchService(config)


async def evaluate(language: str, repos: dict[str, Path], per_repo: int, misses: bool) -> list[str]:
    grammars = SETS[language][0]
    rg = find_rg()
    assert rg is not None
    with tempfile.TemporaryDirectory() as index_dir:
        store = Store.open(index_dir)
        started = time.perf_counter()
        stats = Builder(store, [Source(n, str(r)) for n, r in repos.items()]).refresh()
        build_s = time.perf_counter() - started
        queries: list[Query] = []
        for repo, root in repos.items():
            found = candidates(store, str(root), grammars)
            chosen: list[Query] = []
            for name in sorted(found, key=_stable):
                if len(chosen) >= per_repo:
                    break
                if len(counts(rg, root, name)) >= MIN_FILES:
                    chosen.append(Query(repo, name, found[name]))
            queries += chosen
        store.close()
        service = service_for(repos, index_dir)
        cold = service_for(repos, index_dir, indexed=False)
        ours: list[int | None] = []
        unindexed: list[int | None] = []
        by_path: list[int | None] = []
        by_lines: list[int | None] = []
        lost: list[str] = []
        try:
            for q in queries:
                request = parse_request(
                    {"query": q.name, "namespaces": [q.repo], "files": TOP, "hit_budget": 5000, "timeout_ms": 30_000}
                )
                answer = await service.search(request)
                order = [g["file_path"] for g in answer["files"]]
                ours.append(rank_of(order, q.path))
                answer = await cold.search(request)
                unindexed.append(rank_of([g["file_path"] for g in answer["files"]], q.path))
                per_file = counts(rg, repos[q.repo], q.name)
                by_path.append(rank_of(sorted(per_file), q.path))
                by_lines.append(rank_of(sorted(per_file, key=lambda p: (-per_file[p], p)), q.path))
                if ours[-1] != 1:
                    lost.append(f"  {q.repo}: {q.name!r} defined in {q.path}, rank {ours[-1]}: {order[:3]}")
        finally:
            await service.aclose()
            await cold.aclose()
    lines = [
        f"{language}: {len(queries)} queries over {', '.join(repos)}; index built in {build_s:.2f} s "
        f"({stats.parsed} files, {stats.bytes / 1e6:.1f} MB, {stats.bytes / 1e6 / build_s:.1f} MB/s)"
    ]
    if not queries:
        return lines
    for label, ranks in (
        ("fedsearch", ours),
        ("no index", unindexed),
        ("path order", by_path),
        ("most lines", by_lines),
    ):
        top1, top3, mrr = summary(ranks)
        lines.append(f"  {label:<11} top-1 {top1:.3f}  top-3 {top3:.3f}  MRR@10 {mrr:.3f}")
    if misses:
        lines += lost
    return lines


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS", "/work/corpus"))
    parser.add_argument("--per-repo", type=int, default=60)
    parser.add_argument("--misses", action="store_true", help="list the queries not answered first")
    args = parser.parse_args()
    configure(level="warning")
    corpus = Path(args.corpus)
    available = {
        language: {repo: corpus / repo for repo in repos if (corpus / repo).is_dir()}
        for language, (_, repos) in SETS.items()
    }
    if not any(available.values()):
        every = ", ".join(repo for _, repos in SETS.values() for repo in repos)
        print(f"ranking: skipped: no corpus under {corpus} (wanted: {every}); clone them there, see bench/ranking.py")
        return 0
    results: dict[str, list[str]] = {}
    for language, repos in available.items():
        if not repos:
            print(f"{language}: skipped: none of {', '.join(SETS[language][1])} under {corpus}")
            continue
        results[language] = await evaluate(language, repos, args.per_repo, args.misses)
        print("\n".join(results[language]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
