"""What the namespaces of one fan-out share: a :class:`CallScope`.

A fan-out opens one scope for its namespaces' tasks (they see it through a context
variable) and closes it when the answer is in. The scope holds

* the **gate**: at most ``server.concurrency`` backend calls in flight. A namespace whose
  backend shares its calls (:attr:`gateway.backend.AsyncBackend.shares_calls`) takes no
  place of its own; each shared call takes one, inside :func:`call_slot`;
* what adapters **keep** for the fan-out (:meth:`CallScope.kept`): the batcher that lets
  many namespaces share one call (:mod:`adapters._coalesce`) lives here, never in a
  module global, and goes with the fan-out;
* the **hand-backs** of shared calls: at each deadline the fan-out calls them
  (:meth:`CallScope.expire`), and a shared call hands its members what it has found so
  far at once, before anything is cancelled;
* the **tasks** of shared calls (:meth:`CallScope.spawn`), which :meth:`CallScope.aclose`
  lets end (a process killed and reaped) before the answer leaves, within ``SETTLE_S``.

Outside a fan-out (an adapter called directly) there is no scope: nothing is gated or
shared, and each search makes its own call. :func:`call_scope` opens one by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["SETTLE_S", "CallScope", "abandon", "call_scope", "call_slot", "current_scope", "entered"]

#: How long a fan-out waits for a cancelled namespace or a shared call to let go before it
#: leaves it behind (still referenced, to end on its own).
SETTLE_S = 0.005

T = TypeVar("T")

_SCOPE: ContextVar[CallScope | None] = ContextVar("fedsearch_call_scope", default=None)
#: Tasks left behind (they ignored a cancellation, or a process took long to reap), kept referenced until they end.
_abandoned: set[asyncio.Task[Any]] = set()


class CallScope:
    """The gate, the kept objects, the hand-backs and the shared tasks of one fan-out."""

    __slots__ = ("_hand_backs", "_kept", "_tasks", "gate")

    def __init__(self, concurrency: int = 64) -> None:
        self.gate = asyncio.Semaphore(concurrency)
        self._kept: dict[Hashable, Any] = {}
        self._hand_backs: list[tuple[float, Callable[[], None]]] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    def kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """The object kept under ``key`` for this fan-out, made by ``make`` on first use."""
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = make()
        return found

    def at_deadline(self, deadline: float, hand_back: Callable[[], None]) -> None:
        """Call ``hand_back`` (synchronously) when the fan-out reaches ``deadline``."""
        self._hand_backs.append((deadline, hand_back))

    def expire(self, deadline: float) -> None:
        """Call every hand-back due by ``deadline``, each once."""
        due = [hand for when, hand in self._hand_backs if when <= deadline]
        if due:
            self._hand_backs = [(when, hand) for when, hand in self._hand_backs if when > deadline]
            for hand_back in due:
                hand_back()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run a shared call as a task of this scope (in the caller's context)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self, within: float | None = SETTLE_S) -> None:
        """Let the shared calls end, ``within`` seconds at most (None: however long it takes);
        those that do not are cancelled and left behind, referenced (a cancelled call still
        stops and reaps its process)."""
        self._hand_backs.clear()
        if not self._tasks:
            return
        _, stuck = await asyncio.wait(set(self._tasks), timeout=within)
        for task in stuck:
            task.cancel()
        abandon(stuck)


def abandon(tasks: set[asyncio.Task[Any]]) -> None:
    """Keep ``tasks`` referenced until they end, their outcome retrieved (nobody waits for them)."""
    for task in tasks:
        _abandoned.add(task)
        task.add_done_callback(_forget)


def _forget(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody waits for it any more


def current_scope() -> CallScope | None:
    """The scope of the fan-out this code runs in, if any."""
    return _SCOPE.get()


@contextlib.contextmanager
def entered(scope: CallScope) -> Iterator[CallScope]:
    """``scope`` is the current one inside the block (tasks created there keep it)."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@contextlib.asynccontextmanager
async def call_scope(concurrency: int = 64) -> AsyncIterator[CallScope]:
    """A scope for searches made by hand in this block, as a fan-out would share them."""
    scope = CallScope(concurrency)
    with entered(scope):
        try:
            yield scope
        finally:
            await scope.aclose(within=None)


@contextlib.asynccontextmanager
async def call_slot() -> AsyncIterator[None]:
    """Hold a place in the current fan-out's gate for one call shared by several namespaces."""
    scope = _SCOPE.get()
    if scope is None:
        yield
        return
    async with scope.gate:
        yield
