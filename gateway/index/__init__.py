"""The declaration index of local namespaces: tree-sitter declarations in SQLite.

- :mod:`~gateway.index.grammars`: the grammar wheels and our per-language queries;
- :mod:`~gateway.index.parse`: a file's declarations (kind, name, span, intent);
- :mod:`~gateway.index.store`: the SQLite database under ``[index] dir``;
- :mod:`~gateway.index.files`: which files to index, and one file read and parsed;
- :mod:`~gateway.index.builder`: the background builder process;
- :mod:`~gateway.index.hits`: matched lines grouped into declaration hits;
- :mod:`~gateway.index.resolve`: what a search asks of it (definitions, a page's hits).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gateway.index.files import Source
from gateway.index.resolve import DeclarationIndex

if TYPE_CHECKING:  # a type only: a one-shot search reads the index without pydantic or tree-sitter
    from gateway.config import Config

__all__ = ["DeclarationIndex", "Source", "index_for"]


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
    )
