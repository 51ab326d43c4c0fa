"""A file's content identity: what says two files hold the same bytes, exactly.

An identity is a string with the kind of its namespace of values first:

- ``git:<blob id>``: the git blob id, which local checkouts (``git ls-files -s``, or a
  changed file hashed the way git does: :func:`blob_id`), GitHub (``sha``) and GitLab
  (a blob's ``id``) all give, so copies merge across those engines;
- ``zoekt:<checksum>``: Zoekt's own content checksum, which only another Zoekt answer's
  can equal.

A file without an identity (``""``) is never merged with another. A backend that knows
identities exactly sets :attr:`gateway.models.FileMatch.identity`; one that knows them
cheaply but must look again before relying on one (a local checkout, whose files change
under it) hands ranking an :class:`Identities` with its answer instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # typeshed has no stub for _sha1: it is hashlib's sha1
    from hashlib import sha1
else:
    try:  # hashlib's own SHA-1, without hashlib's load of OpenSSL (_hashlib) at every one-shot search
        from _sha1 import sha1
    except ImportError:  # pragma: no cover - a Python built without its own hashes
        from hashlib import sha1

__all__ = ["GIT", "ZOEKT", "Identities", "blob_id", "git_identity", "zoekt_identity"]

GIT = "git:"
ZOEKT = "zoekt:"
_HEX = frozenset("0123456789abcdef")


class Identities(Protocol):
    """The identities of one answer's files, by path: a cheap claim, and the exact word.

    ``claims`` maps each file to what it was when last looked at (no I/O once loaded: fusion
    reads it with the dict's own ``get``): files whose claims differ are never the same.
    ``exact`` looks again (a stat, or reading the file where it changed) and is asked only
    of files whose claim another file shares. Both give ``""`` where there is no identity.
    """

    def claims(self) -> Mapping[str, str]: ...

    def exact(self, path: str) -> str: ...


def blob_id(data: bytes) -> str:
    """The git blob id (SHA-1) of ``data``, as ``git hash-object`` computes it."""
    digest = sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def git_identity(value: object) -> str:
    """``git:<id>`` for a backend's blob id (40 or 64 hexadecimal digits); ``""`` for anything else."""
    if not isinstance(value, str) or len(value) not in (40, 64):
        return ""
    lowered = value.lower()
    return GIT + lowered if _HEX.issuperset(lowered) else ""


def zoekt_identity(value: object) -> str:
    """``zoekt:<checksum>`` for Zoekt's ``Checksum`` (base64 of its content hash); ``""`` when absent."""
    if not isinstance(value, str) or not value or len(value) > 128:
        return ""
    return ZOEKT + value
