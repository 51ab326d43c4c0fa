"""An answer's facets counted over every file it ranked, not only the page shown.

Three facets, counted alike over the same file groups: by namespace, by language (a file's
name against :data:`~gateway.query.languages.LANGUAGES`, the first language whose glob
matches: the page's own rule) and by top folder (``src/``; a file at the root has none).
A cursor's snapshot holds every ranked file; :func:`count_facets` reads only their names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

from gateway.query.languages import LANGUAGES

__all__ = ["Facets", "count_facets", "language_of_name"]

#: How many values of a facet are listed (the most files first).
MOST = 50


def _suffixes() -> tuple[dict[str, str], dict[str, str]]:
    by_suffix: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for language, globs in LANGUAGES.items():
        for glob in globs:
            if glob.startswith("*.") and "." not in glob[2:]:
                by_suffix.setdefault(glob[1:], language)
            else:
                by_name.setdefault(glob, language)
    return by_suffix, by_name


_BY_SUFFIX, _BY_NAME = _suffixes()


def language_of_name(path: str) -> str | None:
    """The language of a file by its name, as a request's ``languages`` filter reads it."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    if dot >= 0:
        found = _BY_SUFFIX.get(name[dot:])
        if found is not None:
            return found
    return _BY_NAME.get(name)


class Facets(msgspec.Struct, frozen=True, kw_only=True):
    """Counts of file groups by facet value, the most first (ties by value); ``file_count`` groups in all."""

    file_count: int
    namespaces: list[tuple[str, int]]
    languages: list[tuple[str, int]]
    folders: list[tuple[str, int]]


def _top(counter: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:MOST]


def count_facets(files: Iterable[tuple[str, str]]) -> Facets:
    """The facets of ``(namespace, path)`` file groups."""
    namespaces: Counter[str] = Counter()
    languages: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    total = 0
    for namespace, path in files:
        total += 1
        namespaces[namespace] += 1
        language = language_of_name(path)
        if language is not None:
            languages[language] += 1
        cut = path.find("/")
        if cut > 0:
            folders[path[: cut + 1]] += 1
    return Facets(file_count=total, namespaces=_top(namespaces), languages=_top(languages), folders=_top(folders))
