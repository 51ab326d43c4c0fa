"""How one backend is protected: the :class:`Policy` an adapter declares.

An adapter says how it may be retried, broken and hedged by setting
:attr:`gateway.backend.AsyncBackend.policy` (the default, :class:`Policy`, fits a remote
search server); :class:`gateway.resilience.wrapper.ResilientBackend` carries it out.
The defaults are Envoy's and The Tail at Scale's figures.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["LOCAL", "UNHEDGED", "Policy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Retries, breakers and hedging for one backend (injectable clock, sleep and jitter for tests)."""

    max_attempts: int = 3
    backoff_base_s: float = 0.025
    backoff_max_s: float = 0.25
    budget_percent: float = 0.2
    budget_min: int = 3
    budget_window_s: float = 10.0
    breaker: bool = True
    failure_threshold: int = 5
    open_base_s: float = 30.0
    open_max_s: float = 300.0
    max_retry_after_s: float = 300.0
    hedge: bool = True
    hedge_floor_s: float = 0.05
    hedge_ratio: float = 0.05
    hedge_burst: float = 10.0
    latency_window: int = 100
    probation_s: float = 10.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    jitter: Callable[[float, float], float] = random.uniform


#: A local process: no retries, no breaker, no hedges (a process that hits the deadline
#: returns what it found, and a breaker would only learn the caller's deadlines).
LOCAL = Policy(max_attempts=1, breaker=False, hedge=False)
#: A rate-limited API (GitHub code search: 10 requests a minute): retried, never hedged.
UNHEDGED = Policy(hedge=False)
