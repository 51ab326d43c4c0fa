"""Running the HTTP app: ``fedsearch serve``, as one process or a group of workers.

Signals, the way a process manager (systemd, Kubernetes, a container runtime) sends them:

* ``SIGTERM`` / ``SIGINT``: stop accepting, let requests in flight finish within the
  grace period (``FEDSEARCH_SHUTDOWN_GRACE_S``, default :data:`GRACE_S`), cancel what
  is still running then, close every backend, exit 0.
* ``SIGHUP``: re-read the config (same ``--config`` / ``--root``) and swap it in
  atomically (:mod:`gateway.http.reload`); an invalid one is logged and the running one kept.

With ``--workers N`` the parent binds the socket once and forks N workers that all
accept on it (the kernel spreads connections); it forwards the three signals to
them, restarts a worker that dies, and exits 0 once all have stopped after SIGTERM.
A worker ends when the parent does, however it ends (SIGKILL too: the kernel's
parent-death signal, :mod:`gateway.index.lifetime`), and so does each worker's index builder.
Each worker has its own event loop, backends and connection pools.

Slow and hostile clients (:class:`ClientLimits`, applied by :func:`guard` and
:meth:`ClientLimits.runner_options`). What aiohttp bounds by itself: the request line
and each header (``max_line_size``/``max_field_size``, 8190 bytes; over it: 414 or 431 in problem JSON,
:mod:`gateway.http.protocol`),
the number of headers (``max_headers``, 128; we use 64), the body size
(``client_max_size`` = ``server.max_body_bytes``; over it: 413), and the idle time
between requests (``keepalive_timeout``). In aiohttp 3.14 that keep-alive timer is
also armed when a connection opens and closes one still waiting for a complete
request head when it fires, so a short ``keepalive_timeout`` is the request-head
(slowloris) timeout; aiohttp's own default (3630 s) is not. What aiohttp does not
bound, and :func:`guard` does: the time to send a body (trickled bodies get 408 after
``body_timeout_s``) and the time a client takes to read the answer (after
``send_timeout_s`` the connection is aborted). A client that disconnects cancels its
request (``handler_cancellation``), fan-out included. Not bounded here: the number of
connections (each slow one now lives at most ~``header_timeout_s``); cap it with the
OS (``ulimit -n``) or a proxy in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.config import Config
from gateway.errors import InvalidRequest
from gateway.http.app import create_app
from gateway.http.auth import refusal, warn_if_open
from gateway.http.protocol import GatewayRunner
from gateway.http.reload import SERVICE, reload_config
from gateway.index.lifetime import die_with_parent
from gateway.log import get_logger
from gateway.serving import settle_heap

__all__ = ["GRACE_S", "LIMITS", "MAX_WORKERS", "ClientLimits", "bind", "grace_period", "guard", "per_worker", "serve"]

#: Seconds that requests in flight get to finish after SIGTERM (inside Kubernetes' default 30).
GRACE_S = 25.0
MAX_WORKERS = 256
#: A worker that dies sooner than this after starting is crashing, not to be restarted.
MIN_UPTIME_S = 5.0
BACKLOG = 1024

log = get_logger("fedsearch.server")
_INFO = 20  # logging.INFO


# --- slow and hostile clients (see the module docstring) ------------------------------


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """How long a client may take to send a request head, a body, and to read the answer."""

    header_timeout_s: float = 15.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 60.0
    max_line_size: int = 8190
    max_field_size: int = 8190
    max_headers: int = 64
    lingering_time_s: float = 5.0

    def runner_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`aiohttp.web.AppRunner` (passed on to each connection)."""
        return {
            "keepalive_timeout": self.header_timeout_s,
            "max_line_size": self.max_line_size,
            "max_field_size": self.max_field_size,
            "max_headers": self.max_headers,
            "lingering_time": self.lingering_time_s,
            "handler_cancellation": True,
        }


LIMITS = ClientLimits()


def guard(app: web.Application, limits: ClientLimits = LIMITS) -> web.Application:
    """``app`` with the outermost middleware that bounds body and answer times (before it starts)."""

    @web.middleware
    async def slow_clients(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.body_exists:
            try:
                async with asyncio.timeout(limits.body_timeout_s):
                    await request.read()  # kept by aiohttp: the handler reads it from memory
            except TimeoutError:
                log.info("slow_body", path=request.path)
                response = refusal(
                    request.path, 408, "Request timeout", "the body came too slowly", "invalid_request", "body"
                )
                response.force_close()
                return response
            except web.HTTPRequestEntityTooLarge as exc:
                response = refusal(
                    request.path, 413, "Payload too large", exc.text or "body too large", "invalid_request", "body"
                )
                response.force_close()
                return response
        answer = await handler(request)
        try:
            async with asyncio.timeout(limits.send_timeout_s):
                await answer.prepare(request)
                await answer.write_eof()
        except TimeoutError:
            log.info("slow_reader", path=request.path)
            if request.transport is not None:
                request.transport.abort()
        return answer

    app.middlewares.insert(0, slow_clients)
    return app


Load = Callable[[], Config]


def grace_period(env: dict[str, str] | None = None) -> float:
    """The shutdown grace period in seconds, from ``FEDSEARCH_SHUTDOWN_GRACE_S`` if set."""
    raw = (os.environ if env is None else env).get("FEDSEARCH_SHUTDOWN_GRACE_S", "")
    if not raw:
        return GRACE_S
    try:
        value = float(raw)
    except ValueError:
        raise InvalidRequest("FEDSEARCH_SHUTDOWN_GRACE_S", "must be a number of seconds") from None
    if not 0 <= value <= 3600:
        raise InvalidRequest("FEDSEARCH_SHUTDOWN_GRACE_S", "must be between 0 and 3600")
    return value


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one), IPv4 or IPv6."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidRequest("host", f"cannot resolve {host!r}: {exc.strerror}") from None
    family = infos[0][0]
    try:
        return socket.create_server(infos[0][4][:2], family=family, backlog=BACKLOG)
    except OSError as exc:
        raise InvalidRequest("port", f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _line_atomic_stderr() -> None:
    """Make each log line one ``write(2)``, so processes sharing stderr never split each other's lines.

    Python's stderr writes through, and a log line is written as its text then its
    newline: two writes, between which another worker's line can land. A line-buffered
    stderr over a 64 KiB buffer hands the kernel whole lines.
    """
    stream = sys.stderr
    fileno = getattr(stream, "fileno", None)
    if fileno is None:
        return
    try:
        fd = os.dup(fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (captured in tests)
        return
    stream.flush()
    sys.stderr = io.TextIOWrapper(
        open(fd, "wb", buffering=1 << 16),  # noqa: SIM115 - it lives as long as the process
        encoding=stream.encoding or "utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def _announce(config: Config, sock: socket.socket, workers: int, grace_s: float) -> None:
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    # One plain line for a person: on a terminal, and wherever the info event that carries the URL is
    # not logged (`make run` logs warnings only). A log reader off a terminal gets the JSON event alone.
    if sys.stderr.isatty() or not log.is_enabled_for(_INFO):
        count = len(config.namespaces)
        sys.stderr.write(f"fedsearch: serving {count} namespace{'' if count == 1 else 's'} at {url}/\n")
        sys.stderr.flush()
    log.info(
        "serving",
        url=url,
        page=f"{url}/",
        afi=f"{url}/.afi/manifest.json",
        mcp="run `fedsearch mcp` (stdio) or `fedsearch mcp --http HOST:PORT`",
        port=port,
        namespaces=len(config.namespaces),
        source=config.source,
        workers=workers,
        grace_s=grace_s,
        pid=os.getpid(),
    )


def serve(
    config: Config,
    host: str | None = None,
    port: int | None = None,
    *,
    workers: int = 1,
    load: Load | None = None,
    grace_s: float | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT (exit code 0 after a clean drain); ``load`` re-reads the config on SIGHUP."""
    if not 1 <= workers <= MAX_WORKERS:
        raise InvalidRequest("workers", f"must be between 1 and {MAX_WORKERS}")
    grace = grace_period() if grace_s is None else grace_s
    host = host or config.server.host
    port = config.server.port if port is None else port
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until a loop handles it: a HUP must never kill us
    _line_atomic_stderr()
    sock = bind(host, port)
    warn_if_open(config, host)
    _announce(config, sock, workers, grace)
    if workers == 1:
        return run_worker(config, sock, load, grace)
    if load is not None:
        load = _shared_by(workers, load)
    return _Supervisor(per_worker(config, workers), sock, workers, load, grace).run()


def per_worker(config: Config, workers: int) -> Config:
    """``config`` for one of ``workers`` processes: the default ``max_scans`` (the CPUs) shared out
    among them, so the host still runs that many rg at once (one set in the config stays as set)."""
    server = config.server
    if workers <= 1 or "max_scans" in server.model_fields_set:
        return config
    return replace(config, server=server.model_copy(update={"max_scans": max(1, server.max_scans // workers)}))


def _shared_by(workers: int, load: Load) -> Load:
    return lambda: per_worker(load(), workers)


def run_worker(config: Config, sock: socket.socket, load: Load | None, grace_s: float) -> int:
    """Serve ``config`` on the listening ``sock`` in this process until told to stop."""
    return asyncio.run(_run(guard(create_app(config)), sock, load, grace_s))


async def _run(app: web.Application, sock: socket.socket, load: Load | None, grace_s: float) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []
    reloads: set[asyncio.Task[object]] = set()

    def on_stop(signum: int) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    def on_hup() -> None:
        holder = app.get(SERVICE)
        if stop.is_set():
            log.warning("reload_ignored", reason="shutting down")
            return
        if load is None or holder is None:
            log.warning("reload_unavailable", reason="no config loader" if load is None else "not started")
            return
        log.info("reload_started", signal="SIGHUP")
        task = loop.create_task(reload_config(holder, load))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    runner = GatewayRunner(
        app, handle_signals=False, shutdown_timeout=grace_s, access_log=None, **LIMITS.runner_options()
    )
    await runner.setup()  # opens the service (cleanup_ctx)
    settle_heap()
    try:
        site = web.SockSite(runner, sock, backlog=BACKLOG)
        await site.start()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_stop, signum)
        loop.add_signal_handler(signal.SIGHUP, on_hup)
        log.info("accepting", pid=os.getpid())
        await stop.wait()
        await site.stop()  # no new connections from here on
        log.info("shutdown_started", signal=received[0], grace_s=grace_s, pid=os.getpid())
        for task in list(reloads):
            task.cancel()
        await asyncio.gather(*reloads, return_exceptions=True)
    finally:
        try:
            # waits up to grace_s for requests in flight, cancels the rest, then closes backends
            await runner.cleanup()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(signum)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log.info("shutdown_done", pid=os.getpid())
    return 0


class _Supervisor:
    """The parent of ``--workers N``: forks, forwards signals, restarts, reaps."""

    def __init__(self, config: Config, sock: socket.socket, workers: int, load: Load | None, grace_s: float) -> None:
        self.config = config
        self.sock: socket.socket | None = sock
        self.workers = workers
        self.load = load
        self.grace_s = grace_s
        self.children: dict[int, int] = {}  # pid -> worker index
        self.started: dict[int, float] = {}  # worker index -> when it was forked
        self.stopping = False

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._forward)
        for index in range(self.workers):
            self._spawn(index)
        code = 0
        while self.children:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:  # pragma: no cover - children reaped elsewhere
                break
            if pid not in self.children:
                continue
            index = self.children.pop(pid)
            exit_code = os.waitstatus_to_exitcode(status)
            if self.stopping:
                clean = exit_code in (0, -signal.SIGTERM, -signal.SIGINT)
                code = code if clean else 1
                log.info("worker_exited", worker=index, pid=pid, code=exit_code)
                continue
            log.error("worker_died", worker=index, pid=pid, code=exit_code)
            if time.monotonic() - self.started[index] < MIN_UPTIME_S:
                log.error("workers_crashing", worker=index, detail="stopping every worker")
                code = 1
                self._stop_all(signal.SIGTERM)
            else:
                self._spawn(index)
        if self.sock is not None:
            self.sock.close()
        log.info("shutdown_done", pid=os.getpid(), workers=self.workers)
        return code

    def _spawn(self, index: int) -> None:
        if self.sock is None:  # stopping: nothing to serve on
            return
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; covered by the subprocess tests
            code = 1
            try:
                die_with_parent(parent)  # a supervisor killed (SIGKILL) leaves no worker serving on
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                structlog.contextvars.bind_contextvars(worker=index)
                code = run_worker(self.config, self.sock, self.load, self.grace_s)
            except BaseException as exc:
                log.error("worker_failed", worker=index, error=type(exc).__name__, exc_info=exc)
            finally:
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
                os._exit(code)
        self.children[pid] = index
        self.started[index] = time.monotonic()

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGHUP:
            self._stop_all(signum)
            return
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _stop_all(self, signum: int) -> None:
        if not self.stopping:
            self.stopping = True
            if self.sock is not None:  # the workers' copies close as they drain
                self.sock.close()
                self.sock = None
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
