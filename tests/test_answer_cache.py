"""The answer cache and single-flight (SPEC §5 ``[cache] answer_ttl_s``).

An identical request (same fields, same access) within ``answer_ttl_s`` is answered
from cache; identical requests in flight together share one fan-out; what a retry may
mend is not kept; local files changed meanwhile show once the TTL has passed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config import config_from_env
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.corpus import make_corpus
from tests.test_cursors import clocked


def counting(name: str, files: int = 3, gate: asyncio.Event | None = None, status: str = "ok") -> MockBackend:
    async def handler(query: SearchQuery) -> BackendResult:
        if gate is not None:
            await gate.wait()
        if status == "error":
            raise RuntimeError("boom")
        return BackendResult(
            files=tuple(FileMatch(path=f"f{n}.py", hits=(Hit(line=1, text="needle"),)) for n in range(files))
        )

    return MockBackend(handler, name=name)


def timeless(answer: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in answer.items() if k != "took_ms"}
    out["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    return out


async def until(done: Callable[[], bool]) -> None:
    """Let other tasks run until ``done()`` (a bounded number of turns of the loop, no clock)."""
    for _ in range(100_000):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


class Events:
    def __init__(self, service: SearchService) -> None:
        self.seen: list[str] = []
        service.cache.observers.append(self.seen.append)

    def count(self, name: str) -> int:
        return self.seen.count(name)


class TestAnswerCache:
    async def test_a_repeat_within_the_ttl_is_answered_from_cache(self) -> None:
        """The same request again: no backend call, the same answer, counted as a hit."""
        backend = counting("a")
        service = SearchService.with_backends([backend])
        events = Events(service)
        first = await service.search_json({"query": "needle"})
        second = await service.search_json({"query": "needle"})
        assert len(backend.calls) == 1
        assert timeless(second) == timeless(first)
        assert events.count("answer_hit") == 1 and events.count("answer_miss") == 1

    async def test_a_repeat_after_the_ttl_fans_out_again(self) -> None:
        """An answer is never served older than answer_ttl_s."""
        backend = counting("a")
        service = SearchService.with_backends([backend], cache={"answer_ttl_s": 30})
        clock = clocked(service)
        await service.search_json({"query": "needle"})
        clock.now += 29.9
        await service.search_json({"query": "needle"})
        assert len(backend.calls) == 1
        clock.now += 0.1
        await service.search_json({"query": "needle"})
        assert len(backend.calls) == 2

    async def test_any_other_field_is_another_answer(self) -> None:
        """A request differing in any field (offset, files, case...) is not served the other's answer."""
        backend = counting("a")
        service = SearchService.with_backends([backend])
        for args in ({"query": "needle"}, {"query": "needle", "files": 2}, {"query": "needle", "case_sensitive": True}):
            await service.search_json(args)
        assert len(backend.calls) == 3

    async def test_another_access_is_another_answer(self) -> None:
        """Callers who see different namespaces never share a cached answer."""
        a, b = counting("a"), counting("b")
        service = SearchService.with_backends([a, b])
        everything = await service.search_json({"query": "needle"})
        only_a = await service.search_json({"query": "needle"}, lambda name: name == "a")
        assert len(a.calls) == 2
        assert everything["file_count"] == 6 and only_a["file_count"] == 3
        assert [s["name"] for s in only_a["namespaces"]] == ["a"]

    async def test_an_answer_with_a_failed_namespace_is_not_kept(self) -> None:
        """Asking again after an error, timeout or unavailable backend asks the backends again."""
        good, bad = counting("a"), counting("b", status="error")
        service = SearchService.with_backends([good, bad])
        await service.search_json({"query": "needle"})
        await service.search_json({"query": "needle"})
        assert len(good.calls) == len(bad.calls) == 2

    async def test_a_capped_answer_is_kept(self) -> None:
        """A capped namespace gives the same again: its answer is cached."""

        async def capped(query: SearchQuery) -> BackendResult:
            return BackendResult(files=(FileMatch(path="x.py", hits=(Hit(line=1, text="n"),)),), status="capped")

        backend = MockBackend(capped, name="a")
        service = SearchService.with_backends([backend])
        await service.search_json({"query": "needle"})
        await service.search_json({"query": "needle"})
        assert len(backend.calls) == 1

    async def test_answer_ttl_zero_turns_the_cache_off(self) -> None:
        """With answer_ttl_s = 0 every request fans out."""
        backend = counting("a")
        service = SearchService.with_backends([backend], cache={"answer_ttl_s": 0})
        for _ in range(3):
            await service.search_json({"query": "needle"})
        assert len(backend.calls) == 3


class TestSingleFlight:
    async def test_fifty_identical_concurrent_requests_make_one_call_per_namespace(self) -> None:
        """Identical requests arriving together share one fan-out: one backend call per namespace."""
        gate = asyncio.Event()
        backends = [counting(f"ns{n}", gate=gate) for n in range(3)]
        service = SearchService.with_backends(backends, cache={"answer_ttl_s": 0})
        events = Events(service)
        tasks = [asyncio.create_task(service.search_json({"query": "needle"})) for _ in range(50)]
        await until(lambda: service.cache.flight.waiting() == 50)
        gate.set()
        answers = await asyncio.gather(*tasks)
        assert [len(b.calls) for b in backends] == [1, 1, 1]
        assert events.count("answer_miss") == 1 and events.count("answer_shared") == 49
        assert all(timeless(a) == timeless(answers[0]) for a in answers)

    async def test_requests_of_different_callers_do_not_share_a_fan_out(self) -> None:
        """Single-flight is per access: two callers' identical requests fan out once each."""
        gate = asyncio.Event()
        backend = counting("a", gate=gate)
        service = SearchService.with_backends([backend, counting("b", gate=gate)])
        tasks = [
            asyncio.create_task(service.search_json({"query": "needle", "namespaces": ["a"]})),
            asyncio.create_task(service.search_json({"query": "needle", "namespaces": ["a"]}, lambda n: n == "a")),
        ]
        await until(lambda: len(backend.calls) == 2)
        gate.set()
        one, two = await asyncio.gather(*tasks)
        assert len(backend.calls) == 2 and timeless(one) == timeless(two)

    async def test_the_fan_out_goes_on_for_those_still_waiting(self) -> None:
        """The first caller going away does not cancel the search the others are waiting for."""
        gate = asyncio.Event()
        backend = counting("a", gate=gate)
        service = SearchService.with_backends([backend])
        first = asyncio.create_task(service.search_json({"query": "needle"}))
        await until(lambda: bool(backend.calls))
        second = asyncio.create_task(service.search_json({"query": "needle"}))
        await asyncio.sleep(0)
        first.cancel()
        gate.set()
        answer = await second
        assert answer["file_count"] == 3 and len(backend.calls) == 1

    async def test_each_caller_gets_its_own_took_ms(self) -> None:
        """A shared answer is copied per caller: setting one's took_ms never touches another's."""
        gate = asyncio.Event()
        service = SearchService.with_backends([counting("a", gate=gate)])
        tasks = [asyncio.create_task(service.search_json({"query": "needle"})) for _ in range(2)]
        await until(lambda: service.cache.flight.waiting() == 2)
        gate.set()
        one, two = await asyncio.gather(*tasks)
        assert one is not two
        one["took_ms"] = -1
        assert two["took_ms"] >= 0


class TestLocalFiles:
    async def test_a_changed_local_file_shows_once_the_ttl_has_passed(self, tmp_path: Path) -> None:
        """A ripgrep namespace's edit is served stale at most answer_ttl_s, then seen."""
        root = make_corpus(tmp_path / "src", {"repo": {"a.py": "needle_one = 1\n"}})
        service = SearchService(config_from_env(None, str(root), env={}))
        clock = clocked(service)
        try:
            first = await service.search_json({"query": "needle_"})
            (root / "repo" / "b.py").write_text("needle_two = 2\n", encoding="utf-8")
            clock.now += service.config.cache.answer_ttl_s - 1
            assert (await service.search_json({"query": "needle_"}))["file_count"] == first["file_count"] == 1
            clock.now += 1
            assert (await service.search_json({"query": "needle_"}))["file_count"] == 2
        finally:
            await service.aclose()


async def test_single_flight_can_be_turned_off() -> None:
    """With single_flight = false, identical requests in flight each search."""
    gate = asyncio.Event()
    backend = counting("a", gate=gate)
    service = SearchService.with_backends([backend], cache={"answer_ttl_s": 0, "single_flight": False})
    tasks = [asyncio.create_task(service.search_json({"query": "needle"})) for _ in range(5)]
    await until(lambda: len(backend.calls) == 5)
    gate.set()
    await asyncio.gather(*tasks)
    assert len(backend.calls) == 5
