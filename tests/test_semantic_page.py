"""Why a semantic hit matched, under it: on the web page (in chromium) and in the CLI's page (issue 39)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from gateway.cli.render import Style, rows
from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.http.app import create_app
from gateway.index.store import Store
from tests.corpus import make_corpus
from tests.test_page import BROWSER_ARGS, CHROMIUM, MISSING, open_page
from tests.test_semantic import FILES, _built

QUESTION = "sleep longer between attempts after an error"
REASON = 'docstring: "Call again after a failure, sleeping exponentially longer each time."'

if MISSING is None:
    from playwright.async_api import Browser, async_playwright, expect


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[str]:
    """The page of a server whose local namespaces' intent indexes are built."""
    corpus = make_corpus(tmp_path / "src", FILES)
    store = Store.open(str(tmp_path / "idx"))
    _built(store, corpus)
    store.close()
    config = dataclasses.replace(
        config_from_env(root=str(corpus), env={}),
        index=IndexConfig(dir=str(tmp_path / "idx")),
        cache=CacheConfig(answer_ttl_s=0),
    )
    server = TestServer(create_app(config), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("/"))
    await server.close()


@pytest.mark.skipif(MISSING is not None, reason=f"browser tests skipped: {MISSING}")
async def test_the_page_shows_why_under_the_hit(site: str, tmp_path: Path) -> None:
    """A search by meaning shows, under the declaration's head, the words that matched and where."""
    async with async_playwright() as playwright:
        browser: Browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page, watch = await open_page(browser, site)
            await page.goto(site + "?q=" + QUESTION.replace(" ", "+") + "&mode=semantic")
            hit = page.locator(".hit.decl", has_text="retry_with_backoff").first
            await expect(hit.locator(".why")).to_contain_text(REASON)
            await expect(hit.locator(".why")).to_have_attribute(
                "title", "why it matched: sleep, longer, after, attempts, error"
            )
            assert watch["problems"] == []
        finally:
            await browser.close()


def test_the_cli_prints_why_under_the_header() -> None:
    """The CLI prints a semantic hit's reason on the line under its header."""
    hit = {
        "qualified_name": "retry_with_backoff",
        "kind": "function",
        "start_line": 4,
        "end_line": 10,
        "score": 0.59,
        "reason": REASON + " (sleep, longer)",
        "matched_terms": ["sleep", "longer"],
    }
    printed = [row.text for row in rows({"hits": [hit]}, Style())]
    assert printed == ["retry_with_backoff  function  4-10 (0.59)", f"  why: {REASON} (sleep, longer)"]
