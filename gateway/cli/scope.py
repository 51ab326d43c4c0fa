"""Where a command runs: its config, the local folders of its namespaces, and PATH arguments.

The CLI prints paths as rg does, relative to the current directory, so that a terminal
or an editor can open ``path:line:col``; a file of a namespace with no local folder
(a remote backend, or an answer from ``--server``) is printed as ``namespace/path``,
what ``fedsearch read`` takes. Trailing PATH arguments (``fedsearch search X src/
../click``) are :class:`Place` s: the namespaces and path globs of the request, and the
paths rg is given as typed for a listing. Run in a subfolder of a checkout
(:meth:`Scope.here`), a search covers that folder and below, and a ``-g`` glob holding a
``/`` is read from there (:func:`from_here`), as rg reads them.
"""

from __future__ import annotations

import os

from gateway.cli.messages import warn
from gateway.errors import InvalidRequest

TYPE_CHECKING = False  # typing, argparse and collections not imported: a listing starts rg without them
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from gateway.config import Config

__all__ = ["Place", "Scope", "discovered_scope", "from_here", "load", "local_roots", "scope_of"]


class Place:
    """A PATH argument inside a namespace: the namespace, the path inside it ("" for its root), whether it
    is a file, and the path as rg is given it (as typed, so that rg prints it as typed; "" for the
    current directory itself, which rg searches when given no path). A class of its own, not a
    ``typing.NamedTuple``: a listing's start does without ``typing``."""

    __slots__ = ("is_file", "namespace", "rel", "shown")

    def __init__(self, namespace: str, rel: str, is_file: bool, shown: str) -> None:
        self.namespace = namespace
        self.rel = rel
        self.is_file = is_file
        self.shown = shown

    def _key(self) -> tuple[str, str, bool, str]:
        return self.namespace, self.rel, self.is_file, self.shown

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, Place) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "Place(namespace={!r}, rel={!r}, is_file={!r}, shown={!r})".format(*self._key())


class Scope:
    """The local folder of each local namespace, and where the command runs from."""

    __slots__ = ("cwd", "roots")

    def __init__(self, roots: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.roots = roots or {}  # namespace -> absolute root
        self.cwd = cwd or os.getcwd()

    def locate(self, namespace: str, path: str) -> str:
        """How to print a file: relative to the current directory when it is local, else ``ns/path``."""
        root = self.roots.get(namespace)
        if root is None:
            return f"{namespace}/{path}"
        return os.path.relpath(os.path.join(root, path), self.cwd)

    def here(self) -> Place | None:
        """The folder the command runs in when it lies below a namespace's root (a subfolder of a checkout),
        else None (at a root, or in a folder holding checkouts)."""
        cwd = os.path.realpath(self.cwd)
        inside = self._under(cwd)
        if not inside or not inside[0][1]:
            return None
        namespace, rel = inside[0]
        return Place(namespace, rel, False, "")

    def places(self, paths: Sequence[str], patterns: Sequence[str] = ()) -> list[Place]:
        """The places PATH arguments name (within the ``--ns`` patterns given): a checkout (its root), a
        folder holding checkouts (each of theirs), or a folder or file inside one; InvalidRequest for a
        PATH that does not exist or lies in no namespace searched."""
        from gateway.query.globs import namespace_matcher

        allowed = [namespace_matcher(p) for p in patterns]
        out: list[Place] = []
        for given in paths:
            target = os.path.realpath(os.path.expanduser(given))
            if not os.path.exists(target):
                raise InvalidRequest("PATH", f"{given}: no such file or folder")
            is_file = os.path.isfile(target)
            found = [(ns, rel, given or ".") for ns, rel in self._under(target)]
            found = found or [
                (ns, "", os.path.join(given, os.path.relpath(root, target))) for ns, root in self._held(target)
            ]
            found = [item for item in found if not allowed or any(m(item[0]) for m in allowed)]
            if not found:
                raise InvalidRequest("PATH", f"{given} is not in any namespace searched here ({self._names()})")
            out += [Place(ns, rel, is_file and bool(rel), shown) for ns, rel, shown in found]
        return out

    def narrow(self, paths: Sequence[str], patterns: Sequence[str]) -> tuple[list[str], list[str]]:
        """The namespaces and path globs that PATH arguments name (within the ``--ns`` patterns given).

        Globs apply to every namespace of a request: PATHs inside different checkouts search each of
        them under every place named (said on stderr).
        """
        return self.request_of(self.places(paths, patterns))

    @staticmethod
    def request_of(places: Sequence[Place]) -> tuple[list[str], list[str]]:
        """The namespaces and path globs of a request searching ``places``."""
        names: list[str] = []
        globs: list[str] = []
        whole = {place.namespace for place in places if not place.rel}  # searched whole: a glob of it would narrow it
        for place in places:
            if place.namespace not in names:
                names.append(place.namespace)
            if place.rel and place.namespace not in whole:
                glob = place.rel if place.is_file else f"{place.rel}/**"
                if glob not in globs:
                    globs.append(glob)
        if globs and len(names) > 1:  # one request's globs narrow all of its namespaces alike
            warn(f"{', '.join(names)} are each searched under {', '.join(globs)} only")
        return names, globs

    def _under(self, target: str) -> list[tuple[str, str]]:
        """The namespace whose root holds ``target``, and the path inside it ("" for the root)."""
        best: tuple[str, str] | None = None
        for ns, root in self.roots.items():
            inside = target == root or target.startswith(root.rstrip("/") + "/")
            if inside and (best is None or len(root) > len(self.roots[best[0]])):
                best = (ns, os.path.relpath(target, root) if target != root else "")
        return [best] if best is not None else []

    def _held(self, target: str) -> list[tuple[str, str]]:
        """The namespaces whose roots lie inside the folder ``target``, with their roots."""
        prefix = target.rstrip("/") + "/"
        return [(ns, root) for ns, root in self.roots.items() if root.startswith(prefix)]

    def _names(self) -> str:
        names = sorted(self.roots)
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return f"namespaces: {shown}" if names else "no local namespace"


def from_here(globs: Sequence[str], here: Place) -> list[str]:
    """``-g`` globs typed in a subfolder of a checkout, as rg reads them: an anchored one (holding a ``/``)
    relative to that folder, so made relative to the namespace's root; others as they are."""
    out: list[str] = []
    for glob in globs:
        bang = "!" if glob.startswith("!") else ""
        body = glob[len(bang) :]
        if "/" in body.rstrip("/"):
            body = f"{here.rel}/{body.lstrip('/')}"
        out.append(bang + body)
    return out


def local_roots(config: Config) -> dict[str, str]:
    """The absolute local folder of each namespace that has one (a ``root`` setting)."""
    roots: dict[str, str] = {}
    for ns in config.namespaces:
        root = getattr(ns.settings, "root", None)
        if isinstance(root, str):
            roots[ns.name] = os.path.realpath(root)
    return roots


def load(args: argparse.Namespace) -> Config:
    """The config of a command (``--config``, $FEDSEARCH_CONFIG, else discovery), warning when
    discovery found nothing to search."""
    from gateway.config import config_from_env

    config = config_from_env(args.config, args.root)
    if not config.namespaces:
        warn(_empty(config.source))
    return config


def discovered_scope(root: str | None) -> Scope:
    """The scope of the checkouts discovery finds (no config), warning as :func:`load` does when there is none."""
    from gateway.discovery import discovered

    top, found = discovered(root)
    if not found:
        warn(_empty(f"discovery:{top}"))
    return Scope({name: os.path.realpath(path) for name, path in found})


def _empty(source: str) -> str:
    if source.startswith("discovery:"):
        where = source.removeprefix("discovery:")
        return (
            f"no git checkout under {where} (discovery serves folders holding .git): nothing to search; "
            "give --root DIR or --config FILE"
        )
    return f"{source} configures no namespace: nothing to search"


def scope_of(config: Config) -> Scope:
    """The scope of a local search over ``config``'s namespaces."""
    return Scope(local_roots(config))
