"""Words code shortens (gateway.index.abbreviations): a question's word finds the code's short form of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gateway.index.abbreviations as abbreviations
from gateway.index.abbreviations import GROUPS, alike
from gateway.index.reasons import explain
from gateway.index.store import Candidate
from gateway.index.words import STOPWORDS, stem
from tests.asking import index_checkout, semantic_hits
from tests.corpus import make_corpus

#: build_url holds the short form of the question's word ("params"), merge only that; others so that a word's idf
#: means something.
URLS = """def build_url(url, params):
    return url


def build_path(url, segments):
    return url


def merge(params):
    return params
""" + "".join(f"\n\ndef helper_{n}(value):\n    return value\n" for n in ("one", "two", "three", "four", "five"))


class TestAlike:
    def test_a_word_finds_its_short_forms_and_back(self) -> None:
        """Inflections find their group (by stem); the other forms come, none an inflection of the word."""
        assert alike(["append", "parameters", "address"]) == {"parameters": ("param",), "address": ("addr",)}
        assert alike(["config"]) == {"config": ("configuration", "cfg", "conf")}
        assert alike(["processes"]) == {"processes": ("proc",)}
        assert alike(["identifier", "max"]) == {"identifier": ("id",), "max": ("maximum",)}
        assert alike(["append", "query"]) == {}

    def test_a_form_the_question_holds_is_not_added(self) -> None:
        """Two forms of one group in a question stand for themselves."""
        assert alike(["params", "parameters"]) == {}
        assert alike(["config", "cfg"]) == {"config": ("configuration", "conf"), "cfg": ("configuration", "conf")}

    def test_groups_are_apart(self) -> None:
        """No stem leads to two groups (the first would win silently), and no form is a stop word."""
        owner: dict[str, tuple[str, ...]] = {}
        for group in GROUPS:
            assert not set(group) & STOPWORDS, group
            for word in group:
                for end in ("", "s", "es", "ed", "ing"):
                    assert owner.setdefault(stem(word + end), group) == group, (word, owner[stem(word + end)])


class TestCoverage:
    def _candidate(self) -> Candidate:
        return Candidate(1, 0, "function", "build_url", "build_url", 1, 2, "", "def build_url(url, params)")

    def test_a_short_form_holds_the_word(self) -> None:
        """A declaration holding "params" holds "parameters" in full: the reason names the form it holds."""
        fields = ("build url", "", "url params", "", "", "", "")
        same = alike(["parameters", "url"])
        reason, matched, coverage = explain(("parameters", "url"), fields, self._candidate(), alike=same)
        assert coverage == 1.0
        assert reason == "name: url · parameters: url, param (for parameters)"
        assert matched == ("url", "parameters")  # the question's words, as the reason names them
        assert explain(("parameters", "url"), fields, self._candidate())[2] == 0.5


class TestThroughTheService:
    async def test_the_short_form_ranks_its_declaration_first(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ "add parameters to a url" finds build_url (its parameter is "params") first, the reason saying so, and
        merge (only "params") where the form is asked for; a form too common to ask for neither finds nor lowers
        (build_url scores as without the groups, where it holds only "url")."""
        root = make_corpus(tmp_path / "src", {"web": {"links.py": URLS}}) / "web"
        index_checkout(root, tmp_path / "idx")

        async def hits() -> list[dict[str, Any]]:
            return await semantic_hits(root, tmp_path / "idx", "add parameters to a url")

        monkeypatch.setattr(abbreviations, "MAX_SHARE", 1.0)
        found = await hits()
        assert found[0]["qualified_name"] == "build_url"
        assert "param (for parameters)" in found[0]["reason"]
        assert found[0]["score"] > found[1]["score"]
        assert "merge" in {h["qualified_name"] for h in found}  # found by "params" alone
        monkeypatch.setattr(abbreviations, "MAX_SHARE", 0.0)  # no form asked for: each still counts where found
        found = await hits()
        assert found[0]["qualified_name"] == "build_url" and "merge" not in {h["qualified_name"] for h in found}
        unasked = found[0]["score"]
        monkeypatch.setattr(abbreviations, "_BY_STEM", {})
        found = await hits()
        assert found[0]["qualified_name"] == "build_url" and found[0]["score"] == unasked
        assert not any("for parameters" in h["reason"] for h in found)
