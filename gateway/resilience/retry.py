"""Retry rules: what may be retried, how long to back off, and the per-backend retry budget.

* :func:`retryable`: only transient failures (:class:`gateway.errors.Transient`: a
  refused or reset connection, a 502/503/504) and rate limits that say when to come
  back, and only when that time fits in what is left of the deadline. Never another
  4xx, a 500, garbage, a timeout or a cancellation.
* :func:`backoff`: full jitter (``uniform(0, min(cap, base × 2^(n-1)))``, Envoy's 25 ms
  base and 250 ms cap), never less than a ``Retry-After``.
* :class:`RetryBudget`: Envoy's 20 % of active requests, at least 3.

:class:`gateway.resilience.wrapper.ResilientBackend` puts them together with tenacity.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from gateway.errors import RateLimited, Transient

__all__ = ["MIN_ATTEMPT_S", "RetryBudget", "backoff", "retryable"]

#: A retry or hedge needs at least this much time left to be worth sending.
MIN_ATTEMPT_S = 0.02


def retryable(exc: BaseException, remaining: float) -> bool:
    """Whether a failed attempt may be tried again with ``remaining`` seconds left."""
    if not isinstance(exc, Transient | RateLimited):
        return False
    wait = getattr(exc, "retry_after", None)
    if wait is None:
        return not isinstance(exc, RateLimited)  # a 429 that does not say when: not now
    return bool(wait < remaining - MIN_ATTEMPT_S)


def backoff(
    attempt: int,
    base_s: float,
    cap_s: float,
    jitter: Callable[[float, float], float],
    retry_after: float | None = None,
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
    wait = jitter(0.0, min(cap_s, base_s * 2 ** (attempt - 1)))
    return max(wait, float(retry_after)) if retry_after is not None else wait


class RetryBudget:
    """Envoy's retry budget: retrying requests at most ``percent`` of the active ones (at least ``minimum``).

    The same share also holds over a sliding ``window_s`` (Finagle's ttl), so one caller
    sending requests one after the other into a storm is bounded as well:
    attempts ≤ (1 + percent) × requests + minimum per window.
    """

    def __init__(
        self,
        percent: float = 0.2,
        minimum: int = 3,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.percent = percent
        self.minimum = minimum
        self.window_s = window_s
        self.clock = clock
        self.active = 0
        self.retrying = 0
        self._requests: deque[float] = deque()
        self._retries: deque[float] = deque()

    def start(self) -> None:
        now = self.clock()
        self._prune(now)
        self.active += 1
        self._requests.append(now)

    def finish(self, retried: bool) -> None:
        self.active -= 1
        if retried:
            self.retrying -= 1

    def allow(self, retrying: bool) -> bool:
        """Whether one more retry may go; ``retrying``: this request already holds a retry slot."""
        now = self.clock()
        self._prune(now)
        others = self.retrying - (1 if retrying else 0)
        if others >= max(self.minimum, self.percent * self.active):
            return False
        if len(self._retries) >= max(self.minimum, self.percent * len(self._requests)):
            return False
        self._retries.append(now)
        if not retrying:
            self.retrying += 1
        return True

    def _prune(self, now: float) -> None:
        for times in (self._requests, self._retries):
            while times and times[0] <= now - self.window_s:
                times.popleft()
