"""What a command finds on its own when no config names it: the checkouts under a folder
(discovery, SPEC §5) and the folder of the declaration index.

Every git checkout under the root (a folder holding ``.git``, not inside another
checkout, at most :data:`DISCOVERY_MAX_DEPTH` folders down, hidden folders and
``node_modules``/``__pycache__``/``site-packages`` skipped) is a ``ripgrep`` namespace
named by its path relative to the root. Plain ``os`` calls: the one-shot CLI
discovers before it imports any model (pydantic, msgspec); :mod:`gateway.config`
turns what is found here into namespaces.
"""

from __future__ import annotations

import os

from gateway.errors import ConfigError

__all__ = [
    "DISCOVERY_MAX_DEPTH",
    "NAME_PATTERN",
    "checkouts",
    "default_index_dir",
    "discovered",
    "enclosing_checkout",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$"
#: NAME_PATTERN's characters, read without ``re`` (a listing's start does without it).
_LEADING = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _LEADING | frozenset("._/-")
DISCOVERY_MAX_DEPTH = 6
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})


def _namespace_name(rel: str, taken: set[str]) -> str:
    name = "".join(char if char in _NAME_CHARS else "-" for char in rel)[:128]
    if name[:1] not in _LEADING:  # NAME_PATTERN's first character (the rest are its characters now)
        name = ("r" + name)[:128]
    base, n = name, 2
    while name in taken:
        name = f"{base[:120]}-{n}"
        n += 1
    taken.add(name)
    return name


def checkouts(root: str | os.PathLike[str] = ".") -> list[tuple[str, str]]:
    """(namespace name, absolute folder) of every git checkout under ``root``, by name."""
    top = os.path.realpath(root)
    if not os.path.isdir(top):
        raise ConfigError("root", f"not a directory: {str(root)!r}")
    found: list[tuple[str, str]] = []
    if os.path.exists(os.path.join(top, ".git")):
        found.append((os.path.basename(top) or "root", top))
    else:
        for dirpath, dirnames, _ in os.walk(top, followlinks=False):
            rel = os.path.relpath(dirpath, top)
            if rel != "." and os.path.exists(os.path.join(dirpath, ".git")):
                found.append((rel.replace(os.sep, "/"), dirpath))
                dirnames.clear()
                continue
            if (0 if rel == "." else rel.count(os.sep) + 1) >= DISCOVERY_MAX_DEPTH:
                dirnames.clear()
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
    taken: set[str] = set()
    return [(_namespace_name(rel, taken), path) for rel, path in sorted(found)]


def enclosing_checkout(path: str | os.PathLike[str] = ".") -> str | None:
    """The git checkout ``path`` lies in (``path`` itself or the nearest folder above it holding ``.git``)."""
    here = os.path.realpath(path)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def discovered(root: str | None = None) -> tuple[str, list[tuple[str, str]]]:
    """The folder discovery serves (absolute) and its checkouts: those under ``root``; with no
    ``root``, those under the current directory, else (run inside one, even in a subfolder)
    the checkout it is in."""
    top = os.path.expanduser(root) if root else "."
    found = checkouts(top)
    if not found and not root and (inside := enclosing_checkout(top)) is not None:
        top, found = inside, checkouts(inside)
    return os.path.realpath(top), found


def default_index_dir() -> str:
    """Where the declaration index lives unless ``[index] dir`` says: ``$XDG_CACHE_HOME/fedsearch``,
    else ``~/.cache/fedsearch`` (``~`` expanded when it is opened)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(cache, "fedsearch")
