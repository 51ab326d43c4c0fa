"""One batcher for calls several namespaces share: one ``rg`` for every local checkout,
one request per Zoekt server.

A fan-out starts every namespace's search in the same turn of the event loop. A search
whose call can be shared calls :func:`share` with a :class:`Call` (its ``key``: what
makes two calls the same call) and its own part of it; the searches with one key gather
for two turns, then ONE task runs the adapter's ``send`` for all of them, each member a
:class:`Seat` whose answer ``send`` gives (:meth:`Seat.answer`, :meth:`Seat.fail`). A
shared call takes one place in the fan-out's gate (:func:`~gateway.scope.call_slot`),
whatever its size.

* **Owner.** The :class:`Coalescer` is kept by the fan-out's
  :class:`~gateway.scope.CallScope` (one per fan-out, never a module global); outside a
  fan-out there is nothing to share with and ``send`` runs for the one caller, in its task.
* **Size.** A batch holds at most ``max_members`` members (0: no limit); past it, the
  next members start another.
* **Deadline.** At the deadline the fan-out calls each batch's hand-back: the adapter's
  ``hand_back`` gives the members what the call has found so far, and any member still
  waiting hears :class:`~gateway.errors.BackendTimeout` ("timed out").
* **Failure.** What ``send`` raises reaches every member it had not answered (each through
  its own resilience layer); a member ``send`` leaves unanswered hears it too.
* **Cancellation.** A member that goes leaves the others their answer; when every member
  has gone, one at least cancelled, the call is cancelled (a process killed and reaped).
  Members that all go before the call starts leave nothing sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gateway.errors import BackendError, BackendTimeout
from gateway.models import BackendResult
from gateway.scope import CallScope, call_slot, current_scope

__all__ = ["Call", "Coalescer", "HandBack", "Seat", "Send", "share"]

V = TypeVar("V")


class Seat(Generic[V]):
    """One member's place in a shared call: its part (``value``) and its answer to come."""

    __slots__ = ("future", "value")

    def __init__(self, value: V, future: asyncio.Future[BackendResult]) -> None:
        self.value = value
        self.future = future

    def waiting(self) -> bool:
        """Whether it still waits for its answer (not answered, failed or gone)."""
        return not self.future.done()

    def answer(self, result: BackendResult) -> None:
        if not self.future.done():
            self.future.set_result(result)

    def fail(self, exc: BaseException) -> None:
        """Fail it with ``exc`` (a cancellation becomes a BackendError: the member did not go)."""
        if not self.future.done():
            self.future.set_exception(exc if isinstance(exc, Exception) else BackendError("search cancelled"))


#: Runs one call for its members, answering each seat (the ones it leaves unanswered fail).
Send = Callable[[Sequence[Seat[V]]], Awaitable[None]]
#: At the deadline, answers the seats with what the call has found so far (synchronously).
HandBack = Callable[[Sequence[Seat[V]]], None]


@dataclass(frozen=True, slots=True)
class Call(Generic[V]):
    """A call several namespaces may share: what makes it one (``key``), how it is sent and
    handed back at its ``deadline``, and how many members it holds at most (0: no limit)."""

    key: Hashable
    send: Send[V]
    deadline: float
    hand_back: HandBack[V] | None = None
    max_members: int = 0


class _Batch(Generic[V]):
    """Members of one call, how to send and hand it back, and the task sending it."""

    __slots__ = ("cancelled", "hand_back", "seats", "send", "task", "waiting")

    def __init__(self, send: Send[V], hand_back: HandBack[V] | None) -> None:
        self.send = send
        self.hand_back = hand_back
        self.seats: list[Seat[V]] = []
        self.task: asyncio.Task[None] | None = None
        self.waiting = 0  # members whose answer is to come
        self.cancelled = False  # one member at least went

    def settled(self, future: asyncio.Future[BackendResult]) -> None:
        """A member answered or went; once all have, one at least gone, stop the call."""
        self.waiting -= 1
        self.cancelled = self.cancelled or future.cancelled()
        if not self.waiting and self.cancelled and self.task is not None:
            self.task.cancel()

    def expire(self) -> None:
        """The deadline came: what was found goes to the members; the others time out."""
        seats = [s for s in self.seats if s.waiting()]
        if seats and self.hand_back is not None:
            self.hand_back(seats)
        for seat in seats:
            seat.fail(BackendTimeout("timed out"))

    async def run(self) -> None:
        async with call_slot():  # one place in the fan-out's gate for the whole call
            seats = [s for s in self.seats if s.waiting()]
            if not seats:  # every member went while the call waited for its place
                return
            try:
                await self.send(seats)
            except BaseException as exc:  # every member hears it; a cancellation goes on up
                for seat in seats:
                    seat.fail(exc)
                if not isinstance(exc, Exception):
                    raise
                return
            for seat in seats:
                seat.fail(BackendError("the shared call ended without an answer"))


class Coalescer:
    """Gathers the calls one turn of the loop makes with one key into one call."""

    def __init__(self, scope: CallScope) -> None:
        self._scope = scope
        self._pending: dict[Hashable, _Batch[object]] = {}

    async def join(self, call: Call[V], value: V) -> BackendResult:
        """``value``'s answer from the call shared by every member with ``call.key``."""
        loop = asyncio.get_running_loop()
        key = call.key
        batch: _Batch[V] | None = self._pending.get(key)  # type: ignore[assignment]
        if batch is None or (call.max_members and len(batch.seats) >= call.max_members):
            batch = _Batch(call.send, call.hand_back)
            self._pending[key] = batch  # type: ignore[assignment]
            loop.call_soon(loop.call_soon, self._launch, key, batch, call.deadline)  # two turns: let the fan-out join
        seat = Seat(value, loop.create_future())
        batch.seats.append(seat)
        return await seat.future

    def _launch(self, key: Hashable, batch: _Batch[V], deadline: float) -> None:
        if self._pending.get(key) is batch:
            del self._pending[key]
        for seat in batch.seats:
            if seat.waiting():
                batch.waiting += 1
                seat.future.add_done_callback(batch.settled)
        if not batch.waiting:  # every member went before the call started
            return
        batch.task = self._scope.spawn(batch.run(), name="shared-call")
        self._scope.at_deadline(deadline, batch.expire)


async def share(call: Call[V], value: V) -> BackendResult:
    """``value``'s answer from ``call``, shared with the current fan-out's other members with
    its key (see the module's docstring); outside a fan-out, ``call.send`` runs for it alone."""
    scope = current_scope()
    if scope is not None:
        return await scope.kept(Coalescer, lambda: Coalescer(scope)).join(call, value)
    seat = Seat(value, asyncio.get_running_loop().create_future())
    try:
        await call.send([seat])
    finally:
        if seat.future.done() and not seat.future.cancelled():
            seat.future.exception()  # retrieved here, whatever happens to the caller
    if seat.waiting():
        raise BackendError("the call ended without an answer")
    return seat.future.result()
