"""The query filters no backend applies, applied to what came back (SPEC §7).

* ``sym:NAME``: only declarations whose name holds NAME (smart case, as rg); a
  ``line`` or ``file`` hit is dropped, and a file left with no hit is dropped.
* Include globs of the query when the request has include ``paths`` of its own
  (both must hold): backends apply the request's, the query's are checked here. A
  backend serving many repositories names files ``<repository>/<path>``, so there a
  glob with a ``/`` may match from any folder down.

Outcomes with nothing to refine go through untouched (the same objects).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from msgspec.structs import replace

from gateway.criteria import Criteria
from gateway.globs import PathFilter
from gateway.models import FileMatch, Hit, Outcome

__all__ = ["REPOSITORY_PREFIXED", "refine"]

#: Backend kinds whose file paths start with the repository's name.
REPOSITORY_PREFIXED = frozenset({"zoekt", "sourcegraph", "github", "gitlab", "hound", "livegrep"})

#: Hit kinds that are not declarations.
_NOT_DECLARATIONS = frozenset({"line", "file"})


def _symbol_test(symbols: Sequence[str]) -> Callable[[Hit], bool]:
    tests = [(s, True) if any(c.isupper() for c in s) else (s.lower(), False) for s in symbols]

    def keep(hit: Hit) -> bool:
        if hit.kind in _NOT_DECLARATIONS or not hit.symbol:
            return False
        return any(name in (hit.symbol if sensitive else hit.symbol.lower()) for name, sensitive in tests)

    return keep


def _path_test(globs: Sequence[str], prefixed: bool) -> Callable[[str], bool]:
    passes = PathFilter.build(globs)
    if not prefixed:
        return passes

    def inside_some_repository(path: str) -> bool:
        at = 0
        while at >= 0:
            if passes(path[at:]):
                return True
            at = path.find("/", at) + 1 or -1
        return False

    return inside_some_repository


def _refined(outcome: Outcome, criteria: Criteria) -> Outcome:
    result = outcome.result
    if result is None:
        return outcome
    path_ok = _path_test(criteria.also_paths, outcome.backend in REPOSITORY_PREFIXED) if criteria.also_paths else None
    symbol_ok = _symbol_test(criteria.symbols) if criteria.symbols else None
    files: list[FileMatch] = []
    for file in result.files:
        if path_ok is not None and not path_ok(file.path):
            continue
        if symbol_ok is not None:
            hits = tuple(h for h in file.hits if symbol_ok(h))
            if not hits:
                continue
            file = replace(file, hits=hits, definition=True)
        files.append(file)
    # what the backend said matched beyond what it sent no longer counts: it was not filtered
    return replace(outcome, result=replace(result, files=files, file_count=None))


def refine(criteria: Criteria, outcomes: Sequence[Outcome]) -> Sequence[Outcome]:
    """``outcomes`` with the filters of ``criteria`` that backends do not apply, applied."""
    if not criteria.symbols and not criteria.also_paths:
        return outcomes
    return [_refined(outcome, criteria) for outcome in outcomes]
