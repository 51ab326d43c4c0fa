"""Shared fixtures. Helpers are in tests/helpers.py, fake backends in tests/fakeservers.py.

The recorded backend payloads (the real APIs' formats) live in ``tests/fixtures/backends``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.fake_github_gitlab import FakeApi
from tests.redis_server import REDIS_SERVER, RedisServer, need_redis, redis_missing

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "backends"
#: Under CI=true a skipped test fails, unless its reason is allowed there (tests/ci_skips.py).
pytest_plugins = ["tests.ci_skips"]


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The recorded backend payloads in tests/fixtures/backends (part of the repository: never skipped)."""
    return FIXTURES


@pytest.fixture
async def api(aiohttp_server: Callable[..., Any]) -> AsyncIterator[FakeApi]:
    """A fake GitHub and GitLab API (the recorded formats) on 127.0.0.1; requests it holds are let go at the end."""
    fake = FakeApi()
    server = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("")).rstrip("/")
    yield fake
    fake.release.set()


@pytest.fixture(autouse=True)
def _content_index_on_tiny_corpora(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process without a file watcher reads content indexes of any size here (the tests' corpora are tiny;
    in use, below CLI_MIN_BYTES it scans: tests/test_content_index.py tests that on its own)."""
    from gateway.index.content import paths

    monkeypatch.setattr(paths, "CLI_MIN_BYTES", 0)


@pytest.fixture(scope="session", autouse=True)
def _index_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The declaration index of every test (and of the processes tests start) lives in a temporary folder."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults: a level set by one test (the CLI's) never hides another's events."""
    yield
    structlog.reset_defaults()


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say at the top of every run whether the fixtures are there and the Redis tests run."""
    found = "found" if FIXTURES.is_dir() else "MISSING: the tests that need them skip"
    missing = redis_missing()
    redis = (
        f"redis-server: {REDIS_SERVER}"
        if missing is None
        else f"redis-server: MISSING - {missing}" + (" (CI=true: they fail)" if os.environ.get("CI") == "true" else "")
    )
    ci = "CI=true: a skip fails unless tests/ci_skips.py allows its reason" if os.environ.get("CI") == "true" else ""
    return [f"backend fixtures: {FIXTURES} ({found})", redis, *([ci] if ci else [])]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this test's own on a free port (stopped after it)."""
    need_redis()
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()
