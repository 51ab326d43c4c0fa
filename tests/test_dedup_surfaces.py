"""Duplicates on every surface (issue 38): HTTP, MCP and the CLI's --json give the same groups; the
human CLI prints ``also in: ...``; an AFI Match carries the other copies in ``x-duplicates``; the
web page shows a "+1 copy" toggle (a real chromium). Two discovered checkouts, one a clone of the
other, searched by the real rg.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from adapters.ripgrep.backend import find_rg
from gateway.config import config_from_env
from gateway.http.app import create_app
from gateway.mcp.tools import build_server
from gateway.service import SearchService
from tests.helpers import held_client
from tests.test_cli_rg import fedsearch
from tests.test_dedup import FILES, checkout
from tests.test_parity import strip

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

HttpClient = TestClient[Any, Any]
REQUEST: dict[str, Any] = {"query": "register_widget"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``main`` and ``sat``: a clone of it, under one folder (both discovered as namespaces)."""
    base = tmp_path_factory.mktemp("dedup")
    checkout(base / "main", FILES)
    subprocess.run(["git", "clone", "-q", str(base / "main"), str(base / "sat")], check=True)
    return base


@pytest.fixture
async def http(aiohttp_client: Callable[..., Awaitable[HttpClient]], root: Path) -> HttpClient:
    return await aiohttp_client(create_app(config_from_env(None, str(root), env={})))


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``fedsearch search ARGS`` run where the checkouts are (paths are printed relative to it)."""
    return fedsearch(root, "search", *args, "--root", str(root))


def copies(answer: dict[str, Any]) -> dict[str, list[str]]:
    return {
        f"{g['namespace']}/{g['file_path']}": [f"{d['namespace']}/{d['file_path']}" for d in g.get("duplicates", [])]
        for g in answer["files"]
    }


class TestOneJson:
    async def test_http_mcp_and_cli_json_give_the_same_groups(self, root: Path, http: HttpClient) -> None:
        """The same request gives the same answer, duplicates and all, over HTTP, MCP and --json."""
        over_http = await (await http.post("/v1/search", json=REQUEST)).json()
        assert any(copies(over_http).values())
        service = SearchService(config_from_env(None, str(root), env={}))
        try:
            async for client in held_client(build_server(service)):
                over_mcp = (await client.call_tool("search", REQUEST)).structured_content
        finally:
            await service.aclose()
        proc = cli(root, "--args-json", json.dumps(REQUEST), "--json")
        assert proc.returncode == 0, proc.stderr
        assert over_mcp is not None
        assert strip(over_http) == strip(over_mcp) == strip(json.loads(proc.stdout))

    async def test_get_takes_dedup(self, http: HttpClient) -> None:
        """``GET /v1/search?dedup=false`` shows every copy; ``dedup:no`` in q does the same."""
        for params in ({"q": "register_widget", "dedup": "false"}, {"q": "register_widget dedup:no"}):
            answer = await (await http.get("/v1/search", params=params)).json()
            assert answer["file_count"] == 2 * len(FILES), params
            assert not any(copies(answer).values())

    async def test_afi_matches_carry_the_other_copies(self, http: HttpClient) -> None:
        """Each Match of a group with copies lists them in x-duplicates, as AFI paths; no Match is repeated."""
        reply = await (await http.post("/afi/search", json={"query": "register_widget", "path": "/"})).json()
        by_path: dict[str, list[Any]] = {}
        for match in reply["matches"]:
            by_path.setdefault(match["path"], []).append(match.get("x-duplicates"))
        assert by_path["/main/src/widgets.py"] == [["/sat/src/widgets.py"]]
        assert "/sat/src/widgets.py" not in by_path


class TestHumanCli:
    def test_also_in_names_the_other_copy(self, root: Path) -> None:
        """Under the file's path, ``also in:`` names the other copy as its path is printed."""
        proc = cli(root, "register_widget", "-g", "*/src/widgets.py", "--heading")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        at = lines.index("main/src/widgets.py")
        assert lines[at + 1] == "also in: sat/src/widgets.py"
        assert "sat/src/widgets.py" not in lines

    def test_no_dedup_prints_every_copy(self, root: Path) -> None:
        """``--no-dedup`` prints both copies as files of their own, and no ``also in:``."""
        proc = cli(root, "register_widget", "-g", "*/src/widgets.py", "--no-dedup", "--heading")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert "main/src/widgets.py" in lines and "sat/src/widgets.py" in lines
        assert not any(line.startswith("also in:") for line in lines)


# --- the web page: a real chromium -------------------------------------------------------------

try:
    from tests.test_page import BROWSER_ARGS, CHROMIUM, MISSING, open_page
except Exception:  # pragma: no cover - the browser tests' own module could not load
    MISSING = "tests.test_page could not be imported"

if MISSING is None:
    from playwright.async_api import Browser, async_playwright, expect


@pytest.mark.skipif(MISSING is not None, reason=f"browser tests skipped: {MISSING}")
class TestPage:
    @pytest.fixture
    async def browser(self) -> AsyncIterator[Browser]:
        async with async_playwright() as playwright:
            launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            yield launched
            await launched.close()

    @pytest.fixture
    async def site(self, root: Path) -> AsyncIterator[str]:
        server = TestServer(create_app(config_from_env(None, str(root), env={})), host="127.0.0.1")
        await server.start_server()
        yield str(server.make_url("/"))
        await server.close()

    async def test_a_copies_toggle_opens_the_list_of_copies(self, browser: Browser, site: str) -> None:
        """A group with a copy shows "+1 copy"; pressed, it lists the copy with a link to its file view."""
        page, watch = await open_page(browser, site)
        await page.goto(site + "?q=register_widget+file:src/widgets.py")
        group = page.locator(".file[data-namespace='main'][data-path='src/widgets.py']")
        toggle = group.locator(".copies-toggle")
        await expect(toggle).to_have_text("+1 copy")
        await expect(group.locator(".copies")).to_be_hidden()
        await toggle.click()
        await expect(toggle).to_have_attribute("aria-expanded", "true")
        copy = group.locator(".copies li")
        await expect(copy.locator(".ns")).to_have_text("sat")
        await expect(copy.locator("a.path")).to_have_attribute("href", "#/files/sat/src/widgets.py")
        await expect(page.locator(".file[data-namespace='sat']")).to_have_count(0)
        assert watch["problems"] == []
