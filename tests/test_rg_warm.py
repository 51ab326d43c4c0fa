"""A server's rg is started ahead of its search (adapters/ripgrep/warm.py): same answers, no rg left behind."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings
from adapters.ripgrep.warm import WarmPool, stdin_pattern
from gateway.config import parse_config
from gateway.errors import BackendError
from gateway.models import BackendResult, Hit, SearchQuery
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.helpers import child_pids, rg_children
from tests.helpers import git_repo as _repo

FILES: dict[str, str | bytes] = {
    "a.py": "def needle():\n    return 'Needle'\n# -x marks it\n",
    "b/c.py": "x = 1\nneedle = 2\nénorme needle ✓\n",
    "b/skip.txt": "needle\n",
    "d.go": "func Needle() {}\n  a  b  \n",
}


def _query(text: str = "needle", **kw: Any) -> SearchQuery:
    return SearchQuery(text=text, deadline=time.monotonic() + 30, **kw)


def _served(root: Path, pool: WarmPool | None = None, **settings: Any) -> tuple[RipgrepBackend, WarmPool]:
    backend = RipgrepBackend("ns", RipgrepSettings(root=str(root), **settings))
    shared: dict[type, Any] = {} if pool is None else {WarmPool: pool}
    backend.start_serving(shared)
    return backend, shared[WarmPool]


def _shape(result: BackendResult) -> list[tuple[str, list[Hit]]]:
    return [(f.path, list(f.hits)) for f in result.files]


async def _outcome(backend: RipgrepBackend, query: SearchQuery) -> tuple[str, list[tuple[str, list[Hit]]]]:
    """The status and files of a search, or the error it raised."""
    try:
        result = await backend.search(query)
    except BackendError as exc:
        return f"error: {exc}", []
    return result.status, _shape(result)


async def _one_waiting(pool: WarmPool) -> int:
    """The pid of the one rg that waits, once it does."""
    await _until(lambda: len(pool.waiting()) == 1)
    [pid] = pool.waiting()
    return pid


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Poll ``condition`` (never a timing assertion: a generous bound for a busy machine)."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - a process's state: there is no event to wait on
            await asyncio.sleep(0.005)


class TestWarm:
    async def test_the_next_search_takes_the_rg_started_for_it(self, tmp_path: Path) -> None:
        """After a search, one rg waits for its vector; the next search with it takes that rg."""
        backend, pool = _served(_repo(tmp_path / "r", FILES))
        try:
            await backend.search(_query())
            await _until(lambda: len(pool.waiting()) == 1)
            [waiting] = pool.waiting()
            assert waiting in rg_children()
            assert pool.taken == 0
            result = await backend.search(_query("return"))  # another pattern, the same vector
            assert pool.taken == 1
            assert [f.path for f in result.files] == ["a.py"]
            await _until(lambda: waiting not in child_pids())  # it searched, ended and was reaped
            await _until(lambda: len(pool.waiting()) == 1)
            assert pool.waiting() != [waiting]
        finally:
            await backend.aclose()

    @pytest.mark.parametrize(
        "kw",
        [
            {"text": "needle"},
            {"text": "Needle"},
            {"text": "needle", "case_sensitive": False},
            {"text": "-x"},
            {"text": "énorme needle ✓"},
            {"text": "  a  b  "},
            {"text": r"ne+dle\(\)", "mode": "regex"},
            {"text": "needle", "context_lines": 1},
            {"text": "needle", "paths": ("!*.txt",)},
            {"text": "a\nb", "mode": "regex"},  # cannot be one line of -f: given by -e
        ],
        ids=repr,
    )
    async def test_answers_are_the_same_warm_or_not(self, tmp_path: Path, kw: dict[str, Any]) -> None:
        """Every kind of query answers the same from a waiting rg as from one started for it."""
        query = _query(**kw)  # its deadline from now, not from collection
        root = _repo(tmp_path / "r", FILES)
        plain = RipgrepBackend("ns", RipgrepSettings(root=str(root)))
        backend, pool = _served(root)
        try:
            expected = await _outcome(plain, query)
            first = await _outcome(backend, query)
            if stdin_pattern(query.text) is not None:
                await _until(lambda: len(pool.waiting()) == 1)
            second = await _outcome(backend, query)
            assert first == second == expected
            assert pool.taken == (0 if stdin_pattern(query.text) is None else 1)
        finally:
            await backend.aclose()

    def test_a_line_break_or_nul_cannot_go_through_stdin(self) -> None:
        assert stdin_pattern("needle ✓") == "needle ✓\n".encode()
        assert stdin_pattern("a\nb") is None
        assert stdin_pattern("a\rb") is None
        assert stdin_pattern("a\x00b") is None

    async def test_a_waiting_rg_that_died_is_replaced(self, tmp_path: Path) -> None:
        """rg killed while it waited: the search starts another and answers in full."""
        backend, pool = _served(_repo(tmp_path / "r", FILES))
        try:
            await backend.search(_query())
            await _until(lambda: len(pool.waiting()) == 1)
            [waiting] = pool.waiting()
            os.kill(waiting, signal.SIGKILL)
            await _until(lambda: not pool.waiting())  # its death was seen: the pool let it go
            result = await backend.search(_query())
            assert result.status == "ok"
            assert sorted(f.path for f in result.files) == ["a.py", "b/c.py", "b/skip.txt"]
            await _until(lambda: waiting not in child_pids())  # the dead one was reaped too
        finally:
            await backend.aclose()

    async def test_closing_stops_every_waiting_rg(self, tmp_path: Path) -> None:
        """Closed, the pool leaves no child behind and starts no more."""
        before = child_pids()
        backend, pool = _served(_repo(tmp_path / "r", FILES))
        await backend.search(_query())
        await backend.search(_query(case_sensitive=False))  # another vector
        await _until(lambda: len(pool.waiting()) == 2)
        await backend.aclose()
        assert pool.waiting() == []
        assert child_pids() == before
        await backend.search(_query())  # a search after closing still answers, and leaves nothing
        await asyncio.sleep(pool.refill_s * 4)
        assert child_pids() == before

    async def test_at_most_size_rg_wait(self, tmp_path: Path) -> None:
        """The least recently used vector's rg is stopped first."""
        pool = WarmPool(size=2)
        backend, _ = _served(_repo(tmp_path / "r", FILES), pool)
        try:
            await backend.search(_query())
            await _until(lambda: len(pool.waiting()) == 1)
            [oldest] = pool.waiting()
            await backend.search(_query(case_sensitive=False))
            await _until(lambda: len(pool.waiting()) == 2)
            await backend.search(_query("needle", context_lines=2))
            await _until(lambda: oldest not in pool.waiting())
            assert len(pool.waiting()) == 2
            await _until(lambda: oldest not in child_pids())
            assert len(rg_children()) == 2
        finally:
            await backend.aclose()

    async def test_an_idle_rg_is_stopped(self, tmp_path: Path) -> None:
        pool = WarmPool(idle_s=0.05)
        backend, _ = _served(_repo(tmp_path / "r", FILES), pool)
        try:
            await backend.search(_query())
            await _until(lambda: len(pool.waiting()) == 1)
            await _until(lambda: not pool.waiting() and not rg_children())
        finally:
            await backend.aclose()

    async def test_a_collected_pool_reaps_its_rg(self, tmp_path: Path) -> None:
        """A pool nobody closed stops its rg when it is collected (nor does Popen warn of one running)."""
        backend, pool = _served(_repo(tmp_path / "r", FILES))
        await backend.search(_query())
        pid = await _one_waiting(pool)
        del backend, pool
        gc.collect()
        assert pid not in child_pids()

    async def test_namespaces_of_one_service_share_one_pool(self, tmp_path: Path) -> None:
        """A server's ripgrep namespaces search in one rg, and its next one waits once for all."""
        for name in ("a", "b"):
            _repo(tmp_path / "src" / name, {"x.py": "needle\n"})
        roots = [str(tmp_path / "src" / n) for n in ("a", "b")]
        namespaces = [{"name": n, "backend": "ripgrep", "root": r} for n, r in zip("ab", roots, strict=True)]
        service = SearchService(parse_config({"namespaces": namespaces, "index": {"enabled": False}}))
        try:
            service.start_serving()
            pool = service.shared[WarmPool]
            answer = await service.search(parse_request({"query": "needle"}))
            assert sorted(g["namespace"] for g in answer["files"]) == ["a", "b"]
            await _until(lambda: len(pool.waiting()) == 1)
            answer = await service.search(parse_request({"query": "needle", "files": 1}))
            assert pool.taken == 1
            assert answer["file_count"] == 2
        finally:
            await service.aclose()
        assert rg_children() == set()

    async def test_a_one_shot_service_starts_nothing_ahead(self, tmp_path: Path) -> None:
        """Without start_serving (the CLI) an rg is started for each search and nothing waits."""
        backend = RipgrepBackend("ns", RipgrepSettings(root=str(_repo(tmp_path / "r", FILES))))
        await backend.search(_query())
        await asyncio.sleep(0.05)  # ten times the pool's refill delay
        assert rg_children() == set()
