"""Issue 48: several writers on one index folder. Two servers and a one-shot `fedsearch index` start at
once over the same checkouts: each root is built once, nothing is corrupted, all answer exactly; a
server killed mid-build leaves its roots to the other, which finishes them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.index.content import fresh
from gateway.index.locks import holder
from gateway.index.store import Store
from tests.chaos_support import (
    WAIT_S,
    WORDS,
    Server,
    answer_lines,
    checkout,
    config,
    rg_answer,
    search_body,
    wait_until,
)
from tests.helpers import fedsearch_command, subprocess_env
from tests.procs import gone_within


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.close()


def _ready(server: Server) -> bool:
    return all(index["state"] == "ready" for index in server.index_states().values())


def _read_by_server(server: Server) -> tuple[Counter[str], Counter[str]]:
    """Files the server's builder read into each root's content index, and parsed, by root."""
    read: Counter[str] = Counter()
    parsed: Counter[str] = Counter()
    for event in server.find("content_index_read"):
        read[event["root"]] += event["read"]
    for event in server.find("declarations_parsed"):
        parsed[event["root"]] += event["parsed"]
    return read, parsed


def _exact(ask: object, roots: dict[str, Path]) -> None:
    for word in WORDS:
        assert answer_lines(ask(search_body(word))) == rg_answer(roots, word), word  # type: ignore[operator]


class TestSeveralWriters:
    def test_two_servers_and_the_cli_at_once_build_each_root_once(self, tmp_path: Path, servers: list[Server]) -> None:
        """Started together on one folder over three checkouts: every root's files are read and parsed once in
        all (by whichever process took its lock), `fedsearch index` ends 0 reporting the roots others built,
        and both servers and a one-shot search answer exactly what rg does."""
        roots = {f"r{i}": checkout(tmp_path / "src" / f"r{i}", files=200, seed=i) for i in range(3)}
        # Files read within RACY_NS of their last write are read again once it passed (they may have changed
        # unseen, fresh.py): a deliberate second read, not a second build. Past it, every read counted is a build's.
        time.sleep(fresh.RACY_NS / 1e9 + 0.2)
        folder = tmp_path / "idx"
        path = config(tmp_path / "c.toml", folder, roots, build_workers=1)
        env = subprocess_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
        cli = subprocess.Popen(
            [*fedsearch_command(), "index", "--config", str(path), "--wait", "120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        servers.extend([Server(path), Server(path)])
        out, err = cli.communicate(timeout=WAIT_S * 2)
        assert cli.returncode == 0, err
        for server in servers:
            wait_until("every namespace ready", lambda server=server: _ready(server))  # type: ignore[misc]
        read: Counter[str] = Counter()
        parsed: Counter[str] = Counter()
        for server in servers:
            by_server = _read_by_server(server)
            read.update(by_server[0])
            parsed.update(by_server[1])
        for line in out.splitlines():
            name = line.split(":", 1)[0]
            if found := re.search(r"\(([\d,]+) files? read\)", line):
                read[str(roots[name])] += int(found.group(1).replace(",", ""))
            if found := re.search(r"; ([\d,]+) files? parsed", line):
                parsed[str(roots[name])] += int(found.group(1).replace(",", ""))
        assert read == {str(root): 200 for root in roots.values()}
        assert parsed == {str(root): 200 for root in roots.values()}
        assert sum("built by pid" in line for line in out.splitlines()) == 3 - sum(
            "files read" in line for line in out.splitlines()
        )
        for server in servers:
            _exact(server.search, roots)
        for word in WORDS[:2]:
            done = subprocess.run(
                [
                    *fedsearch_command(),
                    *("search", word, "--config", str(path), "--json", "-s"),
                    *("--page-files", "200", "--hit-budget", "5000", "--timeout-ms", "30000"),
                ],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            assert done.returncode in (0, 1), done.stderr
            assert answer_lines(json.loads(done.stdout)) == rg_answer(roots, word)

    def test_a_server_killed_mid_build_leaves_its_roots_to_the_other(
        self, tmp_path: Path, servers: list[Server]
    ) -> None:
        """Two servers share the roots; the one building the big root is SIGKILLed mid-build: everything it
        started ends, the other takes the root (the kernel let go of the lock), finishes it and answers exactly."""
        roots = {
            "big": checkout(tmp_path / "src" / "big", files=1200, seed=7),
            "small": checkout(tmp_path / "src" / "small", files=50, seed=8),
        }
        folder = tmp_path / "idx"
        path = config(tmp_path / "c.toml", folder, roots, build_workers=2)
        first, second = Server(path), Server(path)
        servers.extend([first, second])

        def builder_of(server: Server) -> int | None:
            return next((p for p, _ in server.tree() if p != server.proc.pid), None)

        wait_until("a builder holding the big root", lambda: holder(str(folder), str(roots["big"])) is not None)
        owner = holder(str(folder), str(roots["big"]))
        assert owner is not None
        building, other = (first, second) if owner.pid in {p for p, _ in first.tree()} else (second, first)
        assert owner.pid in {p for p, _ in building.tree()} and builder_of(building) is not None
        wait_until("the other server's builder waiting for the root", lambda: other.find("index_roots_waiting"))
        assert other.index_states()["big"]["state"] in ("waiting", "ready")
        store = Store.open(str(folder))
        assert not store.progress(str(roots["big"])).built  # mid-build: its declarations are not all there
        procs = building.tree()
        building.stop(signal.SIGKILL)
        left, _ = gone_within(procs, 15.0)
        assert left == set()
        wait_until("the other server takes the root", lambda: other.find("index_roots_taken"))
        wait_until("the other server's roots ready", lambda: _ready(other))
        wait_until("the big root's declarations built", lambda: store.progress(str(roots["big"])).built)
        store.close()
        _exact(other.search, roots)
        assert other.search(search_body("HashPassword"))["files"][0]["hits"][0]["kind"] in ("function", "method")
