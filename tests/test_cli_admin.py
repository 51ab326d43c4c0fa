"""The other commands and the CLI's edges: read, namespaces, check-config, --server, start-up."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main
from gateway.config import config_from_env
from gateway.http.app import create_app
from gateway.log import configure
from tests.cli_support import Capture, run, stand_in_corpus
from tests.corpus import make_corpus

#: What a one-shot local search must not import: servers, MCP, remote adapters, metrics, logging's chain.
HEAVY = (
    "aiohttp",
    "structlog",
    "rich",
    "tenacity",
    "prometheus_client",
    "mcp",
    "uvicorn",
    "orjson",
    "gateway.http",
    "gateway.mcp.tools",
    "gateway.afi",
    "adapters.peer",
    "adapters.zoekt",
    "adapters.github",
    "adapters.gitlab",
    "adapters.sourcegraph",
    "adapters.hound",
    "adapters.livegrep",
    "adapters.afi",
)


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = stand_in_corpus(tmp_path, monkeypatch)
    return root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def imported(argv: list[str], cwd: Path) -> set[str]:
    """The modules a ``fedsearch`` run imports, read from ``python -X importtime``."""
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "from gateway.cli.main import main; raise SystemExit(main())",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return {line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


#: What a one-shot search over discovered checkouts (gateway.cli.oneshot) does without, besides HEAVY:
#: the service and its event loop, pydantic (config, request), stdlib logging, importlib.metadata.
NOT_ONE_SHOT = (
    "inspect",  # typing_extensions', and with it ast and dis: hidden from msgspec (gateway.cli.lean)
    "ast",
    "pydantic",
    "pydantic_core",
    "asyncio",
    "logging",
    "importlib.metadata",
    "subprocess",
    "gateway.service",
    "gateway.config",
    "gateway.query.request",
    "gateway.schema",
    "gateway.fanout",
    "gateway.cache",
    "adapters.ripgrep.batch",
    "adapters.ripgrep.backend",
)
#: ... and, when nothing matched (no file to rank), the declaration index (the content index's folder is
#: looked at, with the standard library, before rg starts: gateway.index.content.paths).
NOT_WITHOUT_FILES = ("sqlite3", "tree_sitter", "tantivy", "gateway.index.resolve", "gateway.index.store")


def among(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``names`` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


class TestStartup:
    def test_a_one_shot_search_imports_nothing_heavy(self, corpus: Path) -> None:
        """`fedsearch search` over discovered checkouts runs rg itself: no server, MCP, remote adapter,
        metrics, structlog, service, event loop, pydantic or stdlib logging."""
        modules = imported(["search", "register_widget"], corpus)
        assert "adapters.ripgrep.oneshot" in modules and "gateway.index" in modules  # it searched, and ranked
        assert among(modules, (*HEAVY, *NOT_ONE_SHOT)) == []

    def test_nothing_matched_opens_no_index(self, corpus: Path) -> None:
        """With nothing to rank, neither SQLite nor tree-sitter is imported."""
        modules = imported(["search", "zzz_matches_nothing"], corpus)
        assert "adapters.ripgrep.oneshot" in modules
        assert among(modules, (*HEAVY, *NOT_ONE_SHOT, *NOT_WITHOUT_FILES)) == []

    def test_a_plain_listing_starts_rg_on_the_standard_library_alone(self, corpus: Path) -> None:
        """`fedsearch search QUERY -l` (a plain request) is rg's listing: nothing that checks or ranks a request
        is imported (msgspec, RE2, the one-shot search, the indexes), nor anything heavy."""
        modules = imported(["search", "register_widget", "-l"], corpus)
        assert "gateway.cli.listing" in modules and "gateway.cli.relay" in modules
        checking = (
            "msgspec",
            "re2",
            "gateway.query.criteria",
            "gateway.cli.quick",
            "gateway.cli.oneshot",
            "gateway.index.content.narrow",
        )
        assert among(modules, (*HEAVY, *NOT_ONE_SHOT, *NOT_WITHOUT_FILES, *checking)) == []

    def test_what_needs_the_service_gets_it(self, corpus: Path, tmp_path: Path) -> None:
        """A config file, or a mode the one-shot search does not run, goes through the service (and
        still imports nothing heavy)."""
        config = tmp_path / "c.toml"
        config.write_text(f'[[namespaces]]\nname = "alpha"\nbackend = "ripgrep"\nroot = "{corpus / "alpha"}"\n')
        for argv in (["search", "register_widget", "--config", str(config)], ["search", "widget", "--semantic"]):
            modules = imported(argv, corpus)
            assert {"gateway.service", "adapters.ripgrep.batch"} <= modules
            assert among(modules, HEAVY) == []

    def test_a_search_by_meaning_of_built_indexes_needs_no_service(self, corpus: Path) -> None:
        """Once the checkouts' intent indexes are built, ``--semantic`` is the one-shot search's (issue 52): no
        service, no pydantic, no event loop; it finds what the service finds."""
        subprocess.run([sys.executable, "-m", "gateway.cli", "index"], cwd=corpus, check=True, capture_output=True)
        modules = imported(["search", "register a widget", "--semantic"], corpus)
        assert among(modules, ("gateway.service", "pydantic", "asyncio", *HEAVY)) == []
        assert "gateway.index.semantic" in modules

    def test_msgspec_without_typing_extensions_reads_structs_alike(self) -> None:
        """gateway.cli.lean: msgspec imported with typing_extensions hidden decodes this project's structs
        as before, and typing_extensions is importable afterwards (for pydantic)."""
        code = (
            "import sys\n"
            "from gateway.cli.lean import import_msgspec\n"
            "import_msgspec()\n"
            "assert 'typing_extensions' not in sys.modules and 'inspect' not in sys.modules\n"
            "import msgspec\n"
            "from gateway.models import Hit, SearchQuery\n"
            "line = Hit(line=3, text='def f')\n"
            "hit = Hit(line=3, text='def f', kind='function', symbol='m.f', name='f', lines=(line,))\n"
            "assert msgspec.json.decode(msgspec.json.encode(hit), type=Hit) == hit\n"
            'q = msgspec.json.decode(b\'{"text": "x", "paths": ["a"]}\', type=SearchQuery)\n'
            "assert q.paths == ('a',) and q.mode == 'exact'\n"
            "import typing_extensions, pydantic\n"
            "print('ok')\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert done.stdout.strip() == "ok", done.stderr[-2000:]

    def test_help_imports_argparse_alone(self, corpus: Path) -> None:
        """`fedsearch --help` and a command's --help import neither pydantic, asyncio nor the service."""
        for argv in (["--help"], ["search", "--help"]):
            modules = imported(argv, corpus)
            unwanted = {"pydantic", "asyncio", "gateway.service", "gateway.query.request", "msgspec", "shutil"}
            assert unwanted.isdisjoint(modules)


class TestRead:
    def test_lines_of_a_file(self, corpus: Path, capsys: Capture) -> None:
        """`read NS/PATH:START-END` prints those lines, numbered."""
        code, out, _ = run(capsys, "read", "alpha/src/widgets.py:4-5")
        assert code == 0 and out == "4\tdef register_widget(name):\n5\t    return name\n"

    def test_json(self, corpus: Path, capsys: Capture) -> None:
        """--json prints what the service's read_file gives (and /v1/files, MCP read_file)."""
        code, out, _ = run(capsys, "read", "team/beta/lib/registry.go:3-", "--json")
        result = json.loads(out)
        assert code == 0
        assert (result["namespace"], result["path"], result["start_line"]) == ("team/beta", "lib/registry.go", 3)
        assert result["lines"] == ["func RegisterWidget() {}", "", "// register_widget compat"]

    def test_a_path_as_search_printed_it(self, corpus: Path, capsys: Capture) -> None:
        """A path relative to the current directory (as `search` prints it) reads too."""
        os.chdir(corpus / "alpha" / "src")
        code, out, _ = run(capsys, "read", "widgets.py:4-4")
        assert code == 0 and out == "4\tdef register_widget(name):\n"

    def test_past_the_read_limit_says_how_to_read_on(self, corpus: Path, capsys: Capture) -> None:
        """A file read whole comes in a slice (400 lines) with the command that reads on; a range asked for
        reads up to the read limit (2,000 lines), and a range inside it says nothing more."""
        (corpus / "gamma" / "long.txt").write_text("".join(f"{n}\n" for n in range(1, 2102)))
        code, out, err = run(capsys, "read", "gamma/long.txt")
        assert code == 0 and out.splitlines()[-1] == "400\t400"
        assert err == "fedsearch: hint: lines 1-400 of 2101; more: fedsearch read gamma/long.txt:401-\n"
        code, out, err = run(capsys, "read", "gamma/long.txt:1-2101")
        assert code == 0 and out.splitlines()[-1] == "2000\t2000"
        assert err == "fedsearch: hint: lines 1-2000 of 2101; more: fedsearch read gamma/long.txt:2001-\n"
        assert run(capsys, "read", "gamma/long.txt:5-6")[1:] == ("5\t5\n6\t6\n", "")

    def test_a_missing_file_exits_2(self, corpus: Path, capsys: Capture) -> None:
        """A file that is not there is one line on stderr and exit 2."""
        code, out, err = run(capsys, "read", "alpha/nope.py")
        assert code == 2 and out == "" and err.startswith("fedsearch: ") and err.count("\n") == 1

    def test_an_end_before_the_start_is_bad_input(self, corpus: Path, capsys: Capture) -> None:
        """`:9-3` names end_line."""
        assert run(capsys, "read", "alpha/src/widgets.py:9-3")[2].startswith("fedsearch: invalid end_line:")


class TestCheckConfig:
    def test_an_empty_config_warns(self, tmp_path: Path, capsys: Capture) -> None:
        """A config with no namespace passes, with a warning that there is nothing to search."""
        config = tmp_path / "empty.toml"
        config.write_text("")
        code, out, err = run(capsys, "check-config", "--config", str(config))
        assert code == 0 and "configures no namespace" in err
        assert out == f"ok: 0 namespaces from {config} (1 warning)\n"

    def test_an_unset_token_env_warns(self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
        """A token_env naming an unset variable is a warning naming the key."""
        monkeypatch.delenv("FEDSEARCH_TEST_NO_TOKEN", raising=False)
        config = tmp_path / "c.toml"
        config.write_text(
            '[[namespaces]]\nname = "gh"\nbackend = "github"\nscope = "org:acme"\n'
            'token_env = "FEDSEARCH_TEST_NO_TOKEN"\n'
        )
        code, out, err = run(capsys, "check-config", "--config", str(config))
        assert code == 0 and "namespaces[0].token_env: $FEDSEARCH_TEST_NO_TOKEN is not set" in err
        assert out.startswith("ok: 1 namespace from")

    def test_a_tilde_root_is_expanded(self, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
        """root = "~/..." is the home folder's, as a shell reads it; a ~ elsewhere is a warning."""
        monkeypatch.setenv("HOME", str(tmp_path))
        make_corpus(tmp_path / "src")
        config = tmp_path / "c.toml"
        config.write_text('[[namespaces]]\nname = "a"\nbackend = "ripgrep"\nroot = "~/src/alpha"\nexclude = ["~/x"]\n')
        code, _, err = run(capsys, "check-config", "--config", str(config))
        assert code == 0 and "namespaces[0].exclude[0]: '~/x' starts with ~" in err

    def test_config_errors_name_the_key_in_words(self, tmp_path: Path, capsys: Capture) -> None:
        """A bad value exits 2 naming the key, with no pydantic 'Value error, ' prefix."""
        config = tmp_path / "bad.toml"
        config.write_text('[[namespaces]]\nname = "x"\nbackend = "ripgrep"\nroot = "/nonexistent/dir"\n')
        code, _, err = run(capsys, "check-config", "--config", str(config))
        assert code == 2 and "namespaces[0].root: root must be an existing directory" in err
        assert "Value error" not in err

    def test_namespaces_json(self, corpus: Path, capsys: Capture) -> None:
        """`fedsearch namespaces --json` lists the discovered checkouts."""
        code, out, _ = run(capsys, "namespaces", "--json")
        assert code == 0 and [n["name"] for n in json.loads(out)] == ["alpha", "gamma", "team/beta"]


class TestServer:
    @pytest.fixture
    async def server(self, corpus: Path, aiohttp_server: Callable[..., Any]) -> str:
        configure(level="warning")  # the server shares this process (and its stdout) with the client
        served = await aiohttp_server(create_app(config_from_env(None, str(corpus), env={})))
        return f"127.0.0.1:{served.port}"  # no scheme: http:// is assumed

    async def test_search_over_a_server(self, server: str, capsys: Capture) -> None:
        """--server asks a running gateway: the same answer, printed as a local one."""
        code = await asyncio.to_thread(main, ["search", "RegisterWidget", "--server", server, "--vimgrep"])
        assert code == 0
        assert capsys.readouterr().out == "team/beta/lib/registry.go:3:6:func RegisterWidget() {}\n"

    async def test_the_server_validates(self, server: str, capsys: Capture) -> None:
        """Bad input over --server is the server's 400, named as a local search names it."""
        code = await asyncio.to_thread(main, ["search", "x", "--page-files", "0", "--server", server])
        assert code == 2 and capsys.readouterr().err.startswith("fedsearch: invalid files:")

    async def test_read_over_a_server(self, server: str, capsys: Capture) -> None:
        """`read --server` reads through GET /v1/files."""
        code = await asyncio.to_thread(main, ["read", "team/beta/lib/registry.go:3-3", "--server", server, "--json"])
        result = json.loads(capsys.readouterr().out)
        assert code == 0 and result["namespace"] == "team/beta" and result["lines"] == ["func RegisterWidget() {}"]

    def test_a_server_that_is_down_is_said_in_words(self, capsys: Capture) -> None:
        """A refused connection is 'connection refused at http://…', exit 3, no exception names."""
        port = closed_port()
        code, out, err = run(capsys, "search", "x", "--server", f"localhost:{port}")
        assert code == 3 and out == ""
        assert err == f"fedsearch: cannot reach the server: connection refused at http://localhost:{port}\n"

    def test_a_server_that_is_down_with_json(self, capsys: Capture) -> None:
        """With --json the same failure is problem JSON on stdout."""
        code, out, _ = run(capsys, "search", "x", "--server", f"127.0.0.1:{closed_port()}", "--json")
        problem = json.loads(out)
        assert code == 3 and problem["status"] == 502 and "connection refused" in problem["detail"]

    def test_a_url_that_is_not_http_is_bad_input(self, capsys: Capture) -> None:
        """--server ftp://… names the server flag."""
        code, _, err = run(capsys, "search", "x", "--server", "ftp://example.com")
        assert code == 2 and err.startswith("fedsearch: invalid server:")
