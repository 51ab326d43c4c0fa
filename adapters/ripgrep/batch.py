"""One ``rg`` process for every ripgrep namespace a fan-out asks the same thing.

A fan-out starts every namespace's search in the same turn of the event loop. The
:class:`Batcher` lets them gather for two turns, then runs ONE ``rg`` over all their
roots (``rg … -- /root/a /root/b``) and hands each namespace its own files, filtered
and capped by its own :class:`~adapters.ripgrep.output.Collector`. Spawning one process instead
of N is most of what a local search costs over plain ``rg``.

Namespaces are batched only when rg would see exactly what it sees alone: the same
query and the same excludes, and roots of which none lies inside another. rg is
given absolute roots and runs where the gateway does, which lets it start by
``posix_spawn`` (:mod:`adapters.ripgrep.process`); only a lone namespace with excludes that
hold a ``/`` runs from its own root, where rg matches them and skips what they name
(in a batch the path filter applies them to rg's output). rg is killed and reaped
in every case (done, capped, deadline, error, or every caller cancelled).

rg's output is read from an :class:`~adapters.ripgrep.output.OutputPipe` when rg exits, at a
tick while it runs once it has written something (a search that finds nothing is
not woken before rg's exit), or as it comes while rg fills the pipe; caps are
checked after each read, and at the deadline whatever the pipe holds is read
before answering.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from adapters.ripgrep.output import (
    TICK_S,
    Collector,
    OutputPipe,
    OutputReader,
    anchored,
    build_argv,
    error_line,
    excludes,
)
from adapters.ripgrep.process import Child
from gateway.backend import call_slot
from gateway.errors import BackendError
from gateway.models import BackendResult, SearchQuery, Status

__all__ = ["Batcher", "Member", "run"]


@dataclass(slots=True)
class Member:
    """One namespace's part in a batch."""

    root: str
    collector: Collector
    future: asyncio.Future[BackendResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    batch: _Batch | None = None

    def open(self) -> bool:
        return not self.future.done() and not self.collector.capped

    def finish(self, status: Status, reason: str) -> None:
        if not self.future.done():
            self.future.set_result(BackendResult(files=self.collector.ranked(), status=status, reason=reason))

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


@dataclass(slots=True)
class _Batch:
    """Members searched by one rg, the process once started, and the task running it."""

    members: Sequence[Member]
    proc: Child | None = None
    task: asyncio.Task[None] | None = None
    cancelled: bool = False  # a caller left without its answer
    _checked: int = 0  # members[:_checked] are answered or gone

    def all_settled(self) -> bool:
        """Whether every caller is answered or gone; amortised O(1) (a batch can hold thousands)."""
        members = self.members
        while self._checked < len(members) and members[self._checked].future.done():
            self._checked += 1  # a settled future stays settled
        return self._checked == len(members)

    def settled(self, future: asyncio.Future[BackendResult]) -> None:
        """A caller answered or gone; once every one is, one at least cancelled: end rg (the task reaps it)."""
        self.cancelled = self.cancelled or future.cancelled()
        if self.cancelled and self.proc is not None and self.all_settled():
            self.proc.kill()


class _Router:
    """Which member an rg output path belongs to: its root is the greatest prefix not above it.

    Roots in one batch never lie inside one another (:func:`_independent`), so the
    root sorted just before a path is the only one that can hold it.
    """

    def __init__(self, members: Sequence[Member]) -> None:
        pairs = sorted((m.root.rstrip("/") + "/", m) for m in members)
        self._prefixes = [p for p, _ in pairs]
        self._members = [m for _, m in pairs]
        self._single = members[0] if len(members) == 1 else None
        self._last: Member | None = None
        self._touched: list[Member] = []

    def __call__(self, path: str) -> Collector | None:
        member = self._single
        if member is None:
            i = bisect.bisect_right(self._prefixes, path) - 1
            if i < 0 or not path.startswith(self._prefixes[i]):
                return None
            member = self._members[i]
        if member is not self._last:
            self._last = member
            self._touched.append(member)
        return member.collector if member.open() else None

    def touched(self) -> list[Member]:
        """The members handed files since the last call (the one whose file may go on, again)."""
        touched = self._touched
        self._touched = [] if self._last is None else [self._last]
        return touched


async def run(rg: str, query: SearchQuery, exclude: Sequence[str], members: Sequence[Member]) -> None:
    """Search every member's root with one rg; settle each member's future."""
    batch = members[0].batch or _Batch(members)
    try:
        async with call_slot():  # one place in the fan-out's gate for the whole batch
            if not batch.all_settled():  # else every caller left before rg started
                await _search(rg, query, exclude, batch)
    finally:
        for m in members:  # a member and its batch refer to each other: left alone, that cycle
            m.batch = None  # would keep every file found alive until the cycle collector ran


async def _search(rg: str, query: SearchQuery, exclude: Sequence[str], batch: _Batch) -> None:
    members = batch.members
    cwd: str | None = None
    roots: tuple[str, ...] = (".",)
    if len(members) == 1 and any(map(anchored, excludes(query, exclude))):
        cwd = members[0].root  # rg skips what those excludes name, relative to where it runs
    else:  # absolute roots: rg runs where we do, started faster (posix_spawn, see _child)
        roots = tuple(m.root for m in members)
        for m in members:
            m.collector.strip = len(m.root.rstrip("/")) + 1
    pipe = OutputPipe()
    try:
        try:
            child = Child(build_argv(rg, query, exclude, roots), cwd=cwd, stdout=pipe.write_fd)
        except OSError as exc:
            error = BackendError(f"cannot start rg: {exc.strerror or exc}")
            for m in members:
                m.fail(error)
            return
        pipe.started()
        batch.proc = child
        try:
            await _read(child, pipe, query.deadline, batch)
        except BaseException as exc:  # cancelled, or a bug: nobody is left waiting forever
            for m in members:
                m.fail(exc if isinstance(exc, Exception) else BackendError("search cancelled"))
            raise
        finally:
            await child.stop()
            child.close()
    finally:
        pipe.close()


async def _read(child: Child, pipe: OutputPipe, deadline: float, batch: _Batch) -> None:
    """Read rg's output when it exits, or at each tick once it began writing (see :class:`OutputPipe`)."""
    members = batch.members
    router = _Router(members)
    reader = OutputReader(router, blocks=not members[0].collector.context_lines)
    nobody_left = False

    def feed(chunk: bytes) -> bool:
        nonlocal nobody_left
        reader.feed_bytes(chunk)
        _settle_capped(router.touched())  # only they can have reached a cap (a batch can hold thousands)
        nobody_left = batch.all_settled()
        return not nobody_left

    exited = child.exited
    try:
        async with asyncio.timeout_at(deadline):
            quiet = True  # rg has written nothing yet: no ticks, woken by its first output or its exit
            streaming = False  # reading as rg writes: it fills the pipe faster than ticks empty it
            while not pipe.ended:
                await pipe.wait(exited, None if quiet else TICK_S, readable=quiet or streaming)
                if quiet and not exited.done():
                    quiet = False  # rg began to write: read at ticks from now (a first file is no read's worth)
                    continue
                taken = pipe.drain(feed)
                if nobody_left:
                    return
                if exited.done() and not taken:
                    break  # rg is gone; its output too (unless something else holds the pipe)
                streaming = taken >= pipe.capacity // 2
            reader.end()
            _settle_capped(members)
            returncode = await exited
    except TimeoutError:
        pipe.drain(feed)  # what rg found before the deadline
        reader.end(eof=False)
        for m in members:
            m.finish("timeout", f"stopped at the deadline after {m.collector.started} files")
        return
    if returncode == 2 and pipe.read == 0:
        error = BackendError(error_line(child.stderr))
        for m in members:
            m.fail(error)
        return
    if returncode not in (0, 1, 2):
        error = BackendError(f"rg exited with status {returncode}")
        for m in members:
            m.fail(error)
        return
    for m in members:
        m.finish("ok", "")


def _settle_capped(members: Sequence[Member]) -> None:
    """Answer the members that reached a cap."""
    for m in members:
        if m.collector.capped and not m.future.done():
            m.finish("capped", m.collector.capped)


def _independent(members: list[Member]) -> list[list[Member]]:
    """Groups to run: all together, unless one root lies inside (or is) another."""
    roots = sorted(m.root.rstrip("/") + "/" for m in members)
    nested = any(b.startswith(a) for a, b in itertools.pairwise(roots))
    return [[m] for m in members] if nested else [members]


class Batcher:
    """Coalesces concurrent searches that ask the same thing into one rg per turn."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, tuple[str, SearchQuery, tuple[str, ...], list[Member]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def search(self, rg: str, query: SearchQuery, exclude: Sequence[str], member: Member) -> BackendResult:
        key = (rg, query, tuple(exclude))
        batch = self._pending.get(key)
        if batch is None:
            batch = (rg, query, tuple(exclude), [])
            self._pending[key] = batch
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self._launch, key)  # two turns: let the whole fan-out join
        batch[3].append(member)
        try:
            return await member.future
        finally:
            # The last of a batch to leave waits until rg is reaped: no process outlives its callers.
            done = member.batch
            if done is not None and done.task is not None and done.all_settled():
                await asyncio.wait({done.task})

    def _launch(self, key: Hashable) -> None:
        rg, query, exclude, members = self._pending.pop(key)
        for group in _independent(members):
            batch = _Batch(group)
            for m in group:
                m.batch = batch
                m.future.add_done_callback(batch.settled)
            task = asyncio.get_running_loop().create_task(run(rg, query, exclude, group))
            batch.task = task
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # settled on the members' futures already
