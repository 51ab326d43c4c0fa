"""Shared fixtures. Adapter test modules keep their own fake servers beside them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from tests.redis_server import REDIS_SERVER, RedisServer, need_redis, redis_missing

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "backends"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The recorded backend payloads in ../shared/fixtures/backends."""
    if not FIXTURES.is_dir():  # pragma: no cover - CI lays shared/ beside the clone
        pytest.skip("../shared/fixtures/backends is not present")
    return FIXTURES


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults: a level set by one test (the CLI's) never hides another's events."""
    yield
    structlog.reset_defaults()


def pytest_report_header(config: pytest.Config) -> str:
    """Say at the top of every run whether the Redis tests run (a visible line when they cannot)."""
    missing = redis_missing()
    if missing is None:
        return f"redis-server: {REDIS_SERVER}"
    return f"redis-server: MISSING - {missing}" + (" (CI=true: they fail)" if os.environ.get("CI") == "true" else "")


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own on a free port (stopped after it)."""
    need_redis()
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()
