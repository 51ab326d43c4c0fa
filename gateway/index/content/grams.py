"""Trigrams of a file's bytes, as the content index holds them and the query planner asks for them.

A gram is three consecutive bytes of the text with ASCII letters folded to lower case,
as a 24-bit integer (``b0 | b1 << 8 | b2 << 16``: the three bytes read as a little-endian
number, which numpy reads straight from the bytes). One folded index serves both cases:
a case-sensitive search asks for folded grams too (rg confirms the case), and a
case-insensitive one finds every ASCII case variant. Unicode simple case folding,
which ``rg -i`` uses, makes exactly two non-ASCII characters equal to ASCII letters:
KELVIN SIGN (U+212A) is ``k`` and LATIN SMALL LETTER LONG S (U+017F) is ``s``. A file
holding either is also read with them written as ``k`` and ``s``, and its grams are
the union of both readings, so ``rg -i kelvin`` finds ``\\u212aelvin`` through the index.
Any other non-ASCII character is kept as its UTF-8 bytes (the planner never asks a
case-insensitive search for a gram that holds one).

:func:`file_grams` is the builder's: a file's distinct grams in one pass over a
:mod:`numpy` view of its bytes (~50-80 MB/s a core); :func:`text_grams` is the
planner's, for the few bytes of a pattern. :func:`tokens` writes grams as the
whitespace-separated words the index engine stores (4 characters each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is the builder's: a search plans its grams without it (its import costs ~60 ms)
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ALPHABET",
    "FOLD",
    "GRAM",
    "KELVIN",
    "LONG_S",
    "QUAD",
    "file_grams",
    "file_quads",
    "fold",
    "text_codes",
    "text_grams",
    "token",
    "tokens",
]

#: Bytes in a gram.
GRAM = 3
#: Bytes in a quad: the four-byte grams a checkout's second bitset holds (:mod:`.summary`), read as grams are.
QUAD = 4
#: ASCII upper case to lower case; every other byte as it is.
FOLD = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
#: The two non-ASCII characters that ``rg -i`` takes for ASCII letters, in UTF-8.
KELVIN = "\u212a".encode()
LONG_S = "\u017f".encode()

#: The 64 letters of the engine's words.
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def fold(data: bytes) -> bytes:
    """``data`` with ASCII letters in lower case."""
    return data.translate(FOLD)


def text_codes(data: bytes, width: int = GRAM) -> list[int]:
    """The grams (``width`` QUAD: quads) of a short text (already folded where it should be), in order,
    repeats included: each ``width`` bytes read as one little-endian number."""
    return [int.from_bytes(data[i : i + width], "little") for i in range(len(data) - width + 1)]


def text_grams(data: bytes) -> set[int]:
    """The grams of a short text (already folded where it should be), as a set."""
    return set(text_codes(data))


class _Scratch:
    """A table of 2**24 slots reused across files: deduplication without sorting.

    Writing each position's index into the slot of its gram, then keeping the
    positions whose slot still holds their own index, keeps exactly one position
    per distinct gram (the last): O(n), where ``np.unique`` sorts (three times slower).
    Slots left from earlier files are never read: every slot read was written first.
    """

    def __init__(self) -> None:
        import numpy as np

        self.fold = np.frombuffer(FOLD, dtype=np.uint8)
        self.alphabet = np.frombuffer(ALPHABET, dtype=np.uint8)
        self.slots = np.zeros(1 << 24, dtype=np.int32)
        self.positions = np.arange(1 << 20, dtype=np.int32)

    def windows(self, data: bytes) -> npt.NDArray[np.uint32]:
        """Each position's next four bytes of ``data`` (folded, a NUL after the last) read as one little-endian
        number: an unaligned strided view, no copy. Masked to three bytes, a gram; the first ``len - 3``
        whole, a quad."""
        import numpy as np

        folded = self.fold[np.frombuffer(data + b"\0", dtype=np.uint8)]
        windows: npt.NDArray[np.uint32] = np.ndarray(
            shape=(len(data) - GRAM + 1,), dtype="<u4", buffer=folded, strides=(1,)
        )
        return windows

    def distinct(self, codes: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
        import numpy as np

        n = len(codes)
        positions = self.positions[:n] if n <= len(self.positions) else np.arange(n, dtype=np.int32)
        self.slots[codes] = positions
        kept: npt.NDArray[np.int32] = codes[self.slots[codes] == positions]
        return kept

    def words(self, codes: npt.NDArray[np.int32]) -> str:
        import numpy as np

        alphabet = self.alphabet
        out = np.empty((len(codes), 5), dtype=np.uint8)
        out[:, 0] = alphabet[(codes >> 18) & 63]
        out[:, 1] = alphabet[(codes >> 12) & 63]
        out[:, 2] = alphabet[(codes >> 6) & 63]
        out[:, 3] = alphabet[codes & 63]
        out[:, 4] = 32
        return out.tobytes().decode("ascii")


_scratch: _Scratch | None = None


def _tables() -> _Scratch:
    global _scratch
    if _scratch is None:
        _scratch = _Scratch()  # 64 MB: only a process that indexes files allocates it
    return _scratch


def file_grams(data: bytes, quads: Callable[[npt.NDArray[np.uint32]], object] | None = None) -> npt.NDArray[np.int32]:
    """The distinct grams of a file's bytes (both readings where it holds KELVIN SIGN or LONG S), unsorted;
    its quads (:func:`file_quads`) handed to ``quads`` on the way, if given (one pass over the bytes for both)."""
    tables = _tables()
    if len(data) < GRAM:
        return tables.positions[:0]
    readings = [data]
    if KELVIN in data or LONG_S in data:
        ascii_read = data.replace(KELVIN, b"k").replace(LONG_S, b"s")  # a 3-byte sign becomes 1 byte
        if len(ascii_read) >= GRAM:
            readings.append(ascii_read)
    codes = []
    for reading in readings:
        windows = tables.windows(reading)
        codes.append((windows & 0xFFFFFF).view("<i4"))
        if quads is not None and len(reading) >= QUAD:
            quads(windows[: len(reading) - QUAD + 1])
    if len(codes) == 1:
        return tables.distinct(codes[0])
    import numpy as np

    return tables.distinct(np.concatenate(codes))


def file_quads(data: bytes) -> npt.NDArray[np.uint32]:
    """The quads of a file's bytes, as :func:`file_grams` hands them on (both readings), repeats included."""
    import numpy as np

    found: list[npt.NDArray[np.uint32]] = [np.empty(0, dtype=np.uint32)]
    file_grams(data, found.append)
    return np.concatenate(found).astype(np.uint32)


def tokens(codes: npt.NDArray[np.int32] | Iterable[int]) -> str:
    """Grams as the index engine's words: 4 characters of a 64-letter alphabet each, space-separated."""
    import numpy as np

    array: Any = codes if isinstance(codes, np.ndarray) else np.fromiter(codes, dtype=np.int32)
    return _tables().words(array.astype(np.int32, copy=False))


def token(code: int) -> str:
    """One gram as the index engine's word."""
    return "".join(chr(ALPHABET[(code >> shift) & 63]) for shift in (18, 12, 6, 0))
