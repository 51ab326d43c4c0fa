"""Query expansion from the index's own vocabulary (gateway.index.vocabulary)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import gateway.index.semantic as semantic
import gateway.index.vocabulary as vocab
from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.intents import intents_id
from gateway.index.model import model
from gateway.index.reasons import explain
from gateway.index.store import Candidate, Store
from gateway.index.vocabulary import Vocabulary, code_words, same_word
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.corpus import make_corpus

HELPERS = ("one", "two", "three", "four", "five", "six")
#: Two declarations that differ by one word, and others so that a word's idf means something.
ENGINE = """def stop_engine(engine):
    return engine


def start_engine(engine):
    return engine
""" + "".join(f"\n\ndef helper_{n}(value):\n    return value\n" for n in HELPERS)


def _built(root: Path, tmp_path: Path) -> Store:
    store = Store.open(str(tmp_path / "idx"))
    source = Source("motor", str(root))
    Builder(store, [source]).refresh_one(source, BuildStats())
    return store


class _Table:
    """A vocabulary's rows as the store gives them."""

    def __init__(self, words: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        self.rows = [(i + 1, w, vectors[i].astype("<f2").tobytes()) for i, w in enumerate(words)]

    def vocabulary_last(self) -> int:
        return len(self.rows)

    def vocabulary_since(self, after: int) -> list[tuple[int, str, bytes]]:
        return self.rows[after:]


def _unit(*values: float) -> npt.NDArray[np.float32]:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


class TestNeighbours:
    WORDS = ("start", "started", "launch", "stop", "engine")
    VECTORS = np.stack([_unit(1, 0.1, 0), _unit(1, 0.1, 0), _unit(1, 0.5, 0), _unit(0, 1, 0), _unit(0, 0, 1)])

    def vocabulary(self) -> Vocabulary:
        out = Vocabulary()
        out.sync(_Table(self.WORDS, self.VECTORS), 3)  # type: ignore[arg-type]
        return out

    @staticmethod
    def embed(words: Sequence[str]) -> npt.NDArray[np.float32]:
        known = {"begin": _unit(1, 0.1, 0), "engine": _unit(0, 0, 1), "halt": _unit(0.1, 1, 0)}
        return np.stack([known[w] for w in words])

    def test_nearest_over_the_bar_one_form_each(self) -> None:
        near = self.vocabulary().neighbours(["begin"], self.embed, count=3, bar=0.8)
        assert near == {"begin": ("start", "launch")}  # "started" is a form of "start"; "stop" under the bar

    def test_count_and_bar(self) -> None:
        vocabulary = self.vocabulary()
        assert vocabulary.neighbours(["begin"], self.embed, count=1, bar=0.8) == {"begin": ("start",)}
        assert vocabulary.neighbours(["begin"], self.embed, count=3, bar=0.999) == {"begin": ("start",)}
        assert vocabulary.neighbours(["begin"], self.embed, count=0, bar=0.0) == {}

    def test_no_form_of_a_question_word(self) -> None:
        near = self.vocabulary().neighbours(["engine", "halt"], self.embed, count=2, bar=0.6)
        assert near == {"halt": ("stop",)}  # "engine" is the question's own word, not a neighbour

    def test_the_weight_is_a_whole_share(self) -> None:
        """The FTS5 query weighs a neighbour by giving the question's words 1 / EXPANSION_WEIGHT times."""
        assert 0 < vocab.EXPANSION_WEIGHT <= 1 and (1 / vocab.EXPANSION_WEIGHT).is_integer()

    def test_forms(self) -> None:
        assert same_word("upload", "uploaded") and same_word("attachment", "attach")
        assert not same_word("mount", "attach")

    def test_code_words(self) -> None:
        assert code_words(("start engine", "motor", "engine timeout", "it says so", "")) == {
            "start",
            "engine",
            "motor",
            "timeout",
        }


class TestCoverage:
    CANDIDATE = Candidate(1, 0, "function", "start_engine", "start_engine", 1, 2, "", "def start_engine(engine)")

    def test_a_neighbour_stands_for_its_word_at_its_weight(self) -> None:
        fields = ("start engine", "", "", "", "", "", "")
        weights = {"begin": 1.0, "engine": 1.0}
        _, _, plain = explain(["begin", "engine"], fields, self.CANDIDATE, weights)
        reason, matched, near = explain(
            ["begin", "engine"], fields, self.CANDIDATE, weights, {"begin": ("start",)}, 0.5
        )
        assert plain == pytest.approx(0.5) and near == pytest.approx(0.75)
        assert reason == "name: engine, start (for begin)" and matched == ("engine", "begin")

    def test_a_neighbour_of_a_word_held_is_not_named(self) -> None:
        fields = ("start engine", "", "", "", "", "", "")
        near = {"engine": ("start",)}
        reason, matched, coverage = explain(["engine"], fields, self.CANDIDATE, {"engine": 1.0}, near, 0.5)
        assert (reason, matched, coverage) == ("name: engine", ("engine",), 1.0)


class TestBuilt:
    def test_the_builder_embeds_the_code_words(self, tmp_path: Path) -> None:
        root = make_corpus(tmp_path / "src", {"motor": {"engine.py": ENGINE}}) / "motor"
        store = _built(root, tmp_path)
        try:
            assert store.intents_of() == intents_id()
            rows = store.vocabulary_since(0)
            words = [w for _, w, _ in rows]
            assert {"engine", "start", "stop", "helper", "value"} <= set(words)
            assert not {"return", "def", "on"} & set(words)
            got = np.stack([np.frombuffer(v, "<f2").astype(np.float32) for _, _, v in rows])
            np.testing.assert_allclose(got, model().embed(words), atol=2e-3)
            assert store.new_words(["start", "begin"]) == ["begin"]
        finally:
            store.close()

    async def test_a_question_word_finds_the_codes_word(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A question's word no declaration holds ("begin") finds the code's word near it ("start"): start_engine
        comes first, the reason naming it; without expansion the two tie on "engine", and stop_engine leads."""
        root = make_corpus(tmp_path / "src", {"motor": {"engine.py": ENGINE}}) / "motor"
        _built(root, tmp_path).close()
        config = config_from_env(root=str(root.parent), env={})
        config = dataclasses.replace(
            config, index=IndexConfig(dir=str(tmp_path / "idx")), cache=CacheConfig(answer_ttl_s=0)
        )

        async def first(service: SearchService) -> dict[str, Any]:
            asked = {"query": "begin the engine", "mode": "semantic", "threshold": 0}
            answer = await service.search(parse_request(asked))
            hit: dict[str, Any] = answer["files"][0]["hits"][0]
            return hit

        monkeypatch.setattr(vocab, "MAX_SHARE", 1.0)  # in 8 declarations every word is common
        monkeypatch.setattr(semantic, "MODEL_WEIGHT", 0.0)  # the expansion alone (the model knows begin too)
        service = SearchService(config)
        try:
            hit = await first(service)
            assert hit["qualified_name"] == "start_engine"
            assert "start (for begin)" in hit["reason"]
        finally:
            await service.aclose()
        monkeypatch.setattr(vocab, "NEIGHBOURS", 0)
        service = SearchService(config)
        try:
            assert (await first(service))["qualified_name"] == "stop_engine"
        finally:
            await service.aclose()


class TestMapped:
    """The vocabulary a one-shot search maps instead of reading (Vocabulary.load, issue 52): the words and
    vectors sync() reads, in their order, for as long as the database holds the rows copied."""

    def _read(self, store: Store) -> Vocabulary:
        read = Vocabulary()
        read.sync(store, model().dim)
        return read

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        root = make_corpus(tmp_path / "src", {"motor": {"engine.py": ENGINE}}) / "motor"
        store = _built(root, tmp_path)
        (tmp_path / "maps").mkdir()
        try:
            yield store
        finally:
            store.close()

    def test_the_same_words_and_vectors(self, store: Store, tmp_path: Path) -> None:
        folder = str(tmp_path / "maps")
        expected = self._read(store)
        first = Vocabulary()
        first.load(store, model().dim, folder)  # read, then written
        [written] = list((tmp_path / "maps").iterdir())
        second = Vocabulary()
        second.load(store, model().dim, folder)  # mapped
        assert isinstance(second.matrix, np.memmap)
        for got in (first, second):
            assert got.words == expected.words and got._last == expected._last
            assert np.array_equal(got.matrix, expected.matrix) and got.matrix.dtype == np.float32
        near = second.neighbours(["engine"], model().embed)
        assert near == expected.neighbours(["engine"], model().embed)

        # words added since: the copy, then the database's new rows, and the copy written again
        store.put_vocabulary([("turbine", model().embed(["turbine"])[0].astype("<f2").tobytes())])
        third = Vocabulary()
        third.load(store, model().dim, folder)
        assert third.words == [*expected.words, "turbine"] and not isinstance(third.matrix, np.memmap)
        assert np.array_equal(third.matrix, self._read(store).matrix)
        fourth = Vocabulary()
        fourth.load(store, model().dim, folder)
        assert isinstance(fourth.matrix, np.memmap) and fourth.words == third.words

        # the rows copied gone (another model empties the vocabulary): the copy is not read
        store._db.execute("DELETE FROM vocabulary")
        store._db.commit()
        emptied = Vocabulary()
        emptied.load(store, model().dim, folder)
        assert emptied.words == [] and written.exists()

    def test_another_database_file(self, store: Store, tmp_path: Path) -> None:
        """A copy made from another file of the database (rebuilt, replaced) is not read."""
        Vocabulary().load(store, model().dim, str(tmp_path / "maps"))
        [written] = list((tmp_path / "maps").iterdir())
        assert vocab._mapped(str(written), store, model().dim) is not None
        store.identity = (0, 0)  # as if it named another file
        assert vocab._mapped(str(written), store, model().dim) is None
