"""rg started before the one-shot search's imports: a guess at the search, checked before it is used.

A one-shot ``fedsearch search`` spends a third of its time importing what reads and ranks
rg's output (msgspec and its typing chain, re2, the models). rg needs none of it, so
:func:`speculate` starts rg first, from the flags as given, for the request the one-shot
search will most likely build (a plain query: no filters or quotes of SPEC §7, no namespaces,
paths or languages; smart case as the service reads it), and the imports run while rg
searches. Nothing trusts the guess: :func:`adapters.ripgrep.oneshot.start` adopts this rg only
if the request, once built and validated, asks for the very same argument vector from the
same folder; otherwise it is killed and the right rg started (a query the guess misread
costs a killed rg, never a wrong answer). rg's output flags (``--heading``, ``--column``, ``-0``...:
:mod:`gateway.cli.rgflags`) change how the answer is printed, not the request: the guess holds
with them (``tests/test_cli_plainargs.py``); with ``--max-depth``, which the one-shot search gives
rg, nothing is started early. Only the standard library is imported here.
"""

from __future__ import annotations

import os
import time

from adapters.ripgrep.spawn import Child, argv_of, find_rg, spawn

TYPE_CHECKING = False  # typing and collections not imported either
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["Early", "applies", "speculate"]

#: The request fields that leave rg's argument vector as the query alone makes it.
_NEUTRAL = frozenset(
    {
        "query",
        "mode",
        "case_sensitive",
        "context_lines",
        "files",
        "hit_budget",
        "char_budget",
        "hit_lines",
        "offset",
        "timeout_ms",
        "dedup",
    }
)
#: What a query needs to be read as written (no filters, quotes or /regex/ of the query syntax).
_SYNTAX = frozenset(':"/')


class Early:
    """An rg started early, and when (``time.monotonic()``, ``time.time_ns()``): the search began then."""

    def __init__(self, child: Child, started: float, since_ns: int) -> None:
        self.child: Child | None = child
        self.started = started
        self.since_ns = since_ns

    def take(self) -> Child | None:
        """The started rg, handed over once (its taker adopts or closes it)."""
        child, self.child = self.child, None
        return child

    def close(self) -> None:
        """Kill and reap the rg if nobody took it."""
        child = self.take()
        if child is not None:
            child.close()


def applies(config: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether the namespaces are discovered ones (no config file): the one-shot search may answer
    (on POSIX: it starts rg by posix_spawn and waits for it with poll)."""
    env = os.environ if env is None else env
    return os.name == "posix" and not (config or env.get("FEDSEARCH_CONFIG"))


def _guess(data: Mapping[str, Any]) -> tuple[str, bool, bool, int] | None:
    """(pattern, exact, case-sensitive, context lines) as the request will most likely ask rg, or None."""
    if not data.keys() <= _NEUTRAL:
        return None
    text, mode = data.get("query"), data.get("mode", "exact")
    if not isinstance(text, str) or not text.strip() or mode not in ("exact", "regex") or _SYNTAX.intersection(text):
        return None
    case = data.get("case_sensitive")
    if case is None:
        case = any(ch.isupper() for ch in text)  # smart case, as gateway.query.criteria.effective_case
    context = data.get("context_lines", 0)
    if not isinstance(case, bool) or type(context) is not int or not 0 <= context <= 10:
        return None
    return text, mode == "exact", case, context


def _indexed(roots: Mapping[str, str]) -> bool:
    """Whether the search will read the checkouts' content indexes (then it scans only what they name)."""
    from gateway.discovery import default_index_dir
    from gateway.index.content.paths import CLI_MIN_BYTES, usable_bytes

    indexed = usable_bytes(default_index_dir(), roots.values())
    return indexed > 0 and indexed >= CLI_MIN_BYTES


def speculate(roots: Mapping[str, str], data: Mapping[str, Any]) -> Early | None:
    """rg started over ``roots`` (namespace -> folder, in order) for the request ``data`` most
    likely is, or None when it is not plain enough to guess (or rg cannot start)."""
    guess = _guess(data)
    rg = find_rg()
    if guess is None or rg is None or not roots or _indexed(roots):
        return None
    text, exact, case, context = guess
    argv = argv_of(rg, text, exact=exact, case_sensitive=case, context_lines=context, roots=tuple(roots.values()))
    started, since_ns = time.monotonic(), time.time_ns()
    try:
        return Early(spawn(argv), started, since_ns)
    except OSError:
        return None
