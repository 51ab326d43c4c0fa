"""A file's matched lines as declaration hits (SPEC §3, "Declarations are the unit inside a file").

Every matched line inside a declaration belongs to the innermost one, and that
declaration is ONE hit carrying those lines; a matched line outside every
declaration stays a ``line`` hit. Every line hit given appears in exactly one hit
of the result, and the result is in file order.

A file's declarations are grouped by as an :class:`Outline`: their spans in order of
start line and their parents as plain integers, their names and intent encoded
apart and decoded only for the declarations a page shows (a large module has
hundreds, a page needs a few).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import msgspec

from gateway.index.parse import Declaration
from gateway.models import Hit

__all__ = ["Outline", "as_declarations"]

_DETAIL = msgspec.msgpack.Encoder().encode
_DETAIL_OF = msgspec.msgpack.Decoder(tuple[str, str, str, str]).decode


class Outline(msgspec.Struct, frozen=True, array_like=True):
    """A file's declarations by start line (outer first on a tie); ``parents`` index this order, -1 at the top."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    parents: tuple[int, ...]
    #: Each (kind, name, qualified_name, intent), encoded.
    details: tuple[msgspec.Raw, ...]

    @classmethod
    def of(cls, decls: Sequence[Declaration]) -> Outline:
        order = sorted(range(len(decls)), key=lambda i: (decls[i].start_line, i))
        place = {old: new for new, old in enumerate(order)}
        chosen = [decls[i] for i in order]
        return cls(
            starts=tuple(d.start_line for d in chosen),
            ends=tuple(d.end_line for d in chosen),
            parents=tuple(place.get(d.parent, -1) for d in chosen),
            details=tuple(msgspec.Raw(_DETAIL((d.kind, d.name, d.qualified_name, d.intent))) for d in chosen),
        )

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
        return _DETAIL_OF(self.details[i])


def as_declarations(hits: Sequence[Hit], outline: Outline) -> tuple[Hit, ...]:
    """``hits`` (a file's line hits, in order) grouped into the declarations they lie in."""
    if not outline.starts:
        return tuple(hits)
    grouped: dict[int, list[Hit]] = {}
    out: list[Hit] = []
    innermost = outline.innermost
    for hit in hits:
        i = innermost(hit.line) if hit.kind == "line" else -1
        if i < 0:
            out.append(hit)
        else:
            grouped.setdefault(i, []).append(hit)
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
    out.sort(key=lambda h: (h.line, h.last_line))
    return tuple(out)
