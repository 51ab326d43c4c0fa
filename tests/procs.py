"""Processes as /proc shows them: a process's whole tree, and which of a set still runs.

A pid is a process only together with its start time (a pid is reused once its process is
gone), and a zombie has ended (its parent has not reaped it yet: under a container's pid 1
that may never happen), so :func:`alive` counts neither.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

__all__ = ["Proc", "alive", "descendants", "gone_within", "tree"]

#: A process: (pid, its start time in clock ticks since boot).
Proc = tuple[int, int]


def _stat(pid: int) -> tuple[str, int, int, str] | None:
    """(state, ppid, start time, name) of a process; None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19]), name


def _table() -> dict[int, tuple[str, int, int, str]]:
    if not os.path.isdir("/proc"):  # pragma: no cover - Linux only
        pytest.skip("needs /proc")
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(int(entry))) is not None:
            out[int(entry)] = found
    return out


def descendants(pid: int) -> set[Proc]:
    """Every running process below ``pid`` (its children, theirs, ...), zombies left out."""
    table = _table()
    children: dict[int, list[int]] = {}
    for child, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(child)
    out: set[Proc] = set()
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        state, _, start, _ = table[child]
        if state != "Z":
            out.add((child, start))
        todo.extend(children.get(child, ()))
    return out


def tree(pid: int) -> set[Proc]:
    """``pid`` and its descendants."""
    found = _stat(pid)
    return descendants(pid) | ({(pid, found[2])} if found is not None and found[0] != "Z" else set())


def alive(procs: set[Proc]) -> set[Proc]:
    """Those of ``procs`` still running (the same process: same start time; not a zombie)."""
    out = set()
    for pid, start in procs:
        found = _stat(pid)
        if found is not None and found[2] == start and found[0] != "Z":
            out.add((pid, start))
    return out


def gone_within(procs: set[Proc], seconds: float) -> tuple[set[Proc], float]:
    """Wait up to ``seconds`` for ``procs`` to end: those still running then, and how long it took."""
    started = time.monotonic()
    while (left := alive(procs)) and time.monotonic() - started < seconds:
        time.sleep(0.02)
    return left, time.monotonic() - started
