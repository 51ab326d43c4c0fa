"""Admission: at most ``[server] max_scans`` local scans at once, and a request that cannot
make its deadline refused at once (SPEC §6, last paragraph).

A **scan** is one local process searching (one ``rg``, however many namespaces it serves:
the batching of :mod:`adapters.ripgrep.batch` works inside the bound). :class:`ScanQueue`
lets ``max_scans`` run and keeps the rest waiting in arrival order; a scan still waiting
when its deadline comes gives up (its namespaces answer ``timeout``, nothing was started).
A scan whose turn comes with less time left than half of what a scan takes (its mean)
starts nothing either: it would be cut before finding much, and the slot serves the
next one better (they are behind it in arrival order, so their deadlines are later).
An adapter takes its place with :func:`scan_slot`; outside a search of the service (an
adapter called on its own) nothing is bounded.

**What a scan costs is learnt, not configured**: a moving estimate per namespace of how
long the scans that searched it took (mean and mean deviation, smoothed as TCP smooths
round-trip times: gains 1/8 and 1/4, RFC 6298), observed under the load they ran in,
so the estimate follows the machine. A scan cut at its deadline is a lower bound: it
raises an estimate, never lowers one. The references are Envoy's adaptive concurrency
filter and Netflix's concurrency-limits, which learn from latencies what a server can
take; here the limit itself is known (the CPUs), and what is learnt is the time a
request needs.

**Admission** (:meth:`ScanQueue.admit`), before any fan-out, for a request with local
work: its expected wait is the work ahead of it (what is left of the running scans,
the waiting ones, and those of requests admitted a moment ago) over ``max_scans``; in
other words the queue's length over its drain rate (``max_scans`` scans per scan
time). Every scan is planned at its namespaces' estimate *now* (a waiting scan's cost
moves while it waits) and at mean plus two deviations: the wait of a request at the
back of a long queue is a sum of many scans, and the machine's speed drifts while
they run (measured on a shared machine: a 5 s queue planned at the mean came out 30 %
longer), so the plan's margin grows with the queue. Its own work is planned the same
way. If the wait plus the work does not fit in what is left of its deadline it is
refused: :class:`~gateway.errors.Overloaded`, with ``retry_after`` the time the queue
needs to drain to a wait it could bear (503 problem JSON with ``Retry-After`` over HTTP).
A request is never refused while a slot is free (it then waits for nothing, and what it
costs is learnt again), so estimates from a busier moment cannot lock work out.

A request whose namespaces are partly remote is never refused for its local part: that
part is **shed** (its local namespaces answer ``unavailable`` at once, with the same
retry time) and the remote ones are searched. A request with no local work is not
held back by the queue at all.

**Callers share it fairly** (issue 53; who a caller is: :mod:`gateway.resilience.callers`).
Waiting scans queue per caller and take free slots by start-time fair queueing
(:mod:`gateway.resilience.fairness`, weighted by the caller's token ``weight``): a caller
arriving beside a busy one waits behind at most one of its scans, never its whole queue.
A request's expected wait is planned the same way, for its caller: the running scans, its
caller's own queue, and of each other caller's queue only as much as that caller would be
served meanwhile (its weight's part). So a caller flooding the gateway makes its own wait
long, not anyone else's: it is the one refused, with ``Retry-After`` from its own queue. The
others' work yet to come counts too: fair queueing serves it ahead of a long queue, so each
caller's use of the slots is a moving rate (:class:`Use`), and a caller's queue is planned to
drain on the slots the others leave it (the others already queued past its horizon aside); a
caller past its share plans to fill no more than ``1 - MARGIN`` of its time left. A
refusal of a caller that already holds or waits for more than its share of the slots (``max_scans``
times its weight over the weights of the callers seen in the last :data:`ACTIVE_S`), and for
more than one, is
:class:`~gateway.errors.CallerLimited` (429, ``reason`` ``share``); one that asked no more
than its share is the capacity's (503, as above). A token's ``rate``/``burst`` quota is
taken as a request is admitted (:mod:`gateway.resilience.quota`; 429, ``reason`` ``quota``).
With one caller present and none other lately, all this is the FIFO and the plan above.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from gateway.backend import AsyncBackend
from gateway.errors import BackendUnavailable, CallerLimited, Overloaded
from gateway.models import BackendResult, Mode, SearchQuery
from gateway.resilience.callers import LOCAL, Principal, current
from gateway.resilience.fairness import FairQueue
from gateway.resilience.quota import Bucket, default_burst
from gateway.tracing import event, span
from gateway.tracing import on as tracing_on

if TYPE_CHECKING:
    from gateway.fanout import Route

__all__ = [
    "EVENTS",
    "Estimate",
    "Scan",
    "ScanQueue",
    "Ticket",
    "TooLate",
    "Use",
    "scan_slot",
]

#: The gains of the moving estimate: its mean and its mean deviation (RFC 6298's).
MEAN_GAIN = 1 / 8
DEVIATION_GAIN = 1 / 4
#: Every scan (a request's own, and those ahead of it) is planned at its mean plus this many deviations.
DEVIATIONS = 2.0
#: What the queue tells its observers (``/metrics`` counts them): a decision, a scan that
#: waited (seconds), one that ran to its end (seconds), one whose deadline came first.
EVENTS = ("admitted", "refused", "shed", "waited", "scanned", "expired")
#: What it tells its caller observers, with the caller's key: a decision (a refusal by its
#: reason: ``capacity`` 503, ``share`` or ``quota`` 429), a scan that joined the queue and
#: one that left it (granted or gone), and a scan's wait (seconds).
CALLER_EVENTS = (
    "admitted",
    "refused_capacity",
    "refused_share",
    "refused_quota",
    "shed",
    "queued",
    "dequeued",
    "waited",
)
#: A caller seen this recently (seconds) counts among those the slots are shared by.
ACTIVE_S = 10.0
#: Callers remembered with nothing in the queue before idle ones are forgotten.
REMEMBERED = 4096
#: How long the slots a caller held are remembered: the time constant (seconds) of the
#: exponential decay of :class:`Use`, the moving rate at which it uses them.
USE_S = ACTIVE_S
#: The shortest time a caller's :class:`Use` is taken over: a caller that just came, one scan done,
#: is not taken for one that will hold a slot from now on.
USE_MIN_S = USE_S / 2
#: A caller whose last scan ended this long ago (seconds) counts no more among those using the slots.
USED_S = 3 * USE_S
#: The most of the slots a caller's plan counts others' new work taking while it waits.
ARRIVING = 0.75
#: The part of its time left that a caller past its share may not plan to fill: its queue is the
#: longest, and the machine's speed drifts while it drains (measured on a shared machine: the
#: capacity fell by a third within a minute); refusing it early loses no slot, others keep them busy.
MARGIN = 0.2

Event = Literal["admitted", "refused", "shed", "waited", "scanned", "expired"]
Refusal = Literal["capacity", "share", "quota"]


@dataclass(slots=True)
class Estimate:
    """A moving estimate of a duration: smoothed mean and mean deviation (seconds)."""

    mean: float = 0.0
    deviation: float = 0.0
    samples: int = 0

    def observe(self, seconds: float) -> None:
        if self.samples == 0:
            self.mean, self.deviation = seconds, seconds / 2
        else:
            error = seconds - self.mean
            self.mean += MEAN_GAIN * error
            self.deviation += DEVIATION_GAIN * (abs(error) - self.deviation)
        self.samples += 1

    def at_least(self, seconds: float) -> None:
        """A duration known only to be at least ``seconds`` (cut short): it can only raise the mean."""
        if self.samples == 0 or seconds > self.mean:
            self.observe(seconds)

    def cost(self) -> float:
        """What to plan for: the mean plus :data:`DEVIATIONS` deviations."""
        return self.mean + DEVIATIONS * self.deviation


@dataclass(slots=True)
class Use:
    """How many slots a caller held lately, on average: the slot-seconds of its scans, each decayed
    by ``exp(-age / USE_S)``, over what the decay weighs of the time since its first scan began
    (at most :data:`USE_S`; at least :data:`USE_MIN_S`): an exponentially weighted rate, unbiased
    from its start (a caller that just came is counted at its rate so far, not at a tenth of it)."""

    held: float = 0.0
    at: float = 0.0
    since: float | None = None

    def add(self, seconds: float, now: float) -> None:
        """A scan that held a slot ``seconds`` ended at ``now``."""
        if self.since is None:
            self.since, self.held = now - seconds, seconds
        else:
            self.held = self.held * math.exp((self.at - now) / USE_S) + seconds
        self.at = now

    def slots(self, now: float) -> float:
        """Slots held on average lately (at ``now``)."""
        if self.since is None:
            return 0.0
        span = -USE_S * math.expm1(-max(now - self.since, USE_MIN_S) / USE_S)
        return self.held * math.exp((self.at - now) / USE_S) / span


@dataclass(slots=True, eq=False)
class Scan:
    """One scan holding a slot: set ``outcome`` when it ends (``complete``: ran to its end or
    its caps; ``cut``: stopped at its deadline); left None, nothing is learnt from it."""

    names: tuple[str, ...]
    started: float
    waited: float = 0.0
    outcome: Literal["complete", "cut"] | None = None
    caller: str = LOCAL.key


@dataclass(slots=True, eq=False)
class _Caller:
    """What one caller has in the queue now (scans running, waiting, requests reserved) and its quota."""

    key: str
    weight: float
    seen: float
    running: int = 0
    queued: int = 0
    reserved: int = 0
    reserved_cost: float = 0.0
    bucket: Bucket | None = None
    use: Use = field(default_factory=Use)

    @property
    def present(self) -> int:
        return self.running + self.queued + self.reserved


@dataclass(slots=True, eq=False)
class _Waiter:
    future: asyncio.Future[Scan]
    names: tuple[str, ...]
    since: float
    deadline: float
    caller: _Caller


class TooLate(TimeoutError):
    """A waiting scan's slot came with too little time left to do much (it starts nothing)."""


@dataclass(slots=True, eq=False)
class Ticket:
    """An admitted request's place in the queue until its first scan takes one of its own."""

    queue: ScanQueue
    cost: float
    caller: _Caller
    held: bool = True

    def arrive(self) -> None:
        """The request's scan reached the queue (or the request ended): the reservation goes."""
        if self.held:
            self.held = False
            self.queue._unreserve(self.cost, self.caller)


@dataclass(frozen=True, slots=True)
class _Entered:
    queue: ScanQueue
    ticket: Ticket | None
    caller: _Caller


_CURRENT: ContextVar[_Entered | None] = ContextVar("fedsearch_scan_queue", default=None)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """Why a request cannot make its deadline: its expected wait and work, the time it may plan for
    (seconds), and its caller's share of the slots if it is past it (else None)."""

    wait: float
    work: float
    caller: _Caller
    budget: float
    past_share: float | None


class _Shed(AsyncBackend[Any]):
    """A local namespace of an admitted request that the queue could not take in time."""

    def __init__(self, inner: AsyncBackend[Any], reason: str, retry_after: float) -> None:
        super().__init__(inner.name, inner.settings)
        self.kind = inner.kind
        self.modes = inner.modes
        self._reason = reason
        self._retry_after = retry_after

    async def search(self, query: SearchQuery) -> BackendResult:
        raise BackendUnavailable(self._reason, retry_after=self._retry_after)


@dataclass(slots=True)
class _Counts:
    admitted: int = 0
    refused: int = 0
    shed: int = 0
    scans: int = 0
    expired: int = 0


@dataclass(slots=True, eq=False)
class ScanQueue:
    """``max_scans`` slots for local scans, a FIFO queue for the rest, and what each namespace's
    scans cost (an injectable ``clock`` for tests)."""

    max_scans: int
    clock: Callable[[], float] = time.monotonic
    #: Called with every event (one of :data:`EVENTS`) and its seconds (0 for a decision).
    observers: list[Callable[[str, float], None]] = field(default_factory=list)
    #: Called with every caller event (one of :data:`CALLER_EVENTS`), the caller's key and its seconds.
    caller_observers: list[Callable[[str, str, float], None]] = field(default_factory=list)
    counts: _Counts = field(default_factory=_Counts)
    _running: dict[int, Scan] = field(default_factory=dict)
    _waiters: FairQueue[_Waiter] = field(default_factory=FairQueue)
    _callers: dict[str, _Caller] = field(default_factory=dict)
    _queued: int = 0
    _reserved: int = 0
    _reserved_cost: float = 0.0
    _costs: dict[str, Estimate] = field(default_factory=dict)
    _overall: Estimate = field(default_factory=Estimate)
    _users: dict[str, _Caller] = field(default_factory=dict)  # whose scans ended in the last USED_S

    # --- what is known --------------------------------------------------------------

    @property
    def running(self) -> int:
        """Scans holding a slot now."""
        return len(self._running)

    @property
    def queued(self) -> int:
        """Scans waiting for a slot now (the queue's length)."""
        return self._queued

    def estimate(self, name: str) -> Estimate:
        """The namespace's estimate (the overall one until its own first scan ended)."""
        own = self._costs.get(name)
        return own if own is not None and own.samples else self._overall

    def mean(self, names: Sequence[str]) -> float:
        """The mean time of one scan over ``names`` (the costliest of them)."""
        return max((self.estimate(n).mean for n in names), default=0.0)

    def cost(self, names: Sequence[str]) -> float:
        """What one scan over ``names`` is planned at: the costliest of their estimates' mean
        plus two deviations."""
        return max((self.estimate(n).cost() for n in names), default=0.0)

    def wait(self, caller: _Caller | None = None, own: float = 0.0) -> float:
        """The expected wait of a scan arriving now (``own``: its cost) for ``caller``: 0 while a slot
        is free for it, else the work ahead of it over ``max_scans``: the running scans' rest, and
        the waiting and reserved work (each at its cost now), of another caller's only what it would
        be served meanwhile by fair queueing (its weight's part), all of it with one caller present.

        Other callers' work yet to come is ahead of it too: fair queueing serves a caller with less
        queued first, so while it waits, the others (but those already past what they would be served
        meanwhile) go on taking the slots at the rate they took them lately (:class:`Use`). The wait
        ``w`` solves ``w = (ahead + arriving * w) / max_scans``: the slots it drains at are the rest."""
        present = len(self._running) + self._queued + self._reserved
        if present < self.max_scans:
            return 0.0
        now = self.clock()
        costs: dict[tuple[str, ...], float] = {}  # most scans ahead are over the same namespaces

        def cost(names: tuple[str, ...]) -> float:
            found = costs.get(names)
            if found is None:
                found = costs[names] = self.cost(names)
            return found

        ahead = sum(max(0.0, s.started + cost(s.names) - now) for s in self._running.values())
        if caller is None or caller.present >= present:  # nobody else here: one FIFO
            queued = sum(cost(w.names) for _, w in self._waiters if not w.future.done()) + self._reserved_cost
            if caller is None:
                return (ahead + queued) / self.max_scans
            return self._drained(ahead + queued, self._arriving(caller, (queued + own) / caller.weight, {}, now))
        work = {c.key: c.reserved_cost for c in self._callers.values() if c.reserved}
        for key, waiter in self._waiters:
            if not waiter.future.done():
                work[key] = work.get(key, 0.0) + cost(waiter.names)
        mine = work.pop(caller.key, 0.0)
        horizon = (mine + own) / caller.weight  # served meanwhile: each other caller, its weight's part of it
        callers = self._callers
        ahead += mine
        for key, theirs in work.items():
            ahead += min(theirs, horizon * callers[key].weight)
        return self._drained(ahead, self._arriving(caller, horizon, work, now))

    def _arriving(
        self, caller: _Caller, horizon: float, work: dict[str, float], now: float
    ) -> list[tuple[float, float]]:
        """Of each caller but ``caller`` that used the slots lately: the slots it used, and the most of
        its new work that comes first (its weight's part of ``horizon``, less its ``work`` queued)."""
        out: list[tuple[float, float]] = []
        for key, user in list(self._users.items()):
            if now - user.use.at > USED_S:
                del self._users[key]
            elif user is not caller:
                room = horizon * user.weight - work.get(key, 0.0)
                if room > 0.0:
                    out.append((user.use.slots(now), room))
        return out

    def _drained(self, ahead: float, arriving: list[tuple[float, float]]) -> float:
        """The time ``ahead`` seconds of work takes on ``max_scans`` slots while the others' new work
        arrives at the rates of ``arriving`` (together at most :data:`ARRIVING` of the slots: fair
        queueing leaves a caller its share), each up to its room."""
        slots = self.max_scans
        if not arriving:
            return ahead / slots
        rates = min(sum(rate for rate, _ in arriving), ARRIVING * slots)
        first = ahead / (slots - rates)  # the wait were their work not capped
        return (ahead + sum(min(rate * first, room) for rate, room in arriving)) / slots

    def resize(self, max_scans: int) -> None:
        """Let ``max_scans`` scans run from now on (a reloaded config); waiters get freed slots."""
        self.max_scans = max_scans
        self._grant()

    # --- callers --------------------------------------------------------------------------

    def caller(self, principal: Principal) -> _Caller:
        """The state of ``principal``'s caller (made when first seen; its weight and quota follow the config)."""
        now = self.clock()
        found = self._callers.get(principal.key)
        if found is None:
            if len(self._callers) >= REMEMBERED:
                self._forget(now)
            found = self._callers[principal.key] = _Caller(principal.key, principal.weight, now)
        found.seen = now
        found.weight = principal.weight
        rate = principal.rate
        bucket = found.bucket
        if rate is None:
            found.bucket = None
        else:
            burst = principal.burst or default_burst(rate)
            if bucket is None or bucket.rate != rate or bucket.burst != burst:
                found.bucket = Bucket.full(rate, burst, now)
        return found

    def _forget(self, now: float) -> None:
        """Forget the callers with nothing in the queue, not seen lately, whose quota is whole again."""
        for key, c in list(self._callers.items()):
            if not c.present and now - c.seen > ACTIVE_S and (c.bucket is None or c.bucket.is_full(now)):
                del self._callers[key]

    def _share(self, caller: _Caller) -> float | None:
        """The slots ``caller``'s weight gives it beside the callers seen lately; None when it is alone."""
        now = self.clock()
        weights = 0.0
        others = False
        for c in self._callers.values():
            if c is caller or c.present or now - c.seen <= ACTIVE_S:
                weights += c.weight
                others = others or c is not caller
        return self.max_scans * caller.weight / weights if others else None

    def _quota(self, caller: _Caller, take: bool) -> None:
        """Raise :class:`CallerLimited` (``quota``) if ``caller``'s bucket is empty; else take one
        request from it when ``take``."""
        bucket = caller.bucket
        if bucket is None:
            return
        now = self.clock()
        wait = bucket.take(now) if take else bucket.wait(now)
        if wait > 0.0:
            seconds = max(1, math.ceil(wait))
            detail = (
                f"caller {caller.key} is past its quota ({bucket.rate:g} searches a second, "
                f"{bucket.burst} at once); retry in {seconds} s"
            )
            if take:
                self._refused(caller, "quota")
            raise CallerLimited(detail, wait, "quota")

    # --- admission ----------------------------------------------------------------------

    def _judge(self, names: Sequence[str], remaining: float, caller: _Caller) -> _Verdict | None:
        """None if work over ``names`` fits in ``remaining`` seconds for ``caller`` (less
        :data:`MARGIN` of them for a caller past its share), else why not."""
        if not names:
            return None
        if len(self._running) + self._queued + self._reserved < self.max_scans:
            return None
        work = self.cost(names)
        wait = self.wait(caller, work)
        if wait <= 0.0 or wait + work <= remaining * (1.0 - MARGIN):
            return None
        share = self._share(caller)
        # past it: holding or waiting for more than its share, and for more than one scan (with more
        # callers than slots a share is under one, and a caller with one search in flight asks no more)
        past = share if share is not None and caller.present > max(1.0, share) else None
        budget = remaining * (1.0 - MARGIN) if past is not None else remaining
        if wait + work <= budget:
            return None
        return _Verdict(wait, work, caller, budget, past)

    def _overloaded(self, verdict: _Verdict, remaining: float) -> Overloaded:
        retry = verdict.wait - max(0.0, verdict.budget - verdict.work)
        seconds = max(1, math.ceil(retry))
        caller = verdict.caller
        room = f"the {round(remaining * 1000)} ms left"
        share = verdict.past_share
        if share is not None:
            room = f"the {round(verdict.budget * 1000)} ms it may plan for ({1 - MARGIN:.0%} of {room})"
        late = (
            f"the expected wait ({round(verdict.wait * 1000)} ms) and work ({round(verdict.work * 1000)} ms) "
            f"do not fit in {room}; retry in {seconds} s"
        )
        if share is not None:
            detail = (
                f"caller {caller.key} is past its fair share of the local scans: it holds or waits for "
                f"{caller.present} of {self.max_scans} slots, its share {share:.2g}, while others wait; {late}"
            )
            return CallerLimited(detail, retry, "share")
        detail = f"local scans are at capacity: {self._queued} waiting for {self.max_scans} slots; {late}"
        return Overloaded(detail, retry)

    def check(self, routes: Sequence[Route], mode: Mode, remaining: float, principal: Principal | None = None) -> None:
        """Raise :class:`Overloaded` if a request over ``routes`` would be refused now (nothing reserved,
        nothing taken from a quota); ``principal``: its caller (the current one by default)."""
        caller = self.caller(principal or current())
        self._quota(caller, take=False)
        local = _local(routes, mode)
        if len(local) == len(routes):
            verdict = self._judge(local, remaining, caller)
            if verdict is not None:
                raise self._overloaded(verdict, remaining)

    @contextlib.contextmanager
    def admit(
        self, routes: Sequence[Route], query: SearchQuery, principal: Principal | None = None
    ) -> Iterator[Sequence[Route]]:
        """Admit a request over ``routes`` for ``principal`` (the current caller by default), raising
        :class:`CallerLimited` past its quota, or :class:`Overloaded` if every route is local and they
        cannot make the deadline; inside, its scans take slots of this queue. Yields the routes to
        search: the local ones shed when the request is partly remote and they cannot."""
        caller = self.caller(principal or current())
        self._quota(caller, take=True)
        local = _local(routes, query.mode)
        ticket: Ticket | None = None
        if local:
            remaining = query.remaining()
            verdict = self._judge(local, remaining, caller)
            if verdict is not None:
                overloaded = self._overloaded(verdict, remaining)
                if len(local) == len(routes):
                    self._refused(caller, overloaded.reason if isinstance(overloaded, CallerLimited) else "capacity")
                    raise overloaded
                self._event("shed", 0.0, caller)
                routes = _shed(routes, query.mode, overloaded)
            else:
                self._event("admitted", 0.0, caller)
                ticket = self._reserve(self.cost(local), caller)
        token = _CURRENT.set(_Entered(self, ticket, caller))
        try:
            yield routes
        finally:
            _CURRENT.reset(token)
            if ticket is not None:
                ticket.arrive()

    def _reserve(self, cost: float, caller: _Caller) -> Ticket:
        self._reserved += 1
        self._reserved_cost += cost
        caller.reserved += 1
        caller.reserved_cost += cost
        return Ticket(self, cost, caller)

    def _unreserve(self, cost: float, caller: _Caller) -> None:
        self._reserved -= 1
        self._reserved_cost = max(0.0, self._reserved_cost - cost) if self._reserved else 0.0
        caller.reserved -= 1
        caller.reserved_cost = max(0.0, caller.reserved_cost - cost) if caller.reserved else 0.0

    def _refused(self, caller: _Caller, reason: str) -> None:
        self.counts.refused += 1
        for observe in self.observers:
            observe("refused", 0.0)
        for tell in self.caller_observers:
            tell(f"refused_{reason}", caller.key, 0.0)

    def _event(self, name: Event, seconds: float = 0.0, caller: _Caller | None = None) -> None:
        counts = self.counts
        if name in ("admitted", "refused", "shed", "expired"):
            setattr(counts, name, getattr(counts, name) + 1)
            if tracing_on():
                event("admission", {"fedsearch.admission": name})
        for observe in self.observers:
            observe(name, seconds)
        if caller is not None and name in ("admitted", "shed", "waited"):
            for tell in self.caller_observers:
                tell(name, caller.key, seconds)

    def _queue_event(self, name: str, caller: _Caller) -> None:
        for tell in self.caller_observers:
            tell(name, caller.key, 0.0)

    # --- slots --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def slot(self, names: Sequence[str], deadline: float, caller: _Caller | None = None) -> AsyncIterator[Scan]:
        """Hold a slot for one scan over ``names`` for ``caller`` (in-process by default);
        TimeoutError if ``deadline`` comes while it waits."""
        names = tuple(names)
        caller = caller if caller is not None else self.caller(LOCAL)
        if len(self._running) < self.max_scans and not self._queued:
            scan = self._start(names, 0.0, caller)
        else:
            with span("fedsearch.admission.wait") as waiting:  # a span only for a scan that waits
                if waiting is not None:
                    queued, slots = self._queued, self.max_scans
                    waiting.set_attributes(
                        {"fedsearch.namespaces": len(names), "fedsearch.queued": queued, "fedsearch.slots": slots}
                    )
                scan = await self._wait_for(names, deadline, caller)
        try:
            yield scan
        finally:
            self._end(scan)

    async def _wait_for(self, names: tuple[str, ...], deadline: float, caller: _Caller) -> Scan:
        waiter = _Waiter(asyncio.get_running_loop().create_future(), names, self.clock(), deadline, caller)
        self._waiters.push(caller.key, waiter, self.mean(names), caller.weight)
        self._queued += 1
        caller.queued += 1
        self._queue_event("queued", caller)
        try:
            async with asyncio.timeout_at(deadline):
                return await waiter.future
        except BaseException as exc:
            future = waiter.future
            if future.done() and not future.cancelled():
                if future.exception() is None:  # granted as it left: the slot goes on
                    scan = future.result()
                    scan.outcome = None
                    self._end(scan)
                # else: too late (TooLate), taken out of the queue and counted when its turn came
            else:
                future.cancel()  # skipped when its turn comes
                self._dequeued(waiter)
                if isinstance(exc, TimeoutError) or asyncio.get_running_loop().time() >= deadline:
                    self._event("expired", self.clock() - waiter.since)  # its own timer, or the fan-out's
            raise

    def _dequeued(self, waiter: _Waiter) -> None:
        self._queued -= 1
        waiter.caller.queued -= 1
        self._queue_event("dequeued", waiter.caller)

    def _start(self, names: tuple[str, ...], waited: float, caller: _Caller) -> Scan:
        scan = Scan(names, self.clock(), waited, caller=caller.key)
        self._running[id(scan)] = scan
        caller.running += 1
        self.counts.scans += 1
        self._event("waited", waited, caller)
        return scan

    def _end(self, scan: Scan) -> None:
        if self._running.pop(id(scan), None) is None:
            return
        now = self.clock()
        took = now - scan.started
        caller = self._callers.get(scan.caller)
        if caller is not None:
            caller.running -= 1
            caller.use.add(took, now)
            self._users[caller.key] = caller
        if scan.outcome == "complete":
            for name in scan.names:
                self._costs.setdefault(name, Estimate()).observe(took)
            self._overall.observe(took)
            self._event("scanned", took)
        elif scan.outcome == "cut":
            for name in scan.names:
                self._costs.setdefault(name, Estimate()).at_least(took)
            self._overall.at_least(took)
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to the waiters, fairly between callers and in arrival order within each
        (those gone are skipped, and those whose turn comes with less time left than half a scan
        takes start nothing: :class:`TooLate`)."""
        while len(self._running) < self.max_scans:
            popped = self._waiters.pop(_waiting)
            if popped is None:
                return
            waiter = popped[1]
            self._dequeued(waiter)
            waited = self.clock() - waiter.since
            left = waiter.deadline - time.monotonic()
            if left < self.mean(waiter.names) / 2:  # cut before it found much: the slot goes on instead
                waiter.future.set_exception(TooLate(f"{round(left * 1000)} ms left"))
                self._event("expired", waited)
                continue
            waiter.future.set_result(self._start(waiter.names, waited, waiter.caller))


def _waiting(waiter: _Waiter) -> bool:
    """Whether a waiter is still there (one gone had its count taken off when it left)."""
    return not waiter.future.done()


def _local(routes: Sequence[Route], mode: Mode) -> list[str]:
    """The namespaces of ``routes`` whose search in ``mode`` is a local scan."""
    return [r.namespace for r in routes if mode in r.backend.scan_modes]


def _shed(routes: Sequence[Route], mode: Mode, overloaded: Overloaded) -> list[Route]:
    reason = f"not searched: {overloaded.detail}"
    return [
        replace(r, backend=_Shed(r.backend, reason, overloaded.retry_after)) if mode in r.backend.scan_modes else r
        for r in routes
    ]


@contextlib.asynccontextmanager
async def scan_slot(names: Sequence[str], deadline: float) -> AsyncIterator[Scan]:
    """Hold a slot of the current search's queue for one scan over ``names`` (TimeoutError if
    ``deadline`` comes first); outside a search of the service, at once and unbounded."""
    entered = _CURRENT.get()
    if entered is None:
        yield Scan(tuple(names), time.monotonic())
        return
    if entered.ticket is not None:
        entered.ticket.arrive()  # the request's reservation becomes this scan's place
    async with entered.queue.slot(names, deadline, entered.caller) as scan:
        yield scan
