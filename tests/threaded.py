"""A gateway served as ``fedsearch serve`` serves it, on 127.0.0.1, in a thread with its own loop.

For tests that talk to it from synchronous code (requests, raw sockets, hypothesis):
:class:`~gateway.http.protocol.GatewayRunner` with the client limits ``serve`` applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from aiohttp import web

from gateway.http.protocol import GatewayRunner
from gateway.http.server import ClientLimits, guard

__all__ = ["serve_in_thread"]


@contextlib.contextmanager
def serve_in_thread(app: web.Application, limits: ClientLimits, name: str) -> Iterator[tuple[str, int]]:
    """``app`` behind the slow-client guard, served until the block ends; yields (host, port)."""
    runner = GatewayRunner(guard(app, limits), access_log=None, **limits.runner_options())
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError(f"{name} did not start within 30 s")
    host, port = runner.addresses[0][:2]
    try:
        yield host, port
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
