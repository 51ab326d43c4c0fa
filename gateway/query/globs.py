"""Path globs (gitignore style, as ``rg -g``) compiled to RE2, and the local path filter.

A glob without ``/`` matches any component of a path (``*.py``, ``vendor``); a glob
with ``/`` is anchored at the namespace root and also matches everything under a
matching directory (``src/api`` matches ``src/api/x.go``). ``*`` and ``?`` stay
inside one component, ``**`` crosses components, ``[...]`` is a class, ``{a,b}``
an alternation; a leading ``!`` makes an exclude glob. No Python ``re`` ever runs
on these: they are translated by hand and compiled with RE2.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import re2

from gateway.errors import InvalidRequest
from gateway.query.languages import globs_for

__all__ = ["MAX_GLOBS", "MAX_GLOB_LENGTH", "PathFilter", "glob_to_regex", "validate_glob"]

MAX_GLOB_LENGTH = 256
MAX_GLOBS = 32
MAX_STARS = 16
MAX_BRACES = 8

Regex = Any  # google-re2 ships no type hints

_SPECIAL = frozenset("\\.^$|?*+()[]{}")


def _escape(ch: str) -> str:
    return "\\" + ch if ch in _SPECIAL else ch


def _translate(glob: str) -> str:
    """The RE2 body for one glob (no anchors), or raise ValueError."""
    out: list[str] = []
    i, n = 0, len(glob)
    depth = 0
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                before_ok = i == 0 or glob[i - 1] == "/"
                j = i + 2
                if before_ok and j < n and glob[j] == "/":
                    out.append("(?:.*/)?")
                    i = j + 1
                    continue
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                raise ValueError("unclosed '[' in glob")
            body = glob[i + 1 : j]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            body = body.replace("\\", "\\\\")
            out.append("[" + body + "]")
            i = j + 1
            continue
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        elif c == "\\" and i + 1 < n:
            out.append(_escape(glob[i + 1]))
            i += 2
            continue
        else:
            out.append(_escape(c))
        i += 1
    if depth:
        raise ValueError("unclosed '{' in glob")
    return "".join(out)


def glob_to_regex(glob: str) -> str:
    """An anchored RE2 pattern matching the relative paths that ``glob`` selects."""
    anchored = "/" in glob.rstrip("/")
    body = _translate(glob.strip("/"))
    if anchored:
        return "^" + body + "(?:/.*)?$"
    return "(?:^|/)" + body + "(?:/|$)"


def validate_glob(glob: str) -> str:
    """Check one glob's size and syntax; return its RE2 pattern or raise ValueError."""
    raw = glob[1:] if glob.startswith("!") else glob
    if not raw.strip("/"):
        raise ValueError("empty glob")
    if len(glob) > MAX_GLOB_LENGTH:
        raise ValueError(f"glob longer than {MAX_GLOB_LENGTH} characters")
    if raw.count("*") > MAX_STARS or raw.count("{") > MAX_BRACES:
        raise ValueError("glob too complex")
    if "\x00" in raw:
        raise ValueError("NUL byte in glob")
    pattern = glob_to_regex(raw)
    try:
        re2.compile(pattern)
    except re2.error as exc:
        raise ValueError(f"invalid glob: {exc}") from exc
    return pattern


def _union(patterns: Sequence[str]) -> Regex | None:
    if not patterns:
        return None
    return re2.compile("|".join(f"(?:{p})" for p in patterns))


class PathFilter(msgspec.Struct, frozen=True):
    """Decides locally whether a relative path passes a request's ``paths`` and ``languages``."""

    include: Regex | None
    exclude: Regex | None
    language: Regex | None

    @classmethod
    def build(cls, paths: Sequence[str], languages: Sequence[str] = ()) -> PathFilter:
        """The filter for ``paths`` and ``languages`` (raises ValueError on a bad glob).

        Built once per distinct pair and kept (every namespace of every request asks,
        and compiling its globs is most of what a filter costs).
        """
        return _build(tuple(paths), tuple(languages))

    @property
    def is_open(self) -> bool:
        return self.include is None and self.exclude is None and self.language is None

    def __call__(self, path: str) -> bool:
        path = path.lstrip("/")
        if self.exclude is not None and self.exclude.search(path):
            return False
        if self.include is not None and not self.include.search(path):
            return False
        return self.language is None or bool(self.language.search(path))

    def inside_some_repository(self, path: str) -> bool:
        """Whether ``path``, ``<repository>/<path>`` with a repository name of unknown length,
        passes as the path inside the repository for some split of it (SPEC §5)."""
        path = path.lstrip("/")
        at = path.find("/") + 1
        while at > 0:
            if self(path[at:]):
                return True
            at = path.find("/", at) + 1
        return False


@functools.lru_cache(maxsize=1024)
def _build(paths: tuple[str, ...], languages: tuple[str, ...]) -> PathFilter:
    includes = [validate_glob(g) for g in paths if not g.startswith("!")]
    excludes = [validate_glob(g[1:]) for g in paths if g.startswith("!")]
    langs = [glob_to_regex(g) for g in globs_for(languages)]
    return PathFilter(_union(includes), _union(excludes), _union(langs))


def check_globs(globs: Sequence[str], field: str = "paths") -> None:
    """Validate a request's globs, raising InvalidRequest that names ``field``."""
    if len(globs) > MAX_GLOBS:
        raise InvalidRequest(field, f"at most {MAX_GLOBS} globs")
    for i, glob in enumerate(globs):
        try:
            validate_glob(glob)
        except ValueError as exc:
            raise InvalidRequest(f"{field}[{i}]", f"{exc}: {glob!r}") from None


def namespace_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate for namespace names: ``*`` matches anything (``/`` included), ``?`` one char."""
    out: list[str] = []
    for ch in pattern:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(_escape(ch))
    regex = re2.compile("^" + "".join(out) + "$")
    return lambda name: bool(regex.match(name))
