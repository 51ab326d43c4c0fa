"""One ``rg`` process for every ripgrep namespace a fan-out asks the same thing.

The namespaces of a fan-out that ask the same query with the same excludes share one
call (:mod:`adapters._coalesce`): :class:`RgCall` runs ONE ``rg`` over all their roots
(``rg … -- /root/a /root/b``) and hands each namespace (a :class:`Part` in its seat) its
own files, filtered and capped by its own :class:`~adapters.ripgrep.output.Collector`.
Spawning one process instead of N is most of what a local search costs over plain ``rg``.

Roots of which one lies inside another are searched by separate processes (neither may
see the other's files twice). rg is given absolute roots and runs where the gateway
does, which lets it start by ``posix_spawn`` (:mod:`adapters.ripgrep.process`); only a
lone namespace with excludes that hold a ``/`` runs from its own root, where rg matches
them and skips what they name (in a batch the path filter applies them to rg's output).
rg is killed and reaped in every case (done, capped, deadline, error, or every caller
gone). In a server, the rg of a search was started before it came and waits for its
pattern on stdin (:mod:`adapters.ripgrep.warm`); elsewhere rg starts with the search.

Each rg first takes a slot of the search's scan queue (``[server] max_scans`` rg at once,
all requests together: :mod:`gateway.resilience.admission`), and tells it, once done,
how long it took (what the queue learns each namespace's cost from). One whose deadline
comes while it waits, or whose turn comes too late to find much, starts nothing: its
namespaces answer ``timeout`` (:data:`QUEUED`).

rg's output is read from an :class:`~adapters.ripgrep.output.OutputPipe` when rg exits,
at a tick while it runs once it has written something (a search that finds nothing is
not woken before rg's exit), or as it comes while rg fills the pipe; caps are checked
after each read. At the deadline (rg's own timer, or the fan-out's hand-back, whichever
comes first) whatever the pipe holds is read and each namespace answered ``timeout``
with the files found so far.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from adapters._coalesce import Seat
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
from adapters.ripgrep.warm import WarmPool, start, stdin_pattern
from gateway.errors import BackendError
from gateway.models import BackendResult, SearchQuery, Status
from gateway.narrowing import Narrowed, Narrower
from gateway.resilience.admission import Scan, scan_slot
from gateway.tracing import span

__all__ = ["ARGV_BUDGET", "QUEUED", "SCAN_NICE", "Part", "RgCall", "Router"]


#: rg runs this much nicer than the gateway: under load the event loop (answers, refusals,
#: hand-backs at a deadline) gets the CPU first; alone, rg has it all the same.
SCAN_NICE = 10
#: Checkouts asked of the content index in one thread at least; past twice as many, they are asked in up to
#: NARROW_THREADS threads at once.
NARROW_SHARE = 64
NARROW_THREADS = min(4, os.cpu_count() or 1)
#: Bytes of file and folder names one narrowed rg may be given (Linux allows 2 MiB of arguments
#: and environment together): roots narrowed past it are scanned instead.
ARGV_BUDGET = 1_000_000
#: Why a namespace whose rg never started answers ``timeout``.
QUEUED = "no local scan slot came free in time to search before the deadline (see [server] max_scans)"


@dataclass(slots=True)
class Part:
    """One namespace's part in an rg search: its root, the collector of its files, its name
    (what the scan queue learns costs by)."""

    root: str
    collector: Collector
    name: str = ""


def _finish(seat: Seat[Part], status: Status, reason: str) -> None:
    seat.answer(BackendResult(files=seat.value.collector.ranked(), status=status, reason=reason))


def _open(seat: Seat[Part]) -> bool:
    return seat.waiting() and not seat.value.collector.capped


class Router:
    """Which seat an rg output path belongs to: its root is the greatest prefix not above it.

    Roots in one rg never lie inside one another (:func:`_independent`), so the root
    sorted just before a path is the only one that can hold it.
    """

    def __init__(self, seats: Sequence[Seat[Part]]) -> None:
        pairs = sorted(((s.value.root.rstrip("/") + "/", i) for i, s in enumerate(seats)))
        self._prefixes = [p for p, _ in pairs]
        self._seats = [seats[i] for _, i in pairs]
        self._single = seats[0] if len(seats) == 1 else None
        self._last: Seat[Part] | None = None
        self._touched: list[Seat[Part]] = []

    def __call__(self, path: str) -> Collector | None:
        seat = self._single
        if seat is None:
            i = bisect.bisect_right(self._prefixes, path) - 1
            if i < 0 or not path.startswith(self._prefixes[i]):
                return None
            seat = self._seats[i]
        if seat is not self._last:
            self._last = seat
            self._touched.append(seat)
        return seat.value.collector if _open(seat) else None

    def touched(self) -> list[Seat[Part]]:
        """The seats handed files since the last call (the one whose file may go on, again)."""
        touched = self._touched
        self._touched = [] if self._last is None else [self._last]
        return touched


class _Reading:
    """One rg's output on its way into the seats' collectors."""

    def __init__(self, seats: Sequence[Seat[Part]], pipe: OutputPipe) -> None:
        self.seats = seats
        self.pipe = pipe
        self.router = Router(seats)
        self.reader = OutputReader(self.router, blocks=not seats[0].value.collector.context_lines)
        self.nobody_left = False
        self._checked = 0  # seats[:_checked] are answered or gone

    def all_settled(self) -> bool:
        """Whether every seat is answered or gone; amortised O(1) (an rg can serve thousands)."""
        seats = self.seats
        while self._checked < len(seats) and not seats[self._checked].waiting():
            self._checked += 1  # a settled seat stays settled
        return self._checked == len(seats)

    def feed(self, chunk: bytes) -> bool:
        """Take a read of rg's output; whether anyone still wants more."""
        self.reader.feed_bytes(chunk)
        _settle_capped(self.router.touched())  # only they can have reached a cap
        self.nobody_left = self.all_settled()
        return not self.nobody_left

    def hand_back(self) -> None:
        """The deadline: what the pipe holds is read, and each seat gets what was found."""
        if self.pipe.read_fd < 0 or self.all_settled():
            return
        self.pipe.drain(self.feed)
        self.reader.end(eof=False)
        for seat in self.seats:
            _finish(seat, "timeout", f"stopped at the deadline after {seat.value.collector.started} files")


class RgCall:
    """The ``send`` and ``hand_back`` of one rg search shared by several namespaces."""

    __slots__ = ("_exclude", "_narrower", "_query", "_readings", "_rg", "_warm")

    def __init__(
        self,
        rg: str,
        query: SearchQuery,
        exclude: Sequence[str],
        warm: WarmPool | None = None,
        narrower: Narrower | None = None,
    ) -> None:
        self._rg = rg
        self._query = query
        self._exclude = exclude
        self._warm = warm  # a server's waiting rg (:mod:`adapters.ripgrep.warm`)
        self._narrower = narrower  # the content index (:mod:`gateway.narrowing`)
        self._readings: list[_Reading] = []

    async def send(self, seats: Sequence[Seat[Part]]) -> None:
        """Search every seat's root (one rg, or one per group of independent roots, and one for the
        roots the content index narrowed); answer each seat."""
        narrowed: dict[int, Narrowed] = {}
        if self._narrower is not None:
            with span("fedsearch.index.narrow") as current:
                narrowed = await self._narrow(seats)
                if current is not None:
                    current.set_attributes({"fedsearch.namespaces": len(seats), "fedsearch.narrowed": len(narrowed)})
        groups: list[tuple[Sequence[Seat[Part]], dict[int, Narrowed] | None]] = []
        for group in _independent([seat for seat in seats if seat.waiting()]):
            whole = [seat for seat in group if id(seat) not in narrowed]
            named = [seat for seat in group if id(seat) in narrowed]
            if whole:
                groups.append((whole, None))
            if named:
                groups.append((named, narrowed))
        if len(groups) == 1:
            await self._search(*groups[0])
        elif groups:
            await asyncio.gather(*(self._search(*group) for group in groups))

    async def _narrow(self, seats: Sequence[Seat[Part]]) -> dict[int, Narrowed]:
        """What the content index says of each seat's root (in a thread: it reads files): the seats it
        narrowed, by ``id``; a seat it narrowed to nothing is answered at once."""
        narrower, query = self._narrower, self._query
        assert narrower is not None

        def ask(part: Sequence[Seat[Part]]) -> list[Narrowed | str]:
            return [narrower.narrow(s.value.root, query, s.value.collector.accept) for s in part]

        threads = min(NARROW_THREADS, len(seats) // NARROW_SHARE)
        if threads <= 1:
            answers = await asyncio.to_thread(ask, seats)
        else:  # an engine's search and a stat let go of the GIL: 384 checkouts asked in 0.7x the time on 2 cores
            step = -(-len(seats) // threads)
            parts = await asyncio.gather(
                *(asyncio.to_thread(ask, seats[i : i + step]) for i in range(0, len(seats), step))
            )
            answers = [answer for part in parts for answer in part]
        out: dict[int, Narrowed] = {}
        size = 0
        for seat, answer in sorted(zip(seats, answers, strict=True), key=_named_size):
            if not isinstance(answer, Narrowed):
                continue
            if not answer.files and not answer.folders:
                _finish(seat, "ok", "")  # no file can hold a match
                continue
            size += _named_size((seat, answer))
            if size > ARGV_BUDGET:
                break  # the rest are scanned: rg's arguments must fit the system's limit
            out[id(seat)] = answer
        return out

    def hand_back(self, seats: Sequence[Seat[Part]]) -> None:
        for reading in self._readings:
            reading.hand_back()
        for seat in seats:  # still waiting for a scan slot: nothing was found
            if seat.waiting():
                _finish(seat, "timeout", QUEUED)

    async def _search(self, seats: Sequence[Seat[Part]], narrowed: dict[int, Narrowed] | None = None) -> None:
        """One rg over ``seats`` (what the index ``narrowed`` of each, if given), once a scan slot is
        free (:mod:`gateway.resilience.admission`)."""
        started = False
        try:
            async with scan_slot([s.value.name for s in seats], self._query.deadline) as scan:
                started = True
                if any(seat.waiting() for seat in seats):  # not all gone (or handed back) while it waited
                    with span("fedsearch.rg") as current:  # with ``confirm``: rg reads what the index named
                        if current is not None:
                            current.set_attributes(
                                {"fedsearch.namespaces": len(seats), "fedsearch.rg.confirm": narrowed is not None}
                            )
                        await self._run(seats, scan, narrowed)
        except TimeoutError:
            if started:
                raise
            for seat in seats:  # the deadline came first: nothing was started
                if seat.waiting():
                    _finish(seat, "timeout", QUEUED)

    async def _run(self, seats: Sequence[Seat[Part]], scan: Scan, narrowed: dict[int, Narrowed] | None) -> None:
        query, exclude = self._query, self._exclude
        cwd: str | None = None
        roots: tuple[str, ...] = (".",)
        if narrowed is not None:  # the files and folders the index named, absolute
            roots = tuple(p for s in seats for n in (narrowed[id(s)],) for p in (*n.files, *n.folders))
            for seat in seats:
                seat.value.collector.strip = len(seat.value.root.rstrip("/")) + 1
        elif len(seats) == 1 and any(map(anchored, excludes(query, exclude))):
            cwd = seats[0].value.root  # rg skips what those excludes name, relative to where it runs
        else:  # absolute roots: rg runs where we do, started faster (posix_spawn, see process.py)
            roots = tuple(s.value.root for s in seats)
            for seat in seats:
                seat.value.collector.strip = len(seat.value.root.rstrip("/")) + 1
        warm = self._warm is not None and cwd is None and narrowed is None  # a narrowed vector never recurs
        pattern = stdin_pattern(query.text) if warm else None
        named = narrowed is not None
        argv = build_argv(self._rg, query, exclude, roots, from_stdin=pattern is not None, narrowed=named)
        try:
            child, pipe = self._start(argv, cwd, pattern)
        except OSError as exc:
            error = BackendError(f"cannot start rg: {exc.strerror or exc}")
            for seat in seats:
                seat.fail(error)
            return
        try:
            reading = _Reading(seats, pipe)
            self._readings.append(reading)
            try:
                await _read(child, reading, query.deadline, narrowed is not None)
            except BaseException as exc:  # cancelled, or a bug: nobody is left waiting forever
                for seat in seats:
                    seat.fail(exc)
                raise
            finally:
                scan.outcome = _learnt(child, seats, query.deadline)
                await child.stop()
                child.close()
        finally:
            pipe.close()
            if pattern is not None and self._warm is not None:
                self._warm.refill(argv, SCAN_NICE)

    def _start(self, argv: list[str], cwd: str | None, pattern: bytes | None) -> tuple[Child, OutputPipe]:
        """rg searching: given ``pattern`` (its vector reads it from stdin) by a waiting rg
        or by one started now, else started with its pattern in ``argv``; OSError if it cannot start."""
        if pattern is None:
            pipe = OutputPipe()
            try:
                child = Child(argv, cwd=cwd, stdout=pipe.write_fd, nice=SCAN_NICE)
            except BaseException:
                pipe.close()
                raise
            pipe.started()
            return child, pipe
        assert self._warm is not None
        started = self._warm.take(argv)
        if started is None or not started.give(pattern):
            if started is not None:  # it died while it waited
                started.discard()
            started = start(argv, SCAN_NICE)
            started.give(pattern)  # if it died at once, its exit says why
        return started.child, started.pipe


def _learnt(child: Child, seats: Sequence[Seat[Part]], deadline: float) -> Literal["complete", "cut"] | None:
    """What this scan says of what a scan costs: all (rg ended, or its callers' caps stopped it),
    a lower bound (cut at the deadline), or nothing (every caller went)."""
    if child.exited.done() or any(seat.value.collector.capped for seat in seats):
        return "complete"
    return "cut" if time.monotonic() >= deadline else None


async def _read(child: Child, reading: _Reading, deadline: float, narrowed: bool = False) -> None:
    """Read rg's output when it exits, or at each tick once it began writing (see :class:`OutputPipe`);
    ``narrowed``: rg read files the content index named, so its status 2 with nothing on stderr is a
    file gone meanwhile (``--no-messages``), not a failure."""
    seats, pipe = reading.seats, reading.pipe
    exited = child.exited
    try:
        async with asyncio.timeout_at(deadline):
            quiet = True  # rg has written nothing yet: no ticks, woken by its first output or its exit
            streaming = False  # reading as rg writes: it fills the pipe faster than ticks empty it
            while not pipe.ended:
                await pipe.wait(exited, None if quiet else TICK_S, readable=quiet or streaming)
                if reading.all_settled():
                    return  # handed back at the deadline, or every caller gone
                if quiet and not exited.done():
                    quiet = False  # rg began to write: read at ticks from now (a first file is no read's worth)
                    continue
                taken = pipe.drain(reading.feed)
                if reading.nobody_left:
                    return
                if exited.done() and not taken:
                    break  # rg is gone; its output too (unless something else holds the pipe)
                streaming = taken >= pipe.capacity // 2
            reading.reader.end()
            _settle_capped(seats)
            returncode = await exited
    except TimeoutError:
        reading.hand_back()
        return
    if returncode == 2 and pipe.read == 0 and not (narrowed and not child.stderr.strip()):
        error = BackendError(error_line(child.stderr))
        for seat in seats:
            seat.fail(error)
        return
    if returncode not in (0, 1, 2):
        error = BackendError(f"rg exited with status {returncode}")
        for seat in seats:
            seat.fail(error)
        return
    for seat in seats:
        _finish(seat, "ok", "")


def _settle_capped(seats: Sequence[Seat[Part]]) -> None:
    """Answer the seats that reached a cap."""
    for seat in seats:
        collector = seat.value.collector
        if collector.capped and seat.waiting():
            _finish(seat, "capped", collector.capped)


def _named_size(pair: tuple[Seat[Part], Narrowed | str]) -> int:
    """Bytes of rg's arguments a narrowed root takes (0: it is not narrowed)."""
    answer = pair[1]
    if not isinstance(answer, Narrowed):
        return 0
    return sum(len(p) + 1 for p in answer.files) + sum(len(p) + 1 for p in answer.folders)


def _independent(seats: Sequence[Seat[Part]]) -> list[Sequence[Seat[Part]]]:
    """Groups to run: all together, unless one root lies inside (or is) another."""
    roots = sorted(s.value.root.rstrip("/") + "/" for s in seats)
    nested = any(b.startswith(a) for a, b in itertools.pairwise(roots))
    return [[s] for s in seats] if nested else [seats]
