"""The one exception tree of fedsearch.

::

    GatewayError
    ├── InvalidRequest(ValueError)        bad input from a caller: 400, names the field
    │   └── UnknownNamespace              a namespace pattern that matches nothing visible
    ├── ConfigError(ValueError)           a bad config file: names the key
    ├── NotFound(LookupError)             a file or route that does not exist (or is cloaked)
    ├── Overloaded                        beyond capacity: refused before any fan-out (503,
    │   │                                 Retry-After), retry_after in seconds
    │   └── CallerLimited                 this caller past its share or its quota (429, reason)
    └── BackendError                      one namespace's backend failed: costs only it
        ├── BackendTimeout(TimeoutError)  it did not answer within its deadline
        ├── BackendUnavailable(ConnectionError)   refused, circuit open, rate limited
        │   └── RateLimited               told us to come back later (retry_after)
        ├── Rejected                      answered, and refused this query (a 4xx): it is up
        ├── BackendCapped                 stopped at its own limit (not raised by adapters
        │                                 that can return partial results; see BackendResult)
        └── Unsupported                   cannot do what was asked (a mode, reading files)

    Transient                             a mixin marking a BackendError a retry may cure:
                                          a connection refused or reset, a 502/503/504

Adapters translate foreign errors (aiohttp, JSON, subprocess) into this tree once,
at their edge; nothing above an adapter sees a library's exception.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself not imported either (a listing's start never loads it)
if TYPE_CHECKING:  # types only: the error tree imports nothing (the CLI reports errors before any model is loaded)
    from collections.abc import Sequence

    from gateway.models import Status

__all__ = [
    "BackendCapped",
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "CallerLimited",
    "ConfigError",
    "GatewayError",
    "InvalidRequest",
    "NotFound",
    "Overloaded",
    "RateLimited",
    "Rejected",
    "Transient",
    "UnknownNamespace",
    "Unsupported",
]


class GatewayError(Exception):
    """Base of every error fedsearch raises on purpose."""


class InvalidRequest(GatewayError, ValueError):
    """A caller's request is invalid; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class UnknownNamespace(InvalidRequest):
    """A namespace pattern matched no namespace the caller may see (``visible``: those it may, the
    first :data:`LISTED` of them named in the message)."""

    LISTED = 20

    def __init__(self, pattern: str, visible: Sequence[str] = ()) -> None:
        self.pattern = pattern
        self.known = _listed(visible, self.LISTED)
        super().__init__("namespaces", f"no namespace matches {pattern!r}{self.known}")


def _listed(names: Sequence[str], most: int) -> str:
    """``; namespaces: a, b, c`` (the first ``most``, and how many more), or nothing."""
    if not names:
        return ""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"; namespaces: {', '.join(names[:most])}{more}"


class ConfigError(GatewayError, ValueError):
    """The configuration is invalid; ``key`` names the offending key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


class NotFound(GatewayError, LookupError):
    """A thing that does not exist, or that the caller may not see."""


class Overloaded(GatewayError):
    """The gateway is beyond its capacity: the request was refused before anything was sent
    (:mod:`gateway.resilience.admission`); ``retry_after`` says when to come back, in seconds."""

    status = 503
    title = "Overloaded"

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


class CallerLimited(Overloaded):
    """One caller was refused for what it alone asks (:mod:`gateway.resilience.admission`):
    ``reason`` ``share`` (past its fair share of the local scans while others wait) or
    ``quota`` (past its own ``rate``/``burst``); ``retry_after`` comes from its own queue."""

    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, retry_after: float, reason: str) -> None:
        super().__init__(detail, retry_after)
        self.reason = reason


class BackendError(GatewayError):
    """One backend failed. ``status`` is the namespace status it maps to."""

    status: Status = "error"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BackendTimeout(BackendError, TimeoutError):
    """The backend did not answer within its deadline."""

    status: Status = "timeout"


class BackendUnavailable(BackendError, ConnectionError):
    """The backend refused, or is known to be down; ``retry_after`` in seconds if known."""

    status: Status = "unavailable"

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class RateLimited(BackendUnavailable):
    """The backend rate-limited us and said when to come back."""


class Rejected(BackendError):
    """The backend answered and refused this query (a 4xx): it is up, the request is at fault."""


class BackendCapped(BackendError):
    """The backend stopped at its own limit and returned nothing usable."""

    status: Status = "capped"


class Unsupported(BackendError):
    """The backend cannot do what was asked (a search mode, reading files)."""

    status: Status = "unsupported"


class Transient:
    """Mixin marking a :class:`BackendError` a retry may cure (refused or reset connection, 502/503/504)."""
