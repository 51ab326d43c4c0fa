"""Adapter kinds by name, imported lazily from a dotted path.

A missing optional dependency fails only when a namespace of that kind is
configured, with a config error naming the namespace.
"""

from __future__ import annotations

import importlib
from typing import Any

from gateway.backend import AsyncBackend
from gateway.errors import ConfigError

__all__ = ["KINDS", "load_kind"]

KINDS: dict[str, str] = {
    "ripgrep": "adapters.ripgrep.backend:RipgrepBackend",
    "gateway": "adapters.peer:PeerBackend",
    "afi": "adapters.afi:AfiBackend",
    "zoekt": "adapters.zoekt.backend:ZoektBackend",
    "sourcegraph": "adapters.sourcegraph:SourcegraphBackend",
    "github": "adapters.github:GitHubBackend",
    "gitlab": "adapters.gitlab:GitLabBackend",
    "hound": "adapters.hound:HoundBackend",
    "livegrep": "adapters.livegrep:LivegrepBackend",
}

_loaded: dict[str, type[AsyncBackend[Any]]] = {}


def load_kind(kind: str, key: str = "backend") -> type[AsyncBackend[Any]]:
    """The adapter class of ``kind``; ConfigError naming ``key`` if unknown or broken."""
    cls = _loaded.get(kind)
    if cls is not None:
        return cls
    target = KINDS.get(kind)
    if target is None:
        raise ConfigError(key, f"unknown backend {kind!r} (one of {', '.join(sorted(KINDS))})")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        loaded = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(key, f"backend {kind!r} is not available: {exc}") from exc
    if not (isinstance(loaded, type) and issubclass(loaded, AsyncBackend)):
        raise ConfigError(key, f"backend {kind!r} does not implement AsyncBackend")
    _loaded[kind] = loaded
    return loaded
