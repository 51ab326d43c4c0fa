"""Do two source trees answer the same? `fedsearch serve` from each, the same requests, the JSON diffed.

    git worktree add /tmp/before <commit>
    .venv/bin/python bench/compare_answers.py /tmp/before . [--dir DIR]

Both trees serve one config over the same corpus: the 8 package checkouts of
bench/corpus.py as ripgrep namespaces, and one namespace of every remote kind (zoekt,
hound, livegrep, sourcegraph, github, gitlab, afi, gateway) pointed at a fake serving
the recorded formats of tests/fixtures/backends. Every request (searches of every
kind and filter over POST and GET, paging by the answers' own next actions, bad
input, namespaces, files, AFI) goes to both servers; their JSON is compared with the
timing fields (``took_ms``) left out. ``fedsearch search --json`` is run from each tree
too. Prints one line per request and a summary; exits 1 if any answer differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import build
from bench.overhead import free_ports

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "backends"
QUERIES = ("register_widget", "def __init__", "ClientSession", "TODO", "import os", "raise ValueError")


def _body(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def fake_backends() -> web.Application:
    """One server answering every remote kind's API with its recorded payload."""
    zoekt = _body("zoekt_search_response.json")
    hound = _body("hound_search.json")["response"]["body"]
    livegrep = _body("livegrep_search.json")["response"]["body"]
    github = _body("github_code_search.json")["response"]["body"]
    gitlab = _body("gitlab_blobs.json")["response"]
    sse = (FIXTURES / "sourcegraph_stream.txt").read_bytes()
    files = [(f["FileName"], m["LineNumber"]) for f in zoekt["Result"]["Files"] for m in f["LineMatches"]]
    manifest = {
        "afi_version": "0.1",
        "provider": "fake",
        "profile": 2,
        "capabilities": ["stat", "list", "read", "search"],
        "search": {"modes": ["exact", "regex"], "max_results": 500},
        "path": {"case_sensitive": True, "max_length": 4096},
        "auth": {"required": False, "methods": []},
    }
    afi_page = {"matches": [{"path": f"/{p}", "line": n, "column": 1, "text": "register_widget(x)"} for p, n in files]}
    peer = {
        "files": [
            {
                "file_path": p,
                "namespace": "remote",
                "hit_count": 1,
                "hits": [{"start_line": n, "end_line": n, "kind": "line", "text": "register_widget(x)", "column": 1}],
            }
            for p, n in files
        ],
        "file_count": len(files),
        "namespaces": [{"name": "remote", "backend": "ripgrep", "status": "ok", "files": len(files), "hits": 2}],
    }
    raw = "import os\n\n\ndef register_widget(name, factory):\n    return name\n"

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/api/search":
            return web.json_response(zoekt)
        if path == "/api/v1/search":
            return web.json_response(hound)
        if path.startswith("/api/v1/search/"):
            return web.Response(text=json.dumps(livegrep), content_type="text/plain")
        if path == "/.api/search/stream":
            return web.Response(body=sse, content_type="text/event-stream")
        if path == "/search/code":
            return web.json_response(github)
        if path.startswith("/repos/"):
            return web.Response(text=raw, content_type="application/vnd.github.raw")
        if path.startswith("/api/v4/"):
            headers = {k: v for k, v in gitlab["headers"].items() if k.lower() != "content-type"}
            return web.json_response(gitlab["body"], headers=headers)
        if path == "/.afi/manifest.json":
            return web.json_response(manifest)
        if path == "/afi/search":
            return web.json_response(afi_page)
        if path == "/v1/search":
            return web.json_response(peer)
        return web.json_response({"message": "Not Found"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def config(corpus: list[Path], fake: str) -> str:
    lines = []
    for root in corpus:
        lines += ["[[namespaces]]", f'name = "{root.name}"', 'backend = "ripgrep"', f'root = "{root}"', ""]
    remote = {
        "zoekt": f'urls = ["{fake}"]',
        "hound": f'url = "{fake}"',
        "livegrep": f'url = "{fake}"\nindex = "livegrep"',
        "sourcegraph": f'url = "{fake}"',
        "github": f'url = "{fake}"\nscope = "repo:acme/widget-service"',
        "gitlab": f'url = "{fake}"\nproject = "acme/widget-service"\nmax_pages = 1',
        "afi": f'url = "{fake}"',
        "gateway": f'url = "{fake}"',
    }
    for kind, keys in remote.items():
        lines += ["[[namespaces]]", f'name = "r-{kind}"', f'backend = "{kind}"', keys, ""]
    return "\n".join(lines)


def requests() -> list[tuple[str, str, Any]]:
    """(method, path, JSON body or query parameters) of every request compared."""
    out: list[tuple[str, str, Any]] = [("GET", "/v1/namespaces", None)]
    for q in QUERIES:
        out.append(("POST", "/v1/search", {"query": q, "timeout_ms": 60_000}))
        out.append(("GET", "/v1/search", {"q": q, "timeout_ms": "60000"}))
    variants: list[dict[str, Any]] = [
        {"query": "register_widget", "namespaces": ["r-*"]},
        {"query": "register_widget", "namespaces": ["r-*"], "context_lines": 2},
        {"query": "register_widget", "namespaces": ["r-*"], "paths": ["src/**"]},
        {"query": "register_widget", "namespaces": ["r-*"], "paths": ["!tests/**"]},
        {"query": "register_widget", "namespaces": ["r-*"], "languages": ["python"]},
        {"query": "Register_Widget", "namespaces": ["r-*"], "case_sensitive": False},
        {"query": "def \\w+_widget", "mode": "regex", "namespaces": ["r-*"]},
        {"query": "def __init__", "files": 5, "hit_budget": 20},
        {"query": "def __init__", "files": 7, "offset": 14},
        {"query": "import os", "paths": ["**/*.py", "!**/test*"], "files": 50},
        {"query": "ClientSession", "namespaces": ["aiohttp"], "context_lines": 3},
        {"query": "class .*Error\\(", "mode": "regex", "namespaces": ["pip", "mypy"], "files": 30},
        {"query": "todo", "case_sensitive": True},
        {"query": "TODO", "languages": ["python", "markdown"], "files": 10},
        {"query": "register_widget", "mode": "semantic", "namespaces": ["r-*"]},
        {"query": "x", "files": 0},
        {"query": "x", "namespaces": ["nope-*"]},
        {"query": "(", "mode": "regex"},
        {"query": "x", "unknown": 1},
    ]
    out += [("POST", "/v1/search", {"timeout_ms": 60_000, **v}) for v in variants]
    out += [
        ("GET", "/v1/files/aiohttp/client.py", {"start_line": "1", "end_line": "40"}),
        ("GET", "/v1/files/pip/__init__.py", None),
        ("GET", "/v1/files/nope/x.py", None),
        ("GET", "/.afi/manifest.json", None),
        ("GET", "/afi/list", {"path": "/"}),
        ("GET", "/afi/stat", {"path": "/aiohttp/client.py"}),
        ("POST", "/afi/search", {"query": "register_widget", "path": "/", "limit": 50}),
        ("POST", "/afi/search", {"query": {"regex": "def __init__\\(self"}, "path": "/pip", "limit": 20}),
    ]
    return out


def strip(value: Any) -> Any:
    """``value`` without its timing fields."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "took_ms"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


async def ask(session: aiohttp.ClientSession, port: int, method: str, path: str, data: Any) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{port}{path}"
    for _ in range(300):
        try:
            if method == "POST":
                response = await session.post(url, data=orjson.dumps(data))
            else:
                response = await session.get(url, params=data)
            async with response:
                raw = await response.read()
            try:
                return response.status, strip(orjson.loads(raw))
            except orjson.JSONDecodeError:
                return response.status, raw.decode(errors="replace")
        except aiohttp.ClientConnectorError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"no server on port {port}")


def next_pages(answer: Any, offset: int) -> list[dict[str, Any]]:
    """The next-page actions of an answer (its ``next`` args that move the offset on)."""
    if not isinstance(answer, dict):
        return []
    return [a["args"] for a in answer.get("next") or () if a.get("args", {}).get("offset", 0) > offset]


def explain(a: Any, b: Any) -> list[str]:
    """Where two answers differ: the files each alone shows, the statuses that differ, or both whole."""
    if not (isinstance(a, dict) and isinstance(b, dict) and "files" in a and "files" in b):
        return [f"A: {json.dumps(a, sort_keys=True)[:400]}", f"B: {json.dumps(b, sort_keys=True)[:400]}"]
    out = []
    files_a = {(f["namespace"], f["file_path"]) for f in a["files"]}
    files_b = {(f["namespace"], f["file_path"]) for f in b["files"]}
    out += [f"only A: {ns} {path}" for ns, path in sorted(files_a - files_b)]
    out += [f"only B: {ns} {path}" for ns, path in sorted(files_b - files_a)]
    status_a = {s["name"]: s for s in a.get("namespaces", [])}
    for name, status in sorted({s["name"]: s for s in b.get("namespaces", [])}.items()):
        if status_a.get(name) != status:
            out.append(f"namespace {name}: A {status_a.get(name)} B {status}")
    for key in sorted(set(a) | set(b)):
        if key not in ("files", "namespaces") and a.get(key) != b.get(key):
            out.append(f"{key}: A {json.dumps(a.get(key))[:300]} B {json.dumps(b.get(key))[:300]}")
    return out or ["same files and statuses; the hits differ"]


def cli_json(tree: str, cfg: Path, query: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "search", query, "--json", "--config", str(cfg), "--timeout-ms", "60000"],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=tree),
        capture_output=True,
        check=False,
    )
    return proc.returncode, strip(orjson.loads(proc.stdout)) if proc.stdout else proc.stderr.decode()


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs=2, help="the two source trees (checkouts of fedsearch) to compare")
    parser.add_argument("--dir", help="corpus folder (default: a temp folder)")
    args = parser.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fedsearch-answers-"))
    corpus = build(base)
    fake_port, *ports = free_ports(3)
    runner = web.AppRunner(fake_backends(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", fake_port).start()
    cfg = base / "compare.toml"
    cfg.write_text(config(corpus, f"http://127.0.0.1:{fake_port}"))
    trees = [str(Path(t).resolve()) for t in args.trees]
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(cfg), "--port", str(port)],
            cwd=tree,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=tree),
        )
        for tree, port in zip(trees, ports, strict=True)
    ]
    same = differ = 0
    try:
        async with aiohttp.ClientSession() as session:
            pending = requests()
            while pending:
                method, path, data = pending.pop(0)
                a, b = [await ask(session, port, method, path, data) for port in ports]
                label = f"{method} {path} {json.dumps(data)[:100] if data else ''}"
                if a == b:
                    same += 1
                    print(f"same   {a[0]} {label}")
                    if path == "/v1/search" and method == "POST" and data.get("offset", 0) < 60:
                        pending += [("POST", path, args) for args in next_pages(a[1], data.get("offset", 0))]
                else:
                    differ += 1
                    print(f"DIFF   {a[0]}/{b[0]} {label}")
                    for line in explain(a[1], b[1]):
                        print(f"  {line}")
        for q in QUERIES[:3]:
            a, b = (cli_json(tree, cfg, q) for tree in trees)
            if a == b:
                same += 1
                print(f"same   cli search {q!r} --json (exit {a[0]})")
            else:
                differ += 1
                print(f"DIFF   cli search {q!r} --json")
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=10)
        await runner.cleanup()
    print(f"{same} answers the same, {differ} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
