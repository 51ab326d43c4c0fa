"""Issue 48: nothing a build starts outlives its server, and no lock stalls more than its own root.

Real processes throughout: ``fedsearch serve`` as a subprocess building real checkouts with two
reading workers, stopped by SIGTERM, SIGINT and SIGKILL while it builds; another process holding
a root's lock (alive, stuck, then killed); the kernel's view of who is left (/proc).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.ripgrep.batch import SCAN_NICE
from gateway.index.background import BUILDER_NICE
from gateway.index.locks import LEASE_S, holder, lock_path
from tests.chaos_support import WAIT_S, Server, answer_lines, checkout, config, rg_answer, search_body, wait_until
from tests.helpers import fedsearch_command, subprocess_env
from tests.procs import gone_within

#: How long the processes of a stopped server get to end here: generous, a loaded CI machine is slow (the
#: issue's 2 s is measured by `make chaos`, never asserted as a time).
END_S = 15.0


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout big enough that its first build is still running when the test stops the server."""
    return checkout(tmp_path_factory.mktemp("big") / "big", files=1500, seed=48)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.close()


def _nice(pid: int) -> int | None:
    """A process's nice value now (``/proc/PID/stat``'s 19th field); None once it has ended (an rg of the
    builder's, between listing the tree and reading this)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rpartition(")")[2].split()[16])
    except OSError:
        return None


class TestNothingOutlivesItsServer:
    @pytest.mark.parametrize(
        "how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"]
    )
    def test_a_server_stopped_mid_build_leaves_no_process_and_no_lock(
        self, how: signal.Signals, big: Path, tmp_path: Path, servers: list[Server]
    ) -> None:
        """Stopped while its builder's two workers read the checkout: the server, its builder, the workers
        (and any rg) all end, and the root's lock is free for the next server, which builds it to the end."""
        folder = tmp_path / "idx"
        path = config(tmp_path / "c.toml", folder, {"big": big}, build_workers=2)
        server = Server(path)
        servers.append(server)
        wait_until("the builder's workers at work", lambda: server.builder_workers() >= 2)
        procs = server.tree()
        assert len(procs) >= 4  # the server, its builder, two workers
        nices = {pid: nice for pid, _ in procs if (nice := _nice(pid)) is not None}
        assert nices.pop(server.proc.pid) == 0
        assert any(n == BUILDER_NICE for n in nices.values())  # the builder and its workers: after a search's rg
        assert all(n >= SCAN_NICE for n in nices.values())
        server.stop(how)
        left, _ = gone_within(procs, END_S)
        assert left == set(), f"left behind after {how.name}: {left}"
        assert holder(str(folder), str(big)) is None  # nothing holds the root: the next one builds
        if how != signal.SIGKILL:
            return
        again = Server(path)
        servers.append(again)
        wait_until("the index ready after the restart", lambda: again.index_states()["big"]["state"] == "ready", 120)
        for word in ("needle_alpha", "HashPassword"):
            assert answer_lines(again.search(search_body(word))) == rg_answer({"big": big}, word)

    def test_a_server_with_workers_killed_leaves_nothing(
        self, big: Path, tmp_path: Path, servers: list[Server]
    ) -> None:
        """`serve --workers 2` killed with SIGKILL: both server workers and both builders end with it."""
        folder = tmp_path / "idx"
        path = config(tmp_path / "c.toml", folder, {"big": big}, build_workers=1)
        full = {k: v for k, v in os.environ.items() if not k.startswith("FEDSEARCH_")}
        proc = subprocess.Popen(
            [*fedsearch_command(), "serve", "--config", str(path), "--port", "0", "--workers", "2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**full, "FEDSEARCH_LOG_LEVEL": "warning"},
        )
        try:
            from tests.procs import tree

            # the supervisor, two server workers, two builders (one waits for the root's lock)
            wait_until("both workers' builders", lambda: len(tree(proc.pid)) >= 5)
            procs = tree(proc.pid)
            proc.send_signal(signal.SIGKILL)
            proc.wait(WAIT_S)
            left, _ = gone_within(procs, END_S)
            assert left == set()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


HOLD = """
import os, sys, time
from gateway.index.locks import RootLock
lock = RootLock(sys.argv[1], sys.argv[2])
assert lock.take()
if sys.argv[3] == "stuck":  # took it long ago and never renewed since
    then = time.time() - 600
    os.utime(lock.fd, (then, then))
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def _holding(folder: Path, root: Path, how: str = "alive") -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``root``'s lock (``how``: "stuck", it stopped renewing long ago) until the block
    ends, then killed (SIGKILL: the kernel lets go of its lock)."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder), str(root), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "held\n"
            yield proc
        finally:
            proc.kill()


class TestOneLockARoot:
    @pytest.fixture
    def two(self, tmp_path: Path) -> dict[str, Path]:
        return {
            "held": checkout(tmp_path / "src" / "held", files=40, seed=1),
            "free": checkout(tmp_path / "src" / "free", files=40, seed=2),
        }

    def test_a_root_another_process_holds_waits_and_nothing_else_does(
        self, two: dict[str, Path], tmp_path: Path, servers: list[Server]
    ) -> None:
        """One root held by another process: the server builds the other root to the end, says the held one
        is waiting (which pid, since when, its lease alive), answers it exactly by scanning; once the holder
        is killed (the kernel lets go of its lock) the server's builder takes the root and builds it."""
        folder = tmp_path / "idx"
        with _holding(folder, two["held"]) as other:
            server = Server(config(tmp_path / "c.toml", folder, two))
            servers.append(server)
            wait_until("the free root ready", lambda: server.index_states()["free"]["state"] == "ready")
            held = server.index_states()["held"]
            assert held["state"] == "waiting" and held["holder"]["pid"] == other.pid
            assert held["holder"]["stuck"] is False and "since" in held["holder"]
            assert f"pid {other.pid}" in held["reason"]
            for word in ("needle_beta", "retry_budget"):
                assert answer_lines(server.search(search_body(word))) == rg_answer(two, word)
        wait_until(
            "the held root ready once its holder died", lambda: server.index_states()["held"]["state"] == "ready"
        )
        assert server.find("index_roots_taken")
        assert answer_lines(server.search(search_body("needle_gamma"))) == rg_answer(two, "needle_gamma")

    def test_a_stuck_holder_is_named_as_stuck(
        self, two: dict[str, Path], tmp_path: Path, servers: list[Server]
    ) -> None:
        """A holder alive but not renewing its lease (past LEASE_S): /v1/namespaces and `fedsearch index
        --status` name it as stuck, with its pid."""
        folder = tmp_path / "idx"
        path = config(tmp_path / "c.toml", folder, two)
        with _holding(folder, two["held"], "stuck") as other:
            server = Server(path)
            servers.append(server)
            wait_until("the free root ready", lambda: server.index_states()["free"]["state"] == "ready")
            held = server.index_states()["held"]
            assert held["state"] == "waiting" and held["holder"]["pid"] == other.pid
            assert held["holder"]["stuck"] is True and held["holder"]["renewed_s"] > LEASE_S
            assert "stuck" in held["reason"]
            env = subprocess_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
            done = subprocess.run(
                [*fedsearch_command(), "index", "--status", "--config", str(path), "--json"],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            roots = {r["root"]: r for r in json.loads(done.stdout)["roots"]}
            assert roots[str(two["held"])]["holder"]["pid"] == other.pid
            assert roots[str(two["held"])]["holder"]["stuck"] is True
            done = subprocess.run(
                [*fedsearch_command(), "index", "--status", "--config", str(path)],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            assert f"held by pid {other.pid}" in done.stdout and "STUCK" in done.stdout

    def test_a_lock_is_a_roots_and_dies_with_its_holder(self, tmp_path: Path) -> None:
        """Two roots have two lock files; a holder's pid is the kernel's answer; a killed holder holds nothing."""
        folder, a, b = tmp_path / "idx", tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        assert lock_path(str(folder), str(a)) != lock_path(str(folder), str(b))
        with _holding(folder, a) as other:
            found = holder(str(folder), str(a))
            assert found is not None and found.pid == other.pid and not found.stuck()
            assert holder(str(folder), str(b)) is None
        assert holder(str(folder), str(a)) is None


SLEEPER = """
import os, subprocess, sys, time
from gateway.index.lifetime import die_with_parent, watch_stdin
if sys.argv[1] == "parent":  # starts a child that asks to die with it, says both pids, sleeps
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", str(os.getpid())])
    print(child.pid, flush=True)
    time.sleep(600)
elif sys.argv[1] == "child":
    die_with_parent(int(sys.argv[2]))
    time.sleep(600)
else:  # a group leader with a worker of its own, both asleep: only the hang-up of its stdin ends them
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(worker.pid, flush=True)
    watch_stdin(sys.stdin.fileno(), 0.2)
    time.sleep(600)
"""


class TestTheGuards:
    def test_a_child_asleep_dies_with_its_killed_parent(self) -> None:
        """The kernel's parent-death signal: a process asleep in a call (it never looks) ends when its parent
        is SIGKILLed."""
        with subprocess.Popen(
            [sys.executable, "-c", SLEEPER, "parent", SLEEPER], stdout=subprocess.PIPE, text=True, env=subprocess_env()
        ) as parent:
            assert parent.stdout is not None
            child = int(parent.stdout.readline())
            from tests.procs import tree

            procs = tree(child)
            parent.kill()
        left, _ = gone_within(procs, END_S)
        assert left == set()

    def test_a_group_asleep_ends_when_its_stdin_hangs_up(self) -> None:
        """The hang-up of stdin: a process and its worker, both asleep, end (the whole group) once the pipe's
        other end is closed, after the grace."""
        with subprocess.Popen(
            [sys.executable, "-c", SLEEPER, "group"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            process_group=0,
            env=subprocess_env(),
        ) as leader:
            assert leader.stdout is not None and leader.stdin is not None
            worker = int(leader.stdout.readline())
            from tests.procs import tree

            procs = tree(leader.pid) | tree(worker)
            assert len(procs) == 2
            leader.stdin.close()
            left, _ = gone_within(procs, END_S)
            assert left == set()
            assert leader.wait(WAIT_S) == -signal.SIGKILL
