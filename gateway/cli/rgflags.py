"""rg's everyday output flags in ``fedsearch search`` (issue 49): what each is where rg prints and where we do.

``--heading``/``--no-heading``, ``--column``, ``-I``/``-H``, ``-M NUM``, ``--sort path``, ``-0``,
``--max-depth NUM``, ``--trim`` and ``-q`` are rg's, and print what rg prints, byte for byte:

* a listing over the checkouts found here (``-l``, ``-c``, ``--count-matches``, ``--vimgrep``,
  ``--files``) is rg's own output (:mod:`gateway.cli.listing`): each flag is given to rg as typed
  (:func:`listing_flags`), but ``-0`` and ``-I`` where fedsearch reads rg's output to apply what rg
  cannot (then :mod:`gateway.cli.relay` prints the path as they ask), and ``--max-depth``, counted
  from where rg is given its paths (:func:`listing_depth`). ``--sort`` and ``--max-depth`` keep a
  listing from reading the content indexes (one rg over the places scans them in order, to the depth);
* a page (:mod:`gateway.cli.render`) prints its lines as rg's printer does (:func:`page_fields`);
  without ``--heading`` or ``--no-heading`` it has a heading on a terminal and none off one, as rg
  (a semantic page, whose hits are declarations under their headers, keeps its headings);
  ``--max-depth`` is given to the one rg of the one-shot search, which runs over each checkout's root:
  counted from there (:func:`page_depth`);
* a listing from the service's pages (a config's namespaces, ``--server``) prints ``-0`` and ``-I``
  itself; ``--column`` and ``--heading`` change no listing (as in rg).

What cannot be printed as rg prints it is refused before anything runs, naming the flag (an
:class:`~gateway.errors.InvalidRequest`: exit 2, one line on stderr, problem JSON with ``--json``),
never ignored: the page's flags with ``--json`` (the answer as HTTP gives it); ``--column``, ``-M``
and ``--no-heading`` with a semantic search (no match has a column, no line is rg's); ``-M``,
``--trim``, ``--sort`` and ``--max-depth`` in a listing from the service's pages
(:func:`refuse_in_served_listing`); ``--max-depth`` where the service searches, or where the folders
searched lie at different depths, which one rg cannot count (:func:`_depth`).

``-q`` (:func:`quietly`) is the exit code alone: a listing's search (``-l`` unless another is asked),
whatever it prints dropped; errors and warnings are said on stderr as without it.

Only the standard library is imported here (a listing's start reads :func:`listing_flags`).
"""

from __future__ import annotations

import os
import sys

from gateway.errors import InvalidRequest

TYPE_CHECKING = False  # typing and argparse not imported: a listing starts rg without them
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

    from gateway.cli.scope import Scope

__all__ = [
    "PAGE_FLAGS",
    "check",
    "listing_depth",
    "listing_flags",
    "page_depth",
    "page_fields",
    "printed_flags",
    "quietly",
    "refuse_in_served_listing",
    "unnarrowed",
]

#: args attribute -> (the flag as the user names it, the field an error names, its value when not given), for
#: the flags that shape a page's lines.
PAGE_FLAGS: dict[str, tuple[str, str, object]] = {
    "heading": ("--heading/--no-heading", "heading", None),
    "column": ("--column", "column", False),
    "filename": ("-H/-I", "filename", None),
    "max_columns": ("-M", "max-columns", None),
    "sort": ("--sort", "sort", None),
    "null": ("-0", "null", False),
    "trim": ("--trim", "trim", False),
}
#: The listing flags of ``fedsearch search`` (gateway.cli.listing.KINDS), named without importing it.
_LISTINGS = ("files_with_matches", "count", "count_matches", "vimgrep", "list_files")


def _given(args: argparse.Namespace, name: str) -> bool:
    """Whether the page flag ``name`` was given (its value is not its default)."""
    return getattr(args, name, PAGE_FLAGS[name][2]) != PAGE_FLAGS[name][2]


def check(args: argparse.Namespace, data: dict[str, Any]) -> None:
    """Refuse, naming the flag, what no surface can print as rg does (see the module); ``data``: the request."""
    for flag, field, value in (("-M", "max-columns", args.max_columns), ("--max-depth", "max-depth", args.max_depth)):
        if value is not None and value < 0:
            raise InvalidRequest(field, f"{flag} must be at least 0")
    if args.json:
        given = [PAGE_FLAGS[name] for name in PAGE_FLAGS if _given(args, name)]
        if given:
            flag, field, _ = given[0]
            raise InvalidRequest(field, f"{flag} prints rg's lines: not with --json (the answer as HTTP gives it)")
    if data.get("mode") == "semantic" and not any(getattr(args, kind) for kind in _LISTINGS):
        for flag, field, on in (("--column", "column", args.column), ("-M", "max-columns", bool(args.max_columns))):
            if on:
                raise InvalidRequest(field, f"{flag} counts matches of text: not with --semantic")
        if args.heading is False:
            raise InvalidRequest(
                "heading", "--no-heading prints rg's lines: a semantic page's are declarations, under their headers"
            )


def refuse_in_served_listing(args: argparse.Namespace) -> None:
    """-l, -c, --vimgrep from the service's pages (a config's namespaces, --server) take -0, -I, -H, --column and
    --heading (which change no listing); the flags rg applies as it reads or walks are rg's own listing's alone."""
    given = [
        (flag, field)
        for flag, field, on in (
            ("-M", "max-columns", bool(args.max_columns)),
            ("--trim", "trim", args.trim),
            ("--sort", "sort", args.sort == "path"),
            ("--max-depth", "max-depth", args.max_depth is not None),
        )
        if on
    ]
    if given:
        flag, field = given[0]
        raise InvalidRequest(
            field, f"{flag} works in the listings rg prints over the checkouts found here, not from the service's pages"
        )


def quietly(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``-q``: ``run(args)`` with whatever it prints on stdout dropped, its exit code kept; a page is asked as
    ``-l`` (the cheapest search that knows whether anything matched: rg's own listing over checkouts here)."""
    args.quiet = False
    if not args.json and not args.type_list and not any(getattr(args, kind) for kind in _LISTINGS):
        args.files_with_matches = True
    saved = sys.stdout
    with open(os.devnull, "w", encoding="utf-8") as dropped:
        sys.stdout = dropped
        try:
            return run(args)
        finally:
            sys.stdout = saved


def page_fields(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~gateway.cli.render.Style` fields of rg's output flags, for a page (see the module) of the
    request ``data``: a semantic page (declarations, no rg line) keeps its headings off a terminal too."""
    heading = args.heading if args.heading is not None else sys.stdout.isatty() or data.get("mode") == "semantic"
    filename = args.filename
    if filename is None:  # as rg: the path unless one file alone is searched
        filename = not (len(args.paths) == 1 and os.path.isfile(args.paths[0]))
    return {
        "heading": heading,
        "filename": filename,
        "column": args.column,
        "null": args.null,
        "max_columns": args.max_columns or None,  # -M 0: no limit, as rg
        "trim": args.trim,
        "sort": tuple(args.paths) if args.sort == "path" else None,
    }


def listing_flags(args: argparse.Namespace) -> list[str]:
    """rg's output flags for its own listing, as given (but -0, -I: :func:`printed_flags`; --max-depth:
    :func:`listing_depth`)."""
    flags: list[str] = []
    if args.heading is not None:
        flags.append("--heading" if args.heading else "--no-heading")
    if args.column:
        flags.append("--column")
    if args.filename:
        flags.append("--with-filename")
    if args.max_columns is not None:
        flags += ["--max-columns", str(args.max_columns)]
    if args.trim:
        flags.append("--trim")
    if args.sort is not None:
        flags += ["--sort", args.sort]
    return flags


def printed_flags(args: argparse.Namespace) -> list[str]:
    """-0 and -I for an rg whose output is passed on as it prints it (fedsearch reads no path of it)."""
    return [*(["--null"] if args.null else []), *(["--no-filename"] if args.filename is False else [])]


def unnarrowed(args: argparse.Namespace) -> bool:
    """Whether a listing scans rather than reading what the content indexes name: ``--sort`` (one rg prints in
    order) and ``--max-depth`` (an rg over the files named would count the depth from them)."""
    return args.sort == "path" or args.max_depth is not None


# --- --max-depth: rg counts it from each path it is given ------------------------------------------


def _parts(rel: str) -> int:
    """How many folders deep ``rel`` (a relative path) is."""
    return len([p for p in rel.split("/") if p and p != "."])


def _bases(args: argparse.Namespace, cwd: str) -> list[tuple[str, bool]]:
    """Where the user's --max-depth counts from, as rg would: each PATH given (and whether it is a file), else
    ``--root``, else the folder it runs in (real paths, as the scope's roots)."""
    given = list(args.paths) or ([args.root] if getattr(args, "root", None) else [cwd])
    out: list[tuple[str, bool]] = []
    for path in given:
        real = os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))
        out.append((real, os.path.isfile(real)))
    return out


def _depth(num: int, searched: Sequence[str], bases: Sequence[tuple[str, bool]], roots: bool, what: str) -> list[str]:
    """rg's ``--max-depth`` for one rg given the folders ``searched`` (real paths) so that it reaches what rg
    given the ``bases`` with ``--max-depth num`` would: one depth for all, or InvalidRequest naming the flag.
    A folder searched is a base itself (counted from there), or a checkout below the nearest base holding it;
    with ``roots`` (a page's rg over each checkout's root) a base inside it is walked down to from there too."""
    depths: set[int] = set()
    files: set[int] = set()
    for folder in searched:
        holding = [base for base, is_file in bases if not is_file and folder.startswith(base.rstrip("/") + "/")]
        if any(base == folder for base, _ in bases):
            depths.add(num)
        elif holding:  # a checkout below the folder the user named: its files are that much deeper
            depths.add(max(0, num - _parts(os.path.relpath(folder, max(holding, key=len)))))
        for base, is_file in bases if roots else ():
            if base.startswith(folder.rstrip("/") + "/"):  # a PATH inside the root: rg walks down to it
                deeper = _parts(os.path.relpath(base, folder))
                if is_file:  # rg searches a file it is given whatever the depth: reach it
                    files.add(deeper)
                else:
                    depths.add(num + deeper)
    if len(depths) > 1:
        raise InvalidRequest("max-depth", f"--max-depth {num}: {what}")
    depth = depths.pop() if depths else max(files, default=num)
    if files and max(files) > depth:
        raise InvalidRequest("max-depth", f"--max-depth {num}: {what}")
    return ["--max-depth", str(depth)]


def page_depth(args: argparse.Namespace, scope: Scope, data: dict[str, Any]) -> list[str]:
    """rg's ``--max-depth`` for the one-shot search's rg, which runs over each checkout's root (none without
    the flag): counted from the roots, for what rg from here (or over the PATHs) reaches."""
    if args.max_depth is None:
        return []
    roots = list(scope.roots.values())
    patterns = data.get("namespaces") or []
    if patterns:
        from gateway.query.globs import namespace_matcher

        matchers = [namespace_matcher(str(p)) for p in patterns]
        roots = [root for name, root in scope.roots.items() if any(m(name) for m in matchers)]
    why = (
        "the checkouts searched and the PATHs lie at different depths from each other (one rg counts one depth from "
        "every checkout's root: give PATHs as deep in their checkouts, or list with -l, which rg counts from each)"
    )
    return _depth(args.max_depth, roots, _bases(args, scope.cwd), True, why)


def listing_depth(args: argparse.Namespace, scope: Scope, shown: Sequence[tuple[str, bool]]) -> list[str]:
    """rg's ``--max-depth`` for a listing's rg, given ``shown`` (each path as rg is given it, and whether it is a
    file; "" for the folder it runs in): as typed where rg is given what the user typed, else counted from the
    checkouts it is given instead of the folder holding them."""
    if args.max_depth is None:
        return []
    folders = [os.path.realpath(os.path.join(scope.cwd, path or ".")) for path, is_file in shown if not is_file]
    why = (
        "the checkouts listed lie at different depths below where it counts from (one rg counts one depth from "
        "each: give a PATH in one of them, or list them one by one)"
    )
    return _depth(args.max_depth, folders, _bases(args, scope.cwd), False, why)
