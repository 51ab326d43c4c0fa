"""Who a caller is, for fair admission and quotas (docs/operations.md, "Callers").

A :class:`Principal` is what admission knows of a caller: a key that tells callers apart,
its ``weight`` and its own quota (``rate``, ``burst``). The surfaces find it at their edge
(:func:`identify`) and bind it for the request (:func:`calling`); admission reads it
(:func:`current`), and the peer adapter forwards its key to the gateway it asks
(:data:`CLIENT_HEADER`). In order:

1. **The token**, with ``[[tokens]]`` configured: the key is the token's ``name``, with
   its ``weight``, ``rate`` and ``burst``. A token holder cannot split itself into
   several callers: what it says in :data:`CLIENT_HEADER` is ignored, unless the token
   is a ``peer`` one (a federating gateway): then the caller is ``<token name>/<the
   forwarded key>``, with the peer token's weight and quota each. A forwarded identity
   is trusted only from a token that is configured ``peer = true``.
2. **A client id**, without tokens: the MCP session (``session:<id>``), else the
   :data:`CLIENT_HEADER` header (``client:<id>``), else the peer address (``addr:<ip>``).
   Without tokens nothing is authenticated: the client id is what the client says it is
   (fairness among clients that say who they are), the address the last resort.

In-process callers (the CLI, an embedding) are :data:`LOCAL`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["CLIENT_HEADER", "LOCAL", "Principal", "calling", "client_id", "current", "identify"]

#: The header naming a client (and, from a peer token, the caller a gateway forwards).
CLIENT_HEADER = "X-Fedsearch-Client"
#: What a client id may be: printable, no spaces, at most 200 characters (else it is ignored).
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,200}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller as admission sees it: its key, its weight and its own quota (None: none)."""

    key: str
    weight: float = 1.0
    rate: float | None = None
    burst: int | None = None
    #: A federating gateway's token: it may name the caller it forwards.
    peer: bool = False

    def forwarding(self, client: str | None) -> Principal:
        """The caller this principal forwards: itself, or (a peer's) ``<key>/<client>``."""
        if not self.peer or client is None:
            return self
        return Principal(f"{self.key}/{client}", self.weight, self.rate, self.burst)


#: In-process callers: the CLI, an embedding, tests.
LOCAL = Principal("local")
_CALLER: ContextVar[Principal] = ContextVar("fedsearch_caller", default=LOCAL)


def client_id(value: str | None) -> str | None:
    """``value`` if it is a usable client id, else None (ignored, never an error)."""
    if value is None:
        return None
    value = value.strip()
    return value if _CLIENT_ID.match(value) else None


def identify(
    token: Principal | None,
    *,
    session: str | None = None,
    client: str | None = None,
    address: str | None = None,
) -> Principal:
    """The caller of a request: its token's principal (a peer's forwarding ``client``), else its
    session, its client id, its address (see the module)."""
    client = client_id(client)
    if token is not None:
        return token.forwarding(client)
    if (session := client_id(session)) is not None:
        return Principal(f"session:{session}")
    if client is not None:
        return Principal(f"client:{client}")
    if address:
        return Principal(f"addr:{address}")
    return LOCAL


def current() -> Principal:
    """The caller of the request being served (:data:`LOCAL` outside one)."""
    return _CALLER.get()


@contextlib.contextmanager
def calling(principal: Principal) -> Iterator[Principal]:
    """Serve what runs inside for ``principal`` (tasks started inside inherit it)."""
    reset = _CALLER.set(principal)
    try:
        yield principal
    finally:
        _CALLER.reset(reset)
