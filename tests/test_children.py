"""Children watched by pidfd while a serving loop runs, and the previous watcher back after."""

from __future__ import annotations

import asyncio
import os
import sys
import warnings

import pytest

from gateway.children import pidfd_children, pidfds_work


def watcher() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_child_watcher()


@pytest.mark.skipif(sys.version_info >= (3, 12) or not pidfds_work(), reason="pidfds are asyncio's default here")
async def test_children_are_watched_by_pidfd_then_as_before() -> None:
    """A child's exit status arrives through a pidfd; the previous watcher is restored after."""
    before = watcher()
    with pidfd_children() as changed:
        assert changed
        assert isinstance(watcher(), asyncio.PidfdChildWatcher)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(3)")
        assert await proc.wait() == 3
    assert watcher() is before
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    assert await proc.wait() == 0  # the loop's usual watcher still works


async def test_nothing_changes_where_pidfds_are_the_default_or_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pidfds the context changes nothing."""
    monkeypatch.setattr("gateway.children.pidfds_work", lambda: False)
    before = watcher()
    with pidfd_children() as changed:
        assert not changed
        assert watcher() is before


def test_pidfds_are_tested_before_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pidfd_open, or a kernel that refuses it: pidfds do not work."""

    def refused(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused, raising=False)
    assert not pidfds_work()
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    assert not pidfds_work()
