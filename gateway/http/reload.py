"""Reloading the config in a running gateway without dropping a request.

The app keeps its :class:`SearchService` in a :class:`ServiceHolder` (under the
``SERVICE`` app key). Each request takes a *lease* on the service that is current
when it arrives (:func:`service_middleware`) and keeps using that one to the end,
whatever happens meanwhile; routes read it with :func:`service_of`.

:meth:`ServiceHolder.reload` builds the next service from a new config, reusing
the backend of every namespace whose kind and settings did not change (connection
pools and all), opening the new ones, and swaps it in atomically. A backend that
no longer belongs to any live service (a namespace removed or changed) is closed
once the last request leasing a service that used it has ended. If anything in
the new config is wrong, nothing changes: :func:`reload_config` logs the problem
and the running config stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.backend import AsyncBackend
from gateway.config import Config, NamespaceConfig
from gateway.errors import ConfigError
from gateway.log import get_logger
from gateway.service import SearchService, open_backend

__all__ = [
    "SERVICE",
    "ReloadReport",
    "ServiceHolder",
    "reload_config",
    "service_middleware",
    "service_of",
]

log = get_logger("fedsearch.reload")

Prepare = Callable[[SearchService], None]


@dataclass(slots=True, eq=False)
class _Generation:
    """One service, the backends it uses and how many requests hold it."""

    service: SearchService
    backends: tuple[AsyncBackend[Any], ...]
    leases: int = 0
    retired: bool = False


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What a reload changed, by namespace name."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def _backends_of(service: SearchService) -> tuple[AsyncBackend[Any], ...]:
    return tuple(service.backend(name) for name in service.visible())


def _same_backend(old: NamespaceConfig, new: NamespaceConfig) -> bool:
    """Whether ``new`` can keep ``old``'s backend (weight and timeout live outside it)."""
    return old.backend == new.backend and old.settings == new.settings


async def _close_backend(backend: AsyncBackend[Any]) -> None:
    try:
        await backend.aclose()
    except Exception as exc:  # closing must go on for the others
        log.warning("backend_close_failed", namespace=backend.name, error=type(exc).__name__)


class ServiceHolder:
    """The current :class:`SearchService` of an app, swapped atomically, closed when idle.

    ``prepare`` is applied to every service that :meth:`reload` builds (the app hooks
    its metrics observer in there).
    """

    def __init__(self, service: SearchService, prepare: Prepare | None = None) -> None:
        self.prepare = prepare
        self._current = _Generation(service, _backends_of(service))
        self._live = [self._current]
        self._closing: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    @property
    def current(self) -> SearchService:
        return self._current.service

    @property
    def generations(self) -> int:
        """How many services are alive: the current one and retired ones still in use."""
        return len(self._live)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[SearchService]:
        """The current service, kept alive (even across a swap) until the block ends."""
        generation = self._current
        generation.leases += 1
        try:
            yield generation.service
        finally:
            generation.leases -= 1
            if generation.retired and generation.leases == 0:
                self._schedule(self._drop(generation))

    def swap(self, service: SearchService) -> None:
        """Make ``service`` current; the old one is closed when its last lease ends."""
        old = self._current
        self._current = _Generation(service, _backends_of(service))
        self._live.append(self._current)
        old.retired = True
        if old.leases == 0:
            self._schedule(self._drop(old))

    async def reload(self, config: Config) -> ReloadReport:
        """Swap in a service over ``config``, reusing unchanged backends; nothing changes on error."""
        async with self._lock:
            old = self.current
            old_ns = {ns.name: ns for ns in old.config.namespaces}
            reused: dict[str, AsyncBackend[Any]] = {}
            opened: list[AsyncBackend[Any]] = []
            added: list[str] = []
            changed: list[str] = []
            kept: list[str] = []
            try:
                for ns in config.namespaces:
                    before = old_ns.get(ns.name)
                    if before is not None and _same_backend(before, ns):
                        reused[ns.name] = old.backend(ns.name)
                        kept.append(ns.name)
                        continue
                    (added if before is None else changed).append(ns.name)
                    backend = open_backend(ns)
                    opened.append(backend)
                    reused[ns.name] = backend
                service = SearchService(config, reused, scans=old.scans)  # one bound on rg, reloads or not
                if self.prepare is not None:
                    self.prepare(service)
            except BaseException:
                for backend in reversed(opened):
                    await _close_backend(backend)
                raise
            service.scans.resize(config.server.max_scans)
            self.swap(service)
            names = {ns.name for ns in config.namespaces}
            removed = tuple(name for name in old_ns if name not in names)
            return ReloadReport(tuple(added), removed, tuple(changed), tuple(kept))

    async def wait_closed(self) -> None:
        """Wait until every close already due (services retired and idle) has finished."""
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def aclose(self) -> None:
        """Close every live service's backends (each once), and wait for pending closes."""
        await self.wait_closed()
        seen: set[int] = set()
        for generation in reversed(self._live):
            generation.service.close_index()
            for backend in reversed(generation.backends):
                if id(backend) not in seen:
                    seen.add(id(backend))
                    await _close_backend(backend)
        self._live.clear()

    def _schedule(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _drop(self, generation: _Generation) -> None:
        """Forget a retired, idle generation; close the backends no live one still uses."""
        if generation not in self._live:
            return
        self._live.remove(generation)
        generation.service.close_index()
        in_use = {id(b) for g in self._live for b in g.backends}
        for backend in _unique(generation.backends):
            if id(backend) not in in_use:
                await _close_backend(backend)
                log.info("namespace_closed", namespace=backend.name, backend=backend.kind)


def _unique(backends: Iterable[AsyncBackend[Any]]) -> list[AsyncBackend[Any]]:
    seen: set[int] = set()
    out = []
    for backend in backends:
        if id(backend) not in seen:
            seen.add(id(backend))
            out.append(backend)
    return out


SERVICE = web.AppKey("service", ServiceHolder)
#: The service a request leased on arrival.
_LEASED = web.RequestKey("leased_service", SearchService)


@web.middleware
async def service_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Lease the current service for the whole request (a reload meanwhile does not affect it)."""
    holder = request.app.get(SERVICE)
    if holder is None:
        return await handler(request)
    async with holder.lease() as service:
        request[_LEASED] = service
        return await handler(request)


def service_of(request: web.Request) -> SearchService:
    """The service this request leased (the app's current one outside the middleware)."""
    leased: SearchService | None = request.get(_LEASED)
    if leased is not None:
        return leased
    return request.app[SERVICE].current


async def reload_config(holder: ServiceHolder, load: Callable[[], Config]) -> ReloadReport | None:
    """Re-read the config with ``load`` and swap it in; log and keep the running one if it is invalid."""
    before, traced = holder.current.config.server, holder.current.config.tracing
    try:
        config = await asyncio.to_thread(load)
        report = await holder.reload(config)
    except ConfigError as exc:
        log.error("reload_failed", key=exc.key, error=str(exc), kept_namespaces=len(holder.current.visible()))
        return None
    except Exception as exc:  # an adapter that cannot open: keep serving the old config
        log.error("reload_failed", error=f"{type(exc).__name__}: {exc}", kept_namespaces=len(holder.current.visible()))
        return None
    current = holder.current.config
    if current.server != before:
        changed = sorted(k for k in type(before).model_fields if getattr(before, k) != getattr(current.server, k))
        log.warning("reload_needs_restart", keys=[f"server.{k}" for k in changed])
    if current.tracing != traced:  # the tracer is the process's, set up as it started
        log.warning("reload_needs_restart", keys=["tracing"])
    log.info(
        "reload_done",
        source=current.source,
        namespaces=len(current.namespaces),
        added=list(report.added),
        removed=list(report.removed),
        changed=list(report.changed),
    )
    return report
