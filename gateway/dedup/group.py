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
ordered by its first three fields (unique), ``copies`` empty (a shown group's copies come from
:meth:`Deferred.copies`), ``identity`` its claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: no import at run time
    from gateway.dedup.identity import Identities

__all__ = ["Deferred", "Entry", "by_claim"]

#: ``(-score, namespace, path, file, path_match, copies, identity)`` (see the module docstring).
Entry = tuple[float, str, str, Any, bool, tuple[tuple[str, str], ...], str]
_Key = tuple[str, str]


def by_claim(entries: list[Entry], claims: Iterable[list[int]]) -> tuple[list[Entry], dict[int, list[Entry]]]:
    """``entries`` with only the best-ranked of each shared claim (``claims``: the indices of each claim
    shared by two or more); and each kept one's group, members best first, by the kept entry's ``id``."""
    groups: dict[int, list[Entry]] = {}
    gone: set[int] = set()
    for indices in claims:
        if len(indices) == 2:  # the common case: two copies, in order by one comparison
            a, b = indices
            first, second = entries[a], entries[b]
            if second < first:
                first, second, b = second, first, a
            groups[id(first)] = [first, second]
            gone.add(b)
        else:
            indices.sort(key=entries.__getitem__)  # by (-score, namespace, path)
            members = [entries[i] for i in indices]
            groups[id(members[0])] = members
            gone.update(indices[1:])
    return [entry for i, entry in enumerate(entries) if i not in gone], groups


class Deferred:
    """The groups of copies and the local identities, looked at only for entries that are shown.

    ``local`` maps a namespace to its checkout's identities; ``groups`` the members of each kept
    entry's group (:func:`by_claim`), by the entry's ``id`` (entries are held by the ranking, so
    their ids are theirs while it lives).
    """

    __slots__ = ("_settled", "groups", "local")

    def __init__(self, local: Mapping[str, Identities], groups: dict[int, list[Entry]]) -> None:
        self.local = local
        self.groups = groups
        self._settled: set[int] = set()

    def identity(self, entry: Entry) -> str:
        """The entry's file's exact identity: a remote backend's own, else its checkout's look now."""
        own: str = entry[3].identity
        if own:
            return own
        check = self.local.get(entry[1])
        return check.exact(entry[2]) if check is not None else ""

    def copies(self, entry: Entry) -> tuple[tuple[str, str], ...]:
        """The other copies of an entry's content, in rank order."""
        members = self.groups.get(id(entry))
        return tuple([(m[1], m[2]) for m in members[1:]]) if members else ()

    def settle(self, entries: list[Entry], shown: Iterable[Entry]) -> bool:
        """Look again at the local members of the groups among ``shown``; where a copy's bytes differ
        now, split the group in ``entries`` (each part in rank order). Whether ``entries`` changed."""
        changed = False
        for entry in shown:
            key = id(entry)
            members = self.groups.get(key)
            if members is None or key in self._settled:
                continue
            self._settled.add(key)
            if not any(m[1] in self.local for m in members):
                continue  # every claim was a remote backend's own: exact already
            parts = self._parts(members)
            if len(parts) > 1:
                del self.groups[key]
                for part in parts:
                    if len(part) > 1:
                        self.groups[id(part[0])] = part
                    self._settled.add(id(part[0]))
                entries[entries.index(entry)] = parts[0][0]
                entries.extend(part[0] for part in parts[1:])
                changed = True
        return changed

    def settle_all(self, entries: list[Entry]) -> None:
        """Settle every group (before the whole order is read)."""
        groups = self.groups
        if groups:
            self.settle(entries, [e for e in entries if id(e) in groups])

    def _parts(self, members: list[Entry]) -> list[list[Entry]]:
        """The members by their exact identities, each part in rank order, the best part first; a
        member without any is a part alone."""
        same: dict[str, list[Entry]] = {}
        parts: list[list[Entry]] = []
        for member in members:
            identity = self.identity(member)
            if identity:
                same.setdefault(identity, []).append(member)
            else:
                parts.append([member])
        parts.extend(same.values())
        parts.sort()
        return parts
