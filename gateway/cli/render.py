"""Human output for the CLI, as rg prints it: a file's path, then its numbered lines.

A page prints each file under its path (relative to the current directory, see
:mod:`gateway.cli.scope`), its matched lines as ``line:text`` and context lines as
``line-text``; context blocks that touch or overlap are merged and separated by
``--``, as ``rg -C`` prints them, and a declaration's header (``url_for  function
200-251``) goes above the block holding its first line, never inside one. ``-N``, ``-o``
and ``-m`` are rg's. Colours are rg's (paths magenta, line numbers green, matches bold
red). :func:`summary` says what the page holds, the answer's note, and each next action
as a runnable ``fedsearch search --args-json …`` command.

rg's output flags (issue 49) print each line as rg's standard printer does: ``--heading``
(the path on a line of its own, a blank line between files: the default on a terminal) or
not (``path:N:text`` and ``path-N-text``, ``--`` between the blocks of context, across files
too: the default off one, where declaration headers, rg's not, are left out and every copy
of a deduplicated file prints its lines); ``--column`` (the byte column of the first match,
or of each ``-o`` part), ``-I``/``-H`` (the path, printed by default unless one file alone
is searched), ``-0`` (a NUL after the path), ``--trim`` (ASCII whitespace at a line's start
left out), ``-M NUM`` (a line longer than NUM bytes, its line end included, printed as rg's
``[Omitted long ... line ...]`` notice, with rg's count of matches where rg finds them: with
colours or ``--column``) and ``--sort path``. A page's answer holds a line of more than
``MAX_TEXT`` characters cut; a local file's line is read again whole (:func:`local_lines`),
so that it prints as rg prints it; a remote one's stays cut.

From the service's pages (a config's namespaces, ``--server``), ``-l``, ``-c`` and
``--vimgrep`` print rg's formats: one path, ``path:count``, or ``path:line:column:text``
a line (``-0``: a NUL after the path, ``-I``: no path); over checkouts found here rg prints
them itself (:mod:`gateway.cli.listing`).

A file's rows come from its hits (:func:`rows`): a hit with ``lines`` (a declaration)
contributes each of them, any other hit its own line. A declaration header belongs in
:func:`rows` too, as a row of its own; :func:`_blocks` places it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

__all__ = [
    "Style",
    "counts",
    "files_with_matches",
    "highlighter",
    "human",
    "join_names",
    "local_lines",
    "next_command",
    "plural",
    "summary",
    "type_list",
    "unanswered",
    "vimgrep",
]

PATH, NUMBER, MATCH, DIM, RESET = "\x1b[35m", "\x1b[32m", "\x1b[1;31m", "\x1b[2m", "\x1b[0m"
SEPARATOR = "--"
#: gateway.models' cut of a line's text: at most this many characters, an ellipsis where it was cut (not imported:
#: a --server client's page has no model; tests/test_cli_rg_flags.py holds them equal).
MAX_TEXT, ELLIPSIS = 256, "…"
#: What ``--trim`` takes off a line's start: ASCII whitespace, as rg trims it (vertical tab included).
TRIMMED = " \t\n\x0b\x0c\r"
#: rg's notices for a line ``-M`` omits.
OMITTED_CONTEXT, OMITTED_MATCHING = "[Omitted long context line]", "[Omitted long matching line]"

#: (namespace, file path) -> how the path is printed
Locate = Callable[[str, str], str]
#: (namespace, file path) -> the file's lines as rg reads them, or None (no local file)
Lines = Callable[[str, str], "list[str] | None"]


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def join_names(names: Iterable[str], most: int = 5) -> str:
    """``a, b, c and 4 more``."""
    names = list(names)
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def highlighter(query: str, mode: str, case_sensitive: bool) -> Any:
    """The RE2 regex that finds what to highlight in a matched line (None for semantic mode)."""
    if mode == "semantic":
        return None
    import re2

    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False
    try:
        return re2.compile(query if mode == "regex" else re2.escape(query), options)
    except re2.error:  # validated before: nothing to highlight rather than no output
        return None


class Style(NamedTuple):
    """How a page is printed: colours, what to highlight, and what rg's flags asked for."""

    color: bool = False
    highlight: Any = None  # the regex of what matched (colours, -o)
    before: int = 0  # context lines shown before a match (-B, -C)
    after: int = 0  # and after it (-A, -C)
    numbers: bool = True  # line numbers (-n, the default; -N: none)
    only: bool = False  # only the matched parts of lines, one a line (-o)
    max_count: int | None = None  # at most this many matched lines a file (-m)
    heading: bool = True  # each file's path above its lines (--heading), else before each line (--no-heading)
    filename: bool = True  # the path printed at all (-H; -I: not)
    column: bool = False  # the byte column of the first match, or of each -o part (--column)
    null: bool = False  # a NUL after the path instead of ':' or the heading's line end (-0)
    max_columns: int | None = None  # a line longer than this many bytes printed as rg's notice (-M)
    trim: bool = False  # ASCII whitespace at a line's start left out (--trim)
    sort: tuple[str, ...] | None = None  # --sort path: files in path order, under each PATH searched in turn
    original: Lines | None = None  # a local file's lines, for the lines the answer holds cut


class Row(NamedTuple):
    """One printed line of a file: matched (with its column and semantic score), context, or the
    header of a declaration (printed above the lines it holds)."""

    number: int
    text: str
    matched: bool
    column: int | None = None
    score: float | None = None
    header: bool = False


def _header(hit: dict[str, Any]) -> Row:
    """A declaration's header: its qualified name, kind and span (and score, in semantic mode)."""
    score = f" ({hit['score']:.2f})" if hit.get("score") is not None else ""
    text = f"{hit['qualified_name']}  {hit['kind']}  {hit['start_line']}-{hit['end_line']}{score}"
    return Row(hit["start_line"], text, False, header=True)


def _context(first: int, last: int, context: Any, style: Style) -> Iterator[Row]:
    """The context rows around matched lines ``first``..``last``, as many as -B/-A/-C asked for."""
    if not context:
        return
    before = context.get("before", [])[-style.before :] if style.before else []
    for i, text in enumerate(before):
        yield Row(first - len(before) + i, text, False)
    for i, text in enumerate(context.get("after", [])[: style.after]):
        yield Row(last + 1 + i, text, False)


def _shown_lines(group: dict[str, Any], most: int | None) -> set[int] | None:
    """The matched lines -m lets through (the first ``most``), or None for all."""
    if most is None:
        return None
    numbers: set[int] = set()
    for hit in group["hits"]:
        if hit.get("lines") or hit.get("kind") != "file":  # (a path match has no line)
            numbers.update(line.get("line", line.get("start_line")) for line in hit.get("lines") or [hit])
    return set(sorted(numbers)[:most])


def rows(group: dict[str, Any], style: Style) -> list[Row]:
    """A file's lines to print, in order, each once: a matched line wins over the same line as
    context; a declaration (a hit with ``lines``, or a semantic hit) has its header at its first line."""
    by_number: dict[int, Row] = {}
    headers: list[Row] = []
    shown = _shown_lines(group, style.max_count)
    for hit in group["hits"]:
        own = hit.get("kind") == "file"  # the file's own hit: its lines under the file's heading, no header
        if own and not hit.get("lines"):
            continue  # the path matched: the heading says it
        lines = [ln for ln in hit.get("lines") or [] if shown is None or ln["line"] in shown]
        by_meaning = "reason" in hit  # a semantic hit: a declaration, its signature as its line
        if not lines and (hit.get("lines") or (shown is not None and hit["start_line"] not in shown)):
            continue  # -m left none of its lines
        if (lines or by_meaning) and not own:
            headers.append(_header(hit))
        if by_meaning and hit["reason"]:  # under its header: the query's words and where they were found
            headers.append(Row(hit["start_line"], f"  why: {hit['reason']}", False, header=True))
        if lines:
            contexts = [(ln["line"], ln["line"], ln.get("context")) for ln in lines]
        else:
            contexts = [(hit["start_line"], hit["end_line"], hit.get("context"))]
        score = None if lines or by_meaning else hit.get("score")  # a declaration's score is in its header
        for line in lines or ([hit] if "text" in hit else []):  # (a declaration with no line to show: its header)
            number = line.get("line", line.get("start_line"))
            by_number[number] = Row(number, line["text"], True, line.get("column"), score)
        for first, last, context in contexts:
            for row in _context(first, last, context, style):
                by_number.setdefault(row.number, row)
    return sorted([*by_number.values(), *headers], key=lambda row: (row.number, not row.header))


def _highlight(text: str, regex: Any) -> str:
    if regex is None:
        return text
    out, last = [], 0
    for m in regex.finditer(text):
        if m.end() == m.start():
            continue
        out.append(text[last : m.start()])
        out.append(MATCH + m.group(0) + RESET)
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _parts(text: str, regex: Any) -> list[tuple[int, str]]:
    """-o: the matched parts of a line, each with where it starts (the whole line where the regex finds none)."""
    found = [(m.start(), m.group(0)) for m in regex.finditer(text) if m.end() > m.start()] if regex is not None else []
    return found or [(-1, text)]


def _byte_column(text: str, start: int) -> int:
    """rg's column: 1 + the bytes of ``text`` before character ``start`` (rg counts bytes, not characters)."""
    return 1 + len(text[:start].encode("utf-8", "surrogatepass"))


def _cut(text: str) -> bool:
    """Whether the answer holds ``text`` cut (``MAX_TEXT`` characters, an ellipsis at an end)."""
    return len(text) == MAX_TEXT and ELLIPSIS in (text[0], text[-1])


def _first_column(row: Row, style: Style) -> int:
    """The byte column of a matched line's first match: the answer's (in characters; as it is where the line is
    cut and could not be read whole: a remote file's), else the regex's, else 1."""
    if row.column is not None:
        return row.column if _cut(row.text) else _byte_column(row.text, row.column - 1)
    found = next((m for m in style.highlight.finditer(row.text)), None) if style.highlight is not None else None
    return _byte_column(row.text, found.start()) if found is not None else 1


def _matches(text: str, regex: Any) -> int:
    """How many matches rg finds in a line, for ``-M``'s notice (the line matched: one at least)."""
    return max(1, sum(1 for _ in regex.finditer(text))) if regex is not None else 1


def _body(text: str, style: Style, matched: bool, part: bool = False) -> str:
    """A line (or with ``part`` an -o part of one) as rg prints it: trimmed (--trim), then within -M's bytes (a
    whole line's line end counted) or rg's notice instead, then coloured."""
    shown = text.lstrip(TRIMMED) if style.trim else text
    if style.max_columns:
        size = len(shown.encode("utf-8", "surrogatepass")) + (0 if part else 1)
        if size > style.max_columns:
            if not matched:
                return OMITTED_CONTEXT
            if not part and (style.color or style.column):  # rg found each match: it counts them
                return f"[Omitted long line with {_matches(text, style.highlight)} matches]"
            return OMITTED_MATCHING
    return _highlight(shown, style.highlight) if style.color and matched else shown


def _row(row: Row, style: Style, path: str | None = None) -> list[str]:
    """A file's line as rg prints it: ``path:`` (without --heading), ``N:`` and ``column:`` as asked, then its text
    (-o: one line a matched part). Context lines take ``-`` for ``:`` and no column."""
    sep = ":" if row.matched else "-"
    lead = ""
    if path is not None:
        lead = (f"{PATH}{path}{RESET}" if style.color else path) + ("\0" if style.null else sep)
    if style.numbers:
        lead += (f"{NUMBER}{row.number}{RESET}" if style.color else str(row.number)) + sep
    if not row.matched:
        return [lead + _body(row.text, style, False)]
    score = f" ({row.score:.2f})" if row.score is not None else ""
    if not style.only:
        column = f"{_first_column(row, style)}:" if style.column else ""
        return [f"{lead}{column}{_body(row.text, style, True)}{score}"]
    out: list[str] = []
    for start, part in _parts(row.text, style.highlight):
        if start < 0:  # no part found: the whole line, as before
            column = f"{_first_column(row, style)}:" if style.column else ""
            out.append(f"{lead}{column}{_body(part, style, True)}{score}")
            continue
        column = f"{_byte_column(row.text, start)}:" if style.column else ""
        out.append(f"{lead}{column}{_body(part, style, True, part=True)}{score}")
    return out


def _blocks(found: list[Row], style: Style) -> list[tuple[list[Row], list[Row]]]:
    """A file's rows as rg's blocks (runs of adjacent lines with context; each matched line alone
    without), each with the declaration headers printed above it: a header goes above the block
    holding its declaration's first line, else the next block, never inside one."""
    lines = [row for row in found if not row.header]
    headers = [row for row in found if row.header]
    joined = bool(style.before or style.after)
    blocks: list[tuple[list[Row], list[Row]]] = []
    for row in lines:
        if blocks and joined and row.number == blocks[-1][1][-1].number + 1:
            blocks[-1][1].append(row)
        else:
            blocks.append(([], [row]))
    for header in headers:
        block = next((b for b in blocks if b[1] and b[1][-1].number >= header.number), None)
        if block is None:  # after every line shown (a declaration with no line to show): at the end
            if not blocks or blocks[-1][1]:
                blocks.append(([], []))
            block = blocks[-1]
        block[0].append(header)
    return blocks


def _copies(group: dict[str, Any], locate: Locate) -> list[str]:
    """Where the other copies of a group's content are, each as its path is printed."""
    return [locate(copy["namespace"], copy["file_path"]) for copy in group.get("duplicates", ())]


def _restored(found: list[Row], group: dict[str, Any], style: Style) -> list[Row]:
    """A file's rows, each line the answer holds cut (past ``MAX_TEXT`` characters) read whole from the local
    file when there is one and it still holds that line (else as the answer holds it)."""

    def cut(row: Row) -> bool:
        return not row.header and _cut(row.text)

    if style.original is None or not any(map(cut, found)):
        return found
    lines = style.original(group["namespace"], group["file_path"])
    if lines is None:
        return found
    out: list[Row] = []
    for row in found:
        if cut(row) and 0 < row.number <= len(lines):
            whole = lines[row.number - 1]
            if len(whole) > MAX_TEXT and row.text.strip(ELLIPSIS) in whole:
                row = row._replace(text=whole)
        out.append(row)
    return out


def local_lines(roots: dict[str, str]) -> Lines:
    """The lines of a file of a local namespace (``roots``: namespace -> folder) as the answer's were read from
    rg (UTF-8, an invalid byte replaced, the line end left out), each file read once; None for no local file."""
    read: dict[tuple[str, str], list[str] | None] = {}

    def lines(namespace: str, path: str) -> list[str] | None:
        key = (namespace, path)
        if key not in read:
            root = roots.get(namespace)
            read[key] = None
            if root is not None:
                try:
                    with open(os.path.join(root, path), "rb") as handle:
                        data = handle.read()
                except OSError:
                    return None
                read[key] = [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in data.split(b"\n")]
        return read[key]

    return lines


def _file(head: str, group: dict[str, Any], style: Style, locate: Locate) -> str:
    """A file as ``--heading`` prints it: its path (``-0``: NUL-ended, its first line right after), the other
    copies, then its blocks of lines, each under the declaration headers placed above it."""
    out: list[str] = []
    copies = _copies(group, locate)
    if copies:
        also = "also in: " + join_names(copies)
        out.append(f"{DIM}{also}{RESET}" if style.color else also)
    for i, (headers, lines) in enumerate(_blocks(_restored(rows(group, style), group, style), style)):
        if i and (style.before or style.after):
            out.append(SEPARATOR)
        out += [f"{DIM}{h.text}{RESET}" if style.color else h.text for h in headers]
        for row in lines:
            out += _row(row, style)
    if not style.filename:
        return "\n".join(out)
    shown = f"{PATH}{head}{RESET}" if style.color else head
    if not out:  # the path matched, no line: the path alone
        return shown + ("\0" if style.null else "")
    return shown + ("\0" if style.null else "\n") + "\n".join(out)


def _flat(entries: list[tuple[str, dict[str, Any]]], style: Style) -> list[str]:
    """Files as rg prints them without ``--heading``: every line led by its path (unless -I), ``--`` between
    blocks of context, across files too; no declaration header (rg prints none)."""
    out: list[str] = []
    joined = bool(style.before or style.after)
    for head, group in entries:
        lines = [row for row in _restored(rows(group, style), group, style) if not row.header]
        for _, block in _blocks(lines, style):
            if out and joined:
                out.append(SEPARATOR)
            for row in block:
                out += _row(row, style, head if style.filename else None)
    return out


def _path_order(places: tuple[str, ...]) -> Callable[[tuple[str, dict[str, Any]]], tuple[int, list[str]]]:
    """``--sort path``'s order of printed paths: by the PATH searched they are under (in the order given, as rg
    searches them), then component by component, as rg walks a folder in name order."""
    prefixes = [os.path.normpath(place) for place in places]

    def key(entry: tuple[str, dict[str, Any]]) -> tuple[int, list[str]]:
        path = entry[0]
        under = next(
            (i for i, p in enumerate(prefixes) if p == "." or path == p or path.startswith(p.rstrip("/") + "/")),
            len(prefixes),
        )
        return under, path.split("/")

    return key


def human(answer: dict[str, Any], style: Style, locate: Locate) -> str:
    """A page's files as rg prints matches (``--heading``: a blank line between files; without, a line each
    matched or context line, every copy of a file its own); "" for none."""
    entries: list[tuple[str, dict[str, Any]]] = []
    for group in answer["files"]:
        entries.append((locate(group["namespace"], group["file_path"]), group))
        if not style.heading:  # rg prints each copy's lines
            entries += [(copy, group) for copy in _copies(group, locate)]
    if style.sort is not None:
        entries.sort(key=_path_order(style.sort))
    if not style.heading:
        lines = _flat(entries, style)
        return "\n".join(lines) + "\n" if lines else ""
    files = [shown for head, group in entries if (shown := _file(head, group, style, locate))]
    return "\n\n".join(files) + "\n" if files else ""


def type_list() -> str:
    """``--type-list``: each language -t takes (and each other name for it), with its globs, as rg lists its types."""
    from gateway.query.languages import ALIASES, LANGUAGES

    names = {**{name: name for name in LANGUAGES}, **ALIASES}
    return "".join(f"{name}: {', '.join(LANGUAGES[names[name]])}\n" for name in sorted(names))


def unanswered(statuses: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(namespaces that did not answer fully, with why; namespaces that cannot do this search, together)."""
    failed: list[str] = []
    unable: dict[str, list[str]] = {}
    for s in statuses:
        why = s.get("error", "")
        if s["status"] == "unsupported":
            unable.setdefault(why or "cannot do this search", []).append(s["name"])
        elif s["status"] != "ok":
            failed.append(f"{s['name']} ({s['status']}{': ' + why if why and why != s['status'] else ''})")
    return failed, [f"{join_names(names)}: {why}" for why, names in unable.items()]


def summary(answer: dict[str, Any], color: bool = False, suffix: str = "") -> list[str]:
    """How many files matched and which are shown, what did not answer, the note, the next commands."""
    shown = len(answer["files"])
    offset = answer["limits"]["offset"]
    text = f"{plural(answer['file_count'], 'file')} matched"
    if shown:
        text += f"; showing {offset + 1}-{offset + shown}"
    failed, unable = unanswered(answer["namespaces"])
    if failed:
        text += "; not complete: " + "; ".join(failed)
    if unable:
        text += "; " + "; ".join(unable)
    lines = [f"{DIM}{text}{RESET}" if color else text]
    if answer.get("note"):
        lines.append(answer["note"])
    for action in answer.get("next", []):
        lines.append(f"next ({action['reason']}):")
        lines.append("  " + next_command(action, suffix))
    return lines


def next_command(action: dict[str, Any], suffix: str = "") -> str:
    """A next action as a shell command that makes the call verbatim."""
    import shlex

    import msgspec  # loaded with the answer's models already (json is not)

    args = msgspec.json.encode(action["args"]).decode()  # compact, UTF-8 as typed
    return f"fedsearch search --args-json {shlex.quote(args)}{suffix}"


# --- rg's listing formats: every matching file, one line each (or one per match) ------------


def files_with_matches(answer: dict[str, Any], locate: Locate, null: bool = False, names: bool = True) -> str:
    """``-l``: each file's path (a group's copies too: rg lists every file), NUL-ended with ``null`` (-0);
    ``names`` as :func:`counts` takes it, and changes nothing (rg -l -I prints the paths all the same)."""
    end = "\0" if null else "\n"
    return "".join(
        path + end for g in answer["files"] for path in (locate(g["namespace"], g["file_path"]), *_copies(g, locate))
    )


def _lead(path: str, null: bool, names: bool) -> str:
    """What a listing line starts with: ``path:`` (``-0``: ``path`` and a NUL; ``-I``: nothing)."""
    return (path + ("\0" if null else ":")) if names else ""


def _matched_lines(group: dict[str, Any]) -> list[Row]:
    return [row for row in rows(group, Style()) if row.matched]


def counts(answer: dict[str, Any], locate: Locate, null: bool = False, names: bool = True) -> str:
    """``-c``: ``path:count`` of matched lines, as rg counts them (a group's copies alike: the same bytes);
    ``null`` (-0): a NUL after the path, ``names`` False (-I): the count alone."""
    return "".join(
        f"{_lead(path, null, names)}{len(_matched_lines(g)) or g['hit_count']}\n"
        for g in answer["files"]
        for path in (locate(g["namespace"], g["file_path"]), *_copies(g, locate))
    )


def vimgrep(answer: dict[str, Any], locate: Locate, null: bool = False, names: bool = True) -> str:
    """``--vimgrep``: ``path:line:column:text`` for each matched line (``null``, ``names``: as :func:`counts`)."""
    out: list[str] = []
    for group in answer["files"]:
        matched = _matched_lines(group)
        for path in (locate(group["namespace"], group["file_path"]), *_copies(group, locate)):
            lead = _lead(path, null, names)
            out += [f"{lead}{row.number}:{row.column or 1}:{row.text}\n" for row in matched]
    return "".join(out)
