"""Writing the intent index: each parsed file's declarations embedded, one row a file, and their fields.

A declaration's text (:func:`gateway.index.words.document`) is its kind, its qualified
name as words, the other words of its signature and its intent; its vector is that
text's embedding (:mod:`gateway.index.model`), a unit vector stored as float16.
:func:`embed_pending` embeds the files that have none, in batches, each batch one
transaction, and says whether none is left. The same pass writes each declaration's
fields (:mod:`gateway.index.fields`) into the fielded BM25 index, reading the file
again for its docstrings and bodies, and adds the words of their names and parameters
it has not seen to the vocabulary, embedded (:mod:`gateway.index.vocabulary`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from gateway.index.fields import field_texts
from gateway.index.store import Store, Unembedded
from gateway.index.vocabulary import MAX_WORDS, code_words
from gateway.index.words import document

__all__ = ["EMBED_FILES", "RECIPE", "embed_pending", "intents_id", "vectors_of", "write_words"]

#: Files embedded per transaction.
EMBED_FILES = 64
#: How a declaration becomes text (:func:`document`): a change makes every vector again.
RECIPE = "kind+names+signature+intent/2;fields/1;vocabulary/1"


class _Counts(Protocol):
    embedded: int
    embed_s: float


class _Encoder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_Fields = tuple[int, tuple[str, ...]]


def intents_id() -> str:
    """What the vectors are: the model and the recipe."""
    from gateway.index.model import model_id

    return f"{model_id()}/{RECIPE}"


def vectors_of(blob: bytes, count: int, dim: int) -> np.ndarray:
    """A stored row's vectors, float32, shape (count, dim)."""
    return np.frombuffer(blob, dtype="<f2", count=count * dim).reshape(count, dim).astype(np.float32)


def _lines(root: str, path: str) -> list[str]:
    """A file's lines as text (none when it cannot be read now: its fields then hold no doc or body)."""
    try:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _field_rows(store: Store, root: str, files: Sequence[Unembedded]) -> list[tuple[Unembedded, list[_Fields]]]:
    spans = store.spans_of([f.file_id for f in files])
    rows = []
    for f in files:
        lines = _lines(root, f.path)
        rows.append(
            (f, [(rid, field_texts(n, q, sig, i, s, e, lines, f.path)) for rid, n, q, sig, i, s, e in spans[f.file_id]])
        )
    return rows


def write_words(store: Store, root: str, files: Sequence[Unembedded], encoder: _Encoder | None = None) -> int:
    """Write the fields of some parsed files' declarations; how many declarations. With ``encoder``, the
    words of theirs the vocabulary lacks are added to it (:mod:`gateway.index.vocabulary`), with their vectors."""
    rows = _field_rows(store, root, files)
    written = store.put_words(rows)
    if encoder is not None:
        words: set[str] = set()
        for _, fields in rows:
            for _, texts in fields:
                words |= code_words(texts)
        room = MAX_WORDS - store.vocabulary_last()
        new = sorted(store.new_words(words))[: max(0, room)]
        if new:
            vectors = encoder.embed(new).astype("<f2")
            store.put_vocabulary([(w, vectors[i].tobytes()) for i, w in enumerate(new)])
    return written


def embed_pending(store: Store, root: str, should_stop: Callable[[], bool], stats: _Counts) -> bool:
    """Embed the parsed files of a checkout that have no vectors; True when none is left."""
    from gateway.index.model import model

    store.use_intents(intents_id())
    store.use_words()
    encoder = None
    while not should_stop():
        files = store.unembedded(root, EMBED_FILES)
        if not files:
            return True
        started = time.perf_counter()  # embed_s counts the fields and the vocabulary written too
        encoder = encoder or model()
        write_words(store, root, files, encoder)
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
