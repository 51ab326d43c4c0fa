"""The generated part of docs/api.md: the routes and the request's fields, from the OpenAPI document.

``python -m tests.docs_api`` writes it between the markers in docs/api.md;
tests/test_docs.py fails while the file holds anything else there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from gateway.http.openapi import openapi

__all__ = ["API_MD", "BEGIN", "END", "generated", "main", "rewritten"]

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BEGIN = "<!-- generated from /openapi.json by `python -m tests.docs_api`: edit the models, not this -->"
END = "<!-- end of the generated part -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _routes(doc: dict[str, Any]) -> list[str]:
    rows = ["| method | path | what |", "|---|---|---|"]
    for path, operations in doc["paths"].items():
        methods = " ".join(f"`{m.upper()}`" for m in sorted(operations))
        first = next(iter(operations.values()))
        what = first.get("summary") or first.get("description") or first["responses"]["200"]["description"]
        rows.append(f"| {methods} | `{path}` | {_cell(what)} |")
    rows.append("| `GET` | `/openapi.json` | This document (OpenAPI 3.1) |")
    return rows


def _bounds(prop: dict[str, Any]) -> str:
    kind = prop.get("type") or next(t["type"] for t in prop.get("anyOf", []) if t["type"] != "null")
    words = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "array": "strings"}
    text = words.get(kind, kind)
    if "enum" in prop:
        text = " \\| ".join(f"`{v}`" for v in prop["enum"])
    low = prop.get("minimum", prop.get("minLength"))
    high = prop.get("maximum", prop.get("maxLength"))
    if low is not None and high is not None:
        text += f", {low}..{high}" + (" characters" if kind == "string" else "")
    if "maxItems" in prop:
        text += f", at most {prop['maxItems']}"
    return text


def _request(doc: dict[str, Any]) -> list[str]:
    schema = doc["components"]["schemas"]["SearchRequest"]
    params = {}
    for ref in doc["paths"]["/v1/search"]["get"]["parameters"]:
        param = doc["components"]["parameters"][ref["$ref"].rsplit("/", 1)[-1]] if "$ref" in ref else ref
        field = re.split(r"[ :]", param["description"], maxsplit=1)[0]
        repeat = " (repeatable)" if param["schema"].get("type") == "array" else ""
        params[field] = f"`{param['name']}`{repeat}"
    rows = ["| field | GET | type | default | meaning |", "|---|---|---|---|---|"]
    for name, prop in schema["properties"].items():
        if name in schema.get("required", []):
            default = "required"
        elif "default" in prop:
            value = prop["default"]
            value = str(value).lower() if isinstance(value, bool) else value  # as JSON writes it
            default = "smart" if value is None and name == "case_sensitive" else f"`{value}`"
        else:
            default = "all" if name == "namespaces" else "none"
        default = default.replace("`None`", "none")
        meaning = _cell(prop.get("description", ""))
        rows.append(f"| `{name}` | {params.get(name, '')} | {_bounds(prop)} | {default} | {meaning} |")
    return rows


def generated() -> str:
    """The markdown between the markers, from the live OpenAPI document."""
    doc = openapi()
    lines = [BEGIN, "", "### Routes", "", *_routes(doc), "", "### The request (`SearchRequest`)", ""]
    lines += [_cell(doc["components"]["schemas"]["SearchRequest"]["description"]), "", *_request(doc), "", END]
    return "\n".join(lines)


def rewritten(text: str) -> str:
    """``text`` (docs/api.md) with the part between the markers generated anew."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + generated() + text[end:]


def main() -> int:
    text = API_MD.read_text(encoding="utf-8")
    new = rewritten(text)
    if new != text:
        API_MD.write_text(new, encoding="utf-8")
        sys.stdout.write(f"rewrote {API_MD}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
