"""The file's own hit (SPEC §3): every matched line outside a declaration, in ONE hit.

Backends answer with matched lines (``line`` hits) and path matches (``file`` hits);
the declaration index groups the lines inside declarations into declaration hits. What
is left, the lines outside every declaration or in a file whose declarations are
unknown, and the path match, become the file's own hit: kind ``file``, line 1 to the
last matched line (the file's length is not known here), its lines in order. So every
matched line belongs to exactly one hit, and a file of 274 module-level imports costs
one hit of the hit budget, not 274.

:func:`gather` is that step, idempotent, run on each file a page may show (the
declaration grouping runs it itself). Ranking looks at the hits as backends gave them.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.models import FileMatch, Hit

__all__ = ["FLAT", "gather", "gathered", "own_hit"]

#: The kinds the file's own hit takes in (a backend's matched line, its path match).
FLAT = frozenset({"line", "file"})


def own_hit(path: str, lines: Sequence[Hit]) -> Hit:
    """The file's own hit holding ``lines`` (matched lines, in order; none: a path match), scored as its
    best line (a semantic answer's)."""
    if not lines:
        return Hit(line=1, end_line=1, text=path, kind="file")
    first = lines[0]
    scores = [line.score for line in lines if line.score is not None]
    return Hit(
        score=max(scores) if scores else None,
        line=1,
        end_line=max(1, lines[-1].last_line),
        text=first.text,
        column=first.column,
        kind="file",
        lines=tuple(lines),
    )


def _flattened(hits: Sequence[Hit]) -> list[Hit]:
    """The matched lines of ``hits`` (their line and file hits), a file hit's own lines included, in order,
    each line once (a backend may give two fragments of one line: the first is kept)."""
    lines: list[Hit] = []
    for hit in hits:
        if hit.kind == "line":
            lines.append(hit)
        elif hit.kind == "file" and hit.lines:
            lines.extend(hit.lines)
    lines.sort(key=lambda h: h.line)
    return [hit for i, hit in enumerate(lines) if not i or hit.line != lines[i - 1].line]


def gather(hits: Sequence[Hit], path: str) -> tuple[Hit, ...]:
    """``hits`` with every line and file hit folded into the file's own hit, first; declarations
    as they were, in order. The same hits where there is nothing to fold."""
    flat = [hit for hit in hits if hit.kind in FLAT]
    if not flat or (len(flat) == 1 and flat[0].kind == "file" and flat[0] is hits[0]):
        return tuple(hits)
    rest = tuple(hit for hit in hits if hit.kind not in FLAT)
    return (own_hit(path, _flattened(flat)), *rest)


def gathered(file: FileMatch) -> FileMatch:
    """``file`` with its hits gathered (:func:`gather`); the same object where nothing changes."""
    hits = file.hits
    folded = gather(hits, file.path)
    if len(folded) == len(hits) and all(a is b for a, b in zip(folded, hits, strict=True)):
        return file
    return FileMatch(
        path=file.path,
        hits=folded,
        namespace=file.namespace,
        definition=file.definition,
        repository=file.repository,
        identity=file.identity,
    )
