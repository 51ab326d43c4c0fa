"""A file's matched lines as declaration hits (SPEC §3, "Declarations are the unit inside a file").

Every matched line inside a declaration belongs to the innermost one, and that
declaration is ONE hit carrying those lines; the matched lines outside every
declaration are the file's own hit (:func:`gateway.models.gather`), first. Every line hit
given appears in exactly one hit of the result, and the result is in file order.

A file's declarations are grouped by as an :class:`Outline`: their spans in order of
start line and their parents as plain integers, their names and intent encoded
apart and decoded only for the declarations a page shows (a large module has
hundreds, a page needs a few).
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections.abc import Sequence

import msgspec

from gateway.index.parse import Declaration
from gateway.models import Hit, gather

__all__ = ["Outline", "as_declarations"]

_ENCODE = msgspec.msgpack.Encoder().encode
_DETAIL_OF = msgspec.msgpack.Decoder(tuple[str, str, str, str]).decode
_PARTS_OF = msgspec.msgpack.Decoder(tuple[bytes, bytes, bytes, bytes, bytes]).decode
_SWAP = sys.byteorder != "little"  # stored little-endian


def _ints(values: Sequence[int]) -> bytes:
    packed = array("i", values)
    if _SWAP:  # pragma: no cover - big-endian machines
        packed.byteswap()
    return packed.tobytes()


def _unpack(raw: bytes) -> array[int]:
    packed = array("i")
    packed.frombytes(raw)
    if _SWAP:  # pragma: no cover - big-endian machines
        packed.byteswap()
    return packed


class Outline:
    """A file's declarations by start line (outer first on a tie); ``parents`` index this order, -1 at the top.

    Stored as five byte strings (:meth:`encode`): starts, ends and parents as packed
    integers, and each declaration's (kind, name, qualified_name, intent) encoded one
    after another with their offsets, so that reading a file costs a copy of its
    integers and a page decodes the names of only the declarations it shows.
    """

    __slots__ = ("_details", "_offsets", "ends", "parents", "starts")

    def __init__(self, starts: array[int], ends: array[int], parents: array[int], offsets: array[int], details: bytes):
        self.starts = starts
        self.ends = ends
        self.parents = parents
        self._offsets = offsets
        self._details = details

    @classmethod
    def of(cls, decls: Sequence[Declaration]) -> Outline:
        order = sorted(range(len(decls)), key=lambda i: (decls[i].start_line, i))
        place = {old: new for new, old in enumerate(order)}
        chosen = [decls[i] for i in order]
        details = [_ENCODE((d.kind, d.name, d.qualified_name, d.intent)) for d in chosen]
        offsets = [0]
        for detail in details:
            offsets.append(offsets[-1] + len(detail))
        return cls(
            array("i", [d.start_line for d in chosen]),
            array("i", [d.end_line for d in chosen]),
            array("i", [place.get(d.parent, -1) for d in chosen]),
            array("i", offsets),
            b"".join(details),
        )

    def encode(self) -> bytes:
        parts = (self.starts, self.ends, self.parents, self._offsets)
        return _ENCODE((*(_ints(p) for p in parts), self._details))

    @classmethod
    def decode(cls, blob: bytes) -> Outline:
        starts, ends, parents, offsets, details = _PARTS_OF(blob)
        return cls(_unpack(starts), _unpack(ends), _unpack(parents), _unpack(offsets), details)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outline):
            return NotImplemented
        return self.encode() == other.encode()

    __hash__ = None  # type: ignore[assignment]

    def innermost(self, line: int) -> int:
        """The innermost declaration holding ``line``, or -1: the last one starting at or before it
        holds it, or one of its ancestors does (declarations nest)."""
        i = bisect.bisect_right(self.starts, line) - 1
        ends, parents = self.ends, self.parents
        while i >= 0 and ends[i] < line:
            i = parents[i]
        return i

    def detail(self, i: int) -> tuple[str, str, str, str]:
        """(kind, name, qualified_name, intent) of declaration ``i``."""
        return _DETAIL_OF(self._details[self._offsets[i] : self._offsets[i + 1]])


def as_declarations(hits: Sequence[Hit], outline: Outline, path: str) -> tuple[Hit, ...]:
    """``hits`` (a file's line hits, in order) grouped into the declarations they lie in, the rest
    into the file's own hit (``path``: the file's)."""
    starts, ends, parents = outline.starts, outline.ends, outline.parents
    if not starts:
        return gather(hits, path)
    grouped: dict[int, list[Hit]] = {}
    out: list[Hit] = []
    for hit in hits:  # Outline.innermost inline: the loop of a page's every matched line
        i = -1
        if hit.kind == "line":
            line = hit.line
            i = bisect.bisect_right(starts, line) - 1
            while i >= 0 and ends[i] < line:
                i = parents[i]
        if i < 0:
            out.append(hit)
        elif i in grouped:
            grouped[i].append(hit)
        else:
            grouped[i] = [hit]
    for i, lines in grouped.items():
        kind, name, qualified, intent = outline.detail(i)
        first = lines[0]
        out.append(
            Hit(
                line=outline.starts[i],
                end_line=outline.ends[i],
                text=first.text,
                column=first.column,
                kind=kind,
                symbol=qualified,
                name=name,
                intent=intent,
                before=first.before,
                after=first.after,
                lines=tuple(lines),
            )
        )
    out.sort(key=_place)
    return gather(out, path)


def _place(hit: Hit) -> tuple[int, int]:
    return hit.line, hit.end_line or hit.line  # (line, last_line)
