"""The model's tokenizer in a form a process maps instead of loading: a question's tokens in a millisecond.

WordLlama's tokenizer (``tokenizers/l2_supercat_tokenizer_config.json`` in its wheel, 1.8 MB
of JSON: 32,000 pieces, 61,249 merges) takes ``tokenizers.Tokenizer.from_file`` 0.1-0.5 s
to load, every process, to encode one question (issue 52). Its configuration is a plain
byte-fallback BPE: ``▁`` put before the text and for every space, no pre-tokenizer (the
whole text is one word), each character a piece (or its UTF-8 bytes' ``<0xNN>`` pieces),
then the pair of lowest merge rank merged, leftmost first, until none is left.

:func:`write` copies the pieces and merges into a small SQLite database (``pieces``: text ->
id; ``merges``: (left id, right id) -> rank, new id), next to the declaration index,
once; :class:`Pieces` opens it read-only and memory-mapped and asks only for the pieces
and pairs of the text at hand. It follows the JSON's own algorithm step for step (the
``tokenizers`` crate's ``Word::merge_all``: a heap of (rank, position), a stale entry
checked by its new id; every byte has its piece, so no character is unknown), and
answers the same ids (tests/test_pieces.py checks it on generated texts and on every
piece of the vocabulary). A text holding one of the added tokens (``<unk>``, ``<s>``,
``</s>``: the crate splits them out first) is left to ``tokenizers`` (None), as is a
configuration other than this one (nothing written).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import sqlite3
from collections.abc import Sequence

__all__ = ["FORMAT", "Pieces", "supported", "write"]

#: The layout of the database (a change writes it again).
FORMAT = "pieces/1"
_SPACE = "\u2581"


def supported(config: dict[str, object]) -> bool:
    """Whether a ``tokenizers`` JSON configuration is the one :class:`Pieces` follows."""
    model = config.get("model")
    normalizer = config.get("normalizer")
    expected = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": _SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE},
        ],
    }
    return (
        isinstance(model, dict)
        and model.get("type") == "BPE"
        and model.get("byte_fallback") is True
        and model.get("dropout") is None
        and not model.get("continuing_subword_prefix")
        and not model.get("end_of_word_suffix")
        and not model.get("ignore_merges")
        and config.get("pre_tokenizer") is None
        and normalizer == expected
    )


def _identity(source: str) -> str:
    """What the database was written from: the JSON's size and modification time, and the format."""
    stat = os.stat(source)
    return f"{FORMAT} {stat.st_size} {stat.st_mtime_ns}"


def write(source: str, path: str) -> bool:
    """Write the pieces and merges of the ``tokenizers`` JSON at ``source`` to ``path`` (a new file put in
    place at once: a reader sees the old one or the new one); False where its configuration is not one
    :class:`Pieces` follows (nothing written)."""
    with open(source, "rb") as handle:
        config = json.load(handle)
    if not supported(config):
        return False
    model = config["model"]
    vocab: dict[str, int] = model["vocab"]
    if any(f"<0x{byte:02X}>" not in vocab for byte in range(256)):
        return False  # a character could be unknown: not followed here
    added = [t["content"] for t in config.get("added_tokens") or ()]
    merges: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, merge in enumerate(model["merges"]):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        merges[(vocab[left], vocab[right])] = (rank, vocab[left + right])  # a pair named twice: the last
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    db = sqlite3.connect(temporary)
    try:
        db.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
            "CREATE TABLE pieces (text TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE merges (a INTEGER, b INTEGER, rank INTEGER NOT NULL, id INTEGER NOT NULL,"
            " PRIMARY KEY (a, b)) WITHOUT ROWID;"
        )
        db.executemany("INSERT INTO pieces VALUES (?, ?)", vocab.items())
        db.executemany("INSERT INTO merges VALUES (?, ?, ?, ?)", ((a, b, r, i) for (a, b), (r, i) in merges.items()))
        meta = {"source": _identity(source), "added": json.dumps(added)}
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        db.commit()
    finally:
        db.close()
    os.replace(temporary, path)
    return True


class Pieces:
    """The tokenizer read from :func:`write`'s database: a text's ids, as ``tokenizers`` gives them."""

    def __init__(self, path: str, source: str) -> None:
        """Open ``path``, written from ``source`` (ValueError where it was written from another file, or
        in another format; sqlite3.Error where it cannot be read)."""
        uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro&immutable=1"
        self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            self._db.execute("PRAGMA mmap_size = 16777216")
            meta = dict(self._db.execute("SELECT key, value FROM meta"))
            if meta.get("source") != _identity(source):
                raise ValueError(f"{path} was not written from {source}")
        except BaseException:
            self._db.close()
            raise
        self._added: tuple[str, ...] = tuple(json.loads(meta.get("added", "[]")))
        self._merges: dict[tuple[int, int], tuple[int, int] | None] = {}

    def close(self) -> None:
        self._db.close()

    def _pieces(self, texts: set[str]) -> dict[str, int]:
        wanted = list(texts)
        out: dict[str, int] = {}
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            marks = ",".join("?" * len(chunk))
            out.update(self._db.execute(f"SELECT text, id FROM pieces WHERE text IN ({marks})", chunk))
        return out

    def _merge(self, a: int, b: int) -> tuple[int, int] | None:
        """The pair's (rank, new id), None where it does not merge."""
        key = (a, b)
        if key not in self._merges:
            row = self._db.execute("SELECT rank, id FROM merges WHERE a = ? AND b = ?", key).fetchone()
            self._merges[key] = None if row is None else (int(row[0]), int(row[1]))
        return self._merges[key]

    def ids(self, text: str) -> list[int] | None:
        """The ids of ``text``'s tokens (no special token added); None for a text holding an added token."""
        if any(token in text for token in self._added):
            return None
        if not text:
            return []
        chars = list(_SPACE + text.replace(" ", _SPACE))
        known = self._pieces(set(chars))
        missing = {c for c in chars if c not in known}
        codes: dict[str, list[str]] = {}
        if missing:  # each byte of its UTF-8 a piece (write() made sure every byte has one)
            try:
                codes = {c: [f"<0x{byte:02X}>" for byte in c.encode("utf-8")] for c in missing}
            except UnicodeEncodeError:  # a lone surrogate: tokenizers' to refuse
                return None
            known.update(self._pieces({code for pieces in codes.values() for code in pieces}))
        symbols: list[int] = []
        for char in chars:
            if char in codes:
                symbols.extend(known[code] for code in codes[char])
            else:
                symbols.append(known[char])
        return self._merged(symbols)

    def _merged(self, symbols: Sequence[int]) -> list[int]:
        """``Word::merge_all`` of the tokenizers crate: the lowest (rank, position) pair merged first."""
        ids = list(symbols)
        size = len(ids)
        nxt = list(range(1, size + 1))
        prev = list(range(-1, size - 1))
        alive = [True] * size
        queue: list[tuple[int, int, int]] = []
        for pos in range(size - 1):
            merge = self._merge(ids[pos], ids[pos + 1])
            if merge is not None:
                queue.append((merge[0], pos, merge[1]))
        heapq.heapify(queue)
        while queue:
            _rank, pos, new_id = heapq.heappop(queue)
            if not alive[pos] or nxt[pos] >= size:
                continue
            right = nxt[pos]
            merge = self._merge(ids[pos], ids[right])
            if merge is None or merge[1] != new_id:
                continue  # a stale entry
            ids[pos] = new_id
            alive[right] = False
            nxt[pos] = nxt[right]
            if nxt[right] < size:
                prev[nxt[right]] = pos
            if prev[pos] >= 0:
                left = prev[pos]
                merge = self._merge(ids[left], ids[pos])
                if merge is not None:
                    heapq.heappush(queue, (merge[0], left, merge[1]))
            if nxt[pos] < size:
                merge = self._merge(ids[pos], ids[nxt[pos]])
                if merge is not None:
                    heapq.heappush(queue, (merge[0], pos, merge[1]))
        return [ids[i] for i in range(size) if alive[i]]
