"""fedsearch: a federated code search gateway.

The public surface: the service every surface calls, the wire contract, the backend
contract adapters implement, the test double that ships with it, and the error tree.

Each name is imported on first use (PEP 562): ``import gateway.cli.main`` must not pay
for the service, pydantic or aiohttp before a command needs them (``fedsearch --help``
and a one-shot search start in a fraction of the time).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself not imported: every command's start goes through this package
if TYPE_CHECKING:
    from typing import Any

    from gateway.backend import AsyncBackend, BackendSettings
    from gateway.errors import (
        BackendError,
        BackendTimeout,
        BackendUnavailable,
        ConfigError,
        GatewayError,
        InvalidRequest,
        NotFound,
        RateLimited,
        Unsupported,
    )
    from gateway.models import BackendResult, FileMatch, Hit, SearchQuery
    from gateway.query.request import SearchRequest, parse_request
    from gateway.service import SearchService
    from gateway.testing import MockBackend
    from gateway.wire import SearchResponse

#: Where each public name lives.
_HOMES = {
    "AsyncBackend": "gateway.backend",
    "BackendSettings": "gateway.backend",
    "BackendError": "gateway.errors",
    "BackendTimeout": "gateway.errors",
    "BackendUnavailable": "gateway.errors",
    "ConfigError": "gateway.errors",
    "GatewayError": "gateway.errors",
    "InvalidRequest": "gateway.errors",
    "NotFound": "gateway.errors",
    "RateLimited": "gateway.errors",
    "Unsupported": "gateway.errors",
    "BackendResult": "gateway.models",
    "FileMatch": "gateway.models",
    "Hit": "gateway.models",
    "SearchQuery": "gateway.models",
    "SearchRequest": "gateway.query.request",
    "parse_request": "gateway.query.request",
    "SearchService": "gateway.service",
    "MockBackend": "gateway.testing",
    "SearchResponse": "gateway.wire",
}

__all__ = [
    "AsyncBackend",
    "BackendError",
    "BackendResult",
    "BackendSettings",
    "BackendTimeout",
    "BackendUnavailable",
    "ConfigError",
    "FileMatch",
    "GatewayError",
    "Hit",
    "InvalidRequest",
    "MockBackend",
    "NotFound",
    "RateLimited",
    "SearchQuery",
    "SearchRequest",
    "SearchResponse",
    "SearchService",
    "Unsupported",
    "parse_request",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gateway' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
