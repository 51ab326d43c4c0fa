"""Helpers shared by the test modules (test modules never import one another).

* ports: :func:`free_port`, :func:`wait_for_port`;
* time: :class:`FakeClock` (a policy's clock and sleep), :class:`FakeSleep`, :class:`VirtualLoop`
  (an event loop whose clock jumps to its next timer: minutes of sleeps run in a moment);
* processes: :func:`rg_children`, :func:`child_pids`, :func:`no_leaks`, :func:`fake_program`
  (an executable standing in for rg), :func:`git_repo`;
* the command runner: :func:`fedsearch_command`, :func:`subprocess_env`, :func:`held_client`
  (an MCP client held in a task of its own).

Fake HTTP backends are in :mod:`tests.fakeservers`, corpora in :mod:`tests.corpus`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.fakeservers import leftover_tasks, open_sockets

__all__ = [
    "FakeClock",
    "FakeSleep",
    "VirtualLoop",
    "child_pids",
    "fake_program",
    "fedsearch_command",
    "free_port",
    "git_repo",
    "held_client",
    "no_leaks",
    "rg_children",
    "subprocess_env",
    "wait_for_port",
]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_for_port(proc: asyncio.subprocess.Process, port: int, seconds: float = 30.0) -> None:
    """Return once 127.0.0.1:port accepts connections; fail if the process exits first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        if proc.returncode is not None:
            pytest.fail(f"the server exited with {proc.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
    pytest.fail(f"nothing listened on port {port}")


class FakeClock:
    """A monotonic clock that moves only when told to (or when the policy sleeps on it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class _JumpingSelector(selectors.DefaultSelector):
    """Polls without blocking; when nothing is ready, its loop's clock jumps to the next timer."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout:
            self._loop.now += timeout
        return ready


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: ``time()`` moves only when every task waits for a timer, and
    then straight to the earliest one. For simulations with no I/O (sleeps stand for the work)."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.now


class FakeSleep:
    """A policy's backoff sleep, recorded and skipped."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        await asyncio.sleep(0)


def rg_children(name: str = "rg") -> set[int]:
    """Pids of ``rg`` (or ``name``) processes, running or zombie, whose parent is this process."""
    if not os.path.isdir("/proc"):  # pragma: no cover - Linux only
        pytest.skip("needs /proc")
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == os.getpid() and comm == name:
            found.add(int(entry))
    return found


def child_pids() -> set[int]:
    """Child processes of this process (zombies included: a reaped child is gone)."""
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as handle:
            pids.update(int(pid) for pid in handle.read().split())
    return pids


@contextlib.asynccontextmanager
async def no_leaks() -> AsyncIterator[None]:
    """Fail if tasks, sockets or child processes outlive the block (given up to 2 s to wind down)."""
    sockets, children = open_sockets(), child_pids()
    yield
    for _ in range(200):
        await asyncio.sleep(0.01)
        if not leftover_tasks() and open_sockets() == sockets and child_pids() == children:
            break
    assert leftover_tasks() == []
    assert open_sockets() == sockets
    assert child_pids() == children


def fake_program(path: Path, body: str) -> str:
    """An executable shell script at ``path`` (standing in for rg: it ignores its arguments)."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def git_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """A ``git init``ed folder holding ``files`` (relative path -> text or bytes)."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def fedsearch_command() -> list[str]:
    """The installed ``fedsearch`` entry point beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("fedsearch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gateway.cli"]


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment without a FEDSEARCH_CONFIG, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "FEDSEARCH_CONFIG"}
    env.update(extra)
    return env


async def held_client(target: Any, **options: Any) -> AsyncIterator[Client]:
    """A connected MCP Client, entered and exited in one task of its own.

    The SDK client holds anyio cancel scopes, which must be left in the task that
    entered them; pytest-asyncio sets a fixture up and tears it down in different tasks.
    """
    connected: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with Client(target, raise_exceptions=True, **options) as c:
            connected.set_result(c)
            await stop.wait()

    task = asyncio.create_task(hold())
    pending: list[asyncio.Future[Any]] = [task, connected]
    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    if not connected.done():
        task.result()  # raises what failed the connection
    try:
        yield connected.result()
    finally:
        stop.set()
        await task


async def mcp_over(root: Path) -> AsyncIterator[Client]:
    """A connected MCP Client of a server over the checkouts under ``root`` (discovery); its service
    closed after."""
    from gateway.config import config_from_env
    from gateway.mcp.tools import build_server
    from gateway.service import SearchService

    service = SearchService(config_from_env(None, str(root), env={}))
    try:
        async for c in held_client(build_server(service)):
            yield c
    finally:
        await service.aclose()
