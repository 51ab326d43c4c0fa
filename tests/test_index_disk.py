"""Issue 48: a full disk and a read-only index folder. The namespace's index is ``off`` with a reason,
answers stay exactly rg's by scanning, nothing crashes, and once the disk has room the build resumes.

The index folder is a real tmpfs mounted here (CI runs as root: root writes through permission bits,
so a mount is the only way to make writes fail); ``max_bytes`` too small is the other bound.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos_support import WORDS, Server, answer_lines, checkout, config, rg_answer, search_body, wait_until


def _mount(target: Path, options: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root: {done.stderr.decode(errors='replace').strip()}")


def _remount(target: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(target)], check=True)


def _fill(target: Path) -> Path:
    """Every byte of the file system under ``target`` taken by one file (what is left: no room at all)."""
    filler = target / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass  # full
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A folder for the index, on a tmpfs of its own (unmounted after the test)."""
    target = tmp_path / "idx"
    yield target
    if os.path.ismount(target):
        subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        with contextlib.suppress(Exception):
            server.close()


def _exact(server: Server, roots: dict[str, Path]) -> None:
    for word in WORDS:
        assert answer_lines(server.search(search_body(word))) == rg_answer(roots, word), word


def _no_crash(server: Server) -> None:
    """The server still runs, and logged no error (warnings say why an index is off)."""
    assert server.proc.poll() is None
    assert not [e for e in server.events if e.get("level") in ("error", "critical")]


class TestFullDisk:
    def test_full_from_the_start_then_room_again(self, tmpfs: Path, tmp_path: Path, servers: list[Server]) -> None:
        """An index folder with no room at all: the namespace is off and says the folder cannot be written,
        answers are rg's (scanned); once the disk is given room, the next pass builds it and it is ready."""
        _mount(tmpfs, "size=64k")
        filler = _fill(tmpfs)
        roots = {"ns": checkout(tmp_path / "src" / "ns", files=60, seed=3)}
        server = Server(config(tmp_path / "c.toml", tmpfs, roots, refresh_s=1.0))
        servers.append(server)
        wait_until("the index off", lambda: server.index_states()["ns"]["state"] == "off")
        index = server.index_states()["ns"]
        assert "cannot be written" in index["reason"] and "No space left on device" in index["reason"]
        _exact(server, roots)
        _no_crash(server)
        filler.unlink()
        _remount(tmpfs, "size=64m")
        wait_until("the index ready once there is room", lambda: server.index_states()["ns"]["state"] == "ready")
        _exact(server, roots)
        _no_crash(server)

    def test_the_disk_fills_mid_build(self, tmpfs: Path, tmp_path: Path, servers: list[Server]) -> None:
        """Room for the start of a build, not its end: the namespace ends off with the reason, answers are
        rg's, the server goes on serving."""
        _mount(tmpfs, "size=256k")
        roots = {"ns": checkout(tmp_path / "src" / "ns", files=1500, seed=4)}
        server = Server(config(tmp_path / "c.toml", tmpfs, roots, refresh_s=1.0))
        servers.append(server)
        wait_until("the index off", lambda: server.index_states()["ns"]["state"] == "off")
        assert "No space left on device" in server.index_states()["ns"]["reason"]
        _exact(server, roots)
        _no_crash(server)

    def test_max_bytes_too_small(self, tmp_path: Path, servers: list[Server]) -> None:
        """``max_bytes`` below what the checkout's index takes: off, the reason names the bound, answers rg's."""
        roots = {"ns": checkout(tmp_path / "src" / "ns", files=60, seed=5)}
        server = Server(config(tmp_path / "c.toml", tmp_path / "idx", roots, max_bytes=1000))
        servers.append(server)
        wait_until("the index off", lambda: server.index_states()["ns"]["state"] == "off")
        assert "max_bytes" in server.index_states()["ns"]["reason"]
        _exact(server, roots)
        _no_crash(server)


class TestReadOnly:
    def test_an_empty_read_only_folder(self, tmpfs: Path, tmp_path: Path, servers: list[Server]) -> None:
        """Nothing can be written: off, the reason says so, answers are rg's, nothing crashes."""
        _mount(tmpfs, "size=1m,ro")
        roots = {"ns": checkout(tmp_path / "src" / "ns", files=60, seed=6)}
        server = Server(config(tmp_path / "c.toml", tmpfs, roots))
        servers.append(server)
        wait_until("the index off", lambda: server.index_states()["ns"]["state"] == "off")
        assert "Read-only file system" in server.index_states()["ns"]["reason"]
        _exact(server, roots)
        _no_crash(server)

    def test_a_built_index_made_read_only(self, tmpfs: Path, tmp_path: Path, servers: list[Server]) -> None:
        """An index built, then its folder made read-only: a new server answers exactly what rg does (from the
        index where it can read it, else by scanning) and never crashes."""
        _mount(tmpfs, "size=64m")
        roots = {"ns": checkout(tmp_path / "src" / "ns", files=60, seed=7)}
        path = config(tmp_path / "c.toml", tmpfs, roots)
        first = Server(path)
        servers.append(first)
        wait_until("the index ready", lambda: first.index_states()["ns"]["state"] == "ready")
        first.stop()
        _remount(tmpfs, "ro")
        server = Server(path)
        servers.append(server)
        _exact(server, roots)
        index = server.index_states()["ns"]
        assert index["state"] in ("ready", "off"), index.get("reason")
        _no_crash(server)
