"""Several ripgrep namespaces searched for the same thing share one rg process."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

import pytest

from adapters._coalesce import Seat
from adapters.ripgrep import batch as rg_batch
from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings
from adapters.ripgrep.output import Collector
from adapters.ripgrep.process import Child
from gateway.config import parse_config
from gateway.fanout import Route, fan_out
from gateway.models import BackendResult, SearchQuery
from gateway.scope import call_scope
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.helpers import fake_program, rg_children
from tests.helpers import git_repo as _repo


async def _together(backends: list[RipgrepBackend], query: SearchQuery) -> list[BackendResult]:
    """The backends' searches made at once, in one scope, as a fan-out makes them."""
    async with call_scope():
        return list(await asyncio.gather(*(b.search(query) for b in backends)))


def _seat(root: str, collector: Collector | None = None) -> Seat[rg_batch.Part]:
    return Seat(rg_batch.Part(root, collector or Collector()), asyncio.get_running_loop().create_future())


def _query(**kw: object) -> SearchQuery:
    return SearchQuery(text="needle", deadline=time.monotonic() + 30, **kw)  # type: ignore[arg-type]


class TestBatch:
    async def test_each_namespace_gets_its_own_files(self, tmp_path: Path) -> None:
        """Concurrent searches come back split by namespace, paths relative to each root."""
        a = _repo(tmp_path / "a", {"x.py": "needle\n", "sub/y.py": "needle\n"})
        b = _repo(tmp_path / "b", {"z.py": "needle\nneedle\n", ".gitignore": "ign/\n", "ign/w.py": "needle\n"})
        ra, rb = await _together(
            [RipgrepBackend("a", RipgrepSettings(root=str(a))), RipgrepBackend("b", RipgrepSettings(root=str(b)))],
            _query(),
        )
        assert sorted(f.path for f in ra.files) == ["sub/y.py", "x.py"]
        assert [(f.path, len(f.hits)) for f in rb.files] == [("z.py", 2)]

    async def test_own_excludes_and_caps_hold_in_a_batch(self, tmp_path: Path) -> None:
        """Each namespace keeps its anchored excludes and its caps when batched."""
        a = _repo(tmp_path / "a", {"sub/y.py": "needle\n", "x.py": "needle\n"})
        b = _repo(tmp_path / "b", {f"f{i}.txt": "needle\n" for i in range(6)})
        ra, rb = await _together(
            [
                RipgrepBackend("a", RipgrepSettings(root=str(a), exclude=["sub/**"])),
                RipgrepBackend("b", RipgrepSettings(root=str(b), exclude=["sub/**"], max_files=2)),
            ],
            _query(),
        )
        assert [f.path for f in ra.files] == ["x.py"] and ra.status == "ok"
        assert rb.status == "capped" and len(rb.files) == 2

    async def test_nested_roots_are_searched_apart(self, tmp_path: Path) -> None:
        """A root inside another is not batched with it, so neither sees the other's files twice."""
        outer = _repo(tmp_path / "outer", {"o.txt": "needle\n"})
        inner = _repo(outer / "inner", {"i.txt": "needle\n"})
        ro, ri = await _together(
            [
                RipgrepBackend("o", RipgrepSettings(root=str(outer))),
                RipgrepBackend("i", RipgrepSettings(root=str(inner))),
            ],
            _query(),
        )
        assert [f.path for f in ri.files] == ["i.txt"]
        assert "o.txt" in [f.path for f in ro.files]

    async def test_a_finished_batch_is_freed_without_the_cycle_collector(self, tmp_path: Path) -> None:
        """Once answered, a batch's files go by reference counting: no cycle keeps them for the collector."""
        a = _repo(tmp_path / "a", {f"x{i}.py": "needle\n" for i in range(20)})
        b = _repo(tmp_path / "b", {"z.py": "needle\n"})
        backends = [RipgrepBackend(n, RipgrepSettings(root=str(r))) for n, r in (("a", a), ("b", b))]
        await _together(backends, _query())  # anything made once, made now
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be looked at
        try:
            results = await _together(backends, _query())
            assert len(results[0].files) == 20
            del results
            gc.collect()
            left = {type(o).__name__ for o in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert not left & {"Seat", "Part", "_Batch", "_Reading", "Collector", "FileMatch", "BackendResult"}, left

    async def test_where_rg_runs(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Absolute roots, run from where we are; a lone namespace with excludes holding a ``/``
        runs from its root, where rg matches them. Always nicer than the gateway."""
        started: list[tuple[str | None, str]] = []
        nices: set[int] = set()

        def spy(argv: list[str], *, cwd: str | None, stdout: int, nice: int = 0) -> Child:
            started.append((cwd, argv[-1]))
            nices.add(nice)
            return Child(argv, cwd=cwd, stdout=stdout, nice=nice)

        monkeypatch.setattr(rg_batch, "Child", spy)
        a = _repo(tmp_path / "a", {"x.py": "needle\n", "sub/y.py": "needle\n"})
        plain = await RipgrepBackend("a", RipgrepSettings(root=str(a))).search(_query())
        pruned = await RipgrepBackend("a", RipgrepSettings(root=str(a), exclude=["sub/**"])).search(_query())
        unanchored = await RipgrepBackend("a", RipgrepSettings(root=str(a), exclude=["y.py"])).search(_query())
        assert started == [(None, str(a)), (str(a), "."), (None, str(a))]
        assert nices == {rg_batch.SCAN_NICE}
        assert sorted(f.path for f in plain.files) == ["sub/y.py", "x.py"]
        assert [f.path for f in pruned.files] == [f.path for f in unanchored.files] == ["x.py"]

    async def test_one_rg_for_more_namespaces_than_the_gate_holds(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Ten local namespaces behind a gate of two still run one rg: the batch takes one place."""
        started: list[list[str]] = []

        def spy(argv: list[str], *, cwd: str | None, stdout: int, nice: int = 0) -> Child:
            started.append(argv)
            return Child(argv, cwd=cwd, stdout=stdout, nice=nice)

        monkeypatch.setattr(rg_batch, "Child", spy)
        roots = [_repo(tmp_path / f"r{i}", {"x.py": "needle\n"}) for i in range(10)]
        config = parse_config(
            {
                "server": {"concurrency": 2},
                "namespaces": [{"name": r.name, "backend": "ripgrep", "root": str(r)} for r in roots],
            }
        )
        service = SearchService(config)
        try:
            answer = await service.search_json({"query": "needle"})
        finally:
            await service.aclose()
        assert answer["file_count"] == 10
        assert len(started) == 1

    async def test_a_batch_still_waiting_for_the_gate_at_the_deadline_starts_no_rg(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A gate of one held by a hanging backend: the ripgrep namespaces time out waiting,
        and their batch, once it gets the place, finds nobody left and starts no rg."""
        started: list[list[str]] = []

        def spy(argv: list[str], *, cwd: str | None, stdout: int, nice: int = 0) -> Child:
            started.append(argv)
            return Child(argv, cwd=cwd, stdout=stdout, nice=nice)

        async def hang(query: SearchQuery) -> BackendResult:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        monkeypatch.setattr(rg_batch, "Child", spy)
        roots = [_repo(tmp_path / f"r{i}", {"x.py": "needle\n"}) for i in range(2)]
        routes = [Route("hang", MockBackend(hang, "hang"))] + [
            Route(r.name, RipgrepBackend(r.name, RipgrepSettings(root=str(r)))) for r in roots
        ]
        outcomes = await fan_out(routes, SearchQuery(text="needle", deadline=time.monotonic() + 0.3), concurrency=1)
        assert [o.status for o in outcomes] == ["timeout"] * 3
        assert started == []

    async def test_one_process_for_the_batch(self, tmp_path: Path) -> None:
        """Three namespaces searched together run one rg, reaped when they all return."""
        big = b"needle in a haystack\n" * 400_000
        roots = []
        for name in "abc":
            root = _repo(tmp_path / name, {})
            (root / "many.txt").write_bytes(big)
            roots.append(root)
        backends = [
            RipgrepBackend(n, RipgrepSettings(root=str(r), max_hits=10**9)) for n, r in zip("abc", roots, strict=True)
        ]
        task = asyncio.create_task(_together(backends, _query()))
        seen: set[int] = set()
        for _ in range(500):
            seen = rg_children()
            if seen or task.done():
                break
            await asyncio.sleep(0.01)
        assert len(seen) == 1
        results = await task
        assert all(r.status == "ok" and r.files for r in results)
        assert rg_children() == set()

    async def test_cancelling_every_caller_kills_rg(self, tmp_path: Path) -> None:
        """When every caller of a batch is cancelled, rg is killed and reaped."""
        roots = []
        for name in "ab":
            root = _repo(tmp_path / name, {})
            (root / "many.txt").write_bytes(b"needle\n" * 2_000_000)
            roots.append(root)
        backends = [
            RipgrepBackend(n, RipgrepSettings(root=str(r), max_hits=10**9)) for n, r in zip("ab", roots, strict=True)
        ]
        task = asyncio.create_task(_together(backends, _query()))
        for _ in range(500):
            if rg_children():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert rg_children() == set()


class TestManyMembers:
    async def test_asking_whether_all_settled_is_linear_overall(self) -> None:
        """Every read asks whether anyone is left; over an rg serving n that is O(n) checks, not O(n^2)."""
        n = 2000
        seats = [_seat(f"/r/{i}") for i in range(n)]
        reading = rg_batch._Reading(seats, rg_batch.OutputPipe())
        asked = 0
        waiting = Seat.waiting

        def counted(seat: Seat[rg_batch.Part]) -> bool:
            nonlocal asked
            asked += 1
            return waiting(seat)

        try:
            Seat.waiting = counted  # type: ignore[method-assign]
            for i, seat in enumerate(seats):
                seat.answer(BackendResult())
                assert reading.all_settled() == (i == n - 1)
        finally:
            Seat.waiting = waiting  # type: ignore[method-assign]
            reading.pipe.close()
        assert asked <= 2 * n

    async def test_the_router_names_the_seats_given_files(self) -> None:
        """Only seats handed files since the last look can have reached a cap; the seat
        whose file may go on into the next read is named again."""
        a, b, c = (_seat(f"/r/{n}") for n in "abc")
        router = rg_batch.Router([a, b, c])
        for path in ("/r/a/x", "/r/a/y", "/r/c/z", "/elsewhere", "/r/a/w"):
            router(path)
        assert router.touched() == [a, c, a]
        assert router.touched() == [a]
        router("/r/b/q")
        assert router.touched() == [a, b]

    async def test_callers_gone_before_rg_starts_start_no_rg(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every caller of a batch cancelled within its two gathering turns: rg never starts."""
        started: list[list[str]] = []

        def spy(argv: list[str], *, cwd: str | None, stdout: int, nice: int = 0) -> Child:
            started.append(argv)
            return Child(argv, cwd=cwd, stdout=stdout, nice=nice)

        monkeypatch.setattr(rg_batch, "Child", spy)
        roots = [_repo(tmp_path / f"r{i}", {"x.py": "needle\n"}) for i in range(3)]
        async with call_scope() as scope:
            tasks = [
                asyncio.create_task(RipgrepBackend(r.name, RipgrepSettings(root=str(r))).search(_query()))
                for r in roots
            ]
            await asyncio.sleep(0)  # each has joined the batch
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for _ in range(5):  # past the two gathering turns
                await asyncio.sleep(0)
            assert not scope._tasks
        assert started == []


class TestOutputPipe:
    @pytest.mark.parametrize("pipe_bytes", [4096, 1 << 20])
    async def test_output_larger_than_the_pipe_is_read_whole(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pipe_bytes: int
    ) -> None:
        """More output than the pipe holds (a page of pipe, or a full one): all of it is read."""
        monkeypatch.setattr("adapters.ripgrep.spawn.PIPE_BYTES", pipe_bytes)
        line = "needle " + "x" * 120 + "\n"
        a = _repo(tmp_path / "a", {f"f{i:03}.txt": line * 200 for i in range(120)})  # ~3.5 MB of output
        b = _repo(tmp_path / "b", {"only.txt": "needle\n"})
        fds = len(os.listdir("/proc/self/fd"))
        ra, rb = await _together(
            [RipgrepBackend("a", RipgrepSettings(root=str(a))), RipgrepBackend("b", RipgrepSettings(root=str(b)))],
            _query(),
        )
        assert ra.status == "ok" and len(ra.files) == 120
        assert all(len(f.hits) == 200 for f in ra.files)
        assert [(f.path, len(f.hits)) for f in rb.files] == [("only.txt", 1)]
        assert len(os.listdir("/proc/self/fd")) == fds  # the pipe's ends are closed

    async def test_a_cap_reached_in_a_full_pipe_stops_rg(self, tmp_path: Path) -> None:
        """A hit cap reached while rg still has output to write ends the search as capped."""
        a = _repo(tmp_path / "a", {f"f{i:03}.txt": "needle\n" * 500 for i in range(200)})
        backend = RipgrepBackend("a", RipgrepSettings(root=str(a), max_hits=1000))
        result = await backend.search(_query())
        assert result.status == "capped" and "1000 hits" in result.reason
        assert sum(len(f.hits) for f in result.files) == 1000
        assert not rg_children()

    async def test_rg_that_writes_nothing_is_left_alone_until_it_exits(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No ticks before rg's first output: a search that finds nothing wakes us once, at rg's exit.

        Waking at each tick took a core from rg's own threads for nothing; once rg writes,
        its output is read at ticks as before.
        """
        drains: list[int] = []
        drain = rg_batch.OutputPipe.drain

        def counted(pipe: rg_batch.OutputPipe, feed: object) -> int:
            drains.append(taken := drain(pipe, feed))  # type: ignore[arg-type]
            return taken

        monkeypatch.setattr(rg_batch.OutputPipe, "drain", counted)
        root = str(tmp_path / "a")
        silent = fake_program(tmp_path / "silent", "sleep 0.2")
        seat = _seat(root)
        await rg_batch.RgCall(silent, _query(), ()).send([seat])
        assert seat.future.result().status == "ok"
        assert len(drains) == 1  # at exit only (twenty ticks went by)

        drains.clear()
        talker = fake_program(tmp_path / "talker", f"printf '{root}/x.txt\\0001:1:needle\\n'; sleep 0.2")
        seat = _seat(root, Collector(strip=len(root) + 1))
        await rg_batch.RgCall(talker, _query(), ()).send([seat])
        assert [f.path for f in seat.future.result().files] == ["x.txt"]
        assert len(drains) > 2 and drains[0] > 0  # read at ticks once it wrote

    async def test_rg_silent_past_the_deadline_is_stopped_there(self, tmp_path: Path) -> None:
        """No ticks while rg is silent, yet the deadline still ends it: timeout, and rg killed and reaped."""
        sleeper = fake_program(tmp_path / "sleeper", "exec sleep 30")
        seat = _seat(str(tmp_path))
        started = time.monotonic()
        query = SearchQuery(text="needle", deadline=started + 0.3)
        await rg_batch.RgCall(sleeper, query, ()).send([seat])
        assert seat.future.result().status == "timeout"
        assert time.monotonic() - started < 10  # not the 30 s rg would have taken
        assert not rg_children("sleep")
