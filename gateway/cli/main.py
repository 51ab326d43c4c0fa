"""The ``fedsearch`` command: search, serve, mcp, namespaces, check-config.

Exit codes (SPEC §4): 0 answered (even partially), 1 nothing matched, 2 bad input
or config, 3 every namespace failed. Errors are one line on stderr naming the
field or key; never a traceback for bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from gateway.cli import render
from gateway.config import Config, config_from_env
from gateway.errors import ConfigError, InvalidRequest
from gateway.log import configure
from gateway.request import SearchRequest, parse_request

__all__ = ["exit_code", "main"]

EXIT_OK, EXIT_NOTHING, EXIT_BAD_INPUT, EXIT_ALL_FAILED = 0, 1, 2, 3


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML config (default $FEDSEARCH_CONFIG, else discovery)")
    p.add_argument("--root", metavar="DIR", help="discover git checkouts under DIR (default: .)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedsearch", description="Federated code search gateway.")
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("search", help="search every namespace and print the answer")
    s.add_argument("query", nargs="?", help="what to look for")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--regex", "-e", action="store_true", help="the query is an RE2 regex")
    mode.add_argument("--semantic", action="store_true", help="search by meaning")
    s.add_argument("-n", "--namespace", action="append", default=[], metavar="NS", help="namespace glob")
    s.add_argument("-g", "--glob", action="append", default=[], metavar="GLOB", help="path glob (!excl)")
    s.add_argument("-l", "--lang", action="append", default=[], metavar="LANG", help="language")
    case = s.add_mutually_exclusive_group()
    case.add_argument("-s", "--case-sensitive", dest="case", action="store_true", default=None)
    case.add_argument("-i", "--ignore-case", dest="case", action="store_false")
    s.add_argument("-C", "--context", type=int, metavar="N", help="context lines")
    s.add_argument("--files", type=int, metavar="N", help="files per page (default 20)")
    s.add_argument("--offset", type=int, metavar="N", help="files to skip")
    s.add_argument("--hit-budget", type=int, metavar="N", help="hits per page (default 100)")
    s.add_argument("--timeout-ms", type=int, metavar="N", help="deadline (default 5000)")
    s.add_argument("--threshold", type=float, metavar="F", help="semantic threshold")
    s.add_argument("--json", action="store_true", help="print the wire answer as JSON")
    s.add_argument("--args-json", metavar="JSON", help="a whole SearchRequest (from a next action)")
    s.add_argument("--server", metavar="URL", help="ask a running gateway instead of searching here")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    _common(s)

    v = sub.add_parser("serve", help="serve HTTP (and AFI) on HOST:PORT")
    _common(v)
    v.add_argument("--host", help="bind address (default from config, 127.0.0.1)")
    v.add_argument("--port", type=int, help="port (default from config, 8080)")
    v.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes sharing the port (default 1)")

    m = sub.add_parser("mcp", help="serve MCP over stdio, or streamable HTTP with --http")
    _common(m)
    m.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    m.add_argument(
        "--token",
        metavar="TOKEN|env:VAR",
        help="stdio only: see what this configured token sees (env:VAR reads it from $VAR)",
    )

    n = sub.add_parser("namespaces", help="list the namespaces")
    _common(n)
    n.add_argument("--json", action="store_true")
    n.add_argument("--server", metavar="URL")

    c = sub.add_parser("check-config", help="validate the config and exit")
    _common(c)
    return parser


def request_from_args(args: argparse.Namespace) -> SearchRequest:
    """The SearchRequest the flags (or --args-json) describe; InvalidRequest if bad."""
    if args.args_json is not None:
        if args.query is not None:
            raise InvalidRequest("args-json", "give QUERY or --args-json, not both")
        try:
            raw = orjson.loads(args.args_json)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest("args-json", f"invalid JSON: {exc}") from None
        return parse_request(raw)
    if args.query is None:
        raise InvalidRequest("query", "a QUERY (or --args-json) is required")
    data: dict[str, Any] = {"query": args.query}
    if args.regex:
        data["mode"] = "regex"
    elif args.semantic:
        data["mode"] = "semantic"
    for flag, key in (
        ("namespace", "namespaces"),
        ("glob", "paths"),
        ("lang", "languages"),
    ):
        if getattr(args, flag):
            data[key] = getattr(args, flag)
    for flag, key in (
        ("case", "case_sensitive"),
        ("context", "context_lines"),
        ("files", "files"),
        ("offset", "offset"),
        ("hit_budget", "hit_budget"),
        ("timeout_ms", "timeout_ms"),
        ("threshold", "threshold"),
    ):
        if getattr(args, flag) is not None:
            data[key] = getattr(args, flag)
    return parse_request(data)


def exit_code(answer: dict[str, Any]) -> int:
    if answer["files"]:
        return EXIT_OK
    statuses = answer["namespaces"]
    if statuses and all(s["status"] != "ok" for s in statuses):
        return EXIT_ALL_FAILED
    return EXIT_NOTHING


def _suffix(args: argparse.Namespace) -> str:
    """The flags a printed next action needs to run against the same namespaces."""
    parts = []
    for flag in ("server", "config", "root"):
        value = getattr(args, flag, None)
        if value:
            parts.append(f"--{flag} {shlex.quote(value)}")
    return (" " + " ".join(parts)) if parts else ""


async def _search(args: argparse.Namespace, request: SearchRequest) -> dict[str, Any]:
    if args.server:
        from gateway.cli.client import remote_search

        return await remote_search(args.server, request)
    from gateway.service import SearchService

    service = SearchService(_config(args), process_cache=False)  # one search: only Redis outlives it
    try:
        return await service.search(request)
    finally:
        await service.aclose()


def _config(args: argparse.Namespace) -> Config:
    return config_from_env(args.config, args.root)


def cmd_search(args: argparse.Namespace) -> int:
    request = request_from_args(args)
    answer = asyncio.run(_search(args, request))
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        sys.stdout.write(render.human(answer, request, color=color, suffix=_suffix(args)))
    sys.stdout.flush()
    return exit_code(answer)


def cmd_namespaces(args: argparse.Namespace) -> int:
    if args.server:
        from gateway.cli.client import remote_namespaces

        items = asyncio.run(remote_namespaces(args.server))
    else:
        from gateway.service import SearchService

        service = SearchService(_config(args))
        items = service.namespaces()
        asyncio.run(service.aclose())
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(items) + b"\n")
    else:
        for item in items:
            modes = ",".join(item["capabilities"]["modes"])
            sys.stdout.write(f"{item['name']}\t{item['backend']}\t{item['health']}\t{modes}\n")
    return EXIT_OK


def cmd_check_config(args: argparse.Namespace) -> int:
    config = _config(args)
    from gateway.service import SearchService

    service = SearchService(config)
    asyncio.run(service.aclose())
    sys.stdout.write(f"ok: {len(config.namespaces)} namespaces from {config.source}\n")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.http.server import serve

    config = _config(args)
    return serve(config, host=args.host, port=args.port, workers=args.workers, load=lambda: _config(args))


def cmd_mcp(args: argparse.Namespace) -> int:
    import importlib

    run_mcp = importlib.import_module("gateway.mcp").run_mcp  # written with the MCP surface
    run_mcp(_config(args), http=args.http, token=args.token)
    return EXIT_OK


COMMANDS = {
    "search": cmd_search,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
    "namespaces": cmd_namespaces,
    "check-config": cmd_check_config,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(level=None if args.command in ("serve", "mcp") else "warning")
    try:
        return COMMANDS[args.command](args)
    except InvalidRequest as exc:
        sys.stderr.write(f"fedsearch: invalid {exc.field}: {exc.message}\n")
    except ConfigError as exc:
        sys.stderr.write(f"fedsearch: config error: {exc}\n")
    except KeyboardInterrupt:
        return 130
    return EXIT_BAD_INPUT
