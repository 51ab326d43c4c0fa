"""Cache keys: a request's fields and the caller's access, hashed; cursors.

* The **access key** of a caller is the hash of its token's identity (a token
  table's callers carry one; none for open access) and the names of every namespace
  it may see. Two callers share cached answers only if both hold: a narrower token,
  or a token whose view a reload narrowed, never reads what a wider one stored.
* An **answer** is keyed by the access key and every field of the request (after
  validation and the ``[defaults]``) but ``cursor``; a **snapshot** by its cursor, the
  access key and every field but ``offset`` and ``cursor``. A cursor replayed with
  other fields, or by another caller, names another key: a miss, never a page of
  someone else's answer. Every field counts, also those that do not change the
  files (``threshold`` in exact mode): they are echoed in the answer's next actions.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence

import msgspec

from gateway.query.request import SearchRequest

__all__ = ["VERSION", "access_key", "answer_key", "new_cursor", "snapshot_key"]

#: Bumped when what a key names is encoded differently (old records are then never read).
VERSION = "v1"


def _hash(*parts: bytes) -> str:
    return hashlib.blake2b(b"\x00".join(parts), digest_size=16).hexdigest()


def access_key(visible: Sequence[str], access: Callable[[str], bool] | None) -> bytes:
    """The caller's identity for the cache: its token (if any) and the namespaces it may see."""
    identity = str(getattr(access, "identity", "")) if access is not None else ""
    return _hash(identity.encode(), "\n".join(visible).encode()).encode()


def _fields(request: SearchRequest, exclude: set[str]) -> bytes:
    return msgspec.json.encode(request.model_dump(mode="json", exclude=exclude), order="sorted")


def answer_key(prefix: str, request: SearchRequest, access: bytes) -> str:
    """The key of the answer to ``request`` (all fields but the cursor) for this access."""
    return f"{prefix}:{VERSION}:a:{_hash(access, _fields(request, {'cursor'}))}"


def snapshot_key(prefix: str, cursor: str, request: SearchRequest, access: bytes) -> str:
    """The key of the snapshot ``cursor`` names, bound to the request (but its offset) and access."""
    return f"{prefix}:{VERSION}:s:{_hash(cursor.encode(), access, _fields(request, {'offset', 'cursor'}))}"


def new_cursor() -> str:
    """A fresh, unguessable cursor (22 URL-safe characters)."""
    return secrets.token_urlsafe(16)
