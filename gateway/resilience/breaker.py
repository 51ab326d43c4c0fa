"""A small circuit breaker per backend (or replica), on an injectable monotonic clock.

::

    closed ──(threshold consecutive failures)──> open for base × n s (n-th ejection, ≤ max)
      ^                                              │ time is up
      │                                              v
      └───────(the probe succeeds)──────────── half-open: one probe at a time
                                                     │ the probe fails: open again, longer

Envoy's outlier-detection figures by default: 5 consecutive failures, 30 s, growing
with each ejection up to 300 s; the count of ejections is forgotten once the backend
has stayed closed for the maximum. Only *failures* count: a caller's cancellation, a
deadline loser or a hedge loser is :meth:`Breaker.ignore`-d, never held against the
backend (the libraries count ``CancelledError`` as a failure, which is why this exists).

A rate limit is no failure either: :meth:`Breaker.suspend` holds calls back until the
time the backend named (Retry-After), capped. :func:`verdict` says what an error
tells about the backend's health.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Literal

from gateway.errors import (
    BackendCapped,
    BackendError,
    BackendUnavailable,
    RateLimited,
    Rejected,
    Transient,
    Unsupported,
)

__all__ = ["Breaker", "State", "Verdict", "verdict"]

State = Literal["closed", "open", "half_open"]
Verdict = Literal["success", "failure", "ignore"]

#: What a caller turned away while the probe is out is told to wait (seconds).
PROBE_WAIT_S = 1.0


def verdict(exc: BaseException) -> Verdict:
    """What a failed call says about the backend's health.

    Sickness is a failure: refused or reset connections, 5xx, garbage. An answer, even a
    refusal of the query, is a success. A cancellation, a timeout (the caller's deadline,
    a hedge lost) or a rate limit says nothing: ignored.
    """
    if isinstance(exc, asyncio.CancelledError | TimeoutError | RateLimited):
        return "ignore"
    if isinstance(exc, BackendCapped | Unsupported | Rejected):
        return "success"  # it answered: a refusal of the query (a 4xx) is not sickness
    if isinstance(exc, Transient | BackendUnavailable):
        return "failure"
    if isinstance(exc, BackendError):
        return "failure"
    return "ignore"  # a bug in an adapter is not the backend's fault


class Breaker:
    """Consecutive-failure breaker with escalating open time and a single half-open probe."""

    def __init__(
        self,
        threshold: int = 5,
        base_s: float = 30.0,
        max_s: float = 300.0,
        max_suspend_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.base_s = base_s
        self.max_s = max(max_s, base_s)
        self.max_suspend_s = max_suspend_s
        self.clock = clock
        self.state: State = "closed"
        self.failures = 0
        self.ejections = 0
        self.until = 0.0
        self.probing = False
        self.suspended_until = 0.0
        self.closed_at = clock()
        self.last_failure = ""

    # --- asking -----------------------------------------------------------------------

    def wait(self) -> float:
        """Seconds until a call would be let through (0: now)."""
        now = self.clock()
        wait = max(0.0, self.suspended_until - now)
        if self.state == "open":
            wait = max(wait, self.until - now)
        elif self.state == "half_open" and self.probing:
            wait = max(wait, PROBE_WAIT_S)
        return wait

    def admit(self) -> bool:
        """Let one call through, or raise why not; True when this call is the half-open probe."""
        now = self.clock()
        if now < self.suspended_until:
            left = _seconds(self.suspended_until - now)
            raise RateLimited(f"rate limited: retry in {left:.0f} s", retry_after=left)
        if self.state == "closed":
            return False
        if self.state == "open":
            if now < self.until:
                left = _seconds(self.until - now)
                raise BackendUnavailable(f"circuit open{self._why()}: retry in {left:.0f} s", retry_after=left)
            self.state = "half_open"
        if self.probing:
            raise BackendUnavailable(f"circuit half-open{self._why()}: a probe is in flight", retry_after=PROBE_WAIT_S)
        self.probing = True
        return True

    # --- telling ----------------------------------------------------------------------

    def success(self, probe: bool) -> None:
        """The backend answered (even if only to refuse the query): it is alive."""
        if probe:
            self.probing = False
            self._close()
        elif self.state == "closed":
            self.failures = 0

    def failure(self, reason: str, probe: bool) -> None:
        """The backend failed in a way that says it is sick."""
        self.last_failure = reason
        if probe:
            self.probing = False
            self._open()
        elif self.state == "closed":
            self.failures += 1
            if self.failures >= self.threshold:
                self._open()

    def ignore(self, probe: bool) -> None:
        """Cancelled, past its deadline, or lost a hedge: no verdict; a probe slot is handed back."""
        if probe:
            self.probing = False

    def suspend(self, seconds: float) -> None:
        """Hold calls back for ``seconds`` (a rate limit's Retry-After), at most ``max_suspend_s``."""
        until = self.clock() + min(max(0.0, seconds), self.max_suspend_s)
        self.suspended_until = max(self.suspended_until, until)

    # --- transitions ------------------------------------------------------------------

    def _open(self) -> None:
        now = self.clock()
        if self.state == "closed" and now - self.closed_at >= self.max_s:
            self.ejections = 0  # healthy long enough: start the escalation again
        self.ejections += 1
        self.state = "open"
        self.until = now + min(self.base_s * self.ejections, self.max_s)
        self.failures = 0

    def _close(self) -> None:
        self.state = "closed"
        self.failures = 0
        self.closed_at = self.clock()

    def _why(self) -> str:
        return f" after {self.last_failure}" if self.last_failure else ""


def _seconds(value: float) -> float:
    """Whole seconds, rounded up, at least 1: what a caller is told to wait."""
    return float(max(1, math.ceil(value)))
