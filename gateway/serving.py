"""The garbage collector set up for serving, once the start-up heap is built.

An answer allocates tens of thousands of short-lived objects (decoded backend payloads,
files, hits), nearly all freed by reference counting. Collecting every 700 allocations
(the default) walked each answer's live files again and again (bench/README.md has what
that cost). The start-up heap (modules, config, compiled patterns) is long-lived:
frozen, full collections never walk it.
"""

from __future__ import annotations

import gc

__all__ = ["GC_YOUNG_THRESHOLD", "settle_heap"]

#: Allocations between two collections of the youngest generation (the default is 700).
GC_YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Freeze what is alive now and collect young garbage rarely (call once, before serving)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
