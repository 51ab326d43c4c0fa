"""The copies of one content among a ranking's entries: merged by claim, looked at again only where shown.

Fusion (:func:`gateway.rank.fuse`) gathers each file's *claimed* identity in its one pass:
a remote backend's exact one, or what a local checkout's :class:`~gateway.dedup.identity.Identities`
last saw (a dict lookup). :func:`by_claim` merges the entries sharing a claim (a dict keyed
on identity). A claim of a local file is only what the file was when last looked at, so
before a merged group is shown, :class:`Deferred` looks again at its local members
(``exact``: a ``stat``, reading the file only where it changed) and splits off any copy
whose bytes are no longer the same: only for the groups that reach a page, never for the
thousands behind them (a later page settles the rest when it is read).

An entry is fusion's tuple ``(-score, namespace, path, file, path_match, copies, identity)``:
ordered by its first three fields (unique), ``copies`` the other copies' ``(namespace, path)``
in rank order, ``identity`` its claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: no import at run time
    from gateway.dedup.identity import Identities

__all__ = ["Deferred", "Entry", "by_claim"]

#: ``(-score, namespace, path, file, path_match, copies, identity)`` (see the module docstring).
Entry = tuple[float, str, str, Any, bool, tuple[tuple[str, str], ...], str]
_Key = tuple[str, str]


def _copies(members: Sequence[Entry]) -> tuple[tuple[str, str], ...]:
    return tuple([(m[1], m[2]) for m in members])


def by_claim(
    entries: list[Entry], claims: Iterable[list[int]], local: Mapping[str, Identities]
) -> tuple[list[Entry], dict[_Key, list[Entry]]]:
    """``entries`` with those sharing a claim (``claims``: the indices of each claim shared by two or
    more) as one, the best-ranked's listing the others; and the merged groups with a member of a
    namespace in ``local`` (whose claims are looked at again before the group is shown), by their
    entry's (namespace, path), members best first."""
    pending: dict[_Key, list[Entry]] = {}
    gone: set[int] = set()
    at = entries.__getitem__
    for indices in claims:
        if len(indices) == 2:  # the common case: two copies, in order by one comparison
            a, b = indices
            first, second = (at(a), at(b)) if at(a) < at(b) else (at(b), at(a))
            members = [first, second]
            entries[a], best = (*first[:5], ((second[1], second[2]),), first[6]), first
            gone.add(b)
        else:
            indices.sort(key=at)  # by (-score, namespace, path)
            members = [entries[i] for i in indices]
            best = members[0]
            entries[indices[0]] = (*best[:5], _copies(members[1:]), best[6])
            gone.update(indices[1:])
        for member in members:
            if member[1] in local:
                pending[(best[1], best[2])] = members
                break
    if not gone:
        return entries, pending
    return [entry for i, entry in enumerate(entries) if i not in gone], pending


class Deferred:
    """Local identities, looked at again only for the entries that reach a page.

    ``local`` maps a namespace to its checkout's identities; ``pending`` the groups merged by a
    claim that a local member made (:func:`by_claim`).
    """

    __slots__ = ("local", "pending")

    def __init__(self, local: Mapping[str, Identities], pending: dict[_Key, list[Entry]]) -> None:
        self.local = local
        self.pending = pending

    def identity(self, entry: Entry) -> str:
        """The entry's file's exact identity: a remote backend's own, else its checkout's look now."""
        own: str = entry[3].identity
        if own:
            return own
        check = self.local.get(entry[1])
        return check.exact(entry[2]) if check is not None else ""

    def settle(self, entries: list[Entry], shown: Iterable[Entry]) -> bool:
        """Look again at the pending groups among ``shown``; where a copy's bytes differ now, split the
        group in ``entries`` (each part in rank order). Whether ``entries`` changed (select again)."""
        changed = False
        for entry in shown:
            members = self.pending.pop((entry[1], entry[2]), None)
            if members is None:
                continue
            parts = self._parts(members)
            if len(parts) > 1:
                entries[entries.index(entry)] = parts[0]
                entries.extend(parts[1:])
                changed = True
        return changed

    def settle_all(self, entries: list[Entry]) -> None:
        """Settle every pending group (before the whole order is read)."""
        if self.pending:
            self.settle(entries, [e for e in entries if (e[1], e[2]) in self.pending])

    def _parts(self, members: list[Entry]) -> list[Entry]:
        """The members as entries by their exact identities: one per identity (best first, listing the
        others), one for each member without any."""
        same: dict[str, list[Entry]] = {}
        alone: list[Entry] = []
        for member in members:
            identity = self.identity(member)
            if identity:
                same.setdefault(identity, []).append(member)
            else:
                alone.append(member)
        parts = [(*group[0][:5], _copies(group[1:]), key) for key, group in same.items()]
        parts.extend((*m[:5], (), "") for m in alone)
        parts.sort()  # the best-ranked part first: it takes the group's place
        return parts
