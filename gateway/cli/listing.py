"""rg's listings over discovered checkouts, printed by rg itself: ``-l``, ``-c``, ``--count-matches``,
``--vimgrep`` and ``--files``.

A listing is every matching file (or match) in rg's own format, so it is what rg prints: one rg
over the places searched, its output passed on as it comes, with no ranking, paging, snapshot
or declaration lookup (a ranked page would cost all of those for an order a listing does not
keep). What the request asks of rg is the one-shot search's (:mod:`gateway.cli.oneshot`):

1. the request checked as :func:`~gateway.cli.quick.quick_request` checks it (pydantic words an
   error), its namespaces chosen by :func:`~gateway.cli.oneshot.routes`, its pattern and case as
   :class:`~gateway.query.criteria.Criteria` reads them;
2. rg runs here, over the places as the user named them (a PATH as typed, the checkouts under
   here, nothing for the folder it stands in), so it prints the paths it would print itself;
3. what rg cannot apply as the service does (include globs, languages, globs anchored at a
   namespace's root, the query's ``file:`` filters) is applied to its output: then rg prints
   NUL-ended paths (``--null``), each looked at and printed as rg would have;
4. with checkouts whose content indexes are ready and large enough (a gigabyte together:
   :data:`LIST_INDEX_SHARE`), rg reads only the files and folders they name
   (:mod:`gateway.narrowing`), and the paths it prints are given back as rg would print them
   from here.

A plain request (a query of text alone, exact or free of regex syntax, no ``--ns``, no glob but
simple excludes, no language) is certainly valid: rg starts at once, before anything that checks
a request (msgspec, RE2) is imported, the standard library alone. Anything else is checked first.
Where content indexes are read, a plain request's rg scans from the start all the same while they
are asked (a query most files hold is answered "common" only after the imports and a stat of every
file): the indexes stop being asked once it ended, and it is kept unless every place is narrowed
while it still runs, then the rg over the files named replaces it. :mod:`gateway.cli.relay` runs
rg and passes its output on.
"""

from __future__ import annotations

import os

from adapters.ripgrep.spawn import find_rg
from gateway.cli import rgflags
from gateway.errors import BackendError, InvalidRequest

TYPE_CHECKING = False  # typing, argparse and collections not imported: a plain listing starts rg without them
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from gateway.cli.quick import QuickRequest
    from gateway.cli.scope import Place, Scope

__all__ = ["KINDS", "LIST_INDEX_SHARE", "file_flags", "kind_of", "run"]

#: args attribute -> rg's flag, for each listing.
KINDS = {
    "files_with_matches": "--files-with-matches",
    "count": "--count",
    "count_matches": "--count-matches",
    "vimgrep": "--vimgrep",
    "list_files": "--files",
}
#: Listings printing a bare path (NUL-ended with --null); the others print ``path:rest`` lines.
_PATHS_ONLY = frozenset({"files_with_matches", "list_files"})
#: What makes a query more than its text (SPEC §7): such a query is checked before rg starts.
_SYNTAX = frozenset(':"/')
#: A listing reads content indexes where they index this many times what the one-shot search needs
#: (CLI_MIN_BYTES, 64 MiB: 1 GiB). Without a file watcher, asking them costs a stat of every file and
#: ~50 ms of imports; rg -l reads 73 MB in ~45 ms (the 8 checkouts), 3 GB in ~1.2 s, where the stats
#: take ~0.8 s (bench/README.md): below a gigabyte rg alone lists sooner.
LIST_INDEX_SHARE = 16
#: --files searches for nothing: its request is checked with this query standing in.
_ANY = "files"
#: Regex syntax (as gateway.query.syntax escapes it): a regex without any is its own literal text, valid.
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")
#: The bounds of a plain request, as gateway.query.criteria and gateway.query.globs check them (not imported: they
#: import msgspec and RE2; tests/test_cli_rg.py holds them equal).
_MOST_QUERY, _MOST_GLOBS, _MOST_GLOB, _MOST_STARS = 1000, 32, 256, 16
#: What a plain exclude glob is made of: a name, or a pattern of ``*``.
_GLOB_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-*")


def kind_of(args: argparse.Namespace) -> str | None:
    """Which listing the flags ask for, or None."""
    return next((kind for kind in KINDS if getattr(args, kind, False)), None)


def file_flags(args: argparse.Namespace) -> list[str]:
    """rg's flags choosing which files it reads: ``--hidden``, and ``-u`` (no ignore files), ``-uu``
    (hidden files too), ``-uuu`` (binary files too), as rg reads them."""
    level = args.unrestricted
    flags = ["--no-ignore"] if level >= 1 else []
    if args.hidden or level >= 2:
        flags.append("--hidden")
    if level >= 3:
        flags.append("--binary")
    return flags


def _own_flags(args: argparse.Namespace, kind: str) -> list[str]:
    """The listing's flags and the rg options passed as given (-m, -o, -n/-N, and rg's output flags but -0, -I
    and --max-depth: gateway.cli.rgflags)."""
    flags = [KINDS[kind], *file_flags(args), *rgflags.listing_flags(args)]
    if args.max_count is not None:
        if args.max_count < 0:
            raise InvalidRequest("max-count", "-m must be at least 0")
        flags += ["--max-count", str(args.max_count)]
    if args.only_matching:
        flags.append("--only-matching")
    if args.line_number is not None:
        flags.append("--line-number" if args.line_number else "--no-line-number")
    return flags


class Target:
    """A place rg searches: its namespace and root, the path inside it, and how rg is given it."""

    __slots__ = ("is_file", "namespace", "rel", "root", "shown")

    def __init__(self, namespace: str, root: str, rel: str, is_file: bool, shown: str) -> None:
        self.namespace = namespace
        self.root = root
        self.rel = rel
        self.is_file = is_file
        self.shown = shown

    def show(self, rel: str) -> str:
        """How rg prints the file ``rel`` (namespace-relative) found under this place."""
        if self.is_file:
            return self.shown
        rest = rel[len(self.rel) + 1 :] if self.rel else rel
        return f"{self.shown.rstrip('/')}/{rest}" if self.shown else rest

    def holds(self, rel: str) -> bool:
        return not self.rel or rel == self.rel or (not self.is_file and rel.startswith(self.rel + "/"))


def _targets(scope: Scope, names: Sequence[str], places: Sequence[Place] | None) -> list[Target]:
    """The places rg searches: those named, in the namespaces searched; else each namespace's root."""
    if places is None:
        roots = [(n, scope.roots[n]) for n in names]
        return [Target(n, root, "", False, _relative(root, scope.cwd)) for n, root in roots]
    return [
        Target(p.namespace, scope.roots[p.namespace], p.rel, p.is_file, p.shown) for p in places if p.namespace in names
    ]


def _relative(path: str, cwd: str) -> str:
    """``path`` as rg prints it given relative to ``cwd`` ("" for ``cwd`` itself: rg is given no path)."""
    shown = os.path.relpath(path, cwd)
    return "" if shown == "." else shown


class Plan:
    """An rg to run: its argument vector, and how a path it prints is printed (None: all as rg prints them;
    the resolver answers None for a path to leave out)."""

    __slots__ = ("argv", "resolve")

    def __init__(self, argv: list[str], resolve: Callable[[str], str | None] | None = None) -> None:
        self.argv = argv
        self.resolve = resolve


def _argv(
    rg: str,
    flags: Sequence[str],
    pattern: str | None,
    exact: bool,
    case: bool,
    excludes: Sequence[str],
    paths: Sequence[str],
) -> list[str]:
    """rg's vector: the listing's flags, the pattern as the one-shot search gives it, the excludes rg
    can apply, the places (none: the folder it runs in)."""
    argv = [rg, "--no-config", *flags]
    if pattern is not None:
        argv += ["-F", "-s" if case else "-i"] if exact else ["-s" if case else "-i"]
    for glob in excludes:
        argv += ["-g", "!" + glob]
    if pattern is not None:
        argv += ["-e", pattern]
    return [*argv, "--", *paths] if paths else argv


def _unanchored_excludes(globs: Sequence[str]) -> list[str]:
    """The exclude globs (``!`` taken off) rg applies as the service does wherever it runs: those no later
    include overrides (after the last include: they only remove what the service removes too) that name a
    file or folder by its name alone (no ``/`` but a trailing one, or ``**/`` first and none after, no negated
    class; any other is matched on the path from where rg runs). As :func:`gateway.query.globs.rg_excludes` and
    :func:`~gateway.query.globs.anywhere` (not imported: they import RE2); tests/test_glob_rg.py holds them equal."""
    last = max((i for i, g in enumerate(globs) if not g.startswith("!")), default=-1)
    natives: list[str] = []
    for glob in globs[last + 1 :]:
        body = glob[1:]
        line = body.removesuffix("/")
        name = line[3:] if line.startswith("**/") else line
        if not body.startswith("/") and "/" not in name and "[!" not in name and "[^" not in name:
            natives.append(body)
    return natives


def _filtered(globs: Sequence[str], languages: Sequence[str]) -> bool:
    """Whether some glob or language is left for the output: languages, includes, the excludes rg is not
    given (:func:`_unanchored_excludes`)."""
    return bool(languages) or len(_unanchored_excludes(globs)) < len(globs)


def _depth(args: argparse.Namespace, scope: Scope, targets: Sequence[Target]) -> list[str]:
    """rg's --max-depth for rg given these places (gateway.cli.rgflags.listing_depth); none without the flag."""
    return rgflags.listing_depth(args, scope, [(t.shown, t.is_file) for t in targets])


def _places(targets: Sequence[Target]) -> list[str]:
    """rg's path arguments: none for the folder it runs in alone."""
    shown = [t.shown for t in targets]
    return [] if shown == [""] else [s or "." for s in shown]


def _color(args: argparse.Namespace) -> list[str]:
    from gateway.cli.flags import wants_color

    return ["--color=always" if wants_color(args.color) else "--color=never"]


def _indexed(kind: str, args: argparse.Namespace, scope: Scope, names: Sequence[str]) -> bool:
    """Whether rg reads what the content indexes name (as :meth:`gateway.cli.oneshot.OneShot.content`, from
    :data:`LIST_INDEX_SHARE` times its size on)."""
    if kind == "list_files" or file_flags(args) or rgflags.unnarrowed(args):
        return False  # nothing to narrow by; the indexes know only the files rg reads without those flags (and
        # rg over the files they name neither sorts them all nor counts --max-depth from where rg would)
    from gateway.discovery import default_index_dir

    directory = default_index_dir()
    try:  # no content index ever built here (gateway.index.content.paths.content_dir): nothing more to read
        if not any(name.startswith("content-") for name in os.listdir(os.path.expanduser(directory))):
            return False
    except OSError:
        return False
    from gateway.index.content import paths

    indexed = paths.usable_bytes(directory, [scope.roots[n] for n in names])
    return indexed > 0 and indexed >= LIST_INDEX_SHARE * paths.CLI_MIN_BYTES


def _simple(glob: Any) -> bool:
    """Whether ``glob`` is an exclude rg applies as the service does, certainly valid (see validate_glob)."""
    body = glob[1:] if isinstance(glob, str) and glob.startswith("!") else ""
    return 0 < len(body) <= _MOST_GLOB and body.count("*") <= _MOST_STARS and not set(body) - _GLOB_CHARS


def _plain(
    args: argparse.Namespace, kind: str, data: dict[str, Any], scope: Scope, places: Sequence[Place] | None
) -> Plan | None:
    """rg for a request certainly valid that rg alone applies (see the module), else None: what
    :func:`_plans` would start for it, without importing what checks a request."""
    text, mode = data.get("query"), data.get("mode", "exact")
    globs, case = data.get("paths", []), data.get("case_sensitive")
    if data.keys() - {"query", "mode", "case_sensitive", "paths", "context_lines"} or mode not in ("exact", "regex"):
        return None
    if data.get("context_lines", 0) not in range(11) or case not in (True, False, None):
        return None
    if kind != "list_files":
        if not (isinstance(text, str) and 0 < len(text) <= _MOST_QUERY and text.strip() and "\0" not in text):
            return None
        if _SYNTAX.intersection(text) or (mode == "regex" and _REGEX_META.intersection(text)):
            return None
    if not isinstance(globs, list) or len(globs) > _MOST_GLOBS or not all(map(_simple, globs)):
        return None
    rg = find_rg()
    if rg is None:
        return None
    pattern = None if kind == "list_files" else str(text)
    if case is None:  # smart case, as gateway.query.criteria.effective_case
        case = pattern is not None and any(ch.isupper() for ch in pattern)
    targets = _targets(scope, list(scope.roots), places)
    flags = [*_own_flags(args, kind), *_depth(args, scope, targets), *_color(args), *rgflags.printed_flags(args)]
    argv = _argv(rg, flags, pattern, mode == "exact", bool(case), _unanchored_excludes(globs), _places(targets))
    return Plan(argv) if targets else None


def _checked(data: dict[str, Any]) -> QuickRequest | None:
    """The request, checked; InvalidRequest as pydantic words it; None for one the one-shot search
    does not run (a mode of the service's)."""
    from gateway.cli.lean import import_msgspec

    import_msgspec()
    from gateway.cli.quick import quick_request

    request = quick_request(data)
    if request is None:
        from gateway.query.request import parse_request

        parse_request(data)  # raises InvalidRequest for bad input
    return request


def _keeper(paths: Sequence[str], also: Sequence[str], languages: Sequence[str]) -> Callable[[str], bool]:
    """Whether a namespace-relative path passes the request's globs and languages (as the service's filter)."""
    from gateway.query.globs import PathFilter

    passes = PathFilter.build(paths, languages)
    if not also:
        return passes
    passes_too = PathFilter.build(also)
    return lambda path: passes(path) and passes_too(path)


class Plans:
    """The rg of a checked request: over the places scanned, and over what content indexes name of the rest."""

    __slots__ = ("named", "scan")

    def __init__(self, scan: Plan | None, named: Plan | None) -> None:
        self.scan = scan
        self.named = named

    def __iter__(self) -> Iterator[Plan | None]:
        return iter((self.scan, self.named))


class _Overtaken(Exception):
    """The rg scanning since the start ended while the content indexes were being asked: it is the answer."""


def _plans(
    args: argparse.Namespace,
    kind: str,
    data: dict[str, Any],
    scope: Scope,
    places: Sequence[Place] | None,
    ended: Callable[[], bool] = lambda: False,
) -> Plans | None:
    """The rg (or two) of the request, once checked; None for a request the one-shot search does not run.
    ``ended``: whether an rg scanning every place already ended (then asking the indexes stops: _Overtaken)."""
    request = _checked(data if kind != "list_files" else {**data, "query": _ANY})
    if request is None:
        return None
    if ended():
        raise _Overtaken
    from gateway.cli.oneshot import routes

    rg = find_rg()
    if rg is None:
        raise BackendError("the rg binary was not found (install the 'ripgrep' package)")
    criteria = request.criteria
    names = routes(list(scope.roots), request)
    targets = _targets(scope, names, places)
    globs = [*criteria.paths, *criteria.also_paths]
    filtered = _filtered(globs, criteria.languages)
    keep = _keeper(criteria.paths, criteria.also_paths, criteria.languages) if filtered else None
    pattern = None if kind == "list_files" else criteria.pattern
    exact, case = criteria.mode == "exact", request.effective_case()
    excludes = _unanchored_excludes(criteria.paths)
    flags = [*_own_flags(args, kind), *_depth(args, scope, targets)]
    named: Plan | None = None
    if pattern is not None and not any(t.is_file for t in targets) and _indexed(kind, args, scope, names):
        targets, files, among = _narrowed(request, scope, targets, keep, ended)
        if files:
            only = [*flags, "--color=never", "--null", "--with-filename"]
            only += ["--max-depth", "1", "--no-messages"]  # folders read one level deep; a file gone: no error
            named = Plan(_argv(rg, only, pattern, exact, case, excludes, files), _from_root(scope, among, keep))
    if not targets:
        return Plans(None, named)
    if keep is None:
        passed = [*flags, *_color(args), *rgflags.printed_flags(args)]  # its output passed on as rg prints it
        scan = Plan(_argv(rg, passed, pattern, exact, case, excludes, _places(targets)))
    else:
        scan = Plan(
            _argv(rg, [*flags, "--color=never", "--null"], pattern, exact, case, excludes, _places(targets)),
            _as_printed(targets, keep),
        )
    return Plans(scan, named)


def _narrowed(
    request: QuickRequest,
    scope: Scope,
    targets: list[Target],
    keep: Callable[[str], bool] | None,
    ended: Callable[[], bool],
) -> tuple[list[Target], list[str], list[Target]]:
    """(the places rg scans, the files and folders the content indexes name, the places those are of);
    _Overtaken as soon as ``ended`` says a whole scan ended meanwhile."""
    import time

    from gateway.discovery import default_index_dir
    from gateway.index.content.narrow import ContentIndex
    from gateway.narrowing import Narrowed
    from gateway.query.criteria import backend_query

    query = backend_query(request.as_request(), time.monotonic())
    by_namespace: dict[str, list[Target]] = {}
    for target in targets:
        by_namespace.setdefault(target.namespace, []).append(target)
    index = ContentIndex(default_index_dir(), [scope.roots[n] for n in by_namespace])
    scanned: list[Target] = []
    named: list[str] = []
    among: list[Target] = []
    try:
        for name, places in by_namespace.items():
            if ended():
                raise _Overtaken

            def accept(rel: str, places: list[Target] = places) -> bool:
                return any(t.holds(rel) for t in places) and (keep is None or keep(rel))

            answer = index.narrow(scope.roots[name], query, accept)
            if not isinstance(answer, Narrowed):  # the reason rg scans it (building, common, ...)
                scanned += places
                continue
            named += [*answer.files, *answer.folders]
            among += places
    finally:
        index.close()
    return scanned, named, among


def _as_printed(targets: Sequence[Target], keep: Callable[[str], bool]) -> Callable[[str], str | None]:
    """For rg over the places as shown: a printed path kept as printed, when its namespace path passes."""
    prefixed = [(t, t.shown.rstrip("/") + "/" if t.shown else "") for t in targets]

    def resolve(path: str) -> str | None:
        for target, prefix in prefixed:
            if target.is_file:
                if path != target.shown:
                    continue
                rel = target.rel
            elif path.startswith(prefix):
                rest = path[len(prefix) :]
                rel = f"{target.rel}/{rest}" if target.rel else rest
            else:
                continue
            return path if keep(rel) else None
        return path  # not under a place (rg printed it otherwise): as rg printed it

    return resolve


def _from_root(
    scope: Scope, targets: Sequence[Target], keep: Callable[[str], bool] | None
) -> Callable[[str], str | None]:
    """For rg over what the content indexes named (absolute paths): a path in one of the places, printed as
    rg prints it over that place, when it passes."""
    roots = sorted({(t.root.rstrip("/") + "/", t.namespace) for t in targets}, key=lambda item: -len(item[0]))
    by_namespace: dict[str, list[Target]] = {}
    for target in targets:
        by_namespace.setdefault(target.namespace, []).append(target)

    def resolve(path: str) -> str | None:
        for prefix, name in roots:
            if path.startswith(prefix):
                rel = path[len(prefix) :]
                if keep is not None and not keep(rel):
                    return None
                return next((t.show(rel) for t in by_namespace[name] if t.holds(rel)), None)
        return None

    return resolve


def run(args: argparse.Namespace, data: dict[str, Any], scope: Scope, places: Sequence[Place] | None) -> int | None:
    """The listing ``args`` asks for (``data``: its request before PATHs; ``places``: the PATHs, or the folder
    it runs in; None for every checkout): its exit code; None for a request the one-shot search does not
    run (the caller lists it from the service's pages)."""
    from gateway.cli.relay import relay, scanning

    kind = kind_of(args)
    if kind is None:
        raise ValueError("not a listing")
    plain = _plain(args, kind, data, scope, places)
    with scanning(plain.argv if plain is not None else None) as early:
        # a plain request's rg runs while the content indexes are looked at (a stat and a read each)
        if early is not None and not _indexed(kind, args, scope, list(scope.roots)):
            return relay([(early.argv, None)], kind in _PATHS_ONLY, early.take())
        try:
            plans = _plans(args, kind, data, scope, places, early.ended if early is not None else lambda: False)
        except _Overtaken:
            plans = Plans(None, None)
        if plans is None:
            return None
        if early is not None and (plans.scan is not None or early.ended()):
            # rg scanning every place since the start is as far along as a narrowed rg could be
            return relay([(early.argv, None)], kind in _PATHS_ONLY, early.take())
        runs = [(plan.argv, plan.resolve) for plan in plans if plan is not None]
        return relay(runs, kind in _PATHS_ONLY, null=args.null, names=args.filename is not False)  # -0, -I
