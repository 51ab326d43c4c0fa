"""fedsearch: a federated code search gateway.

The public surface: the service every surface calls, the wire contract, the backend
contract adapters implement, the test double that ships with it, and the error tree.
"""

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
from gateway.request import SearchRequest, parse_request
from gateway.service import SearchService
from gateway.testing import MockBackend
from gateway.wire import SearchResponse

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
