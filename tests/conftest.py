"""Shared fixtures. Adapter test modules keep their own fake servers beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "backends"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The recorded backend payloads in ../shared/fixtures/backends."""
    if not FIXTURES.is_dir():  # pragma: no cover - CI lays shared/ beside the clone
        pytest.skip("../shared/fixtures/backends is not present")
    return FIXTURES
