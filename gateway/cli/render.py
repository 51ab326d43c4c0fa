"""Human output for the CLI, as rg prints it: a file's path, then its numbered lines.

A page prints each file under its path (relative to the current directory, see
:mod:`gateway.cli.scope`), its matched lines as ``line:text`` and context lines as
``line-text``; context blocks that touch or overlap are merged and separated by
``--``, as ``rg -C`` prints them, and a declaration's header (``url_for  function
200-251``) goes above the block holding its first line, never inside one. ``-N``, ``-o``
and ``-m`` are rg's. Colours are rg's (paths magenta, line numbers green, matches bold
red). :func:`summary` says what the page holds, the answer's note, and each next action
as a runnable ``fedsearch search --args-json …`` command.

From the service's pages (a config's namespaces, ``--server``), ``-l``, ``-c`` and
``--vimgrep`` print rg's formats: one path, ``path:count``, or ``path:line:column:text``
a line; over checkouts found here rg prints them itself (:mod:`gateway.cli.listing`).

A file's rows come from its hits (:func:`rows`): a hit with ``lines`` (a declaration)
contributes each of them, any other hit its own line. A declaration header belongs in
:func:`rows` too, as a row of its own; :func:`_blocks` places it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

__all__ = [
    "Style",
    "counts",
    "files_with_matches",
    "highlighter",
    "human",
    "join_names",
    "next_command",
    "plural",
    "summary",
    "type_list",
    "unanswered",
    "vimgrep",
]

PATH, NUMBER, MATCH, DIM, RESET = "\x1b[35m", "\x1b[32m", "\x1b[1;31m", "\x1b[2m", "\x1b[0m"
SEPARATOR = "--"

#: (namespace, file path) -> how the path is printed
Locate = Callable[[str, str], str]


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


def _parts(text: str, regex: Any) -> list[str]:
    """-o: the matched parts of a line (the whole line where the regex finds none)."""
    found = [m.group(0) for m in regex.finditer(text) if m.end() > m.start()] if regex is not None else []
    return found or [text]


def _row(row: Row, style: Style) -> list[str]:
    number = f"{NUMBER}{row.number}{RESET}" if style.color else str(row.number)
    if not row.matched:
        return [f"{number}-{row.text}" if style.numbers else row.text]
    score = f" ({row.score:.2f})" if row.score is not None else ""
    texts = _parts(row.text, style.highlight) if style.only else [row.text]
    if style.color:
        texts = [_highlight(text, style.highlight) for text in texts]
    return [f"{number}:{text}{score}" if style.numbers else f"{text}{score}" for text in texts]


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


def _file(group: dict[str, Any], style: Style, locate: Locate) -> list[str]:
    head = locate(group["namespace"], group["file_path"])
    out = [f"{PATH}{head}{RESET}" if style.color else head]
    copies = _copies(group, locate)
    if copies:
        also = "also in: " + join_names(copies)
        out.append(f"{DIM}{also}{RESET}" if style.color else also)
    for i, (headers, lines) in enumerate(_blocks(rows(group, style), style)):
        if i and (style.before or style.after):
            out.append(SEPARATOR)
        out += [f"{DIM}{h.text}{RESET}" if style.color else h.text for h in headers]
        for row in lines:
            out += _row(row, style)
    return out


def human(answer: dict[str, Any], style: Style, locate: Locate) -> str:
    """A page's files as rg prints matches (``--heading``: a blank line between files); "" for none."""
    files = ["\n".join(_file(group, style, locate)) for group in answer["files"]]
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


def files_with_matches(answer: dict[str, Any], locate: Locate) -> str:
    """``-l``: each file's path (a group's copies too: rg lists every file)."""
    return "".join(
        path + "\n" for g in answer["files"] for path in (locate(g["namespace"], g["file_path"]), *_copies(g, locate))
    )


def _matched_lines(group: dict[str, Any]) -> list[Row]:
    return [row for row in rows(group, Style()) if row.matched]


def counts(answer: dict[str, Any], locate: Locate) -> str:
    """``-c``: ``path:count`` of matched lines, as rg counts them (a group's copies alike: the same bytes)."""
    return "".join(
        f"{path}:{len(_matched_lines(g)) or g['hit_count']}\n"
        for g in answer["files"]
        for path in (locate(g["namespace"], g["file_path"]), *_copies(g, locate))
    )


def vimgrep(answer: dict[str, Any], locate: Locate) -> str:
    """``--vimgrep``: ``path:line:column:text`` for each matched line."""
    out: list[str] = []
    for group in answer["files"]:
        matched = _matched_lines(group)
        for path in (locate(group["namespace"], group["file_path"]), *_copies(group, locate)):
            out += [f"{path}:{row.number}:{row.column or 1}:{row.text}\n" for row in matched]
    return "".join(out)
