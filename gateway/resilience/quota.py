"""A caller's own quota: a token bucket of ``burst`` requests refilled at ``rate`` a second.

``[[tokens]]`` may give a token ``rate`` (requests a second, sustained) and ``burst`` (the
most at once, default ``max(1, ceil(rate))``); :class:`~gateway.resilience.admission.ScanQueue`
takes one request from its caller's bucket as it admits a search, and refuses it (429,
``reason`` ``quota``) when the bucket is empty, with ``Retry-After`` the time until it
holds one again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Bucket", "default_burst"]


def default_burst(rate: float) -> int:
    """The burst of a token that gives only a rate: one second's worth, at least one request."""
    return max(1, math.ceil(rate))


@dataclass(slots=True)
class Bucket:
    """``burst`` requests at most, refilled at ``rate`` a second; full when made (at ``now``)."""

    rate: float
    burst: int
    tokens: float
    at: float

    @classmethod
    def full(cls, rate: float, burst: int, now: float) -> Bucket:
        return cls(rate, burst, float(burst), now)

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
            self.at = now

    def wait(self, now: float) -> float:
        """Seconds until one request may pass (0: now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> float:
        """Take one request if it may pass now (0); else nothing is taken and the seconds to wait."""
        wait = self.wait(now)
        if wait <= 0.0:
            self.tokens -= 1.0
        return wait

    def is_full(self, now: float) -> bool:
        """Whether it holds all its burst (forgetting it then loses nothing)."""
        self._refill(now)
        return self.tokens >= self.burst
