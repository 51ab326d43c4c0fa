"""A child process started by Popen and watched from the loop (adapters.ripgrep.process)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from adapters.ripgrep.process import STDERR_KEEP, Child


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _run(argv: list[str], *, cwd: str | None = None, pidfd: bool = True) -> tuple[int, bytes, bytes]:
    """Run ``argv`` to its end: (return code, stdout, kept stderr)."""
    read_fd, write_fd = os.pipe()
    try:
        child = Child(argv, cwd=cwd, stdout=write_fd, pidfd=pidfd)
    finally:
        os.close(write_fd)
    try:
        code = await asyncio.wait_for(child.exited, 30)
    finally:
        child.close()
    with os.fdopen(read_fd, "rb") as out:
        return code, out.read(), child.stderr


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "thread"])
async def test_return_code_stdout_and_stderr(pidfd: bool) -> None:
    """The return code, the stdout it was handed, and its stderr, with a pidfd or a waiting thread."""
    code, out, err = await _run(
        _python("import sys; print('out'); sys.stderr.write('an error'); raise SystemExit(3)"), pidfd=pidfd
    )
    assert (code, out, err) == (3, b"out\n", b"an error")


async def test_a_flood_on_stderr_never_blocks_the_child() -> None:
    """Megabytes on stderr (past any pipe's size) are read as they come: the first bytes kept."""
    code, _, err = await _run(_python("import sys; sys.stderr.write('e' * 3_000_000); sys.stderr.flush()"))
    assert code == 0
    assert err == b"e" * STDERR_KEEP


async def test_kill_then_stop_reaps_it() -> None:
    """A running child is killed by stop(): its code says SIGKILL and no process is left."""
    read_fd, write_fd = os.pipe()
    child = Child(_python("import time; time.sleep(60)"), cwd=None, stdout=write_fd)
    os.close(write_fd)
    os.close(read_fd)
    try:
        assert child.returncode is None
        await asyncio.wait_for(child.stop(), 30)
    finally:
        child.close()
    assert child.returncode == -signal.SIGKILL
    assert not _our_child(child.pid)
    child.kill()  # reaped already: never signals a pid that may be someone else's


def _same_dir(a: str, b: str) -> bool:
    return os.path.samefile(a, b)


def _our_child(pid: int) -> bool:
    """Whether ``pid`` is a process (running or zombie) whose parent is this one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid()


async def test_runs_in_the_working_directory_given(tmp_path: Path) -> None:
    """With a cwd the child starts there; without one, where this process is."""
    where = str(tmp_path)
    code, out, _ = await _run(_python("import os; print(os.getcwd())"), cwd=where)
    assert code == 0 and _same_dir(out.decode().strip(), where)
    code, out, _ = await _run(_python("import os; print(os.getcwd())"))
    assert out.decode().strip() == os.getcwd()


async def test_a_child_that_cannot_start_raises_and_leaks_nothing(tmp_path: Path) -> None:
    """A missing program is an OSError at once; no descriptor is left open."""
    before = _fds()
    for cwd in (None, str(tmp_path)):
        with pytest.raises(OSError):
            Child([str(tmp_path / "no-such-program")], cwd=cwd, stdout=1)
    assert _fds() == before


async def test_descriptors_are_closed_after_close() -> None:
    """stderr's pipe and the pidfd are closed; the child inherits none of ours."""
    before = _fds()
    marker_read, marker_write = os.pipe()  # close-on-exec, as every descriptor Python opens
    try:
        code, out, _ = await _run(_python(f"import os; os.fstat({marker_write}); print('inherited')"))
    finally:
        os.close(marker_read)
        os.close(marker_write)
    assert code != 0 and out == b""  # fstat failed in the child: the descriptor was not inherited
    assert _fds() == before


async def test_a_nicer_child_and_the_threads_it_starts() -> None:
    """``nice``: the child and every thread it starts afterwards run at that lower priority."""
    code = (
        "import os, threading\n"
        "seen = [os.getpriority(os.PRIO_PROCESS, 0)]\n"
        "t = threading.Thread(target=lambda: seen.append(os.getpriority(os.PRIO_PROCESS, 0)))\n"
        "import time; time.sleep(0.2)\n"  # started before its priority is lowered, its threads after
        "t.start(); t.join()\n"
        "print(seen[-1])\n"
    )
    read_fd, write_fd = os.pipe()
    try:
        child = Child(_python(code), cwd=None, stdout=write_fd, nice=10)
    finally:
        os.close(write_fd)
    try:
        assert await asyncio.wait_for(child.exited, 30) == 0
    finally:
        child.close()
    with os.fdopen(read_fd, "rb") as out:
        assert int(out.read()) == os.getpriority(os.PRIO_PROCESS, 0) + 10
