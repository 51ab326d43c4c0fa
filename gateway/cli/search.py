"""``fedsearch search``: flags (rg's among them) -> a request -> the answer, printed.

The request is the one every surface sends (SPEC §2): rg's flags are spelled onto its
fields (``-e``/``-f`` patterns one regex, ``-w`` a word-bounded regex, ``-A/-B/-C`` its
``context_lines``, trailing PATHs its namespaces and path globs). Without ``--server`` the
search runs in this process through :class:`~gateway.service.SearchService` (or the one-shot
search, :mod:`gateway.cli.oneshot`, answering alike), so ``--json`` prints exactly what HTTP
answers. Run in a subfolder of a checkout (no ``--root``), it searches that folder and below, as
rg does. Over discovered checkouts ``-l``, ``-c``, ``--count-matches``, ``--vimgrep`` and
``--files`` are rg's own listings (:mod:`gateway.cli.listing`); elsewhere ``-l``, ``-c`` and
``--vimgrep`` follow the answer's next-page action until there is none. A page's summary and
next commands go to stderr when stdout is no terminal: a pipe gets the results alone.
"""

from __future__ import annotations

import sys

from gateway.cli.flags import context, normalise, request_data, wants_color
from gateway.cli.messages import hint, warn
from gateway.cli.scope import Scope
from gateway.errors import InvalidRequest

TYPE_CHECKING = False  # typing and argparse not imported: a listing starts rg without them
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from gateway.cli import render
    from gateway.cli.early import Early
    from gateway.cli.scope import Place
    from gateway.config import Config

    Ask = Callable[[dict[str, Any]], dict[str, Any]]

__all__ = ["exit_code", "looks_like_regex", "request_data", "run"]

EXIT_OK, EXIT_NOTHING, EXIT_ALL_FAILED = 0, 1, 3
#: A listing (-l, -c, --vimgrep) asks for pages this large: the most a request may.
LIST_FILES, LIST_HIT_BUDGET = 200, 5000
#: gateway.cli.listing.KINDS, named here without importing it (a listing's start-up test counts imports).
_LISTINGS = ("files_with_matches", "count", "count_matches", "vimgrep", "list_files")
#: Regex syntax that is rarely meant literally: a hint to add --regex when nothing matched.
_REGEX_MARKS = ("\\w", "\\d", "\\s", "\\b", "\\(", "\\)", "\\[", "\\.", ".*", ".+", "(?", "[^", "\\S", "\\W")
#: Listings only rg prints (over checkouts searched here), and the flags only rg reads.
_RG_ONLY = {"count_matches": "--count-matches", "list_files": "--files"}


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


def _highlight(data: dict[str, Any]) -> Any:
    """What to highlight: the request's pattern once the query's filters are taken out (SPEC §7),
    its case as the request reads it (smart case on the pattern by default)."""
    from gateway.cli import render  # here, not at the top: a listing over checkouts found here never needs it
    from gateway.query.syntax import parse_query

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
    """-l, -c, --vimgrep from the service's answers (a config's namespaces, --server): every matching
    file, page after page, as each page comes."""
    from gateway.cli import render
    from gateway.sizing import MAX_CHAR_BUDGET

    form = render.files_with_matches if args.files_with_matches else render.counts if args.count else render.vimgrep
    data = {
        "files": LIST_FILES,
        "hit_budget": LIST_HIT_BUDGET,
        "char_budget": MAX_CHAR_BUDGET,
        "hit_lines": None,
        **data,
    }
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


def _style(args: argparse.Namespace, data: dict[str, Any]) -> render.Style:
    """How the flags ask a page to be printed."""
    from gateway.cli import render

    color = wants_color(args.color)
    if args.max_count is not None and args.max_count < 0:
        raise InvalidRequest("max-count", "-m must be at least 0")
    before, after = context(args) or (0, 0)
    return render.Style(
        color=color,
        highlight=_highlight(data) if color or args.only_matching else None,
        before=before,
        after=after,
        numbers=args.line_number is not False,
        only=args.only_matching,
        max_count=args.max_count,
    )


def _show(args: argparse.Namespace, data: dict[str, Any], ask: Ask, scope: Scope) -> int:
    from gateway.cli import render

    if args.files_with_matches or args.count or args.vimgrep:
        return _list(args, data, ask, scope)
    answer = ask(data)
    if args.json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
        sys.stdout.flush()
    else:
        style = _style(args, data)
        found = render.human(answer, style, scope.locate)
        sys.stdout.write(found)
        sys.stdout.flush()
        # the summary and next commands: after the files on a terminal, else on stderr (a pipe gets results only)
        terminal = sys.stdout.isatty()
        tail = sys.stdout if terminal else sys.stderr
        tail.write(("\n" if found and terminal else "") + "\n".join(render.summary(answer, style.color, _suffix(args))))
        tail.write("\n")
        tail.flush()
    code = exit_code(answer)
    if code == EXIT_NOTHING and data.get("mode", "exact") == "exact" and looks_like_regex(str(data["query"])):
        hint(f"{data['query']} looks like a regex: add --regex to search it as one")
    return code


def run(args: argparse.Namespace) -> int:
    """``fedsearch search``."""
    if args.type_list:
        from gateway.cli.render import type_list

        sys.stdout.write(type_list())
        return EXIT_OK
    normalise(args)
    if args.patterns == []:
        return EXIT_NOTHING  # -f named an empty file: no pattern, nothing matches (as rg)
    data = request_data(args)
    if not args.json and args.args_json is None and not _listing(args):  # a person's page, every line
        from gateway.sizing import PERSON

        data = {**PERSON, "hit_lines": None, **data}
    if args.paths and args.args_json is not None:
        raise InvalidRequest("PATH", "give PATHs or --args-json, not both (a next action names its namespaces)")
    if args.server:
        if args.paths:
            raise InvalidRequest("PATH", "PATHs name local folders: not with --server (use --ns NS and -g GLOB)")
        _here_only(args, "--server")
        from gateway.cli.client import Client

        with Client(args.server) as client:
            return _show(args, data, client.search, Scope())
    return _local(args, data)


def _listing(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a listing (-l, -c, --vimgrep, ...: :data:`gateway.cli.listing.KINDS`)."""
    return any(getattr(args, kind, False) for kind in _LISTINGS)


def _here_only(args: argparse.Namespace, where: str) -> None:
    """What only an rg started here does: not over a config's namespaces (``where`` "--config") or a server's."""
    given = [flag for name, flag in _RG_ONLY.items() if getattr(args, name)]
    if args.hidden:
        given.append("--hidden")
    if args.unrestricted:
        given.append("-" + "u" * args.unrestricted)
    if given:
        raise InvalidRequest(where.lstrip("-"), f"{given[0]} works on the checkouts found here, not with {where}")


def _local(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """In this process: over discovered checkouts, a listing by rg itself (:mod:`gateway.cli.listing`), a
    page by :mod:`gateway.cli.oneshot` when it takes the request (no event loop, no pydantic: most of a
    one-shot search's start-up), else by the service. Over discovered checkouts, rg starts first
    (:mod:`gateway.cli.early`), the rest imported meanwhile."""
    from gateway.cli.early import applies, speculate
    from gateway.cli.listing import file_flags, kind_of
    from gateway.cli.scope import discovered_scope, from_here

    found: Scope | None = None
    early: Early | None = None
    places: list[Place] | None = None
    if applies(args.config):
        found = discovered_scope(args.root)
        here = found.here()
        if here is not None and args.args_json is None:  # in a subfolder of a checkout: there and below, as rg
            if data.get("paths"):
                data = {**data, "paths": from_here(data["paths"], here)}
            if not args.paths and not args.root:
                places = [here]
        if args.paths:
            places = found.places(args.paths, data.get("namespaces", []))
        if kind_of(args) is not None:
            from gateway.cli import listing

            code = listing.run(args, data, found, places)
            if code is not None:
                return code
        elif places is None and not file_flags(args):
            early = speculate(found.roots, data)
    else:
        _here_only(args, "--config")
    try:
        return _searched(args, data, found, places, early)
    finally:
        if early is not None:
            early.close()


def _searched(
    args: argparse.Namespace, data: dict[str, Any], found: Scope | None, places: list[Place] | None, early: Early | None
) -> int:
    """``_local``'s search, over the checkouts ``found`` by discovery (None: the config's namespaces) or
    the ``places`` there."""
    from gateway.cli.lean import import_msgspec

    import_msgspec()
    from gateway.cli import oneshot
    from gateway.cli.listing import file_flags
    from gateway.cli.quick import quick_request
    from gateway.cli.scope import load, scope_of
    from gateway.log import configure

    configure(level="warning", lazy=True, stdlib=False)  # only what goes wrong; structlog imported then
    config: Config | None = None
    if found is not None:
        scope = found
        if places is not None:
            names, globs = Scope.request_of(places)
            if args.paths:  # (the folder it runs in: its namespace is the only one there, --ns as given)
                data = {**data, "namespaces": names}
            if globs:
                data["paths"] = [*data.get("paths", []), *globs]
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
        if file_flags(args):
            raise InvalidRequest(
                "hidden", "--hidden and -u work on a search the checkouts found here run (exact or regex)"
            )
        return _served(args, data, scope, config)
    one = oneshot.OneShot(scope.roots, file_flags(args))
    try:
        return _show(args, data, lambda _: one.search(first, early), scope)  # one page: rg prints listings here
    finally:
        one.close()


def _served(args: argparse.Namespace, data: dict[str, Any], scope: Scope, config: Config | None) -> int:
    """The search through :class:`~gateway.service.SearchService` (a config file, semantic mode, a cursor...)."""
    import asyncio

    from gateway.config import config_from_env
    from gateway.log import configure
    from gateway.query.request import parse_request
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
