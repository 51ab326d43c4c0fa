"""A checkout's grams in one small bitset: what lets a search pass by checkouts that cannot match.

Each checkout's manifest carries :data:`BITS` bits (16 KiB): bit ``bucket(g)`` is set for
every gram ``g`` of every file the engine was given since it was last built from nothing
(a superset of the grams it holds now: a file's grams are added when it is read, never
taken away). A plan (:mod:`~gateway.index.content.plan`) whose grams are not all there, as
its ``And``/``Or`` asks, cannot match any file of the checkout. Many checkouts' bitsets
make one table (:class:`Table`), a row per bucket and a column per checkout, so one query
rules out thousands of checkouts with a few numpy operations over rows of one byte a
checkout (:meth:`Table.possible`), instead of asking each checkout's engine.

A bucket is a multiplicative hash of the gram's 24-bit code, so a bucket is shared by
about ``grams / BITS`` grams: a checkout of 40,000 distinct grams fills ~26 % of the
buckets, and a plan of 8 grams it lacks passes its bitset by chance once in ~50,000. A
large checkout fills nearly all of them and is never ruled out: nothing is lost, its own
engine still narrows it.

A second bitset of the same size holds the checkout's *quads* (four-byte grams, folded as
grams are: :func:`~gateway.index.content.grams.file_quads`), asked a plan made over quads
(:func:`~gateway.index.content.plan.plan` with ``width`` QUAD). Trigrams alone let through
a checkout that holds every trigram of ``get_netrc_auth`` in different words; its quads
(``netr``, ``trc_``...) are far rarer. Over the 39 top folders of 8 real projects, the
folders a selective query leaves fell by 20-60 % with quads (``get_netrc_auth``: 12 to 6,
of which 3 hold it). The engine holds no quads: they only rule checkouts out.

The builder's workers, which read the files, make each batch's two bitsets (:class:`Bitsets`,
in the same pass over a file's bytes as its grams), and the builder ORs them into the
checkout's (:func:`merge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.index.content.layout import GRAM_BYTES
from gateway.index.content.plan import And, Gram, Need

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["BITS", "BYTES", "Bitsets", "Table", "bucket", "empty", "full", "merge"]

#: Buckets of a checkout's bitset (a power of two), and its bytes.
SHIFT = 17
BITS = 1 << SHIFT
BYTES = BITS // 8
assert BYTES == GRAM_BYTES
#: Knuth's multiplicative hash constant (2^32 / phi).
_GOLDEN = 0x9E3779B1


def bucket(code: int) -> int:
    """The bucket of one gram (its 24-bit code)."""
    return ((code * _GOLDEN) & 0xFFFFFFFF) >> (32 - SHIFT)


def empty() -> bytes:
    """The bitset of a checkout with no grams yet."""
    return bytes(BYTES)


def full() -> bytes:
    """The bitset that rules nothing out (a checkout whose quads are not known)."""
    return b"\xff" * BYTES


def merge(bits: bytearray, other: bytes) -> None:
    """``bits`` |= ``other`` (two bitsets of :data:`BYTES` bytes)."""
    import numpy as np

    view = np.frombuffer(bits, dtype=np.uint8)
    view |= np.frombuffer(other, dtype=np.uint8)


class Bitsets:
    """The grams and the quads of the files of one batch as two bitsets, made where the files are read (a
    builder's worker: :func:`.records.read_record`): the builder ORs them into the checkout's (:func:`merge`)."""

    def __init__(self) -> None:
        import numpy as np

        self._grams = np.zeros(BITS, dtype=np.bool_)
        self._quads = np.zeros(BITS, dtype=np.bool_)

    def add_grams(self, grams: npt.NDArray[np.int32]) -> None:
        """Set the buckets of a file's distinct grams."""
        self._set(self._grams, grams.view("<u4"))

    def add_quads(self, quads: npt.NDArray[np.uint32]) -> None:
        """Set the buckets of a file's quads (:func:`~gateway.index.content.grams.file_grams` hands them on)."""
        self._set(self._quads, quads)

    @staticmethod
    def _set(flags: npt.NDArray[np.bool_], codes: npt.NDArray[np.uint32]) -> None:
        import numpy as np

        if len(codes):
            buckets = codes * np.uint32(_GOLDEN)  # uint32 wraps: :func:`bucket`'s hash
            buckets >>= np.uint32(32 - SHIFT)
            flags[buckets] = True

    def bits(self) -> tuple[bytes, bytes]:
        """The two bitsets (:data:`BYTES` bytes each): grams, quads."""
        import numpy as np

        return (
            np.packbits(self._grams, bitorder="little").tobytes(),
            np.packbits(self._quads, bitorder="little").tobytes(),
        )


class Table:
    """The bitsets of a fixed list of checkouts, a row per bucket (one byte a checkout per row's bit
    plane, so a row reads contiguous memory), and whether each checkout's bitset may be believed now."""

    def __init__(self, size: int) -> None:
        import numpy as np

        self.size = size
        #: rows[b >> 3] holds bit (b & 7) of bucket b for every checkout, one byte a checkout.
        self.rows = np.zeros((BYTES, size), dtype=np.uint8)
        #: The same of the checkouts' quad bitsets.
        self.quads = np.zeros((BYTES, size), dtype=np.uint8)
        #: Whether column i describes checkout i's files now (set and cleared by the content index).
        self.believed = np.zeros(size, dtype=np.bool_)

    def put(self, column: int, bits: bytes, quads: bytes | None = None) -> None:
        """Checkout ``column``'s bitsets (:data:`BYTES` bytes each; ``quads`` None: not known, none ruled out)."""
        import numpy as np

        self.rows[:, column] = np.frombuffer(bits, dtype=np.uint8)
        self.quads[:, column] = np.frombuffer(quads if quads is not None else full(), dtype=np.uint8)

    def possible(self, need: Need, quads: Need | None = None) -> npt.NDArray[np.bool_]:
        """For each checkout: whether its bitsets allow a file satisfying ``need`` (over grams) and ``quads``
        (the same search planned over quads; None: nothing asked of them)."""
        out: npt.NDArray[np.bool_] = self._eval(need, self.rows)
        if quads is not None and out.any():
            out &= self._eval(quads, self.quads)
        return out

    def _eval(self, need: Need, rows: Any) -> Any:
        import numpy as np

        if isinstance(need, Gram):
            b = bucket(need.code)
            return (rows[b >> 3] & (1 << (b & 7))) != 0
        parts: Sequence[Need] = need.parts if isinstance(need, And) else need.options
        out = self._eval(parts[0], rows)
        for part in parts[1:]:
            out = (out & self._eval(part, rows)) if isinstance(need, And) else (out | self._eval(part, rows))
            if isinstance(need, And) and not out.any():
                return np.zeros(self.size, dtype=np.bool_)
        return out
