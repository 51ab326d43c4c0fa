"""The static embedding model of the intent index: WordLlama's weights, read from its wheel.

``wordllama`` ships its 256-dimension token embeddings
(``weights/l2_supercat_256.safetensors``, float16) and its tokenizer
(``tokenizers/l2_supercat_tokenizer_config.json``) inside the package, so nothing is
downloaded, ever. A text's vector is the mean of its tokens' embeddings, normalised:
exactly what ``WordLlama.embed(norm=True)`` computes (a test checks it), without
importing ``wordllama`` itself, whose import configures the root logger and whose
loader looks for a download first.

The weights are memory-mapped, not read: the 16 MB matrix is shared through the page
cache by every process that uses it (``serve --workers``, the builder), and costs a
process only the rows it touches. :func:`model` loads it once per process, on first use
(a search in exact mode never does). The tokenizer is loaded when first used (the builder,
a server); a one-shot search by meaning reads its mapped form instead
(:meth:`Model.use_pieces`, :mod:`gateway.index.pieces`: 1-2 ms a question, where loading
the JSON took 0.1-0.5 s; issue 52).
"""

from __future__ import annotations

import functools
import json
import os
import struct
import threading
from collections.abc import Sequence
from importlib import util
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from gateway.index.pieces import Pieces

__all__ = ["DIM", "Model", "ModelMissing", "Vectors", "model", "model_id"]

#: The configuration of the weights inside the wheel, and their width.
CONFIG = "l2_supercat"
DIM = 256
_WEIGHTS = f"weights/{CONFIG}_{DIM}.safetensors"
_TOKENIZER = f"tokenizers/{CONFIG}_tokenizer_config.json"
_TENSOR = "embedding.weight"
#: The file name (in the index's folder, ``.sqlite3`` added) of the tokenizer's mapped form.
PIECES = f"tokenizer-{CONFIG}"
#: Texts embedded per batch (their tokens gathered at once).
BATCH = 256
#: Tokens of one text that count (a declaration's text is short; a pasted file is not).
MAX_TOKENS = 256

Vectors = npt.NDArray[np.float32]


class ModelMissing(GatewayError, RuntimeError):
    """The embedding model's package is not installed, or its files are not in it."""


def _package_dir() -> str:
    """The installed ``wordllama`` folder, found without importing it."""
    spec = util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing("the wordllama package is not installed (pip install wordllama)")
    return str(next(iter(spec.submodule_search_locations)))


@functools.cache
def model_id() -> str:
    """What made the vectors: the model's file and version (vectors of another are made again)."""
    version = _installed_version()
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version("wordllama")
        except metadata.PackageNotFoundError:
            version = "?"
    return f"wordllama-{CONFIG}-{DIM}@{version}"


def _installed_version() -> str | None:
    """The ``Version`` of the one ``wordllama-*.dist-info`` beside the installed package, as
    ``importlib.metadata`` reads it, without importing that (30 ms of a one-shot search: issue 52); None
    where there is not exactly one."""
    try:
        parent = os.path.dirname(_package_dir())
        infos = [n for n in os.listdir(parent) if n.startswith("wordllama-") and n.endswith(".dist-info")]
        if len(infos) != 1:
            return None
        with open(os.path.join(parent, infos[0], "METADATA"), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip() or None
                if not line.strip():
                    return None  # the headers end
    except (OSError, ModelMissing, UnicodeDecodeError):
        return None
    return None


def _memmap(path: str) -> npt.NDArray[np.float16]:
    """The embedding tensor of a safetensors file, mapped (its 8-byte header length, JSON header, data)."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    entry = header[_TENSOR]
    if entry["dtype"] != "F16" or len(entry["shape"]) != 2 or entry["shape"][1] != DIM:
        raise ModelMissing(f"unexpected weights in {path}: {entry['dtype']} {entry['shape']}")
    begin, _ = entry["data_offsets"]
    rows, dim = entry["shape"]
    return np.memmap(path, dtype=np.float16, mode="r", offset=8 + size + begin, shape=(rows, dim))


class Model:
    """A tokenizer and its token embeddings: texts in, unit vectors out."""

    def __init__(self, folder: str) -> None:
        weights = os.path.join(folder, _WEIGHTS)
        self.source = os.path.join(folder, _TOKENIZER)
        if not (os.path.isfile(weights) and os.path.isfile(self.source)):
            raise ModelMissing(f"the wordllama package at {folder} lacks {_WEIGHTS} or {_TOKENIZER}")
        self.tokens = _memmap(weights)
        self.dim = DIM
        self._tokenizer: Tokenizer | None = None
        self._loading = threading.Lock()
        self._pieces: Pieces | None = None

    @property
    def tokenizer(self) -> Tokenizer:
        """The ``tokenizers`` tokenizer, loaded on first use (0.1-0.5 s: the builder and a server load it once;
        a one-shot search asks :meth:`use_pieces` instead)."""
        if self._tokenizer is None:
            with self._loading:
                if self._tokenizer is None:
                    from tokenizers import Tokenizer  # here: only a semantic search or the builder pays for it

                    tokenizer = Tokenizer.from_file(self.source)
                    tokenizer.no_truncation()
                    tokenizer.no_padding()
                    self._tokenizer = tokenizer
        return self._tokenizer

    def use_pieces(self, folder: str) -> bool:
        """Tokenize with the tokenizer's mapped form (:mod:`gateway.index.pieces`) kept in ``folder`` (written
        there first where it is missing or was written from another file): for a process that embeds a few
        texts, a question, and would spend more on loading the tokenizer than on everything else. False
        (``tokenizers`` used, as before) where that form cannot be written or read."""
        import sqlite3

        from gateway.index import pieces

        path = os.path.join(folder, f"{PIECES}.sqlite3")
        for attempt in range(2):
            try:
                self._pieces = pieces.Pieces(path, self.source)
                return True
            except (OSError, ValueError, sqlite3.Error):
                if attempt or not _written(path, self.source):
                    return False
        return False

    def _ids(self, text: str) -> list[int]:
        ids = self._pieces.ids(text) if self._pieces is not None else None
        if ids is None:
            ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids[:MAX_TOKENS]

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per text (all zeros for a text with no tokens), float32, shape (n, DIM)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        last = self.tokens.shape[0] - 1
        for begin in range(0, len(texts), BATCH):
            ids = [self._ids(t) for t in texts[begin : begin + BATCH]]
            counts = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter((t for i in ids for t in i), dtype=np.int64, count=int(counts.sum()))
            if not flat.size:
                continue
            np.minimum(np.maximum(flat, 0, out=flat), last, out=flat)  # np.clip's first call costs 10-30 ms
            rows = np.asarray(self.tokens[flat], dtype=np.float32)
            filled = np.nonzero(counts)[0]
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[filled]
            sums = np.add.reduceat(rows, starts, axis=0)
            means = sums / counts[filled, None].astype(np.float32)
            norms = np.linalg.norm(means, axis=1, keepdims=True)
            np.divide(means, norms, out=means, where=norms > 0)
            out[begin + filled] = means
        return out

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """The unit vector of one text."""
        vector: npt.NDArray[np.float32] = self.embed([text])[0]
        return vector


def _written(path: str, source: str) -> bool:
    """Write the mapped form of the tokenizer at ``source`` to ``path``; whether it was."""
    import sqlite3

    from gateway.index import pieces

    try:
        return pieces.write(source, path)
    except (OSError, ValueError, KeyError, sqlite3.Error):
        return False


_lock = threading.Lock()
_model: Model | None = None


def model() -> Model:
    """The process's model, loaded on first use (ModelMissing if the package is not there)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                _model = Model(_package_dir())
    return _model
