"""``fedsearch read NS/PATH[:START[-END]]``: lines of a file of any namespace.

``PATH:N`` is line N alone, as an editor, ``grep -n`` and ``rg -n`` name a line; ``PATH:N-M`` lines N
to M; ``PATH:N-`` from N on, as far as a read goes unbounded (the service's slice for its reader,
``READ_LINES`` lines within ``READ_CHARS`` characters; a hint on stderr names the next ``PATH:K-``);
``PATH`` alone from line 1 alike.

Through :meth:`SearchService.read_file` (or ``GET /v1/files`` with ``--server``), the
read path every surface shares, so whatever a namespace can read (a local checkout,
a remote backend that offers content) reads the same here. A path as ``search``
printed it (relative to the current directory) is read first when that file is
there, so a path from a subfolder (``app.py``) never has its first segment taken
for a namespace; a file neither way is "no such file", in words.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from gateway.cli.messages import hint
from gateway.errors import InvalidRequest, NotFound

__all__ = ["parse_target", "run"]

_LINES = re.compile(r"(\d+)(?:-(\d*))?")


def parse_target(target: str) -> tuple[str, int | None, int | None]:
    """``NS/PATH[:START[-END]]`` -> (NS/PATH, START, END): ``:N`` is N to N, ``:N-`` N with no END."""
    path, sep, lines = target.rpartition(":")
    match = _LINES.fullmatch(lines) if sep else None
    if match is None:
        return target, None, None
    start = int(match.group(1))
    dash = match.group(2)  # None: no "-" (line N alone); "": "N-" (from N on)
    end = start if dash is None else int(dash) if dash else None
    if start < 1:
        raise InvalidRequest("start_line", "lines are numbered from 1")
    if end is not None and end < start:
        raise InvalidRequest("end_line", f"{end} is before the start line {start}")
    return path, start, end


def _print(result: dict[str, Any], as_json: bool, asked_end: int | None) -> None:
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        return
    start, end = result["start_line"], result["end_line"]
    width = len(str(max(end, 1)))
    sys.stdout.write("".join(f"{start + i:>{width}}\t{line}\n" for i, line in enumerate(result["lines"])))
    total = result.get("total_lines")
    if total and end < total and (asked_end is None or asked_end > end):  # a slice's limit stopped it
        hint(f"lines {start}-{end} of {total}; more: fedsearch read {result['namespace']}/{result['path']}:{end + 1}-")


def run(args: argparse.Namespace) -> int:
    """``fedsearch read``."""
    target, start, end = parse_target(args.target)
    if args.server:
        from gateway.cli.client import Client

        with Client(args.server) as client:
            namespace, path = _split(target, [item["name"] for item in client.namespaces()])
            _print(client.read(namespace, path, start, end), args.json, end)
        return 0
    return _local(args, target, start, end)


def _local(args: argparse.Namespace, target: str, start: int | None, end: int | None) -> int:
    """A file named as ``search`` printed it (relative to here) when there is one, else ``NS/PATH``."""
    import asyncio

    from gateway.cli.scope import load, scope_of
    from gateway.service import MAX_READ_LINES, SearchService

    config = load(args)
    here = _local_file(scope_of(config).roots, target) if os.path.isfile(target) else None
    service = SearchService(config)

    async def read() -> dict[str, Any]:
        try:
            try:
                namespace, path = here or await service.file_of(target)
                if end is None:  # a slice, as an agent's
                    return await service.read_file(namespace, path, start)
                # a person's range: all of it, up to the most one call reads
                return await service.read_file(namespace, path, start, end, most_lines=MAX_READ_LINES, most_chars=None)
            except NotFound:
                raise NotFound(_missing(target)) from None
        finally:
            await service.aclose()

    _print(asyncio.run(read()), args.json, end)
    return 0


def _missing(target: str) -> str:
    """What is wrong with ``target``, in words: no such file, a folder, or a file of no namespace."""
    if os.path.isdir(target):
        return f"{target} is a folder: give a file (`fedsearch search --files {target}` lists them)"
    if os.path.isfile(target):
        return f"{target} is in no namespace searched here (`fedsearch namespaces` lists them)"
    return f"no such file: {target}"


def _split(virtual: str, names: list[str]) -> tuple[str, str]:
    """``NS/PATH`` -> (NS, PATH), the longest namespace winning (as the server splits it)."""
    virtual = virtual.lstrip("/")
    best = max((n for n in names if virtual.startswith(n + "/")), key=len, default=None)
    if best is None:
        raise NotFound(f"no namespace holds {virtual!r} (`fedsearch namespaces` lists them)")
    return best, virtual[len(best) + 1 :]


def _local_file(roots: dict[str, str], given: str) -> tuple[str, str] | None:
    """(namespace, path) of a file named as ``search`` printed it (relative to here), in a local namespace."""
    target = os.path.realpath(given)
    for namespace, root in sorted(roots.items(), key=lambda item: -len(item[1])):
        if target.startswith(root.rstrip("/") + "/"):
            return namespace, os.path.relpath(target, root)
    return None
