"""The page's one state, its file view and its keys (issue 52) in Debian's chromium, driven by Playwright.

* The toggles (Aa, .*, ≈), the box, the URL and the request sent derive from one state: a toggle
  pressed before typing, after typing or after clearing the box stays pressed, is in the URL and in
  the request POSTed to /v1/search/stream (intercepted); Back and Forward walk toggled searches.
* The file view is a person's (SPEC §9): the whole file (slices only past 20,000 lines), opened at
  the first hit from a file's name or at the line of a hit's link, every match marked and counted
  ("3 of 14"). On flask's ``sansio/app.py`` (tests/fixtures/flask) and on generated long files.
* Keys as on GitHub: ``/`` goes to the box unless focus is in a text field; Escape leaves the box.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from aiohttp.test_utils import TestServer

from adapters.ripgrep.backend import RipgrepSettings
from gateway.config import Config, DefaultsConfig, NamespaceConfig, ServerConfig
from gateway.http.app import create_app
from tests.corpus import make_corpus
from tests.test_page import MISSING, browser, open_page, shoot

with contextlib.suppress(ImportError):  # the dev extra installs it; without it every test skips
    from playwright.async_api import Browser, Page, expect

__all__ = ["browser"]  # the fixture, shared with tests/test_page.py
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"browser tests skipped: {MISSING}")

SANSIO = (Path(__file__).parent / "fixtures" / "flask" / "sansio_app.py.txt").read_text(encoding="utf-8")
SANSIO_PATH = "src/flask/sansio/app.py"
#: A generated 5,000-line file matched at three lines far apart.
BIG_HITS = (1200, 2500, 4990)
BIG = "".join(f"x_{n} = 'needle'\n" if n in BIG_HITS else f"value_{n} = {n}\n" for n in range(1, 5001))
#: A file past 20,000 lines: shown in slices, matched in the first and in the second (plain text: lexing
#: 20,000 lines of Python takes Pygments ~5 s here, more than this test is about).
HUGE = "".join("y = 'needle'\n" if n in (10, 20_050) else f"v{n} = {n}\n" for n in range(1, 20_101))
TOGGLES = {  # button -> (the request's field and value, the URL's parameter and value)
    "case": (("case_sensitive", True), ("case", "true")),
    "regex": (("mode", "regex"), ("mode", "regex")),
    "semantic": (("mode", "semantic"), ("mode", "semantic")),
}


@pytest.fixture
async def base(tmp_path: Path) -> AsyncIterator[str]:
    root = make_corpus(
        tmp_path / "src",
        {"flask": {SANSIO_PATH: SANSIO, "gen/big.py": BIG, "gen/huge.txt": HUGE, "notes.md": "a needle\n"}},
    )
    config = Config(
        server=ServerConfig(),
        defaults=DefaultsConfig(),
        namespaces=(
            NamespaceConfig(name="flask", backend="ripgrep", settings=RipgrepSettings(root=str(root / "flask"))),
        ),
    )
    server = TestServer(create_app(config), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("/"))
    await server.close()


def url_params(page: Page) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(page.url).query).items()}


async def sent_after(page: Page, action: Any, query: str | None = None) -> dict[str, Any]:
    """The body of the search the page POSTs to /v1/search/stream once ``action`` is done (the one
    for ``query`` where given: typed slowly, a word may be searched before it is whole)."""

    def searched(request: Any) -> bool:
        if not (request.url.endswith("/v1/search/stream") and request.method == "POST"):
            return False
        return query is None or request.post_data_json.get("query") == query

    async with page.expect_request(searched) as info:
        await action()
    body = (await info.value).post_data_json
    assert isinstance(body, dict)
    return body


async def typing(page: Page, text: str) -> dict[str, Any]:
    return await sent_after(page, lambda: page.locator("#q").press_sequentially(text, delay=20), text)


async def assert_on(page: Page, toggle: str, query: str, body: dict[str, Any]) -> None:
    """The toggle is pressed, the URL carries it and the query, and the request sent holds both."""
    (field, value), (param, shown) = TOGGLES[toggle]
    await expect(page.locator("#" + toggle)).to_have_attribute("aria-pressed", "true")
    assert body["query"] == query
    assert body.get(field) == value
    await expect(page).to_have_url(re.compile(rf"[?&]{param}={shown}(&|$)"))
    assert url_params(page).get("q") == query
    for other in TOGGLES.keys() - {toggle}:  # a toggle of the same field (mode) is off
        if TOGGLES[other][0][0] == field:
            await expect(page.locator("#" + other)).to_have_attribute("aria-pressed", "false")


class TestOneState:
    @pytest.mark.parametrize("toggle", sorted(TOGGLES))
    async def test_a_toggle_stays_on_before_after_typing_and_after_clearing(
        self, browser: Browser, base: str, toggle: str
    ) -> None:
        page, watch = await open_page(browser, base)
        await page.goto(base)
        await expect(page.locator("#q")).to_be_focused()
        button = page.locator("#" + toggle)
        # before typing: pressed on an empty box, it is in the URL at once and in the search typed after
        await button.click()
        await expect(button).to_have_attribute("aria-pressed", "true")
        assert url_params(page).get(TOGGLES[toggle][1][0]) == TOGGLES[toggle][1][1]
        await page.locator("#q").focus()
        await assert_on(page, toggle, "needle", await typing(page, "needle"))
        # pressed again after typing: off, and the search sent again without it
        body = await sent_after(page, button.click)
        await expect(button).to_have_attribute("aria-pressed", "false")
        assert TOGGLES[toggle][0][0] not in body or body[TOGGLES[toggle][0][0]] in (None, "exact")
        assert TOGGLES[toggle][1][0] not in url_params(page)
        # after typing: on, and the search sent with it
        await assert_on(page, toggle, "needle", await sent_after(page, button.click))
        # after clearing the box: it stays on, and the next words typed are searched with it
        await page.locator("#q").fill("")
        await expect(page).not_to_have_url(re.compile(r"[?&]q="))
        await expect(button).to_have_attribute("aria-pressed", "true")
        await page.locator("#q").focus()
        await assert_on(page, toggle, "blueprint", await typing(page, "blueprint"))
        # cleared, then pressed off and on again on the empty box: still on for what is typed next
        await page.locator("#q").fill("")
        await button.click()
        await expect(button).to_have_attribute("aria-pressed", "false")
        await button.click()
        await page.locator("#q").focus()
        await assert_on(page, toggle, "register", await typing(page, "register"))
        assert watch["problems"] == []

    async def test_back_and_forward_walk_toggled_searches(self, browser: Browser, base: str, tmp_path: Path) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base)
        await typing(page, "needle")
        await assert_on(page, "semantic", "needle", await sent_after(page, page.locator("#semantic").click))
        await assert_on(page, "regex", "needle", await sent_after(page, page.locator("#regex").click))
        await assert_on(page, "case", "needle", await sent_after(page, page.locator("#case").click))
        body = await sent_after(page, page.go_back)  # regex, without case
        await assert_on(page, "regex", "needle", body)
        await expect(page.locator("#case")).to_have_attribute("aria-pressed", "false")
        assert body.get("case_sensitive") is not True
        await assert_on(page, "semantic", "needle", await sent_after(page, page.go_back))
        body = await sent_after(page, page.go_back)  # the search typed: no toggle
        assert body["query"] == "needle" and body.get("mode", "exact") == "exact"
        for toggle in TOGGLES:
            await expect(page.locator("#" + toggle)).to_have_attribute("aria-pressed", "false")
        assert "mode" not in url_params(page)
        await assert_on(page, "semantic", "needle", await sent_after(page, page.go_forward))
        await assert_on(page, "regex", "needle", await sent_after(page, page.go_forward))
        await shoot(page, tmp_path, "state-forward")()

    async def test_a_link_with_a_toggle_and_no_query_keeps_it(self, browser: Browser, base: str) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base + "?mode=semantic")
        await expect(page.locator("#semantic")).to_have_attribute("aria-pressed", "true")
        await assert_on(page, "semantic", "hash a password", await typing(page, "hash a password"))


def matches_before(text: str, word: str, line: int) -> int:
    """How many times ``word`` (any case) occurs in ``text`` before ``line``."""
    return sum(len(re.findall(word, row, re.IGNORECASE)) for row in text.splitlines()[: line - 1])


class TestFileView:
    async def test_a_files_name_opens_the_whole_file_at_its_first_hit(
        self, browser: Browser, base: str, tmp_path: Path
    ) -> None:
        page, watch = await open_page(browser, base)
        await page.goto(base + "?q=register_blueprint")
        await page.locator(f".file[data-path='{SANSIO_PATH}'] .path").click()
        viewer = page.locator("#viewer")
        await expect(viewer.locator("#L567")).to_be_in_viewport()
        await expect(viewer.locator("#L567 mark")).to_have_class("current")
        await expect(viewer.locator("#L567 mark")).to_have_text("register_blueprint")
        await expect(page.locator("#viewer-matches")).to_have_text("1 of 1")
        await expect(page.locator("#viewer-meta")).to_have_text("1,010 lines")  # the whole file: no "showing"
        await expect(viewer.locator("#L1")).to_have_count(1)
        await expect(viewer.locator("#L1010")).to_have_count(1)
        await expect(page.locator("#viewer-more")).to_be_hidden()
        await shoot(page, tmp_path, "view-first-hit")()
        assert watch["problems"] == []

    async def test_every_match_marked_and_counted(self, browser: Browser, base: str) -> None:
        total = len(re.findall("blueprint", SANSIO, re.IGNORECASE))
        first = next(n for n, row in enumerate(SANSIO.splitlines(), 1) if "blueprint" in row.lower())
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=blueprint")
        await page.locator(f".file[data-path='{SANSIO_PATH}'] .path").click()
        await expect(page.locator("#viewer-matches")).to_have_text(f"1 of {total}")
        await expect(page.locator("#viewer-body mark")).to_have_count(total)
        await expect(page.locator(f"#L{first} mark").first).to_have_class("current")
        await page.keyboard.press("n")
        await page.keyboard.press("n")
        await expect(page.locator("#viewer-matches")).to_have_text(f"3 of {total}")
        await expect(page.locator("#viewer-body mark").nth(2)).to_be_in_viewport()
        await page.keyboard.press("Shift+N")
        await expect(page.locator("#viewer-matches")).to_have_text(f"2 of {total}")

    async def test_a_hits_line_link_opens_at_its_line(self, browser: Browser, base: str) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=blueprint")
        group = page.locator(f".file[data-path='{SANSIO_PATH}']")
        await group.locator("a.ln", has_text=re.compile("^567$")).first.click()
        assert page.url.endswith(f"#/files/flask/{SANSIO_PATH}?line=567")
        await expect(page.locator("#L567")).to_have_class("line hit chosen")
        await expect(page.locator("#L567")).to_be_in_viewport()
        total = len(re.findall("blueprint", SANSIO, re.IGNORECASE))
        at = matches_before(SANSIO, "blueprint", 567) + 1
        await expect(page.locator("#viewer-matches")).to_have_text(f"{at} of {total}")
        await expect(page.locator("#L567 mark").first).to_have_class("current")
        await expect(page.locator("#L1")).to_have_count(1)  # the whole file, not a slice from the line

    async def test_a_5000_line_file_whole_from_its_name_and_from_a_line(self, browser: Browser, base: str) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=needle")
        big = page.locator(".file[data-path='gen/big.py']")
        await big.locator(".path").click()
        await expect(page.locator("#L1200")).to_be_in_viewport()
        await expect(page.locator("#viewer-matches")).to_have_text("1 of 3")
        await expect(page.locator("#viewer-meta")).to_have_text("5,000 lines")
        await expect(page.locator("#L5000")).to_have_count(1)
        await page.keyboard.press("n")
        await page.keyboard.press("n")
        await expect(page.locator("#viewer-matches")).to_have_text("3 of 3")
        await expect(page.locator("#L4990")).to_be_in_viewport()
        await page.keyboard.press("Escape")
        await expect(page.locator("#viewer")).to_be_hidden()
        await big.locator("a.ln", has_text=re.compile("^2500$")).click()
        await expect(page.locator("#L2500")).to_be_in_viewport()
        await expect(page.locator("#L2500")).to_have_class("line hit chosen")
        await expect(page.locator("#viewer-matches")).to_have_text("2 of 3")

    async def test_past_20000_lines_in_slices(self, browser: Browser, base: str) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base + "?q=needle#/files/flask/gen/huge.txt")
        await expect(page.locator("#L10 mark")).to_have_class("current")
        await expect(page.locator("#viewer-matches")).to_have_text("1 of 1+")
        slice_read = 40_000  # 20,000 lines, 2,000 at a time, on a busy machine
        await expect(page.locator("#viewer-meta")).to_have_text("20,100 lines · showing 1–20,000", timeout=slice_read)
        await expect(page.locator("#viewer-more")).to_be_visible()
        await page.keyboard.press("n")  # reads the next slice to find the next match
        await expect(page.locator("#L20050 mark")).to_have_class("current", timeout=slice_read)
        await expect(page.locator("#L20050")).to_be_in_viewport()
        await expect(page.locator("#viewer-matches")).to_have_text("2 of 2")


class TestKeys:
    async def test_slash_focuses_the_box_only_outside_a_text_field(self, browser: Browser, base: str) -> None:
        page, _ = await open_page(browser, base)
        await page.goto(base)
        box = page.locator("#q")
        await typing(page, "register_blueprint")
        await page.keyboard.press("Escape")  # leaves the box
        await expect(box).not_to_be_focused()
        await page.keyboard.press("/")  # outside a field: to the box, no slash typed
        await expect(box).to_be_focused()
        await expect(box).to_have_value("register_blueprint")
        await page.keyboard.press("End")
        await page.keyboard.press("/")  # inside the box: a slash
        await expect(box).to_have_value("register_blueprint/")
        await page.locator("#regex").focus()  # a button is not a text field
        await page.keyboard.press("/")
        await expect(box).to_be_focused()
        await expect(box).to_have_value("register_blueprint/")
