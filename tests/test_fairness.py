"""Per-caller fairness and quotas under overload (issue 53): who a caller is, fair queueing of
local scans, refusals of the caller past its share or quota (429), bounded per-caller metrics,
and the greedy-beside-polite load of bench/fairness.py, short."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fairness import drive
from gateway import models
from gateway.config import parse_config
from gateway.errors import CallerLimited, ConfigError, Overloaded
from gateway.fanout import Route
from gateway.http.app import create_app
from gateway.http.auth import TokenTable
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.resilience import admission
from gateway.resilience.admission import MARGIN, USE_MIN_S, USE_S, USED_S, ScanQueue, scan_slot
from gateway.resilience.callers import LOCAL, Principal, client_id, current, identify
from gateway.resilience.fairness import FairQueue
from gateway.resilience.quota import Bucket
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.helpers import FakeClock, VirtualLoop

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]
FAR = 3600.0


def far() -> float:
    return asyncio.get_running_loop().time() + FAR


def query(seconds: float) -> SearchQuery:
    return SearchQuery(text="needle", mode="exact", deadline=asyncio.get_running_loop().time() + seconds)


async def _found(query: SearchQuery) -> BackendResult:
    return BackendResult(files=(FileMatch(path="a.py", hits=(Hit(line=1, text=query.text),)),))


def local_mock(name: str) -> MockBackend:
    backend = MockBackend(_found, name)
    backend.scan_modes = frozenset({"exact", "regex"})
    return backend


async def teach(queue: ScanQueue, clock: FakeClock, seconds: float) -> None:
    async with queue.slot(["a"], far()) as scan:
        clock.advance(seconds)
        scan.outcome = "complete"


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


# --- the scheduler ---------------------------------------------------------------------------


class TestFairQueue:
    def test_one_caller_is_a_fifo(self) -> None:
        """With one caller, items come out in the order they went in."""
        queue: FairQueue[int] = FairQueue()
        for i in range(10):
            queue.push("a", i, 1.0)
        assert [queue.pop() for _ in range(10)] == [("a", i) for i in range(10)]
        assert queue.pop() is None and len(queue) == 0

    def test_a_dead_item_is_dropped_and_not_charged(self) -> None:
        """An item gone while it waited is skipped, and its caller is not charged for it."""
        queue: FairQueue[int] = FairQueue()
        for i in range(3):
            queue.push("a", i, 1.0)
        queue.push("b", 10, 1.0)
        assert queue.pop(lambda i: i != 0) == ("a", 1)
        assert queue.pop() == ("b", 10)
        assert queue.pop() == ("a", 2)

    @settings(max_examples=200, deadline=None)
    @given(
        weights=st.lists(st.floats(0.25, 4.0), min_size=2, max_size=5),
        costs=st.lists(st.floats(0.001, 1.0), min_size=1, max_size=8),
        pops=st.integers(20, 400),
    )
    def test_weights_are_respected_over_a_long_run(self, weights: list[float], costs: list[float], pops: int) -> None:
        """Callers that always have work receive service in proportion to their weights: what two of
        them received, each over its weight, never differs by more than one item each (SFQ's bound)."""
        queue: FairQueue[float] = FairQueue()
        keys = [f"c{i}" for i in range(len(weights))]
        weight = dict(zip(keys, weights, strict=True))
        served = dict.fromkeys(keys, 0.0)
        turn = 0
        for key in keys:
            for _ in range(pops + 1):
                cost = costs[turn % len(costs)]
                turn += 1
                queue.push(key, cost, cost, weight[key])
        biggest = max(costs)
        for _ in range(pops):
            popped = queue.pop()
            assert popped is not None
            key, cost = popped
            served[key] += cost
            for a in keys:
                for b in keys:
                    gap = served[a] / weight[a] - served[b] / weight[b]
                    assert gap <= biggest / weight[a] + biggest / weight[b] + 1e-9

    @settings(max_examples=200, deadline=None)
    @given(
        backlog=st.lists(st.integers(1, 50), min_size=1, max_size=4),
        weights=st.lists(st.floats(0.25, 4.0), min_size=5, max_size=5),
        served_first=st.integers(0, 40),
    )
    def test_a_caller_under_its_share_never_waits_behind_one_over_it(
        self, backlog: list[int], weights: list[float], served_first: int
    ) -> None:
        """A caller arriving beside callers with long queues (over their share) waits behind at most
        one item of each of them, however long their queues."""
        queue: FairQueue[int] = FairQueue()
        for i, n in enumerate(backlog):
            for j in range(n):
                queue.push(f"busy{i}", j, 0.1, weights[i])
        for _ in range(served_first):
            queue.pop()
        queue.push("new", -1, 0.1, weights[4])
        ahead: dict[str, int] = {}
        while (popped := queue.pop()) is not None and popped[0] != "new":
            ahead[popped[0]] = ahead.get(popped[0], 0) + 1
        assert popped is not None and popped[0] == "new"
        assert all(n <= 1 for n in ahead.values()), ahead


class TestBucket:
    def test_a_burst_then_the_rate(self) -> None:
        """``burst`` at once, then one per ``1 / rate`` seconds; a refused take takes nothing."""
        bucket = Bucket.full(2.0, 3, 0.0)
        assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
        assert bucket.take(0.0) == pytest.approx(0.5)
        assert bucket.take(0.25) == pytest.approx(0.25)
        assert bucket.take(0.5) == 0.0


# --- who a caller is -------------------------------------------------------------------------


class TestIdentity:
    def test_the_token_wins_and_an_ordinary_token_cannot_split_itself(self) -> None:
        """A token's caller is the token, whatever client id it sends."""
        token = Principal("ci", weight=2.0)
        assert identify(token, client="x", address="10.0.0.1") is token

    def test_a_peer_token_forwards_its_caller(self) -> None:
        """A peer token's forwarded client is a caller of its own under the peer's name."""
        peer = Principal("gw-a", weight=3.0, rate=5.0, peer=True)
        forwarded = identify(peer, client="alice")
        assert forwarded == Principal("gw-a/alice", 3.0, 5.0, None)
        assert identify(peer) is peer

    def test_without_a_token_session_then_client_then_address(self) -> None:
        """The MCP session first, then X-Fedsearch-Client, then the address; nothing: in-process."""
        assert identify(None, session="s1", client="c", address="1.2.3.4").key == "session:s1"
        assert identify(None, client="c", address="1.2.3.4").key == "client:c"
        assert identify(None, address="1.2.3.4").key == "addr:1.2.3.4"
        assert identify(None) is LOCAL

    @pytest.mark.parametrize("value", ["", " ", "a b", "x" * 201, "é", "a\nb"])
    def test_an_unusable_client_id_is_ignored(self, value: str) -> None:
        """A client id with spaces, controls, non-ASCII or too long is no client id (never an error)."""
        assert client_id(value) is None
        assert identify(None, client=value, address="1.2.3.4").key == "addr:1.2.3.4"


# --- the queue, per caller -------------------------------------------------------------------


GREEDY = Principal("greedy")
POLITE = Principal("polite")


async def _hold(queue: ScanQueue, principal: Principal, started: list[str]) -> None:
    async with queue.slot(["a"], far(), queue.caller(principal)):
        started.append(principal.key)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def _backlog(queue: ScanQueue, principal: Principal, scans: int) -> AsyncIterator[list[str]]:
    """``scans`` scans of ``principal`` holding or waiting for slots until the block ends; yields
    the callers of the scans started, in order."""
    started: list[str] = []
    tasks = [asyncio.create_task(_hold(queue, principal, started)) for _ in range(scans)]
    await turns()
    try:
        yield started
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _taught(scan_s: float) -> tuple[FakeClock, ScanQueue]:
    """One slot on a fake clock, its scans learnt to take ``scan_s``."""
    clock = FakeClock()
    queue = ScanQueue(1, clock=clock)
    await teach(queue, clock, scan_s)
    return clock, queue


class TestFairAdmission:
    async def test_a_polite_scan_takes_the_next_slot_ahead_of_a_greedy_backlog(self) -> None:
        """Slots freed go to the caller under its share first, not in arrival order."""
        queue = ScanQueue(1)
        started: list[str] = []
        tasks = [asyncio.create_task(_hold(queue, GREEDY, started)) for _ in range(5)]
        await turns()
        tasks.append(asyncio.create_task(_hold(queue, POLITE, started)))
        await turns()
        tasks[0].cancel()  # the running greedy scan ends
        await turns()
        tasks[1].cancel()  # the next greedy one (tagged before the polite one arrived) may run first
        await turns()
        assert "polite" in started[:3]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert queue.queued == 0 and queue.running == 0

    async def test_the_greedy_caller_is_refused_with_429_while_the_polite_one_is_admitted(self) -> None:
        """Past its share with a long queue: 429 (``share``) from its own queue; the polite caller,
        beside it, waits for one scan at most and is admitted."""
        _, queue = await _taught(1.0)
        route = [Route("a", local_mock("a"))]
        async with _backlog(queue, GREEDY, 6):
            with pytest.raises(CallerLimited) as caught, queue.admit(route, query(10.0), GREEDY):
                pytest.fail("admitted")
            assert caught.value.reason == "share" and caught.value.retry_after > 0
            assert "caller greedy is past its fair share" in caught.value.detail
            with queue.admit(route, query(10.0), POLITE):  # behind the running scan and one greedy one
                pass

    async def test_a_caller_past_its_share_keeps_a_margin_of_its_time_left(self) -> None:
        """Past its share, a caller is refused (429) when its wait and work would fill more than
        1 - MARGIN of the time left (its long queue drains while the machine's speed drifts); the
        same plan with nobody else about is admitted (and so is a caller within its share)."""
        clock, queue = await _taught(1.0)
        route = [Route("a", local_mock("a"))]
        cost = queue.cost(["a"])
        async with _backlog(queue, GREEDY, 3):
            queue.caller(POLITE)  # seen: the greedy caller's share is a part of the one slot
            planned = queue.wait(queue.caller(GREEDY), cost) + cost
            with pytest.raises(CallerLimited) as caught, queue.admit(route, query(planned / 0.9), GREEDY):
                pytest.fail("admitted")
            assert caught.value.reason == "share" and f"it may plan for ({1 - MARGIN:.0%} of" in caught.value.detail
            assert caught.value.retry_after == pytest.approx(planned - (1 - MARGIN) * planned / 0.9, abs=0.01)
            clock.advance(USED_S)  # the others are forgotten: the greedy caller is alone
            planned = queue.wait(queue.caller(GREEDY), cost) + cost
            with queue.admit(route, query(planned / 0.9), GREEDY):
                pass

    async def test_alone_a_caller_is_refused_for_capacity_with_503(self) -> None:
        """With nobody else about, a refusal is the capacity's (Overloaded, 503), not a share's."""
        _, queue = await _taught(1.0)
        queue._callers.clear()  # the teaching caller is forgotten
        async with _backlog(queue, GREEDY, 6):
            with pytest.raises(Overloaded) as caught, queue.admit([Route("a", local_mock("a"))], query(4.0), GREEDY):
                pytest.fail("admitted")
        assert not isinstance(caught.value, CallerLimited)

    async def test_a_quota_refuses_past_the_burst_and_names_the_wait(self) -> None:
        """rate 1, burst 2: two admitted at once, the third refused (``quota``) for 1 s; a check
        takes nothing from the bucket; a second later one more passes."""
        clock = FakeClock()
        queue = ScanQueue(4, clock=clock)
        quota = Principal("ci", rate=1.0, burst=2)
        route = [Route("a", local_mock("a"))]
        for _ in range(2):
            queue.check(route, "exact", 5.0, quota)
            with queue.admit(route, query(5.0), quota):
                pass
        with pytest.raises(CallerLimited) as caught, queue.admit(route, query(5.0), quota):
            pytest.fail("admitted")
        assert caught.value.reason == "quota" and caught.value.retry_after == pytest.approx(1.0)
        with queue.admit(route, query(5.0), POLITE):  # nobody else's quota
            pass
        clock.advance(1.0)
        with queue.admit(route, query(5.0), quota):
            pass

    async def test_scans_carry_their_request_caller(self) -> None:
        """A scan taken inside an admitted request is its caller's (``scan_slot``)."""
        queue = ScanQueue(2)
        with queue.admit([Route("a", local_mock("a"))], query(5.0), POLITE):
            async with scan_slot(["a"], far()) as scan:
                assert scan.caller == "polite"


class TestOthersArriving:
    async def test_a_backlogged_callers_wait_counts_the_others_new_work(self) -> None:
        """While the greedy caller's backlog drains, the polite caller goes on taking the slots at
        the rate it took them lately: the greedy wait is its work over the slots left to it. The
        polite caller's own wait is not stretched by the greedy one (it is served first)."""
        clock = FakeClock()
        queue = ScanQueue(1, clock=clock)
        polite = queue.caller(POLITE)
        for _ in range(4):  # 4 of the last 8 s: about half a slot
            async with queue.slot(["a"], far(), polite) as scan:
                clock.advance(1.0)
                scan.outcome = "complete"
            clock.advance(1.0)
        async with _backlog(queue, GREEDY, 4):
            greedy = queue.caller(GREEDY)
            use = polite.use.slots(clock())
            assert 0.4 < use < 0.6
            fifo = queue.wait()  # the plain queue: what the greedy caller would wait with nobody else about
            assert queue.wait(greedy, queue.cost(["a"])) == pytest.approx(fifo / (1 - use))
            assert queue.wait(polite, queue.cost(["a"])) <= 2 * queue.cost(["a"])  # the running scan, one of greedy's

    async def test_what_a_caller_used_is_its_rate_so_far_then_forgotten(self) -> None:
        """A caller that just came is counted at its rate so far (2 s of a slot over the shortest span,
        :data:`USE_MIN_S`, as weighed by the decay), not at the fifth of it the decay's whole span
        :data:`USE_S` would make it; its use decays, and a caller whose last scan ended :data:`USED_S`
        ago no longer stretches anyone's wait: alone, a plan is the FIFO's."""
        clock, queue = await _taught(2.0)
        local = queue.caller(LOCAL)
        first = local.use.slots(clock())
        assert first == pytest.approx(2.0 / (USE_S * -math.expm1(-USE_MIN_S / USE_S)))
        clock.advance(USE_S)
        assert local.use.slots(clock()) < first / 2
        async with _backlog(queue, GREEDY, 3):
            greedy = queue.caller(GREEDY)
            assert queue.wait(greedy, 1.0) > queue.wait()  # the local caller may come back
            clock.advance(USED_S)
            assert queue.wait(greedy, 1.0) == pytest.approx(queue.wait())


SCAN_S = 0.25  # every scan's length in the simulation (fixed: the plan's margin is the others' work alone)


async def _simulate(greedy_rate: float, polite_rate: float, lead_s: float, seconds: float) -> dict[str, dict[str, int]]:
    """Two slots; two polite callers send open loop from the start, a greedy one from ``lead_s``, each
    request a 5 s deadline and one scan of :data:`SCAN_S` through the real queue; per caller, how
    its requests ended: ``refused``, ``good`` (its scan ran to its end), ``late`` (its deadline came
    while it waited, or cut its scan short)."""
    loop = asyncio.get_running_loop()
    queue = ScanQueue(2, clock=loop.time)
    route = [Route("a", local_mock("a"))]
    outcomes: dict[str, dict[str, int]] = {}

    async def request(principal: Principal) -> None:
        counts = outcomes.setdefault(principal.key, {"refused": 0, "good": 0, "late": 0})
        q = SearchQuery(text="needle", mode="exact", deadline=loop.time() + 5.0)
        try:
            with queue.admit(route, q, principal):
                async with scan_slot(["a"], q.deadline) as scan:
                    left = q.deadline - loop.time()
                    await asyncio.sleep(min(SCAN_S, left))
                    scan.outcome = "complete" if left >= SCAN_S else "cut"
                    counts["good" if left >= SCAN_S else "late"] += 1
        except Overloaded:
            counts["refused"] += 1
        except TimeoutError:
            counts["late"] += 1

    async def sender(principal: Principal, rate: float, start: float, offset: float) -> None:
        await asyncio.sleep(start)
        begun = loop.time()
        sent: set[asyncio.Task[None]] = set()
        for i in range(int((seconds - start) * rate)):  # open loop: at a fixed rate, never waiting for answers
            await asyncio.sleep(max(0.0, begun + (i + offset) / rate - loop.time()))
            task = asyncio.create_task(request(principal))
            sent.add(task)
            task.add_done_callback(sent.discard)
        await asyncio.gather(*sent)

    for _ in range(5):  # what a scan costs, learnt first
        async with queue.slot(["a"], loop.time() + 60.0) as scan:
            await asyncio.sleep(SCAN_S)
            scan.outcome = "complete"
    await asyncio.gather(
        sender(Principal("greedy"), greedy_rate, lead_s, 0.0),
        sender(Principal("polite-1"), polite_rate, 0.0, 1 / 3),
        sender(Principal("polite-2"), polite_rate, 0.0, 2 / 3),
    )
    return outcomes


class TestAdmittedWorkMeetsItsDeadline:
    def test_greedy_beside_polite_on_virtual_time(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """bench/fairness.py's load simulated on virtual time (no timing: a clock that jumps), scans of a
        fixed length: 2 slots are 8 scans a second; two polite callers at 0.1x, a greedy one at 4x joining
        after 10 s, for 60 s. The greedy caller's admitted scans end within their deadline (at most 2 %
        not), because its plan counts the polite callers' work arriving while it waits (planned without
        it, 156 of 425 ended late here); the polite callers are all served; and the slots stay busy."""
        loop = VirtualLoop()
        for module in (admission, models):  # the queue's deadlines and a query's time left, on virtual time
            monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=loop.time))
        capacity = 2 / SCAN_S
        try:
            outcomes = loop.run_until_complete(_simulate(4 * capacity, 0.1 * capacity, 10.0, 60.0))
        finally:
            loop.close()
        greedy = outcomes["greedy"]
        admitted = greedy["good"] + greedy["late"]
        assert greedy["refused"] > 0 and admitted > 0
        assert greedy["late"] <= admitted // 50, greedy
        for name in ("polite-1", "polite-2"):
            assert outcomes[name]["refused"] == outcomes[name]["late"] == 0, outcomes[name]
        polite_alone = 2 * 0.1 * capacity * 10.0  # the first 10 s, before the greedy caller came
        served = sum(o["good"] for o in outcomes.values()) - polite_alone
        assert served >= 0.9 * capacity * 50.0, outcomes


# --- config ----------------------------------------------------------------------------------


SHA = "0" * 64


class TestConfig:
    def test_weight_rate_burst_and_peer(self) -> None:
        """A token's weight, quota and peer flag reach its principal."""
        data = {"tokens": [{"name": "gw", "sha256": SHA, "weight": 2.5, "rate": 3.0, "burst": 6, "peer": True}]}
        config = parse_config(data, "test")
        token = config.tokens[0]
        assert (token.weight, token.rate, token.burst, token.peer) == (2.5, 3.0, 6, True)
        secret = b"gw-secret"
        data["tokens"][0]["sha256"] = hashlib.sha256(secret).hexdigest()
        caller = TokenTable(parse_config(data, "test").tokens).lookup(secret)
        assert caller is not None and caller.principal == Principal("gw", 2.5, 3.0, 6, peer=True)

    @pytest.mark.parametrize(
        ("token", "key"),
        [
            ({"weight": 0}, "tokens[0].weight"),
            ({"rate": -1}, "tokens[0].rate"),
            ({"burst": 5}, "tokens[0].burst"),
            ({"rate": 1, "burst": 0}, "tokens[0].burst"),
        ],
    )
    def test_bad_values_name_the_key(self, token: dict[str, Any], key: str) -> None:
        """A weight or quota out of range (or a burst without a rate) is an error naming its key."""
        with pytest.raises(ConfigError) as caught:
            parse_config({"tokens": [{"name": "t", "sha256": SHA, **token}]}, "test")
        assert caught.value.key == key


# --- over HTTP -------------------------------------------------------------------------------


def _scanning(name: str, seconds: float) -> MockBackend:
    """A local namespace whose every search is one scan of ``seconds`` through the scan queue."""

    async def handler(query: SearchQuery) -> BackendResult:
        async with scan_slot([name], query.deadline) as scan:
            await asyncio.sleep(seconds)
            scan.outcome = "complete"
        return await _found(query)

    backend = MockBackend(handler, name)
    backend.scan_modes = frozenset({"exact", "regex"})
    return backend


def _with_tokens(service: SearchService, tokens: list[dict[str, Any]]) -> SearchService:
    """``service`` with ``[[tokens]]`` configured (its backends as they are)."""
    service.config = replace(service.config, tokens=parse_config({"tokens": tokens}, "test").tokens)
    return service


def _service(scan_s: float, **server: Any) -> SearchService:
    return SearchService.with_backends(
        [_scanning("alpha", scan_s)],
        server={"max_scans": 1, **server},
        cache={"answer_ttl_s": 0, "single_flight": False},
    )


def _series(metrics: str, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            out[labels] = float(value)
    return out


class TestHttp:
    async def test_greedy_beside_polite_short(self, aiohttp_client: MakeClient) -> None:
        """bench/fairness.py's load, short: a greedy caller at 4x capacity, two polite ones at 0.1x;
        the polite callers are never refused while the greedy one is, with 429, Retry-After and a reason."""
        service = _service(0.05)
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        url = str(client.make_url("/v1/search"))
        body = orjson.dumps({"query": "needle", "timeout_ms": 5000})  # room for a busy machine's slow loop
        async with aiohttp.ClientSession() as session:
            stats = await drive(
                session, url, [("greedy", 80.0), ("polite-1", 2.0), ("polite-2", 2.0)], 3.0, 5.0, lambda: body
            )
        greedy = stats["greedy"]
        assert greedy.refused and greedy.statuses.get(429, 0) > 0 and greedy.no_retry_after == 0
        assert greedy.reasons.get("share", 0) > 0
        for name in ("polite-1", "polite-2"):
            assert stats[name].refused == [] and stats[name].errors == 0
            assert len(stats[name].answered) == stats[name].sent > 0
        metrics = await (await client.get("/metrics")).text()
        requests = _series(metrics, "fedsearch_caller_requests_total")
        assert requests['fedsearch_caller_requests_total{caller="client:greedy",decision="refused_share"}'] > 0
        assert 'fedsearch_caller_requests_total{caller="client:polite-1",decision="refused_share"}' not in requests
        assert "fedsearch_caller_queue_wait_seconds_bucket" in metrics

    async def test_a_refusal_body_says_why(self, aiohttp_client: MakeClient) -> None:
        """The 429 problem JSON: title, status, reason, retry_after equal to the Retry-After header."""
        token = {"name": "ci", "sha256": hashlib.sha256(b"ci-token").hexdigest(), "rate": 0.001, "burst": 1}
        service = _with_tokens(_service(0.0), [token])
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        auth = {"Authorization": "Bearer ci-token"}
        first = await client.post("/v1/search", json={"query": "needle"}, headers=auth)
        assert first.status == 200
        second = await client.post("/v1/search", json={"query": "needle 2"}, headers=auth)
        assert second.status == 429
        problem = await second.json(content_type=None)
        assert problem["title"] == "Too many requests" and problem["status"] == 429
        assert problem["reason"] == "quota" and "caller ci is past its quota" in problem["detail"]
        assert second.headers["Retry-After"] == str(problem["retry_after"])

    async def test_metrics_labels_are_bounded(self, aiohttp_client: MakeClient) -> None:
        """Past ``[server] metrics_callers`` callers, the rest are counted as ``other``."""
        service = _service(0.0, metrics_callers=2)
        client = await aiohttp_client(create_app(service.config, lambda _: service))
        for i in range(6):
            resp = await client.post("/v1/search", json={"query": f"n{i}"}, headers={"X-Fedsearch-Client": f"c{i}"})
            assert resp.status == 200
        metrics = await (await client.get("/metrics")).text()
        callers = set(re.findall(r'fedsearch_caller_requests_total\{caller="([^"]+)"', metrics))
        assert callers == {"client:c0", "client:c1", "other"}
        assert (
            _series(metrics, "fedsearch_caller_requests_total")[
                'fedsearch_caller_requests_total{caller="other",decision="admitted"}'
            ]
            == 4.0
        )


# --- across gateways -------------------------------------------------------------------------


@pytest.fixture
async def upstream(tmp_path: Path) -> AsyncIterator[tuple[str, list[str]]]:
    """A gateway B whose token ``gw-a`` is a peer's and ``plain`` an ordinary one; the callers of
    its searches, as it saw them."""
    seen: list[str] = []

    async def handler(query: SearchQuery) -> BackendResult:
        seen.append(current().key)
        return await _found(query)

    tokens: list[dict[str, Any]] = [
        {"name": "gw-a", "sha256": hashlib.sha256(b"a-secret").hexdigest(), "peer": True},
        {"name": "plain", "sha256": hashlib.sha256(b"plain-secret").hexdigest()},
    ]
    service = _with_tokens(SearchService.with_backends([MockBackend(handler, "beta")]), tokens)
    server = TestServer(create_app(service.config, lambda _: service))
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), seen
    finally:
        await server.close()


class TestForwarding:
    @pytest.mark.parametrize(("secret", "expected"), [("a-secret", "gw-a/client:alice"), ("plain-secret", "plain")])
    async def test_a_gateway_forwards_its_caller_and_only_a_peer_token_is_believed(
        self,
        upstream: tuple[str, list[str]],
        aiohttp_client: MakeClient,
        monkeypatch: pytest.MonkeyPatch,
        secret: str,
        expected: str,
    ) -> None:
        """Gateway A (a ``gateway`` namespace over B) names its caller to B; B believes it from a
        peer token (``gw-a/client:alice``), not from an ordinary one (``plain``)."""
        url, seen = upstream
        monkeypatch.setenv("B_TOKEN", secret)
        config = parse_config(
            {"namespaces": [{"name": "b", "backend": "gateway", "url": url, "token_env": "B_TOKEN"}]}, "test"
        )
        service = SearchService(config)
        client = await aiohttp_client(create_app(config, lambda _: service))
        resp = await client.post(
            "/v1/search", json={"query": "needle", "namespaces": ["b/*"]}, headers={"X-Fedsearch-Client": "alice"}
        )
        assert resp.status == 200, await resp.text()
        assert seen == [expected]
