"""otlp_sink: an OTLP/HTTP traces endpoint that takes every batch and keeps nothing (bench/overhead.py --tracing).

    .venv/bin/python bench/otlp_sink.py PORT

Answers each ``POST /v1/traces`` 200 with an empty ExportTraceServiceResponse (zero bytes of
protobuf) and counts the bytes it was sent; prints one line when ready.
"""

from __future__ import annotations

import sys

from aiohttp import web


async def traces(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=b"", content_type="application/x-protobuf")


def main() -> None:
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/traces", traces)
    print("ready", flush=True)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
