"""The docs that describe the code, for bench/retrieval.py's methods: the prose the builder writes.

The builder writes each checkout's prose (:mod:`gateway.index.prose`: the sentences of
its docs, other docstrings and test names that name a declaration) in the table
``declaration_prose``; the service's search asks it (``bench/semantic.py --prose W``
sets its weight, 0 to leave it out). Here :func:`prose_scores` reads it for the methods
ranked one by one.
"""

from __future__ import annotations

from gateway.index.fields import match_expression
from gateway.index.prose import WEIGHT
from gateway.index.store import Store
from gateway.index.words import query_terms

__all__ = ["PROSE_WEIGHT", "prose_count", "prose_scores"]

#: The weight of prose's bm25 beside the declaration's own row's (the service's).
PROSE_WEIGHT = WEIGHT


def prose_count(store: Store, root: str) -> int:
    """How many of a checkout's declarations have prose (the builder wrote it)."""
    (count,) = store._db.execute(
        "SELECT count(*) FROM declaration_prose p JOIN declarations d ON d.id = p.rowid "
        "JOIN files f ON f.id = d.file_id WHERE f.root = ?",
        (root,),
    ).fetchone()
    return int(count)


def prose_scores(store: Store, root: str, query: str) -> dict[int, float]:
    """Declaration id -> the bm25 of its prose for ``query`` (those whose prose holds a word of it)."""
    match = match_expression(query_terms(query))
    if not match:
        return {}
    return {h.declaration_id: h.score for h in store.ranked_prose(root, match)}
