"""``fedsearch search``'s flags as a request (SPEC §2): rg's among them spelled onto its fields.

``-e PATTERN`` (repeatable) and ``-f FILE`` are rg's: regexes (literal text with ``-F``),
a line matching any of them, and every positional then a PATH; they become one regex,
protected from the query syntax of SPEC §7 (rg reads none). ``-w`` makes a word-bounded
regex, ``-A/-B/-C`` the request's ``context_lines``, ``-g``/``-t``/``--ns`` its paths,
languages and namespaces. Trailing PATHs are the caller's (:mod:`gateway.cli.scope`).
"""

from __future__ import annotations

import os
import sys

from gateway.errors import InvalidRequest

TYPE_CHECKING = False  # typing and argparse not imported: a listing reads its flags without them
if TYPE_CHECKING:
    import argparse
    from typing import Any

__all__ = ["context", "normalise", "request_data", "wants_color"]

#: What the query syntax reads in a query besides its text (SPEC §7).
_SYNTAX = frozenset(':"/')


def normalise(args: argparse.Namespace) -> None:
    """rg's reading of the positionals and patterns: with ``-e``/``-f`` or ``--files`` every positional is a
    PATH; ``args.patterns`` becomes every pattern of ``-e`` and ``-f`` in order (None when neither is given)."""
    if (args.patterns or args.pattern_files or args.list_files) and args.query is not None:
        args.paths = [args.query, *args.paths]
        args.query = None
    if not args.patterns and not args.pattern_files:
        args.patterns = None
        return
    for name in args.pattern_files:
        args.patterns += _read(name)
    args.pattern_files = []


def _read(name: str) -> list[str]:
    """The patterns of ``-f FILE``: one a line (``-``: stdin)."""
    try:
        if name == "-":
            text = sys.stdin.read()
        else:
            with open(name, encoding="utf-8", errors="surrogateescape") as handle:
                text = handle.read()
    except OSError as exc:
        raise InvalidRequest("file", f"cannot read {name}: {exc.strerror or exc}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _word(query: str, mode: str) -> str:
    """``-w``: the query as a regex matching whole words: word boundaries around a regex, and
    around literal text at each end that is a word character (``foo(`` matches ``foo('x')``)."""
    from gateway.query.syntax import escape

    if mode == "regex":
        return rf"\b(?:{query})\b"
    head = r"\b" if _word_char(query[:1]) else ""
    tail = r"\b" if _word_char(query[-1:]) else ""
    return f"{head}{escape(query)}{tail}"


def _word_char(char: str) -> bool:
    """Whether ``char`` is a word character as a regex's ``\\w`` reads it (a letter or digit of any script, ``_``)."""
    return char.isalnum() or char == "_"


def _one(patterns: list[str], fixed: bool) -> tuple[str, str]:
    """(query, mode) matching a line that any of ``patterns`` (regexes, or text when ``fixed``) matches."""
    if len(patterns) == 1:
        return patterns[0], "exact" if fixed else "regex"
    if fixed:
        from gateway.query.syntax import escape

        return "|".join(escape(p) for p in patterns), "regex"
    return "|".join(f"(?:{p})" for p in patterns), "regex"


def _as_written(query: str, mode: str) -> str:
    """A query meaning ``query`` itself, none of it read as the query syntax (rg reads none)."""
    if not _SYNTAX.intersection(query):
        return query
    from gateway.query.syntax import literal

    return literal(query, mode == "regex")


def context(args: argparse.Namespace) -> tuple[int, int] | None:
    """(before, after) that -B/-A/-C ask for, or None."""
    given = {"-A": args.after_context, "-B": args.before_context, "-C": args.context}
    for flag, value in given.items():
        if value is not None and value < 0:
            raise InvalidRequest("context_lines", f"{flag} must be at least 0")
    if all(v is None for v in given.values()):
        return None
    around = args.context or 0
    before = args.before_context if args.before_context is not None else around
    after = args.after_context if args.after_context is not None else around
    return before, after


def _pattern(args: argparse.Namespace) -> tuple[str, str]:
    """(query, mode) of the flags: ``-e``/``-f``'s patterns, else QUERY (in the query syntax)."""
    if args.patterns is not None:
        if args.semantic:
            raise InvalidRequest("regexp", "-e and -f give patterns to match: not with --semantic")
        query, mode = _one(args.patterns, args.fixed_strings)
        if args.word_regexp:
            query, mode = _word(query, mode), "regex"
        return _as_written(query, mode), mode
    if args.query is None:
        raise InvalidRequest("query", "a QUERY (or -e PATTERN, or --args-json) is required")
    mode = "regex" if args.regex else "semantic" if args.semantic else "exact"
    if not args.word_regexp:
        return args.query, mode
    if mode == "semantic":
        raise InvalidRequest("word-regexp", "-w matches words of text: not with --semantic")
    return _word(args.query, mode), "regex"


def request_data(args: argparse.Namespace) -> dict[str, Any]:
    """The request the flags describe (or --args-json's), not yet validated; with ``--files`` (which
    searches for nothing) a request without a query."""
    if args.args_json is not None:
        if args.query is not None or args.patterns is not None:
            raise InvalidRequest("args-json", "give QUERY (or -e) or --args-json, not both")
        import json

        try:
            given = json.loads(args.args_json)
        except ValueError as exc:
            raise InvalidRequest("args-json", f"invalid JSON: {exc}") from None
        if not isinstance(given, dict):
            raise InvalidRequest("args-json", "must be a JSON object (a next action's args)")
        return given
    data: dict[str, Any] = {}
    if not args.list_files:
        data["query"], mode = _pattern(args)
        if mode != "exact":
            data["mode"] = mode
    for flag, key in (("namespace", "namespaces"), ("glob", "paths"), ("lang", "languages")):
        if getattr(args, flag):
            data[key] = list(getattr(args, flag))
    around = context(args)
    if around is not None:
        data["context_lines"] = max(around)
    for flag, key in (
        ("case", "case_sensitive"),
        ("page_files", "files"),
        ("offset", "offset"),
        ("hit_budget", "hit_budget"),
        ("timeout_ms", "timeout_ms"),
        ("threshold", "threshold"),
        ("dedup", "dedup"),
    ):
        if getattr(args, flag) is not None:
            data[key] = getattr(args, flag)
    return data


def wants_color(choice: str) -> bool:
    """Whether ``--color CHOICE`` colours: always, never, or auto (stdout a terminal, TERM not dumb, no NO_COLOR)."""
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb" and "NO_COLOR" not in os.environ
