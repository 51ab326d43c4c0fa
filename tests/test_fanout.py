"""Fan-out: one deadline, each namespace its own fate, bounded concurrency."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from gateway.backend import call_slot
from gateway.errors import BackendError, InvalidRequest, RateLimited
from gateway.fanout import Route, fan_out
from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
from gateway.query.request import parse_request
from gateway.service import SearchService
from gateway.testing import MockBackend


async def _ok(query: SearchQuery) -> BackendResult:
    return BackendResult(files=(FileMatch(path="a.py", hits=(Hit(line=1, text=query.text),)),))


async def _hang(query: SearchQuery) -> BackendResult:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _boom(query: SearchQuery) -> BackendResult:
    raise ZeroDivisionError("bug")


async def _refused(query: SearchQuery) -> BackendResult:
    raise RateLimited("HTTP 429: rate limited", retry_after=7)


def _query(seconds: float = 2.0, mode: str = "exact") -> SearchQuery:
    return SearchQuery(text="foo", mode=mode, deadline=time.monotonic() + seconds)  # type: ignore[arg-type]


class TestIsolation:
    async def test_failures_cost_only_their_namespace(self) -> None:
        """A hanging, crashing and rate-limited backend each get their status; the healthy one answers."""
        routes = [
            Route("ok", MockBackend(_ok, "ok")),
            Route("hang", MockBackend(_hang, "hang")),
            Route("boom", MockBackend(_boom, "boom")),
            Route("limited", MockBackend(_refused, "limited")),
        ]
        outcomes = await fan_out(routes, _query(0.3))
        by = {o.namespace: o for o in outcomes}
        assert by["ok"].status == "ok" and by["ok"].result is not None
        assert by["hang"].status == "timeout" and re.fullmatch(r"no answer within (299|300) ms", by["hang"].error)
        assert by["boom"].status == "error" and "ZeroDivisionError" in by["boom"].error
        assert by["limited"].status == "unavailable" and by["limited"].retry_after == 7
        assert [o.namespace for o in outcomes] == ["ok", "hang", "boom", "limited"]

    async def test_namespace_timeout_caps_inside_the_request(self) -> None:
        """A namespace's own timeout_ms cuts it short inside a longer request deadline."""
        started = time.monotonic()
        outcomes = await fan_out([Route("hang", MockBackend(_hang, "hang"), timeout_ms=100)], _query(30))
        assert outcomes[0].status == "timeout"
        assert time.monotonic() - started < 5

    async def test_unsupported_mode_is_not_sent(self) -> None:
        """A backend that cannot do the mode is reported unsupported without being called."""
        backend = MockBackend(_ok, "x", modes=frozenset({"exact"}))
        outcomes = await fan_out([Route("x", backend)], _query(mode="semantic"))
        assert outcomes[0].status == "unsupported" and backend.calls == []

    async def test_backend_error_status(self) -> None:
        """A BackendError maps to its status with its reason."""

        async def bad(query: SearchQuery) -> BackendResult:
            raise BackendError("HTTP 500")

        outcome = (await fan_out([Route("x", MockBackend(bad, "x"))], _query()))[0]
        assert (outcome.status, outcome.error) == ("error", "HTTP 500")


class TestScale:
    async def test_a_thousand_namespaces_with_bounded_concurrency(self) -> None:
        """1,000 namespaces all answer while at most `concurrency` run at once."""
        running = peak = 0

        async def counted(query: SearchQuery) -> BackendResult:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)
            running -= 1
            return await _ok(query)

        routes = [Route(f"ns{i}", MockBackend(counted, f"ns{i}")) for i in range(1000)]
        outcomes = await fan_out(routes, _query(10), concurrency=8)
        assert all(o.status == "ok" for o in outcomes)
        assert 1 <= peak <= 8

    async def test_namespaces_that_share_calls_take_a_place_per_call(self) -> None:
        """Namespaces whose backend shares its calls all start past a gate of one; each shared
        call then holds one place (at most one at a time here)."""
        n = 12
        joined = in_call = peak = 0
        everyone = asyncio.Event()

        async def sharing(query: SearchQuery) -> BackendResult:
            nonlocal joined, in_call, peak
            joined += 1
            if joined == n:
                everyone.set()
            await everyone.wait()  # a place per namespace would let only the first get here
            async with call_slot():
                in_call += 1
                peak = max(peak, in_call)
                await asyncio.sleep(0)
                in_call -= 1
            return await _ok(query)

        backends = [MockBackend(sharing, f"s{i}") for i in range(n)]
        for backend in backends:
            backend.shares_calls = True
        outcomes = await fan_out([Route(b.name, b) for b in backends], _query(5), concurrency=1)
        assert [o.status for o in outcomes] == ["ok"] * n
        assert peak == 1

    async def test_cancelling_the_request_cancels_every_backend(self) -> None:
        """Cancelling a fan-out leaves no backend task behind."""
        started = asyncio.Event()

        async def hang(query: SearchQuery) -> BackendResult:
            started.set()
            return await _hang(query)

        before = len(asyncio.all_tasks())
        task = asyncio.create_task(fan_out([Route(f"h{i}", MockBackend(hang, f"h{i}")) for i in range(5)], _query(30)))
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) == before


class TestService:
    async def test_answer_does_not_depend_on_which_backend_answers_first(self) -> None:
        """Backends finishing in different orders give the same answer (timing aside)."""

        def delayed(n: int, name: str) -> MockBackend:
            async def handler(query: SearchQuery) -> BackendResult:
                for _ in range(n):
                    await asyncio.sleep(0)
                return BackendResult(files=(FileMatch(path=f"{name}.py", hits=(Hit(line=1, text="foo"),)),))

            return MockBackend(handler, name)

        answers = []
        for delays in ((0, 5, 10), (10, 5, 0), (5, 0, 10)):
            service = SearchService.with_backends([delayed(d, n) for d, n in zip(delays, "abc", strict=True)])
            answer = await service.search(parse_request({"query": "foo"}))
            answer.pop("took_ms")
            for status in answer["namespaces"]:
                status.pop("took_ms")
            answers.append(answer)
        assert answers[0] == answers[1] == answers[2]

    async def test_unknown_namespace_pattern_is_refused_before_fan_out(self) -> None:
        """A namespace pattern matching nothing is an error naming `namespaces`; no backend is called."""
        backend = MockBackend(_ok, "a")
        service = SearchService.with_backends([backend])
        with pytest.raises(InvalidRequest) as info:
            await service.search(parse_request({"query": "x", "namespaces": ["nope*"]}))
        assert info.value.field == "namespaces"
        assert backend.calls == []

    async def test_access_hides_namespaces(self) -> None:
        """A namespace the caller may not see is neither searched nor reported."""
        a, b = MockBackend(_ok, "a"), MockBackend(_ok, "secret")
        service = SearchService.with_backends([a, b])
        answer = await service.search(parse_request({"query": "x"}), access=lambda n: n != "secret")
        assert "secret" not in str(answer) and b.calls == []

    async def test_close_closes_every_backend(self) -> None:
        """Closing the service closes each backend."""
        a, b = MockBackend(_ok, "a"), MockBackend(_ok, "b")
        service = SearchService.with_backends([a, b])
        await service.aclose()
        assert a.closed and b.closed


class TestDefaults:
    async def test_config_default_deadline_applies_when_the_request_names_none(self) -> None:
        """[defaults] timeout_ms is the deadline of a request that gives none; an explicit one wins."""
        backend = MockBackend(_ok, "a")
        service = SearchService.with_backends([backend], defaults={"timeout_ms": 1500})
        answer = await service.search(parse_request({"query": "x", "files": 1}))
        assert backend.calls[0].deadline - time.monotonic() < 1.6
        explicit = await service.search(parse_request({"query": "x", "timeout_ms": 9000}))
        assert explicit["namespaces"][0]["status"] == "ok"
        assert backend.calls[1].deadline - time.monotonic() > 5
        assert answer["files"]
