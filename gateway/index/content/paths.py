"""Where each checkout's content index lives, with the standard library only.

The one-shot CLI asks, before it imports anything else (:mod:`gateway.cli.early`),
whether the checkouts it will search have complete content indexes big enough to be
worth reading (:func:`usable_bytes`); the layout inside each folder is
:mod:`~gateway.index.content.layout`'s.
"""

from __future__ import annotations

import functools
import os

from gateway.index.realpaths import real_root

TYPE_CHECKING = False  # typing and collections not imported: the one-shot CLI asks here as it starts
if TYPE_CHECKING:
    from collections.abc import Iterable

try:  # hashlib's own blake2b, without hashlib's load of OpenSSL (as gateway.index.store)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without its own hashes
    from hashlib import blake2b

__all__ = ["CLI_MIN_BYTES", "FORMAT", "USABLE", "content_dir", "digest", "root_dir", "usable_bytes"]

#: The layout and gram format; a change makes a new folder (the old one is another version's).
FORMAT = 7
#: The one-shot CLI reads the content indexes of its checkouts when they index at least this
#: many bytes together: below it, rg alone (started before the CLI's imports) answers sooner.
CLI_MIN_BYTES = 64 * 1024 * 1024
#: A root folder's file holding the bytes its index covers (decimal), there while the index is complete:
#: what :func:`usable_bytes` reads (state.json says the same, but reading it would import json and re).
USABLE = "usable"

_tantivy: list[str] = []


def _tantivy_version() -> str:
    if not _tantivy:
        from gateway.index.versions import installed_version  # the wheel's METADATA, not importlib.metadata

        _tantivy.append(installed_version("tantivy") or "unknown")
    return _tantivy[0]


def content_dir(directory: str) -> str:
    """This version's folder of content indexes under ``[index] dir``."""
    return _content_dir(directory, FORMAT)


@functools.lru_cache(maxsize=64)  # asked once a checkout (10,000 at a server's start): worked out once a folder
def _content_dir(directory: str, version: int) -> str:
    return os.path.join(os.path.expanduser(directory), f"content-{version}-tantivy-{_tantivy_version()}")


def digest(path: str) -> str:
    """A short name for an absolute path (20 hex digits), as folders and markers of a root are named."""
    return blake2b(os.fsencode(path), digest_size=10).hexdigest()


def root_dir(directory: str, root: str) -> str:
    """The folder of one checkout's content index (``root`` absolute; the same folder by any symlink)."""
    return os.path.join(content_dir(directory), digest(real_root(root)))


def usable_bytes(directory: str, roots: Iterable[str]) -> int:
    """Bytes of the files indexed in the complete content indexes of ``roots`` (0 for one that is not)."""
    total = 0
    for root in roots:
        try:
            with open(os.path.join(root_dir(directory, root), USABLE), "rb") as handle:
                total += int(handle.read(32))
        except (OSError, ValueError):
            continue
    return total
