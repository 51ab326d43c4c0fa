"""The public surface is explicit and pinned: a change to it is a deliberate one."""

from __future__ import annotations

import gateway


def test_public_names_are_pinned() -> None:
    """gateway exports exactly these names, each importable."""
    assert sorted(gateway.__all__) == [
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
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
