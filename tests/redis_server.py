"""A real ``redis-server`` (Debian's package) on a free 127.0.0.1 port, for tests and bench.

Started with no persistence, in a temporary directory, and stopped (or paused with
SIGSTOP, to play a Redis that hangs) by the test that owns it. ``.ci/run`` installs the
package when it is missing; without it the tests that need it skip, saying so, except
under ``CI=true`` where a missing server fails them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

__all__ = ["REDIS_SERVER", "RedisServer", "free_port", "need_redis", "redis_missing"]

REDIS_SERVER = shutil.which("redis-server")
START_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_missing() -> str | None:
    """Why Redis tests cannot run here, or None when they can."""
    if REDIS_SERVER is None:
        return "redis-server is not installed (apt-get install redis-server): the Redis tests are skipped"
    return None


def need_redis() -> None:
    """Skip the calling test without redis-server; under CI=true, fail it."""
    import pytest

    missing = redis_missing()
    if missing is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {missing}")
    pytest.skip(missing)


class RedisServer:
    """One redis-server process; ``start()`` again after ``stop()`` brings it back on the same port."""

    def __init__(self, port: int | None = None, *extra: str) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError(redis_missing())
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.mkdtemp(prefix="fedsearch-redis-")
        self._proc: subprocess.Popen[bytes] | None = None
        self._extra = extra

    def start(self) -> RedisServer:
        assert REDIS_SERVER is not None
        self._proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir,
                "--loglevel",
                "warning",
                *self._extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_S
        while not self.ping():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))  # up (with or without a password)
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """One command's raw RESP reply (for tests that look at what is stored)."""
        payload = f"*{len(args)}\r\n".encode() + b"".join(f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as sock:
            sock.sendall(payload)
            sock.settimeout(0.3)
            chunks = []
            try:
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            except TimeoutError:
                pass
            return b"".join(chunks)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open, nothing answers."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._proc is None:
            return
        self.resume()  # a paused server cannot act on SIGTERM
        self._proc.terminate()
        try:
            self._proc.wait(timeout=START_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
