"""One query on N backends under one deadline -> one Outcome each, in route order.

Each namespace runs as its own task under ``min(its timeout_ms, what is left of the
request's)``; a bounded semaphore keeps at most ``concurrency`` backends busy at
once, so a thousand namespaces work. A namespace that raises, hangs or answers
garbage costs only itself: its Outcome says how, and the others are untouched.
Outcomes come back in the order of the routes, whatever order backends answer in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.backend import AsyncBackend
from gateway.errors import BackendError
from gateway.log import get_logger
from gateway.models import BackendResult, Outcome, SearchQuery, Status

__all__ = ["GRACE_S", "Route", "fan_out"]

#: How long past its deadline a backend may take to hand back what it has.
GRACE_S = 0.03

log = get_logger("fedsearch.fanout")


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


async def _one(route: Route, query: SearchQuery, gate: asyncio.Semaphore) -> Outcome:
    start = time.monotonic()
    deadline = query.deadline
    if route.timeout_ms is not None:
        deadline = min(deadline, start + route.timeout_ms / 1000)
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
            async with asyncio.timeout(max(0.0, deadline - time.monotonic()) + GRACE_S):
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
    took_ms = round((time.monotonic() - start) * 1000)
    files, hits = _counts(result)
    log.info(
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


async def fan_out(routes: Sequence[Route], query: SearchQuery, concurrency: int = 64) -> list[Outcome]:
    """Search every route concurrently (at most ``concurrency`` at once) under the query's deadline."""
    if not routes:
        return []
    gate = asyncio.Semaphore(concurrency)
    return list(await asyncio.gather(*(_one(route, query, gate) for route in routes)))
