"""One query on N backends under one deadline -> one Outcome each, in route order.

Each namespace runs as its own task under ``min(its timeout_ms, what is left of the
request's)``; a bounded semaphore keeps at most ``concurrency`` backend calls in
flight, so a thousand namespaces work. A namespace whose backend shares its calls
(:attr:`~gateway.backend.AsyncBackend.shares_calls`) takes no place of its own: each
shared call takes one (:func:`~gateway.backend.call_slot`), so a thousand namespaces
on four Zoekt servers are four calls at once, not sixteen waves of sixty-four.

A namespace that raises, hangs or answers garbage costs only itself: its Outcome
says how, and the others are untouched.
Outcomes come back in the order of the routes, whatever order backends answer in.

Deadlines: a namespace's backend is handed its own deadline in the query (adapters
forward it to backends that take one, and return what they found when it comes); it
gets ``GRACE_S`` more to hand that back, then it is cancelled and reported ``timeout``
(a late answer is dropped). A namespace with a ``timeout_ms`` shorter than what is
left of the request has a timer of its own; the others are cancelled together by the
fan-out (a thousand timers were a sixth of a namespace's cost). The answer itself
never waits past the request's deadline plus ``GRACE_S`` and twice ``SETTLE_S``: a
backend that ignores its cancellation is left behind (and logged), never waited for.

Logs: a namespace that did not answer ``ok`` logs ``namespace_done`` at info, one that
did at debug (the service logs one ``search_done`` line per search at info). A line
costs about 15 us warm: at info, a thousand namespaces logged 1,000 lines a search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from gateway.backend import CALL_GATE, AsyncBackend
from gateway.errors import BackendError
from gateway.log import get_logger, scrub
from gateway.models import BackendResult, Outcome, SearchQuery, Status

__all__ = ["GRACE_S", "SETTLE_S", "Route", "fan_out"]

#: How long past its deadline a backend may take to hand back what it has.
GRACE_S = 0.03
#: How long a cancelled namespace may take to let go before the answer leaves without it.
SETTLE_S = 0.005

#: Namespaces that ignored their cancellation, kept referenced until they end.
_abandoned: set[asyncio.Task[Outcome]] = set()

log = get_logger("fedsearch.fanout")

#: Which namespace_done lines a fan-out logs (the level is asked once, not per namespace).
_LOG_NONE, _LOG_PROBLEMS, _LOG_ALL = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Route:
    """One namespace to search: its backend, weight and own time cap."""

    namespace: str
    backend: AsyncBackend[Any]
    weight: float = 1.0
    timeout_ms: int | None = None
    #: Globs of the backend's own sub-namespaces to search (a peer gateway); empty: all.
    sub_namespaces: tuple[str, ...] = ()


def _counts(result: BackendResult | None) -> tuple[int, int]:
    if result is None:
        return 0, 0
    return len(result.files), sum(len(f.hits) for f in result.files)


def _deadline(route: Route, query: SearchQuery, start: float) -> float:
    """``min(its timeout_ms, what is left of the request's)`` as an absolute time."""
    if route.timeout_ms is None:
        return query.deadline
    return min(query.deadline, start + route.timeout_ms / 1000)


async def _one(route: Route, query: SearchQuery, gate: asyncio.Semaphore, start: float, logged: int) -> Outcome:
    deadline = _deadline(route, query, start)
    backend = route.backend
    kind = backend.kind
    status: Status = "ok"
    result: BackendResult | None = None
    error = ""
    retry_after: float | None = None
    if query.mode not in backend.modes:
        status, error = "unsupported", f"{kind} cannot search in {query.mode} mode"
    else:
        asked = query
        if deadline != query.deadline or route.sub_namespaces != query.sub_namespaces:
            asked = replace(query, deadline=deadline, sub_namespaces=route.sub_namespaces)
        own_timer = (
            asyncio.timeout(max(0.0, deadline - time.monotonic()) + GRACE_S)
            if deadline < query.deadline
            else contextlib.nullcontext()  # the request's deadline: fan_out cancels it then
        )
        try:
            async with own_timer:
                if backend.shares_calls:
                    result = await backend.search(asked)
                else:
                    async with gate:
                        result = await backend.search(asked)
            status, error = result.status, result.reason
        except BackendError as exc:
            status, error = exc.status, exc.reason
            retry_after = getattr(exc, "retry_after", None)
        except TimeoutError:
            status, error = "timeout", f"no answer within {round((deadline - start) * 1000)} ms"
        except Exception as exc:  # a bug in one adapter costs only its namespace
            status, error = "error", f"internal error in {kind} adapter: {type(exc).__name__}"
            log.error("backend_crashed", namespace=route.namespace, backend=kind, exc_info=exc)
    return _outcome(route, status, start, logged, result, error, retry_after)


def _outcome(
    route: Route,
    status: Status,
    start: float,
    logged: int,
    result: BackendResult | None = None,
    error: str = "",
    retry_after: float | None = None,
) -> Outcome:
    kind = route.backend.kind
    took_ms = round((time.monotonic() - start) * 1000)
    error = scrub(error) if error else error  # a backend may echo what we sent it (a token) in its error text
    if logged == _LOG_ALL or (logged and status != "ok"):  # counting a wide answer's hits costs more than the line
        files, hits = _counts(result)
        (log.debug if status == "ok" else log.info)(
            "namespace_done",
            namespace=route.namespace,
            backend=kind,
            status=status,
            took_ms=took_ms,
            files=files,
            hits=hits,
            **({"error": error} if error else {}),
        )
    return Outcome(
        namespace=route.namespace,
        backend=kind,
        status=status,
        took_ms=took_ms,
        result=result,
        error=error,
        weight=route.weight,
        retry_after=retry_after,
    )


def _late(route: Route, query: SearchQuery, start: float, logged: int) -> Outcome:
    """The outcome of a namespace that had to be cancelled from outside."""
    limit = round((_deadline(route, query, start) - start) * 1000)
    return _outcome(route, "timeout", start, logged, error=f"no answer within {limit} ms")


async def _settle(tasks: Sequence[asyncio.Task[Outcome]]) -> None:
    """Cancel ``tasks``, give them SETTLE_S to end, and abandon (but keep referenced) the rest."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    _, stuck = await asyncio.wait(tasks, timeout=SETTLE_S)
    for task in stuck:
        log.warning("backend_ignores_cancellation", task=task.get_name())
        _abandoned.add(task)
        task.add_done_callback(_forget)


def _forget(task: asyncio.Task[Outcome]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody waits for it any more


def _report(on_outcome: Callable[[Outcome], None]) -> Callable[[asyncio.Task[Outcome]], None]:
    def done(task: asyncio.Task[Outcome]) -> None:
        if not task.cancelled() and task.exception() is None:
            on_outcome(task.result())

    return done


async def fan_out(
    routes: Sequence[Route],
    query: SearchQuery,
    concurrency: int = 64,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Search every route concurrently (at most ``concurrency`` at once) under the query's deadline.

    ``on_outcome`` is called with each namespace's outcome as it settles (a stream's
    progress); one that had to be cancelled at the deadline is only in the result.
    """
    if not routes:
        return []
    gate = asyncio.Semaphore(concurrency)
    start = time.monotonic()
    logged = _LOG_NONE
    if log.is_enabled_for(logging.INFO):
        logged = _LOG_ALL if log.is_enabled_for(logging.DEBUG) else _LOG_PROBLEMS
    shared = CALL_GATE.set(gate)  # each task starts with a copy of this context
    try:
        tasks = [
            asyncio.create_task(_one(route, query, gate, start, logged), name=f"fanout:{route.namespace}")
            for route in routes
        ]
    finally:
        CALL_GATE.reset(shared)
    if on_outcome is not None:
        for task in tasks:
            task.add_done_callback(_report(on_outcome))
    try:
        limit = max(0.0, query.deadline + GRACE_S - time.monotonic())
        _, pending = await asyncio.wait(tasks, timeout=limit)
        await _settle([t for t in tasks if t in pending])
    except BaseException:
        await asyncio.shield(_settle(tasks))
        raise
    return [
        task.result()
        if task.done() and not task.cancelled() and task.exception() is None
        else _late(route, query, start, logged)
        for task, route in zip(tasks, routes, strict=True)
    ]
