"""Where snapshots and answers live: records of named byte fields, each with a time to live.

:class:`Store` is the one interface; :class:`MemoryStore` keeps records in the process,
bounded in bytes and evicted least recently used; ``RedisStore``
(:mod:`gateway.cache.redis_store`) keeps them in Redis, shared by every replica. A
record is written whole and read a few fields at a time, so a page of a large snapshot
reads only the chunks it shows.

:class:`MemoryStore` also holds values that are not bytes (a snapshot's ranking as it
is, its hits still undecoded), counted at the size the writer gives.

A store never raises for its own failures: a record it cannot read is a miss
(``available`` then says whether that was a failure), one it cannot write is
``False``. The answer never fails because the cache did.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ENTRY_OVERHEAD", "FIELD_OVERHEAD", "MemoryStore", "Store", "record_size"]

#: What a record costs beyond its keys' and values' bytes: its slot in the LRU, the
#: record object and its field dict (CPython 3.11, measured with tracemalloc by bench/cache.py).
ENTRY_OVERHEAD = 400
#: What each field costs beyond its value's bytes: a bytes object's header and a dict slot.
FIELD_OVERHEAD = 120


def record_size(key: str, fields: Mapping[str, bytes]) -> int:
    """The bytes a record is counted as in a :class:`MemoryStore` (an upper estimate)."""
    return ENTRY_OVERHEAD + len(key) + sum(FIELD_OVERHEAD + len(name) + len(value) for name, value in fields.items())


class Store(ABC):
    """Records of named byte fields with a time to live; failures are misses, never errors."""

    #: Whether the last call reached the store (a miss with ``available`` False was a failure).
    available: bool = True

    @abstractmethod
    async def get(self, key: str, fields: Sequence[str]) -> list[bytes | None] | None:
        """The named fields of a live record (None for a field it lacks), or None without one."""

    @abstractmethod
    async def put(self, key: str, fields: Mapping[str, bytes], ttl_s: float) -> bool:
        """Keep a record for ``ttl_s`` seconds (replacing one of that key); False if it was not kept."""

    async def aclose(self) -> None:  # noqa: B027 - nothing to close by default
        """Let go of connections."""


@dataclass(slots=True)
class _Record:
    fields: Mapping[str, Any]
    expires: float
    size: int


class MemoryStore(Store):
    """Records in this process, at most ``max_bytes`` of them, the least recently used evicted first.

    A record's time to live starts when it is written and is never extended by a read:
    what is served is never older than its TTL.
    """

    def __init__(self, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evictions = 0
        self._clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    async def get(self, key: str, fields: Sequence[str]) -> list[Any] | None:
        record = self._records.get(key)
        if record is None:
            return None
        if record.expires <= self._clock():
            self._drop(key)
            return None
        self._records.move_to_end(key)
        return [record.fields.get(name) for name in fields]

    async def put(self, key: str, fields: Mapping[str, Any], ttl_s: float, size: int | None = None) -> bool:
        """Keep a record; ``size`` is its cost in bytes where its fields are not all bytes."""
        size = record_size(key, fields) if size is None else size
        if ttl_s <= 0 or size > self.max_bytes:
            return False
        if key in self._records:
            self._drop(key)
        now = self._clock()
        while self.bytes + size > self.max_bytes:
            oldest, record = next(iter(self._records.items()))
            self._drop(oldest)
            if record.expires > now:
                self.evictions += 1
        self._records[key] = _Record(dict(fields), now + ttl_s, size)
        self.bytes += size
        return True

    def clear(self) -> None:
        """Drop every record."""
        self._records.clear()
        self.bytes = 0

    def _drop(self, key: str) -> None:
        self.bytes -= self._records.pop(key).size
