"""dedup: what grouping copies saves an answer, what it costs a search, and what it costs at start-up.

    .venv/bin/python bench/dedup.py [--corpus DIR] [--rounds 5] [--checkouts 32]

Issue 38's figures, over ``--corpus`` (default ``$FEDSEARCH_CORPUS_REAL`` or ``/work/corpus-real``;
skipped, saying so, when absent), cloned twice (``git clone --shared``: two copies of every
checkout, a/NAME and b/NAME, 16 namespaces, each copy's git index fresh):

1. For 10 queries, with ``dedup`` on and off: the answer's bytes (compact JSON, as served),
   page 1's files and its distinct contents (identities), and ``file_count``.
2. The time dedup adds to a search: the whole search in process (``SearchService.search``,
   no answer cache), dedup on and off alternating, each query's fastest of ``--rounds``;
   and the ranking alone (``settle`` + the page) on the very same backend answers: dedup on,
   off, and with no identities at all (before issue 38), alternating, the fastest of
   ``--repeat``, over both copies (every file has a copy: the worst case) and over one copy
   (no copies: what every other search pays).
3. The local identities' cost at start-up: ``git ls-files -s --debug -z`` over ``--checkouts``
   checkouts (clones of the corpus's), one after another as the server's warming thread runs
   them, then the ``stat`` of every tracked file that warming adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msgspec.structs import replace

from adapters.ripgrep.identity import GitIdentities
from gateway.config import config_from_env
from gateway.log import configure
from gateway.models import Outcome
from gateway.query.request import SearchRequest, parse_request
from gateway.rank import page_of, settle
from gateway.service import SearchService

#: Ten queries: names a definition answers, and words, phrases and markers found everywhere.
NAMES = ["Blueprint", "ValidationError", "Session", "url_for", "def get_"]
WORDS = ["import", "self", "async def", "timeout", "TODO"]
QUERIES = NAMES + WORDS


def clone(corpus: Path, dest: Path, copies: list[str]) -> list[Path]:
    """``git clone --shared`` of every checkout of ``corpus`` under ``dest/<copy>/``."""
    out = []
    for copy in copies:
        for src in sorted(p for p in corpus.iterdir() if (p / ".git").exists()):
            target = dest / copy / src.name
            if not target.exists():
                subprocess.run(["git", "clone", "-q", "--shared", str(src), str(target)], check=True)
            out.append(target)
    return out


def compact(answer: dict[str, Any]) -> int:
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())


async def sizes(service: SearchService, identities: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """Per query: bytes, page-1 files and distinct contents, file_count, dedup on and off."""
    rows = []
    for query in QUERIES:
        row: dict[str, Any] = {"query": query}
        for dedup in (True, False):
            answer = await service.search(parse_request({"query": query, "dedup": dedup, "timeout_ms": 60_000}))
            files = answer["files"]
            ids = [identities.get((g["namespace"], g["file_path"])) or g.get("identity") or id(g) for g in files]
            key = "on" if dedup else "off"
            row[key] = {
                "bytes": compact(answer),
                "files": len(files),
                "distinct": len(set(ids)),
                "file_count": answer["file_count"],
                "copies": sum(len(g.get("duplicates", ())) for g in files),
            }
            if not dedup:
                identities.update({(g["namespace"], g["file_path"]): g.get("identity", "") for g in files})
        rows.append(row)
    return rows


async def search_times(service: SearchService, rounds: int) -> dict[str, list[float]]:
    """Whole-search time, dedup on and off alternating query by query: each query's fastest of ``rounds``
    (the least disturbed by the rest of a shared machine), per query in QUERIES' order (ms)."""
    best: dict[str, list[float]] = {"on": [], "off": []}
    for query in QUERIES:
        took: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(rounds):
            for key, dedup in (("on", True), ("off", False)):
                request = parse_request({"query": query, "dedup": dedup, "timeout_ms": 60_000})
                started = time.perf_counter()
                await service.search(request)
                took[key].append(time.perf_counter() - started)
        for key, values in took.items():
            best[key].append(min(values) * 1000)
    return best


async def outcomes_of(service: SearchService, query: str) -> list[Outcome]:
    """The backends' answers to ``query`` (one fan-out), as ranking receives them."""
    heard: list[Outcome] = []
    service.observers.append(heard.append)
    try:
        await service.search(parse_request({"query": query, "timeout_ms": 60_000, "files": 20}))
    finally:
        service.observers.remove(heard.append)
    return heard


def rank_time(outcomes: list[Outcome], dedup: bool) -> float:
    """ms of ``settle`` + page 1 over ``outcomes``, once."""
    request = SearchRequest(query=QUERIES[0], dedup=dedup)
    started = time.perf_counter()
    page_of(request, settle(request, outcomes))
    return (time.perf_counter() - started) * 1000


def bare(outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` without any identity: what ranking did before issue 38."""
    return [replace(o, result=replace(o.result, identities=None)) if o.result is not None else o for o in outcomes]


async def ranking(service: SearchService, single: SearchService, repeat: int) -> list[dict[str, Any]]:
    """Ranking alone (settle + page 1), alternating: dedup on, off, and with no identities at all (fastest of each)."""
    rows = []
    for query in ("import", "self", "Blueprint"):
        for label, svc in (("two copies", service), ("one copy", single)):
            outcomes = await outcomes_of(svc, query)
            plain = bare(outcomes)
            runs: dict[str, list[float]] = {"on": [], "off": [], "none": []}
            for _ in range(repeat):  # alternating, each arm's fastest kept
                runs["on"].append(rank_time(outcomes, True))
                runs["off"].append(rank_time(outcomes, False))
                runs["none"].append(rank_time(plain, True))
            files = sum(len(o.result.files) for o in outcomes if o.result is not None)
            rows.append({"query": query, "case": label, "files": files, **{k: min(v) for k, v in runs.items()}})
    return rows


def startup(roots: list[Path]) -> dict[str, float]:
    """ls-files over every root in turn (fresh objects), then the stat of every tracked file (warm)."""
    identities = [GitIdentities(str(root)) for root in roots]
    started = time.perf_counter()
    files = sum(len(ids) for ids in identities)
    listed = time.perf_counter() - started
    started = time.perf_counter()
    hashed = sum(ids.warm() for ids in identities)
    warmed = time.perf_counter() - started
    return {"checkouts": len(roots), "files": files, "ls_files_s": listed, "warm_s": warmed, "hashed": hashed}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20, help="ranking repetitions per case")
    parser.add_argument("--checkouts", type=int, default=32)
    parser.add_argument("--dir", help="where the clones go (kept); default: a temporary folder")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"dedup: skipped: no corpus at {corpus}")
        return
    configure(level="warning")
    with tempfile.TemporaryDirectory(prefix="fedsearch-dedup-") as tmp:
        base = Path(args.dir) if args.dir else Path(tmp)
        clone(corpus, base / "two", ["a", "b"])
        os.environ["XDG_CACHE_HOME"] = str(base / "cache")  # the index folder: never the user's
        service = SearchService(config_from_env(None, str(base / "two"), env={}), process_cache=False)
        single = SearchService(config_from_env(None, str(base / "two" / "a"), env={}), process_cache=False)
        try:
            print(f"dedup: {len(service.visible())} namespaces (two clones of each checkout of {corpus})")
            identities: dict[tuple[str, str], str] = {}
            for row in await sizes(service, identities):
                on, off = row["on"], row["off"]
                print(
                    f"  {row['query']!r:20} bytes on {on['bytes']:>8,} off {off['bytes']:>8,} "
                    f"({on['bytes'] / max(1, off['bytes']):.2f}x); page 1 distinct contents on "
                    f"{on['distinct']}/{on['files']} off {off['distinct']}/{off['files']}; "
                    f"file_count on {on['file_count']} off {off['file_count']}"
                )
            times = await search_times(service, args.rounds)
            for query, on_ms, off_ms in zip(QUERIES, times["on"], times["off"], strict=True):
                print(f"  whole search {query!r:18} on {on_ms:7.1f} ms, off {off_ms:7.1f} ms")
            on_sum, off_sum = sum(times["on"]), sum(times["off"])
            print(
                f"  whole search, 10 queries (each one's fastest of {args.rounds}, summed): on {on_sum:.0f} ms, "
                f"off {off_sum:.0f} ms ({(on_sum / off_sum - 1) * 100:+.1f} %)"
            )
            for rank in await ranking(service, single, args.repeat):
                print(
                    f"  ranking {rank['query']!r:12} {rank['case']:10} {rank['files']:>5} files: dedup on "
                    f"{rank['on']:.2f} ms, off {rank['off']:.2f} ms, no identities {rank['none']:.2f} ms "
                    f"(on {rank['on'] - rank['none']:+.2f} ms)"
                )
        finally:
            await service.aclose()
            await single.aclose()
        roots = clone(corpus, base / "many", [f"c{n}" for n in range((args.checkouts + 7) // 8)])[: args.checkouts]
        cost = startup(roots)
        print(
            f"  start-up: git ls-files -s --debug over {cost['checkouts']:.0f} checkouts "
            f"({cost['files']:,.0f} files) {cost['ls_files_s'] * 1000:.0f} ms; the stat of every file "
            f"{cost['warm_s'] * 1000:.0f} ms ({cost['hashed']:.0f} changed files hashed)"
        )


if __name__ == "__main__":
    asyncio.run(main())
