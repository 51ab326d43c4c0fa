"""The serving processes' event loop: uvloop's when it is installed, else asyncio's."""

from __future__ import annotations

import asyncio
import importlib
import sys
from typing import Any

import pytest

from gateway import loop


def test_asyncio_when_uvloop_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without uvloop the factory is None and run_serving runs on asyncio's own loop."""
    real = importlib.import_module

    def without_uvloop(name: str, *args: Any) -> Any:
        if name == "uvloop":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_uvloop)
    assert loop.loop_factory() is None

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert loop.run_serving(which()).startswith("asyncio")


def test_uvloop_when_installed() -> None:
    """With uvloop importable, the serving loop is uvloop's (the value comes back)."""
    pytest.importorskip("uvloop")

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert loop.run_serving(which()).startswith("uvloop")
    assert "uvloop" in sys.modules
