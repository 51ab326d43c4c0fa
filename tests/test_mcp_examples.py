"""Every example in the MCP tools' descriptions works verbatim, made through the MCP client (issue 50)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gateway.mcp.tools import READ_FILE_DESCRIPTION, SEARCH_DESCRIPTION
from tests.helpers import mcp_over

#: A call as the descriptions write it: the tool's name, a space, its arguments as JSON, alone on a line.
_CALL = re.compile(r"^(search|read_file) (\{.*\})$", re.MULTILINE)
#: A checkout the examples' names hold: ``flask`` with src/flask/app.py, ``url_for`` at line 1003.
_APP = (
    "".join(f"x{n} = {n}\n" for n in range(1, 1003))
    + "def url_for(endpoint):\n"
    + '    """Build a URL for the endpoint."""\n'
    + "".join("    endpoint = endpoint.strip()\n" for _ in range(125))
    + "    return endpoint\n"
    + "".join(f"def get_{n}():\n    return url_for('{n}')\n" for n in range(60))
)
_UPLOADS = 'def secure_filename(name):\n    """Sanitize an uploaded file name."""\n    return name.strip("/")\n'


def examples() -> list[tuple[str, dict[str, Any]]]:
    """Every call written in the descriptions, in order."""
    text = SEARCH_DESCRIPTION + "\n" + READ_FILE_DESCRIPTION
    return [(m.group(1), json.loads(m.group(2))) for m in _CALL.finditer(text)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("examples")
    base = root / "flask"
    (base / "src" / "flask").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(base)], check=True)
    (base / "src" / "flask" / "app.py").write_text(_APP, encoding="utf-8")
    (base / "src" / "flask" / "uploads.py").write_text(_UPLOADS, encoding="utf-8")
    for n in range(30):  # more files than a page holds: the next page exists
        (base / "src" / "flask" / f"use_{n}.py").write_text(f"def use_{n}():\n    def url_for(): ...\n")
    return root


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async for c in mcp_over(root):
        yield c


class TestExamples:
    def test_the_descriptions_teach_by_five_examples_and_stay_short(self) -> None:
        """Three searches, the next page, and two reads are written, and each description is under 1,500 characters."""
        assert [tool for tool, _ in examples()] == ["search"] * 4 + ["read_file"] * 2
        assert len(SEARCH_DESCRIPTION) < 1500 and len(READ_FILE_DESCRIPTION) < 1500

    @pytest.mark.parametrize("index", range(6))
    async def test_each_example_works_verbatim(self, client: Client, index: int) -> None:
        """The call, made exactly as written, is answered (no tool error) with what it promises."""
        tool, args = examples()[index]
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content
        answer = result.structured_content
        assert answer is not None
        if tool == "read_file":
            assert answer["start_line"] == args["start_line"] and answer["lines"]
            assert answer["end_line"] == args.get("end_line", answer["start_line"] + 399)
        elif "mode" not in args:  # (by meaning: answered once the intent index is built; not waited for here)
            assert answer["files"], args

    async def test_the_first_search_finds_the_declaration_the_read_example_opens(self, client: Client) -> None:
        """`def url_for` in flask finds `url_for` at lines 1003-1130, the span the read_file example reads."""
        result = await client.call_tool("search", examples()[0][1])
        assert result.structured_content is not None
        spans = {
            (group["file_path"], hit["start_line"])
            for group in result.structured_content["files"]
            for hit in group["hits"]
            for line in hit.get("lines", ())
            if line["text"].startswith("def url_for")
        }
        assert ("src/flask/app.py", 1) in spans or ("src/flask/app.py", 1003) in spans
