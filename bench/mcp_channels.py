"""mcp_channels: what each MCP channel of an answer costs an agent, in characters (issue 50).

    .venv/bin/python bench/mcp_channels.py [--corpus DIR] [--tree DIR] [--no-index]

``fedsearch mcp --root CORPUS`` over stdio, asked through the MCP SDK's client as an agent asks it,
at the defaults. Clients hand their model ONE channel (Claude Code the structured content, kimi-code
and hermes-agent the text), so each is measured alone: the text content, the structured content as
compact JSON, and the text of ``fedsearch mcp --text compact``. Also the whole ``tools/list`` answer
and each tool's description and schemas. ``--corpus`` (default ``$FEDSEARCH_CORPUS_MCP`` or
``/work/corpus-50``: checkouts of flask, click, werkzeug, sqlalchemy, fastapi; skipped, saying so,
when absent); its indexes are built first (``fedsearch index``) unless ``--no-index``. ``--tree``
runs another source tree (a baseline from ``git archive``). Target: no channel over 44,000 (1.1 x
``char_budget``); ``e`` at most about 8,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
LIMIT = 44_000
SESSION = "lib/sqlalchemy/orm/session.py"
COMPILER = "lib/sqlalchemy/sql/compiler.py"
#: (label, tool, arguments): the cases of issue 50. read_file is given ``path``, which every tree takes.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    *((q, "search", {"query": q}) for q in ("self", "e", "a", "_", "(", "import", "def get_", "Blueprint")),
    ("self in orm/session.py", "search", {"query": "self", "paths": [SESSION]}),
    ("semantic question", "search", {"query": "commit the transaction of a session", "mode": "semantic"}),
    ("read_file compiler.py", "read_file", {"namespace": "sqlalchemy", "path": COMPILER}),
    ("read_file 1-2000", "read_file", {"namespace": "sqlalchemy", "path": COMPILER, "start_line": 1, "end_line": 2000}),
]


def compact_json(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def server(tree: Path, corpus: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "FEDSEARCH_CONFIG"}
    env.update(PYTHONPATH=str(tree), FEDSEARCH_LOG_LEVEL="error")
    return StdioServerParameters(
        command=PY, args=["-m", "gateway.cli", "mcp", "--root", str(corpus), *extra], env=env, cwd=str(tree)
    )


async def measure(tree: Path, corpus: Path, text: str) -> tuple[dict[str, tuple[int, int, str]], dict[str, int]]:
    """Per case (text chars, structured chars, a word on the answer); and the tools/list figures."""
    extra = ("--text", "compact") if text == "compact" else ()
    out: dict[str, tuple[int, int, str]] = {}
    async with Client(server(tree, corpus, *extra)) as client:
        listed = await client.list_tools()
        tools = {"tools/list": len(listed.model_dump_json(by_alias=True, exclude_none=True))}
        for tool in listed.tools:
            tools[f"{tool.name} description"] = len(tool.description or "")
            tools[f"{tool.name} input schema"] = compact_json(tool.input_schema)
            tools[f"{tool.name} output schema"] = compact_json(tool.output_schema or {})
        for label, name, args in CASES:
            await client.call_tool(name, args)  # warm: the first call of a query pays its scan
            result = await client.call_tool(name, args)
            chars = sum(len(c.text) for c in result.content if c.type == "text")
            data = result.structured_content or {}
            if result.is_error:
                word = "error"
            elif name == "search":
                hits = sum(g["hit_count"] for g in data.get("files", ()))
                word = f"{len(data.get('files', ()))} files {hits} hits of {data.get('file_count')}"
                word += f", hit_lines {data.get('limits', {}).get('hit_lines')}"
            else:
                word = f"lines {data.get('start_line')}-{data.get('end_line')} of {data.get('total_lines')}"
            out[label] = (chars, compact_json(data), word)
    return out, tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.environ.get("FEDSEARCH_CORPUS_MCP", "/work/corpus-50"))
    parser.add_argument("--tree", default=str(ROOT))
    parser.add_argument("--no-index", action="store_true", help="do not build the indexes first")
    args = parser.parse_args()
    corpus, tree = Path(args.corpus), Path(args.tree).resolve()
    if not corpus.is_dir():
        print(f"mcp_channels: skipped: no corpus at {corpus} (set FEDSEARCH_CORPUS_MCP to a folder of checkouts)")
        return 0
    if not args.no_index:
        started = time.monotonic()
        env = dict(os.environ, PYTHONPATH=str(tree), FEDSEARCH_LOG_LEVEL="error")
        subprocess.run(
            [PY, "-m", "gateway.cli", "index", "--root", str(corpus)],
            cwd=tree,
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        print(f"indexes built in {time.monotonic() - started:.0f} s")
    as_json, tools = asyncio.run(measure(tree, corpus, "json"))
    as_compact, _ = asyncio.run(measure(tree, corpus, "compact"))
    print(f"MCP channels over {corpus} ({tree.name}), characters; over {LIMIT:,} marked *")
    print(f"{'case':24} {'text':>8} {'structured':>11} {'compact':>8}  answer")
    worst = 0
    for label, _, _ in CASES:
        text, structured, word = as_json[label]
        small = as_compact[label][0]
        worst = max(worst, text, structured, small)
        marks = ["*" if n > LIMIT else " " for n in (text, structured, small)]
        print(f"{label:24} {text:7,}{marks[0]} {structured:10,}{marks[1]} {small:7,}{marks[2]}  {word}")
    print(f"largest channel: {worst:,} (target <= {LIMIT:,})")
    for name, size in tools.items():
        print(f"{name:26} {size:7,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
