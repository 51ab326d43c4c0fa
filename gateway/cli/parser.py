"""The command line's grammar: one argparse parser per command, and nothing else imported.

``fedsearch --help`` and a mistyped flag cost argparse alone. Each command has a parser
of its own, so a bad flag prints *that* command's usage (``fedsearch search``'s, not the
top level's), and ``search`` reads its arguments intermixed, as rg does: options may
follow the query and the trailing PATHs (``fedsearch search Blueprint src/ -w -C 2``).

With ``--json`` on the command line, a usage error is problem JSON on stdout instead
(exit 2), like every other error of a ``--json`` run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ["COMMANDS", "CommandParser", "parse", "top_parser"]

PROG = "fedsearch"
_VERSION_HELP = "print fedsearch's version and the rg it runs, and exit"


def _columns() -> int:
    """The terminal's width, as ``shutil.get_terminal_size`` finds it ($COLUMNS, else stdout's
    terminal, else 80), without importing shutil (and its bz2 and lzma) at every start."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, its width found by :func:`_columns` (argparse builds one for every
    argument it adds, and would import shutil for it)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are problem JSON on stdout when ``json_errors`` is set."""

    json_errors = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            import json

            problem = {"type": "about:blank", "title": "Invalid request", "status": 400, "detail": message}
            sys.stdout.write(json.dumps(problem) + "\n")
            raise SystemExit(2)
        super().error(message)


def _config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML config (default $FEDSEARCH_CONFIG, else discovery)")
    p.add_argument(
        "--root",
        metavar="DIR",
        help="serve every git checkout under DIR (default: the checkouts under the current directory, "
        "else the checkout it is in)",
    )


def _server_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", metavar="URL", help="ask a running gateway (http:// assumed) instead of searching here")


def _search(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        "Run in a checkout with no --root, it searches the folder you stand in and below, paths printed "
        "relative to it, as rg. A page ranks files (declarations first, each under its header) and ends with "
        "a summary and the next commands, on stderr when stdout is no terminal; off one, without --heading, its "
        "lines are rg's path:N:text (no declaration header). Over the checkouts found here, "
        "-l, -c, --count-matches, --vimgrep and --files are rg's own listings: every file, in rg's format. "
        "rg's letters mean rg's: -n is line numbers (namespaces: --ns), --files lists files (page size: "
        "--page-files), -e takes a pattern (--regex makes QUERY one)."
    )
    p.add_argument("query", nargs="?", metavar="QUERY", help="what to look for (literal text unless --regex)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="search only these checkouts or folders (as rg)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--regex", action="store_true", help="QUERY is an RE2 regex")
    mode.add_argument("-F", "--fixed-strings", action="store_true", help="QUERY is literal text (the default)")
    mode.add_argument("--semantic", action="store_true", help="search by meaning")
    p.add_argument(
        "-e",
        "--regexp",
        dest="patterns",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a regex to look for, as rg (repeatable: lines matching any; every positional is then a PATH)",
    )
    p.add_argument(
        "-f",
        "--file",
        dest="pattern_files",
        action="append",
        default=[],
        metavar="FILE",
        help="the patterns of -e read from FILE, one a line (- reads stdin)",
    )
    p.add_argument("-w", "--word-regexp", action="store_true", help="match whole words only")
    case = p.add_mutually_exclusive_group()
    case.add_argument("-s", "--case-sensitive", dest="case", action="store_true", default=None, help="match case")
    case.add_argument("-i", "--ignore-case", dest="case", action="store_false", help="ignore case")
    case.add_argument(
        "-S", "--smart-case", dest="case", action="store_const", const=None, help="match case iff QUERY has a capital"
    )
    p.add_argument(
        "--ns",
        "--namespace",
        dest="namespace",
        action="append",
        default=[],
        metavar="NS",
        help="namespace glob (repeatable)",
    )
    p.add_argument("-g", "--glob", action="append", default=[], metavar="GLOB", help="path glob, !GLOB excludes")
    p.add_argument(
        "-t",
        "--lang",
        "--type",
        dest="lang",
        action="append",
        default=[],
        metavar="LANG",
        help="language (python, go, ...; --type-list lists them)",
    )
    p.add_argument("--type-list", action="store_true", help="list the languages -t takes, with their globs, as rg")
    p.add_argument("-A", "--after-context", type=int, metavar="N", help="show N lines after each match")
    p.add_argument("-B", "--before-context", type=int, metavar="N", help="show N lines before each match")
    p.add_argument("-C", "--context", type=int, metavar="N", help="show N lines around each match")
    p.add_argument("-m", "--max-count", type=int, metavar="NUM", help="print at most NUM matched lines a file")
    p.add_argument("-o", "--only-matching", action="store_true", help="print only the matched parts of lines")
    numbers = p.add_mutually_exclusive_group()
    numbers.add_argument(
        "-n", "--line-number", dest="line_number", action="store_true", default=None, help="line numbers (the default)"
    )
    numbers.add_argument("-N", "--no-line-number", dest="line_number", action="store_false", help="no line numbers")
    p.add_argument("--hidden", action="store_true", help="search hidden files and folders too (as rg)")
    p.add_argument(
        "-u",
        "--unrestricted",
        action="count",
        default=0,
        help="-u: ignore files (.gitignore...) ignored too; -uu: and hidden files searched; -uuu: binary too",
    )
    listing = p.add_mutually_exclusive_group()
    listing.add_argument("-l", "--files-with-matches", action="store_true", help="print every matching file's path")
    listing.add_argument("-c", "--count", action="store_true", help="print every matching file with its line count")
    listing.add_argument("--count-matches", action="store_true", help="print every matching file with its match count")
    listing.add_argument("--vimgrep", action="store_true", help="print every match as path:line:column:line")
    listing.add_argument(
        "--files",
        dest="list_files",
        action="store_true",
        help="print the files that would be searched, without searching (every positional is a PATH)",
    )
    listing.add_argument("--json", action="store_true", help="print the answer as JSON (as over HTTP)")
    p.add_argument("--page-files", type=int, metavar="N", help="files per page (default 20)")
    p.add_argument("--offset", type=int, metavar="N", help="files to skip")
    p.add_argument("--hit-budget", type=int, metavar="N", help="hits per page (default 100)")
    p.add_argument("--timeout-ms", type=int, metavar="N", help="deadline in ms (default 5000)")
    p.add_argument("--threshold", type=float, metavar="F", help="semantic hits scoring under F are weak")
    p.add_argument(
        "--no-dedup",
        dest="dedup",
        action="store_false",
        default=None,
        help="show every copy of a file found in several namespaces (default: one group, 'also in: ...')",
    )
    p.add_argument("--args-json", metavar="JSON", help="a whole request (a printed next action), verbatim")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colours (as rg)")
    _rg_output(p)
    _server_flag(p)
    _config_flags(p)


def _rg_output(p: argparse.ArgumentParser) -> None:
    """rg's output flags (gateway.cli.rgflags): each prints what rg prints with it. Those setting one attribute
    are not exclusive: the last given wins, as in rg."""
    p.add_argument(
        "--heading",
        dest="heading",
        action="store_true",
        default=None,
        help="each file's path above its lines (the default on a terminal)",
    )
    p.add_argument(
        "--no-heading", dest="heading", action="store_false", help="the path before each line (the default off one)"
    )
    p.add_argument("--column", action="store_true", help="the byte column of the first match (as rg)")
    p.add_argument(
        "-H",
        "--with-filename",
        dest="filename",
        action="store_true",
        default=None,
        help="print the path, even of one file searched alone",
    )
    p.add_argument("-I", "--no-filename", dest="filename", action="store_false", help="never print the path")
    p.add_argument(
        "-M",
        "--max-columns",
        type=int,
        metavar="NUM",
        help="print a line longer than NUM bytes as rg's [Omitted long ...] notice (0: no limit)",
    )
    p.add_argument("--sort", choices=("path", "none"), help="path: files in path order (a page: its own files)")
    p.add_argument("-0", "--null", action="store_true", help="a NUL after each path, not ':' or a line end")
    # -0 looks like a negative number, which would make argparse read every one (-A -1, a query -5) as an
    # option: -0 is matched as the option it is before that rule is asked, so the rule stays as it was
    vars(p)["_has_negative_number_optionals"].clear()
    p.add_argument(
        "-d", "--max-depth", type=int, metavar="NUM", help="search folders at most NUM levels below each PATH (as rg)"
    )
    p.add_argument("--trim", action="store_true", help="leave out ASCII whitespace at the start of each line")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing: the exit code says if anything matched")
    p.add_argument("-V", "--version", action=_Version, help=_VERSION_HELP)


class _Version(argparse.Action):
    """``--version``: fedsearch's version and rg's, one line each (:mod:`gateway.cli.version`), then exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from gateway.cli.version import version

        sys.stdout.write(version())
        sys.stdout.flush()
        raise SystemExit(0)


def _read(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target",
        metavar="NS/PATH[:START[-END]]",
        help="a file of a namespace; :N line N alone, :N-M lines N to M, :N- from line N on",
    )
    p.add_argument("--json", action="store_true", help="print the lines as JSON")
    _server_flag(p)
    _config_flags(p)


def _serve(p: argparse.ArgumentParser) -> None:
    _config_flags(p)
    p.add_argument("--host", help="bind address (default from config, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default from config, 8080)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes sharing the port (default 1)")


def _mcp(p: argparse.ArgumentParser) -> None:
    _config_flags(p)
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    p.add_argument(
        "--text",
        choices=("json", "compact"),
        default="json",
        help="a search result's text content: the answer's JSON (default) or a compact form, for clients"
        " that pass both it and structuredContent to their model",
    )
    p.add_argument(
        "--token",
        metavar="TOKEN|env:VAR",
        help="stdio only: see what this configured token sees (env:VAR reads it from $VAR)",
    )


def _namespaces(p: argparse.ArgumentParser) -> None:
    _config_flags(p)
    p.add_argument("--json", action="store_true", help="print them as JSON")
    _server_flag(p)


def _check_config(p: argparse.ArgumentParser) -> None:
    _config_flags(p)


def _index(p: argparse.ArgumentParser) -> None:
    _config_flags(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--status",
        action="store_true",
        help="list every root the index folder holds: namespaces, files, bytes, last used, state",
    )
    what.add_argument(
        "--prune",
        action="store_true",
        help="prune now: roots unused for [index] keep_days, folders that no longer exist, past max_bytes",
    )
    p.add_argument("--json", action="store_true", help="with --status: print it as JSON")
    p.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for another builder (a running server keeps its own indexes; default 30)",
    )


#: command -> (one-line help, the function adding its arguments)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "search": ("search every namespace and print the answer (rg's flags work)", _search),
    "read": ("print lines of a file of any namespace", _read),
    "namespaces": ("list the namespaces", _namespaces),
    "serve": ("serve HTTP (and AFI) on HOST:PORT", _serve),
    "mcp": ("serve MCP over stdio, or streamable HTTP with --http", _mcp),
    "check-config": ("validate the config and say what looks wrong", _check_config),
    "index": ("build or refresh every local namespace's indexes now (content and declarations)", _index),
}


def command_parser(name: str, json_errors: bool = False) -> CommandParser:
    """The parser of one command (``fedsearch NAME …``)."""
    summary, add = COMMANDS[name]
    parser = CommandParser(prog=f"{PROG} {name}", description=summary[0].upper() + summary[1:] + ".")
    parser.json_errors = json_errors
    add(parser)
    return parser


def top_parser() -> CommandParser:
    """``fedsearch`` itself: the commands, each with its one-line help."""
    parser = CommandParser(
        prog=PROG,
        description="Federated code search: one query, every repo, ranked.",
        epilog=f"Run '{PROG} COMMAND --help' for a command's options.",
    )
    parser.add_argument("-V", "--version", action=_Version, help=_VERSION_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (summary, _) in COMMANDS.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command and its arguments; argparse's usage error (exit 2) if they are wrong."""
    argv = list(argv)
    json_errors = "--json" in argv
    if not argv or argv[0] not in COMMANDS:
        top = top_parser()
        top.json_errors = json_errors
        top.parse_args(argv[:1])  # --help, --version, no command, or an unknown one: the top level's usage
        raise AssertionError("unreachable")  # pragma: no cover - parse_args exited
    name = argv[0]
    parser = command_parser(name, json_errors)
    rest = argv[1:]
    # options anywhere, as rg reads them; after `--` everything is positional (a query such as -x),
    # which argparse's intermixed parsing does not keep
    args = parser.parse_args(rest) if "--" in rest else parser.parse_intermixed_args(rest)
    args.command = name
    return args
