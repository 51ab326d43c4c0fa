"""Human output for the CLI: files grouped by ``namespace:path``, matches highlighted.

Ends with each next action as a runnable ``fedsearch search --args-json …`` command.
"""

from __future__ import annotations

import shlex
from typing import Any

import orjson
import re2

from gateway.request import SearchRequest

__all__ = ["human", "next_command"]

_BOLD_RED, _MAGENTA, _GREEN, _DIM, _RESET = "\x1b[1;31m", "\x1b[35m", "\x1b[32m", "\x1b[2m", "\x1b[0m"


def _highlighter(request: SearchRequest) -> Any:
    criteria = request.criteria  # the pattern, once the query's filters are taken out
    if criteria.mode == "semantic":
        return None
    options = re2.Options()
    options.case_sensitive = request.effective_case()
    options.log_errors = False
    pattern = criteria.pattern if criteria.mode == "regex" else re2.escape(criteria.pattern)
    try:
        return re2.compile(pattern, options)
    except re2.error:  # pragma: no cover - validated before
        return None


def _highlight(text: str, regex: Any) -> str:
    if regex is None:
        return text
    out, last = [], 0
    for m in regex.finditer(text):
        if m.end() == m.start():
            continue
        out.append(text[last : m.start()])
        out.append(_BOLD_RED + m.group(0) + _RESET)
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def _line(
    out: list[str],
    start: int,
    end: int,
    text: str,
    context: dict[str, list[str]] | None,
    regex: Any,
    color: bool,
    score: str,
) -> None:
    """One matched line as rg prints it (``n:text``), its context lines as ``n-text``."""
    before = context["before"] if context else []
    for i, line in enumerate(before):
        out.append(f"{start - len(before) + i}-{line}")
    number = str(start)
    if color:
        number = _GREEN + number + _RESET
    out.append(f"{number}:{_highlight(text, regex)}{score}")
    for i, line in enumerate(context["after"] if context else []):
        out.append(f"{end + 1 + i}-{line}")


def next_command(action: dict[str, Any], suffix: str = "") -> str:
    """A next action as a shell command that makes the call verbatim."""
    args = orjson.dumps(action["args"]).decode()
    return f"fedsearch search --args-json {shlex.quote(args)}{suffix}"


def human(answer: dict[str, Any], request: SearchRequest, color: bool = False, suffix: str = "") -> str:
    regex = _highlighter(request) if color else None
    lines: list[str] = []
    for group in answer["files"]:
        head = f"{group['namespace']}:{group['file_path']}"
        lines.append((_MAGENTA + head + _RESET) if color else head)
        for hit in group["hits"]:
            score = f" ({hit['score']:.2f})" if "score" in hit else ""
            if "lines" in hit:  # a declaration: its header, then its matched lines
                head = f"{hit['qualified_name']}  {hit['kind']}  {hit['start_line']}-{hit['end_line']}{score}"
                lines.append((_DIM + head + _RESET) if color else head)
                for line in hit["lines"]:
                    _line(lines, line["line"], line["line"], line["text"], line.get("context"), regex, color, "")
                continue
            _line(lines, hit["start_line"], hit["end_line"], hit["text"], hit.get("context"), regex, color, score)
        lines.append("")
    shown = len(answer["files"])
    offset = answer["limits"]["offset"]
    summary = f"{answer['file_count']} files matched"
    if shown:
        summary += f"; showing {offset + 1}-{offset + shown}"
    failed = [s for s in answer["namespaces"] if s["status"] != "ok"]
    if failed:
        summary += "; not complete: " + ", ".join(
            f"{s['name']} ({s['status']}{': ' + s['error'] if s.get('error') else ''})" for s in failed
        )
    lines.append((_DIM + summary + _RESET) if color else summary)
    if "note" in answer:
        lines.append(answer["note"])
    for action in answer.get("next", []):
        lines.append(f"next ({action['reason']}):")
        lines.append("  " + next_command(action, suffix))
    return "\n".join(lines) + "\n"
