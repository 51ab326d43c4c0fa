"""Cursors (SPEC §3): a truncated first page keeps a snapshot; later pages come from it.

The backends here cap at random places, as ripgrep's parallel walk does when it hits
``max_files``: each call returns a different subset in a different order. Without a
snapshot, paging such an answer repeats files, loses others and moves ``file_count``
(the control test shows it); with one, every page comes from one ranking.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.cache.results import CURSOR_EXPIRED
from gateway.cache.snapshots import EncodedSnapshots
from gateway.cache.store import MemoryStore
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.query.request import parse_request
from gateway.service import SearchService
from gateway.testing import MockBackend


def capping(name: str, files: int, rng: random.Random, low: int = 0, high: int | None = None) -> MockBackend:
    """A backend over ``files`` matching files that stops after a random number of them, in random order."""
    paths = [f"src/mod_{n:03}.py" for n in range(files)]
    high = files if high is None else high

    async def handler(query: SearchQuery) -> BackendResult:
        cap = rng.randint(min(low, high), high)
        chosen = rng.sample(paths, k=cap)
        hits = {p: tuple(Hit(line=k + 1, text="needle here", column=1) for k in range(1 + len(p) % 3)) for p in chosen}
        return BackendResult(
            files=tuple(FileMatch(path=p, hits=hits[p]) for p in chosen),
            status="capped" if cap < files else "ok",
            reason=f"stopped at {cap} files (cap)" if cap < files else "",
        )

    return MockBackend(handler, name=name)


def failing(name: str) -> MockBackend:
    async def handler(query: SearchQuery) -> BackendResult:
        raise RuntimeError("boom")

    return MockBackend(handler, name=name)


def next_page(answer: dict[str, Any]) -> dict[str, Any] | None:
    for action in answer.get("next", []):
        if action["reason"].startswith("next page"):
            args: dict[str, Any] = action["args"]
            return args
    return None


def keys(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(g["namespace"], g["file_path"]) for g in answer["files"]]


async def page_all(service: SearchService, args: dict[str, Any], access: Any = None) -> list[dict[str, Any]]:
    """Every page, following the next-page action verbatim from ``args``."""
    pages = [await service.search_json(args, access)]
    while (follow := next_page(pages[-1])) is not None:
        pages.append(await service.search_json(follow, access))
        assert len(pages) < 500
    return pages


def calls(*backends: MockBackend) -> int:
    return sum(len(b.calls) for b in backends)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def clocked(service: SearchService) -> Clock:
    """Give the service an in-process store on a clock the test moves."""
    clock = Clock()
    service.cache.store = MemoryStore(service.config.cache.max_bytes, clock=clock)
    return clock


REQUEST = {"query": "needle", "files": 7, "hit_budget": 5000}


class TestSnapshots:
    async def test_a_truncated_first_page_puts_its_cursor_on_the_next_page_action_only(self) -> None:
        """The next-page action carries a cursor; widening actions (search alone, retry) carry none."""
        rng = random.Random(1)
        service = SearchService.with_backends([capping("a", 40, rng, 20, 30), failing("b")])
        answer = await service.search_json(REQUEST)
        follow = next_page(answer)
        assert follow is not None and follow["cursor"]
        widening = [a for a in answer["next"] if not a["reason"].startswith("next page")]
        assert widening and all(a["args"]["cursor"] is None for a in widening)
        for action in answer["next"]:
            assert parse_request(action["args"]).query == "needle"

    async def test_a_later_page_comes_from_the_snapshot_with_no_fan_out(self) -> None:
        """Page 2 with a live cursor calls no backend and keeps page 1's file_count and statuses."""
        rng = random.Random(2)
        backends = [capping("a", 60, rng, 10, 50), capping("b", 60, rng, 10, 50)]
        service = SearchService.with_backends(backends)
        first = await service.search_json(REQUEST)
        made = calls(*backends)
        follow = next_page(first)
        assert follow is not None
        second = await service.search_json(follow)
        assert calls(*backends) == made
        assert second["file_count"] == first["file_count"]
        assert second["namespaces"] == first["namespaces"]
        assert set(keys(first)).isdisjoint(keys(second))
        assert next_page(second) is None or next_page(second)["cursor"] == follow["cursor"]  # type: ignore[index]

    async def test_paging_a_capped_answer_shows_every_file_once_with_one_file_count(self) -> None:
        """Following next pages to the end yields the snapshot's files exactly once, file_count constant."""
        rng = random.Random(3)
        backends = [capping("a", 80, rng, 30, 70), capping("b", 50, rng, 10, 40)]
        service = SearchService.with_backends(backends)
        pages = await page_all(service, REQUEST)
        seen = [k for page in pages for k in keys(page)]
        assert len(seen) == len(set(seen)) == pages[0]["file_count"]
        assert {p["file_count"] for p in pages} == {pages[0]["file_count"]}
        assert calls(*backends) == 2

    async def test_without_snapshots_the_same_paging_repeats_or_loses_files(self) -> None:
        """The control: with snapshots off, paging a backend that caps at random places goes wrong."""
        rng = random.Random(3)
        backends = [capping("a", 80, rng, 30, 70), capping("b", 50, rng, 10, 40)]
        service = SearchService.with_backends(backends, cache={"snapshot_ttl_s": 0})
        pages = await page_all(service, REQUEST)
        seen = [k for page in pages for k in keys(page)]
        counts = {p["file_count"] for p in pages}
        assert len(seen) != len(set(seen)) or len(counts) > 1 or len(seen) != pages[0]["file_count"]
        assert all(a["args"]["cursor"] is None for p in pages for a in p.get("next", []))

    async def test_the_last_page_of_a_snapshot_offers_no_next_page(self) -> None:
        """Once the snapshot's files are all shown, no next-page action is left."""
        service = SearchService.with_backends([capping("a", 20, random.Random(4), 20, 20)])
        pages = await page_all(service, {**REQUEST, "files": 6})
        assert [len(p["files"]) for p in pages] == [6, 6, 6, 2]
        assert next_page(pages[-1]) is None and not pages[-1]["truncated"]

    async def test_a_failed_namespace_is_reported_on_every_page(self) -> None:
        """Pages from a snapshot keep its statuses, widening actions and note."""
        service = SearchService.with_backends([capping("a", 30, random.Random(5), 30, 30), failing("b")])
        pages = await page_all(service, REQUEST)
        assert len(pages) == 5
        for page in pages:
            assert page["note"] == pages[0]["note"] and "did not answer fully" in page["note"]
            assert [s["status"] for s in page["namespaces"]] == ["ok", "error"]
            assert [a for a in page["next"] if not a["reason"].startswith("next page")] == [
                a for a in pages[0]["next"] if not a["reason"].startswith("next page")
            ]

    async def test_widening_starts_a_new_snapshot(self) -> None:
        """Following a widening action (search a capped namespace alone) fans out and makes a new cursor."""
        rng = random.Random(6)
        backends = [capping("a", 60, rng, 20, 40), capping("b", 10, rng, 10, 10)]
        service = SearchService.with_backends(backends)
        first = await service.search_json(REQUEST)
        alone = next(a for a in first["next"] if "alone" in a["reason"])
        made = calls(*backends)
        widened = await service.search_json(alone["args"])
        assert calls(*backends) == made + 1
        follow, before = next_page(widened), next_page(first)
        assert follow is not None and before is not None and follow["cursor"] != before["cursor"]

    async def test_an_unknown_cursor_runs_the_query_again_and_says_so(self) -> None:
        """A cursor nobody made is not an error: the query runs, the note says the snapshot expired."""
        backend = capping("a", 30, random.Random(7), 30, 30)
        service = SearchService.with_backends([backend])
        answer = await service.search_json({**REQUEST, "offset": 7, "cursor": "no-such-cursor"})
        assert len(backend.calls) == 1
        assert answer["note"].startswith(CURSOR_EXPIRED)
        assert answer["limits"]["offset"] == 7 and len(answer["files"]) == 7
        follow = next_page(answer)
        assert follow is not None and follow["cursor"] not in (None, "no-such-cursor")

    async def test_an_expired_cursor_runs_the_query_again_and_says_so(self) -> None:
        """Past snapshot_ttl_s a cursor's snapshot is gone: a fresh fan-out, with the note."""
        backend = capping("a", 30, random.Random(8), 30, 30)
        service = SearchService.with_backends([backend], cache={"snapshot_ttl_s": 60, "answer_ttl_s": 0})
        clock = clocked(service)
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None
        clock.now += 59
        assert "note" not in await service.search_json(follow)
        clock.now += 1
        again = await service.search_json(follow)
        assert again["note"].startswith(CURSOR_EXPIRED) and len(backend.calls) == 2

    async def test_a_cursor_replayed_with_other_fields_is_ignored(self) -> None:
        """Another query, page size or filter with the cursor never reads the snapshot."""
        backend = capping("a", 30, random.Random(9), 30, 30)
        service = SearchService.with_backends([backend])
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None
        for change in ({"files": 8}, {"query": "needle here"}, {"paths": ["src/**"]}, {"case_sensitive": True}):
            before = len(backend.calls)
            answer = await service.search_json({**follow, **change})
            assert len(backend.calls) == before + 1, change
            assert answer["note"].startswith(CURSOR_EXPIRED)

    async def test_a_cursor_replayed_by_another_caller_is_ignored(self) -> None:
        """A snapshot is bound to the access it was made for: a caller who sees less never gets it."""
        a, b = capping("a", 30, random.Random(10), 30, 30), capping("secret", 30, random.Random(11), 30, 30)
        service = SearchService.with_backends([a, b])
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None

        def only_a(name: str) -> bool:
            return name == "a"

        answer = await service.search_json(follow, only_a)
        assert answer["note"].startswith(CURSOR_EXPIRED)
        assert "secret" not in str(answer)
        assert answer["file_count"] == 30

    async def test_a_snapshot_the_store_cannot_keep_leaves_a_plain_next_page(self) -> None:
        """When a snapshot is not stored (too big for the store), the next page carries no cursor."""
        service = SearchService.with_backends([capping("a", 400, random.Random(12), 400, 400)])
        service.cache.store = MemoryStore(4096)
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None and follow["cursor"] is None and follow["offset"] == 7

    async def test_a_one_shot_process_keeps_no_snapshot(self) -> None:
        """The CLI searching in-process (process_cache=False) offers next pages without a cursor."""
        from gateway.config import CacheConfig, Config, DefaultsConfig, NamespaceConfig, ServerConfig

        backend = capping("a", 30, random.Random(13), 30, 30)
        config = Config(
            server=ServerConfig(),
            defaults=DefaultsConfig(),
            namespaces=(NamespaceConfig(name="a", backend="mock", settings=backend.settings),),
            cache=CacheConfig(),
        )
        service = SearchService(config, {"a": backend}, process_cache=False)
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None and follow["cursor"] is None and service.cache.store is None

    async def test_a_malformed_cursor_is_bad_input_naming_the_field(self) -> None:
        """A cursor that is not one (too long, odd characters) is a 400 naming `cursor`."""
        from gateway.errors import InvalidRequest

        service = SearchService.with_backends([capping("a", 3, random.Random(14))])
        for bad in ("", "has space", "x" * 129, 5):
            with pytest.raises(InvalidRequest) as err:
                await service.search_json({"query": "needle", "cursor": bad})
            assert err.value.field == "cursor"


def _run(coro_factory: Callable[[], Any]) -> Any:
    return asyncio.run(coro_factory())


class TestPagingProperty:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
        files=st.integers(1, 12),
        hit_budget=st.integers(1, 30),
        seed=st.integers(0, 2**32 - 1),
        encoded=st.booleans(),
    )
    def test_paging_from_a_cursor_yields_every_file_once(
        self, sizes: list[int], files: int, hit_budget: int, seed: int, encoded: bool
    ) -> None:
        """Backends capping at random places: every file of the snapshot exactly once, file_count constant
        (snapshots held as ranked, or encoded in chunks as in Redis)."""

        async def scenario() -> None:
            rng = random.Random(seed)
            backends = [capping(f"ns{i}", n, rng) for i, n in enumerate(sizes)]
            service = SearchService.with_backends(backends)
            if encoded and service.cache.store is not None:
                service.cache.snapshots = EncodedSnapshots(service.cache.store)
            pages = await page_all(service, {"query": "needle", "files": files, "hit_budget": hit_budget})
            seen = [k for page in pages for k in keys(page)]
            assert len(seen) == len(set(seen))
            assert {p["file_count"] for p in pages} == {pages[0]["file_count"]}
            assert len(seen) == pages[0]["file_count"]
            assert calls(*backends) == len(backends)
            for page in pages:
                shown = sum(g["hit_count"] for g in page["files"])
                assert len(page["files"]) <= files and (len(page["files"]) <= 1 or shown <= hit_budget)

        _run(scenario)
