"""The fielded query of one checkout in an index holding several (Store.ranked_words): the index's best first,
then the checkout's among them, asked again in full where too few are the checkout's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gateway.index.store as store_module
from gateway.index.builder import Builder, BuildStats
from gateway.index.fields import WEIGHTS, match_expression
from gateway.index.files import Source
from gateway.index.store import Store
from tests.corpus import make_corpus


def _module(prefix: str, count: int, words: str) -> str:
    one = '\n\ndef {}_{}(value):\n    """{} number {}."""\n    return value\n'
    return "".join(one.format(prefix, i, words, i) for i in range(count))


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[tuple[Store, dict[str, str]]]:
    """Two checkouts: "loud" holds 40 declarations saying "retry" thrice, "quiet" 12 saying it once."""
    root = make_corpus(
        tmp_path / "src",
        {
            "loud": {"loud.py": _module("retry_retry", 40, "Retry retry retry the call")},
            "quiet": {"quiet.py": _module("helper", 12, "Maybe retry the call")},
        },
    )
    opened = Store.open(str(tmp_path / "idx"))
    for name in ("loud", "quiet"):
        source = Source(name, str(root / name))
        Builder(opened, [source]).refresh_one(source, BuildStats())
    yield opened, {name: str(root / name) for name in ("loud", "quiet")}
    opened.close()


@pytest.mark.parametrize("limit", [1, 3, 5, 12, 30])
def test_a_limit_gives_the_checkouts_best(indexed: tuple[Store, dict[str, str]], limit: int) -> None:
    """Whether the other checkout fills the index's best rows or not, a limit gives the first rows of the whole
    ranking: the quiet checkout's 12 are all behind the loud one's 40, so at 4 x 5 the first pass finds none of
    them, and the second asks in full."""
    store, roots = indexed
    match = match_expression(["retry", "call"])
    for name, root in roots.items():
        whole = store.ranked_words(root, match, WEIGHTS, None)
        assert len(whole) == {"loud": 40, "quiet": 12}[name]
        got = store.ranked_words(root, match, WEIGHTS, limit)
        assert [round(h.score, 9) for h in got] == [round(h.score, 9) for h in whole[:limit]]
        assert {h.declaration_id for h in got} <= {h.declaration_id for h in whole}
    calls: list[str] = []
    store._db.set_trace_callback(lambda sql: calls.append(sql) if sql.startswith("SELECT d.id") else None)
    store._rankings.clear()
    store.ranked_words(roots["quiet"], match, WEIGHTS, 5)
    assert len(calls) == 2  # the loud checkout's 20 best hid the quiet one's: asked again in full
    calls.clear()
    store._rankings.clear()
    store.ranked_words(roots["loud"], match, WEIGHTS, 5)
    assert len(calls) == 1
    store._db.set_trace_callback(None)
    assert store_module._WIDER * 5 < 40


def test_the_checkouts_of_a_search_share_one_pass(indexed: tuple[Store, dict[str, str]], tmp_path: Path) -> None:
    """The same query of every checkout scores the index once (issue 52) while the database is unchanged; a
    change (another connection's commit) scores it again, and the answer follows it."""
    store, roots = indexed
    match = match_expression(["retry", "call"])
    calls: list[str] = []
    store._db.set_trace_callback(lambda sql: calls.append(sql) if sql.startswith("SELECT d.id") else None)
    first = {name: store.ranked_words(root, match, WEIGHTS, 5) for name, root in roots.items()}
    assert len(calls) == 2  # the index's best, then every row: for both checkouts
    assert [len(hits) for hits in first.values()] == [5, 5]
    again = {name: store.ranked_words(root, match, WEIGHTS, 5) for name, root in roots.items()}
    assert again == first and len(calls) == 2
    other = Store.open(str(tmp_path / "idx"))
    try:
        other.forget(roots["quiet"], ["quiet.py"])
    finally:
        other.close()
    assert store.ranked_words(roots["quiet"], match, WEIGHTS, 5) == []
    assert len(calls) == 4
    store._db.set_trace_callback(None)
