"""One query on N backends under one deadline -> one Outcome each, in route order.

Each namespace runs as its own task. The fan-out's :class:`~gateway.scope.CallScope`
keeps at most ``concurrency`` backend calls in flight: a namespace whose backend shares
its calls (:attr:`~gateway.backend.AsyncBackend.shares_calls`) takes no place of its own,
each shared call takes one, so a thousand namespaces on four Zoekt servers are four calls
at once, not sixteen waves of sixty-four. A namespace that raises, hangs or answers
garbage costs only itself; outcomes come back in the order of the routes, whatever order
backends answer in.

Deadlines: a namespace's deadline is ``min(its timeout_ms, what is left of the
request's)``. Its backend is handed it in the query and returns what it has found when
it comes. The fan-out waits for each distinct deadline in turn (one wait for all the
namespaces that share it, not a timer each), and then:

1. **hands back**: the shared calls of that deadline give their members what they have
   found at once (:meth:`~gateway.scope.CallScope.expire`, synchronously: nothing depends
   on which of the loop's timers fires first);
2. gives the namespaces ``HAND_BACK_TURNS`` turns of the event loop (turns, not
   milliseconds) to return what they were handed or what their own timer cut: a partial
   answer reaches the answer however busy the machine is;
3. cancels those still running, ``timeout`` ("no answer within N ms"); a backend that
   ignores its cancellation is left behind (and logged) after ``SETTLE_S``, never waited for.

Logs: a namespace that did not answer ``ok`` logs ``namespace_done`` at info, one that
did at debug (the service logs one ``search_done`` line per search at info).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from gateway.backend import AsyncBackend
from gateway.errors import BackendError
from gateway.log import get_logger, scrub
from gateway.models import BackendResult, Outcome, SearchQuery, Status
from gateway.scope import SETTLE_S, CallScope, abandon, entered
from gateway.tracing import on as tracing_on
from gateway.tracing import record_query, span

__all__ = ["HAND_BACK_TURNS", "Route", "fan_out"]

#: Turns of the event loop a namespace has, once its deadline came, to return what it has.
HAND_BACK_TURNS = 4

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


async def _one(
    route: Route, query: SearchQuery, deadline: float, gate: asyncio.Semaphore, start: float, logged: int
) -> Outcome:
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
        try:
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


#: Statuses that mark a namespace's span as failed (a capped or partial answer is still one).
_FAILED: frozenset[Status] = frozenset({"timeout", "error", "unavailable"})


async def _traced(
    route: Route, query: SearchQuery, deadline: float, gate: asyncio.Semaphore, start: float, logged: int
) -> Outcome:
    """:func:`_one` in a span of its own (``fedsearch.namespace``): what the backend answered, its
    retries, hedges and breaker changes as events (:mod:`gateway.resilience.wrapper`)."""
    named = {"fedsearch.namespace": route.namespace, "fedsearch.backend.kind": route.backend.kind}
    with span("fedsearch.namespace", named) as current:
        if current is None:  # tracing stopped meanwhile
            return await _one(route, query, deadline, gate, start, logged)
        try:
            outcome = await _one(route, query, deadline, gate, start, logged)
        except asyncio.CancelledError:
            current.set_attribute("fedsearch.status", "timeout")  # cut at its deadline
            raise
        files, hits = _counts(outcome.result)
        current.set_attributes({"fedsearch.status": outcome.status, "fedsearch.files": files, "fedsearch.hits": hits})
        if outcome.status in _FAILED:
            from opentelemetry.trace import StatusCode

            # A backend's reason may quote the query: told only where the query may be.
            current.set_status(StatusCode.ERROR, outcome.error if record_query() else outcome.status)
        return outcome


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


def _late(route: Route, deadline: float, start: float, logged: int) -> Outcome:
    """The outcome of a namespace that had to be cancelled at its deadline."""
    return _outcome(route, "timeout", start, logged, error=f"no answer within {round((deadline - start) * 1000)} ms")


async def _settle(tasks: Sequence[asyncio.Task[Outcome]]) -> None:
    """Cancel ``tasks``, give them SETTLE_S to end, and abandon (but keep referenced) the rest."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    _, stuck = await asyncio.wait(tasks, timeout=SETTLE_S)
    for task in stuck:
        log.warning("backend_ignores_cancellation", task=task.get_name())
    abandon(stuck)


async def _close(due: Sequence[asyncio.Task[Outcome]], deadline: float, scope: CallScope) -> None:
    """Wait for ``due`` until ``deadline``; then hand back, give them their turns, cancel the rest."""
    pending = [t for t in due if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
    if any(not t.done() for t in due):
        scope.expire(deadline)
        for _ in range(HAND_BACK_TURNS):
            await asyncio.sleep(0)
            if all(t.done() for t in due):
                break
    await _settle([t for t in due if not t.done()])


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
    """Search every route concurrently (at most ``concurrency`` calls at once) under the query's deadline.

    ``on_outcome`` is called with each namespace's outcome as it settles (a stream's
    progress); one that had to be cancelled at the deadline is only in the result.
    """
    if not routes:
        return []
    scope = CallScope(concurrency)
    start = time.monotonic()
    logged = _LOG_NONE
    if log.is_enabled_for(logging.INFO):
        logged = _LOG_ALL if log.is_enabled_for(logging.DEBUG) else _LOG_PROBLEMS
    deadlines = [_deadline(route, query, start) for route in routes]
    one = _traced if tracing_on() else _one  # asked once a fan-out, not once a namespace
    with entered(scope):  # each task starts with a copy of this context
        tasks = [
            asyncio.create_task(
                one(route, query, deadline, scope.gate, start, logged), name=f"fanout:{route.namespace}"
            )
            for route, deadline in zip(routes, deadlines, strict=True)
        ]
    if on_outcome is not None:
        for task in tasks:
            task.add_done_callback(_report(on_outcome))
    try:
        for deadline in sorted(set(deadlines)):
            await _close([t for t, d in zip(tasks, deadlines, strict=True) if d == deadline], deadline, scope)
    except BaseException:
        await asyncio.shield(_settle(tasks))
        raise
    finally:
        await asyncio.shield(scope.aclose())
    return [
        task.result()
        if task.done() and not task.cancelled() and task.exception() is None
        else _late(route, deadline, start, logged)
        for task, route, deadline in zip(tasks, routes, deadlines, strict=True)
    ]
