"""A file's declarations from its tree-sitter parse: kind, name, qualified name, span, intent.

:func:`declarations` runs the language's query (:mod:`gateway.index.grammars`) over
the parse and makes each captured node a :class:`Declaration`:

- **span**: 1-based lines, from the first decorator, attribute, ``export`` or
  ``template`` that belongs to it, to its last line (a Python body's trailing
  comments are not part of it, as Python's own ``ast`` has it);
- **enclosing chain**: declarations nest by span; ``qualified_name`` is the dotted
  chain of enclosing names ending in its own (``Flask.url_for``); a Go method is
  qualified by its receiver type, a C++ ``A::f`` by ``A``;
- **kind**: the query's, a function directly inside a class-like declaration being a
  ``method``, and a module-level ``variable`` named in capitals a ``constant``;
- **intent**: the docstring (Python) or the comment right above it, its first
  sentence, at most :data:`MAX_INTENT` characters;
- **signature**: its header as written, from its keyword to its body (``def
  parse(value: str) -> int``, ``func (s *Server) Serve(l net.Listener) error``),
  whitespace collapsed, at most :data:`MAX_INTENT` characters (what the intent index
  embeds beside the name and intent).

A syntax error costs only what it breaks: tree-sitter recovers, and the
declarations it still recognises count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec
import tree_sitter as ts

from gateway.index.grammars import Grammar, Loaded, grammar
from gateway.models import ELLIPSIS, MAX_INTENT

__all__ = ["MAX_INTENT", "Declaration", "declarations", "first_sentence", "signature"]


class Declaration(msgspec.Struct, frozen=True, array_like=True):
    """One declaration of a file; ``parent`` is the index of the enclosing one in the file's list, or -1."""

    kind: str
    name: str
    qualified_name: str
    start_line: int
    end_line: int
    intent: str = ""
    parent: int = -1
    signature: str = ""


#: Declarator nodes a C/C++ function's name lies inside (followed through their ``declarator``).
_DECLARATORS = frozenset(
    {
        "pointer_declarator",
        "reference_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
        "function_declarator",
    }
)
_FUNCTION_NAMES = frozenset(
    {"identifier", "field_identifier", "destructor_name", "operator_name", "qualified_identifier", "template_function"}
)
_COMMENT_MARKS = re.compile(r"^\s*(?:/\*\*?|\*/|\*(?!/)|///?!?|#+!?|--|;+)\s?", re.MULTILINE)
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)")
_QUALIFIED = re.compile(r"\w[.:]").search
_MARKUP = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")  # XML doc tags (C#'s <summary>)


def first_sentence(text: str) -> str:
    """The first sentence of a docstring or comment's first paragraph, whitespace collapsed, cut to MAX_INTENT."""
    paragraph = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    flat = " ".join(paragraph.split())
    found = _SENTENCE.match(flat)
    sentence = found.group(1) if found else flat
    if len(sentence) > MAX_INTENT:
        sentence = sentence[: MAX_INTENT - 1] + ELLIPSIS
    return sentence


def signature(node: ts.Node) -> str:
    """A declaration's header: its text up to its body or a comment (its first line when it has neither), on
    one line."""
    raw = node.text or b""
    body = node.child_by_field_name("body")
    end = next((c for c in node.children if c.type == "comment" or c == body), None)
    if end is not None and end.start_byte > node.start_byte:
        raw = raw[: end.start_byte - node.start_byte]
    else:
        raw = raw.split(b"\n", 1)[0]
    flat = " ".join(raw[: 4 * MAX_INTENT].decode("utf-8", "replace").split()).rstrip("{:= ")
    return flat if len(flat) <= MAX_INTENT else flat[: MAX_INTENT - 1] + ELLIPSIS


def _text(node: ts.Node | None) -> str:
    raw = node.text if node is not None else None
    return raw.decode("utf-8", "replace") if raw else ""


def _function_name(declarator: ts.Node) -> tuple[str, str] | None:
    """(scope, name) of a C/C++ function from its declarator (scope ``""`` when unqualified)."""
    node: ts.Node | None = declarator
    while node is not None and node.type in _DECLARATORS:
        node = node.child_by_field_name("declarator")
    if node is None or node.type not in _FUNCTION_NAMES:
        return None
    if node.type == "template_function":
        node = node.child_by_field_name("name")
    scope: list[str] = []
    while node is not None and node.type == "qualified_identifier":
        scope.append(_text(node.child_by_field_name("scope")))
        node = node.child_by_field_name("name")
    if node is None:
        return None
    if node.type == "template_function":
        node = node.child_by_field_name("name")
    name = _text(node)
    return (".".join(s for s in scope if s).replace("::", "."), name) if name else None


def _last_code_row(node: ts.Node) -> int:
    """The last row of ``node`` that is not a trailing comment (0-based)."""
    while node.child_count:
        last = next((c for c in reversed(node.children) if c.type != "comment"), None)
        if last is None:
            break
        node = last
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _end_row(node: ts.Node, python: bool) -> int:
    if python:
        return _last_code_row(node)
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _outer(node: ts.Node, spec: Grammar) -> ts.Node:
    """The node whose span is the declaration's: with its decorators, export or template."""
    parent = node.parent
    while parent is not None:
        if parent.type in spec.wrappers or (parent.type in spec.single_wrappers and parent.named_child_count == 1):
            node, parent = parent, parent.parent
        else:
            break
    return node


def _attributes_start(node: ts.Node, spec: Grammar) -> ts.Node:
    """The first of the attributes right before ``node`` (Rust's ``#[...]``), else ``node``."""
    first = node
    prev = node.prev_named_sibling
    while prev is not None and (prev.type in spec.attributes or prev.type in spec.comments):
        if prev.type in spec.attributes:
            first = prev
        prev = prev.prev_named_sibling
    return first


def _docstring(node: ts.Node) -> str:
    """A Python function or class's docstring (the first statement of its body, a string)."""
    body = node.child_by_field_name("body")
    if body is None:
        return ""
    for child in body.named_children:
        if child.type == "comment":
            continue
        if child.type == "expression_statement" and child.named_child_count == 1:
            string = child.named_children[0]
            if string.type == "string":
                return "".join(_text(part) for part in string.named_children if part.type == "string_content")
        return ""
    return ""


def _leading_comment(outer: ts.Node, spec: Grammar) -> str:
    """The comment lines right above a declaration (attributes between them allowed)."""
    parts: list[str] = []
    row = outer.start_point.row
    prev = outer.prev_named_sibling
    parent = outer.parent
    if prev is None and parent is not None and parent.start_point.row == row:  # first in a body (Ruby)
        prev = parent.prev_named_sibling
    while prev is not None:
        end = prev.end_point
        end_row = end.row - 1 if end.column == 0 and end.row > prev.start_point.row else end.row
        if end_row < row - 1:
            break
        if prev.type in spec.comments:
            parts.append(_text(prev))
        elif prev.type not in spec.attributes:
            break
        row = prev.start_point.row
        prev = prev.prev_named_sibling
    if not parts:
        return ""
    return _MARKUP.sub("", _COMMENT_MARKS.sub("", "\n".join(reversed(parts))).replace("*/", ""))


@dataclass(slots=True)
class _Found:
    """A declaration while its file is read: its node and what the query said."""

    pattern: int
    node: ts.Node
    kind: str
    name: str
    scope: str  # a qualifier of its own (Go receiver, C++ ``A::``), dotted
    start: int
    end: int


def _found(matches: Iterable[tuple[int, dict[str, list[ts.Node]]]], spec: Grammar) -> list[_Found]:
    """One entry per declared node (the first pattern that matched it wins), in file order."""
    python = spec.docstrings
    by_node: dict[tuple[int, int], _Found] = {}
    for pattern, captures in matches:
        node = kind = None
        for capture, nodes in captures.items():
            if capture.startswith("decl."):
                node, kind = nodes[0], capture[5:]
                break
        if node is None or kind is None:
            continue
        key = (node.start_byte, node.end_byte)
        seen = by_node.get(key)
        if seen is not None and seen.pattern <= pattern:
            continue
        scope = ""
        if "declarator" in captures:
            named = _function_name(captures["declarator"][0])
            if named is None:
                continue
            scope, name = named
        else:
            name = _text(captures["name"][0]) if "name" in captures else ""
        if "receiver" in captures:
            scope = _text(captures["receiver"][0])
        if _QUALIFIED(name):  # Foo::Bar (Ruby), A.B (TypeScript), M:f (Lua)
            head, _, name = name.replace("::", ".").replace(":", ".").rpartition(".")
            scope = f"{scope}.{head}" if scope else head
        if not name:
            continue
        outer = _attributes_start(_outer(node, spec), spec)
        start = outer.start_point.row
        by_node[key] = _Found(pattern, node, kind, name, scope, start, max(start, _end_row(node, python)))
    return sorted(by_node.values(), key=lambda f: (f.node.start_byte, -f.node.end_byte))


def _build(found: Sequence[_Found], spec: Grammar) -> list[Declaration]:
    out: list[Declaration] = []
    stack: list[tuple[int, int]] = []  # (end byte, index in out) of the enclosing declarations
    for f in found:
        start_byte = f.node.start_byte
        while stack and stack[-1][0] <= start_byte:
            stack.pop()
        parent = stack[-1][1] if stack and f.node.end_byte <= stack[-1][0] else -1
        kind = f.kind
        enclosing = out[parent] if parent >= 0 else None
        if kind == "function" and enclosing is not None and enclosing.kind in spec.class_like:
            kind = "method"
        elif kind == "variable" and f.name.isupper():
            kind = "constant"
        prefix = enclosing.qualified_name if enclosing is not None else ""
        if f.scope:
            prefix = f"{prefix}.{f.scope}" if prefix else f.scope
        if spec.docstrings and kind in ("function", "method", "class"):
            intent = _docstring(f.node) or _leading_comment(_outer(f.node, spec), spec)
        else:
            intent = _leading_comment(_attributes_start(_outer(f.node, spec), spec), spec)
        out.append(
            Declaration(
                kind=kind,
                name=f.name,
                qualified_name=f"{prefix}.{f.name}" if prefix else f.name,
                start_line=f.start + 1,
                end_line=f.end + 1,
                intent=first_sentence(intent) if intent else "",
                parent=parent,
                signature=signature(f.node),
            )
        )
        stack.append((f.node.end_byte, len(out) - 1))
    return out


def declarations(source: bytes, language: str) -> list[Declaration] | None:
    """The declarations of ``source`` in file order (outer before inner), or None without a grammar."""
    loaded: Loaded | None = grammar(language)
    if loaded is None:
        return None
    tree = loaded.parser.parse(source)
    matches = ts.QueryCursor(loaded.query).matches(tree.root_node)
    return _build(_found(matches, loaded.grammar), loaded.grammar)
