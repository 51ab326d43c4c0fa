"""The compact text form of a ``search`` result, for MCP clients that pass both contents to their model.

SPEC §4 makes a ``search`` result's text content the very same JSON as its ``structuredContent``;
a client that hands both to its model pays for the answer twice. ``fedsearch mcp --text compact``
puts this instead in the text content: the page as a person reads it, in about a third of the
JSON's characters, while ``structuredContent`` keeps the whole answer::

    flask/src/flask/app.py
      12: from .helpers import url_for
      Flask.url_for  method  1003-1130
        1003: def url_for(
        1046: … 4 more matched lines: read_file flask src/flask/app.py 1003-1130
    20 files matched; showing 1-20
    next (more files): search {"query": "url_for", "offset": 20}

One line a file (``namespace/path``, and ``also in:`` its copies), then its own hit's matched
lines (those outside every declaration), one a declaration (qualified name, kind, span, score),
one a matched line (``line: text``), one for the lines a hit left out (with the ``read_file``
span holding them), then what the page holds, the note and each next action as the ``search``
arguments that make it.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["TEXT_FORMS", "compact"]

#: ``fedsearch mcp --text``: the JSON (SPEC §4, the default) or the compact form.
TEXT_FORMS = ("json", "compact")


def _hit(hit: dict[str, Any], group: dict[str, Any]) -> list[str]:
    lines = hit.get("lines")
    own = hit["kind"] == "file"  # the file's own hit: its lines under the file's heading, unindented
    score = f"  {hit['score']:.2f}" if hit.get("score") is not None else ""
    out = [] if own else [f"  {hit['qualified_name']}  {hit['kind']}  {hit['start_line']}-{hit['end_line']}{score}"]
    indent = "  " if own else "    "
    out += [f"{indent}{line['line']}: {line['text']}" for line in lines or ()]
    more = hit.get("line_count", 0) - len(lines or ())
    if more > 0:
        span = f"{group['namespace']} {group['file_path']} {hit['start_line']}-{hit['end_line']}"
        out.append(f"{indent}… {more} more matched line{'s' if more != 1 else ''}: read_file {span}")
    return out


def _group(group: dict[str, Any]) -> list[str]:
    head = f"{group['namespace']}/{group['file_path']}"
    copies = group.get("duplicates")
    if copies:
        head += "  (also in: " + ", ".join(f"{c['namespace']}/{c['file_path']}" for c in copies) + ")"
    out = [head]
    for hit in group["hits"]:
        if hit["kind"] != "file" or hit.get("line_count"):  # a path-only match: the heading says it
            out += _hit(hit, group)
    return out


def _summary(answer: dict[str, Any]) -> list[str]:
    shown, offset = len(answer["files"]), answer["limits"]["offset"]
    text = f"{answer['file_count']} file{'s' if answer['file_count'] != 1 else ''} matched"
    if shown:
        text += f"; showing {offset + 1}-{offset + shown}"
    missing = [f"{s['name']} ({s['status']})" for s in answer["namespaces"] if s["status"] != "ok"]
    if missing:
        text += "; not complete: " + ", ".join(missing)
    out = [text]
    if answer.get("note"):
        out.append(answer["note"])
    for action in answer.get("next") or ():
        out.append(f"next ({action['reason']}): {action['tool']} {orjson.dumps(action['args']).decode()}")
    return out


def compact(answer: dict[str, Any]) -> str:
    """A ``search`` answer as compact text: every file and hit of the page, and what it left out."""
    out: list[str] = []
    for group in answer["files"]:
        out += _group(group)
    return "\n".join(out + _summary(answer)) + "\n"
