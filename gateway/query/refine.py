"""The query filters no backend applies, applied to what came back (SPEC §7).

* ``sym:NAME``: only declarations whose name holds NAME (smart case, as rg); a
  ``line`` or ``file`` hit is dropped, and a file left with no hit is dropped.
* Include globs of the query when the request has include ``paths`` of its own
  (both must hold): backends apply the request's, the query's are checked here. A
  backend serving many repositories names files ``<repository>/<path>`` and the globs
  match the path inside the repository (:attr:`FileMatch.inner_path
  <gateway.models.FileMatch.inner_path>`); where the repository is not known (a peer's
  sub-namespace of such a kind) the path passes if it passes inside some repository it
  may name.

Outcomes with nothing to refine go through untouched (the same objects).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from msgspec.structs import replace

from gateway.models import REPOSITORY_KINDS, FileMatch, Hit, Outcome
from gateway.query.criteria import Criteria
from gateway.query.globs import PathFilter
from gateway.rank import RankedFile, Resolve

__all__ = ["declared", "refine"]

#: The hit budget a ``sym:`` query's files are made final within (all of them: it keeps declarations only).
_EVERY_HIT = 1 << 30

#: Hit kinds that are not declarations.
_NOT_DECLARATIONS = frozenset({"line", "file"})


def _symbol_test(symbols: Sequence[str]) -> Callable[[Hit], bool]:
    tests = [(s, True) if any(c.isupper() for c in s) else (s.lower(), False) for s in symbols]

    def keep(hit: Hit) -> bool:
        if hit.kind in _NOT_DECLARATIONS or not hit.symbol:
            return False
        return any(name in (hit.symbol if sensitive else hit.symbol.lower()) for name, sensitive in tests)

    return keep


def _path_test(globs: Sequence[str], outcome: Outcome) -> Callable[[FileMatch], bool]:
    """Whether a file of ``outcome`` passes ``globs`` inside its repository (SPEC §5)."""
    passes = PathFilter.build(globs)
    result = outcome.result
    prefixed = {c.name for c in result.children if c.backend in REPOSITORY_KINDS} if result is not None else set()
    if outcome.backend in REPOSITORY_KINDS:
        prefixed.add("")

    def test(file: FileMatch) -> bool:
        if file.repository:
            return passes(file.inner_path)
        if file.namespace in prefixed:
            return passes.inside_some_repository(file.path)
        return passes(file.path)

    return test


def _refined(outcome: Outcome, criteria: Criteria) -> Outcome:
    result = outcome.result
    if result is None:
        return outcome
    path_ok = _path_test(criteria.also_paths, outcome) if criteria.also_paths else None
    symbol_ok = _symbol_test(criteria.symbols) if criteria.symbols else None
    files: list[FileMatch] = []
    for file in result.files:
        if path_ok is not None and not path_ok(file):
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


def declared(outcomes: Sequence[Outcome], resolve: Resolve | None) -> Sequence[Outcome]:
    """``outcomes`` with every file's hits made final by ``resolve`` (declarations where the index knows
    them), for a ``sym:`` query: a local namespace's hits are lines until a page is cut, and ``sym:``
    keeps declarations only."""
    if resolve is None:
        return outcomes
    out: list[Outcome] = []
    for outcome in outcomes:
        result = outcome.result
        if result is None or not result.files:
            out.append(outcome)
            continue
        items = [RankedFile(outcome.namespace, file, 0.0) for file in result.files]
        files = tuple(item.file for item in resolve(items, 0, len(items), _EVERY_HIT))
        out.append(replace(outcome, result=replace(result, files=files)))
    return out
