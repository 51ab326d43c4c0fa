"""``fedsearch namespaces | check-config | serve | mcp``: the commands around searching."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gateway.cli.messages import warn
from gateway.cli.render import plural
from gateway.cli.scope import load

if TYPE_CHECKING:
    from gateway.config import Config

__all__ = ["check_config", "config_warnings", "index_warnings", "mcp", "namespaces", "serve"]


def namespaces(args: argparse.Namespace) -> int:
    """``fedsearch namespaces``: name, backend, health and modes of each, or the JSON of /v1/namespaces."""
    if args.server:
        from gateway.cli.client import Client

        with Client(args.server) as client:
            items = client.namespaces()
    else:
        import asyncio

        from gateway.service import SearchService

        service = SearchService(load(args))

        async def listed() -> list[dict[str, Any]]:
            try:
                return await service.list_namespaces()
            finally:
                await service.aclose()

        items = asyncio.run(listed())
    if args.json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(items) + b"\n")
    else:
        for item in items:
            modes = ",".join(item["capabilities"]["modes"])
            sys.stdout.write(f"{item['name']}\t{item['backend']}\t{item['health']}\t{modes}\n")
    return 0


def _strings(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """Every string inside a settings value, with its key (``exclude[1]``)."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _strings(item, f"{key}[{i}]")
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, f"{key}.{name}")


def index_warnings(config: Config) -> list[str]:
    """What stops the local namespaces' indexes: an ``[index] dir`` that cannot be written (they are
    then scanned every time), or a disk with less room than ``[index] max_bytes`` lets the folder grow."""
    if not config.index.enabled or not any(getattr(ns.settings, "root", None) for ns in config.namespaces):
        return []
    folder = os.path.expanduser(config.index.dir)
    try:
        os.makedirs(folder, exist_ok=True)
        import tempfile

        with tempfile.NamedTemporaryFile(dir=folder, prefix=".check-"):
            pass
    except OSError as exc:
        why = exc.strerror or exc
        return [f"index.dir: {folder} cannot be written ({why}): local namespaces are scanned, unindexed"]
    import shutil

    from gateway.index.roots import folder_bytes

    free = shutil.disk_usage(folder).free
    used = folder_bytes(folder)
    if free < config.index.max_bytes - used:
        return [
            f"index.dir: {folder} has {free / 1e9:.1f} GB free, less than [index] max_bytes lets its indexes "
            f"grow ({config.index.max_bytes / 1e9:.1f} GB, {used / 1e9:.1f} GB used): they may fill the disk "
            "before their bound"
        ]
    return []


def config_warnings(config: Config, env: dict[str, str] | None = None) -> list[str]:
    """What is valid but probably not meant: nothing to serve, a token variable that is not set,
    a ``~`` that nothing expands, an index folder that cannot be written."""
    env = dict(os.environ) if env is None else env
    out: list[str] = index_warnings(config)
    for i, ns in enumerate(config.namespaces):
        settings = ns.settings.model_dump()
        token_env = settings.get("token_env")
        if token_env and not env.get(token_env):
            out.append(f"namespaces[{i}].token_env: ${token_env} is not set: {ns.name} will be asked without a token")
        for key, value in _strings(settings, f"namespaces[{i}]"):
            if value.startswith("~") and not key.endswith(".token_env"):
                out.append(f"{key}: {value!r} starts with ~, which is not expanded there (write the full path)")
    return out


def check_config(args: argparse.Namespace) -> int:
    """``fedsearch check-config``: validate (errors name the key, exit 2), open every backend, warn."""
    import asyncio

    from gateway.service import SearchService

    config = load(args)  # warns itself when there is nothing to serve
    service = SearchService(config)
    asyncio.run(service.aclose())
    found = config_warnings(config)
    for text in found:
        warn(text)
    count = plural(len(config.namespaces), "namespace")
    more = f" ({plural(len(found) + (not config.namespaces), 'warning')})" if found or not config.namespaces else ""
    sys.stdout.write(f"ok: {count} from {config.source}{more}\n")
    return 0


def serve(args: argparse.Namespace) -> int:
    """``fedsearch serve``: HTTP (and AFI) until SIGTERM."""
    from gateway.http.server import serve as run_server

    return run_server(load(args), host=args.host, port=args.port, workers=args.workers, load=lambda: load(args))


def mcp(args: argparse.Namespace) -> int:
    """``fedsearch mcp``: MCP over stdio, or streamable HTTP with --http."""
    from gateway.mcp.tools import run_mcp

    run_mcp(load(args), http=args.http, token=args.token, text=args.text)
    return 0
