"""The content index where users meet it: /v1/namespaces and /metrics of a real server (its builder and
file watcher running), `fedsearch index`, `check-config`, and the one-shot CLI reading a ready index."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.oneshot import OneShot
from gateway.cli.quick import quick_request
from gateway.config import Config, DefaultsConfig, IndexConfig, ServerConfig, discover
from gateway.http.app import create_app
from gateway.index.content import fresh, paths
from tests.cli_support import Capture, run, stand_in_corpus

Client = Any


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return stand_in_corpus(tmp_path, monkeypatch)


def config_over(corpus: Path, index_dir: Path, content: bool = True) -> Config:
    return Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=discover(corpus),
        index=IndexConfig(dir=str(index_dir), content=content),
    )


async def namespaces(client: Client) -> dict[str, dict[str, Any]]:
    items = (await (await client.get("/v1/namespaces")).json())["namespaces"]
    return {i["name"]: i for i in items}


async def until_ready(client: Client) -> dict[str, dict[str, Any]]:
    """/v1/namespaces once every local namespace's index is ready (the builder and the first check ran)."""
    deadline = time.monotonic() + 60
    while True:
        items = await namespaces(client)
        if all(i["index"]["state"] == "ready" for i in items.values()) or time.monotonic() > deadline:
            return items
        await asyncio.sleep(0.05)


class TestServer:
    async def test_namespaces_say_the_index_state(
        self, aiohttp_client: Callable[..., Any], corpus: Path, tmp_path: Path
    ) -> None:
        """Each local namespace has index {state, files, bytes, built_s}; it becomes ready once built."""
        client = await aiohttp_client(create_app(config_over(corpus, tmp_path / "idx")))
        items = await until_ready(client)
        for item in items.values():
            index = item["index"]
            assert index["state"] == "ready", index
            assert index["files"] > 0 and index["bytes"] > 0 and isinstance(index["built_s"], float)

    async def test_off_when_content_is_false(
        self, aiohttp_client: Callable[..., Any], corpus: Path, tmp_path: Path
    ) -> None:
        """[index] content = false: every local namespace says off, and searches scan."""
        client = await aiohttp_client(create_app(config_over(corpus, tmp_path / "idx", content=False)))
        items = await namespaces(client)
        assert {i["index"]["state"] for i in items.values()} == {"off"}
        answer = await (await client.post("/v1/search", json={"query": "register_widget"})).json()
        assert answer["file_count"] > 0

    async def test_a_change_shows_up_in_the_next_search(
        self, aiohttp_client: Callable[..., Any], corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Written just before a search, a file's new content is found; removed, it is gone from the answer."""
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        client = await aiohttp_client(create_app(config_over(corpus, tmp_path / "idx")))
        await until_ready(client)
        target = corpus / "alpha" / "src" / "widgets.py"
        with target.open("a") as handle:
            handle.write("\nzqxjkw_fresh_token = 1\n")
        answer = await (await client.post("/v1/search", json={"query": "zqxjkw_fresh_token"})).json()
        assert [(f["namespace"], f["file_path"]) for f in answer["files"]] == [("alpha", "src/widgets.py")]
        (corpus / "alpha" / "src" / "new.py").write_text("zqxjkw_other_token = 2\n")
        answer = await (await client.post("/v1/search", json={"query": "zqxjkw_other_token", "files": 5})).json()
        assert [f["file_path"] for f in answer["files"]] == ["src/new.py"]
        target.write_text("nothing here now\n")
        answer = await (await client.post("/v1/search", json={"query": "zqxjkw_fresh_token", "files": 7})).json()
        assert answer["file_count"] == 0

    async def test_metrics_count_narrowed_searches(
        self, aiohttp_client: Callable[..., Any], corpus: Path, tmp_path: Path
    ) -> None:
        """/metrics counts searches the index narrowed and scans by reason, and each namespace's index figures."""
        client = await aiohttp_client(create_app(config_over(corpus, tmp_path / "idx")))
        await until_ready(client)
        await client.post("/v1/search", json={"query": "register_widget"})
        await client.post("/v1/search", json={"query": "w", "files": 3})  # one letter: nothing to require
        text = await (await client.get("/metrics")).text()
        counts = {
            line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("fedsearch_content_index_searches_total{")
        }
        assert counts['outcome="narrowed"'] >= 1 and counts['outcome="no_grams"'] >= 3
        assert sum(counts.values()) >= 6  # every namespace asked, twice
        assert 'fedsearch_content_index_ready{namespace="alpha"} 1.0' in text
        assert any(line.startswith('fedsearch_content_index_bytes{namespace="alpha"}') for line in text.splitlines())
        assert "fedsearch_content_index_build_seconds" in text
        folder = next(line for line in text.splitlines() if line.startswith("fedsearch_index_folder_bytes "))
        assert float(folder.rsplit(" ", 1)[1]) > 0  # every index file under [index] dir
        assert "fedsearch_index_folder_max_bytes 1.073741824e+10" in text


class TestCli:
    def test_index_builds_and_says_so(self, corpus: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
        """`fedsearch index` builds every local index now, a line a namespace (not a terminal); again, it
        reads nothing (its files written long enough ago)."""
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        code, out, _ = run(capsys, "index")
        lines = out.splitlines()
        assert code == 0 and [line.split(":")[0] for line in lines] == ["alpha", "gamma", "team/beta"]
        assert all("content index ready" in line and " read)" in line for line in lines)
        code, out, _ = run(capsys, "index")
        assert code == 0 and " read)" not in out

    def test_index_while_a_server_builds_says_so_and_ends(self, corpus: Path, tmp_path: Path, capsys: Capture) -> None:
        """Another process holding the root's lock (a running server's builder holds it for the server's life):
        `fedsearch index` waits --wait seconds naming its pid, says a server keeps these indexes itself, builds
        nothing and exits 1; once that process is killed (SIGKILL: the kernel lets go of its lock) it builds."""
        import signal
        import subprocess
        import sys

        folder = tmp_path / "idx"
        folder.mkdir()
        config = tmp_path / "c.toml"
        config.write_text(
            f'[index]\ndir = "{folder}"\n'
            f'[[namespaces]]\nname = "alpha"\nbackend = "ripgrep"\nroot = "{corpus / "alpha"}"\n'
        )
        hold = (
            "import sys\nfrom gateway.index.locks import RootLock\n"
            "assert RootLock(sys.argv[1], sys.argv[2]).take()\nprint('held', flush=True)\nsys.stdin.read()\n"
        )
        with subprocess.Popen(
            [sys.executable, "-c", hold, str(folder), str(corpus / "alpha")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as holder:
            try:
                assert holder.stdout is not None and holder.stdout.readline() == "held\n"
                code, out, err = run(capsys, "index", "--config", str(config), "--wait", "0.3")
            finally:
                holder.send_signal(signal.SIGKILL)
        assert code == 1 and out == ""
        assert f"waiting for another builder (pid {holder.pid})" in err and "nothing built" in err
        code, out, _ = run(capsys, "index", "--config", str(config), "--wait", "0.3")
        assert code == 0 and out.startswith("alpha:") and "content index ready" in out

    def test_index_in_a_folder_that_cannot_be_written(self, corpus: Path, tmp_path: Path, capsys: Capture) -> None:
        """An [index] dir that cannot be made: `fedsearch index` says so and exits 2; check-config warns."""
        (tmp_path / "file").write_text("x")
        config = tmp_path / "c.toml"
        config.write_text(
            f'[index]\ndir = "{tmp_path / "file" / "idx"}"\n'
            f'[[namespaces]]\nname = "alpha"\nbackend = "ripgrep"\nroot = "{corpus / "alpha"}"\n'
        )
        code, _, err = run(capsys, "index", "--config", str(config))
        assert code == 2 and "cannot write the index folder" in err
        code, _, err = run(capsys, "check-config", "--config", str(config))
        assert code == 0 and "index.dir:" in err and "cannot be written" in err

    def test_one_shot_search_reads_a_ready_index(
        self, corpus: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With the index built, the one-shot search narrows its scan by it, and answers as a scan does."""
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        roots = {name: str(corpus / name) for name in ("alpha", "gamma", "team/beta")}
        request = quick_request({"query": "register_widget"})
        assert request is not None
        monkeypatch.setattr(paths, "CLI_MIN_BYTES", 1 << 40)  # first as if there were no index: scanned
        scanned = OneShot(roots).search(request)
        monkeypatch.setattr(paths, "CLI_MIN_BYTES", 0)  # this corpus is tiny: read its index anyway
        assert run(capsys, "index")[0] == 0
        one = OneShot(roots)
        narrowed = one.search(request)
        assert one._content is not None and sum(one._content.outcomes.values()) == 3
        assert one._content.outcomes["narrowed"] >= 1  # the rest: one file that can match of one or two, "common"
        for answer in (scanned, narrowed):
            answer.pop("took_ms")
            for status in answer["namespaces"]:
                status.pop("took_ms")
        assert narrowed == scanned
        one.close()

    def test_one_shot_json_over_an_index_in_a_subprocess(self, corpus: Path, capsys: Capture) -> None:
        """`fedsearch search --json` after `fedsearch index` finds what it found before (its own process)."""
        import subprocess

        from tests.helpers import fedsearch_command, subprocess_env

        def search() -> list[tuple[str, str]]:
            done = subprocess.run(
                [*fedsearch_command(), "search", "--json", "register_widget"],
                cwd=corpus,
                capture_output=True,
                env=subprocess_env(),
                check=True,
            )
            return [(f["namespace"], f["file_path"]) for f in json.loads(done.stdout)["files"]]

        before = search()
        assert run(capsys, "index")[0] == 0
        assert search() == before and before
        assert os.listdir(os.path.join(os.environ["XDG_CACHE_HOME"], "fedsearch"))
