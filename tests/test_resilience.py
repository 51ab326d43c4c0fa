"""The resilience layer: breaker, retries, retry budget, hedging, caps, and how fan-out keeps its deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters._http import ConnectionLost, Unreachable
from gateway.backend import AsyncBackend
from gateway.errors import (
    BackendCapped,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    RateLimited,
    Rejected,
    Unsupported,
)
from gateway.fanout import Route, fan_out
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.query.request import parse_request
from gateway.resilience.breaker import Breaker, verdict
from gateway.resilience.hedge import HedgeBudget, LatencyWindow, race
from gateway.resilience.policy import LOCAL, Policy
from gateway.resilience.retry import RetryBudget
from gateway.resilience.wrapper import ResilientBackend, wrap
from gateway.service import SearchService
from gateway.testing import MockBackend, MockSettings
from tests.fakeservers import leftover_tasks
from tests.helpers import FakeClock

Step = BaseException | BackendResult
Handler = Callable[[SearchQuery], Awaitable[BackendResult]]


def ok(name: str = "a.py", hits: int = 1) -> BackendResult:
    return BackendResult(files=(FileMatch(path=name, hits=tuple(Hit(line=i + 1, text="x") for i in range(hits))),))


def script(*steps: Step) -> Handler:
    """A handler playing ``steps`` in order (an exception is raised), the last one repeating."""
    played = list(steps)

    async def handler(query: SearchQuery) -> BackendResult:
        step = played.pop(0) if len(played) > 1 else played[0]
        if isinstance(step, BaseException):
            raise step
        return step

    return handler


async def hang(query: SearchQuery) -> BackendResult:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def query(seconds: float = 5.0) -> SearchQuery:
    return SearchQuery(text="foo", deadline=time.monotonic() + seconds)


def resilient(
    handler: Handler, clock: FakeClock | None = None, max_hits: int | None = None, **policy: Any
) -> ResilientBackend:
    clock = clock or FakeClock()
    policy.setdefault("hedge", False)
    inner = MockBackend(handler, "ns", max_hits=max_hits)
    return ResilientBackend(inner, Policy(clock=clock, sleep=clock.sleep, **policy))


class Replicas(AsyncBackend[MockSettings]):
    """A backend with one handler per replica, recording which replica each call went to."""

    kind = "replicated"
    Settings = MockSettings

    def __init__(self, *handlers: Handler) -> None:
        super().__init__("rep", MockSettings())
        self.handlers = handlers
        self.calls: list[int] = []

    def replicas(self) -> int:
        return len(self.handlers)

    async def search(self, query: SearchQuery) -> BackendResult:
        return await self.search_replica(query, 0)

    async def search_replica(self, query: SearchQuery, replica: int) -> BackendResult:
        self.calls.append(replica)
        return await self.handlers[replica](query)


def replicated(*handlers: Handler, clock: FakeClock | None = None, **policy: Any) -> ResilientBackend:
    clock = clock or FakeClock()
    policy.setdefault("hedge_floor_s", 0.01)
    return ResilientBackend(Replicas(*handlers), Policy(clock=clock, sleep=clock.sleep, **policy))


class TestBreaker:
    def test_opens_after_five_consecutive_failures(self) -> None:
        """Five failures in a row open the breaker; the sixth call is refused with when to come back."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        with pytest.raises(BackendUnavailable) as info:
            breaker.admit()
        assert info.value.retry_after == 30 and "circuit open" in info.value.reason

    def test_a_success_resets_the_count(self) -> None:
        """Failures separated by a success never add up to an open breaker."""
        breaker = Breaker(clock=FakeClock())
        for _ in range(3):
            for _ in range(4):
                breaker.failure("HTTP 500", breaker.admit())
            breaker.success(breaker.admit())
        assert breaker.state == "closed"

    def test_ignored_outcomes_never_count(self) -> None:
        """Cancellations, deadline losers and hedge losers (ignored) never open the breaker."""
        breaker = Breaker(clock=FakeClock())
        for _ in range(100):
            breaker.ignore(breaker.admit())
        assert breaker.state == "closed" and breaker.failures == 0

    def test_one_half_open_probe_after_the_open_time(self) -> None:
        """After 30 s exactly one call goes through as the probe; a second one meanwhile is refused."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        clock.advance(30)
        assert breaker.admit() is True
        with pytest.raises(BackendUnavailable, match="probe is in flight"):
            breaker.admit()

    def test_a_successful_probe_closes(self) -> None:
        """A probe that succeeds closes the breaker for everyone."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        clock.advance(30)
        breaker.success(breaker.admit())
        assert breaker.state == "closed" and breaker.admit() is False

    def test_a_cancelled_probe_hands_its_slot_back(self) -> None:
        """A probe cancelled (or past its deadline) lets the next caller probe instead."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        clock.advance(30)
        breaker.ignore(breaker.admit())
        assert breaker.admit() is True

    def test_open_time_escalates_to_the_cap(self) -> None:
        """Each failed probe opens it longer: 30, 60, 90 … s, never over 300 s."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        waits = []
        for _ in range(12):
            waits.append(breaker.wait())
            clock.advance(breaker.wait())
            breaker.failure("HTTP 503", breaker.admit())
        assert waits == [30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300]

    def test_escalation_is_forgotten_after_a_long_healthy_spell(self) -> None:
        """A backend closed for the maximum open time starts again at 30 s when it next trips."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        for _ in range(3):  # three ejections: 30, 60, 90 s
            for _ in range(5 if breaker.state == "closed" else 1):
                breaker.failure("HTTP 503", breaker.admit())
            clock.advance(breaker.wait())
        breaker.success(breaker.admit())
        clock.advance(300)
        for _ in range(5):
            breaker.failure("HTTP 503", breaker.admit())
        assert breaker.wait() == 30

    def test_suspension_refuses_until_retry_after(self) -> None:
        """A rate limit holds calls back until its Retry-After, then lets them through."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        breaker.suspend(7)
        with pytest.raises(RateLimited) as info:
            breaker.admit()
        assert info.value.retry_after == 7
        clock.advance(7)
        assert breaker.admit() is False

    def test_suspension_is_capped(self) -> None:
        """A Retry-After of a day suspends for at most the cap (300 s)."""
        breaker = Breaker(clock=FakeClock())
        breaker.suspend(86_400)
        assert breaker.wait() == 300

    @given(st.lists(st.sampled_from(["success", "failure", "ignore", "wait"]), max_size=60))
    def test_open_only_after_enough_failures(self, events: list[str]) -> None:
        """Whatever happens, the breaker opens only on the threshold-th failure in a row, for 30–300 s."""
        clock = FakeClock()
        breaker = Breaker(clock=clock)
        streak = 0
        for event in events:
            if event == "wait":
                clock.advance(45)
                continue
            try:
                probe = breaker.admit()
            except BackendError:
                continue
            before = breaker.state
            getattr(breaker, event)(*(("boom",) if event == "failure" else ()), probe)
            if before == "closed":
                streak = streak + 1 if event == "failure" else 0 if event == "success" else streak
                assert (breaker.state == "open") == (streak >= 5)
                streak = 0 if breaker.state == "open" else streak
            if breaker.state == "open":
                assert 0 < breaker.until - clock() <= 300


class TestVerdict:
    @pytest.mark.parametrize(
        ("exc", "expected"),
        [
            (asyncio.CancelledError(), "ignore"),
            (BackendTimeout("timed out"), "ignore"),
            (TimeoutError(), "ignore"),
            (RateLimited("HTTP 429: rate limited", retry_after=3), "ignore"),
            (Unreachable("HTTP 503"), "failure"),
            (ConnectionLost("connection reset mid-body"), "failure"),
            (BackendError("HTTP 500"), "failure"),
            (BackendError("invalid JSON in response"), "failure"),
            (Rejected("HTTP 400"), "success"),
            (Rejected("zoekt rejected the query: bad regexp"), "success"),
            (BackendError("HTTP 400 said in words only"), "failure"),
            (BackendCapped("response over the cap"), "success"),
            (Unsupported("no semantic"), "success"),
            (ZeroDivisionError(), "ignore"),
        ],
    )
    def test_what_counts_against_a_backend(self, exc: BaseException, expected: str) -> None:
        """Only sickness counts; refusals of the query are signs of life; deadlines and cancellations are nothing."""
        assert verdict(exc) == expected


class TestRetries:
    async def test_a_503_is_retried_and_recovers(self) -> None:
        """A 503 then an answer gives the answer, after one short full-jitter sleep."""
        clock = FakeClock()
        backend = resilient(script(Unreachable("HTTP 503"), ok()), clock)
        result = await backend.search(query())
        assert result.status == "ok" and len(backend.inner.calls) == 2
        assert len(clock.slept) == 1 and 0 <= clock.slept[0] <= 0.025

    async def test_a_reset_connection_is_retried(self) -> None:
        """A connection reset mid-body is transient: retried."""
        backend = resilient(script(ConnectionLost("connection reset mid-body"), ok()))
        assert (await backend.search(query())).status == "ok"

    @pytest.mark.parametrize(
        "exc",
        [
            BackendError("HTTP 500"),
            BackendError("HTTP 404"),
            BackendError("invalid JSON in response"),
            BackendTimeout("timed out"),
            BackendCapped("over the cap"),
        ],
    )
    async def test_other_failures_are_not_retried(self, exc: BackendError) -> None:
        """A 500, a 4xx, garbage, a timeout or a cap is raised after one attempt."""
        backend = resilient(script(exc, ok()))
        with pytest.raises(type(exc)):
            await backend.search(query())
        assert len(backend.inner.calls) == 1

    async def test_at_most_three_attempts(self) -> None:
        """A backend failing transiently forever is tried three times, then its error is raised."""
        backend = resilient(script(Unreachable("HTTP 502")))
        with pytest.raises(Unreachable, match="HTTP 502"):
            await backend.search(query())
        assert len(backend.inner.calls) == 3

    async def test_backoff_grows_and_is_capped(self) -> None:
        """The backoff ceiling doubles from 25 ms and stops at 250 ms (jitter at its maximum here)."""
        clock = FakeClock()
        backend = resilient(
            script(Unreachable("HTTP 503")),
            clock,
            max_attempts=6,
            budget_min=10,
            breaker=False,
            jitter=lambda lo, hi: hi,
        )
        with pytest.raises(Unreachable):
            await backend.search(query())
        assert clock.slept == pytest.approx([0.025, 0.05, 0.1, 0.2, 0.25])

    async def test_retry_after_that_fits_is_honoured(self) -> None:
        """A 429 whose Retry-After fits in the deadline is waited out, then retried."""
        clock = FakeClock()
        backend = resilient(script(RateLimited("HTTP 429: rate limited", retry_after=1.0), ok()), clock)
        result = await backend.search(query(5))
        assert result.status == "ok" and clock.slept and clock.slept[0] >= 1.0

    async def test_retry_after_past_the_deadline_is_reported_at_once(self) -> None:
        """A 429 asking for more time than is left is raised with its retry_after, without sleeping."""
        clock = FakeClock()
        backend = resilient(script(RateLimited("HTTP 429: rate limited", retry_after=7.0), ok()), clock)
        with pytest.raises(RateLimited) as info:
            await backend.search(query(2))
        assert info.value.retry_after == 7 and clock.slept == [] and len(backend.inner.calls) == 1

    async def test_a_rate_limit_holds_back_the_next_requests(self) -> None:
        """After a 429 with Retry-After, the next request is refused by the gateway, not sent."""
        clock = FakeClock()
        backend = resilient(script(RateLimited("HTTP 429: rate limited", retry_after=60.0), ok()), clock)
        with pytest.raises(RateLimited):
            await backend.search(query(2))
        with pytest.raises(RateLimited, match="retry in 60 s"):
            await backend.search(query(2))
        assert len(backend.inner.calls) == 1

    async def test_a_429_without_retry_after_is_not_retried(self) -> None:
        """A rate limit that does not say when is not retried now."""
        backend = resilient(script(RateLimited("HTTP 429: rate limited"), ok()))
        with pytest.raises(RateLimited):
            await backend.search(query())
        assert len(backend.inner.calls) == 1

    async def test_no_sleep_past_the_deadline(self) -> None:
        """A backoff that would end past the deadline is not slept: the error comes back at once."""
        clock = FakeClock()
        backend = resilient(
            script(Unreachable("HTTP 503"), ok()),
            clock,
            backoff_base_s=1.0,
            backoff_max_s=1.0,
            jitter=lambda lo, hi: hi,
        )
        with pytest.raises(Unreachable):
            await backend.search(query(0.5))
        assert clock.slept == [] and len(backend.inner.calls) == 1

    async def test_cancellation_is_not_retried(self) -> None:
        """Cancelling a search cancels it; no retry follows."""
        started = asyncio.Event()

        async def slow(q: SearchQuery) -> BackendResult:
            started.set()
            return await hang(q)

        backend = resilient(slow)
        task = asyncio.create_task(backend.search(query()))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(backend.inner.calls) == 1

    async def test_a_local_backend_is_never_retried(self) -> None:
        """The local policy (ripgrep) makes one attempt and has no breaker."""
        backend = ResilientBackend(MockBackend(script(Unreachable("boom")), "local"), LOCAL)
        for _ in range(10):
            with pytest.raises(Unreachable):
                await backend.search(query())
        assert len(backend.inner.calls) == 10 and backend.breakers() == []
        assert backend.stats.requests == backend.stats.attempts == 10 and backend.stats.retries == 0

    async def test_a_local_backend_goes_straight_through(self) -> None:
        """Nothing to decide for the local policy: no retry budget or latency is kept per call,
        and answers are still capped."""
        files = tuple(ok(f"{i}.py", hits=40).files[0] for i in range(5))
        backend = ResilientBackend(
            MockBackend(script(BackendResult(files=files)), "local", max_hits=100),
            Policy(max_attempts=1, breaker=False, hedge=False),
        )
        result = await backend.search(query())
        assert [f.path for f in result.files] == ["0.py", "1.py"] and result.status == "capped"
        assert not backend._budget._requests and not backend._latency.samples  # nothing kept for it
        assert backend.stats.requests == backend.stats.attempts == 1


class TestRetryBudget:
    async def test_a_storm_is_bounded_by_the_budget(self) -> None:
        """Requests one after another into a 503 storm make at most 1.2 attempts each plus the floor of 3."""
        backend = resilient(script(Unreachable("HTTP 503")), breaker=False)
        for _ in range(50):
            with pytest.raises(Unreachable):
                await backend.search(query())
        attempts = len(backend.inner.calls)
        assert attempts <= 1.2 * 50 + 3 and backend.stats.budget_exhausted > 0

    def test_concurrent_retries_are_a_share_of_active_requests(self) -> None:
        """With 10 requests active, 3 may retry at once (20 % of 10 is 2, the floor is 3), not a 4th."""
        budget = RetryBudget(window_s=10, clock=FakeClock())
        for _ in range(100):  # plenty of requests in the window
            budget.start()
            budget.finish(False)
        for _ in range(10):
            budget.start()
        assert [budget.allow(False) for _ in range(4)] == [True, True, True, False]

    def test_a_retrying_request_keeps_its_slot(self) -> None:
        """A request already retrying may retry again without taking a second slot."""
        budget = RetryBudget(clock=FakeClock())
        for _ in range(30):
            budget.start()
        assert budget.allow(False) and budget.allow(True) and budget.retrying == 1

    def test_the_window_slides(self) -> None:
        """Retries spent more than a window ago are available again."""
        clock = FakeClock()
        budget = RetryBudget(window_s=10, clock=clock)
        budget.start()
        spent = [budget.allow(True) for _ in range(4)]
        clock.advance(11)
        budget.start()
        assert spent == [True, True, True, False] and budget.allow(True)


class TestBreakerInTheLayer:
    async def test_open_breaker_short_circuits(self) -> None:
        """After five failing attempts the backend is not called any more; the error says when to retry."""
        backend = resilient(script(BackendError("HTTP 500")))
        for _ in range(5):
            with pytest.raises(BackendError, match="HTTP 500"):
                await backend.search(query())
        with pytest.raises(BackendUnavailable, match="circuit open after HTTP 500: retry in 30 s") as info:
            await backend.search(query())
        assert len(backend.inner.calls) == 5 and info.value.retry_after == 30

    async def test_timeouts_never_open_it(self) -> None:
        """A backend that keeps timing out (deadline losers) is still called every time."""
        backend = resilient(script(BackendTimeout("timed out")))
        for _ in range(10):
            with pytest.raises(BackendTimeout):
                await backend.search(query())
        assert len(backend.inner.calls) == 10

    async def test_query_refusals_never_open_it(self) -> None:
        """A backend refusing queries (4xx) is alive: its breaker stays closed."""
        backend = resilient(script(Rejected("zoekt rejected the query: bad")))
        for _ in range(10):
            with pytest.raises(BackendError):
                await backend.search(query())
        assert backend.breakers()[0].state == "closed"

    async def test_cancelled_calls_never_open_it(self) -> None:
        """Ten cancelled searches leave the breaker closed."""
        backend = resilient(hang)
        for _ in range(10):
            task = asyncio.create_task(backend.search(query()))
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert backend.breakers()[0].state == "closed" and backend.breakers()[0].failures == 0

    async def test_open_breaker_is_unavailable_with_a_next_action(self) -> None:
        """An open breaker shows as `unavailable` with its reason and a next action to retry it later."""
        backend = resilient(script(BackendError("HTTP 500")))
        good = MockBackend(script(ok()), "good")
        service = SearchService.with_backends([backend, good])
        for _ in range(6):
            answer = await service.search(parse_request({"query": "foo"}))
        status = {s["name"]: s for s in answer["namespaces"]}["ns"]
        assert status["status"] == "unavailable" and status["error"].startswith("circuit open")
        action = next(a for a in answer["next"] if a["args"].get("namespaces") == ["ns"])
        assert "after 30 s" in action["reason"] and answer["truncated"] is True
        assert answer["files"][0]["namespace"] == "good"


class TestHedging:
    async def test_a_straggler_is_hedged_and_the_hedge_wins(self) -> None:
        """A primary that does not answer after the delay is hedged on the other replica, which wins."""
        cancelled = asyncio.Event()

        async def straggle(q: SearchQuery) -> BackendResult:
            try:
                return await hang(q)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        backend = replicated(straggle, script(ok("fast.py")))
        result = await backend.search(query())
        assert result.files[0].path == "fast.py" and backend.inner.calls == [0, 1]
        assert cancelled.is_set() and backend.stats.hedges_won == 1
        assert all(b.state == "closed" and b.failures == 0 for b in backend.breakers())

    async def test_a_fast_answer_is_not_hedged(self) -> None:
        """An answer within the delay sends no second request."""
        backend = replicated(script(ok()), script(ok()), hedge_floor_s=5.0)
        for _ in range(4):
            await backend.search(query())
        assert backend.stats.hedges == 0 and backend.stats.attempts == 4

    async def test_primaries_go_round_the_replicas(self) -> None:
        """Primaries alternate between two replicas."""
        backend = replicated(script(ok()), script(ok()), hedge_floor_s=5.0)
        for _ in range(4):
            await backend.search(query())
        assert backend.inner.calls == [0, 1, 0, 1]

    async def test_hedges_stop_when_the_budget_is_spent(self) -> None:
        """With no budget refill, only the first straggler is hedged; the next waits for its primary."""
        answers = iter([None, ok("late.py")])

        async def slow_then_late(q: SearchQuery) -> BackendResult:
            result = next(answers)
            if result is None:
                return await hang(q)
            await asyncio.sleep(0.05)
            return result

        backend = replicated(slow_then_late, script(ok("b.py")), hedge_ratio=0.0, hedge_burst=1.0)
        first = await backend.search(query())
        # the round-robin now starts at replica 1: put the straggler there
        backend.inner.handlers = (script(ok("b.py")), slow_then_late)
        second = await backend.search(query())
        assert first.files[0].path == "b.py" and second.files[0].path == "late.py"
        assert backend.stats.hedges == 1 and backend.stats.hedges_denied == 1

    async def test_a_failed_primary_leaves_the_hedge_to_answer(self) -> None:
        """If the primary fails after the hedge went out, the hedge's answer is taken."""
        gate = asyncio.Event()

        async def fail_later(q: SearchQuery) -> BackendResult:
            await gate.wait()
            raise BackendError("HTTP 500")

        async def answer_after_primary_failed(q: SearchQuery) -> BackendResult:
            gate.set()
            await asyncio.sleep(0.01)
            return ok("hedge.py")

        backend = replicated(fail_later, answer_after_primary_failed, max_attempts=1)
        result = await backend.search(query())
        assert result.files[0].path == "hedge.py"

    async def test_a_hedge_loser_is_on_probation(self) -> None:
        """A replica that lost a hedge takes no primaries during its probation, and takes them again after."""
        clock = FakeClock()
        straggling = [True]

        async def sometimes_stuck(q: SearchQuery) -> BackendResult:
            if straggling[0]:
                return await hang(q)
            return ok("a.py")

        backend = replicated(sometimes_stuck, script(ok("b.py")), clock=clock, probation_s=10.0)
        await backend.search(query())  # primary 0 straggles, the hedge on 1 wins
        straggling[0] = False
        for _ in range(4):
            await backend.search(query())
        during = backend.inner.calls[2:]
        clock.advance(10)
        for _ in range(2):
            await backend.search(query())
        assert backend.inner.calls[:2] == [0, 1] and during == [1, 1, 1, 1]
        assert sorted(backend.inner.calls[6:]) == [0, 1]
        assert backend.breakers()[0].failures == 0

    async def test_a_retry_goes_to_another_replica(self) -> None:
        """A transient failure on one replica is retried on the other one."""
        backend = replicated(script(Unreachable("HTTP 503")), script(ok("b.py")), hedge=False)
        result = await backend.search(query())
        assert result.files[0].path == "b.py" and backend.inner.calls == [0, 1]

    async def test_an_open_replica_is_skipped(self) -> None:
        """A replica whose breaker is open gets no primaries; the other one serves."""
        backend = replicated(script(BackendError("HTTP 500")), script(ok("b.py")), hedge=False, max_attempts=1)
        for _ in range(12):
            await asyncio.gather(backend.search(query()), return_exceptions=True)
        assert backend.inner.calls.count(0) == 5 and backend.breakers()[0].state == "open"

    async def test_race_leaves_no_task(self) -> None:
        """After a race, the loser is cancelled and awaited: no task is left."""

        async def fast() -> str:
            await asyncio.sleep(0)
            return "fast"

        async def slow() -> str:
            await asyncio.Event().wait()
            return "slow"

        assert await race(slow, fast, 0.0) == ("fast", True)
        assert leftover_tasks() == []

    def test_latency_window_p95_with_a_floor(self) -> None:
        """The hedge delay is the 95th percentile of what was seen, never under the floor."""
        window = LatencyWindow(size=100, floor_s=0.05)
        assert window.delay() == 0.05
        for i in range(100):
            window.record(0.001 * (i + 1))
        assert window.percentile() == pytest.approx(0.095) and window.delay() == pytest.approx(0.095)

    def test_hedge_budget_is_five_percent(self) -> None:
        """Over 1,000 requests at most 5 % plus the first token are hedged."""
        budget = HedgeBudget(ratio=0.05, burst=10)
        spent = 0
        for _ in range(1000):
            budget.earn()
            spent += budget.spend()
        assert spent <= 51


class TestCaps:
    async def test_too_many_hits_keep_whole_files_and_say_capped(self) -> None:
        """Over the hit cap, whole files are kept in order up to it, and the result is capped."""
        files = tuple(ok(f"{i}.py", hits=40).files[0] for i in range(5))
        backend = resilient(script(BackendResult(files=files)), max_hits=100)
        result = await backend.search(query())
        assert [f.path for f in result.files] == ["0.py", "1.py"]
        assert all(len(f.hits) == 40 for f in result.files)
        assert result.status == "capped" and result.file_count == 5 and "100-hit cap" in result.reason

    async def test_under_the_cap_nothing_changes(self) -> None:
        """An answer within the cap is returned as it came."""
        answer = ok(hits=3)
        backend = resilient(script(answer), max_hits=3)
        assert await backend.search(query()) is answer

    @pytest.mark.parametrize("own_cap", [True, False])
    async def test_a_backend_capping_its_own_hits_is_not_counted_again(self, own_cap: bool) -> None:
        """A backend that declares it caps its own hits at max_hits (ripgrep) is trusted: its answer
        passes as it came, its hits not counted. Without that declaration they are."""
        lengths: list[int] = []

        class Hits(tuple[Hit, ...]):
            def __len__(self) -> int:
                lengths.append(1)
                return super().__len__()

        answer = BackendResult(files=(FileMatch(path="a.py", hits=Hits((Hit(line=1, text="x"),))),))
        inner = MockBackend(script(answer), "ns", max_hits=5)
        inner.caps_hits = own_cap
        backend = ResilientBackend(inner, Policy(hedge=False))
        assert await backend.search(query()) is answer
        assert bool(lengths) is not own_cap


class TestWrapper:
    async def test_the_wrapper_is_the_same_backend_to_everyone(self) -> None:
        """Name, kind, modes, settings, caps, children and tree are the inner backend's; closing closes it."""
        inner = MockBackend(script(ok()), "x", modes=frozenset({"exact"}))
        backend = wrap(inner)
        assert isinstance(backend, ResilientBackend)
        assert (backend.name, backend.kind, backend.modes, backend.settings) == ("x", "mock", {"exact"}, inner.settings)
        assert backend.tree() is None and backend.serves_children is False and backend.max_hits == inner.max_hits
        assert backend.health() == "ok" and backend.replicas() == 1
        await backend.aclose()
        assert inner.closed and wrap(backend) is backend

    def test_policies_are_declared_by_the_adapters(self) -> None:
        """ripgrep is local (no retries, breaker or hedges); GitHub is never hedged; zoekt has it all."""
        from gateway.registry import load_kind

        assert load_kind("ripgrep").policy is LOCAL
        assert load_kind("github").policy.hedge is False and load_kind("github").policy.max_attempts == 3
        assert load_kind("zoekt").policy.hedge and load_kind("zoekt").policy.breaker

    async def test_configured_namespaces_are_wrapped(self, tmp_path: Any) -> None:
        """A service built from config puts every backend behind the resilience layer."""
        from gateway.config import parse_config

        config = parse_config(
            {
                "namespaces": [
                    {"name": "z", "backend": "zoekt", "urls": ["http://127.0.0.1:9", "http://127.0.0.1:10"]},
                    {"name": "r", "backend": "ripgrep", "root": str(tmp_path)},
                ]
            }
        )
        service = SearchService(config)
        try:
            zoekt, rg = service.backend("z"), service.backend("r")
            rg = getattr(rg, "inner", rg)  # a local namespace's semantic layer (the intent index) is around it
            assert isinstance(zoekt, ResilientBackend) and len(zoekt.breakers()) == 2
            assert isinstance(rg, ResilientBackend) and rg.policy is LOCAL and rg.kind == "ripgrep"
        finally:
            await service.aclose()


class TestDeadline:
    async def test_what_arrived_before_the_deadline_is_kept(self) -> None:
        """A backend returning its partial answer at the deadline has it kept, marked timeout."""

        async def partial(q: SearchQuery) -> BackendResult:
            await asyncio.sleep(q.remaining())
            return BackendResult(files=ok("early.py").files, status="timeout", reason="stopped at the deadline")

        outcome = (await fan_out([Route("p", MockBackend(partial, "p"))], query(0.05)))[0]
        assert outcome.status == "timeout" and outcome.result is not None
        assert outcome.result.files[0].path == "early.py"

    async def test_a_backend_ignoring_cancellation_is_not_waited_for(self) -> None:
        """A backend that swallows its cancellation is reported timeout and left behind; the answer comes."""
        release = asyncio.Event()

        async def stubborn(q: SearchQuery) -> BackendResult:
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue
            return ok()

        good = MockBackend(script(ok("good.py")), "good")
        outcomes = await fan_out([Route("stuck", MockBackend(stubborn, "stuck")), Route("good", good)], query(0.05))
        still_running = [t for t in leftover_tasks() if t.get_name() == "fanout:stuck"]
        release.set()
        await asyncio.gather(*still_running)
        assert [o.status for o in outcomes] == ["timeout", "ok"] and still_running
        assert outcomes[0].error.startswith("no answer within")
