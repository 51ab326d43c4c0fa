"""The tree-sitter grammars the declaration index parses with, each from its own PyPI wheel.

A file's language is its extension's (:func:`language_of`). A grammar is loaded on
first use (:func:`grammar`): its wheel's compiled language and our query
(``queries/<name>.scm``: ``@decl.KIND`` on each declaration, ``@name`` on its name).
A grammar whose wheel is missing, or whose query the installed grammar rejects, is
logged once and its files get line hits. Nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import importlib
import posixpath
from typing import TYPE_CHECKING

import msgspec

from gateway.log import get_logger

if TYPE_CHECKING:  # tree-sitter is imported with the first grammar loaded (a page read from the index needs none)
    import tree_sitter as ts

__all__ = ["EXTENSIONS", "GRAMMARS", "Grammar", "Loaded", "grammar", "language_of"]

log = get_logger("fedsearch.index")


class Grammar(msgspec.Struct, frozen=True):
    """How to load and read one language."""

    name: str
    module: str  # the wheel's package
    function: str = "language"  # its function returning the compiled language
    query: str = ""  # queries/<query>.scm; the name when empty
    #: Kinds whose directly enclosed functions are methods.
    class_like: frozenset[str] = frozenset({"class", "struct", "trait", "impl", "interface", "enum"})
    #: Node types around a declaration that belong to its span (decorators, export, template).
    wrappers: frozenset[str] = frozenset()
    #: Node types around a declaration that belong to it only when it is their one child (Go's ``type X ...``).
    single_wrappers: frozenset[str] = frozenset()
    #: Node types before a declaration that belong to its span (Rust's ``#[attributes]``).
    attributes: frozenset[str] = frozenset()
    comments: frozenset[str] = frozenset({"comment"})
    #: The first string of a body is the docstring (Python).
    docstrings: bool = False


GRAMMARS: dict[str, Grammar] = {
    g.name: g
    for g in (
        Grammar("python", "tree_sitter_python", wrappers=frozenset({"decorated_definition"}), docstrings=True),
        Grammar("javascript", "tree_sitter_javascript", wrappers=frozenset({"export_statement"})),
        Grammar(
            "typescript",
            "tree_sitter_typescript",
            "language_typescript",
            wrappers=frozenset({"export_statement", "ambient_declaration"}),
        ),
        Grammar(
            "tsx",
            "tree_sitter_typescript",
            "language_tsx",
            query="typescript",
            wrappers=frozenset({"export_statement", "ambient_declaration"}),
        ),
        Grammar(
            "go",
            "tree_sitter_go",
            single_wrappers=frozenset({"type_declaration", "const_declaration", "var_declaration"}),
        ),
        Grammar(
            "rust",
            "tree_sitter_rust",
            attributes=frozenset({"attribute_item"}),
            comments=frozenset({"line_comment", "block_comment"}),
        ),
        Grammar("java", "tree_sitter_java", comments=frozenset({"line_comment", "block_comment"})),
        Grammar("c", "tree_sitter_c"),
        Grammar("cpp", "tree_sitter_cpp", wrappers=frozenset({"template_declaration"})),
        Grammar(
            "ruby",
            "tree_sitter_ruby",
            class_like=frozenset({"class", "module"}),
        ),
        Grammar("csharp", "tree_sitter_c_sharp"),
        Grammar("php", "tree_sitter_php", "language_php"),
        Grammar("lua", "tree_sitter_lua"),
        Grammar("bash", "tree_sitter_bash"),
        Grammar("scala", "tree_sitter_scala", comments=frozenset({"comment", "block_comment"})),
    )
}

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "cpp",  # C++ reads C headers; C cannot read C++ ones
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
    ".cs": "csharp",
    ".php": "php",
    ".lua": "lua",
    ".sh": "bash",
    ".bash": "bash",
    ".scala": "scala",
    ".sc": "scala",
}


def language_of(path: str) -> str | None:
    """The grammar name for a file path (by extension), or None."""
    return EXTENSIONS.get(posixpath.splitext(path)[1])


class Loaded(msgspec.Struct, frozen=True):
    """A grammar ready to parse: its language, compiled query and a parser (one per process)."""

    grammar: Grammar
    language: ts.Language
    query: ts.Query
    parser: ts.Parser


@functools.cache
def grammar(name: str) -> Loaded | None:
    """The loaded grammar ``name``, or None (logged once) if its wheel or query cannot load."""
    spec = GRAMMARS.get(name)
    if spec is None:
        return None
    import tree_sitter as ts

    try:
        module = importlib.import_module(spec.module)
        language = ts.Language(getattr(module, spec.function)())
        from importlib import resources  # with tree-sitter: only to parse

        text = resources.files("gateway.index").joinpath("queries", f"{spec.query or spec.name}.scm").read_text()
        query = ts.Query(language, text)
    except (ImportError, AttributeError, OSError, ValueError, ts.QueryError) as exc:
        log.warning("grammar_unavailable", language=name, error=f"{type(exc).__name__}: {exc}"[:300])
        return None
    return Loaded(spec, language, query, ts.Parser(language))
