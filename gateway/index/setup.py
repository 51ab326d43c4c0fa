"""The indexes of a config's local namespaces, made from the config: declarations, then content."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gateway.index.files import Source
from gateway.index.resolve import DeclarationIndex

if TYPE_CHECKING:  # types only: a one-shot search reads the index without pydantic or tree-sitter
    from gateway.config import Config
    from gateway.index.content.narrow import ContentIndex

__all__ = ["INDEX_OFF", "content_for", "index_for"]

#: ``index`` of a local namespace without a content index (``/v1/namespaces``).
INDEX_OFF: dict[str, object] = {"state": "off", "files": 0, "bytes": 0, "built_s": 0.0}


def index_for(config: Config) -> DeclarationIndex | None:
    """The declaration index of ``config``'s local namespaces (those with a ``root``), if any and enabled."""
    if not config.index.enabled:
        return None
    sources = []
    for ns in config.namespaces:
        root = getattr(ns.settings, "root", None)
        if isinstance(root, str) and root:
            exclude = getattr(ns.settings, "exclude", ())
            sources.append(Source(ns.name, os.path.abspath(root), tuple(exclude)))
    if not sources:
        return None
    return DeclarationIndex(
        config.index.dir,
        sources,
        refresh_s=config.index.refresh_s,
        parse_budget_ms=config.index.parse_budget_ms,
        build_workers=config.index.build_workers,
        content=config.index.content,
        max_bytes=config.index.max_bytes,
        keep_days=config.index.keep_days,
    )


def content_for(index: DeclarationIndex | None) -> ContentIndex | None:
    """The content index of the declaration index's local namespaces, if it builds one."""
    if index is None or not index.content or index.directory is None:
        return None
    from gateway.index.content.narrow import ContentIndex

    return ContentIndex(index.directory, [s.root for s in index.sources.values()])
