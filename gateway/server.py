"""Running the HTTP app: ``fedsearch serve``."""

from __future__ import annotations

import sys

from aiohttp import web

from gateway.config import Config
from gateway.web import create_app

__all__ = ["serve"]


def serve(config: Config, host: str | None = None, port: int | None = None) -> None:
    """Serve until interrupted, printing where."""
    host = host or config.server.host
    port = config.server.port if port is None else port
    app = create_app(config)
    url = f"http://{host}:{port}"
    sys.stderr.write(
        f"fedsearch: serving {len(config.namespaces)} namespaces ({config.source})\n"
        f"fedsearch: search  POST {url}/v1/search\n"
        f"fedsearch: try     curl -s {url}/v1/search -d '{{\"query\": \"TODO\"}}'\n"
        f"fedsearch: health  GET  {url}/healthz\n"
    )
    sys.stderr.flush()
    web.run_app(app, host=host, port=port, print=None, access_log=None)
