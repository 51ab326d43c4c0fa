"""The README and docs/ are run: every ```sh block's commands against small checkouts, the MCP config an agent
pastes, every TOML example through the config's own validation, every link, and the API reference's generated part.

How a document tells this test what to do with a block:

* a ```sh block is run, a command (a line, or lines joined by a trailing backslash) at a time, in one bash
  process starting in ``~/src``; ``HOME`` is a folder of this test's holding ``src/flask`` and ``src/click``
  (git checkouts). Each command must exit 0, print something (``cd`` aside) and print no traceback. A block
  that names ``localhost:8080`` is run against a ``fedsearch serve`` over ``~/src`` on a free port, put in its
  place; ``curl`` fails on an HTTP error status there (``--fail-with-body``);
* ``<!-- docs-test: file NAME -->`` on the line before a block writes it to ``~/src/NAME`` first;
* ``<!-- docs-test: mcp -->`` before a ```json block: an MCP client config, whose server is started as
  written (``/path/to/fedsearch/.venv/bin/`` is this virtualenv's, ``/path/to/src`` is ``~/src``);
* blocks in any other language (```text, ```toml, ```json) are not run; TOML is validated.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.afi.routes import add_afi_routes
from gateway.config import parse_config
from gateway.http.openapi import openapi
from tests import docs_api
from tests.helpers import git_repo

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = [*DOCS, REPO / "deploy" / "README.md"]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```([\w-]*)\s*$")
MARK = re.compile(r"^<!-- docs-test: (\w+)(?: (\S+))? -->$")
SERVER_ADDRESS = "localhost:8080"
START_S = 60.0

CHECKOUTS: dict[str, dict[str, str]] = {
    "flask": {
        "src/flask/__init__.py": "from .app import Flask\n",
        "src/flask/app.py": '''"""The application object."""

from .blueprints import Blueprint


class Flask:
    """The flask object implements a WSGI application."""

    def register_blueprint(self, blueprint: Blueprint) -> None:
        """Register a Blueprint on the application."""
        blueprint.register(self)

    def url_for(self, endpoint: str) -> str:
        """Generate a URL to the given endpoint."""
        return "/" + endpoint
''',
        "src/flask/blueprints.py": '''class Blueprint:
    """Represents a blueprint, a collection of routes."""

    def register(self, app) -> None:
        """Register this blueprint on an application."""
        app.blueprints = [self]
''',
        "tests/test_blueprints.py": """from flask.blueprints import Blueprint


def test_register_blueprint():
    bp = Blueprint()
    assert bp
""",
    },
    "click": {
        "src/click/core.py": '''def echo(message: str) -> None:
    """Print a message and a newline to the terminal."""
    print(message)


def url_for_help(command: str) -> str:
    return "help: " + command
''',
    },
}

#: What some commands must print (the command as the docs write it -> a text its output holds, stdout or
#: stderr: off a terminal a page's summary and next commands go to stderr). Each command must still be in
#: the docs: a test fails when one is not.
EXPECTED = {
    "fedsearch search Blueprint -l": "flask/app.py",
    "fedsearch read flask/app.py:1-5": "from .blueprints import Blueprint",
    "fedsearch search -e url_for -e register -l": "click/src/click/core.py",
    "fedsearch search Blueprint --ns flask --page-files 2": "--args-json",
    "fedsearch read flask/src/flask/app.py:1-8": "class Flask",
    'printf %s "secret" | sha256sum': "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b",
    "fedsearch check-config --config fedsearch.toml": "ok: 3 namespaces",
    "curl -s localhost:8080/v1/namespaces": '"name":"click"',
    "curl -s 'localhost:8080/v1/files/flask/src/flask/app.py?start_line=1&end_line=5'": "from .blueprints import",
    "curl -si -X OPTIONS localhost:8080/v1/search | grep -i '^allow'": "GET, HEAD, OPTIONS, POST",
}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mark: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a markdown file, with the ``docs-test`` mark on the line before each."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARK.match(lines[i - 1]) if i else None
        found.append(
            Block(path, i + 1, opening[1], "\n".join(lines[i + 1 : end]), (mark[1], mark[2] or "") if mark else None)
        )
        i = end + 1
    return found


ALL_BLOCKS = [b for path in DOCS for b in blocks(path)]
SH_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "sh"]


def commands(text: str) -> list[str]:
    """The commands of a ``sh`` block: comment-only and blank lines left out, backslash continuations joined."""
    found: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        found.append(pending + line)
        pending = ""
    return found


def bare(command: str) -> str:
    """A command without its trailing comment (as EXPECTED names it)."""
    return re.sub(r"\s+#\s.*$", "", command).strip()


# --- the corpus, the environment and the server ------------------------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME holding src/flask and src/click, and every block marked ``file`` written into src/."""
    home = tmp_path_factory.mktemp("home")
    for name, files in CHECKOUTS.items():
        git_repo(home / "src" / name, files)
    for block in ALL_BLOCKS:
        if block.mark and block.mark[0] == "file":
            (home / "src" / block.mark[1]).write_text(block.text + "\n", encoding="utf-8")
    return home


@pytest.fixture(scope="module")
def env(home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The commands' environment: this HOME, this virtualenv's fedsearch first on PATH, a curl that fails on
    an HTTP error status, no colours, no fedsearch settings or tokens of the caller's."""
    shims = tmp_path_factory.mktemp("shims")
    curl = shutil.which("curl")
    if curl is None:  # pragma: no cover - CI has curl (.ci/run installs it)
        pytest.skip("curl is not installed")
    (shims / "curl").write_text(f'#!/bin/sh\nexec {curl} --fail-with-body "$@"\n')
    (shims / "curl").chmod(0o755)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("FEDSEARCH_", "GH_"))}
    return {
        **keep,
        "HOME": str(home),
        "PATH": f"{shims}:{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


@pytest.fixture(scope="module")
def server(home: Path, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``fedsearch serve`` over ~/src on a free 127.0.0.1 port: its host:port."""
    log = tmp_path_factory.mktemp("server") / "stderr"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [str(BIN / "fedsearch"), "serve", "--root", str(home / "src"), "--host", "127.0.0.1", "--port", "0"],
            # its indexes apart: its builder holds the index folder for as long as it runs (a `fedsearch index`
            # of the same folder would wait for it to stop)
            env={**env, "FEDSEARCH_LOG_LEVEL": "warning", "XDG_CACHE_HOME": str(log.parent / "cache")},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + START_S
        while not (found := re.search(r"at http://(127\.0\.0\.1:\d+)/", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield found[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@dataclass(frozen=True)
class Ran:
    command: str
    returncode: int
    stdout: str
    stderr: str


def run_block(block: Block, env: dict[str, str], cwd: Path, address: str | None, scratch: Path) -> list[Ran]:
    """Run the block's commands in one bash, each one's status and output kept apart."""
    cmds = commands(block.text)
    script = ["set -u"]
    for i, cmd in enumerate(cmds):
        text = cmd.replace(SERVER_ADDRESS, address) if address else cmd
        script.append(f"{{ {text}\n}} >{scratch}/out.{i} 2>{scratch}/err.{i} </dev/null; echo $? >{scratch}/rc.{i}")
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env, timeout=300, check=False)
    ran = []
    for i, cmd in enumerate(cmds):
        rc = scratch / f"rc.{i}"
        assert rc.exists(), f"{block.where}: the block stopped before {cmd!r}"
        ran.append(
            Ran(cmd, int(rc.read_text()), (scratch / f"out.{i}").read_text(), (scratch / f"err.{i}").read_text())
        )
    return ran


# --- the tests ---------------------------------------------------------------------------------------------


def test_the_docs_have_blocks_to_run() -> None:
    """The README and docs/ hold sh blocks (a parser that found none would let every example rot unseen)."""
    assert {b.path.name for b in SH_BLOCKS} >= {"README.md", "cli.md", "api.md"}
    assert len([b for b in SH_BLOCKS if b.path.name == "README.md"]) >= 3


@pytest.mark.parametrize("block", SH_BLOCKS, ids=[b.where for b in SH_BLOCKS])
def test_every_command_runs(
    block: Block, home: Path, env: dict[str, str], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Each command of the block exits 0, prints something, never a traceback, and what EXPECTED says."""
    address = request.getfixturevalue("server") if SERVER_ADDRESS in block.text else None
    for ran in run_block(block, env, home / "src", address, tmp_path):
        where = f"{block.where}: {ran.command!r} exited {ran.returncode}\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}"
        assert ran.returncode == 0, where
        assert "Traceback" not in ran.stderr, where
        if not re.match(r"cd\s", ran.command):
            assert ran.stdout.strip(), where
        expected = EXPECTED.get(bare(ran.command))
        if expected is not None:
            assert expected in ran.stdout + ran.stderr, where


def test_every_expected_command_is_in_the_docs() -> None:
    """Each command EXPECTED checks is still written in the docs (else its check silently checks nothing)."""
    written = {bare(c) for b in SH_BLOCKS for c in commands(b.text)}
    assert set(EXPECTED) <= written, sorted(set(EXPECTED) - written)


MCP_BLOCKS = [b for b in ALL_BLOCKS if b.mark == ("mcp", "")]
CLIENT = {"name": "docs-test", "version": "0"}
SEARCH = {"query": "echo"}


@pytest.mark.parametrize("block", MCP_BLOCKS, ids=[b.where for b in MCP_BLOCKS])
def test_the_mcp_config_starts_a_server_that_searches(block: Block, home: Path, env: dict[str, str]) -> None:
    """The pasted config's command, run as a client runs it, lists the three tools and answers a search."""
    text = block.text.replace("/path/to/fedsearch/.venv/bin/", f"{BIN}/").replace("/path/to/src", str(home / "src"))
    (server,) = json.loads(text)["mcpServers"].values()
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "echo"}},
        },
    ]
    proc = subprocess.Popen(
        [server["command"], *server["args"]],
        env=env,
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, Any] = {}
    for message in messages:  # one at a time: a reply before the next request, as a client does
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        while "id" in message and message["id"] not in replies:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            reply = json.loads(line)
            replies[reply.get("id")] = reply
    proc.communicate(timeout=30)  # closes stdin: the server ends
    assert proc.returncode == 0
    tools = replies[2]["result"]["tools"]
    assert {t["name"] for t in tools} == {"search", "read_file", "namespaces"}
    answer = replies[3]["result"]["structuredContent"]
    assert [(f["namespace"], f["file_path"]) for f in answer["files"]] == [("click", "src/click/core.py")]


TOML_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "toml"]


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[b.where for b in TOML_BLOCKS])
def test_every_toml_example_is_a_valid_config(block: Block, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each TOML example parses and the config's own validation takes it (roots under this HOME)."""
    monkeypatch.setenv("HOME", str(home))
    parse_config(tomllib.loads(block.text), source=block.where)


# --- links and the generated reference ---------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slugs(path: Path) -> set[str]:
    """The anchors GitHub makes of a markdown file's headings."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"#{1,6} (.+)", line):
            text = re.sub(r"[^\w\- ]", "", heading[1].strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def links(path: Path) -> Iterator[tuple[str, str]]:
    """(target, anchor) of each relative link outside code blocks."""
    outside = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in LINK.findall(outside):
        if not re.match(r"[a-z]+:", target):
            file, _, anchor = target.partition("#")
            yield file, anchor


@pytest.mark.parametrize("doc", LINKED, ids=[str(p.relative_to(REPO)) for p in LINKED])
def test_links_resolve_inside_the_repository(doc: Path) -> None:
    """Every relative link names a file of this repository, and its #anchor a heading there."""
    for file, anchor in links(doc):
        target = (doc.parent / file).resolve() if file else doc
        assert target.is_relative_to(REPO), f"{doc.name}: {file} is outside the repository"
        assert target.exists(), f"{doc.name}: {file} does not exist"
        if anchor:
            assert target.suffix == ".md" and anchor in slugs(target), f"{doc.name}: no #{anchor} in {target.name}"


@pytest.mark.parametrize("doc", LINKED, ids=[str(p.relative_to(REPO)) for p in LINKED])
def test_nothing_outside_the_checkout_is_named(doc: Path) -> None:
    """No doc points a reader at a file a clone does not have: no ``../`` path climbing out of the
    repository (a workspace folder beside it), no absolute path of this machine."""
    text = doc.read_text(encoding="utf-8")
    for climb in re.findall(r"(?:\.\./)+[\w.-]+", text):
        assert (doc.parent / climb).resolve().is_relative_to(REPO), f"{doc.name} names {climb}, outside the repository"
    assert "/work/" not in text


def test_the_api_reference_is_generated_from_openapi() -> None:
    """docs/api.md's routes and request table are what `python -m tests.docs_api` makes of /openapi.json now."""
    text = docs_api.API_MD.read_text(encoding="utf-8")
    assert docs_api.rewritten(text) == text, "docs/api.md is out of date: run .venv/bin/python -m tests.docs_api"


def test_the_api_reference_names_every_route() -> None:
    """Every route of the OpenAPI document and every AFI route is in docs/api.md."""
    text = docs_api.API_MD.read_text(encoding="utf-8")
    app = web.Application()
    add_afi_routes(app)
    afi = {r.canonical for r in app.router.resources() if "{" not in r.canonical}
    paths = set(openapi()["paths"]) | afi | {"/openapi.json"}
    assert {p for p in paths if p not in text} == set()
