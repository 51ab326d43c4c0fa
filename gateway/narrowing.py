"""The one interface between a local backend and the content index: which files a scan may skip.

A :class:`Narrower` answers, for one checkout and one query, either :class:`Narrowed`
(rg reads exactly those files by name, and the files directly inside those folders as a
scan would: ``rg --max-depth 1``) or the reason the checkout is scanned whole. Whatever
it answers, the files and lines found are exactly those of a full scan: it only says
where a match cannot be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from gateway.models import SearchQuery

__all__ = ["Narrowed", "Narrower"]


class Narrowed(msgspec.Struct, frozen=True):
    """What rg reads of a checkout instead of all of it (absolute paths)."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()


class Narrower(Protocol):
    """The content index as a local backend asks it (its methods may block: call them off the event loop)."""

    def narrow(self, root: str, query: SearchQuery, accept: Callable[[str], bool] | None) -> Narrowed | str:
        """What rg must read of ``root`` (absolute) to find every match of ``query``, or why it
        reads everything; ``accept``: the backend's path filter (root-relative paths), if any."""
        ...
