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

import os
import sys

from gateway.cli import rgflags
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

    rgflags.refuse_in_served_listing(args)
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
        sys.stdout.write(form(answer, scope.locate, args.null, args.filename is not False))  # -0, -I as rg
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


def _style(args: argparse.Namespace, data: dict[str, Any], scope: Scope) -> render.Style:
    """How the flags ask a page to be printed (rg's output flags: gateway.cli.rgflags.page_fields)."""
    from gateway.cli import render

    color = wants_color(args.color)
    if args.max_count is not None and args.max_count < 0:
        raise InvalidRequest("max-count", "-m must be at least 0")
    before, after = context(args) or (0, 0)
    located = bool(args.column or args.max_columns)  # a column, or -M's count of matches, needs the matches
    return render.Style(
        color=color,
        highlight=_highlight(data) if color or args.only_matching or located else None,
        before=before,
        after=after,
        numbers=args.line_number is not False,
        only=args.only_matching,
        max_count=args.max_count,
        original=render.local_lines(scope.roots),
        **rgflags.page_fields(args, data),
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
        style = _style(args, data, scope)
        found = render.human(answer, style, scope.locate)
        sys.stdout.write(found)
        sys.stdout.flush()
        # the summary and next commands: after the files on a terminal, else on stderr (a pipe gets results only)
        terminal = sys.stdout.isatty()
        tail = sys.stdout if terminal else sys.stderr
        said = _honest(answer, args)
        tail.write(("\n" if found and terminal else "") + "\n".join(render.summary(said, style.color, _suffix(args))))
        tail.write("\n")
        tail.flush()
    code = exit_code(answer)
    typed = str(getattr(args, "typed_query", None) or data.get("query", ""))
    if code == EXIT_NOTHING and data.get("mode", "exact") == "exact" and looks_like_regex(typed):
        hint(f"{typed} looks like a regex: add --regex to search it as one")
    return code


def run(args: argparse.Namespace) -> int:
    """``fedsearch search``."""
    if args.quiet:  # rg's -q: the exit code alone (gateway.cli.rgflags.quietly)
        return rgflags.quietly(args, run)
    if args.type_list:
        from gateway.cli.render import type_list

        sys.stdout.write(type_list())
        return EXIT_OK
    normalise(args)
    if args.patterns == []:
        return EXIT_NOTHING  # -f named an empty file: no pattern, nothing matches (as rg)
    data = request_data(args)
    rgflags.check(args, data)  # what no surface prints as rg does: refused, naming the flag
    args.typed_query = data.get("query")  # before the folder searched joins it (a note names what was typed)
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
            here = Scope()  # the server's namespaces printed as ns/path, unless they are checkouts found here
            if args.args_json is None and not args.root:
                scoped = _served_here(args, data, client, here)
                if scoped is None:
                    return _nothing(args, data)
                data = scoped
            return _show(args, data, client.search, here)
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
    if args.max_depth is not None:
        given.append("--max-depth")
    if given:
        raise InvalidRequest(where.lstrip("-"), f"{given[0]} works on the checkouts found here, not with {where}")


def _local(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """In this process: over discovered checkouts, a listing by rg itself (:mod:`gateway.cli.listing`), a
    page by :mod:`gateway.cli.oneshot` when it takes the request (no event loop, no pydantic: most of a
    one-shot search's start-up), else by the service. Over discovered checkouts, rg starts first
    (:mod:`gateway.cli.early`), the rest imported meanwhile."""
    from gateway.cli.early import applies, speculate
    from gateway.cli.listing import file_flags, kind_of
    from gateway.cli.scope import discovered_scope

    found: Scope | None = None
    early: Early | None = None
    places: list[Place] | None = None
    if applies(args.config):
        found = discovered_scope(args.root)
        here = found.here()
        if here is not None and args.args_json is None and not args.paths and not args.root:
            places = [here]  # in a subfolder of a checkout: there and below, as rg
        if args.paths:
            places = found.places(args.paths, data.get("namespaces", []))
        scoped = _globs_here(args, data, found, places)
        if scoped is None:
            return _nothing(args, data)
        data = scoped
        if kind_of(args) is not None:
            from gateway.cli import listing

            code = listing.run(args, data, found, places)
            if code is not None:
                return code
        elif places is None and not file_flags(args) and args.max_depth is None:
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
            data = _within(data, globs)
            args.where = _where(places)
    else:
        config = load(args)
        scope = scope_of(config)
        if args.paths:
            places = scope.places(args.paths, data.get("namespaces", []))
        scoped = _globs_here(args, data, scope, places)
        if scoped is None:
            return _nothing(args, data)
        data = scoped
        if places is not None:
            names, globs = Scope.request_of(places)
            data = _within({**data, "namespaces": names}, globs)
            args.where = _where(places)
    first = quick_request(data) if config is None else None
    if first is not None and first.criteria.mode == "semantic":
        answered = None if args.max_depth is not None or file_flags(args) else _by_meaning(scope, first)
        if answered is not None:
            return _show(args, data, lambda _: answered, scope)
        first = None  # the service: it builds what is not built yet, or words the error
    if first is None:
        if args.max_depth is not None:
            raise InvalidRequest("max-depth", "--max-depth works on a search the checkouts here run (exact or regex)")
        if file_flags(args):
            raise InvalidRequest(
                "hidden", "--hidden and -u work on a search the checkouts found here run (exact or regex)"
            )
        return _served(args, data, scope, config)
    one = oneshot.OneShot(scope.roots, [*file_flags(args), *rgflags.page_depth(args, scope, data)])
    try:
        return _show(args, data, lambda _: one.search(first, early), scope)  # one page: rg prints listings here
    finally:
        one.close()


def _by_meaning(scope: Scope, request: Any) -> dict[str, Any] | None:
    """A search by meaning of the checkouts found here, without the service (issue 52), where their intent
    indexes are built (None: the service's turn)."""
    from gateway.cli import oneshot

    one = oneshot.OneShot(scope.roots)
    try:
        return one.semantic(request)
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


# --- where the user stands (issue 49): the folder an AND with -g, globs read from here ---------------


def _in_play(data: dict[str, Any], scope: Scope, places: list[Place] | None) -> list[str]:
    """The local namespaces a request over ``scope`` searches: the places' (PATHs, the folder it runs in), else
    those ``--ns`` patterns name, else all."""
    if places is not None:
        return list(dict.fromkeys(p.namespace for p in places))
    patterns = data.get("namespaces") or []
    if not patterns:
        return list(scope.roots)
    from gateway.query.globs import namespace_matcher

    matchers = [namespace_matcher(str(p)) for p in patterns]
    return [name for name in scope.roots if any(m(name) for m in matchers)]


def _globs_here(
    args: argparse.Namespace, data: dict[str, Any], scope: Scope, places: list[Place] | None
) -> dict[str, Any] | None:
    """``data`` with its ``-g`` globs read where the command runs, as rg reads them (gateway.cli.scope.globs_here):
    anchored ones made relative to each namespace's root, the namespaces they leave nothing of dropped; None
    when they leave nothing to search at all. ``--args-json`` is the request as given."""
    if args.args_json is not None or not data.get("paths"):
        return data
    from gateway.cli.scope import globs_here

    searched = _in_play(data, scope, places)
    paths, kept = globs_here(data["paths"], scope, searched)
    if not kept and searched:
        return None
    out = {**data, "paths": paths}
    if kept != searched:
        out["namespaces"] = kept
    return out


def _within(data: dict[str, Any], globs: list[str]) -> dict[str, Any]:
    """``data`` searching only under ``globs`` (the folder it runs in, the PATHs given): as the query's ``file:``
    filters (SPEC §7), which must hold as well as the request's ``paths`` (an AND with ``-g``, as rg's folder and
    its globs), its pattern unchanged."""
    if not globs or "query" not in data:
        return data if not globs else {**data, "paths": [*data.get("paths", []), *globs]}  # --files: no query
    from gateway.query.syntax import parse_query, with_pattern

    query, regex = str(data["query"]), data.get("mode", "exact") == "regex"
    parsed = parse_query(query, regex)
    mine = ["file:" + _quoted(glob) for glob in globs]
    if parsed.regex:  # /RE/ as the whole pattern: it stays so beside filters
        return {**data, "query": " ".join([query, *mine])}
    plain = not parsed.filters and parsed.pattern == query  # the pattern is the query as typed, spaces and all
    pattern = query if plain else parsed.pattern
    return {**data, "query": with_pattern(" ".join([*(f.text for f in parsed.filters), *mine]), pattern, regex)}


def _quoted(glob: str) -> str:
    """A filter's value as the query syntax reads it: quoted where it must be."""
    if any(c.isspace() or c in '"\\' for c in glob):
        return '"' + glob.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return glob


def _nothing(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """The globs leave nothing to search (they exclude every checkout here, or name nothing in any): said as
    a search that found nothing (``--json``: an answer of no file, its note saying why)."""
    said = f"{_typed(args)} leave nothing to search here"
    if not args.json:
        sys.stderr.write(f"0 files matched: {said}\n")
        return EXIT_NOTHING
    import orjson

    from gateway.query.request import parse_request
    from gateway.rank import Ranked, page
    from gateway.wire import build_response

    request = parse_request(data)  # bad input is still an error naming its field
    lines = page([], 0, request.files, request.hit_budget, request.char_budget, request.hit_lines)[1].lines
    empty = Ranked(
        page=[],
        file_count=0,
        weak_filtered=0,
        truncated=False,
        next=[],
        note=said,
        statuses=[],
        offset=0,
        hit_lines=lines,
    )
    sys.stdout.buffer.write(orjson.dumps(build_response(request, empty, 0)) + b"\n")
    sys.stdout.flush()
    return EXIT_NOTHING


def _typed(args: argparse.Namespace) -> str:
    """The filters as typed: ``-g`` globs and ``-t`` languages."""
    import shlex

    return " ".join([*(f"-g {shlex.quote(g)}" for g in args.glob or []), *(f"-t {t}" for t in args.lang or [])])


def _served_here(args: argparse.Namespace, data: dict[str, Any], client: Any, printed: Scope) -> dict[str, Any] | None:
    """A ``--server`` search scoped as the same search here would be (the folder it runs in, its checkouts,
    ``-g`` read from here): the checkouts found here are matched to the server's namespaces by name (a
    namespace named ``team/beta`` is a checkout whose folder ends in ``team/beta``, as discovery names them),
    and ``printed`` learns their folders (their files print relative to here, as a local search prints them);
    ``data`` as it is where none is found here or served there. None: the globs leave nothing to search."""
    from gateway.discovery import discovered

    try:
        _, found = discovered(None)
    except Exception:  # no folder to look in (it was removed): searched as asked
        return data
    if not found:
        return data
    served = [str(ns["name"]) for ns in client.namespaces()]
    roots: dict[str, str] = {}
    for _, path in found:
        real = os.path.realpath(path)
        names = [n for n in served if real == n or real.endswith("/" + n)]
        if names:
            roots[max(names, key=len)] = real
        else:
            warn(f"{path} is no namespace of {args.server}: not searched there")
    if not roots:
        return data
    scope = Scope(roots)
    printed.roots.update(roots)
    here = scope.here()
    places = [here] if here is not None else None
    scoped = _globs_here(args, data, scope, places)
    if scoped is None:
        return None
    data = scoped
    if not data.get("namespaces"):
        data = {**data, "namespaces": _in_play(data, scope, places)}
    if places is not None:
        _, globs = Scope.request_of(places)
        data = _within(data, globs)
        args.where = _where(places)
    return data


def _where(places: list[Place]) -> str:
    """The folders searched, as a note names them: the PATHs as typed, else the folder it runs in (``flask/src``)."""
    shown = [p.shown if p.shown else f"{p.namespace}/{p.rel}" if p.rel else p.namespace for p in places]
    return ", ".join(dict.fromkeys(shown))


def _honest(answer: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The answer as its summary says it: an empty answer's note names only what the user gave (the query as
    typed, the folder it runs in or the PATHs, the globs and languages as typed), not the ``file:`` filters
    and root-relative globs the request was given for them."""
    note = answer.get("note")
    if answer.get("files") or not isinstance(note, str) or not note.startswith("nothing matched "):
        return answer
    typed = getattr(args, "typed_query", None)
    where = getattr(args, "where", "")
    if typed is None or args.args_json is not None:
        return answer
    first, sep, rest = note.partition("; ")
    _, _, counted = first.rpartition(" in ")  # "1 namespace with these path/language filters"
    namespaces = counted.split(" with ")[0]
    filters = _typed(args)
    said = f"nothing matched {_quote(str(typed))} in {where or namespaces}" + (f" with {filters}" if filters else "")
    return {**answer, "note": said + sep + rest}


def _quote(text: str) -> str:
    return f'"{text}"' if "'" in text else f"'{text}'"
