"""One file read for the content index: what kind it is for a search (:class:`~.layout.Kind`) and its grams.

The kinds follow what a scan by rg would do with the file, never what we would like it
to do: rg transcodes UTF-16 with a byte order mark, stops at the first 64 KiB buffer that
holds a NUL (printing what it matched before it), and reads everything else, however
large. A file is read whole (a 100 MB file too: it must be known to hold no NUL to be
searched by name); a file that changes while it is read is read again, and if it keeps
changing it is searched through its folder until a later pass reads it still.
"""

from __future__ import annotations

import os
import time

import msgspec

from gateway.index.content.fresh import file_stat
from gateway.index.content.grams import file_grams, tokens
from gateway.index.content.layout import ALWAYS, FOLDER, Entry, Kind, path_hash
from gateway.index.content.summary import Bitsets

__all__ = ["BINARY_PROBE", "MAX_BYTES", "MAX_GRAMS", "Record", "classify", "read_record"]

#: A NUL within this many bytes: rg prints nothing of the file. rg 14 reads a file in 64 KiB buffers and
#: stops at the first that holds a NUL, before searching it (tests/test_content_index.py holds the real
#: rg to it: a NUL at 65,535 hides the file, one at 65,536 does not).
BINARY_PROBE = 64 * 1024
#: Larger files are not indexed: every search reads them (as every scan does).
MAX_BYTES = 16 * 1024 * 1024
#: A file with more distinct grams is not indexed either (codesearch's limit): its words would
#: swell the term dictionary for almost no narrowing (generated tables, data, minified code).
MAX_GRAMS = 20_000
_BOMS = (b"\xff\xfe", b"\xfe\xff")
_READS = 2


class Record(msgspec.Struct, frozen=True):
    """A file as read: its manifest entry, and the words the engine indexes (None: not in the engine)."""

    path: str
    entry: Entry
    words: str | None


def classify(data: bytes, bitsets: Bitsets | None = None) -> tuple[Kind, str | None]:
    """A file's kind for a search, and the words the engine indexes for it (None: not in the engine); the grams
    the engine is given and the quads of the same bytes go to ``bitsets``, if given."""
    if data.startswith(_BOMS):
        return Kind.FOLDER, f"{ALWAYS} {FOLDER}"
    nul = data.find(b"\0")
    if 0 <= nul < BINARY_PROBE:
        return Kind.BINARY, None
    if len(data) > MAX_BYTES:
        return (Kind.LARGE, ALWAYS) if nul < 0 else (Kind.FOLDER, f"{ALWAYS} {FOLDER}")
    grams = file_grams(data if nul < 0 else data[:nul], bitsets.add_quads if bitsets is not None else None)
    if len(grams) > MAX_GRAMS:
        return (Kind.LARGE, ALWAYS) if nul < 0 else (Kind.FOLDER, f"{ALWAYS} {FOLDER}")
    if bitsets is not None:
        bitsets.add_grams(grams)
    if nul < 0:
        return Kind.TEXT, tokens(grams)
    return Kind.PREFIX, f"{tokens(grams)}{FOLDER}"


def read_record(root: str, path: str, bitsets: Bitsets | None = None) -> Record | None:
    """``path`` (of checkout ``root``) read and classified; None when it is gone or not a file. The quads of
    what its grams are taken from go to ``bitsets``, if given (:func:`classify`)."""
    full = os.path.join(root, path)
    for _ in range(_READS):
        before = file_stat(full)
        if before is None:
            return None
        read_ns = time.time_ns()
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        if len(data) == before[0] and file_stat(full) == before:
            kind, words = classify(data, bitsets)
            return Record(path, Entry(*before, int(kind), read_ns, path_hash(path)), words)
    # It keeps changing: searched through its folder, and read again by the next pass (mtime -1 never matches).
    entry = Entry(0, -1, -1, int(Kind.FOLDER), time.time_ns(), path_hash(path))
    return Record(path, entry, f"{ALWAYS} {FOLDER}")
