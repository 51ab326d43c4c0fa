"""``fedsearch search`` read without argparse when its command line is switches and positionals alone.

argparse, with the ``re``, ``gettext`` and ``locale`` it imports and the ~60 arguments of
``search`` it builds, costs a one-shot search more than any other part of its start before rg
runs: a listing (``fedsearch search import -l``) spends about a tenth of its time there. The
command lines people type most are a query, a few switches and perhaps PATHs. :func:`plain_args`
reads such a line (each switch of :data:`SWITCHES` at most once, at most one of each group
argparse makes exclusive, positionals not starting with ``-``) into the very namespace argparse
builds from it: :data:`DEFAULTS` with the switches' values, the first positional the query and
the others the PATHs. Anything else (a flag taking a value, letters run together, ``--``, an
abbreviation, ``--help``, a switch twice) answers None, and argparse reads the line and words
any usage error. Only ``sys`` and this module are imported. ``tests/test_cli_plainargs.py``
holds both readings equal.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself not imported: a listing starts without it
if TYPE_CHECKING:
    from argparse import Namespace
else:

    class Namespace:
        """argparse's namespace, for what this module reads (attributes; equal by them, as argparse's)."""

        def __init__(self, **values: object) -> None:
            self.__dict__.update(values)

        def __eq__(self, other: object) -> bool:
            return vars(self) == vars(other) if hasattr(other, "__dict__") else NotImplemented

        def __repr__(self) -> str:
            return f"Namespace({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


__all__ = ["DEFAULTS", "SWITCHES", "plain_args"]

#: Every attribute of ``fedsearch search``'s namespace and its default (lists copied for each line).
DEFAULTS: dict[str, object] = {
    "query": None,
    "paths": [],
    "regex": False,
    "fixed_strings": False,
    "semantic": False,
    "patterns": [],
    "pattern_files": [],
    "word_regexp": False,
    "case": None,
    "namespace": [],
    "glob": [],
    "lang": [],
    "type_list": False,
    "after_context": None,
    "before_context": None,
    "context": None,
    "max_count": None,
    "only_matching": False,
    "line_number": None,
    "hidden": False,
    "unrestricted": 0,
    "files_with_matches": False,
    "count": False,
    "count_matches": False,
    "vimgrep": False,
    "list_files": False,
    "json": False,
    "page_files": None,
    "offset": None,
    "hit_budget": None,
    "timeout_ms": None,
    "threshold": None,
    "dedup": None,
    "args_json": None,
    "color": "auto",
    "heading": None,
    "column": False,
    "filename": None,
    "max_columns": None,
    "sort": None,
    "null": False,
    "max_depth": None,
    "trim": False,
    "quiet": False,
    "server": None,
    "config": None,
    "root": None,
}

#: A switch as typed -> (the attribute it sets, its value, the exclusive group it is in, or "").
SWITCHES: dict[str, tuple[str, object, str]] = {
    "--regex": ("regex", True, "mode"),
    "-F": ("fixed_strings", True, "mode"),
    "--fixed-strings": ("fixed_strings", True, "mode"),
    "--semantic": ("semantic", True, "mode"),
    "-w": ("word_regexp", True, ""),
    "--word-regexp": ("word_regexp", True, ""),
    "-s": ("case", True, "case"),
    "--case-sensitive": ("case", True, "case"),
    "-i": ("case", False, "case"),
    "--ignore-case": ("case", False, "case"),
    "-S": ("case", None, "case"),
    "--smart-case": ("case", None, "case"),
    "-o": ("only_matching", True, ""),
    "--only-matching": ("only_matching", True, ""),
    "-n": ("line_number", True, "numbers"),
    "--line-number": ("line_number", True, "numbers"),
    "-N": ("line_number", False, "numbers"),
    "--no-line-number": ("line_number", False, "numbers"),
    "--hidden": ("hidden", True, ""),
    "-u": ("unrestricted", 1, ""),
    "-uu": ("unrestricted", 2, ""),
    "-uuu": ("unrestricted", 3, ""),
    "-l": ("files_with_matches", True, "listing"),
    "--files-with-matches": ("files_with_matches", True, "listing"),
    "-c": ("count", True, "listing"),
    "--count": ("count", True, "listing"),
    "--count-matches": ("count_matches", True, "listing"),
    "--vimgrep": ("vimgrep", True, "listing"),
    "--files": ("list_files", True, "listing"),
    "--json": ("json", True, "listing"),
    "--no-dedup": ("dedup", False, ""),
    # rg's output flags (gateway.cli.rgflags): the request is the same with them, so the rg gateway.cli.early
    # starts is the one the search asks for; two setting one attribute go to argparse (the last wins there)
    "--heading": ("heading", True, ""),
    "--no-heading": ("heading", False, ""),
    "--column": ("column", True, ""),
    "-H": ("filename", True, ""),
    "--with-filename": ("filename", True, ""),
    "-I": ("filename", False, ""),
    "--no-filename": ("filename", False, ""),
    "-0": ("null", True, ""),
    "--null": ("null", True, ""),
    "--trim": ("trim", True, ""),
    "-q": ("quiet", True, ""),
    "--quiet": ("quiet", True, ""),
}


def plain_args(argv: list[str]) -> Namespace | None:
    """``fedsearch ARGV``'s namespace as argparse reads it, for a ``search`` of switches and positionals
    alone; None for any other command line (argparse reads it)."""
    if not argv or argv[0] != "search":
        return None
    values = {k: list(v) if isinstance(v, list) else v for k, v in DEFAULTS.items()}
    set_by: set[str] = set()
    groups: set[str] = set()
    positionals: list[str] = []
    for token in argv[1:]:
        if not token.startswith("-"):
            positionals.append(token)
            continue
        switch = SWITCHES.get(token)
        if switch is None:
            return None
        name, value, group = switch
        if name in set_by or group in groups:
            return None
        set_by.add(name)
        if group:
            groups.add(group)
        values[name] = value
    if positionals:
        values["query"] = positionals[0]
        values["paths"] = positionals[1:]
    return Namespace(**values, command="search")
