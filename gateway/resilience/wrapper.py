"""Resilience around one backend: retries, a breaker per replica, hedging, caps.

:class:`ResilientBackend` wraps any :class:`AsyncBackend` and is one itself: the rest of
the gateway sees what the adapter declared (``name``, ``kind``, ``modes``, ``settings``,
``tree()``...). It follows the adapter's own :class:`~gateway.resilience.policy.Policy`
and replicas (:mod:`gateway.backend`). One search through it is::

    retry (tenacity) ─ attempt ─ race(primary replica, hedge on another after p95) ─ breaker ─ inner

* **Retries** only for the transient failures an idempotent read may retry: a refused
  or reset connection, a 502/503/504 (:class:`gateway.errors.Transient`), and a rate
  limit whose ``Retry-After`` fits in what is left of the deadline. Full-jitter
  exponential backoff (Envoy's 25 ms base, 250 ms cap), at most 3 attempts, never a
  sleep or an attempt past the deadline, another replica first when there is one, and
  a retry budget per backend (:mod:`gateway.resilience.retry`). Never on other 4xx, garbage, a
  timeout or a cancellation.
* **A breaker per replica** (:mod:`gateway.resilience.breaker`): only sickness counts (refused,
  reset, 5xx, garbage); an answer, even a refusal of the query (4xx), is a sign of
  life; cancellations, deadline losers and hedge losers never count. An open breaker
  is ``BackendUnavailable("circuit open…: retry in N s", retry_after=N)``.
* **Hedging** (:mod:`gateway.resilience.hedge`) when the backend has several replicas, which
  take primaries in turn; a replica that just lost a hedge or a deadline is on
  *probation* (The Tail at Scale) for a while: it takes primaries only when no other
  replica is ready. Probation is no breaker failure: it never makes a namespace
  unavailable, it only orders the replicas.
* **Caps**: an answer of more than ``max_hits`` hits keeps whole files up to the cap and
  is ``capped`` (response bytes are capped by the HTTP adapters as it is read).
* **Files and children** (``read_file``, ``stat_file``, ``list_files``, ``children``) go
  through the first replica's breaker too, retried once when transient and time allows;
  a file that is not there is an answer (a sign of life).

A backend whose policy has nothing to decide per call (one replica, one attempt, no
breaker, no hedge: ``ripgrep``'s ``LOCAL``) goes straight through.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec.structs import replace

from gateway.backend import AsyncBackend, FileTree, Health
from gateway.dedup.identity import Identities
from gateway.errors import BackendError, InvalidRequest, NotFound, RateLimited
from gateway.log import get_logger, scrub
from gateway.models import BackendResult, ChildNamespace, RemoteFile, SearchQuery
from gateway.narrowing import Narrower
from gateway.resilience.breaker import Breaker, Verdict, verdict
from gateway.resilience.hedge import HedgeBudget, LatencyWindow, race
from gateway.resilience.policy import LOCAL, Policy
from gateway.resilience.retry import MIN_ATTEMPT_S, RetryBudget, backoff, retryable
from gateway.tracing import event

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["LOCAL", "Policy", "ResilientBackend", "Stats", "wrap"]

log = get_logger("fedsearch.resilience")

T = TypeVar("T")


@dataclass(slots=True)
class Stats:
    """Counters of one backend (read by benchmarks and tests; logs carry the same events)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    budget_exhausted: int = 0
    hedges: int = 0
    hedges_won: int = 0
    hedges_denied: int = 0
    short_circuited: int = 0
    capped: int = 0


@dataclass(slots=True)
class _Call:
    """One search's progress through the layers."""

    tried: list[int] = field(default_factory=list)
    retried: bool = False


class ResilientBackend(AsyncBackend[Any]):
    """``inner`` behind retries, breakers, hedging and caps; the same backend to everyone else."""

    def __init__(self, inner: AsyncBackend[Any], policy: Policy | None = None) -> None:
        super().__init__(inner.name, inner.settings)
        self.inner = inner
        # The same backend to everyone: what the adapter declared (fixed once it is built).
        self.kind = inner.kind
        self.modes = inner.modes
        self.max_hits = inner.max_hits
        self.caps_hits = inner.caps_hits
        self.token_env = inner.token_env
        self.shares_calls = inner.shares_calls
        self.serves_children = inner.serves_children
        self.repository_paths = inner.repository_paths
        self.reads = inner.reads
        self.lists = inner.lists
        self.scan_modes = inner.scan_modes
        self.policy = policy = policy or inner.policy
        self.stats = Stats()
        self._count = inner.replicas()
        self._breakers = (
            [
                Breaker(
                    policy.failure_threshold,
                    policy.open_base_s,
                    policy.open_max_s,
                    policy.max_retry_after_s,
                    policy.clock,
                )
                for _ in range(self._count)
            ]
            if policy.breaker
            else []
        )
        self._budget = RetryBudget(policy.budget_percent, policy.budget_min, policy.budget_window_s, policy.clock)
        self._latency = LatencyWindow(policy.latency_window, policy.hedge_floor_s)
        self._hedges = HedgeBudget(policy.hedge_ratio, policy.hedge_burst)
        self._turn = itertools.count()
        self._probation = [0.0] * self._count
        #: One replica, one attempt, no breaker, no hedge (a local process): nothing to decide
        #: per call, so a search goes straight through.
        self._direct = self._count == 1 and policy.max_attempts <= 1 and not policy.breaker and not policy.hedge

    def replicas(self) -> int:
        return self._count

    def tree(self) -> FileTree | None:
        return self.inner.tree()

    def identities(self) -> Identities | None:
        return self.inner.identities()

    def declared_modes(self) -> frozenset[str]:
        return self.inner.declared_modes()

    # --- files and children -------------------------------------------------------------

    async def read_file(self, path: str, deadline: float) -> RemoteFile:
        return await self._guarded(lambda: self.inner.read_file(path, deadline), deadline)

    async def stat_file(self, path: str, deadline: float) -> dict[str, Any]:
        return await self._guarded(lambda: self.inner.stat_file(path, deadline), deadline)

    async def list_files(self, path: str, deadline: float) -> list[dict[str, Any]]:
        return await self._guarded(lambda: self.inner.list_files(path, deadline), deadline)

    async def children(self, deadline: float) -> tuple[ChildNamespace, ...]:
        return await self._guarded(lambda: self.inner.children(deadline), deadline)

    async def _guarded(self, call: Callable[[], Awaitable[T]], deadline: float) -> T:
        """One call through the first replica's breaker, retried once when transient and time allows."""
        breaker = self._breakers[0] if self._breakers else None
        attempts = min(2, self.policy.max_attempts)
        for attempt in range(1, attempts + 1):
            try:
                probe = breaker.admit() if breaker is not None else False
            except BackendError:
                self.stats.short_circuited += 1
                raise
            try:
                result = await call()
            except (NotFound, InvalidRequest):
                if breaker is not None:
                    self._judged(breaker, "success", "", probe, 0)  # it answered: there is no such file
                raise
            except BaseException as exc:
                if breaker is not None:
                    self._judge(breaker, exc, probe, 0)
                left = deadline - time.monotonic()
                if attempt < attempts and isinstance(exc, BackendError) and retryable(exc, left):
                    told = getattr(exc, "retry_after", None)
                    p = self.policy
                    await p.sleep(backoff(attempt, p.backoff_base_s, p.backoff_max_s, p.jitter, told))
                    continue
                raise
            if breaker is not None:
                self._judged(breaker, "success", "", probe, 0)
            return result
        raise BackendError("no attempt made")  # pragma: no cover - the loop returns or raises

    def health(self) -> Health:
        """``ok``; ``degraded`` when some replica's breaker is open; ``unavailable`` when all are."""
        states = [b.state for b in self._breakers]
        if all(s == "closed" for s in states):
            return "ok"
        return "unavailable" if all(s == "open" for s in states) else "degraded"

    def start_serving(self, shared: dict[type, Any]) -> None:
        self.inner.start_serving(shared)

    def use_index(self, narrower: Narrower) -> None:
        self.inner.use_index(narrower)

    def indexed_root(self) -> str | None:
        return self.inner.indexed_root()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def breakers(self) -> list[Breaker]:
        """The breaker of each replica (empty when the policy has none)."""
        return list(self._breakers)

    # --- search -------------------------------------------------------------------------

    async def search(self, query: SearchQuery) -> BackendResult:
        self.stats.requests += 1
        if self._direct:
            self.stats.attempts += 1
            return self._cap(await self.inner.search(query))
        self._hedges.earn()
        self._budget.start()
        call = _Call()
        try:
            try:
                result = await self._attempt(query, call)
            except BackendError as exc:
                if self.policy.max_attempts <= 1 or not retryable(exc, query.remaining()):
                    raise
                result = await self._retry(query, call, exc)
        finally:
            self._budget.finish(call.retried)
        return self._cap(result)

    async def _retry(self, query: SearchQuery, call: _Call, failed: BackendError) -> BackendResult:
        """Retry after a first ``failed`` attempt (tenacity only then: it leaves garbage cycles behind)."""
        from tenacity import AsyncRetrying, retry_if_exception  # imported by the first retry, not at start-up

        replay = [failed]

        async def attempt() -> BackendResult:
            if replay:  # tenacity's first attempt is the one that already failed
                raise replay.pop()
            return await self._attempt(query, call)

        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda exc: retryable(exc, query.remaining())),
            wait=self._wait,
            stop=lambda state: self._stop(state, query, call),
            sleep=self.policy.sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        return await retrying(attempt)

    async def _attempt(self, query: SearchQuery, call: _Call) -> BackendResult:
        primary = self._pick(call.tried)
        call.tried.append(primary)
        if self._count < 2 or not self.policy.hedge:
            return await self._call(query, primary)

        def hedge() -> Awaitable[BackendResult] | None:
            return self._hedge(query, call)

        result, hedge_won = await race(lambda: self._call(query, primary), hedge, self._latency.delay())
        if hedge_won:
            self.stats.hedges_won += 1
            event("hedge_won", {"fedsearch.replica": call.tried[-1]})
        return result

    def _hedge(self, query: SearchQuery, call: _Call) -> Awaitable[BackendResult] | None:
        """The same request to another replica, if one is ready, time is left and the budget allows."""
        others = self._preferred([r for r in self._order(call.tried[-1] + 1) if r not in call.tried and self._ready(r)])
        if not others or query.remaining() < MIN_ATTEMPT_S:
            return None
        if not self._hedges.spend():
            self.stats.hedges_denied += 1
            return None
        self.stats.hedges += 1
        call.tried.append(others[0])
        log.debug("hedge_sent", namespace=self.name, backend=self.kind, replica=others[0])
        event("hedge_sent", {"fedsearch.replica": others[0], "fedsearch.after_ms": round(self._latency.delay() * 1000)})
        return self._call(query, others[0])

    async def _call(self, query: SearchQuery, replica: int) -> BackendResult:
        """One request to one replica, through its breaker."""
        breaker = self._breakers[replica] if self._breakers else None
        if breaker is not None and breaker.state != "closed":
            event("breaker", {"fedsearch.replica": replica, "fedsearch.breaker.state": breaker.state})
        try:
            probe = breaker.admit() if breaker is not None else False
        except BackendError:
            self.stats.short_circuited += 1
            raise
        self.stats.attempts += 1
        started = self.policy.clock()
        try:
            if self._count > 1:
                result = await self.inner.search_replica(query, replica)
            else:
                result = await self.inner.search(query)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError | TimeoutError):  # lost a hedge or the deadline
                now = self.policy.clock()
                self._latency.record(now - started)  # it would have taken at least that long
                self._probation[replica] = now + self.policy.probation_s
            if breaker is not None:
                self._judge(breaker, exc, probe, replica)
            raise
        if result.status == "timeout":
            self._latency.record(self.policy.clock() - started)
            self._probation[replica] = self.policy.clock() + self.policy.probation_s
            if breaker is not None:
                breaker.ignore(probe)
        else:
            self._latency.record(self.policy.clock() - started)
            if breaker is not None:
                self._judged(breaker, "success", "", probe, replica)
        return result

    def _judge(self, breaker: Breaker, exc: BaseException, probe: bool, replica: int) -> None:
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            breaker.suspend(exc.retry_after)
        reason = exc.reason if isinstance(exc, BackendError) else type(exc).__name__
        self._judged(breaker, verdict(exc), reason, probe, replica)

    def _judged(self, breaker: Breaker, said: Verdict, reason: str, probe: bool, replica: int) -> None:
        before = breaker.state
        if said == "success":
            breaker.success(probe)
        elif said == "failure":
            breaker.failure(reason, probe)
        else:
            breaker.ignore(probe)
        if breaker.state != before:
            event("breaker", {"fedsearch.replica": replica, "fedsearch.breaker.state": breaker.state})
        if breaker.state != before and breaker.state != "half_open":
            log.warning(
                "breaker_" + breaker.state,
                namespace=self.name,
                backend=self.kind,
                replica=replica,
                error=reason or None,
                open_s=round(max(0.0, breaker.until - self.policy.clock()), 1),
            )

    # --- replicas -----------------------------------------------------------------------

    def _order(self, start: int) -> list[int]:
        """Every replica, from ``start`` round."""
        return [(start + i) % self._count for i in range(self._count)]

    def _ready(self, replica: int) -> bool:
        return not self._breakers or self._breakers[replica].wait() <= 0

    def _preferred(self, replicas: list[int]) -> list[int]:
        """``replicas`` with those on probation last, the latest loser last of all (a stable sort
        keeps the turn order among the others)."""
        now = self.policy.clock()
        return sorted(replicas, key=lambda r: self._probation[r] if self._probation[r] > now else 0.0)

    def _pick(self, tried: list[int]) -> int:
        """A ready replica not tried yet, else any ready one, else the one ready soonest; probation last."""
        if self._count == 1:
            return 0
        order = self._order(next(self._turn))  # round-robin
        ready = self._preferred([r for r in order if self._ready(r)])
        fresh = [r for r in ready if r not in tried]
        if fresh or ready:
            return (fresh or ready)[0]
        return min(order, key=lambda r: self._breakers[r].wait())

    # --- retrying -----------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        policy = self.policy
        exc = state.outcome.exception() if state.outcome is not None else None
        told = getattr(exc, "retry_after", None)
        return backoff(state.attempt_number, policy.backoff_base_s, policy.backoff_max_s, policy.jitter, told)

    def _stop(self, state: RetryCallState, query: SearchQuery, call: _Call) -> bool:
        if state.attempt_number >= self.policy.max_attempts:
            return True
        if state.upcoming_sleep + MIN_ATTEMPT_S >= query.remaining():
            return True  # never past the deadline
        if self._breakers and min(b.wait() for b in self._breakers) > state.upcoming_sleep:
            return True  # every replica is shut for longer than the backoff
        if not self._budget.allow(call.retried):
            self.stats.budget_exhausted += 1
            return True
        call.retried = True
        self.stats.retries += 1
        return False

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        error = exc.reason if isinstance(exc, BackendError) else type(exc).__name__
        log.info(
            "backend_retry",
            namespace=self.name,
            backend=self.kind,
            attempt=state.attempt_number,
            sleep_s=round(state.upcoming_sleep, 3),
            error=error,
        )
        event(
            "retry",
            {
                "fedsearch.attempt": state.attempt_number,
                "fedsearch.sleep_ms": round(state.upcoming_sleep * 1000),
                "fedsearch.error": scrub(error),
            },
        )

    # --- caps ---------------------------------------------------------------------------

    def _cap(self, result: BackendResult) -> BackendResult:
        """Whole files, best first, up to ``max_hits`` hits (the first file always)."""
        limit = self.max_hits
        if self.caps_hits or sum(len(f.hits) for f in result.files) <= limit:
            return result
        kept: list[Any] = []
        used = 0
        for file in result.files:
            if kept and used + len(file.hits) > limit:
                break
            kept.append(file)
            used += len(file.hits)
        self.stats.capped += 1
        why = f"over the {limit}-hit cap: kept {len(kept)} of {len(result.files)} files"
        return replace(
            result,
            files=tuple(kept),
            status="capped" if result.status == "ok" else result.status,
            reason="; ".join(r for r in (result.reason, why) if r),
            file_count=max(result.file_count or 0, len(result.files)),
        )


def wrap(backend: AsyncBackend[Any], policy: Policy | None = None) -> AsyncBackend[Any]:
    """``backend`` behind the resilience layer (once)."""
    if isinstance(backend, ResilientBackend):
        return backend
    return ResilientBackend(backend, policy)
