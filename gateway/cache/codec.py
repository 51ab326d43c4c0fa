"""Snapshots and answers as compact bytes: msgpack (msgspec), zlib-compressed (but an answer kept in-process).

A snapshot (:class:`~gateway.rank.Whole`) is a record of fields: ``h``, the header
(counts, statuses, the widening actions, what failed) and ``0``, ``1``, ... the ranked
files :data:`CHUNK` at a time, each with all of its hits. A page reads the header and
the chunks it covers (:func:`chunk_fields`), so serving page 40 of a 20,000-file
snapshot decodes two chunks, not the whole list. An answer is one field, ``a``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import msgspec

from gateway.models import FileMatch, Hit, Outcome, Status
from gateway.rank import RankedFile, Whole

__all__ = [
    "ANSWER",
    "CHUNK",
    "HEADER",
    "DecodeError",
    "chunk_fields",
    "decode_answer",
    "decode_page",
    "encode_answer",
    "encode_snapshot",
]

#: Files per stored chunk: a page (at most 200 files) reads at most five.
CHUNK = 64
HEADER = "h"
ANSWER = "a"
#: zlib level 1: a third of msgpack's size on code search answers, at ~100 MB/s.
LEVEL = 1


class DecodeError(ValueError):
    """A stored value that does not decode (another version wrote it, or it is damaged)."""


class _File(msgspec.Struct, array_like=True, frozen=True):
    namespace: str
    path: str
    score: float
    path_match: bool
    hits: tuple[Hit, ...]
    duplicates: tuple[tuple[str, str], ...] = ()
    identity: str = ""


class _Failed(msgspec.Struct, array_like=True, frozen=True):
    """A namespace that did not answer fully (an Outcome without its result)."""

    namespace: str
    backend: str
    status: Status
    took_ms: int
    error: str
    weight: float
    retry_after: float | None


class _Header(msgspec.Struct, array_like=True, frozen=True):
    total: int
    file_count: int
    weak: int
    statuses: list[dict[str, Any]]
    widen: list[dict[str, Any]]
    failed: list[_Failed]
    asked: int
    since_ns: int = 0


_encode = msgspec.msgpack.Encoder().encode
_files = msgspec.msgpack.Decoder(list[_File]).decode
_header = msgspec.msgpack.Decoder(_Header).decode
_answer = msgspec.msgpack.Decoder(dict[str, Any]).decode


def _pack(value: Any) -> bytes:
    return zlib.compress(_encode(value), LEVEL)


def _file(item: RankedFile) -> tuple[Any, ...]:
    hits = item.file.hits
    fields = (item.namespace, item.file.path, item.score, item.path_match, hits if type(hits) is tuple else tuple(hits))
    if item.duplicates or item.identity:  # a file with neither is stored as before
        return (*fields, item.duplicates, item.identity)
    return fields


def encode_snapshot(whole: Whole) -> dict[str, bytes]:
    """The record of a snapshot: its header and every ranked file, in chunks."""
    failed = [(o.namespace, o.backend, o.status, o.took_ms, o.error, o.weight, o.retry_after) for o in whole.failed]
    ordered = whole.ordered[:]  # in order: copies a group held that changed are split off now
    chunks = [
        _pack([_file(item) for item in ordered[start : start + CHUNK]]) for start in range(0, len(ordered), CHUNK)
    ]
    grown = max(0, len(ordered) - whole.total)
    header = (
        whole.total + grown,
        whole.file_count + grown,
        whole.weak,
        whole.statuses,
        whole.widen,
        failed,
        whole.asked,
        whole.since_ns,
    )
    record = {HEADER: _pack(header)}
    for n, chunk in enumerate(chunks):
        record[str(n)] = chunk
    return record


def chunk_fields(offset: int, files: int) -> tuple[int, list[str]]:
    """The first chunk a page of ``files`` files from ``offset`` needs, and the fields to read."""
    first, last = offset // CHUNK, (offset + files - 1) // CHUNK
    return first, [HEADER, *(str(n) for n in range(first, last + 1))]


def decode_page(values: Sequence[bytes | None], first: int) -> Whole:
    """A snapshot's header and consecutive chunks from chunk ``first`` (None past the end) as a Whole."""
    try:
        raw = values[0]
        if raw is None:
            raise DecodeError("no header")
        h = _header(zlib.decompress(raw))
        ordered: list[RankedFile] = []
        for chunk in values[1:]:
            if chunk is None:
                break
            ordered.extend(
                RankedFile(
                    f.namespace, FileMatch(path=f.path, hits=f.hits), f.score, f.path_match, f.duplicates, f.identity
                )
                for f in _files(zlib.decompress(chunk))
            )
    except (msgspec.DecodeError, msgspec.ValidationError, zlib.error) as exc:
        raise DecodeError(str(exc)) from None
    return Whole(
        ordered=ordered,
        total=h.total,
        file_count=h.file_count,
        weak=h.weak,
        statuses=h.statuses,
        widen=h.widen,
        failed=[
            Outcome(
                namespace=f.namespace,
                backend=f.backend,
                status=f.status,
                took_ms=f.took_ms,
                error=f.error,
                weight=f.weight,
                retry_after=f.retry_after,
            )
            for f in h.failed
        ],
        asked=h.asked,
        first=first * CHUNK,
        since_ns=h.since_ns,
    )


def encode_answer(answer: dict[str, Any], compress: bool = True) -> bytes:
    """An answer as bytes; ``compress=False`` (a store in this process, where zlib's ~0.3 ms an
    answer would be paid on the request's path to save memory only) leaves it msgpack."""
    return _pack(answer) if compress else _encode(answer)


def decode_answer(raw: bytes) -> dict[str, Any]:
    try:
        # a zlib stream starts with 0x78; a msgpack map never does (0x78 is the integer 120)
        return _answer(zlib.decompress(raw) if raw[:1] == b"\x78" else raw)
    except (msgspec.DecodeError, msgspec.ValidationError, zlib.error) as exc:
        raise DecodeError(str(exc)) from None
