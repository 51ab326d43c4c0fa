"""The event loop a serving process runs on: uvloop's when it is installed, else asyncio's.

uvloop is not a dependency. Measured A B over HTTP in bench/local.py's setting, the
same code on both loops (rg is started by Popen either way, adapters._child): the
median ratio to rg was 0.01-0.03 lower on uvloop's loop in each of three runs, and
bench/overhead.py was no different.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run_serving"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when uvloop imports, else None (asyncio's own loop)."""
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_serving(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` names."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
