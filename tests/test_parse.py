"""Declarations from tree-sitter: kinds, names and spans, checked against Python's own `ast` on real code."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

from gateway.index.grammars import EXTENSIONS, GRAMMARS, grammar, language_of
from gateway.index.parse import Declaration, declarations, first_sentence
from gateway.models import MAX_INTENT

#: Real modules of the standard library, read as they are installed.
STDLIB = Path(sysconfig.get_path("stdlib"))
MODULES = [
    "argparse.py",
    "ast.py",
    "asyncio/base_events.py",
    "asyncio/tasks.py",
    "calendar.py",
    "collections/__init__.py",
    "contextlib.py",
    "dataclasses.py",
    "email/message.py",
    "enum.py",
    "functools.py",
    "http/client.py",
    "inspect.py",
    "json/decoder.py",
    "logging/__init__.py",
    "optparse.py",
    "pathlib.py",
    "pdb.py",
    "shutil.py",
    "subprocess.py",
    "tarfile.py",
    "threading.py",
    "typing.py",
    "unittest/case.py",
    "urllib/parse.py",
    "zipfile.py",
]


def _ast_declarations(source: bytes) -> set[tuple[str, str, int, int]]:
    """(kind, qualified name, start incl. decorators, end) of every def and class, as `ast` sees them."""
    out: set[tuple[str, str, int, int]] = set()

    def visit(node: ast.AST, chain: list[str], in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                kind = "class" if isinstance(child, ast.ClassDef) else "method" if in_class else "function"
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                assert child.end_lineno is not None
                out.add((kind, ".".join([*chain, child.name]), start, child.end_lineno))
                visit(child, [*chain, child.name], isinstance(child, ast.ClassDef))
            else:
                visit(child, chain, in_class)  # an `if` in a class body still defines methods

    visit(ast.parse(source), [], False)
    return out


def _ours(source: bytes, language: str = "python") -> list[Declaration]:
    found = declarations(source, language)
    assert found is not None
    return found


class TestPythonAgainstAst:
    @pytest.mark.parametrize("module", MODULES)
    def test_kinds_names_and_spans_are_pythons_own(self, module: str) -> None:
        """Every function, method and class of a real module, with its span, is what `ast` finds."""
        path = STDLIB / module
        if not path.is_file():  # pragma: no cover - a trimmed standard library
            pytest.skip(f"{module} is not installed")
        source = path.read_bytes()
        ours = {(d.kind, d.qualified_name, d.start_line, d.end_line) for d in _ours(source)}
        ours = {d for d in ours if d[0] in ("class", "method", "function")}
        assert ours == _ast_declarations(source)

    def test_module_level_assignments_are_variables_or_constants(self) -> None:
        """`X = 1` at module level is a constant, `x = 1` a variable; assignments in bodies are not declarations."""
        found = _ours(b"MAX = 3\nlimit = 4\ndef f():\n    y = 1\n")
        assert [(d.kind, d.name) for d in found] == [("constant", "MAX"), ("variable", "limit"), ("function", "f")]

    def test_parents_index_the_enclosing_declaration(self) -> None:
        """`parent` is the index of the enclosing declaration, -1 at the top."""
        found = _ours(b"class A:\n    def f(self):\n        def g():\n            pass\n")
        assert [(d.qualified_name, d.parent) for d in found] == [("A", -1), ("A.f", 0), ("A.f.g", 1)]
        assert [d.kind for d in found] == ["class", "method", "function"]

    def test_a_syntax_error_costs_only_what_it_breaks(self) -> None:
        """tree-sitter recovers: the declarations that still parse are found."""
        source = b"def good():\n    return 1\n\ndef broken(:\n    pass\n\nclass Fine:\n    def m(self):\n        pass\n"
        names = {d.qualified_name for d in _ours(source)}
        assert {"good", "Fine", "Fine.m"} <= names


class TestIntent:
    def test_a_docstring_gives_its_first_sentence(self) -> None:
        """The intent is the docstring's first sentence."""
        (found,) = _ours(b'def f():\n    """Open the door. Then close it.\n\n    More.\n    """\n')
        assert found.intent == "Open the door."

    def test_a_leading_comment_is_the_intent_where_there_is_no_docstring(self) -> None:
        """The comment right above a declaration is its intent, markers removed."""
        (found,) = _ours(b"// Serve answers requests on l.\nfunc Serve(l int) {}\n", "go")
        assert found.intent == "Serve answers requests on l."

    def test_a_comment_separated_by_a_blank_line_is_not_the_intent(self) -> None:
        """Only a comment that touches the declaration counts."""
        (found,) = _ours(b"// unrelated\n\nfunc Serve() {}\n", "go")
        assert found.intent == ""

    def test_an_intent_is_cut_to_its_limit(self) -> None:
        """At most MAX_INTENT characters, the last an ellipsis."""
        cut = first_sentence("word " * 100)
        assert len(cut) == MAX_INTENT and cut.endswith("…")

    def test_doc_markup_is_dropped(self) -> None:
        """JSDoc stars and C# XML tags are not part of the intent."""
        (jsdoc,) = _ours(b"/**\n * Makes a thing\n * from x.\n * @param x\n */\nfunction f(x) {}\n", "javascript")
        assert jsdoc.intent == "Makes a thing from x."
        (found,) = _ours(b"/// <summary>Holds a thing.</summary>\nclass C {}\n", "csharp")
        assert found.intent == "Holds a thing."


#: (language, source, expected (kind, qualified name, start, end) in file order)
SAMPLES = [
    (
        "go",
        b"package p\n// S is.\ntype S struct{ a int }\nfunc (s *S) Do() {\n}\nfunc New() *S { return nil }\n"
        b"type I interface {\n\tM()\n}\nconst C = 1\n",
        [
            ("struct", "S", 3, 3),
            ("method", "S.Do", 4, 5),
            ("function", "New", 6, 6),
            ("interface", "I", 7, 9),
            ("method", "I.M", 8, 8),
            ("constant", "C", 10, 10),
        ],
    ),
    (
        "rust",
        b"/// Doc.\n#[derive(Debug)]\npub struct S { a: i32 }\nimpl S {\n    fn new() -> Self { S { a: 1 } }\n}\n"
        b"trait T { fn t(&self); }\nmod m { fn f() {} }\n",
        [
            ("struct", "S", 2, 3),
            ("impl", "S", 4, 6),
            ("method", "S.new", 5, 5),
            ("trait", "T", 7, 7),
            ("method", "T.t", 7, 7),
            ("module", "m", 8, 8),
            ("function", "m.f", 8, 8),
        ],
    ),
    (
        "typescript",
        b"export function f(a: number): void {}\n@Dec()\nclass A {\n  m(): void {}\n}\ninterface I { x: number }\n"
        b"type T = string;\nenum E { A }\nexport const g = (x: number) => x;\n",
        [
            ("function", "f", 1, 1),
            ("class", "A", 2, 5),
            ("method", "A.m", 4, 4),
            ("interface", "I", 6, 6),
            ("type", "T", 7, 7),
            ("enum", "E", 8, 8),
            ("function", "g", 9, 9),
        ],
    ),
    (
        "tsx",
        b"export function App() {\n  return <div>hi</div>;\n}\n",
        [("function", "App", 1, 3)],
    ),
    (
        "javascript",
        b"class A {\n  m() {}\n}\nfunction f() {}\nconst g = function () {};\n",
        [("class", "A", 1, 3), ("method", "A.m", 2, 2), ("function", "f", 4, 4), ("function", "g", 5, 5)],
    ),
    (
        "java",
        b'public class A {\n  @Override\n  public String toString() { return ""; }\n  interface I {}\n}\n',
        [("class", "A", 1, 5), ("method", "A.toString", 2, 3), ("interface", "A.I", 4, 4)],
    ),
    (
        "c",
        b"#define MAX 3\nstruct p { int x; };\nstatic int *find(int a) {\n  return 0;\n}\n",
        [("constant", "MAX", 1, 1), ("struct", "p", 2, 2), ("function", "find", 3, 5)],
    ),
    (
        "cpp",
        b"namespace n {\nclass W {\n  void draw();\n};\nvoid W::draw() {}\n}\n",
        [("module", "n", 1, 6), ("class", "n.W", 2, 4), ("method", "n.W.draw", 3, 3), ("function", "n.W.draw", 5, 5)],
    ),
    (
        "ruby",
        b"module M\n  class K < B\n    def go\n    end\n  end\nend\ndef top; end\n",
        [("module", "M", 1, 6), ("class", "M.K", 2, 5), ("method", "M.K.go", 3, 4), ("function", "top", 7, 7)],
    ),
]


class TestOtherLanguages:
    @pytest.mark.parametrize(("language", "source", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
    def test_kinds_names_and_spans(
        self, language: str, source: bytes, expected: list[tuple[str, str, int, int]]
    ) -> None:
        """Each grammar's query gives the declarations a reader of the language sees."""
        assert [(d.kind, d.qualified_name, d.start_line, d.end_line) for d in _ours(source, language)] == expected

    @pytest.mark.parametrize("name", sorted(GRAMMARS))
    def test_every_grammar_loads_from_its_wheel(self, name: str) -> None:
        """Each grammar's wheel is installed and our query compiles against it."""
        assert grammar(name) is not None

    def test_every_extension_names_a_grammar(self) -> None:
        """The extension table only names grammars we have."""
        assert set(EXTENSIONS.values()) <= set(GRAMMARS)

    def test_a_language_without_a_grammar_has_no_declarations(self) -> None:
        """No grammar: None (the file keeps its line hits)."""
        assert language_of("notes.txt") is None
        assert declarations(b"anything", "cobol") is None
