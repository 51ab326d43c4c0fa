"""Hypothesis strategies for outcomes and requests, shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from gateway.models import BackendResult, FileMatch, Hit, Outcome

NAMESPACES = ["alpha", "beta", "gamma", "delta", "eps/sub"]
PATHS = [
    "src/foo.py",
    "src/bar.py",
    "foo/util.go",
    "lib/widget.rs",
    "README.md",
    "vendor/dep/foo.js",
    "web/app.min.js",
    "docs/guide.md",
    "pkg/api/server.go",
    "tests/test_foo.py",
    "a.txt",
    "b/c/d.txt",
]
TEXTS = ["def foo(x):", "    return foo", "class Foo:", "x = foo + 1", "func foo() {}", "// foo"]


@st.composite
def files(draw: st.DrawFn) -> tuple[FileMatch, ...]:
    paths = draw(st.lists(st.sampled_from(PATHS), unique=True, max_size=len(PATHS)))
    out = []
    for path in paths:
        lines = draw(st.lists(st.integers(1, 400), unique=True, min_size=1, max_size=8))
        hits = tuple(Hit(line=n, text=draw(st.sampled_from(TEXTS)), column=1) for n in sorted(lines))
        out.append(FileMatch(path=path, hits=hits))
    return tuple(out)


@st.composite
def outcomes(draw: st.DrawFn, min_size: int = 1, statuses: bool = True) -> list[Outcome]:
    names = draw(st.lists(st.sampled_from(NAMESPACES), unique=True, min_size=min_size, max_size=5))
    out = []
    for name in sorted(names):
        status = draw(st.sampled_from(["ok", "ok", "ok", "capped", "timeout", "error"])) if statuses else "ok"
        result = None
        if status in ("ok", "capped", "timeout"):
            result = BackendResult(files=draw(files()), status=status)
        out.append(
            Outcome(
                namespace=name,
                backend="mock",
                status=status,
                took_ms=0,
                result=result,
                error="" if status == "ok" else "boom",
                weight=draw(st.sampled_from([0.5, 1.0, 1.5, 3.0])),
            )
        )
    return out


def request_args() -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries(
        {
            "query": st.sampled_from(["foo", "Foo", "widget"]),
            "files": st.integers(1, 6),
            "hit_budget": st.integers(1, 25),
            "char_budget": st.sampled_from([1_000, 3_000, 40_000]),
            "hit_lines": st.one_of(st.none(), st.integers(0, 4)),
        }
    )
