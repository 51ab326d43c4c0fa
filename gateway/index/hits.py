"""A file's matched lines as declaration hits (SPEC §3, "Declarations are the unit inside a file").

Every matched line inside a declaration belongs to the innermost one, and that
declaration is ONE hit carrying those lines; a matched line outside every
declaration stays a ``line`` hit. Every line hit given appears in exactly one hit
of the result, and the result is in file order.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from gateway.index.parse import Declaration
from gateway.models import Hit

__all__ = ["as_declarations", "innermost"]


def innermost(decls: Sequence[Declaration], starts: Sequence[int], order: Sequence[int], line: int) -> int:
    """The index in ``decls`` of the innermost declaration holding ``line``, or -1.

    ``order`` lists the declarations by start line (outer first on a tie), ``starts``
    their start lines in that order. The last declaration starting at or before the
    line holds it, or one of its ancestors does: declarations nest.
    """
    at = bisect.bisect_right(starts, line) - 1
    i = order[at] if at >= 0 else -1
    while i >= 0 and decls[i].end_line < line:
        i = decls[i].parent
    return i


def as_declarations(hits: Sequence[Hit], decls: Sequence[Declaration]) -> tuple[Hit, ...]:
    """``hits`` (a file's line hits, in order) grouped into the declarations they lie in."""
    if not decls:
        return tuple(hits)
    order = sorted(range(len(decls)), key=lambda i: (decls[i].start_line, i))
    starts = [decls[i].start_line for i in order]
    grouped: dict[int, list[Hit]] = {}
    out: list[Hit] = []
    for hit in hits:
        if hit.kind != "line":
            out.append(hit)
            continue
        i = innermost(decls, starts, order, hit.line)
        if i < 0:
            out.append(hit)
        else:
            grouped.setdefault(i, []).append(hit)
    for i, lines in grouped.items():
        d = decls[i]
        first = lines[0]
        out.append(
            Hit(
                line=d.start_line,
                end_line=d.end_line,
                text=first.text,
                column=first.column,
                kind=d.kind,
                symbol=d.qualified_name,
                name=d.name,
                intent=d.intent,
                before=first.before,
                after=first.after,
                lines=tuple(lines),
            )
        )
    out.sort(key=lambda h: (h.line, h.last_line))
    return tuple(out)
