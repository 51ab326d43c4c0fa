"""The docs that describe the code (gateway.index.prose): sentences naming a declaration, written by the builder,
asked by a search by meaning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gateway.index.prose as prose
from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.prose import mentions, write_prose
from gateway.index.store import Store
from tests.asking import index_checkout, semantic_hits
from tests.corpus import make_corpus

TRANSPORT = '''class MockTransport:
    """A transport that calls a handler."""

    def handle(self, request):
        return request


class HTTPTransport:
    """A transport that sends requests."""

    def handle(self, request):
        return request
''' + "".join(f"\n\ndef helper_{n}(value):\n    return value\n" for n in ("one", "two", "three", "four", "five"))
GUIDE = """# Testing

During testing it is useful to fake the server's replies without a network:
use `MockTransport` for that. Everything else goes through HTTPTransport.
"""
TESTS = "def test_helper_one_returns_its_value():\n    assert True\n"


def _build(root: Path, tmp_path: Path) -> Store:
    store = Store.open(str(tmp_path / "idx"))
    source = Source("web", str(root))
    Builder(store, [source]).refresh_one(source, BuildStats())
    return store


class TestMentions:
    def test_names_written_as_code(self) -> None:
        """A name in backticks, called, or after a dot is a mention; a bare word is not."""
        text = "Use `MockTransport` here. Call helper_one(x) then. Or client.handle it. HTTPTransport is plain."
        names = frozenset({"MockTransport", "helper_one", "handle", "HTTPTransport"})
        found = dict(mentions(text, names))
        assert found == {
            "MockTransport": "Use `MockTransport` here.",
            "helper_one": "Call helper_one(x) then.",
            "handle": "Or client.handle it.",
        }

    def test_a_long_sentence_is_cut(self) -> None:
        text = "`MockTransport` " + "word " * 400
        ((_, sentence),) = mentions(text, frozenset({"MockTransport"}))
        assert len(sentence) == prose.SENTENCE_CHARS


class TestWritten:
    def test_the_builder_writes_a_checkouts_prose(self, tmp_path: Path) -> None:
        """The guide's sentence joins MockTransport's prose (not HTTPTransport's, named bare), and a test's name
        its helper's; a pass that changed nothing writes nothing again, one that did writes it anew."""
        files = {"web": {"transport.py": TRANSPORT, "docs/testing.md": GUIDE, "tests/test_helpers.py": TESTS}}
        root = make_corpus(tmp_path / "src", files) / "web"
        store = _build(root, tmp_path)
        try:
            rows = dict(
                store._db.execute(
                    "SELECT d.qualified_name, p.prose FROM declaration_prose p JOIN declarations d ON d.id = p.rowid"
                ).fetchall()
            )
            assert rows == {
                "MockTransport": "During testing it is useful to fake the server's replies without a network: "
                "use `MockTransport` for that.",
                "helper_one": "returns its value",
            }
            assert write_prose(store, str(root), lambda: ["docs/testing.md"]) is None  # nothing changed
            (root / "transport.py").write_text(TRANSPORT.replace("class HTTPTransport", "class HttpTransport"))
            source = Source("web", str(root))
            Builder(store, [source]).refresh_one(source, BuildStats())
            (count,) = store._db.execute("SELECT count(*) FROM declaration_prose").fetchone()
            assert count == 2  # written again, whole: the declarations' new ids
            ids = {rid for (rid,) in store._db.execute("SELECT rowid FROM declaration_prose")}
            assert ids <= {rid for (rid,) in store._db.execute("SELECT id FROM declarations")}
        finally:
            store.close()

    def test_only_what_the_namespace_lists_is_read(self, tmp_path: Path) -> None:
        """A prose file the namespace excludes, or its .gitignore hides, is never read: its sentences appear
        nowhere (the same guide under three names, two of them out of the namespace's view)."""
        secret = GUIDE.replace("During testing", "Internally")
        files = {
            "web": {
                "transport.py": TRANSPORT,
                ".gitignore": "notes/\n",
                "notes/private.md": secret.replace("Internally", "Privately"),
                "secret/plan.md": secret,
            }
        }
        root = make_corpus(tmp_path / "src", files) / "web"
        store = Store.open(str(tmp_path / "idx"))
        try:
            source = Source("web", str(root), exclude=("secret/**",))
            Builder(store, [source]).refresh_one(source, BuildStats())
            assert store._db.execute("SELECT count(*) FROM declaration_prose").fetchone() == (0,)
            (root / "docs").mkdir()
            (root / "docs" / "testing.md").write_text(GUIDE)
            store.forget(str(root), [])  # the checkout changed: its prose is written again
            Builder(store, [source]).refresh_one(source, BuildStats())
            (text,) = store._db.execute("SELECT prose FROM declaration_prose").fetchone()
            assert text.startswith("During testing") and "Internally" not in text and "Privately" not in text
        finally:
            store.close()

    def test_a_forgotten_declaration_takes_its_prose(self, tmp_path: Path) -> None:
        files = {"web": {"transport.py": TRANSPORT, "docs/testing.md": GUIDE}}
        root = make_corpus(tmp_path / "src", files) / "web"
        store = _build(root, tmp_path)
        try:
            store.forget(str(root), ["transport.py"])
            assert store._db.execute("SELECT count(*) FROM declaration_prose").fetchone() == (0,)
        finally:
            store.close()


class TestAsked:
    async def test_a_question_in_the_docs_words_finds_the_declaration(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ "fake the server's replies" is in the guide's sentence only: MockTransport answers first, the reason
        quoting it; with the prose left out, nothing in MockTransport holds those words."""
        files = {"web": {"transport.py": TRANSPORT, "docs/testing.md": GUIDE}}
        root = make_corpus(tmp_path / "src", files) / "web"
        index_checkout(root, tmp_path / "idx")

        async def hits() -> list[dict[str, Any]]:
            return await semantic_hits(root, tmp_path / "idx", "fake the server replies")

        found = await hits()
        assert found[0]["qualified_name"] == "MockTransport"
        assert found[0]["reason"].startswith('docs: "During testing it is useful to fake the server')
        monkeypatch.setattr(prose, "WEIGHT", 0.0)
        assert all(h["qualified_name"] != "MockTransport" or "docs:" not in h["reason"] for h in await hits())
