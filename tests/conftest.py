"""Shared fixtures. Adapter test modules keep their own fake servers beside them."""

from __future__ import annotations

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


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults: a level set by one test (the CLI's) never hides another's events."""
    yield
    structlog.reset_defaults()
