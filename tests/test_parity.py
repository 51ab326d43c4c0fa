"""Invariant 10: HTTP (POST and GET), MCP (in memory and stdio) and `--json` give the same JSON.

One request goes through every surface; the answers are equal, timing and cursor values aside
(the CLI searching in-process keeps no snapshot, so its next page carries none). A next action
taken from one surface runs verbatim on the others and gives the same next page.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from mcp import Client, StdioServerParameters

from gateway.config import config_from_env
from gateway.http.app import create_app
from tests.corpus import make_corpus
from tests.helpers import fedsearch_command, mcp_over, subprocess_env

REPO = Path(__file__).resolve().parents[1]
REQUEST: dict[str, Any] = {"query": "register_widget", "files": 2, "context_lines": 1, "paths": ["!vendor/**"]}
GET_PARAMS = [("q", "register_widget"), ("files", "2"), ("context", "1"), ("path", "!vendor/**")]

HttpClient = TestClient[Any, Any]
Surface = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def strip(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without its timing fields and cursor values (each process names its own snapshots)."""
    out = {k: v for k, v in answer.items() if k != "took_ms"}
    out["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    if "next" in answer:
        out["next"] = [{**a, "args": {**a["args"], "cursor": None}} for a in answer["next"]]
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("parity"))


@pytest.fixture
async def http(aiohttp_client: Callable[..., Awaitable[HttpClient]], root: Path) -> HttpClient:
    return await aiohttp_client(create_app(config_from_env(None, str(root), env={})))


@pytest.fixture
async def mcp_client(root: Path) -> AsyncIterator[Client]:
    async for c in mcp_over(root):
        yield c


def cli(root: Path, args: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "search", "--args-json", json.dumps(args), "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
        env=subprocess_env(),
    )
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


async def test_every_surface_gives_the_same_answer(root: Path, http: HttpClient, mcp_client: Client) -> None:
    """POST, GET, MCP in memory, MCP over stdio and the CLI answer one request with equal JSON."""
    post = await (await http.post("/v1/search", json=REQUEST)).json()
    get = await (await http.get("/v1/search", params=GET_PARAMS)).json()
    memory = (await mcp_client.call_tool("search", REQUEST)).structured_content
    command, *args = fedsearch_command()
    params = StdioServerParameters(
        command=command, args=[*args, "mcp", "--root", str(root)], env=subprocess_env(), cwd=str(REPO)
    )
    async with Client(params, raise_exceptions=True) as remote:
        stdio = (await remote.call_tool("search", REQUEST)).structured_content
    from_cli = cli(root, REQUEST)
    assert post["truncated"] and post["files"]
    expected = strip(post)
    for answer in (get, memory, stdio, from_cli):
        assert answer is not None
        assert strip(answer) == expected


async def test_a_next_action_runs_verbatim_everywhere(root: Path, http: HttpClient, mcp_client: Client) -> None:
    """The next-page action from the CLI's answer, given as it is to HTTP, MCP and the CLI, gives one page."""
    first = cli(root, REQUEST)
    action = next(a for a in first["next"] if a["reason"].startswith("next page"))
    args = action["args"]
    over_http = await (await http.post("/v1/search", json=args)).json()
    over_mcp = (await mcp_client.call_tool("search", args)).structured_content
    over_cli = cli(root, args)
    assert over_mcp is not None
    assert strip(over_http) == strip(over_mcp) == strip(over_cli)
    assert over_http["limits"]["offset"] == 2
    assert {g["file_path"] for g in over_http["files"]}.isdisjoint({g["file_path"] for g in first["files"]})
