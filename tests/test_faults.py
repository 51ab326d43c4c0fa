"""Fault injection: one namespace's backend misbehaves for real over 127.0.0.1; it costs only that namespace.

Every test runs a service of one faulty and three healthy Zoekt namespaces (the healthy
ones serve the recorded fixture) through the resilience layer, then asserts the faulty
namespace's status and reason, that the healthy namespaces' results are complete, and
that no task, socket or child process is left once everything is closed. (A local
backend's faults at the deadline: tests/test_conformance.py, TestLocal.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from adapters._http import CONNECT_TIMEOUT, READ_TIMEOUT
from adapters.zoekt.backend import ZoektBackend, ZoektSettings
from gateway.models import SearchQuery
from gateway.query.request import parse_request
from gateway.resilience.wrapper import Policy, ResilientBackend
from gateway.service import SearchService
from tests.fakeservers import (
    FakeServer,
    Recorded,
    Reply,
    garbage,
    hang,
    huge_body,
    json_reply,
    rate_limited,
    reset_mid_body,
    server_error,
    slow_drip,
    wrong_type,
)
from tests.helpers import FakeClock, FakeSleep, no_leaks

HEALTHY = ("good-a", "good-b", "good-c")  # the same fixture each: asked with dedup off, each shows its own
EXPECTED = {  # what each healthy namespace holds in the zoekt fixture
    "github.com/acme/widget-service/src/widgets/registry.py",
    "github.com/acme/widget-service/tests/test_registry.py",
}


@pytest.fixture
def payload(fixtures_dir: Path) -> Any:
    return json.loads((fixtures_dir / "zoekt_search_response.json").read_text())


async def run(
    *replies: Reply,
    payload: Any,
    timeout_ms: int = 1000,
    policy: Policy | None = None,
    bad_url: str = "",
    **settings: Any,
) -> tuple[dict[str, Any], list[Recorded]]:
    """The answer of a service whose namespace `bad` plays ``replies``, and what `bad` received."""
    async with no_leaks(), FakeServer(*replies) as bad, FakeServer(json_reply(payload)) as good:
        urls = [bad_url or bad.url]
        backends = [ResilientBackend(ZoektBackend("bad", ZoektSettings(urls=urls, **settings)), policy)]
        backends += [ResilientBackend(ZoektBackend(n, ZoektSettings(urls=[good.url])), policy) for n in HEALTHY]
        service = SearchService.with_backends(backends)
        try:
            answer = await service.search(
                parse_request({"query": "register_widget", "timeout_ms": timeout_ms, "files": 200, "dedup": False})
            )
        finally:
            await service.aclose()
    return answer, bad.requests


def status_of(answer: dict[str, Any], name: str = "bad") -> dict[str, Any]:
    return next(s for s in answer["namespaces"] if s["name"] == name)


def assert_others_complete(answer: dict[str, Any]) -> None:
    """Every healthy namespace answered ok with all of its files, whole."""
    for name in HEALTHY:
        status = status_of(answer, name)
        assert (status["status"], status["files"]) == ("ok", len(EXPECTED))
        shown = {f["file_path"] for f in answer["files"] if f["namespace"] == name}
        assert shown == EXPECTED
    assert all(f["hit_count"] == len(f["hits"]) for f in answer["files"])


class TestFaults:
    async def test_black_hole(self, payload: Any) -> None:
        """A backend that never answers times out alone, within the deadline."""
        answer, requests = await run(hang(), payload=payload, timeout_ms=300)
        assert status_of(answer)["status"] == "timeout" and len(requests) == 1
        assert_others_complete(answer)

    async def test_slow_drip(self, payload: Any) -> None:
        """A body dripping one byte at a time is cut at the deadline: timeout, not retried."""
        answer, requests = await run(
            slow_drip(json.dumps(payload).encode(), every_s=0.01), payload=payload, timeout_ms=300
        )
        assert status_of(answer)["status"] == "timeout" and len(requests) == 1
        assert_others_complete(answer)

    async def test_reset_mid_body(self, payload: Any) -> None:
        """A connection dropped mid-body is retried (transient), then reported as an error."""
        answer, requests = await run(reset_mid_body(), payload=payload, policy=Policy(sleep=FakeSleep()))
        status = status_of(answer)
        assert (status["status"], status["error"]) == ("error", "connection reset mid-body")
        assert len(requests) == 3
        assert_others_complete(answer)

    async def test_garbage(self, payload: Any) -> None:
        """An unparseable body is an error, never retried."""
        answer, requests = await run(garbage(), payload=payload)
        status = status_of(answer)
        assert (status["status"], status["error"]) == ("error", "invalid JSON in response") and len(requests) == 1
        assert_others_complete(answer)

    async def test_server_error(self, payload: Any) -> None:
        """A 500 is an error, never retried."""
        answer, requests = await run(server_error(500), payload=payload)
        status = status_of(answer)
        assert (status["status"], status["error"]) == ("error", "HTTP 500") and len(requests) == 1
        assert_others_complete(answer)

    async def test_503_then_recovery(self, payload: Any) -> None:
        """A 503 then a good answer: the retry recovers the namespace's results."""
        sleep = FakeSleep()
        answer, requests = await run(
            server_error(503), json_reply(payload), payload=payload, policy=Policy(sleep=sleep)
        )
        assert status_of(answer)["status"] == "ok" and status_of(answer)["files"] == len(EXPECTED)
        assert len(requests) == 2 and len(sleep.slept) == 1
        assert {f["file_path"] for f in answer["files"] if f["namespace"] == "bad"} == EXPECTED
        assert_others_complete(answer)

    async def test_429_with_retry_after_that_fits(self, payload: Any) -> None:
        """A 429 with a Retry-After inside the deadline is waited out and retried."""
        clock = FakeClock()
        answer, requests = await run(
            rate_limited("1"),
            json_reply(payload),
            payload=payload,
            timeout_ms=5000,
            policy=Policy(clock=clock, sleep=clock.sleep),
        )
        assert status_of(answer)["status"] == "ok" and len(requests) == 2 and clock.slept[0] >= 1
        assert_others_complete(answer)

    async def test_429_with_retry_after_past_the_deadline(self, payload: Any) -> None:
        """A 429 asking for longer than the deadline: unavailable at once, with a next action for later."""
        sleep = FakeSleep()
        answer, requests = await run(rate_limited("7"), payload=payload, timeout_ms=2000, policy=Policy(sleep=sleep))
        status = status_of(answer)
        assert (status["status"], status["error"]) == ("unavailable", "HTTP 429: rate limited")
        assert len(requests) == 1 and sleep.slept == []
        action = next(a for a in answer["next"] if a["args"].get("namespaces") == ["bad"])
        assert "after 7 s" in action["reason"]
        assert_others_complete(answer)

    async def test_huge_body(self, payload: Any) -> None:
        """A body over the size cap is read no further: capped, never held whole."""
        answer, requests = await run(huge_body(8 << 20), payload=payload, max_bytes=1 << 20)
        status = status_of(answer)
        assert status["status"] == "capped" and "1048576-byte cap" in status["error"] and len(requests) == 1
        assert_others_complete(answer)

    async def test_huge_declared_body(self, payload: Any) -> None:
        """A Content-Length over the cap is refused before reading."""
        answer, _ = await run(huge_body(8 << 20, declare_length=True), payload=payload, max_bytes=1 << 20)
        assert status_of(answer)["status"] == "capped" and "8388608 bytes" in status_of(answer)["error"]
        assert_others_complete(answer)

    async def test_wrong_content_type(self, payload: Any) -> None:
        """An HTML page where JSON was expected is an error naming the type."""
        answer, requests = await run(wrong_type(), payload=payload)
        status = status_of(answer)
        assert (status["status"], status["error"]) == ("error", "wrong content type 'text/html'")
        assert len(requests) == 1
        assert_others_complete(answer)

    async def test_refused_connection(self, payload: Any) -> None:
        """A port nobody listens on is unavailable after its retries."""
        async with FakeServer() as gone:
            url = gone.url
        answer, _ = await run(payload=payload, policy=Policy(sleep=FakeSleep()), bad_url=url)
        status = status_of(answer)
        assert status["status"] == "unavailable" and status["error"].startswith("cannot connect")
        assert_others_complete(answer)

    async def test_all_black_holed(self, payload: Any) -> None:
        """When every namespace hangs, each is timeout, the answer still comes, and nothing leaks."""
        async with no_leaks(), FakeServer(hang()) as bad:
            backends = [ResilientBackend(ZoektBackend(f"h{i}", ZoektSettings(urls=[bad.url]))) for i in range(4)]
            service = SearchService.with_backends(backends)
            try:
                answer = await service.search(parse_request({"query": "x", "timeout_ms": 200}))
            finally:
                await service.aclose()
        assert [s["status"] for s in answer["namespaces"]] == ["timeout"] * 4
        assert answer["note"].startswith("every namespace failed")


class TestReplicaFaults:
    async def test_a_dead_replica_is_hedged_around(self, payload: Any) -> None:
        """With one replica black-holed, every search is answered by the other (hedged or failed over)."""
        async with no_leaks():
            async with FakeServer(hang()) as dead, FakeServer(json_reply(payload)) as live:
                backend = ResilientBackend(
                    ZoektBackend("z", ZoektSettings(urls=[dead.url, live.url])), Policy(hedge_floor_s=0.01)
                )
                try:
                    results = [
                        await backend.search(SearchQuery(text="register_widget", deadline=time.monotonic() + 2))
                        for _ in range(4)
                    ]
                finally:
                    await backend.aclose()
            assert dead.cancelled.is_set()
        assert all({f.path for f in r.files} == EXPECTED for r in results)
        assert backend.stats.hedges_won >= 1 and backend.breakers()[0].failures == 0


class TestSession:
    async def test_one_session_with_explicit_timeouts_for_every_replica(self, payload: Any) -> None:
        """Both replicas are asked through one ClientSession whose timeouts are ours, not aiohttp's 300 s."""
        async with no_leaks(), FakeServer(json_reply(payload)) as one, FakeServer(json_reply(payload)) as two:
            backend = ZoektBackend("z", ZoektSettings(urls=[one.url, two.url]))
            try:
                await backend.search_replica(SearchQuery(text="x"), 0)
                session = backend.session
                await backend.search_replica(SearchQuery(text="x"), 1)
                assert backend.session is session
                timeout = session.timeout
            finally:
                await backend.aclose()
        assert (len(one.requests), len(two.requests)) == (1, 1)
        assert timeout.total is None and timeout.connect == CONNECT_TIMEOUT and timeout.sock_read == READ_TIMEOUT
