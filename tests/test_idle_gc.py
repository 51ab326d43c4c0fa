"""Garbage collected between searches, not inside one (gateway.serving.IdleCollector)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import gateway.service
from gateway.config import config_from_env
from gateway.query.request import parse_request
from gateway.service import SearchService
from gateway.serving import IdleCollector
from tests.corpus import make_corpus


@pytest.fixture
def young_threshold() -> Iterator[int]:
    """A small young threshold for the test (restored after it), the collector clean."""
    saved = gc.get_threshold()
    gc.collect()
    gc.set_threshold(2000, 20, 20)
    try:
        yield 2000
    finally:
        gc.set_threshold(*saved)


def _garbage(n: int) -> list[list[int]]:
    """``n`` live containers: the youngest generation's count grows by as many."""
    return [[i] for i in range(n)]


async def _idle(collector: IdleCollector) -> None:
    await asyncio.sleep(collector.delay_s * 20)


async def _one_search(collector: IdleCollector) -> list[int]:
    """A search begins and ends, then nothing runs for a while: the collections run idle so far."""
    collector.begin()
    collector.end()
    await _idle(collector)
    return collector.collections


async def test_the_young_generation_is_collected_once_no_search_runs(young_threshold: int) -> None:
    collector = IdleCollector(delay_s=0.002, share=0.25)
    collector.enable()
    kept = _garbage(young_threshold // 2)  # half the threshold: due for an idle collection, not an automatic one
    collector.begin()
    collector.end()
    assert collector.collections == [0, 0, 0]  # not at once: the answer is written first
    await _idle(collector)
    assert collector.collections[0] == 1
    assert gc.get_count()[0] < young_threshold // 4
    assert len(kept) == young_threshold // 2


async def test_nothing_is_collected_while_a_search_runs(young_threshold: int) -> None:
    collector = IdleCollector(delay_s=0.002, share=0.25)
    collector.enable()
    kept = _garbage(young_threshold // 2)
    collector.begin()
    collector.begin()
    collector.end()  # one of two ended: still busy
    await _idle(collector)
    assert collector.collections == [0, 0, 0]
    collector.end()
    collector.begin()  # a search started before the collection was due: it waits again
    await _idle(collector)
    assert collector.collections == [0, 0, 0]
    collector.end()
    await _idle(collector)
    assert collector.collections == [1, 0, 0] and kept


async def test_little_garbage_or_a_disabled_collector_collects_nothing(young_threshold: int) -> None:
    collector = IdleCollector(delay_s=0.002, share=0.25)
    collector.enable()
    assert await _one_search(collector) == [0, 0, 0]  # under a quarter of the threshold: not worth one
    off = IdleCollector(delay_s=0.002, share=0.0)  # never enabled (the CLI, tests)
    kept = _garbage(young_threshold // 2)
    assert await _one_search(off) == [0, 0, 0] and kept


async def test_the_middle_generation_is_collected_when_due(young_threshold: int) -> None:
    """After as many young collections as its threshold, the next idle one takes the middle generation too."""
    collector = IdleCollector(delay_s=0.002, share=0.0)
    collector.enable()
    for _ in range(gc.get_threshold()[1] + 1):
        await _one_search(collector)
    assert collector.collections[1] == 1
    assert sum(collector.collections) == gc.get_threshold()[1] + 1


async def test_a_search_through_the_service_ends_idle_and_collects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = make_corpus(tmp_path / "src", {"repo": {"a.py": "needle\n"}})
    collector = IdleCollector(delay_s=0.002, share=0.0)
    collector.enable()
    monkeypatch.setattr(gateway.service, "IDLE", collector)
    service = SearchService(config_from_env(root=str(corpus), env={}))
    try:
        answer = await service.search(parse_request({"query": "needle"}))
        assert answer["file_count"] == 1 and collector.active == 0
        await _idle(collector)
        assert sum(collector.collections) == 1
    finally:
        await service.aclose()


class _Node:
    """An object in a reference cycle (freed only by a collection), weakly referable."""

    def __init__(self) -> None:
        self.me = self


def test_settling_the_heap_collects_the_young_and_freezes_the_rest() -> None:
    """Before serving: young cyclic garbage is collected, what lives is frozen (never walked again), and the
    whole heap is not collected (at 10,000 namespaces that cost 266 ms of the start and found nothing more)."""
    import weakref

    from gateway import serving

    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    saved, enabled = gc.get_threshold(), serving.IDLE.enabled
    gone = weakref.ref(_Node())  # young cyclic garbage at once
    gc.callbacks.append(seen)
    try:
        serving.settle_heap()
        frozen = gc.get_freeze_count()
    finally:
        gc.callbacks.remove(seen)
        gc.unfreeze()
        gc.set_threshold(*saved)
        serving.IDLE.enabled = enabled
    assert gone() is None
    assert frozen > 0
    assert generations and max(generations) <= 1
