"""Writing the intent index: each parsed file's declarations embedded, one row a file.

A declaration's text (:func:`gateway.index.words.document`) is its kind, its qualified
name as words, the other words of its signature and its intent; its vector is that
text's embedding (:mod:`gateway.index.model`), a unit vector stored as float16.
:func:`embed_pending` embeds the files that have none, in batches, each batch one
transaction, and says whether none is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from gateway.index.store import Store
from gateway.index.words import document

__all__ = ["EMBED_FILES", "RECIPE", "embed_pending", "intents_id", "vectors_of"]

#: Files embedded per transaction.
EMBED_FILES = 64
#: How a declaration becomes text (:func:`document`): a change makes every vector again.
RECIPE = "kind+names+signature+intent/2"


class _Counts(Protocol):
    embedded: int
    embed_s: float


def intents_id() -> str:
    """What the vectors are: the model and the recipe."""
    from gateway.index.model import model_id

    return f"{model_id()}/{RECIPE}"


def vectors_of(blob: bytes, count: int, dim: int) -> np.ndarray:
    """A stored row's vectors, float32, shape (count, dim)."""
    return np.frombuffer(blob, dtype="<f2", count=count * dim).reshape(count, dim).astype(np.float32)


def embed_pending(store: Store, root: str, should_stop: Callable[[], bool], stats: _Counts) -> bool:
    """Embed the parsed files of a checkout that have no vectors; True when none is left."""
    from gateway.index.model import model

    store.use_intents(intents_id())
    encoder = None
    while not should_stop():
        files = store.unembedded(root, EMBED_FILES)
        if not files:
            return True
        started = time.perf_counter()
        encoder = encoder or model()
        texts = store.texts_of([f.file_id for f in files])
        documents: list[str] = []
        for f in files:
            documents.extend(document(*decl) for decl in texts[f.file_id])
        vectors = encoder.embed(documents).astype("<f2") if documents else np.zeros((0, encoder.dim), "<f2")
        rows = []
        at = 0
        for f in files:
            n = len(texts[f.file_id])
            rows.append((f, n, vectors[at : at + n].tobytes()))
            at += n
        store.put_intents(rows)  # a file written again meanwhile has no row: the next batch takes it
        stats.embedded += len(documents)
        stats.embed_s += time.perf_counter() - started
    return False
