"""Admission (SPEC §6, last paragraph; ``[server] max_scans``): a bounded scan queue, deadline-aware
refusal from learnt costs, and what every surface says when a request is refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings
from adapters.ripgrep.batch import QUEUED
from gateway.cli.main import main
from gateway.config import Config, DefaultsConfig, ServerConfig, default_max_scans, parse_config
from gateway.errors import BackendUnavailable, ConfigError, Overloaded
from gateway.fanout import Route
from gateway.http.app import create_app
from gateway.http.metrics import Metrics
from gateway.http.reload import ServiceHolder
from gateway.http.server import per_worker
from gateway.mcp.tools import build_server
from gateway.models import BackendResult, FileMatch, Hit, Mode, SearchQuery
from gateway.query.request import parse_request
from gateway.resilience.admission import USE_S, Estimate, ScanQueue, TooLate
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.helpers import FakeClock, fake_program, held_client, no_leaks, rg_children

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]
SCANNING: frozenset[Mode] = frozenset({"exact", "regex"})
FAR = 3600.0  # seconds: a deadline that never comes in a test


def far() -> float:
    return asyncio.get_running_loop().time() + FAR


async def _found(query: SearchQuery) -> BackendResult:
    return BackendResult(files=(FileMatch(path="remote.py", hits=(Hit(line=1, text=query.text),)),))


def local_mock(name: str) -> MockBackend:
    """A backend whose exact and regex searches count as local scans (no rg)."""
    backend = MockBackend(_found, name)
    backend.scan_modes = SCANNING
    return backend


def query(seconds: float, mode: Mode = "exact") -> SearchQuery:
    return SearchQuery(text="needle", mode=mode, deadline=time.monotonic() + seconds)


async def teach(queue: ScanQueue, clock: FakeClock, names: Sequence[str], seconds: float) -> None:
    """One scan over ``names`` that ran to its end in ``seconds`` (of the fake clock)."""
    async with queue.slot(names, far()) as scan:
        clock.advance(seconds)
        scan.outcome = "complete"


@contextlib.asynccontextmanager
async def held(queue: ScanQueue, names: Sequence[str], count: int = 1) -> AsyncIterator[None]:
    """``count`` slots held by scans over ``names`` inside the block."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            await stack.enter_async_context(queue.slot(names, far()))
        yield


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def until(ready: Callable[[], bool], within_s: float = 10.0) -> None:
    """Wait, yielding, until ``ready()`` holds (a loaded machine takes longer than a few turns), at most
    ``within_s``: the assertion after says what was expected."""
    for _ in range(int(within_s / 0.005)):
        if ready():
            return
        await asyncio.sleep(0.005)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class TestEstimate:
    def test_smoothed_as_round_trip_times(self) -> None:
        """The first sample sets the mean (and half of it the deviation); later ones move it by 1/8 and 1/4."""
        e = Estimate()
        e.observe(1.0)
        assert (e.mean, e.deviation) == (1.0, 0.5)
        e.observe(2.0)
        assert e.mean == pytest.approx(1.125) and e.deviation == pytest.approx(0.625)
        assert e.cost() == pytest.approx(1.125 + 2 * 0.625)

    def test_a_scan_cut_short_only_raises_it(self) -> None:
        """A duration known only as a lower bound never lowers the estimate."""
        e = Estimate()
        e.observe(1.0)
        e.at_least(0.2)
        assert (e.mean, e.samples) == (1.0, 1)
        e.at_least(3.0)
        assert e.mean > 1.0 and e.samples == 2


class TestSlots:
    async def test_at_most_max_scans_run_and_the_rest_wait_in_order(self) -> None:
        """Two slots: the first two scans run, the other three start one by one in arrival order."""
        queue = ScanQueue(2)
        started: list[int] = []
        release = [asyncio.Event() for _ in range(5)]

        async def scan(i: int) -> None:
            async with queue.slot([f"ns{i}"], far()):
                started.append(i)
                await release[i].wait()

        tasks = [asyncio.create_task(scan(i)) for i in range(5)]
        await turns()
        assert (started, queue.running, queue.queued) == ([0, 1], 2, 3)
        release[1].set()
        await turns()
        assert (started, queue.running, queue.queued) == ([0, 1, 2], 2, 2)
        for event in release:
            event.set()
        await asyncio.gather(*tasks)
        assert (started, queue.running, queue.queued) == ([0, 1, 2, 3, 4], 0, 0)

    async def test_a_scan_whose_deadline_comes_while_it_waits_gives_up(self) -> None:
        """TimeoutError, out of the queue, counted as expired; the slot it waited for goes to nobody."""
        queue = ScanQueue(1)
        events: list[str] = []
        queue.observers.append(lambda event, _: events.append(event))
        async with held(queue, ["a"]):
            with pytest.raises(TimeoutError):
                async with queue.slot(["b"], asyncio.get_running_loop().time() - 1):
                    pytest.fail("started after its deadline")
            assert queue.queued == 0 and queue.counts.expired == 1
        assert queue.running == 0 and "expired" in events

    async def test_a_turn_that_comes_too_late_to_do_much_goes_to_the_next(self, clock: FakeClock) -> None:
        """Scans take 10 s here; one whose turn comes with a second left starts nothing (TooLate,
        counted as expired) and the slot goes at once to the one behind it, which has the time."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 10.0)
        ran: list[str] = []

        async def scan(deadline: float) -> None:
            async with queue.slot(["a"], deadline):
                ran.append(f"{deadline - time.monotonic():.0f}")

        async with held(queue, ["a"]):
            late = asyncio.create_task(scan(time.monotonic() + 1.0))
            kept = asyncio.create_task(scan(time.monotonic() + FAR))
            await turns()
        with pytest.raises(TooLate):
            await late
        await kept
        assert ran == [f"{FAR:.0f}"] and queue.counts.expired == 1
        assert (queue.running, queue.queued) == (0, 0)

    async def test_a_waiter_that_goes_is_skipped(self) -> None:
        """A cancelled waiter leaves its turn to the next one."""
        queue = ScanQueue(1)
        ran: list[str] = []

        async def scan(name: str) -> None:
            async with queue.slot([name], far()):
                ran.append(name)

        async with held(queue, ["a"]):
            gone, kept = asyncio.create_task(scan("gone")), asyncio.create_task(scan("kept"))
            await turns()
            gone.cancel()
            await turns()
            assert queue.queued == 1
        await kept
        assert ran == ["kept"] and queue.running == 0
        assert gone.cancelled()

    async def test_a_slot_granted_to_a_waiter_that_just_went_is_passed_on(self) -> None:
        """Granted and cancelled in the same turn: the slot goes to the next waiter, never lost."""
        queue = ScanQueue(1)
        ran: list[str] = []
        holder = queue.slot(["a"], far())
        await holder.__aenter__()

        async def scan(name: str) -> None:
            async with queue.slot([name], far()):
                ran.append(name)

        first, second = asyncio.create_task(scan("first")), asyncio.create_task(scan("second"))
        await turns()
        await holder.__aexit__(None, None, None)  # grants "first"...
        first.cancel()  # ...which goes before it ever ran
        await asyncio.gather(first, second, return_exceptions=True)
        assert ran == ["second"] and (queue.running, queue.queued) == (0, 0)

    async def test_resize_hands_free_slots_to_the_waiters(self) -> None:
        """A reloaded max_scans takes effect at once for the scans waiting."""
        queue = ScanQueue(1)
        release = asyncio.Event()

        async def scan() -> None:
            async with queue.slot(["a"], far()):
                await release.wait()

        tasks = [asyncio.create_task(scan()) for _ in range(3)]
        await turns()
        assert (queue.running, queue.queued) == (1, 2)
        queue.resize(3)
        assert (queue.running, queue.queued) == (3, 0)
        release.set()
        await asyncio.gather(*tasks)


class TestLearning:
    async def test_each_namespace_has_its_own_estimate(self, clock: FakeClock) -> None:
        """Costs are learnt per namespace; one never seen plans with the overall estimate."""
        queue = ScanQueue(2, clock=clock)
        await teach(queue, clock, ["small"], 0.1)
        await teach(queue, clock, ["big"], 2.0)
        assert queue.estimate("small").mean == pytest.approx(0.1)
        assert queue.estimate("big").mean == pytest.approx(2.0)
        assert queue.cost(["small", "big"]) == queue.cost(["big"]) > queue.cost(["small"])
        assert queue.estimate("unknown") is queue.estimate("unknown") and queue.estimate("unknown").samples == 2

    async def test_a_batch_teaches_each_of_its_namespaces(self, clock: FakeClock) -> None:
        """One scan over several namespaces (one rg) is what each of them cost."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a", "b"], 0.5)
        assert queue.estimate("a").mean == queue.estimate("b").mean == pytest.approx(0.5)

    async def test_nothing_is_learnt_from_a_scan_every_caller_left(self, clock: FakeClock) -> None:
        """A scan whose outcome is unknown (callers gone) changes no estimate."""
        queue = ScanQueue(1, clock=clock)
        async with queue.slot(["a"], far()):
            clock.advance(5.0)
        assert queue.estimate("a").samples == 0


class TestAdmission:
    async def test_never_refused_while_a_slot_is_free(self, clock: FakeClock) -> None:
        """However costly a namespace was, a request that waits for nothing is admitted (and learns again)."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 30.0)
        with queue.admit([Route("a", local_mock("a"))], query(1.0)) as routes:
            assert [r.namespace for r in routes] == ["a"]
        assert (queue.counts.admitted, queue.counts.refused) == (1, 0)

    async def test_refused_when_the_wait_and_the_work_do_not_fit(self, clock: FakeClock) -> None:
        """Busy with a scan planned at 4 s (a 2 s mean, 1 s deviation) and 4 s of its own: a 3 s
        deadline is refused, to retry in the 4 s the queue needs to drain."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 2.0)
        assert queue.cost(["a"]) == pytest.approx(4.0)
        async with held(queue, ["a"]):
            with pytest.raises(Overloaded) as caught, queue.admit([Route("a", local_mock("a"))], query(3.0)):
                pytest.fail("admitted")
        assert caught.value.retry_after == pytest.approx(4.0)
        assert "at capacity" in caught.value.detail and "retry in 4 s" in caught.value.detail
        assert (queue.counts.admitted, queue.counts.refused) == (0, 1)

    async def test_the_retry_time_is_the_queue_ahead_over_its_drain_rate(self, clock: FakeClock) -> None:
        """Two scans running on two slots and six waiting: eight scans' cost over two slots, less
        what a 10 s deadline bears once its own work is planned for."""
        queue = ScanQueue(2, clock=clock)
        for _ in range(4):
            await teach(queue, clock, ["a"], 2.0)
        cost = queue.cost(["a"])
        async with held(queue, ["a"], 2):
            waiting = [asyncio.create_task(_hold(queue, "a")) for _ in range(6)]
            await turns()
            assert queue.queued == 6
            assert queue.wait() == pytest.approx(8 * cost / 2)
            with pytest.raises(Overloaded) as caught, queue.admit([Route("a", local_mock("a"))], query(10.0)):
                pytest.fail("admitted")
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
        assert caught.value.retry_after == pytest.approx(4 * cost - (10.0 - cost), abs=0.01)

    async def test_a_waiting_scan_is_planned_at_its_cost_now(self, clock: FakeClock) -> None:
        """Scans learnt slower while one waits: the wait foreseen behind it grows at once."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 1.0)
        async with held(queue, ["b"]):
            waiting = asyncio.create_task(_hold(queue, "a"))
            await turns()
            before = queue.wait()
            queue.estimate("a").observe(5.0)
            assert queue.wait() > before
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)

    async def test_an_admitted_request_holds_its_place_until_its_scan_arrives(self, clock: FakeClock) -> None:
        """Requests admitted in one burst see each other: the reservation counts in the next one's wait."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 2.0)
        async with held(queue, ["a"]):
            assert queue.wait() == pytest.approx(4.0)
            with queue.admit([Route("a", local_mock("a"))], query(30.0)):
                assert queue.wait() == pytest.approx(8.0)
            assert queue.wait() == pytest.approx(4.0)

    async def test_a_remote_only_request_is_never_held_back(self, clock: FakeClock) -> None:
        """The local queue says nothing about namespaces that are not local scans."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 2.0)
        remote = Route("remote", MockBackend(_found, "remote"))
        async with held(queue, ["a"]):
            with queue.admit([remote], query(0.5)) as routes:
                assert list(routes) == [remote]
        assert (queue.counts.admitted, queue.counts.refused, queue.counts.shed) == (0, 0, 0)

    async def test_a_search_by_meaning_is_no_scan(self, clock: FakeClock) -> None:
        """A mode the backend does not scan in (semantic) is not held back either."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 2.0)
        async with held(queue, ["a"]):
            with queue.admit([Route("a", local_mock("a"))], query(0.5, "semantic")):
                pass
        assert queue.counts.refused == 0

    async def test_a_partly_remote_request_sheds_its_local_part(self, clock: FakeClock) -> None:
        """Local namespaces that cannot make it answer `unavailable` with the retry time; the remote one is asked."""
        queue = ScanQueue(1, clock=clock)
        await teach(queue, clock, ["a"], 2.0)
        remote = Route("remote", MockBackend(_found, "remote"))
        async with held(queue, ["a"]):
            with queue.admit([Route("a", local_mock("a")), remote], query(1.0)) as routes:
                shed, kept = routes
        assert kept is remote and shed.namespace == "a" and shed.backend.kind == "mock"
        with pytest.raises(BackendUnavailable) as caught:
            await shed.backend.search(query(1.0))
        assert caught.value.retry_after is not None and caught.value.retry_after >= 1
        assert "at capacity" in caught.value.reason
        assert queue.counts.shed == 1


async def _hold(queue: ScanQueue, name: str) -> None:
    async with queue.slot([name], far()):
        await asyncio.Event().wait()


# --- with rg (a stand-in that waits to be told) ------------------------------------------


class Rg:
    """A stand-in for rg: logs its start and end, waits until :meth:`go`, then prints one match per root."""

    def __init__(self, tmp: Path, roots: Sequence[Path]) -> None:
        self.log, self.gate = tmp / "rg.log", tmp / "go"
        out = tmp / "rg.out"
        out.write_bytes(b"\n".join(f"{root}/a.txt\x001:1:needle\n".encode() for root in roots))  # as --heading
        wait = f"while [ ! -e {self.gate} ]; do sleep 0.01; done"
        body = f"echo start >> {self.log}\n{wait}\ncat {out}\necho end >> {self.log}"
        self.path = fake_program(tmp / "rg", body)

    def events(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def most_at_once(self) -> int:
        running = most = 0
        for event in self.events():
            running += 1 if event == "start" else -1
            most = max(most, running)
        return most

    def go(self) -> None:
        self.gate.touch()

    async def started(self, n: int) -> None:
        """Wait (polling, no timing asserted) until ``n`` of them started."""
        for _ in range(1000):
            if self.events().count("start") >= n:
                return
            await asyncio.sleep(0.01)
        pytest.fail(f"{n} rg never started")


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    out = []
    for name in ("alpha", "beta", "gamma"):
        root = tmp_path / "src" / name
        root.mkdir(parents=True)
        (root / "a.txt").write_text("needle\n")
        out.append(root)
    return out


@pytest.fixture
def rg(tmp_path: Path, roots: list[Path], monkeypatch: pytest.MonkeyPatch) -> Rg:
    fake = Rg(tmp_path, roots)
    monkeypatch.setattr("adapters.ripgrep.backend.find_rg", lambda: fake.path)
    return fake


def local_service(roots: Sequence[Path], max_scans: int, scans: ScanQueue | None = None) -> SearchService:
    backends = [RipgrepBackend(root.name, RipgrepSettings(root=str(root))) for root in roots]
    server = {"max_scans": max_scans}
    service = SearchService.with_backends(backends, server=server, cache={"answer_ttl_s": 0, "single_flight": False})
    if scans is not None:
        service.scans = scans
    return service


class TestScans:
    async def test_rg_processes_never_exceed_max_scans(self, rg: Rg, roots: list[Path]) -> None:
        """Five concurrent searches on two slots: two rg at a time, the rest wait, every answer whole."""
        service = local_service(roots, max_scans=2)
        async with no_leaks():
            searches = [asyncio.create_task(service.search(parse_request({"query": f"needle{i}"}))) for i in range(5)]
            await rg.started(2)
            await until(lambda: service.scans.queued == 3)  # the others reach the queue (a thread or two each)
            assert (service.scans.running, service.scans.queued) == (2, 3)
            assert rg.events().count("start") == 2
            rg.go()
            answers = await asyncio.gather(*searches)
            await service.aclose()
        assert rg.events().count("start") == 5 and rg.most_at_once() <= 2
        for answer in answers:
            assert {s["status"] for s in answer["namespaces"]} == {"ok"}
            assert {f["namespace"] for f in answer["files"]} == {"alpha", "beta", "gamma"}
        assert service.scans.estimate("alpha").samples == 5

    async def test_one_rg_serves_a_request_over_several_namespaces_within_the_bound(
        self, rg: Rg, roots: list[Path]
    ) -> None:
        """The shared-rg batching keeps working inside the bound: three namespaces, one slot, one rg."""
        service = local_service(roots, max_scans=1)
        rg.go()
        answer = await service.search(parse_request({"query": "needle"}))
        await service.aclose()
        assert rg.events() == ["start", "end"]
        assert {f["namespace"] for f in answer["files"]} == {"alpha", "beta", "gamma"}

    async def test_a_scan_still_waiting_at_its_deadline_starts_nothing(self, rg: Rg, roots: list[Path]) -> None:
        """Its namespaces answer `timeout` saying it waited for a slot; no rg was started for it."""
        service = local_service(roots[:1], max_scans=1)
        first = asyncio.create_task(service.search(parse_request({"query": "needle", "timeout_ms": 60_000})))
        await rg.started(1)
        late = await service.search(parse_request({"query": "other", "timeout_ms": 200}))
        [status] = late["namespaces"]
        assert (status["status"], status["error"]) == ("timeout", QUEUED)
        assert late["truncated"] and late["files"] == []
        assert rg.events() == ["start"]
        assert service.scans.counts.expired == 1
        rg.go()
        assert (await first)["namespaces"][0]["status"] == "ok"
        await service.aclose()

    async def test_a_local_namespace_scans_by_text_not_by_meaning(self, roots: list[Path]) -> None:
        """Behind every wrapper (resilience, the intent index), a checkout's exact and regex searches
        are scans; its searches by meaning read the index and take no slot."""
        service = local_service(roots, max_scans=1)
        backend = service.backend("alpha")
        assert "semantic" in backend.modes and backend.scan_modes == SCANNING
        await service.aclose()

    async def test_the_cost_is_learnt_from_real_scans(self, roots: list[Path]) -> None:
        """Each real rg teaches its namespaces how long a scan takes."""
        service = local_service(roots, max_scans=2)
        await service.search(parse_request({"query": "needle"}))
        await service.search(parse_request({"query": "needle2"}))
        await service.aclose()
        for root in roots:
            estimate = service.scans.estimate(root.name)
            assert estimate.samples == 2 and estimate.mean > 0

    async def test_the_answer_time_is_learnt_and_kept_from_the_backends(self, roots: list[Path]) -> None:
        """Each answer teaches how long an answer takes once its backends are done; the backends'
        deadline then comes that much earlier, never more than a tenth of the request's."""
        service = local_service(roots, max_scans=2)
        request = parse_request({"query": "needle", "timeout_ms": 1000})
        assert service.answer_margin(1000) == 0.0
        started = time.monotonic()
        assert service.query_for(request, started).deadline == started + 1.0
        await service.search(request)
        await service.aclose()
        assert service.answer_time.samples == 1
        margin = service.answer_margin(1000)
        assert 0.0 < margin == min(service.answer_time.cost(), 0.1)
        assert service.query_for(request, started).deadline == pytest.approx(started + 1.0 - margin)
        service.answer_time.observe(30.0)
        assert service.answer_margin(1000) == pytest.approx(0.1)

    async def test_metrics_show_the_wait_and_the_scan(self, roots: list[Path]) -> None:
        """/metrics' histograms count each scan's wait and its time; the gauges read the queue."""
        service = local_service(roots, max_scans=2)
        metrics = Metrics()
        metrics.attach(service)
        await service.search(parse_request({"query": "needle"}))
        await service.aclose()
        text = generate_latest(metrics.registry).decode()
        assert "fedsearch_scan_wait_seconds_count 1.0" in text
        assert "fedsearch_scan_duration_seconds_count 1.0" in text
        assert 'fedsearch_admission_total{decision="admitted"} 1.0' in text
        assert "fedsearch_scans_max 2.0" in text and "fedsearch_scans_running 0.0" in text

    async def test_a_partial_answer_survives_a_busy_loop_behind_the_queue(
        self, tmp_path: Path, roots: list[Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """rg wrote a match and went on; the loop is blocked across the deadline: the match is kept."""
        out = tmp_path / "partial.out"
        out.write_bytes(f"{roots[0]}/a.txt\x001:1:needle\n".encode())
        slow = fake_program(tmp_path / "slow-rg", f"cat {out}\nexec sleep 30")
        monkeypatch.setattr("adapters.ripgrep.backend.find_rg", lambda: slow)

        async def hog(q: SearchQuery) -> BackendResult:
            await asyncio.sleep(max(0.0, q.remaining() - 0.05))
            time.sleep(0.2)  # noqa: ASYNC251 - the point: nothing else runs while the machine is busy
            return BackendResult()

        backends = [RipgrepBackend("alpha", RipgrepSettings(root=str(roots[0]))), MockBackend(hog, "hog")]
        service = SearchService.with_backends(backends, server={"max_scans": 1})
        async with no_leaks():
            answer = await service.search(parse_request({"query": "needle", "timeout_ms": 500}))
            await service.aclose()
        status = {s["name"]: s["status"] for s in answer["namespaces"]}
        assert status["alpha"] == "timeout"
        assert [(f["namespace"], f["file_path"]) for f in answer["files"]] == [("alpha", "a.txt")]
        assert not rg_children("sleep")


# --- what a refused caller sees --------------------------------------------------------------


@pytest.fixture
async def busy(rg: Rg, roots: list[Path], clock: FakeClock) -> AsyncIterator[tuple[SearchService, ScanQueue]]:
    """A service whose one slot is held by a scan planned at 4 s (2 s as learnt, and its deviation):
    a 1 s request cannot make it, and is told to retry in 4 s."""
    queue = ScanQueue(1, clock=clock)
    names = [root.name for root in roots]
    await teach(queue, clock, names, 2.0)
    clock.advance(100 * USE_S)  # long ago: what the teaching caller used is forgotten (no one else arrives)
    remote = MockBackend(_found, "remote")
    backends = [*(RipgrepBackend(r.name, RipgrepSettings(root=str(r))) for r in roots), remote]
    service = SearchService.with_backends(backends, server={"max_scans": 1}, defaults={"timeout_ms": 1000})
    service.scans = queue
    async with held(queue, names):
        yield service, queue
    await service.aclose()


REFUSED = {"query": "needle", "namespaces": ["alpha", "beta"], "timeout_ms": 1000}


def _without_detail(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "detail"}


class TestRefusal:
    async def test_http_503_problem_with_retry_after_before_any_scan(
        self, busy: tuple[SearchService, ScanQueue], aiohttp_client: MakeClient, rg: Rg
    ) -> None:
        """503 problem JSON, Retry-After equal to its retry_after, no rg started; /metrics counts it."""
        service, _ = busy
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        resp = await client.post("/v1/search", json=REFUSED)
        assert resp.status == 503
        assert resp.headers["Content-Type"].startswith("application/problem+json")
        body = await resp.json(content_type=None)
        assert _without_detail(body) == {"type": "about:blank", "title": "Overloaded", "status": 503, "retry_after": 4}
        assert resp.headers["Retry-After"] == "4"
        assert "at capacity" in body["detail"]
        assert rg.events() == []
        metrics = await (await client.get("/metrics")).text()
        assert 'fedsearch_admission_total{decision="refused"} 1.0' in metrics
        assert "fedsearch_scans_running 1.0" in metrics
        assert "fedsearch_scans_queued 0.0" in metrics
        assert "fedsearch_scans_max 1.0" in metrics
        assert "fedsearch_event_loop_tasks " in metrics

    async def test_a_stream_is_refused_before_its_first_event(
        self, busy: tuple[SearchService, ScanQueue], aiohttp_client: MakeClient
    ) -> None:
        """/v1/search/stream: the same 503 problem, not an event stream."""
        service, _ = busy
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        resp = await client.get("/v1/search/stream", params={"q": "needle", "ns": "alpha", "timeout_ms": "1000"})
        assert resp.status == 503 and resp.headers["Retry-After"] == "4"
        assert resp.headers["Content-Type"].startswith("application/problem+json")

    async def test_afi_search_is_rate_limited(
        self, busy: tuple[SearchService, ScanQueue], aiohttp_client: MakeClient
    ) -> None:
        """AFI's word for it: `rate_limited`, 429 with Retry-After."""
        service, _ = busy
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        resp = await client.post("/afi/search", json={"query": "needle", "path": "/alpha"})
        body = await resp.json()
        assert (resp.status, body["code"], body["retry_after"]) == (429, "rate_limited", 4)
        assert resp.headers["Retry-After"] == "4"

    async def test_remote_namespaces_are_answered_while_the_queue_is_full(
        self, busy: tuple[SearchService, ScanQueue]
    ) -> None:
        """Remote only: answered. Mixed: the remote part answered, the local part `unavailable` saying when to retry."""
        service, queue = busy
        remote = await service.search(parse_request({"query": "needle", "namespaces": ["remote"], "timeout_ms": 1000}))
        assert [s["status"] for s in remote["namespaces"]] == ["ok"] and remote["files"]
        mixed = await service.search(parse_request({**REFUSED, "namespaces": ["alpha", "remote"]}))
        status = {s["name"]: s for s in mixed["namespaces"]}
        assert status["remote"]["status"] == "ok"
        assert status["alpha"]["status"] == "unavailable" and "at capacity" in status["alpha"]["error"]
        assert mixed["truncated"] and [f["namespace"] for f in mixed["files"]] == ["remote"]
        assert (queue.counts.refused, queue.counts.shed) == (0, 1)

    async def test_mcp_tool_error_with_the_same_body(
        self, busy: tuple[SearchService, ScanQueue], aiohttp_client: MakeClient
    ) -> None:
        """MCP: isError, its text the problem JSON HTTP answers (the time left in the detail aside)."""
        service, _ = busy
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        http = await (await client.post("/v1/search", json=REFUSED)).json(content_type=None)
        async for mcp in held_client(build_server(service)):
            result = await mcp.call_tool("search", REFUSED)
            assert result.is_error and result.structured_content is None
            [content] = result.content
            assert content.type == "text"
            body = json.loads(content.text)
            assert _without_detail(body) == _without_detail(http)
            assert body["detail"].split(";")[0] == http["detail"].split(";")[0]

    async def test_cli_exits_3_with_the_retry_time(
        self, busy: tuple[SearchService, ScanQueue], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`fedsearch search --server`: exit 3 and when to retry; with --json, the problem JSON."""
        service, _ = busy
        server = TestServer(create_app(service.config, lambda _: service))
        await server.start_server()
        try:
            url = str(server.make_url(""))
            argv = ["search", "needle", "--ns", "alpha", "--timeout-ms", "1000", "--server", url]
            code = await asyncio.to_thread(main, argv)
            err = capsys.readouterr().err
            assert code == 3 and "retry in 4 s" in err
            code = await asyncio.to_thread(main, [*argv, "--json"])
            body = json.loads(capsys.readouterr().out.splitlines()[-1])  # the server's own log lines come first here
            assert code == 3 and (body["status"], body["retry_after"]) == (503, 4)
        finally:
            await server.close()


class TestConfig:
    def test_max_scans_defaults_to_the_cpus(self) -> None:
        """The default is the CPUs this process may run on."""
        assert ServerConfig().max_scans == default_max_scans() <= len(os.sched_getaffinity(0))

    @pytest.mark.parametrize(
        ("files", "cpus"),
        [
            ({"cpu.max": "150000 100000\n"}, 2),  # cgroup v2: 1.5 CPUs, rounded up
            ({"cpu.max": "max 100000\n"}, None),  # no quota
            ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1
            ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
            ({}, None),
        ],
    )
    def test_a_container_cpu_limit_bounds_the_default(
        self, tmp_path: Path, files: dict[str, str], cpus: int | None
    ) -> None:
        """In a container the CPU quota counts, not the node's CPUs (which the affinity mask shows)."""
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        mask = len(os.sched_getaffinity(0))
        assert default_max_scans(str(tmp_path)) == (min(mask, cpus) if cpus is not None else mask)

    @pytest.mark.parametrize("value", [0, -1, 2000, "2", True, 1.5])
    def test_a_bad_max_scans_names_the_key(self, value: object) -> None:
        """A bad value is a config error naming server.max_scans."""
        with pytest.raises(ConfigError) as caught:
            parse_config({"server": {"max_scans": value}})
        assert caught.value.key == "server.max_scans"

    def test_workers_share_the_default_out(self) -> None:
        """`serve --workers N`: each worker takes its share of the CPUs; a max_scans set in the config stays."""
        default = Config(server=ServerConfig(), defaults=DefaultsConfig(), namespaces=())
        assert per_worker(default, 1) is default
        assert per_worker(default, 2).server.max_scans == max(1, default_max_scans() // 2)
        assert per_worker(default, 64).server.max_scans == 1
        explicit = parse_config({"server": {"max_scans": 3}})
        assert per_worker(explicit, 2).server.max_scans == 3

    async def test_a_reload_keeps_the_queue_and_resizes_it(self, roots: list[Path]) -> None:
        """A reloaded service shares its predecessor's queue (one bound on rg) at the new size."""
        first = Config(server=ServerConfig(max_scans=1), defaults=DefaultsConfig(), namespaces=())
        service = SearchService(first)
        holder = ServiceHolder(service)
        await holder.reload(Config(server=ServerConfig(max_scans=3), defaults=DefaultsConfig(), namespaces=()))
        assert holder.current.scans is service.scans and service.scans.max_scans == 3
        await holder.aclose()
