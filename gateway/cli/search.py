"""``fedsearch search``: flags (rg's among them) -> a request -> the answer, printed.

The request is the one every surface sends (SPEC §2): rg's flags are spelled onto its
fields (``-w`` a word-bounded regex, ``-A/-B/-C`` its ``context_lines``, trailing PATHs
its namespaces and path globs). Without ``--server`` the search runs in this process
through :class:`~gateway.service.SearchService`, so ``--json`` prints exactly what HTTP
answers. ``-l``, ``-c`` and ``--vimgrep`` list every matching file, as rg does: they
follow the answer's next-page action until there is none.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.cli import render
from gateway.cli.messages import hint, warn
from gateway.cli.scope import Scope
from gateway.errors import InvalidRequest

if TYPE_CHECKING:
    from gateway.cli.early import Early
    from gateway.config import Config

__all__ = ["exit_code", "looks_like_regex", "request_data", "run"]

EXIT_OK, EXIT_NOTHING, EXIT_ALL_FAILED = 0, 1, 3
#: A listing (-l, -c, --vimgrep) asks for pages this large: the most a request may.
LIST_FILES, LIST_HIT_BUDGET = 200, 5000
#: Regex syntax that is rarely meant literally: a hint to add --regex when nothing matched.
_REGEX_MARKS = ("\\w", "\\d", "\\s", "\\b", "\\(", "\\)", "\\[", "\\.", ".*", ".+", "(?", "[^", "\\S", "\\W")

_WORD = re.compile(r"\w")

Ask = Callable[[dict[str, Any]], dict[str, Any]]


def _word(query: str, mode: str) -> str:
    """``-w``: the query as a regex matching whole words: word boundaries around a regex, and
    around literal text at each end that is a word character (``foo(`` matches ``foo('x')``)."""
    from gateway.syntax import escape

    if mode == "regex":
        return rf"\b(?:{query})\b"
    head = r"\b" if _WORD.match(query[:1]) else ""
    tail = r"\b" if _WORD.match(query[-1:]) else ""
    return f"{head}{escape(query)}{tail}"


def _context(args: argparse.Namespace) -> tuple[int, int] | None:
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


def request_data(args: argparse.Namespace) -> dict[str, Any]:
    """The request the flags describe (or --args-json's), not yet validated."""
    if args.args_json is not None:
        if args.query is not None:
            raise InvalidRequest("args-json", "give QUERY or --args-json, not both")
        import json

        try:
            given = json.loads(args.args_json)
        except ValueError as exc:
            raise InvalidRequest("args-json", f"invalid JSON: {exc}") from None
        if not isinstance(given, dict):
            raise InvalidRequest("args-json", "must be a JSON object (a next action's args)")
        return given
    if args.query is None:
        raise InvalidRequest("query", "a QUERY (or --args-json) is required")
    mode = "regex" if args.regex else "semantic" if args.semantic else "exact"
    data: dict[str, Any] = {"query": args.query}
    if args.word_regexp:
        if mode == "semantic":
            raise InvalidRequest("word-regexp", "-w matches words of text: not with --semantic")
        data["query"], mode = _word(args.query, mode), "regex"
    if mode != "exact":
        data["mode"] = mode
    for flag, key in (("namespace", "namespaces"), ("glob", "paths"), ("lang", "languages")):
        if getattr(args, flag):
            data[key] = list(getattr(args, flag))
    context = _context(args)
    if context is not None:
        data["context_lines"] = max(context)
    for flag, key in (
        ("case", "case_sensitive"),
        ("files", "files"),
        ("offset", "offset"),
        ("hit_budget", "hit_budget"),
        ("timeout_ms", "timeout_ms"),
        ("threshold", "threshold"),
    ):
        if getattr(args, flag) is not None:
            data[key] = getattr(args, flag)
    return data


def looks_like_regex(query: str) -> bool:
    """Whether literal text holds what is usually regex syntax (``\\w+``, ``.*``, ``\\(``)."""
    return any(mark in query for mark in _REGEX_MARKS)


def exit_code(answer: dict[str, Any]) -> int:
    """0 answered, 1 nothing matched, 3 every namespace failed: none answered and one at least
    failed (a namespace that cannot search in the mode asked did not fail: alone, they make 1)."""
    if answer["files"]:
        return EXIT_OK
    statuses = [s["status"] for s in answer["namespaces"]]
    failed = any(s not in ("ok", "unsupported") for s in statuses)
    return EXIT_ALL_FAILED if failed and "ok" not in statuses else EXIT_NOTHING


def _suffix(args: argparse.Namespace) -> str:
    """The flags a printed next action needs to run against the same namespaces."""
    given = [(flag, getattr(args, flag, None)) for flag in ("server", "config", "root")]
    if not any(value for _, value in given):
        return ""
    import shlex

    return " " + " ".join(f"--{flag} {shlex.quote(value)}" for flag, value in given if value)


def _color(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb" and "NO_COLOR" not in os.environ


def _highlight(data: dict[str, Any]) -> Any:
    """What to highlight: the request's pattern once the query's filters are taken out (SPEC §7),
    its case as the request reads it (smart case on the pattern by default)."""
    from gateway.syntax import parse_query

    mode = str(data.get("mode", "exact"))
    parsed = parse_query(str(data.get("query", "")), regex_mode=mode == "regex")
    mode = "regex" if parsed.regex else mode
    case = data.get("case_sensitive")
    for value in parsed.values("case"):
        case = {"yes": True, "no": False}.get(value, case)
    sensitive = any(ch.isupper() for ch in parsed.pattern) if case is None else bool(case)
    return render.highlighter(parsed.pattern, mode, sensitive)


def _next_page(answer: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any] | None:
    """The args of the answer's next-page action (None on the last page): the one action that goes
    further on (the others widen the search, from offset 0)."""
    for action in answer.get("next", []):
        args = action["args"]
        if action["tool"] == "search" and args.get("offset", 0) > asked.get("offset", 0):
            return dict(args)
    return None


def _list(args: argparse.Namespace, data: dict[str, Any], ask: Ask, scope: Scope) -> int:
    """-l, -c, --vimgrep: every matching file, page after page, as each page comes."""
    form = render.files_with_matches if args.files_with_matches else render.counts if args.count else render.vimgrep
    data = {"files": LIST_FILES, "hit_budget": LIST_HIT_BUDGET, **data}
    printed = 0
    answer = ask(data)
    first = answer
    while True:
        sys.stdout.write(form(answer, scope.locate))
        sys.stdout.flush()
        printed += len(answer["files"])
        following = _next_page(answer, data)
        if following is None:
            break
        data, answer = following, ask(following)
    failed, unable = render.unanswered(first["namespaces"])
    for text in ([f"not complete: {'; '.join(failed)}"] if failed else []) + unable:
        warn(text)
    return EXIT_OK if printed else exit_code(first)


def _show(args: argparse.Namespace, data: dict[str, Any], ask: Ask, scope: Scope) -> int:
    if args.files_with_matches or args.count or args.vimgrep:
        return _list(args, data, ask, scope)
    answer = ask(data)
    if args.json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
    else:
        color = _color(args.color)
        before, after = _context(args) or (0, 0)
        style = render.Style(color=color, highlight=_highlight(data) if color else None, before=before, after=after)
        sys.stdout.write(render.human(answer, style, scope.locate, _suffix(args)))
    sys.stdout.flush()
    code = exit_code(answer)
    if code == EXIT_NOTHING and data.get("mode", "exact") == "exact" and looks_like_regex(str(data["query"])):
        hint(f"{data['query']} looks like a regex: add --regex (-e) to search it as one")
    return code


def run(args: argparse.Namespace) -> int:
    """``fedsearch search``."""
    data = request_data(args)
    if args.paths and args.args_json is not None:
        raise InvalidRequest("PATH", "give PATHs or --args-json, not both (a next action names its namespaces)")
    if args.server:
        if args.paths:
            raise InvalidRequest("PATH", "PATHs name local folders: not with --server (use -n NS and -g GLOB)")
        from gateway.cli.client import Client

        with Client(args.server) as client:
            return _show(args, data, client.search, Scope())
    return _local(args, data)


def _local(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """In this process: by :mod:`gateway.cli.oneshot` over discovered checkouts when it takes the
    request (no event loop, no pydantic: most of a one-shot search's start-up), else by the service.
    Over discovered checkouts, rg starts first (:mod:`gateway.cli.early`), the rest imported meanwhile."""
    from gateway.cli.early import applies, speculate
    from gateway.cli.scope import discovered_scope

    found: Scope | None = None
    early: Early | None = None
    if applies(args.config):
        found = discovered_scope(args.root)
        if not args.paths:
            early = speculate(found.roots, data)
    try:
        return _searched(args, data, found, early)
    finally:
        if early is not None:
            early.close()


def _searched(args: argparse.Namespace, data: dict[str, Any], found: Scope | None, early: Early | None) -> int:
    """``_local``'s search, over the checkouts ``found`` by discovery (None: the config's namespaces)."""
    from gateway.cli.lean import import_msgspec

    import_msgspec()
    from gateway.cli import oneshot
    from gateway.cli.quick import quick_request
    from gateway.cli.scope import load, scope_of
    from gateway.log import configure

    configure(level="warning", lazy=True, stdlib=False)  # only what goes wrong; structlog imported then
    config: Config | None = None
    if found is not None:
        scope = found
    else:
        config = load(args)
        scope = scope_of(config)
    if args.paths:
        names, globs = scope.narrow(args.paths, data.get("namespaces", []))
        data = {**data, "namespaces": names}
        if globs:
            data["paths"] = [*data.get("paths", []), *globs]
    first = quick_request(data) if config is None else None
    if first is None:
        return _served(args, data, scope, config)
    one = oneshot.OneShot(scope.roots)
    later = _Later(args, scope)

    def ask(asked: dict[str, Any]) -> dict[str, Any]:
        if asked is data:
            return one.search(first, early)
        quick = quick_request(asked)
        return one.search(quick) if quick is not None else later.ask(asked)

    try:
        return _show(args, data, ask, scope)
    finally:
        one.close()
        later.close()


def _served(args: argparse.Namespace, data: dict[str, Any], scope: Scope, config: Config | None) -> int:
    """The search through :class:`~gateway.service.SearchService` (a config file, semantic mode, a cursor...)."""
    import asyncio

    from gateway.config import config_from_env
    from gateway.log import configure
    from gateway.request import parse_request
    from gateway.service import SearchService

    configure(level="warning", lazy=True)  # the service's libraries (asyncio...) log through stdlib logging
    parse_request(data)  # bad input is an error before anything is opened
    if config is None:  # discovered again: the same checkouts, warned of once already
        config = config_from_env(args.config, args.root)
    with asyncio.Runner() as runner:
        service = SearchService(config, process_cache=False)  # one process: only Redis outlives it
        try:
            return _show(args, data, lambda d: runner.run(service.search(parse_request(d))), scope)
        finally:
            runner.run(service.aclose())


class _Later:
    """The service, for a page of a one-shot search the quick request does not take (opened if one comes)."""

    def __init__(self, args: argparse.Namespace, scope: Scope) -> None:
        self.args = args
        self.scope = scope
        self._runner: Any = None
        self._service: Any = None

    def ask(self, data: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        from gateway.config import config_from_env
        from gateway.request import parse_request
        from gateway.service import SearchService

        request = parse_request(data)
        if self._service is None:
            from gateway.log import configure

            configure(level="warning", lazy=True)  # the service's libraries log through stdlib logging
            self._runner = asyncio.Runner()
            config = config_from_env(self.args.config, self.args.root)
            self._service = SearchService(config, process_cache=False)
        answer: dict[str, Any] = self._runner.run(self._service.search(request))
        return answer

    def close(self) -> None:
        if self._service is not None:
            self._runner.run(self._service.aclose())
            self._runner.close()
