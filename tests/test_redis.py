"""The cache in a real ``redis-server`` (``[cache] url``): shared by replicas, never an error when it fails.

Each test starts its own server on a free port (the ``redis_server`` fixture) and stops
it. Without the Debian package they skip, saying so; under ``CI=true`` they fail.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from gateway.cache.redis_store import RedisStore
from gateway.cache.results import CURSOR_UNREADABLE, open_cache
from gateway.config import CacheConfig
from gateway.errors import ConfigError
from gateway.service import SearchService
from gateway.testing import MockBackend
from tests.corpus import make_corpus
from tests.redis_server import RedisServer, need_redis
from tests.test_answer_cache import Events, counting, timeless
from tests.test_cursors import Clock, calls, capping, keys, next_page, page_all
from tests.test_ops import Served

REQUEST = {"query": "needle", "files": 7, "hit_budget": 5000}


def through(server: RedisServer, backends: list[MockBackend], **cache: Any) -> SearchService:
    return SearchService.with_backends(backends, cache={"url": server.url, **cache})


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Served]]]:
    """``fedsearch serve`` subprocesses, killed after the test."""
    started: list[Served] = []

    async def start(*args: str) -> Served:
        started.append(await Served.start(*args))
        return started[-1]

    yield start
    for served in started:
        await served.close()


@pytest.fixture
async def closing() -> AsyncIterator[list[SearchService]]:
    services: list[SearchService] = []
    yield services
    for service in services:
        await service.aclose()


def clocked_redis(service: SearchService, server: RedisServer, retry_s: float = 5.0) -> Clock:
    """Give the service a Redis store whose retry window runs on a clock the test moves."""
    clock = Clock()
    service.cache.store = RedisStore(server.url, timeout_s=0.5, retry_s=retry_s, clock=clock)
    return clock


class TestRedisStore:
    async def test_records_live_in_redis_with_a_ttl_redis_enforces(self, redis_server: RedisServer) -> None:
        """A record is a hash under its key, with a PTTL set by Redis."""
        store = RedisStore(redis_server.url, timeout_s=1.0)
        try:
            assert await store.put("fedsearch:v1:s:abc", {"h": b"head", "0": b"zero"}, 30)
            assert await store.get("fedsearch:v1:s:abc", ["h", "0", "1"]) == [b"head", b"zero", None]
            assert await store.get("fedsearch:v1:s:missing", ["h"]) is None
            ttl = int(redis_server.command("PTTL", "fedsearch:v1:s:abc").strip().lstrip(b":"))
            assert 0 < ttl <= 30_000
        finally:
            await store.aclose()

    async def test_a_rewrite_replaces_the_whole_record(self, redis_server: RedisServer) -> None:
        """Writing a key again leaves none of the old record's fields."""
        store = RedisStore(redis_server.url, timeout_s=1.0)
        try:
            await store.put("k", {"a": b"1", "b": b"2"}, 30)
            await store.put("k", {"a": b"3"}, 30)
            assert await store.get("k", ["a", "b"]) == [b"3", None]
        finally:
            await store.aclose()


class TestPassword:
    async def test_the_password_comes_from_the_environment_and_never_reaches_a_log(self, tmp_path: Path) -> None:
        """password_env's value opens a Redis that requires it; a wrong one is a logged miss without it."""
        need_redis()
        password = "s3cret-redis-passw0rd"
        server = RedisServer(None, "--requirepass", password).start()
        try:
            right = open_cache(CacheConfig(url=server.url, password_env="FS_REDIS_PW"), env={"FS_REDIS_PW": password})
            wrong = open_cache(
                CacheConfig(url=server.url, password_env="FS_REDIS_PW"), env={"FS_REDIS_PW": "nope-nope"}
            )
            assert right.store is not None and wrong.store is not None
            try:
                assert await right.store.put("k", {"a": b"1"}, 30)
                with capture_logs() as logs:
                    assert await wrong.store.get("k", ["a"]) is None
                assert [e["event"] for e in logs] == ["cache_unavailable"]
                assert password not in str(logs) and "nope-nope" not in str(logs)
            finally:
                await right.aclose()
                await wrong.aclose()
        finally:
            server.close()

    def test_a_missing_password_variable_is_a_config_error(self) -> None:
        """password_env naming an unset variable is an error naming the key, at start."""
        with pytest.raises(ConfigError) as err:
            open_cache(CacheConfig(url="redis://127.0.0.1:1/0", password_env="FS_UNSET"), env={})
        assert err.value.key == "cache.password_env"


class TestSharedByReplicas:
    async def test_keys_are_prefixed_and_values_compact(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """What a search stores sits under the prefix, zlib-compressed msgpack."""
        service = through(redis_server, [capping("a", 200, random.Random(1), 200, 200)], prefix="acme-search")
        closing.append(service)
        await service.search_json(REQUEST)
        stored = redis_server.command("KEYS", "*").decode()
        names = [line for line in stored.split("\r\n") if ":" in line and not line.startswith(("*", "$"))]
        assert names and all(n.startswith("acme-search:v1:") for n in names)
        assert {n.split(":")[2] for n in names} == {"a", "s"}  # one answer, one snapshot
        snapshot = next(n for n in names if n.split(":")[2] == "s")
        head = redis_server.command("HGET", snapshot, "0")
        assert b"\r\nx\x01" in head  # a zlib stream (level 1)

    async def test_a_cursor_made_by_one_replica_is_served_by_another(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """Page 1 from replica A, pages 2.. from replica B: B never fans out, every file once."""
        rng = random.Random(2)
        a_backends = [capping("a", 50, rng, 10, 40), capping("b", 40, rng, 10, 30)]
        b_backends = [capping("a", 50, rng, 10, 40), capping("b", 40, rng, 10, 30)]
        replica_a, replica_b = through(redis_server, a_backends), through(redis_server, b_backends)
        closing.extend([replica_a, replica_b])
        first = await replica_a.search_json(REQUEST)
        follow = next_page(first)
        assert follow is not None
        rest = await page_all(replica_b, follow)
        assert calls(*b_backends) == 0
        seen = keys(first) + [k for page in rest for k in keys(page)]
        assert len(seen) == len(set(seen)) == first["file_count"]
        again = await replica_a.search_json(follow)
        assert timeless(again) == timeless(rest[0])

    async def test_a_cached_answer_is_shared_by_replicas(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """The same request on another replica within answer_ttl_s is answered from Redis."""
        one, two = counting("a"), counting("a")
        replica_a, replica_b = through(redis_server, [one]), through(redis_server, [two])
        closing.extend([replica_a, replica_b])
        first = await replica_a.search_json({"query": "needle"})
        second = await replica_b.search_json({"query": "needle"})
        assert (len(one.calls), len(two.calls)) == (1, 0)
        assert timeless(first) == timeless(second)


class TestRedisFailing:
    async def test_redis_down_answers_from_a_fresh_fan_out_logs_once_and_recovers(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """Stopped Redis: answers go on (no cursor, no cache), one log line; restarted: the cache is back."""
        backend = capping("a", 30, random.Random(3), 30, 30)
        service = through(redis_server, [backend])
        closing.append(service)
        clock = clocked_redis(service, redis_server)
        events = Events(service)
        await service.search_json(REQUEST)
        redis_server.stop()
        with capture_logs() as logs:
            answers = [await service.search_json({**REQUEST, "files": n}) for n in (3, 3, 4)]
        assert len(backend.calls) == 4
        assert all(a["file_count"] == 30 and len(a["files"]) for a in answers)
        follow = next_page(answers[0])
        assert follow is not None and follow["cursor"] is None
        assert [e["event"] for e in logs if e["event"].startswith("cache_")] == ["cache_unavailable"]
        redis_server.start()
        clock.now += 5
        with capture_logs() as logs:
            again = await service.search_json({**REQUEST, "files": 5})
        assert [e["event"] for e in logs if e["event"].startswith("cache_")] == ["cache_recovered"]
        follow = next_page(again)
        assert follow is not None and follow["cursor"]
        await service.search_json({**REQUEST, "files": 5})
        assert len(backend.calls) == 5 and events.count("answer_hit") == 1

    async def test_a_cursor_while_redis_is_down_runs_again_saying_why(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """A cursor that cannot be read because Redis is down: a fresh answer whose note says so."""
        backend = capping("a", 30, random.Random(4), 30, 30)
        service = through(redis_server, [backend])
        closing.append(service)
        follow = next_page(await service.search_json(REQUEST))
        assert follow is not None
        redis_server.stop()
        answer = await service.search_json(follow)
        assert answer["note"].startswith(CURSOR_UNREADABLE) and len(answer["files"]) == 7

    async def test_a_hung_redis_costs_at_most_its_timeout(
        self, redis_server: RedisServer, closing: list[SearchService]
    ) -> None:
        """A frozen Redis (SIGSTOP) times out: the answer comes from a fresh fan-out, then Redis is left alone."""
        backend = counting("a")
        service = through(redis_server, [backend], timeout_ms=100)
        closing.append(service)
        await service.search_json({"query": "needle"})
        redis_server.pause()
        try:
            with capture_logs() as logs:
                first = await service.search_json({"query": "needle", "files": 2})
                second = await service.search_json({"query": "needle", "files": 1})
        finally:
            redis_server.resume()
        assert first["file_count"] == second["file_count"] == 3
        failures = [e for e in logs if e["event"] == "cache_unavailable"]
        assert len(failures) == 1 and failures[0]["error"] == "TimeoutError"
        assert len(backend.calls) == 3


CONFIG = """
[[namespaces]]
name = "big"
backend = "ripgrep"
root = "{root}"
max_files = 40

[cache]
url = "{url}"

# Pages are resolved to declarations by each process's index as far as it is built: off here, so
# two processes' pages can only differ by where they came from.
[index]
enabled = false
"""


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as response:
        return await (response.json() if response.content_type == "application/json" else response.text())


async def test_two_gateway_processes_share_one_redis(
    redis_server: RedisServer, tmp_path: Path, serve: Callable[..., Awaitable[Served]]
) -> None:
    """Page 1 from one `fedsearch serve`, page 2 from another: the page the first would give, with no fan-out."""
    files = {f"src/mod_{n:03}.py": f"needle = {n}\n" for n in range(120)}
    root = make_corpus(tmp_path / "src", {"big": files})
    config = tmp_path / "fedsearch.toml"
    config.write_text(CONFIG.format(root=root / "big", url=redis_server.url), encoding="utf-8")
    one, two = await serve("--config", str(config)), await serve("--config", str(config))
    request = {"query": "needle", "files": 10}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{one.url}/v1/search", json=request) as response:
            first = await response.json()
        assert first["namespaces"][0]["status"] == "capped"
        follow = next_page(first)
        assert follow is not None and follow["cursor"]
        pages = []
        for server in (two, one):
            async with session.post(f"{server.url}/v1/search", json=follow) as response:
                pages.append(await response.json())
        metrics = await get_json(session, f"{two.url}/metrics")
    from_two, from_one = pages
    assert timeless(from_two) == timeless(from_one)
    assert from_two["file_count"] == first["file_count"]
    assert set(keys(first)).isdisjoint(keys(from_two))
    assert 'fedsearch_cache_events_total{event="snapshot_served"} 1.0' in metrics
    assert "fedsearch_namespace_outcomes_total{" not in metrics  # the second process never searched


def test_the_redis_server_fixture_stops_what_it_starts(redis_server: RedisServer) -> None:
    """The fixture's server answers PING, and stop() really stops it (restart works on the same port)."""
    assert redis_server.ping()
    redis_server.stop()
    assert not redis_server.ping()
    redis_server.start()
    assert redis_server.ping()
