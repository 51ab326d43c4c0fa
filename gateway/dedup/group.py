"""The copies of one content among a ranking's entries: a dict keyed on identity, no I/O of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["groups"]


def groups(claims: Iterable[list[int]], exact: Callable[[int], str], key: Callable[[int], Any]) -> list[list[int]]:
    """The entries that are one content, each group best first by ``key``: only groups of two or more.

    ``claims`` lists the entries sharing one claimed identity (what each backend said,
    cheaply); ``exact`` is asked of each member of a claim shared by two or more, and only
    members whose exact identities are equal stay together (a file without one, ``""``,
    stays alone). Entries whose claims differ are never asked.
    """
    out: list[list[int]] = []
    for members in claims:
        if len(members) < 2:
            continue
        same: dict[str, list[int]] = {}
        for i in members:
            identity = exact(i)
            if identity:
                same.setdefault(identity, []).append(i)
        for copies in same.values():
            if len(copies) > 1:
                copies.sort(key=key)
                out.append(copies)
    return out
