"""The request's string fields as types that carry their JSON Schema.

What :class:`~gateway.query.request.SearchRequest`'s validators enforce on a query,
a namespace pattern, a path glob and a language name, said as lengths, patterns and
an enum in the schema the OpenAPI document and MCP publish (issue 40), so a client
generated from either never sends what the server refuses. The patterns are
ECMA-262 as JSON Schema wants them, written only with what Python's ``re``, Rust's
``regex`` and ECMA-262 read alike (``\\uXXXX`` escapes, classes, no look-around).

What no schema can say (a namespace pattern must match a namespace the caller sees, a
glob's brackets must close, a regex must compile with RE2, the query's filters must
be valid) the fields' descriptions say in words. A request that breaks one of those is
schema-valid and refused (400 naming the field): the check that fails on it is
schemathesis' ``positive_data_acceptance`` (ST202), and tests/openapi_hooks.py drops
exactly those, rule by rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, get_args

from pydantic import Field, WithJsonSchema
from pydantic.fields import FieldInfo

from gateway.query.criteria import MAX_QUERY
from gateway.query.globs import MAX_BRACES, MAX_GLOB_LENGTH, MAX_STARS
from gateway.query.languages import ALIASES, LANGUAGES

__all__ = [
    "MAX_NAMESPACE_PATTERN",
    "Glob",
    "Language",
    "NamespacePattern",
    "Query",
    "check_json_types",
    "check_namespace_patterns",
    "json_kinds",
]

MAX_NAMESPACE_PATTERN = 256
#: Python's whitespace (``str.isspace``, what ``str.strip`` and the query's words split on), as a class body.
_SPACE = "\\t-\\r\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
_NUL = "\\u0000"
_NO_NUL = f"^[^{_NUL}]*$"
#: Not blank, no NUL: something other than whitespace somewhere.
_QUERY = f"^[^{_NUL}]*[^{_NUL}{_SPACE}][^{_NUL}]*$"
#: A glob: no NUL, and something besides '/' once a leading '!' is taken off.
_GLOB = f"^(?:![^{_NUL}]*[^/{_NUL}][^{_NUL}]*|[^!/{_NUL}][^{_NUL}]*|/[^{_NUL}]*[^/{_NUL}][^{_NUL}]*)$"

Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY,
        json_schema_extra={"pattern": _QUERY, "examples": ["import", "lang:python def main"]},
        description="What to look for: a literal string (exact), an RE2 regex, or a phrase (semantic); not blank, "
        "no NUL. It may carry the filters repo:, file:, lang:, case:, dedup:, sym: and /RE/ (docs/api.md); each "
        "must be valid (a repo: pattern matching a visible namespace, a known lang:, a glob that closes), "
        "something must be left to search, and a regex must compile with RE2 (no line break, '{' only as a "
        "repetition). Otherwise a 400 names the field.",
    ),
]
NamespacePattern = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAMESPACE_PATTERN,
        json_schema_extra={
            "pattern": _NO_NUL,
            "description": "A namespace name or glob; it must match a namespace the caller may see (else 400).",
        },
    ),
]
Glob = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_GLOB_LENGTH,
        json_schema_extra={
            "pattern": _GLOB,
            "allOf": [
                {"pattern": f"^[^*]*(?:\\*[^*]*){{0,{MAX_STARS}}}$"},
                {"pattern": f"^[^{{]*(?:\\{{[^{{]*){{0,{MAX_BRACES}}}$"},
            ],
            "description": f"A glob on the file path as rg's -g reads it ('!' first: excludes); at most "
            f"{MAX_STARS} '*' and {MAX_BRACES} '{{'; its '[' and '{{' must close, and rg must take it (else 400).",
        },
    ),
]
Language = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "enum": sorted({*LANGUAGES, *ALIASES}),
            "description": "A language name or alias (case and surrounding blanks are ignored).",
        }
    ),
]


def json_kinds(fields: Mapping[str, FieldInfo]) -> dict[str, str]:
    """The JSON kind of each numeric or boolean field (``integer``, ``number``, ``boolean``), by its type."""
    kinds: dict[str, str] = {}
    for name, info in fields.items():
        types = set(get_args(info.annotation) or (info.annotation,)) - {type(None)}
        for kind, python in (("boolean", bool), ("integer", int), ("number", float)):
            if types == {python}:
                kinds[name] = kind
    return kinds


def check_json_types(kinds: Mapping[str, str], data: Mapping[str, Any]) -> None:
    """Raise ValueError (``field: message``) where ``data`` holds a value of another JSON kind than its
    field's: "5" or true for an integer, 1 for a boolean (pydantic's lax mode would take them, the
    schema does not). An integral float is an integer, as in JSON Schema."""
    for name, kind in kinds.items():
        value = data.get(name)
        if value is None:
            continue
        if kind == "boolean":
            ok = isinstance(value, bool)
        elif isinstance(value, bool):
            ok = False
        elif kind == "integer":
            ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        else:
            ok = isinstance(value, int | float)
        if not ok:
            raise ValueError(f"{name}: must be {'an' if kind == 'integer' else 'a'} {kind}, not {_kind_of(value)}")


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list | tuple) else "an object"


def check_namespace_patterns(patterns: list[str]) -> list[str]:
    """``patterns`` unchanged, each a namespace pattern (1 to 256 characters, no NUL), else ValueError:
    the one rule for a request's ``namespaces`` and a peer's own."""
    for pattern in patterns:
        if not pattern or len(pattern) > MAX_NAMESPACE_PATTERN or "\x00" in pattern:
            raise ValueError(f"invalid namespace pattern {pattern!r}")
    return patterns
