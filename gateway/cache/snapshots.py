"""Where a cursor's snapshot (a :class:`~gateway.rank.Whole`) is kept, and how a page is read back.

Two ways, one interface (:class:`Snapshots`):

* :class:`HeldSnapshots` (in the process) keeps the ranking itself. Nothing is encoded
  and files whose hits a backend left undecoded (ripgrep's and Zoekt's
  :class:`~gateway.models.LazyHits`) stay so: keeping a snapshot of 1,000 files costs
  about nothing, and a page decodes only the files it shows (into a copy, so the kept
  ranking does not grow as it is paged). Its files are put in order only as far as
  page 1 needed (:class:`~gateway.rank.Ordering`); the first later page sorts the rest.
  It is counted in the store's byte bound at :func:`held_size`, an estimate of what it
  holds (bench/cache.py checks it against tracemalloc).
* :class:`EncodedSnapshots` (Redis) encodes it (:mod:`gateway.cache.codec`): every
  file's hits decoded, msgpack, zlib, in chunks; a page reads only its chunks.

Either answers :meth:`Snapshots.facets`, the snapshot's facets over every file
(:mod:`gateway.view.facets`): counted from the held ranking's names when asked (no hit
decoded, nothing sorted), or kept beside the encoded chunks when it is stored.
"""

from __future__ import annotations

import functools
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import msgspec

from gateway.cache.codec import DecodeError, chunk_fields, decode_page, encode_snapshot
from gateway.cache.store import ENTRY_OVERHEAD, MemoryStore, Store
from gateway.log import get_logger
from gateway.models import FileMatch, Hit, LazyHits
from gateway.rank import Ordering, RankedFile, Whole
from gateway.view.facets import Facets, count_facets

__all__ = ["EncodedSnapshots", "HeldSnapshots", "Snapshots", "held_size", "whole_facets"]

log = get_logger("fedsearch.cache")

_WHOLE = "w"
#: The field of an encoded snapshot that holds its facets.
_FACETS = "f"
#: What a ranked file costs beyond its path and hits: its fusion entry, RankedFile, FileMatch, floats.
FILE_OVERHEAD = 300
#: What a decoded hit costs beyond its strings: the Hit struct and its tuple slot.
HIT_OVERHEAD = 170
#: What a bytes or str object costs beyond its characters (CPython: 33 for bytes, 49 for str).
_STR_OVERHEAD = 49
#: Files sized one by one; a bigger snapshot is sized from an even sample of its files (16: sizing 64
#: of them cost ~10 % of serving a 800-file remote answer, bench/overhead_wrk.py).
SAMPLE = 16
#: An undecoded value's parts are followed this deep (LazyHits -> partial -> list -> bytes).
_DEPTH = 4


class Snapshots(ABC):
    """Snapshots by key: kept whole, read back a page at a time."""

    @abstractmethod
    async def put(self, key: str, whole: Whole, ttl_s: float) -> bool:
        """Keep ``whole`` under ``key`` for ``ttl_s`` seconds; False if it was not kept."""

    @abstractmethod
    async def page(self, key: str, offset: int, files: int) -> Whole | None:
        """The snapshot's counts with (at least) its files ``offset`` .. ``offset + files``, or None."""

    @abstractmethod
    async def facets(self, key: str) -> Facets | None:
        """The snapshot's facets over every file it ranked, or None without it."""


def whole_facets(whole: Whole) -> Facets:
    """The facets of every file ``whole`` ranked (in no order: a held ranking is not sorted for it)."""
    ordered = whole.ordered
    if isinstance(ordered, Ordering):
        return count_facets(ordered.sources())
    return count_facets((item.namespace, item.file.path) for item in ordered)


def _deep(value: Any, depth: int) -> int:
    """An estimate of the bytes ``value`` holds (its strings and containers, ``depth`` levels down)."""
    if isinstance(value, bytes | str | bytearray):
        return sys.getsizeof(value)
    if depth == 0 or value is None or isinstance(value, bool | int | float):
        return 32
    if isinstance(value, list | tuple):
        if value and isinstance(value[0], bytes | str):  # lines as a backend sent them: counted at C speed
            try:
                return sys.getsizeof(value) + sum(map(len, value)) + _STR_OVERHEAD * len(value)
            except TypeError:  # not all of them strings after all
                pass
        return sys.getsizeof(value) + sum(_deep(v, depth - 1) for v in value)
    if isinstance(value, functools.partial):
        return 64 + _deep(value.args, depth - 1)
    if isinstance(value, msgspec.Struct):
        return 64 + sum(_deep(getattr(value, f), depth - 1) for f in value.__struct_fields__)
    slots = _slots(type(value))
    if slots:
        return 64 + sum(_deep(getattr(value, s, None), depth - 1) for s in slots)
    return 64


_SLOTS: dict[type, tuple[str, ...]] = {}
#: Slots that hold no hits: the path, the decoded hits, the count, ripgrep's definition test.
_NOT_HITS = frozenset({"_path", "_hits", "_count", "_first_line", "_test"})


def _slots(cls: type) -> tuple[str, ...]:
    """The slots of ``cls`` and its bases that may hold a file's undecoded hits (not its path or decoded hits)."""
    slots = _SLOTS.get(cls)
    if slots is None:
        names = getattr(cls, "__struct_fields__", None)  # a struct's fields (LazyHits is one) are its slots
        if names is None:
            names = tuple(s for c in cls.__mro__ for s in getattr(c, "__slots__", ()))
        slots = tuple(s for s in names if s not in _NOT_HITS)
        _SLOTS[cls] = slots
    return slots


def _hits_size(hits: Sequence[Hit]) -> int:
    total = 0
    for hit in hits:
        total += HIT_OVERHEAD + len(hit.text) + len(hit.symbol)
        if hit.before or hit.after:
            total += sum(len(line) + 56 for line in (*hit.before, *hit.after))
    return total


def _file_size(file: FileMatch) -> int:
    hits = file.hits
    size = FILE_OVERHEAD + len(file.path)
    if isinstance(hits, tuple):  # not LazyHits: a plain type test, not an ABC's (~300 files a snapshot)
        return size + _hits_size(hits)
    size += 64
    weight = hits.weight()
    if weight is not None:  # the backend knows what its undecoded form holds
        size += weight
    for slot in _slots(type(hits)) if weight is None else ():
        value = getattr(hits, slot, None)
        if type(value) is bytes:  # a backend's raw block for this file (ripgrep's)
            size += _STR_OVERHEAD + len(value)
        elif value is not None:
            size += _deep(value, _DEPTH - 1)
    decoded = getattr(hits, "_hits", None)  # a file shown on the first page was decoded in place
    return size + (_hits_size(decoded) if decoded is not None else 0)


def held_size(whole: Whole) -> int:
    """The bytes a held snapshot is counted as: its header, the files already in order (those the
    first page showed, decoded) one by one, the others at the mean of an even sample of
    :data:`SAMPLE` to twice as many files (all of them when there are fewer): sizing every hit
    of 20,000 files would cost as much as ranking them."""
    size = ENTRY_OVERHEAD + sum(len(str(s)) for s in whole.statuses) + sum(len(str(a)) for a in whole.widen)
    ordered = whole.ordered
    exact: list[RankedFile] = ordered.ready()[:SAMPLE] if isinstance(ordered, Ordering) else []
    files = ordered.files() if isinstance(ordered, Ordering) else [item.file for item in ordered]
    size += sum(_file_size(item.file) for item in exact)
    if len(files) > len(exact):
        sample = files[:: max(1, len(files) // SAMPLE)]
        size += sum(_file_size(file) for file in sample) * (len(files) - len(exact)) // len(sample)
    return size


def _decoded(hits: tuple[Hit, ...] | LazyHits) -> tuple[Hit, ...] | LazyHits:
    """A file's hits for a page, decoded into a copy: the kept LazyHits stays undecoded."""
    if not isinstance(hits, LazyHits) or getattr(hits, "_hits", None) is not None:
        return hits
    try:
        return hits.decode()
    except Exception:  # garbage found late: LazyHits' own fallback (one path-level hit)
        return tuple(hits)


class HeldSnapshots(Snapshots):
    """Snapshots held as they are in a :class:`MemoryStore` (see the module docstring)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def put(self, key: str, whole: Whole, ttl_s: float) -> bool:
        return await self.store.put(key, {_WHOLE: whole}, ttl_s, size=held_size(whole))

    async def page(self, key: str, offset: int, files: int) -> Whole | None:
        got = await self.store.get(key, (_WHOLE,))
        if not got:
            return None
        whole: Whole = got[0]
        window = [
            RankedFile(
                item.namespace,
                FileMatch(path=item.file.path, hits=_decoded(item.file.hits)),
                item.score,
                item.path_match,
                item.duplicates,
                item.identity,
            )
            for item in whole.ordered[offset : offset + files]
        ]
        grown = max(0, len(whole.ordered) - whole.total)  # copies split off once their group was read
        return Whole(
            ordered=window,
            total=whole.total + grown,
            file_count=whole.file_count + grown,
            weak=whole.weak,
            statuses=whole.statuses,
            widen=whole.widen,
            failed=whole.failed,
            asked=whole.asked,
            first=offset,
            since_ns=whole.since_ns,
        )

    async def facets(self, key: str) -> Facets | None:
        got = await self.store.get(key, (_WHOLE,))
        return whole_facets(got[0]) if got else None


class EncodedSnapshots(Snapshots):
    """Snapshots encoded into a byte :class:`Store` (Redis), read back a few chunks at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def put(self, key: str, whole: Whole, ttl_s: float) -> bool:
        record = encode_snapshot(whole)
        record[_FACETS] = msgspec.msgpack.encode(whole_facets(whole))
        return await self.store.put(key, record, ttl_s)

    async def facets(self, key: str) -> Facets | None:
        got = await self.store.get(key, (_FACETS,))
        if not got or got[0] is None:
            return None
        try:
            return msgspec.msgpack.decode(got[0], type=Facets)
        except msgspec.DecodeError as exc:
            log.warning("cache_undecodable", kind="facets", error=str(exc))
            return None

    async def page(self, key: str, offset: int, files: int) -> Whole | None:
        first, fields = chunk_fields(offset, files)
        got = await self.store.get(key, fields)
        if not got or got[0] is None:
            return None
        try:
            return decode_page(got, first)
        except DecodeError as exc:
            log.warning("cache_undecodable", kind="snapshot", error=str(exc))
            return None
