"""answer_size: what an answer costs its reader, in characters and files shown, on each surface.

    .venv/bin/python bench/answer_size.py [--corpus DIR] [--tree DIR]

``fedsearch serve`` over the real checkouts in ``--corpus`` (default ``$FEDSEARCH_CORPUS_REAL`` or
``/work/corpus-real``; skipped, saying so, when absent), its declaration index built first. For each
case (issue 36): the API's answer at its defaults (``POST /v1/search``: the JSON's characters, files
shown of ``file_count``), the MCP ``search`` result at its defaults (structuredContent and the text
content, which is the same JSON: twice the API's; with ``fedsearch mcp --text compact``, the JSON
and the compact text), the web page's request (the fields its script
sends) and the human CLI (``fedsearch search --server``: characters printed, files shown). ``--tree``
serves another source tree (a baseline built with ``git worktree add``). Targets: the one-file case
<= 0.5x the 194,828 B it cost before declarations; the web page and the CLI show min(files, 20)
files; no MCP result over 80,000 characters.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.overhead import free_ports
from bench.overhead_wrk import serve_from
from gateway.mcp.compact import compact

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
#: (label, the request's own fields): the cases of issue 36.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("self in orm/session.py", {"query": "self", "paths": ["lib/sqlalchemy/orm/session.py"]}),
    ("import", {"query": "import"}),
    ("self", {"query": "self"}),
    ("e", {"query": "e"}),
    ("def get_", {"query": "def get_"}),
    ("Blueprint", {"query": "Blueprint"}),
]
#: What the web page's script sends besides the query (gateway/http/static/fedsearch.js PAGE_FIELDS).
_PAGE_FIELDS = re.compile(r"const PAGE_FIELDS = (\{[^}]*\});")


def post(url: str, body: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    request = urllib.request.Request(
        url + "/v1/search", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        data: dict[str, Any] = json.loads(answer.read())
    return data


def chars(answer: dict[str, Any]) -> int:
    """The characters of an answer's JSON as the server writes it (compact)."""
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


def page_fields(tree: Path) -> dict[str, Any]:
    """The fields the web page adds to every search (none where its script names none)."""
    script = (tree / "gateway/http/static/fedsearch.js").read_text()
    found = _PAGE_FIELDS.search(script)
    return json.loads(re.sub(r"(\w+):", r'"\1":', found.group(1))) if found else {}


def cli(tree: Path, url: str, fields: dict[str, Any]) -> tuple[int, int]:
    """(characters printed, files shown) by the human CLI asking the server."""
    argv = [PY, "-m", "gateway.cli", "search", fields["query"], "--server", url, "--color", "never"]
    for glob in fields.get("paths", []):
        argv += ["-g", glob]
    done = subprocess.run(
        argv, cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True, check=False
    )
    blocks = [block.split("\n", 1)[0] for block in done.stdout.split("\n\n")]  # rg's headings: a file a block
    shown = sum(1 for first in blocks if first and not re.search(r"\s", first) and ":" not in first)
    return len(done.stdout), shown


def wait_ready(url: str, deadline_s: float = 600.0) -> None:
    """Until the server answers with declaration hits and every content index is ready."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url + "/v1/namespaces", timeout=5) as answer:
                spaces = json.loads(answer.read())["namespaces"]
            ready = all((n.get("index") or {}).get("state") in ("ready", "small", None) for n in spaces)
            hits = [h for f in post(url, {"query": "def get_", "files": 50})["files"] for h in f["hits"]]
            if ready and sum(h["kind"] in ("function", "method") for h in hits) > 10:
                return
        except OSError:
            pass
        time.sleep(2.0)
    print(f"answer_size: the indexes were not ready in {deadline_s:.0f} s; figures taken as they are")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_REAL", "/work/corpus-real"))
    parser.add_argument("--tree", default=str(ROOT))
    args = parser.parse_args()
    corpus, tree = Path(args.corpus), Path(args.tree).resolve()
    if not corpus.is_dir():
        print(f"answer_size: skipped: no corpus at {corpus} (set FEDSEARCH_CORPUS_REAL to a folder of checkouts)")
        return 0
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    server = serve_from(tree, "--root", str(corpus), "--port", str(port))
    try:
        wait_ready(url)
        page = page_fields(tree)
        print(f"answer sizes over {corpus} ({tree.name}); characters of the JSON, files shown / file_count")
        print(f"{'case':24} {'API':>18} {'MCP result':>11} {'MCP compact':>12} {'web page':>18} {'CLI':>16}")
        for label, fields in CASES:
            api = post(url, fields)
            api_chars = chars(api)
            web = post(url, {**page, **fields})
            web_chars = chars(web)
            cli_chars, cli_files = cli(tree, url, fields)
            print(
                f"{label:24} {api_chars:8,} {len(api['files']):3}/{api['file_count']:<5}"
                f" {2 * api_chars:11,} {api_chars + len(compact(api)):12,}"
                f" {web_chars:8,} {len(web['files']):3}/{web['file_count']:<5}"
                f" {cli_chars:8,} {cli_files:3} files"
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
