"""The page's file view and facets (issue 37) in Debian's chromium, driven by Playwright.

Syntax colours from the gateway (Pygments) under the strict Content-Security-Policy, the
file's outline from the declaration index, ``n``/``N`` through the matches, and facets
counted over the whole answer (its snapshot) or marked as the page's. Screenshots go to
the test's tmp dir, and to ``$FEDSEARCH_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from adapters.ripgrep.backend import RipgrepSettings
from gateway.config import CacheConfig, Config, DefaultsConfig, NamespaceConfig, ServerConfig, TokenConfig
from gateway.http.app import create_app
from tests.corpus import make_corpus
from tests.test_page import MISSING, browser, open_page, shoot

with contextlib.suppress(ImportError):  # the dev extra installs it; without it every test skips
    from playwright.async_api import Browser, Page, expect

__all__ = ["browser"]  # the fixture, shared with tests/test_page.py
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"browser tests skipped: {MISSING}")

SHAPES = '''"""Shapes and their areas."""

import math


class Circle:
    """A circle: needle-sharp."""

    def __init__(self, radius: float) -> None:
        self.radius = radius

    def area(self) -> float:
        return math.pi * self.radius**2  # needle


def needle(count: int = 3) -> str:
    return "needle" * count
'''
#: A file longer than an agent's slice (400 lines), matched near its top and near its end.
LONG = "".join(("x = 1  # needle\n" if n in (5, 900) else f"value_{n} = {n}\n") for n in range(1, 1001))
CHECKOUTS = {
    "shapes": {
        "src/shapes.py": SHAPES,
        "src/long.py": LONG,
        "src/more.py": "needle = 1\n",
        "src/other.py": "# needle\n",
        "docs/guide.md": "# Guide\n\nA needle.\n",
        "docs/notes.md": "needle notes\n",
        "lib/tool.go": "package lib\n\n// needle in go\n",
    }
}


async def start(tmp_path: Path, snapshots: bool = True, tokens: tuple[TokenConfig, ...] = ()) -> TestServer:
    root = make_corpus(tmp_path / "src", {**CHECKOUTS, "other": {"o.py": "def hidden():\n    pass\n"}})
    config = Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=tuple(
            NamespaceConfig(name=name, backend="ripgrep", settings=RipgrepSettings(root=str(root / name)))
            for name in ("shapes", "other")
        ),
        cache=CacheConfig() if snapshots else CacheConfig(snapshot_ttl_s=0),
        tokens=tokens,
    )
    server = TestServer(create_app(config), host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def base(tmp_path: Path) -> AsyncIterator[str]:
    server = await start(tmp_path)
    yield str(server.make_url("/"))
    await server.close()


async def colour(page: Page, selector: str) -> str:
    return str(await page.locator(selector).first.evaluate("node => getComputedStyle(node).color"))


async def facet(page: Page, list_id: str) -> dict[str, int]:
    """A facet's rows as {value: count}."""
    out = {}
    for row in await page.locator(f"#{list_id} .facet").all():
        name = await row.locator(".name").text_content()
        count = await row.locator(".count").text_content()
        out[name or ""] = int(count or 0)
    return out


class TestFileView:
    async def test_syntax_colours_from_the_gateway(self, browser: Browser, base: str, tmp_path: Path) -> None:
        """The file view colours keywords, names, strings and comments with the page's own classes
        (no inline style: the CSP holds); a match inside a string is marked within its colour."""
        page, watch = await open_page(browser, base)
        await page.goto(base + "?q=needle#/files/shapes/src/shapes.py")
        viewer = page.locator("#viewer")
        await expect(viewer.locator("#L17")).to_contain_text('return "needle" * count')
        await expect(viewer.locator("#L16 .t-k").first).to_have_text("def")
        await expect(viewer.locator("#L16 .t-f")).to_have_text("needle")
        await expect(viewer.locator("#L6 .t-t")).to_have_text("Circle")
        await expect(viewer.locator("#L13 .t-c")).to_have_text(["# ", "needle"])  # a comment, the match in it
        await expect(viewer.locator("#L17 mark .t-s")).to_have_text("needle")  # the match, in the string's colour
        plain = await colour(page, "#L10 code")
        assert len({plain, await colour(page, "#L16 .t-k"), await colour(page, "#L17 .t-s")}) == 3
        assert await page.locator("#viewer [style]").count() == 0
        await shoot(page, tmp_path, "view-highlighted")()
        assert watch["problems"] == []  # a CSP violation would be reported here

    async def test_the_outline_jumps_to_a_declaration(self, browser: Browser, base: str, tmp_path: Path) -> None:
        """The outline lists the file's declarations from the index, nested; one jumps to its line."""
        page, watch = await open_page(browser, base)
        await page.goto(base + "#/files/shapes/src/shapes.py")
        outline = page.locator("#viewer-outline")
        await expect(outline).to_be_visible()
        names = await outline.locator(".sym-name").all_text_contents()
        assert names == ["Circle", "__init__", "area", "needle"]
        await expect(outline.locator(".sym", has_text="area")).to_have_class("sym depth-1")
        await expect(outline.locator(".sym", has_text="area").locator(".kind")).to_have_text("method")
        await outline.locator(".sym", has_text="area").click()
        assert page.url.endswith("#/files/shapes/src/shapes.py?line=12")
        await expect(page.locator("#L12")).to_have_class("line chosen")
        await expect(page.locator("#L12")).to_be_in_viewport()
        await shoot(page, tmp_path, "view-outline")()
        await page.set_viewport_size({"width": 390, "height": 844})
        await shoot(page, tmp_path, "view-outline-phone")()
        assert watch["problems"] == []

    async def test_n_and_shift_n_step_through_the_matches(self, browser: Browser, base: str, tmp_path: Path) -> None:
        """Opened at the first match ("1 of 4"), n goes to the next match, N to the previous one,
        wrapping at the ends."""
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=needle")
        await expect(page.locator(".file").first).to_be_visible()
        await page.locator(".file[data-path='src/shapes.py'] .path").click()
        matches = page.locator("#viewer-matches")
        marks = page.locator("#viewer-body mark")
        await expect(matches).to_have_text("1 of 4")
        await expect(marks.nth(0)).to_have_class("current")
        await page.keyboard.press("n")
        await page.keyboard.press("n")
        await expect(matches).to_have_text("3 of 4")
        await expect(marks.nth(2)).to_have_class("current")
        await expect(marks.nth(0)).not_to_have_class("current")
        await page.keyboard.press("Shift+N")
        await expect(matches).to_have_text("2 of 4")
        await page.keyboard.press("Shift+N")
        await page.keyboard.press("Shift+N")
        await expect(matches).to_have_text("4 of 4")  # wrapped
        await expect(marks.nth(3)).to_be_in_viewport()
        await shoot(page, tmp_path, "view-next-match")()
        await page.locator("#q").focus()
        await page.keyboard.press("n")  # typed into the box, not a step
        await expect(matches).to_have_text("4 of 4")

    async def test_the_whole_file_to_a_match_far_below(self, browser: Browser, base: str) -> None:
        """A file longer than an agent's 400-line slice is shown whole; n goes to a match 900 lines down."""
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=needle#/files/shapes/src/long.py")
        await expect(page.locator("#L5 mark")).to_have_class("current")
        await expect(page.locator("#viewer-matches")).to_have_text("1 of 2")
        await expect(page.locator("#viewer-meta")).to_have_text("1,000 lines")
        await expect(page.locator("#viewer-more")).to_be_hidden()
        await page.keyboard.press("n")
        await expect(page.locator("#L900 mark")).to_have_class("current")
        await expect(page.locator("#L900")).to_be_in_viewport()
        await expect(page.locator("#viewer-matches")).to_have_text("2 of 2")


class TestFacets:
    async def test_counted_over_the_whole_answer(self, browser: Browser, base: str, tmp_path: Path) -> None:
        """A page of 2 files of 7: every facet counts all 7 (the snapshot's), none says 'on this page'."""
        page, watch = await open_page(browser, base)
        await page.goto(base + "?q=needle&files=2")
        await expect(page.locator("#status")).to_contain_text("7 files")
        await expect(page.locator(".file")).to_have_count(2)
        await expect(page.locator("#facet-lang")).to_contain_text("markdown")
        assert await facet(page, "facet-lang") == {"python": 4, "markdown": 2, "go": 1}
        assert await facet(page, "facet-dir") == {"src/": 4, "docs/": 2, "lib/": 1}
        assert await facet(page, "facet-ns") == {"shapes": 7, "other": 0}
        for scope in await page.locator(".facets .scope").all():
            await expect(scope).to_be_hidden()
        assert any(url.endswith("/v1/facets") for url in watch["requests"])
        await shoot(page, tmp_path, "facets-whole")()
        await page.get_by_role("button", name="next page").click()  # page 2 reads the same snapshot
        await expect(page.locator("#status")).to_contain_text("showing 3–4")
        await expect(page.locator("#facet-dir")).to_contain_text("docs/")
        assert await facet(page, "facet-dir") == {"src/": 4, "docs/": 2, "lib/": 1}

    async def test_marked_on_this_page_without_a_snapshot(self, browser: Browser, tmp_path: Path) -> None:
        """With snapshots off, languages and folders count the page shown and say so."""
        server = await start(tmp_path, snapshots=False)
        try:
            base = str(server.make_url("/"))
            page, _ = await open_page(browser, base)
            await page.goto(base + "?q=needle&files=2")
            await expect(page.locator("#status")).to_contain_text("7 files")
            await expect(page.locator("#h-lang .scope")).to_be_visible()
            await expect(page.locator("#h-lang .scope")).to_have_text("on this page")
            await expect(page.locator("#h-dir .scope")).to_have_text("on this page")
            assert sum((await facet(page, "facet-lang")).values()) <= 2
            await shoot(page, tmp_path, "facets-page")()
        finally:
            await server.close()


class TestRoutes:
    async def test_view_and_facets_over_http(self, base: str) -> None:
        """/v1/view: runs and an outline; a slice past the end names start_line; /v1/facets without a
        cursor, or with an unknown one, names cursor."""
        async with ClientSession() as http:
            async with http.get(base + "v1/view/shapes/src/shapes.py") as response:
                body = await response.json()
            assert response.status == 200
            assert body["lines"][15][0] == {"kind": "k", "text": "def"}
            assert body["total_lines"] == 17
            async with http.get(base + "v1/outline/shapes/src/shapes.py") as response:
                body = await response.json()
            assert [s["qualified_name"] for s in body["outline"]] == [
                "Circle",
                "Circle.__init__",
                "Circle.area",
                "needle",
            ]
            async with http.get(base + "v1/outline/shapes/docs/guide.md") as response:
                assert (await response.json())["outline"] == []  # a language the index does not parse
            async with http.get(base + "v1/outline/nope/src/shapes.py") as response:
                assert response.status in (400, 404)
            async with http.get(base + "v1/view/shapes/docs/notes.md?start_line=9") as response:
                assert response.status == 400
                assert (await response.json())["field"] == "start_line"
            async with http.get(base + "v1/view/shapes/src/shapes.py?start_line=two") as response:
                assert (await response.json())["field"] == "start_line"
            async with http.post(base + "v1/facets", json={"query": "needle"}) as response:
                assert response.status == 400
                assert (await response.json())["field"] == "cursor"
            async with http.post(base + "v1/facets", json={"query": "needle", "cursor": "x" * 22}) as response:
                assert (await response.json())["field"] == "cursor"

    async def test_the_routes_need_a_token_and_hide_what_it_may_not_see(self, tmp_path: Path) -> None:
        """With tokens, /v1/view, /v1/outline and /v1/facets need one; a namespace the token may not see
        reads as one that does not exist, and a cursor is not another caller's."""
        token = "view-token-1"
        digest = hashlib.sha256(token.encode()).hexdigest()
        server = await start(tmp_path, tokens=(TokenConfig(name="t", sha256=digest, namespaces=["shapes"]),))
        base = str(server.make_url("/"))
        auth = {"Authorization": f"Bearer {token}"}
        try:
            async with ClientSession() as http:
                for path in ("v1/view/shapes/src/shapes.py", "v1/outline/shapes/src/shapes.py"):
                    async with http.get(base + path) as response:
                        assert response.status == 401
                    async with http.get(base + path, headers=auth) as response:
                        assert response.status == 200
                async with http.post(base + "v1/facets", json={"query": "x", "cursor": "c" * 22}) as response:
                    assert response.status == 401
                for route in ("view", "outline"):
                    said = []
                    for namespace in ("other", "nope"):
                        async with http.get(base + f"v1/{route}/{namespace}/o.py", headers=auth) as response:
                            said.append((response.status, (await response.json())["detail"].replace(namespace, "N")))
                    assert said[0] == said[1] and said[0][0] in (400, 404)
                    assert "hidden" not in str(said)
        finally:
            await server.close()
