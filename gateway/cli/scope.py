"""Where a command runs: its config, the local folders of its namespaces, and PATH arguments.

The CLI prints paths as rg does, relative to the current directory, so that a terminal
or an editor can open ``path:line:col``; a file of a namespace with no local folder
(a remote backend, or an answer from ``--server``) is printed as ``namespace/path``,
what ``fedsearch read`` takes. Trailing PATH arguments (``fedsearch search X src/
../click``) are :class:`Place` s: the namespaces and path globs of the request, and the
paths rg is given as typed for a listing. Run in a subfolder of a checkout
(:meth:`Scope.here`), a search covers that folder and below, and ``-g`` globs are read from
where the command runs, as rg reads them (:func:`globs_here`): a glob holding a ``/`` is
anchored there, in a subfolder of a checkout or in a folder holding checkouts.
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

__all__ = [
    "Place",
    "Scope",
    "discovered_scope",
    "escape_glob",
    "globs_here",
    "load",
    "local_roots",
    "scope_of",
]


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
                rel = escape_glob(place.rel)  # a folder's name is no glob: `a[1]` means itself
                glob = rel if place.is_file else f"{rel}/**"
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


def escape_glob(path: str) -> str:
    """``path`` as a glob that matches it alone (rg's glob syntax: ``\\`` escapes)."""
    return "".join("\\" + c if c in _GLOB_SPECIALS else c for c in path)


_GLOB_SPECIALS = frozenset("\\*?[]{}!")


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


# --- -g globs typed where the user stands (issue 49) ---------------------------------------

#: A namespace that one of the globs leaves nothing of (an exclude naming its root or a folder above it; only
#: includes that name nothing inside it).
_NOTHING = None


def _split(glob: str) -> list[str] | None:
    """A glob's components (split at ``/``), or None where a ``{...}`` holds a ``/`` (no component of its own)."""
    depth = 0
    for ch in glob:
        depth += ch == "{"
        depth -= ch == "}" and depth > 0
        if ch == "/" and depth:
            return None
    return glob.split("/")


def _matches(component: str, name: str) -> bool:
    """Whether one component of a glob (no ``/``) matches the folder name ``name``, as rg reads it."""
    import re2

    from gateway.query.globs import glob_to_regex

    try:
        return re2.match(glob_to_regex("/" + component), name) is not None
    except (ValueError, re2.error):
        return False


def _from_above(glob: str, below: list[str]) -> tuple[list[str], bool]:
    """An anchored glob typed ``len(below)`` folders above a namespace's root (``below``: the folders down to
    it) as globs relative to that root, which together match what it matches inside the root (none: it names
    nothing there), and whether it names the root itself or a folder above it. ValueError where a ``{...}``
    holds a ``/`` (no component of its own)."""
    parts = _split(glob.lstrip("/"))
    if parts is None:
        raise ValueError("a {...} holding a '/'")
    parts = [p for i, p in enumerate(parts) if not (p == "**" and i and parts[i - 1] == "**")]  # `**/**` is `**`
    inside: dict[str, None] = {}
    root = _walk(parts, below, inside)
    return list(inside), root


def _walk(parts: list[str], below: list[str], inside: dict[str, None]) -> bool:
    """:func:`_from_above` for the glob's components ``parts`` and the folders ``below`` left: adds to ``inside``
    the globs inside the root; whether the glob names the root or a folder above it."""
    if not below:  # at the root: the rest is a glob inside it, still anchored there
        rest = "/".join(parts)
        if not rest.strip("/"):
            return True
        inside[rest if "/" in rest.rstrip("/") else "/" + rest] = None
        return False
    if not parts or parts == [""]:
        return True  # it ended above the root: a folder the root is in
    if parts[0] == "**":  # no folder (what follows it goes on here), or this one and maybe more
        return _walk(parts[1:], below, inside) | _walk(parts, below[1:], inside)
    return _matches(parts[0], below[0]) and _walk(parts[1:], below[1:], inside)


def _anchored(glob: str) -> bool:
    body = glob[1:] if glob.startswith("!") else glob
    return "/" in body.rstrip("/") and not (body.startswith("**/") and "/" not in body[3:].rstrip("/"))


def globs_here(globs: Sequence[str], scope: Scope, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``-g`` globs as typed where the command runs (rg's meaning: a glob with a ``/`` is anchored at the
    current folder) as one request's ``paths`` (anchored at each namespace's root), and the namespaces of
    ``names`` left to search: those a glob leaves nothing of are dropped (an exclude naming a checkout
    itself; includes naming nothing inside it). In a subfolder of a checkout an anchored glob gets the
    subfolder's path before it; in a folder holding checkouts it loses the folders down to each one's root.
    A namespace with no local folder, or whose folder is neither around nor below here, takes the globs as
    typed. InvalidRequest naming ``glob`` where they come out differently for the namespaces searched (then
    no one request says them: run inside one checkout, or choose with ``--ns``)."""
    cwd = os.path.realpath(scope.cwd)
    if not any(_anchored(g) or g.startswith("!") for g in globs):  # (an exclude may name a checkout here)
        return list(globs), list(names)
    kept: dict[str, list[str]] = {}
    for name in names:
        root = scope.roots.get(name)
        inside = root is not None and (cwd == root or cwd.startswith(root.rstrip("/") + "/"))
        above = root is not None and root.startswith(cwd.rstrip("/") + "/")
        rules = _rules(
            globs,
            os.path.relpath(cwd, root) if inside and root and cwd != root else "",
            os.path.relpath(root, cwd).split(os.sep) if above and root else None,
        )
        if rules is not _NOTHING:
            kept[name] = rules
    different = {tuple(r) for r in kept.values()}
    if len(different) > 1:
        shown = " ".join(f"-g {g!r}" for g in globs if _anchored(g))
        raise InvalidRequest(
            "glob",
            f"{shown} is anchored at this folder, and means something else in each checkout under it "
            f"({', '.join(sorted(kept)[:4])}): run it inside one checkout, or choose one with --ns",
        )
    return (next(iter(kept.values())) if kept else []), list(kept)


def _rules(globs: Sequence[str], rel: str, below: list[str] | None) -> list[str] | None:
    """The globs for one namespace (see :func:`globs_here`): ``rel`` the folder here inside its root ("" for
    none), ``below`` the folders from here down to its root (None: it is not below here); None when they leave
    nothing of it."""
    from gateway.query.globs import skips_folder

    if below and skips_folder(globs, "/".join(below)):
        return _NOTHING  # rg skips the checkout, or a folder it is in, with all it holds
    out: list[str] = []
    includes = nothing = 0
    for i, glob in enumerate(globs):
        bang = "!" if glob.startswith("!") else ""
        overridden = bang and any(not later.startswith("!") for later in globs[i + 1 :])  # a later include may win
        body = glob[len(bang) :]
        if rel and not _anchored(glob):  # a name below here only: rg judges no folder above where it runs
            out.append(f"{bang}{escape_glob(rel)}/**/{body.removeprefix('**/')}")
            includes += not bang
            continue
        if not _anchored(glob):
            out.append(glob)
            includes += not bang
            continue
        if rel:
            out.append(f"{bang}{escape_glob(rel)}/{body.lstrip('/')}")
            includes += not bang
            continue
        if below is None:
            out.append(glob)
            includes += not bang
            continue
        try:
            inside, _ = _from_above(body, below)  # naming the root: rg judged it above (skips_folder)
        except ValueError as exc:
            raise InvalidRequest(
                "glob", f"-g {glob!r} cannot be read from a folder holding checkouts ({exc}): run it inside one"
            ) from None
        if bang and not overridden and any(g.lstrip("/") in ("*", "**") for g in inside):
            return _NOTHING  # every entry of it: nothing is left
        if not inside:  # names no file in this checkout (an include naming a folder keeps nothing by that)
            nothing += not bang
        out.extend(bang + g for g in inside)
        includes += bool(inside) and not bang
    if nothing and not includes:
        return _NOTHING  # only includes that name nothing in it: rg keeps none of its files
    return out
