"""The model's part of a score by meaning (gateway.index.semantic, issue 39): the cosine of a declaration's
vector and the question's, mixed into what its words earned, so the model reranks what the words found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import gateway.index.semantic as semantic
from gateway.index.intents import intents_id
from gateway.index.model import model
from gateway.index.semantic import MODEL_WEIGHT, Intents, calibrated, cosine_part, words_score
from gateway.index.store import Store
from gateway.index.words import document
from tests.asking import index_checkout, semantic_hits
from tests.corpus import make_corpus

LIB = '''def parse_header(line):
    """Parse one header line of a reply into its name and value."""
    return line.split(":", 1)


def parse_date(text):
    """Parse a date written as text into a timestamp."""
    return text
'''


class TestScore:
    def test_no_vector_is_the_words_alone(self) -> None:
        """Without a cosine (a file whose vectors are not written yet) the score is the words' own."""
        words = words_score(4.0, 2, 0.5)
        assert words == calibrated(0.5 * 2.0 / (2.0 + semantic.BM25_HALF) + 0.25)

    def test_the_cosine_is_mixed_at_its_weight(self) -> None:
        """A closer vector scores higher, the same words given; the mix is linear at MODEL_WEIGHT."""
        scores = [words_score(4.0, 2, 0.5, c) for c in (0.1, 0.3, 0.5, 0.9)]
        assert scores == sorted(scores) and scores[0] < scores[-1]
        raw = 0.5 * 2.0 / (2.0 + semantic.BM25_HALF) + 0.25
        assert words_score(4.0, 2, 0.5, 0.5) == calibrated((1 - MODEL_WEIGHT) * raw + MODEL_WEIGHT * cosine_part(0.5))

    def test_cosine_part(self) -> None:
        """The cosine on [0, 1]: 0 at the floor and under, 0.5 at COS_HALF, 1 at COS_FULL and over."""
        assert cosine_part(semantic.COS_FLOOR) == 0.0 == cosine_part(-1.0)
        assert cosine_part(semantic.COS_HALF) == 0.5
        assert cosine_part(semantic.COS_FULL) == 1.0 == cosine_part(1.0)


class TestReranking:
    @pytest.fixture
    def indexed(self, tmp_path: Path) -> Iterator[tuple[Store, Intents]]:
        root = make_corpus(tmp_path / "src", {"lib": {"lib.py": LIB}}) / "lib"
        index_checkout(root, tmp_path / "idx")
        store = Store.open(str(tmp_path / "idx"))
        assert store.intents_of() == intents_id()
        intents = Intents(str(root))
        intents.sync(store, model().dim)
        yield store, intents
        store.close()

    def _ranked(self, indexed: tuple[Store, Intents], toward: str) -> list[tuple[str, float]]:
        """The answer to "parse" with the question's vector that of the declaration named ``toward``."""
        store, intents = indexed
        text = next(document(*d) for f in store.texts_of(list(intents.paths)).values() for d in f if d[1] == toward)
        vector: np.ndarray = model().embed_one(text)
        files = intents.search(store, "parse", lambda: vector, 10, None)
        hits = sorted((h for f in files for h in f.hits), key=lambda h: -(h.score or 0.0))
        return [(h.name or "", h.score or 0.0) for h in hits]

    def test_the_model_reorders_what_the_words_found(
        self, indexed: tuple[Store, Intents], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Both declarations hold "parse" alike; the one whose vector is the question's comes first with the model,
        whichever it is, and without the model (weight 0) both keep the words' order whatever the vector."""
        with_header = self._ranked(indexed, "parse_header")
        with_date = self._ranked(indexed, "parse_date")
        assert [n for n, _ in with_header] == ["parse_header", "parse_date"]
        assert [n for n, _ in with_date] == ["parse_date", "parse_header"]
        monkeypatch.setattr(semantic, "MODEL_WEIGHT", 0.0)
        assert self._ranked(indexed, "parse_header") == self._ranked(indexed, "parse_date")


async def test_the_service_scores_with_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the service, the model's part changes the scores the words give (and only them)."""
    root = make_corpus(tmp_path / "src", {"lib": {"lib.py": LIB}}) / "lib"
    index_checkout(root, tmp_path / "idx")
    mixed = await semantic_hits(root, tmp_path / "idx", "turn a header line into its name and value")
    monkeypatch.setattr(semantic, "MODEL_WEIGHT", 0.0)
    words = await semantic_hits(root, tmp_path / "idx", "turn a header line into its name and value")
    assert mixed[0]["qualified_name"] == "parse_header" == words[0]["qualified_name"]
    by_name = {h["qualified_name"]: h for h in words}
    assert {h["qualified_name"] for h in mixed} == set(by_name)
    assert all(h["score"] != by_name[h["qualified_name"]]["score"] for h in mixed)
    assert all(h["reason"] == by_name[h["qualified_name"]]["reason"] for h in mixed)
