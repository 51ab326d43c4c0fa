"""The ``fedsearch`` command: search, read, namespaces, serve, mcp, check-config, index.

Exit codes (SPEC §4): 0 answered (even partially), 1 nothing matched, 2 bad input
or config, 3 every namespace failed (or the server could not be reached). Errors are
one line on stderr in the user's words, naming the field or key, never a traceback
for bad input; with ``--json``, problem JSON on stdout instead.

Start-up is part of the interface: this module imports nothing of its own; ``--version`` is
answered at once (:mod:`gateway.cli.version`), a ``search`` of switches and positionals is read
without argparse (:mod:`gateway.cli.plainargs`), any other line by the grammar
(:mod:`gateway.cli.parser`), and each command imports what it needs when
it runs (a one-shot search never imports the HTTP server, MCP, the remote adapters, the
metrics or structlog; a listing over checkouts found here not even ``typing``).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself not imported (see the module)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

__all__ = ["EXIT_ALL_FAILED", "EXIT_BAD_INPUT", "EXIT_NOTHING", "EXIT_OK", "main"]

EXIT_OK, EXIT_NOTHING, EXIT_BAD_INPUT, EXIT_ALL_FAILED = 0, 1, 2, 3

#: command -> "module:function" running it (imported only when it runs)
RUNNERS = {
    "search": "gateway.cli.search:run",
    "read": "gateway.cli.read:run",
    "namespaces": "gateway.cli.admin:namespaces",
    "check-config": "gateway.cli.admin:check_config",
    "serve": "gateway.cli.admin:serve",
    "mcp": "gateway.cli.admin:mcp",
    "index": "gateway.cli.indexing:run",
}


def _runner(command: str) -> Any:
    module, _, name = RUNNERS[command].partition(":")
    __import__(module)
    return getattr(sys.modules[module], name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fedsearch ARGV`` (this process's own arguments when None) and return its exit code.

    Run as the process's entry point (``argv`` None), a one-shot command ends the process
    itself once its output is flushed (:func:`_end`)."""
    given = sys.argv[1:] if argv is None else list(argv)
    if given in (["--version"], ["-V"]):  # as fast as rg's: neither argparse nor a command imported
        from gateway.cli.version import version

        sys.stdout.write(version())
        sys.stdout.flush()
        return EXIT_OK
    from gateway.cli.plainargs import plain_args

    args = plain_args(given)
    if args is None:
        from gateway.cli.parser import parse

        args = parse(given)
    code = _run(args)
    if argv is None and args.command not in ("serve", "mcp"):
        _end(code)
    return code


def _end(code: int) -> NoReturn:
    """End a one-shot command's process now, its output written and flushed: tearing the interpreter
    down (freeing every module and object, ~a tenth of a one-shot search, bench/README.md) would only
    keep the shell waiting. Everything the command opened is closed by then (rg reaped, the index
    closed, a service's backends closed); under coverage, which writes its data at exit, it exits
    as usual."""
    if "coverage" in sys.modules:
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib is not imported at a listing's start
            stream.flush()
        except (OSError, ValueError):  # a reader gone (a broken pipe): say nothing, as rg
            pass
    os._exit(code)


def _run(args: Any) -> int:
    from gateway.cli.messages import report

    # A client of --server logs nothing of its own; a local search configures its own logging
    # (gateway.cli.search: none of stdlib's where it runs without the service).
    if not getattr(args, "server", None) and args.command != "search":
        from gateway.log import configure

        # serve and mcp log at info; a one-shot command only what goes wrong, structlog imported then
        configure(level=None if args.command in ("serve", "mcp") else "warning", lazy=True)
    try:
        code: int = _runner(args.command)(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `fedsearch search x | head`: the reader left; say nothing, as rg
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return EXIT_OK
    except Exception as exc:
        return report(exc, json=bool(getattr(args, "json", False)))
    return code
