"""For tests that index a checkout here and ask the service by meaning."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.index.builder import Builder, BuildStats
from gateway.index.files import Source
from gateway.index.store import Store
from gateway.query.request import parse_request
from gateway.service import SearchService


def index_checkout(root: Path, index_dir: Path) -> None:
    """One whole pass of the builder over the checkout ``root`` (its namespace: its folder's name)."""
    store = Store.open(str(index_dir))
    try:
        source = Source(root.name, str(root))
        Builder(store, [source]).refresh_one(source, BuildStats())
    finally:
        store.close()


async def semantic_hits(root: Path, index_dir: Path, query: str) -> list[dict[str, Any]]:
    """The hits a new service answers ``query`` with by meaning at threshold 0, in the answer's order, over the
    checkouts beside ``root`` (answers not cached)."""
    config = config_from_env(root=str(root.parent), env={})
    config = dataclasses.replace(config, index=IndexConfig(dir=str(index_dir)), cache=CacheConfig(answer_ttl_s=0))
    service = SearchService(config)
    try:
        answer = await service.search(parse_request({"query": query, "mode": "semantic", "threshold": 0}))
    finally:
        await service.aclose()
    return [h for f in answer["files"] for h in f["hits"]]
