"""Shared fixtures. Adapter test modules keep their own fake servers beside them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "backends"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The recorded backend payloads in ../shared/fixtures/backends."""
    if not FIXTURES.is_dir():  # pragma: no cover - CI lays shared/ beside the clone
        pytest.skip("../shared/fixtures/backends is not present")
    return FIXTURES


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
