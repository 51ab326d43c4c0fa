"""What a caller may see, by name: configured namespaces and the children of peers (SPEC §5).

:class:`Catalog` answers every question the surfaces ask about names, the same way:

* :meth:`Catalog.names`: every visible name — a configured namespace the caller's access
  allows, and each known child ``<peer>/<remote>`` the access allows (by the child's
  name, or its parent's: a caller who sees ``peer`` sees its children);
* :meth:`Catalog.resolve`: request patterns to routes. A pattern matches configured
  names and known children alike (``*/flask`` finds ``peer/flask``); a child of a
  parent the caller sees whole is one of that parent's ``sub_namespaces``, a child of a
  parent it does not is a route of its own (:class:`~gateway.catalog.children.ChildBackend`). A
  pattern matching nothing is :class:`~gateway.errors.UnknownNamespace` (400), an
  unknown child included. Only where a parent's children were never listed is a
  pattern under it (``peer/x*``) passed on for the peer to judge;
* :meth:`Catalog.owner` and :meth:`Catalog.split_path`: which backend holds a name or a
  ``<namespace>/<path>``, and under which sub-namespace prefix;
* :meth:`Catalog.describe`: the ``/v1/namespaces`` entries, children with what their
  peer declares.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.backend import AsyncBackend
from gateway.catalog.children import ChildBackend, ChildDirectory
from gateway.config import NamespaceConfig
from gateway.errors import InvalidRequest, NotFound, UnknownNamespace
from gateway.fanout import Route
from gateway.models import ChildNamespace
from gateway.query.globs import namespace_matcher

__all__ = ["HEALTH_ORDER", "Catalog", "file_paths"]

Access = Callable[[str], bool] | None

#: Worse health last: a child is no healthier than the way to it.
HEALTH_ORDER = ("ok", "degraded", "unavailable")


class _Entry(Protocol):
    @property
    def config(self) -> NamespaceConfig: ...

    @property
    def backend(self) -> AsyncBackend[Any]: ...


def file_paths(backend: AsyncBackend[Any]) -> str:
    """How a namespace names its files (``/v1/namespaces``' ``file_paths``)."""
    if backend.serves_children:
        return "<namespace>/<path>"
    return "<repository>/<path>" if backend.repository_paths else "<path>"


def _worse(a: str, b: str) -> str:
    rank = {h: i for i, h in enumerate(HEALTH_ORDER)}
    return a if rank.get(a, len(HEALTH_ORDER)) >= rank.get(b, len(HEALTH_ORDER)) else b


def _meet(a: Route, b: Route) -> Route | None:
    """The route both ``a`` and ``b`` allow (the same namespace): the narrower sub-namespaces."""
    if not a.sub_namespaces:
        return b
    if not b.sub_namespaces:
        return a
    common = tuple(s for s in a.sub_namespaces if s in b.sub_namespaces)
    return dataclasses.replace(a, sub_namespaces=common) if common else None


@dataclass(slots=True)
class _Matched:
    whole: set[str] = dataclasses.field(default_factory=set)
    subs: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    alone: dict[str, list[ChildNamespace]] = dataclasses.field(default_factory=dict)


class Catalog:
    """The names of one service's namespaces and of its peers' children."""

    def __init__(self, entries: Mapping[str, _Entry]) -> None:
        self._entries = entries
        #: Each namespace's route searching it whole, made once (10,000 namespaces: 90 ms a search otherwise);
        #: made again when its entry is replaced (a service wraps its backends after the catalog exists).
        self._whole: dict[str, tuple[_Entry, Route]] = {}
        self.children = ChildDirectory({n: e.backend for n, e in entries.items() if e.backend.serves_children})

    # --- who sees what -----------------------------------------------------------------

    def visible(self, access: Access = None) -> list[str]:
        """The configured namespaces this caller may see whole, in config order."""
        return [name for name in self._entries if access is None or access(name)]

    def kids(self, parent: str, access: Access = None) -> list[ChildNamespace] | None:
        """The known children of ``parent`` this caller may see (None: never listed)."""
        known = self.children.known(parent)
        if known is None:
            return None
        if access is None or access(parent):
            return list(known)
        return [c for c in known if access(f"{parent}/{c.name}")]

    def partial(self, access: Access) -> bool:
        """Whether some parent is hidden from this caller but not all of its children may be."""
        return access is not None and any(not access(p) for p in self.children.parents)

    def names(self, access: Access = None) -> list[str]:
        """Every name this caller may see: configured namespaces and known children, in config order."""
        out: list[str] = []
        for name, entry in self._entries.items():
            if access is None or access(name):
                out.append(name)
            if entry.backend.serves_children:
                out.extend(f"{name}/{c.name}" for c in self.kids(name, access) or ())
        return out

    def _parent_of(self, name: str) -> str | None:
        """The longest parent (a backend serving children) whose ``<parent>/`` prefixes ``name``."""
        best = None
        for parent in self.children.parents:
            if name.startswith(parent + "/") and (best is None or len(parent) > len(best)):
                best = parent
        return best

    def owner(self, name: str, access: Access = None) -> tuple[AsyncBackend[Any], str]:
        """(backend, sub-namespace) holding namespace ``name``; NotFound for what the caller may not see."""
        entry = self._entries.get(name)
        if entry is not None and (access is None or access(name)):
            return entry.backend, ""
        parent = self._parent_of(name)
        if parent is not None:
            sub = name[len(parent) + 1 :]
            allowed = access is None or access(parent) or access(name)
            known = self.children.known(parent)
            if allowed and (known is None or any(c.name == sub for c in known)):
                return self._entries[parent].backend, sub
        raise NotFound(f"no namespace {name!r}")

    def split_path(self, virtual: str, access: Access = None) -> tuple[str, str]:
        """``<namespace>/<path>`` -> (namespace, path), the longest visible name winning; under a
        parent whose children were never listed, the shortest child name the caller may see."""
        virtual = virtual.lstrip("/")
        best = ""
        for name in self.names(access):
            if (virtual == name or virtual.startswith(name + "/")) and len(name) > len(best):
                best = name
        if not best and access is not None:
            parent = self._parent_of(virtual)
            if parent is not None and self.children.known(parent) is None:
                rest = virtual[len(parent) + 1 :].split("/")
                for n in range(1, len(rest)):
                    if access(f"{parent}/{'/'.join(rest[:n])}"):
                        best = f"{parent}/{'/'.join(rest[:n])}"
                        break
        if not best:  # a namespace the caller may not see reads exactly as one that does not exist
            raise NotFound(f"no such namespace: {virtual.split('/', 1)[0]!r}")
        return best, virtual[len(best) + 1 :]

    # --- patterns ----------------------------------------------------------------------

    def _match(self, patterns: Sequence[str], access: Access) -> _Matched:
        full = self.visible(access)
        got = _Matched()
        if not patterns:
            got.whole.update(full)
            for parent in self.children.parents:
                if parent not in got.whole:
                    got.alone[parent] = self.kids(parent, access) or []
            return got
        for pattern in patterns:
            match = namespace_matcher(pattern)
            found = [n for n in full if match(n)]
            got.whole.update(found)
            for parent in self.children.parents:
                kids = self.kids(parent, access)
                if kids is None:  # never listed: what is under it is for the peer to judge
                    if parent in full and pattern.startswith(parent + "/"):
                        got.subs.setdefault(parent, []).append(pattern[len(parent) + 1 :])
                        found.append(parent)
                    continue
                matched = [c for c in kids if match(f"{parent}/{c.name}")]
                if not matched:
                    continue
                found.append(parent)
                if parent in full:
                    got.subs.setdefault(parent, []).extend(c.name for c in matched)
                else:
                    got.alone.setdefault(parent, []).extend(matched)
            if not found:
                raise UnknownNamespace(pattern, self.names(access))
        return got

    def resolve(self, patterns: Sequence[str], access: Access = None) -> list[Route]:
        """Routes for the visible namespaces matching ``patterns`` (all when empty), in config order."""
        got = self._match(patterns, access)
        routes: list[Route] = []
        whole = self._whole
        for name, entry in self._entries.items():
            if name in got.whole:
                made = whole.get(name)
                if made is None or made[0] is not entry:
                    made = whole[name] = (
                        entry,
                        Route(name, entry.backend, entry.config.weight, entry.config.timeout_ms),
                    )
                routes.append(made[1])
            elif name in got.subs:
                subs = tuple(dict.fromkeys(got.subs[name]))
                routes.append(Route(name, entry.backend, entry.config.weight, entry.config.timeout_ms, subs))
            if name in got.alone:
                seen: set[str] = set()
                for child in got.alone[name]:
                    if child.name not in seen:
                        seen.add(child.name)
                        child_backend = ChildBackend(entry.backend, child)
                        child_name = f"{name}/{child.name}"
                        routes.append(Route(child_name, child_backend, entry.config.weight, entry.config.timeout_ms))
        return routes

    def route(
        self,
        patterns: Sequence[str],
        repos: Sequence[str],
        skip_repos: Sequence[str],
        access: Access = None,
    ) -> list[Route]:
        """The routes of a request: its ``patterns`` and its query's ``repo:`` filters both hold,
        ``-repo:`` ones none."""
        routes = self.resolve(patterns, access)
        if repos:
            try:
                named = {route.namespace: route for route in self.resolve(repos, access)}
            except UnknownNamespace as exc:
                raise InvalidRequest(
                    "query", f"no namespace matches {exc.pattern!r} (repo:{exc.pattern}){exc.known}"
                ) from None
            met = (_meet(r, named[r.namespace]) for r in routes if r.namespace in named)
            routes = [r for r in met if r is not None]
            if not routes:
                said = " ".join(f"repo:{p}" for p in repos)
                raise InvalidRequest("namespaces", f"no namespace matches both {list(patterns)} and {said}")
        for pattern in skip_repos:
            routes = self._skip(routes, namespace_matcher(pattern), access)
        return routes

    def _skip(self, routes: list[Route], skip: Callable[[str], bool], access: Access) -> list[Route]:
        kept: list[Route] = []
        for route in routes:
            if skip(route.namespace):
                continue
            kids = self.kids(route.namespace, access) if route.backend.serves_children else None
            if kids is not None:
                asked = list(route.sub_namespaces) or [c.name for c in kids]
                left = [k for k in asked if not skip(f"{route.namespace}/{k}")]
                if not left:
                    continue
                if len(left) < len(asked):
                    route = dataclasses.replace(route, sub_namespaces=tuple(left))
            kept.append(route)
        return kept

    # --- listing -----------------------------------------------------------------------

    def describe(self, access: Access = None) -> list[dict[str, Any]]:
        """Name, backend kind, health, capabilities and file path form of each visible name."""
        out: list[dict[str, Any]] = []
        for name, entry in self._entries.items():
            backend = entry.backend
            if access is None or access(name):
                local = backend.tree() is not None
                out.append(
                    {
                        "name": name,
                        "backend": backend.kind,
                        "health": backend.health(),
                        "capabilities": {
                            "modes": sorted(backend.declared_modes()),
                            "read": local or backend.reads,
                            "list": local or backend.lists,
                        },
                        "file_paths": file_paths(backend),
                    }
                )
            if backend.serves_children:
                parent = {"parent": name} if access is None or access(name) else {}  # a hidden parent is not named
                for child in self.kids(name, access) or ():
                    out.append(
                        {
                            "name": f"{name}/{child.name}",
                            "backend": child.backend,
                            "health": _worse(child.health, backend.health()),
                            "capabilities": {"modes": list(child.modes), "read": child.read, "list": child.list},
                            "file_paths": child.file_paths,
                            **parent,
                        }
                    )
        return out
