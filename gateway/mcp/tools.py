"""The MCP surface (SPEC §4): ``search``, ``read_file`` and ``namespaces`` over the ``mcp`` SDK.

Thin, like the other surfaces: each tool validates its raw arguments the way HTTP
does (``search`` through :func:`gateway.wire.parse_request`, so an error names the
field exactly as a 400 does), calls :class:`SearchService`, and answers with the
JSON the service built, serialised once with orjson. A bad call is a tool error
(``isError``) whose text is the problem JSON HTTP would return.

The tools are registered as ready-made :class:`Tool` objects rather than from a
function signature: the SDK would otherwise derive the input schema from the
parameters and validate (and coerce) the arguments itself, before
``parse_request`` ever saw them. Here the published input schema is exactly
``SearchRequest``'s (``additionalProperties: false``) and the arguments reach the
tool untouched.

``run_mcp`` serves stdio (stdout carries only the protocol; logs go to stderr) or
streamable HTTP on ``HOST:PORT`` at ``/mcp``, and owns the service: it is opened
before serving and closed after, also when SIGTERM/SIGINT stops the HTTP server. With
``[tracing]`` (or ``OTEL_*``) it records spans as ``fedsearch serve`` does, a tool call being
the request's span (``tools/call search``): see :mod:`gateway.tracing`.

Access. Over HTTP with ``[[tokens]]`` configured, :class:`BearerAuth` checks every
request's ``Authorization: Bearer`` token exactly as the HTTP gateway does (the same
uniform 401 problem) and puts that token's namespace predicate in the ASGI scope's
``state``; each tool call reads it from its request (:func:`caller_access`), and a
call without one sees nothing. Over stdio the server runs as the local user and sees
everything, unless ``--token`` (a token, or ``env:VAR`` naming the variable holding
it) picks a configured token's view (:func:`stdio_access`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from gateway import tracing
from gateway.config import Config
from gateway.errors import GatewayError, InvalidRequest, NotFound, Overloaded, Unsupported
from gateway.http.auth import (
    ACCESS_STATE,
    PRINCIPAL_STATE,
    STDIO,
    BearerAuth,
    TokenTable,
    nobody,
    stdio_access,
    stdio_principal,
    warn_if_open,
)
from gateway.http.problems import problem_for
from gateway.log import configure, get_logger
from gateway.mcp.compact import compact
from gateway.query.request import SearchRequest, parse_request, problem_fields
from gateway.resilience.callers import CLIENT_HEADER, Principal, calling, identify
from gateway.service import READ_LINES, Access, SearchService
from gateway.serving import settle_heap
from gateway.tracing.config import tracing_settings
from gateway.wire import SearchResponse

__all__ = [
    "MCP_PATH",
    "BearerAuth",
    "NamespacesResult",
    "ReadFileRequest",
    "ReadFileResult",
    "build_server",
    "caller_access",
    "caller_principal",
    "http_app",
    "numbered",
    "parse_endpoint",
    "run_mcp",
    "stdio_access",
]

MCP_PATH = "/mcp"
SERVER_NAME = "fedsearch"

INSTRUCTIONS = (
    "Federated code search over many repositories (namespaces). Start with `search`; when an answer "
    "is `truncated`, make the calls in its `next` list verbatim. Open what a hit names with "
    "`read_file` (its namespace, file_path, start_line, end_line); list namespaces with `namespaces`."
)

#: Each tool teaches by example (issue 50): every call written ``tool {json}`` on a line of its own
#: here works verbatim (tests/test_mcp_examples.py makes each one through the MCP client).
SEARCH_DESCRIPTION = "\n".join(
    [
        "Search code in every namespace (repository) at once. Answers fit your context (about `char_budget` "
        "40,000 characters): whole files, best first, each with its hits.",
        "",
        "A hit is the declaration a match lies in (kind, qualified_name, start_line-end_line) with its first "
        "`lines` (`line_count` says how many it has), or the file's own hit (kind `file`): its matched lines "
        "outside every declaration.",
        "",
        "Examples:",
        "1. Where a name is defined, in one namespace (exact text is the default mode):",
        'search {"query": "def url_for", "namespaces": ["flask"]}',
        "2. Filters inside the query (repo:, file:, -file:, lang:, sym:, case:yes) and /RE/ for a regex:",
        'search {"query": "lang:python -file:tests/** /def get_\\\\w+\\\\(/"}',
        "3. By meaning, when you know what the code does but not its words:",
        'search {"query": "sanitize an uploaded file name", "mode": "semantic"}',
        "",
        "When `truncated` is true, `note` says what was left out and `next` lists calls that get it: make "
        "one verbatim, e.g. the next page:",
        'search {"query": "def url_for", "namespaces": ["flask"], "offset": 20}',
        "(copy `args` unchanged: it carries the cursor that keeps the order). `namespaces` in the answer "
        "gives each namespace's status.",
    ]
)

READ_FILE_DESCRIPTION = "\n".join(
    [
        "Read lines of one file, numbered. Pass a search hit's `namespace` and `file_path`, and its "
        "`start_line`/`end_line` to read the declaration it names, all its matched lines included:",
        'read_file {"namespace": "flask", "file_path": "src/flask/app.py", "start_line": 1003, "end_line": 1130}',
        "One call gives at most 400 lines or about 40,000 characters, whatever range is asked; "
        "`next_start_line` says where the next slice starts, e.g.:",
        'read_file {"namespace": "flask", "file_path": "src/flask/app.py", "start_line": 401}',
        "`total_lines` says how long the file is. (`path` is accepted for `file_path`.)",
    ]
)

NAMESPACES_DESCRIPTION = "List the namespaces you can search, with their backend kind, health and capabilities."

#: Every tool only reads: safe to call again, never destructive, over a closed set of namespaces.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)

log = get_logger("fedsearch.mcp")

_STRICT = ConfigDict(frozen=True, extra="forbid")


class ReadFileRequest(BaseModel):
    """The ``read_file`` tool's arguments: named as a search hit names them (``path`` too, as before)."""

    model_config = _STRICT
    namespace: str = Field(min_length=1, description="A search hit's `namespace`.")
    file_path: str = Field(
        min_length=1, validation_alias=AliasChoices("file_path", "path"), description="A search hit's `file_path`."
    )
    start_line: int | None = Field(default=None, ge=1, description="First line to read (default 1).")
    end_line: int | None = Field(
        default=None, ge=1, description=f"Last line to read (one call reads at most {READ_LINES} of them)."
    )


class ReadFileResult(BaseModel):
    """What ``read_file`` answers (``SearchService.read_file``)."""

    model_config = _STRICT
    namespace: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    lines: list[str]
    next_start_line: int | None = Field(
        default=None, description="Where the next slice starts, when lines of the range asked are left."
    )


class NamespacesRequest(BaseModel):
    """The ``namespaces`` tool takes no arguments."""

    model_config = _STRICT


class NamespaceInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")
    name: str
    backend: str
    health: str
    capabilities: dict[str, Any]


class NamespacesResult(BaseModel):
    """What ``namespaces`` answers: the same body as ``GET /v1/namespaces``."""

    model_config = ConfigDict(frozen=True, extra="allow")
    namespaces: list[NamespaceInfo]


# --- tool plumbing ---------------------------------------------------------------------


class _NoParameters(ArgModelBase):
    pass


class _RawArguments(FuncMetadata):
    """Hands a tool the caller's arguments untouched; the tool validates them itself."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments_to_validate)}


Handler = Callable[[dict[str, Any], Access, Context | None], Awaitable[CallToolResult]]
ToolFn = Callable[..., Awaitable[CallToolResult]]


def _text(data: Any) -> TextContent:
    return TextContent(type="text", text=orjson.dumps(data).decode())


def _answer(data: dict[str, Any], text: str | None = None) -> CallToolResult:
    """A result carrying ``data`` as structured content and (by default) the same JSON as text."""
    content = TextContent(type="text", text=text) if text is not None else _text(data)
    return CallToolResult(content=[content], structured_content=data)


def _failure(body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[_text(body)], is_error=True)


#: A tool call's span attributes (the OpenTelemetry conventions for MCP), beside ``gen_ai.tool.name``.
_TOOL_CALL = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool"}


def _guarded(name: str, handler: Handler, access: Access, principal: Principal) -> ToolFn:
    """``handler`` with the caller's access, served for its principal, errors turned into
    problem-JSON tool errors, one log event; with tracing on, in a span of its own (the caller's
    trace continued from the call's ``_meta.traceparent``)."""

    async def call(arguments: dict[str, Any], ctx: Context | None = None) -> CallToolResult:
        if not tracing.on():
            return await run(arguments, ctx)
        with tracing.request(f"tools/call {name}", {**_TOOL_CALL, "gen_ai.tool.name": name}) as span:
            result = await run(arguments, ctx)
            if span is not None and result.is_error:
                span.set_attribute("error.type", "tool_error")
            return result

    async def run(arguments: dict[str, Any], ctx: Context | None) -> CallToolResult:
        started = time.monotonic()
        try:
            with calling(caller_principal(ctx, principal)):
                result = await handler(arguments, caller_access(ctx, access), ctx)
        except GatewayError as exc:
            if not isinstance(exc, InvalidRequest | NotFound | Unsupported | Overloaded):
                log.warning("mcp_tool_failed", tool=name, error=type(exc).__name__)
            result = _failure(problem_for(exc))
        except Exception as exc:  # never a bare crash: the same 500 problem as HTTP
            log.error("mcp_tool_crashed", tool=name, error=type(exc).__name__, exc_info=exc)
            result = _failure(problem_for(exc))
        log.info(
            "mcp_tool",
            tool=name,
            error=result.is_error,
            took_ms=round((time.monotonic() - started) * 1000),
        )
        return result

    return call


def _tool(
    name: str,
    title: str,
    description: str,
    handler: Handler,
    input_model: type[BaseModel],
    output_model: type[BaseModel],
    access: Access,
    principal: Principal,
) -> Tool:
    """A read-only tool whose schemas are exactly the given models' JSON schemas."""
    return Tool(
        fn=_guarded(name, handler, access, principal),
        name=name,
        title=title,
        description=description,
        parameters=input_model.model_json_schema(),
        fn_metadata=_RawArguments(
            arg_model=_NoParameters,
            output_schema=output_model.model_json_schema(),
            output_model=output_model,
        ),
        is_async=True,
        context_kwarg="ctx",
        annotations=READ_ONLY,
    )


def _validate(model: type[BaseModel], arguments: dict[str, Any]) -> Any:
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        field, message = problem_fields(exc)
        raise InvalidRequest(field, message) from None


def numbered(result: dict[str, Any], asked_end: int | None = None) -> str:
    """``read_file``'s text: a header, each line prefixed by its number, and the call that reads the
    next slice when the range asked was cut."""
    start, end, total = result["start_line"], result["end_line"], result["total_lines"]
    head = f"{result['namespace']}:{result['path']} lines {start}-{end} of {total}"
    width = len(str(max(end, 1)))
    body = [f"{start + i:>{width}}\t{line}" for i, line in enumerate(result["lines"])]
    tail = []
    if "next_start_line" in result:
        call: dict[str, Any] = {
            "namespace": result["namespace"],
            "file_path": result["path"],
            "start_line": result["next_start_line"],
        }
        if asked_end is not None:
            call["end_line"] = asked_end
        tail = [f"(more: read_file {orjson.dumps(call).decode()})"]
    return "\n".join([head, *body, *tail]) + "\n"


# --- the server ------------------------------------------------------------------------


def build_server(
    service: SearchService, access: Access = None, text: str = "json", principal: Principal = STDIO
) -> MCPServer:
    """The MCP server over ``service``, showing only what ``access`` lets the caller see
    (unless :class:`BearerAuth` gave the request its own access). ``text`` is the form of a
    ``search`` result's text content: ``json`` (SPEC §4) or ``compact`` (:mod:`gateway.mcp.compact`).
    ``principal``: who a call without an HTTP request (stdio) is to admission (:func:`caller_principal`)."""
    as_text = compact if text == "compact" else None

    async def search(arguments: dict[str, Any], access: Access, ctx: Context | None) -> CallToolResult:
        if ctx is None:
            answer = await service.search_json(arguments, access)
            return _answer(answer, as_text(answer) if as_text else None)
        async with await service.open_stream(parse_request(arguments), access) as stream:
            # notifications/progress as namespaces settle; a no-op unless the client asked for
            # progress (a progressToken, or a callback of its own on newer protocol versions)
            async for outcome in stream:
                message = f"{outcome.namespace}: {outcome.status}"
                await ctx.report_progress(len(stream.settled), stream.total, message)
        answer = stream.result()
        return _answer(answer, as_text(answer) if as_text else None)

    async def read_file(arguments: dict[str, Any], access: Access, ctx: Context | None) -> CallToolResult:
        req: ReadFileRequest = _validate(ReadFileRequest, arguments)
        result = await service.read_file(req.namespace, req.file_path, req.start_line, req.end_line, access)
        return _answer(result, text=numbered(result, req.end_line))

    async def namespaces(arguments: dict[str, Any], access: Access, ctx: Context | None) -> CallToolResult:
        _validate(NamespacesRequest, arguments)
        return _answer({"namespaces": await service.list_namespaces(access)})

    tools = [
        _tool("search", "Search code", SEARCH_DESCRIPTION, search, SearchRequest, SearchResponse, access, principal),
        _tool(
            "read_file",
            "Read a file",
            READ_FILE_DESCRIPTION,
            read_file,
            ReadFileRequest,
            ReadFileResult,
            access,
            principal,
        ),
        _tool(
            "namespaces",
            "List namespaces",
            NAMESPACES_DESCRIPTION,
            namespaces,
            NamespacesRequest,
            NamespacesResult,
            access,
            principal,
        ),
    ]
    return MCPServer(name=SERVER_NAME, title="fedsearch", instructions=INSTRUCTIONS, tools=tools)


# --- access ------------------------------------------------------------------------------


def _scope(ctx: Context | None) -> dict[str, Any] | None:
    """The ASGI scope of this call's HTTP request (None over stdio)."""
    request = None
    if ctx is not None:
        with contextlib.suppress(ValueError, AttributeError):
            request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, dict) else None


def caller_access(ctx: Context | None, default: Access) -> Access:
    """The access :class:`BearerAuth` put in this call's HTTP request, else ``default``."""
    scope = _scope(ctx)
    state = scope.get("state") if scope is not None else None
    if isinstance(state, dict) and ACCESS_STATE in state:
        found: Access = state[ACCESS_STATE]
        return found
    return default


def caller_principal(ctx: Context | None, default: Principal) -> Principal:
    """Who this call's caller is (:mod:`gateway.resilience.callers`): what :class:`BearerAuth` found,
    else its MCP session, its client id, its address over HTTP; ``default`` over stdio."""
    scope = _scope(ctx)
    if scope is None:
        return default
    state = scope.get("state")
    if isinstance(state, dict) and isinstance(found := state.get(PRINCIPAL_STATE), Principal):
        return found
    headers = {n.lower(): v.decode("latin-1") for n, v in scope.get("headers", ())}
    client = scope.get("client")
    return identify(
        None,
        session=headers.get(b"mcp-session-id"),
        client=headers.get(CLIENT_HEADER.lower().encode()),
        address=client[0] if client else None,
    )


# --- running it ------------------------------------------------------------------------


def parse_endpoint(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port), or InvalidRequest naming ``http``."""
    host, sep, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidRequest("http", f"expected HOST:PORT, got {value!r}")
    return host, int(port_text)


class _Uvicorn(uvicorn.Server):
    """uvicorn that stops gracefully on SIGINT/SIGTERM and then returns (no re-raised signal),
    so the service is closed after it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self._stop)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _stop(self) -> None:
        self.should_exit = True


def http_app(server: MCPServer, host: str, table: TokenTable) -> Any:
    """The ASGI app serving ``server`` at ``/mcp``, behind :class:`BearerAuth` when tokens exist."""
    app: Any = server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, json_response=True, stateless_http=True
    )
    return BearerAuth(app, table) if table else app


async def _serve_http(server: MCPServer, host: str, port: int, table: TokenTable) -> None:
    app = http_app(server, host, table)
    # log_config=None: uvicorn's loggers propagate to the stderr handler gateway.log set up.
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    log.info("mcp_http_serving", host=host, port=port, path=MCP_PATH)
    await _Uvicorn(config).serve()


async def _serve(
    config: Config, endpoint: tuple[str, int] | None, access: Access, text: str, principal: Principal = STDIO
) -> None:
    traced = tracing_settings(config.tracing, os.environ)
    if traced is not None:  # the SDK is imported only now, as `fedsearch serve` does
        from gateway.tracing.setup import start

        start(traced)
    service = SearchService(config)
    service.start_serving()  # a long-lived server: the declaration index builds beside it, rg starts ahead
    table = TokenTable(config.tokens)
    settle_heap()
    try:
        await _serve_with(service, table, endpoint, access, text, principal)
    finally:
        if traced is not None:
            from gateway.tracing.setup import stop

            await stop()  # after the service: the spans of its last calls leave too


async def _serve_with(
    service: SearchService,
    table: TokenTable,
    endpoint: tuple[str, int] | None,
    access: Access,
    text: str = "json",
    principal: Principal = STDIO,
) -> None:
    try:
        # over HTTP with tokens, a request without BearerAuth's access sees nothing (fail closed)
        server = build_server(service, nobody if endpoint is not None and table else access, text, principal)
        log.info("mcp_ready", namespaces=len(service.visible(access)), transport="http" if endpoint else "stdio")
        if endpoint is None:
            await server.run_stdio_async()
        else:
            await _serve_http(server, *endpoint, table)
    finally:
        await service.aclose()
        log.info("mcp_stopped")


def run_mcp(config: Config, http: str | None = None, token: str | None = None, text: str = "json") -> None:
    """Serve MCP: over stdio when ``http`` is None, else streamable HTTP on ``HOST:PORT`` at ``/mcp``.

    ``token`` (stdio only) picks a configured token's view: the token, or ``env:VAR``. ``text``:
    a ``search`` result's text content, the answer's JSON or its compact form.
    """
    configure()  # logs to stderr: stdout belongs to the stdio transport
    endpoint = parse_endpoint(http) if http is not None else None
    if endpoint is not None and token is not None:
        raise InvalidRequest("token", "only for stdio: over --http each request brings its bearer token")
    access = stdio_access(config, token)
    principal = stdio_principal(config, token)
    if endpoint is not None:
        warn_if_open(config, endpoint[0], "mcp")
    asyncio.run(_serve(config, endpoint, access, text, principal))
