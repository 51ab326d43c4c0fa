"""8 fake zoekt-webservers on consecutive ports, each answering a pre-serialized 100-file result.

.venv/bin/python bench/fake_zoekt.py FIRST_PORT [COUNT=8] [FILES=100]
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

from aiohttp import web

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "backends" / "zoekt_search_response.json"


def payload(index: int, files: int = 100) -> bytes:
    """A zoekt /api/search answer with ``files`` files of 3 line matches each."""
    template = json.loads(FIXTURE.read_text())
    result = template["Result"]
    out = []
    for i in range(files):
        line = f"def register_widget_{index}_{i}(name, factory):\n".encode()
        matches = [
            {
                "Line": base64.b64encode(line).decode(),
                "LineStart": 0,
                "LineEnd": len(line),
                "LineNumber": n,
                "Before": "",
                "After": "",
                "FileName": False,
                "Score": 100.0 - n,
                "DebugScore": "",
                "LineFragments": [{"LineOffset": 4, "Offset": 4, "MatchLength": 15, "SymbolInfo": None}],
            }
            for n in (3, 17, 40)
        ]
        out.append(
            {
                "FileName": f"src/pkg{i % 7}/module_{i}.py",
                "Repository": f"github.com/acme/repo-{index}",
                "Version": "0" * 40,
                "Language": "Python",
                "Branches": ["HEAD"],
                "LineMatches": matches,
                "Score": 5000.0 - i * 10 - index,
                "Checksum": "AAAA",
                "Content": None,
                "RepoURLs": {},
                "LineFragments": {},
                "Debug": "",
            }
        )
    result.update(Files=out, FileCount=files, MatchCount=files * 3, FilesSkipped=0, ShardsSkipped=0, Crashes=0)
    return json.dumps({"Result": result}).encode()


async def main(first_port: int, count: int, files: int = 100) -> None:
    runners = []
    for i in range(count):
        body = payload(i, files)

        async def handler(request: web.Request, body: bytes = body) -> web.Response:
            await request.read()
            return web.Response(body=body, content_type="application/json")

        app = web.Application()
        app.router.add_post("/api/search", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", first_port + i).start()
        runners.append(runner)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*(int(arg) for arg in sys.argv[1:4])))
