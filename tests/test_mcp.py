"""The MCP surface (SPEC §4): tools, schemas, answers, errors, over memory, stdio and HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Tool, jsonrpc_message_adapter

from gateway.config import config_from_env
from gateway.errors import InvalidRequest
from gateway.http.app import create_app
from gateway.http.problems import invalid_problem
from gateway.mcp.compact import compact
from gateway.mcp.tools import (
    MCP_PATH,
    NamespacesResult,
    ReadFileRequest,
    ReadFileResult,
    build_server,
    parse_endpoint,
)
from gateway.models import BackendResult, SearchQuery
from gateway.query.request import SearchRequest, parse_request
from gateway.service import READ_LINES, SearchService
from gateway.testing import MockBackend
from gateway.wire import SearchResponse
from tests.helpers import fedsearch_command, free_port, held_client, subprocess_env, wait_for_port

REPO = Path(__file__).resolve().parents[1]
LONG_LINES = 2500

FILES: dict[str, dict[str, str]] = {
    "alpha": {
        "src/widgets.py": "import os\n\n\ndef register_widget(name):\n    return name\n\n\nregister_widget('x')\n",
        "src/util.py": "# helpers\nfrom widgets import register_widget\nVALUE = 1\n",
        "README.md": "Alpha: call register_widget to add one.\n",
        "long.txt": "".join(f"line {n}\n" for n in range(1, LONG_LINES + 1)),
    },
    "beta": {
        "lib/registry.go": "package lib\n\nfunc RegisterWidget() {}\n\n// register_widget compat\n",
        "docs/guide.md": "Use register_widget() from alpha.\nNothing else.\n",
    },
}

QUERY = {"query": "register_widget"}

MCPClient = Client
HttpClient = TestClient[Any, Any]


def make_checkouts(root: Path) -> Path:
    """One ``git init`` checkout per key of FILES under ``root``."""
    for repo, contents in FILES.items():
        base = root / repo
        base.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(base)], check=True)
        for rel, text in contents.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return root


def strip_timing(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without its timing fields (top level and per namespace)."""
    out = {k: v for k, v in answer.items() if k != "took_ms"}
    out["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    return out


def problem_of(result: CallToolResult) -> dict[str, Any]:
    """The problem JSON of a tool error (asserting it is one)."""
    assert result.is_error and result.structured_content is None
    [content] = result.content
    assert content.type == "text"
    body: dict[str, Any] = json.loads(content.text)
    return body


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert content.type == "text"
    return content.text


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkouts(tmp_path_factory.mktemp("checkouts"))


@pytest.fixture
async def service(root: Path) -> AsyncIterator[SearchService]:
    svc = SearchService(config_from_env(None, str(root), env={}))
    yield svc
    await svc.aclose()


@pytest.fixture
async def client(service: SearchService) -> AsyncIterator[MCPClient]:
    async for c in held_client(build_server(service)):
        yield c


async def tools_by_name(client: MCPClient) -> dict[str, Tool]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


class TestTools:
    async def test_three_tools_with_names_without_dots(self, client: MCPClient) -> None:
        """The server offers search, read_file and namespaces, named in [a-z0-9_] only."""
        tools = await tools_by_name(client)
        assert set(tools) == {"search", "read_file", "namespaces"}
        assert all(re.fullmatch(r"[a-z0-9_]{1,64}", name) for name in tools)

    async def test_every_tool_is_read_only(self, client: MCPClient) -> None:
        """Every tool is annotated read-only, idempotent and not destructive."""
        for tool in (await tools_by_name(client)).values():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is True
            assert tool.annotations.idempotent_hint is True
            assert tool.annotations.destructive_hint is False

    async def test_search_input_schema_is_search_request(self, client: MCPClient) -> None:
        """search's input schema is SearchRequest's, unknown fields forbidden."""
        schema = (await tools_by_name(client))["search"].input_schema
        assert schema == SearchRequest.model_json_schema()
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == set(SearchRequest.model_fields)
        assert schema["required"] == ["query"]
        assert schema["properties"]["files"]["maximum"] == 200

    async def test_search_output_schema_is_search_response(self, client: MCPClient) -> None:
        """search's output schema is SearchResponse's."""
        tool = (await tools_by_name(client))["search"]
        assert tool.output_schema == SearchResponse.model_json_schema()

    async def test_read_file_and_namespaces_schemas(self, client: MCPClient) -> None:
        """read_file and namespaces publish their request and answer models, no extra arguments."""
        tools = await tools_by_name(client)
        assert tools["read_file"].input_schema == ReadFileRequest.model_json_schema()
        assert tools["read_file"].input_schema["required"] == ["namespace", "file_path"]
        assert tools["read_file"].output_schema == ReadFileResult.model_json_schema()
        assert tools["namespaces"].input_schema["additionalProperties"] is False
        assert tools["namespaces"].output_schema == NamespacesResult.model_json_schema()

    async def test_search_description_tells_how_to_use_it(self, client: MCPClient) -> None:
        """The description says results are whole files, best first, and to follow `next` verbatim."""
        description = (await tools_by_name(client))["search"].description or ""
        for phrase in ("whole files, best first", "`truncated`", "`next`", "verbatim", "`args`"):
            assert phrase in description


class TestSearch:
    async def test_structured_content_is_the_service_answer(self, client: MCPClient, service: SearchService) -> None:
        """structuredContent is what service.search answers, timing aside."""
        result = await client.call_tool("search", QUERY)
        expected = await service.search(parse_request(QUERY))
        assert not result.is_error
        assert result.structured_content["files"]
        assert strip_timing(result.structured_content) == strip_timing(expected)

    async def test_text_is_the_same_json(self, client: MCPClient) -> None:
        """The text content is the structured answer serialised with orjson, byte for byte."""
        result = await client.call_tool("search", QUERY)
        assert text_of(result) == orjson.dumps(result.structured_content).decode()

    async def test_same_answer_as_http(
        self, client: MCPClient, service: SearchService, aiohttp_client: Callable[..., Awaitable[HttpClient]]
    ) -> None:
        """MCP and POST /v1/search give the same JSON for the same request (invariant 10)."""
        http = await aiohttp_client(create_app(service.config))
        response = await http.post("/v1/search", json=QUERY)
        assert response.status == 200
        result = await client.call_tool("search", QUERY)
        assert strip_timing(result.structured_content) == strip_timing(await response.json())

    async def test_next_args_work_verbatim(self, client: MCPClient) -> None:
        """A next action's args, passed unchanged, are a valid search call for the next page."""
        first = await client.call_tool("search", {**QUERY, "files": 1})
        answer = first.structured_content
        assert answer["truncated"] and answer["next"]
        action = answer["next"][0]
        assert action["tool"] == "search"
        second = await client.call_tool(action["tool"], action["args"])
        assert not second.is_error
        assert second.structured_content["limits"]["offset"] == 1
        assert second.structured_content["files"] != answer["files"]

    async def test_paging_by_next_yields_every_file_once(self, client: MCPClient) -> None:
        """Following the next-page action from offset 0 yields every matching file exactly once, in order."""
        whole = (await client.call_tool("search", {**QUERY, "files": 200})).structured_content
        expected = [(f["namespace"], f["file_path"]) for f in whole["files"]]
        seen: list[tuple[str, str]] = []
        args: dict[str, Any] = {**QUERY, "files": 1}
        while True:
            answer = (await client.call_tool("search", args)).structured_content
            seen += [(f["namespace"], f["file_path"]) for f in answer["files"]]
            if not answer["truncated"]:
                break
            [action] = answer["next"]
            args = action["args"]
        assert len(expected) > 2
        assert seen == expected

    async def test_legacy_handshake_client(self, service: SearchService) -> None:
        """A 2025-era client (initialize handshake) gets the same answer."""
        async with Client(build_server(service), mode="legacy", raise_exceptions=True) as legacy:
            result = await legacy.call_tool("search", QUERY)
        expected = await service.search(parse_request(QUERY))
        assert strip_timing(result.structured_content) == strip_timing(expected)

    async def test_access_hides_namespaces(self, service: SearchService) -> None:
        """A namespace the caller may not see is in no part of the answer (invariant 7)."""
        server = build_server(service, access=lambda name: name == "alpha")
        async with Client(server, raise_exceptions=True) as limited:
            result = await limited.call_tool("search", QUERY)
        assert "beta" not in text_of(result)
        assert [s["name"] for s in result.structured_content["namespaces"]] == ["alpha"]


class TestBadRequests:
    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"query": "   "}, "query"),
            ({"query": "x", "bogus": 1}, "bogus"),
            ({"query": "(unclosed", "mode": "regex"}, "query"),
            ({"query": "x", "files": 0}, "files"),
            ({"query": "x", "files": 201}, "files"),
            ({"query": "x", "mode": "fuzzy"}, "mode"),
            ({}, "query"),
        ],
    )
    async def test_is_a_tool_error_naming_the_field(
        self, client: MCPClient, arguments: dict[str, Any], field: str
    ) -> None:
        """A bad request is isError with exactly the 400 problem JSON, naming the field."""
        with pytest.raises(InvalidRequest) as caught:
            parse_request(arguments)
        result = await client.call_tool("search", arguments)
        body = problem_of(result)
        assert body == invalid_problem(caught.value)
        assert body["status"] == 400 and body["field"] == field

    async def test_unknown_namespace_pattern(self, client: MCPClient) -> None:
        """A namespace pattern matching nothing visible is a 400 problem naming namespaces."""
        body = problem_of(await client.call_tool("search", {**QUERY, "namespaces": ["nope-*"]}))
        assert body["status"] == 400 and body["field"] == "namespaces"

    async def test_same_problem_as_http(
        self, client: MCPClient, service: SearchService, aiohttp_client: Callable[..., Awaitable[HttpClient]]
    ) -> None:
        """The tool error's text is byte for byte HTTP's 400 body."""
        bad = {"query": "x", "hit_budget": 0}
        http = await aiohttp_client(create_app(service.config))
        response = await http.post("/v1/search", json=bad)
        assert response.status == 400
        result = await client.call_tool("search", bad)
        assert result.is_error
        assert text_of(result).encode() == await response.read()


class TestReadFile:
    async def test_lines_are_numbered(self, client: MCPClient, service: SearchService) -> None:
        """read_file answers the service's lines, numbered in its text."""
        arguments = {"namespace": "alpha", "path": "src/widgets.py"}
        result = await client.call_tool("read_file", arguments)
        assert not result.is_error
        assert result.structured_content == await service.read_file("alpha", "src/widgets.py")
        lines = text_of(result).splitlines()
        assert lines[0] == "alpha:src/widgets.py lines 1-8 of 8"
        assert lines[4] == "4\tdef register_widget(name):"

    async def test_a_range(self, client: MCPClient) -> None:
        """start_line and end_line select a range, numbered from start_line."""
        arguments = {"namespace": "alpha", "path": "src/widgets.py", "start_line": 4, "end_line": 5}
        result = await client.call_tool("read_file", arguments)
        assert result.structured_content["lines"] == ["def register_widget(name):", "    return name"]
        assert text_of(result).splitlines()[1:] == ["4\tdef register_widget(name):", "5\t    return name"]

    async def test_a_slice_whatever_range_is_asked(self, client: MCPClient) -> None:
        """A long file read whole, or a range of 2,500 lines, comes in a slice of 400 lines saying where the
        next starts; the text ends with the read_file call that reads it, made verbatim."""
        result = await client.call_tool("read_file", {"namespace": "alpha", "file_path": "long.txt"})
        answer = result.structured_content
        assert len(answer["lines"]) == READ_LINES == 400 and answer["next_start_line"] == 401
        assert answer["total_lines"] == LONG_LINES
        assert (
            text_of(result).splitlines()[-1]
            == '(more: read_file {"namespace":"alpha","file_path":"long.txt","start_line":401})'
        )
        ranged = {"namespace": "alpha", "path": "long.txt", "start_line": 1, "end_line": LONG_LINES}
        result = await client.call_tool("read_file", ranged)
        assert (
            len(result.structured_content["lines"]) == READ_LINES
            and result.structured_content["next_start_line"] == 401
        )
        follow = json.loads(text_of(result).splitlines()[-1].removeprefix("(more: read_file ").removesuffix(")"))
        assert follow == {"namespace": "alpha", "file_path": "long.txt", "start_line": 401, "end_line": LONG_LINES}
        following = (await client.call_tool("read_file", follow)).structured_content
        assert following["lines"][0] == "line 401" and following["next_start_line"] == 801

    @pytest.mark.parametrize(
        "arguments",
        [
            {"namespace": "alpha", "path": "../beta/docs/guide.md"},
            {"namespace": "alpha", "path": "missing.py"},
            {"namespace": "nope", "path": "src/widgets.py"},
        ],
    )
    async def test_not_found(self, client: MCPClient, arguments: dict[str, Any]) -> None:
        """An unknown namespace or file, or a path leaving the root, is a 404 problem."""
        assert problem_of(await client.call_tool("read_file", arguments))["status"] == 404

    @pytest.mark.parametrize(
        ("extra", "field"),
        [
            ({"start_line": 0}, "start_line"),
            ({"start_line": 5, "end_line": 2}, "end_line"),
            ({"start_line": "two"}, "start_line"),
            ({"bogus": True}, "bogus"),
        ],
    )
    async def test_bad_arguments(self, client: MCPClient, extra: dict[str, Any], field: str) -> None:
        """Bad line numbers or unknown arguments are a 400 problem naming the field."""
        arguments = {"namespace": "alpha", "path": "src/widgets.py", **extra}
        body = problem_of(await client.call_tool("read_file", arguments))
        assert body["status"] == 400 and body["field"] == field

    async def test_unreadable_backend(self) -> None:
        """A namespace whose backend cannot read files is a 405 problem."""

        async def nothing(query: SearchQuery) -> BackendResult:
            return BackendResult(files=())

        service = SearchService.with_backends([MockBackend(nothing, name="remote")])
        async with Client(build_server(service), raise_exceptions=True) as c:
            result = await c.call_tool("read_file", {"namespace": "remote", "path": "a.py"})
        assert problem_of(result)["status"] == 405

    async def test_hidden_namespace_is_not_found(self, service: SearchService) -> None:
        """A file of a namespace the caller may not see is not found, like a missing one."""
        server = build_server(service, access=lambda name: name == "alpha")
        async with Client(server, raise_exceptions=True) as limited:
            result = await limited.call_tool("read_file", {"namespace": "beta", "path": "docs/guide.md"})
        assert problem_of(result)["status"] == 404


class TestNamespaces:
    async def test_lists_the_visible_namespaces(self, client: MCPClient, service: SearchService) -> None:
        """namespaces answers the service's list, as GET /v1/namespaces does."""
        result = await client.call_tool("namespaces", {})
        assert result.structured_content == {"namespaces": service.namespaces()}
        assert [ns["name"] for ns in result.structured_content["namespaces"]] == ["alpha", "beta"]
        assert json.loads(text_of(result)) == result.structured_content

    async def test_only_what_access_allows(self, service: SearchService) -> None:
        """A caller sees only the namespaces access lets it see."""
        server = build_server(service, access=lambda name: name == "beta")
        async with Client(server, raise_exceptions=True) as limited:
            result = await limited.call_tool("namespaces", {})
        assert [ns["name"] for ns in result.structured_content["namespaces"]] == ["beta"]


class TestEndpoint:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [("127.0.0.1:8081", ("127.0.0.1", 8081)), ("[::1]:9000", ("::1", 9000)), ("localhost:1", ("localhost", 1))],
    )
    def test_host_port(self, value: str, expected: tuple[str, int]) -> None:
        """--http HOST:PORT is split into host and port."""
        assert parse_endpoint(value) == expected

    @pytest.mark.parametrize("value", ["8080", ":8080", "host:", "host:http", "host:70000", "host:0"])
    def test_bad_host_port(self, value: str) -> None:
        """A malformed --http value is an error naming http."""
        with pytest.raises(InvalidRequest) as caught:
            parse_endpoint(value)
        assert caught.value.field == "http"


class TestStdio:
    async def test_search_over_a_subprocess(self, root: Path, service: SearchService) -> None:
        """`fedsearch mcp --root DIR` answers search over stdio like the in-process service."""
        command, *args = fedsearch_command()
        params = StdioServerParameters(
            command=command, args=[*args, "mcp", "--root", str(root)], env=subprocess_env(), cwd=str(REPO)
        )
        async with Client(params, raise_exceptions=True) as remote:
            tools = await tools_by_name(remote)
            result = await remote.call_tool("search", QUERY)
        assert tools["search"].input_schema == SearchRequest.model_json_schema()
        expected = await service.search(parse_request(QUERY))
        assert strip_timing(result.structured_content) == strip_timing(expected)

    async def test_stdout_carries_only_the_protocol(self, root: Path) -> None:
        """Every line the stdio server writes to stdout is a JSON-RPC message; logs go to stderr."""
        messages: list[dict[str, Any]] = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": QUERY}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {}}},
        ]
        proc = await asyncio.create_subprocess_exec(
            *fedsearch_command(),
            "mcp",
            "--root",
            str(root),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
            env=subprocess_env(FEDSEARCH_LOG_LEVEL="debug"),
        )
        assert proc.stdin is not None and proc.stdout is not None
        replies: dict[int, dict[str, Any]] = {}
        for message in messages:
            proc.stdin.write(orjson.dumps(message) + b"\n")
            await proc.stdin.drain()
            if "id" in message:  # wait for the answer before the next request
                while message["id"] not in replies:
                    line = await proc.stdout.readline()
                    assert line, "the server closed stdout early"
                    jsonrpc_message_adapter.validate_json(line)
                    reply = json.loads(line)
                    replies[reply.get("id")] = reply
        proc.stdin.close()
        rest, stderr = await proc.communicate()
        for line in rest.splitlines():
            jsonrpc_message_adapter.validate_json(line)
        assert proc.returncode == 0
        assert replies[2]["result"]["structuredContent"]["files"]
        assert replies[3]["result"]["isError"] is True
        assert b"mcp_tool" in stderr and b"search_done" in stderr
        assert b"mcp_stopped" in stderr  # the service was closed after stdin ended


class TestStreamableHttp:
    async def test_search_over_http(self, root: Path, service: SearchService) -> None:
        """`fedsearch mcp --http 127.0.0.1:PORT` answers search at /mcp and stops cleanly on SIGTERM."""
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            *fedsearch_command(),
            "mcp",
            "--root",
            str(root),
            "--http",
            f"127.0.0.1:{port}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
            env=subprocess_env(),
        )
        try:
            await wait_for_port(proc, port)
            async with Client(f"http://127.0.0.1:{port}{MCP_PATH}", raise_exceptions=True) as remote:
                result = await remote.call_tool("search", QUERY)
                bad = await remote.call_tool("search", {"query": "x", "files": 0})
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            stdout, stderr = await proc.communicate()
        expected = await service.search(parse_request(QUERY))
        assert strip_timing(result.structured_content) == strip_timing(expected)
        assert problem_of(bad)["field"] == "files"
        assert proc.returncode == 0, stderr.decode(errors="replace")
        assert b"mcp_stopped" in stderr  # the service was closed after SIGTERM
        assert stdout == b""

    async def test_malformed_endpoint_exits_2(self, root: Path) -> None:
        """`fedsearch mcp --http` with a malformed HOST:PORT exits 2 naming http, serving nothing."""
        proc = await asyncio.create_subprocess_exec(
            *fedsearch_command(),
            "mcp",
            "--root",
            str(root),
            "--http",
            "8080",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO,
            env=subprocess_env(),
        )
        stdout, stderr = await proc.communicate()
        assert proc.returncode == 2
        assert b"invalid http" in stderr and stdout == b""


class TestCompactText:
    """``fedsearch mcp --text compact``: the text content is the page as compact text; the
    structured content is still the whole answer."""

    async def test_compact_text_holds_every_file_and_hit_and_the_same_structured_answer(
        self, service: SearchService
    ) -> None:
        async for plain in held_client(build_server(service)):
            as_json = await plain.call_tool("search", {**QUERY, "hit_lines": 1})
        async for terse in held_client(build_server(service, text="compact")):
            as_compact = await terse.call_tool("search", {**QUERY, "hit_lines": 1})
        assert as_compact.structured_content is not None and as_json.structured_content is not None
        assert strip_timing(as_compact.structured_content) == strip_timing(as_json.structured_content)
        answer = as_compact.structured_content
        text = text_of(as_compact)
        assert text != text_of(as_json) and not text.startswith("{")
        for group in answer["files"]:
            assert f"{group['namespace']}/{group['file_path']}" in text
            for hit in group["hits"]:
                for line in hit.get("lines") or ([hit] if hit["kind"] == "line" else []):
                    assert f"{line.get('line', hit['start_line'])}: {line['text']}" in text
        assert f"{answer['file_count']} files matched" in text
        assert len(text) < len(text_of(as_json)) / 2

    def test_the_files_own_lines_come_under_its_heading(self) -> None:
        """The file's own hit has no header line: its lines, and how many it left out, under the file's."""
        own = {
            "kind": "file",
            "start_line": 1,
            "end_line": 40,
            "line_count": 3,
            "lines": [{"line": 2, "text": "import e"}],
        }
        answer = {
            "files": [{"namespace": "sa", "file_path": "__init__.py", "hits": [own]}],
            "file_count": 1,
            "limits": {"offset": 0},
            "namespaces": [{"name": "sa", "status": "ok"}],
        }
        assert compact(answer).splitlines()[:3] == [
            "sa/__init__.py",
            "  2: import e",
            "  … 2 more matched lines: read_file sa __init__.py 1-40",
        ]

    def test_elided_lines_copies_and_next_are_said(self) -> None:
        hit = {
            "qualified_name": "Flask.url_for",
            "kind": "method",
            "start_line": 10,
            "end_line": 90,
            "line_count": 5,
            "lines": [{"line": 12, "column": 5, "text": "url_for()"}],
        }
        answer = {
            "files": [
                {
                    "namespace": "flask",
                    "file_path": "src/app.py",
                    "hits": [{"kind": "file", "start_line": 1, "end_line": 1, "line_count": 0}, hit],
                    "duplicates": [{"namespace": "fork", "file_path": "src/app.py"}],
                }
            ],
            "file_count": 3,
            "limits": {"offset": 0},
            "namespaces": [{"name": "flask", "status": "ok"}, {"name": "slow", "status": "timeout"}],
            "note": "a note",
            "next": [{"reason": "more files", "tool": "search", "args": {"query": "url_for", "offset": 1}}],
        }
        assert compact(answer).splitlines() == [
            "flask/src/app.py  (also in: fork/src/app.py)",
            "  Flask.url_for  method  10-90",
            "    12: url_for()",
            "    … 4 more matched lines: read_file flask src/app.py 10-90",
            "3 files matched; showing 1-1; not complete: slow (timeout)",
            "a note",
            'next (more files): search {"query":"url_for","offset":1}',
        ]

    def test_the_cli_offers_only_the_two_forms(self) -> None:
        done = subprocess.run(
            [*fedsearch_command(), "mcp", "--text", "yaml"], capture_output=True, text=True, env=subprocess_env()
        )
        assert done.returncode == 2 and "--text" in done.stderr and "compact" in done.stderr
