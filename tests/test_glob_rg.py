"""``paths`` against the real ``rg -g``: PathFilter, the ripgrep backend and the CLI's listing keep its files.

The oracle is rg itself (``rg --files -g G1 -g G2 ...`` run at a tree's root): hypothesis writes small
trees (folders named like a project's, names from a small alphabet so that globs hit) and lists of one
to four globs from the grammar rg reads (literals, ``*``, ``?``, ``**/``, ``{a,b}``, ``[ab]``, a leading
``!`` or ``/``, a trailing ``/``), and every surface must keep exactly rg's files. The trees hold no
hidden file and no ignore file, so rg's default set is every file; the one documented difference (an
include never brings back hidden or ignored files) is a test of its own.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings, find_rg
from gateway.cli.listing import _filtered, _unanchored_excludes
from gateway.fanout import Route, fan_out
from gateway.index.content import fresh
from gateway.models import SearchQuery
from gateway.query.globs import PathFilter, anywhere, rg_excludes
from tests.content_support import indexed
from tests.helpers import git_repo

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

#: What every file of a generated tree holds: a search for it finds every file.
NEEDLE = "needle"
#: Folder and file names of generated trees (a file may be named like a folder: ``src``).
FOLDERS = ["src", "tests", "docs", "a", "b"]
NAMES = ["x.py", "test_a.py", "ab.py", "a.md", "README.md", "b.txt", "src", "a"]
#: The pieces of a glob's components.
ATOMS = [
    *("src", "tests", "docs", "a", "b", "x.py", "test_*", "*", "?", "*.py", "*.md", "a?"),
    *("{a,b}", "{src,tests}", "*.{py,md}", "[ab]", "[!a]*", "\\a"),
]
EXAMPLES = 100
#: A flask-like checkout for the issue's globs.
FLASK = [
    "setup.py",
    "README.md",
    "src/flask/__init__.py",
    "src/flask/app.py",
    "src/flask/json/tag.py",
    "src/flask/py.typed",
    "src/conftest.py",
    "tests/conftest.py",
    "tests/test_app.py",
    "tests/static/index.html",
    "tests/test_apps/blueprintapp/__init__.py",
    "docs/index.md",
    "docs/api.md",
    "docs/conf.py",
    "a/x.py",
    "a/deep/y.py",
    "b/z.md",
    "examples/test_a.py",
]


@st.composite
def trees(draw: st.DrawFn) -> frozenset[str]:
    """A few files, a few folders deep; no file where another file's folder is."""
    paths = draw(
        st.lists(
            st.builds(
                lambda folders, name: "/".join([*folders, name]),
                st.lists(st.sampled_from(FOLDERS), max_size=3),
                st.sampled_from(NAMES),
            ),
            min_size=1,
            max_size=20,
        )
    )
    folders = {"/".join(p.split("/")[:k]) for p in paths for k in range(1, p.count("/") + 1)}
    return frozenset(p for p in paths if p not in folders)


#: One glob: ``!`` or not, ``/`` first or not, one to three components (``**`` among them), ``/`` last or not.
GLOBS = st.builds(
    lambda bang, lead, parts, trail: bang + lead + "/".join(parts) + trail,
    st.sampled_from(["", "!"]),
    st.sampled_from(["", "", "/"]),
    st.lists(st.sampled_from(ATOMS) | st.just("**"), min_size=1, max_size=3),
    st.sampled_from(["", "", "/"]),
)
GLOB_LISTS = st.lists(GLOBS, min_size=1, max_size=4)


def write(root: Path, files: Iterable[str]) -> None:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{NEEDLE}\n", encoding="utf-8")


def rg_files(root: Path, globs: Sequence[str], *more: str) -> set[str] | None:
    """What ``rg --files -g ...`` (``more`` instead of ``--files``) lists at ``root``; None when rg refuses a glob."""
    rg = find_rg()
    assert rg is not None
    argv = [rg, "--no-config", "--null"]
    for glob in globs:
        argv += ["-g", glob]
    argv += more or ("--files",)
    done = subprocess.run(argv, cwd=root, capture_output=True, check=False)
    if done.returncode == 2 and b"No files were searched" not in done.stderr:  # a search of no file is not one
        return None
    return {raw.decode().removeprefix("./") for raw in done.stdout.split(b"\0") if raw}


def kept(files: Iterable[str], globs: Sequence[str]) -> set[str]:
    keep = PathFilter.build(globs)
    return {path for path in files if keep(path)}


async def searched(root: Path, globs: Sequence[str], text: str = NEEDLE, **settings: object) -> set[str]:
    """The files one ripgrep namespace over ``root`` answers for ``text`` with ``paths`` = ``globs``."""
    backend = RipgrepBackend("ns", RipgrepSettings(root=str(root), **settings))  # type: ignore[arg-type]
    async with backend:
        result = await backend.search(SearchQuery(text=text, paths=tuple(globs), max_files=1000))
    assert result.status == "ok", result.reason
    return {f.path for f in result.files}


class TestAgainstRg:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tree=trees(), globs=GLOB_LISTS)
    def test_path_filter_keeps_rgs_files(self, tree: frozenset[str], globs: list[str]) -> None:
        """PathFilter keeps exactly the files ``rg --files -g ...`` lists; a glob rg refuses is refused."""
        with tempfile.TemporaryDirectory() as folder:
            write(Path(folder), tree)
            listed = rg_files(Path(folder), globs)
        try:
            ours = kept(tree, globs)
        except ValueError:
            assert listed is None, globs
            return
        assert listed is not None, globs
        assert ours == listed, (globs, sorted(tree))

    @settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tree=trees(), globs=GLOB_LISTS)
    def test_the_ripgrep_backend_answers_rgs_files(self, tree: frozenset[str], globs: list[str]) -> None:
        """A search with ``paths`` finds in the files rg's ``-g`` keeps that hold a match, no others."""
        try:
            PathFilter.build(globs)
        except ValueError:
            return
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            write(root, tree)
            expected = rg_files(root, globs, "--files-with-matches", "--", NEEDLE)
            assert expected is not None
            assert asyncio.run(searched(root, globs)) == expected, globs

    @settings(max_examples=EXAMPLES * 3, deadline=None)
    @given(globs=GLOB_LISTS)
    def test_the_listing_gives_rg_the_same_excludes(self, globs: list[str]) -> None:
        """The CLI's listing (no RE2 at its start) gives rg the excludes the service would, and filters the rest."""
        natives = [glob for glob in rg_excludes(globs) if anywhere(glob)]
        assert _unanchored_excludes(globs) == natives
        assert _filtered(globs, ()) is (len(natives) < len(globs))


#: The issue's globs, each alone, and the orders it names, over the flask-like tree: (globs, kept).
ISSUE = [
    (["!tests/*"], {p for p in FLASK if not p.startswith("tests/")}),
    (["!docs/*"], {p for p in FLASK if not p.startswith("docs/")}),
    (["*.py"], {p for p in FLASK if p.endswith(".py")}),
    (["src/*"], {"src/conftest.py"}),
    (["**/test_*.py"], {"tests/test_app.py", "examples/test_a.py"}),
    (["!**/*.md"], {p for p in FLASK if not p.endswith(".md")}),
    (["{a,b}/*"], {"a/x.py", "b/z.md"}),
    (["*.py", "!test_*"], {p for p in FLASK if p.endswith(".py") and "/test_" not in p}),
    # The folder tests/test_apps is excluded by `!test_*` (`*.py` does not match a folder), with all it holds.
    (["!test_*", "*.py"], {p for p in FLASK if p.endswith(".py") and "/test_apps/" not in p}),
    (["*.py", "!tests"], {p for p in FLASK if p.endswith(".py") and not p.startswith("tests/")}),
    (["!tests", "*.py"], {p for p in FLASK if p.endswith(".py") and not p.startswith("tests/")}),
    (["src/**", "!src/flask/json"], {p for p in FLASK if p.startswith("src/") and "/json/" not in p}),
    (["src"], set()),
    (["src/"], set()),
    (["/*.py", "docs/*.py"], {"setup.py", "docs/conf.py"}),
]


@pytest.fixture(scope="module")
def flask(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flask")
    write(root, FLASK)
    return root


class TestTheIssuesGlobs:
    @pytest.mark.parametrize(("globs", "expected"), ISSUE, ids=[" ".join(g) for g, _ in ISSUE])
    async def test_rg_the_filter_and_the_backend_agree(self, flask: Path, globs: list[str], expected: set[str]) -> None:
        """Each is rg's answer, PathFilter's and a search's alike (and what the issue says it is)."""
        assert rg_files(flask, globs) == expected
        assert kept(FLASK, globs) == expected
        assert await searched(flask, globs) == expected

    async def test_a_batch_of_namespaces_answers_each_as_rg(self, tmp_path: Path) -> None:
        """Namespaces sharing one rg (absolute roots, run from here) answer each as rg run at its root does."""
        roots = [tmp_path / "one", tmp_path / "two"]
        for root in roots:
            write(root, FLASK)
        globs = ("*.py", "!conftest.py", "!src/flask/*", "!tests/")
        backends = [RipgrepBackend(f"ns{i}", RipgrepSettings(root=str(r))) for i, r in enumerate(roots)]
        outcomes = await fan_out([Route(b.name, b) for b in backends], SearchQuery(text=NEEDLE, paths=globs))
        for outcome, root in zip(outcomes, roots, strict=True):
            assert outcome.result is not None and outcome.status == "ok"
            assert {f.path for f in outcome.result.files} == rg_files(root, globs) != set()
        for backend in backends:
            await backend.aclose()

    async def test_the_namespaces_excludes_come_last(self, flask: Path) -> None:
        """The settings' exclude holds whatever the request's globs include."""
        got = await searched(flask, ["*.py"], exclude=["tests"])
        assert (
            got
            == rg_files(flask, ["*.py", "!tests"])
            == {p for p in FLASK if p.endswith(".py")} - {p for p in FLASK if p.startswith("tests/")}
        )

    async def test_files_the_content_index_names_are_judged_whole(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Narrowed by a content index (files named to rg, which its -g does not judge), a search still
        answers rg's files: a file under an excluded folder is never named."""
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        root = tmp_path / "repo"
        files = dict.fromkeys([*FLASK, *(f"filler/{i}.txt" for i in range(40))], "plain\n")
        rare = ["tests/test_app.py", "src/flask/json/tag.py", "src/flask/app.py", "docs/conf.py", "setup.py"]
        git_repo(root, files | dict.fromkeys(rare, f"rare_{NEEDLE}\n"))
        narrower = indexed(tmp_path / "index", root)
        for globs in (["*.py", "!tests/*"], ["!src/flask/*", "*.py", "!docs"], ["src/**", "!json/"]):
            backend = RipgrepBackend("repo", RipgrepSettings(root=str(root)))
            backend.use_index(narrower)
            async with backend:
                result = await backend.search(SearchQuery(text=f"rare_{NEEDLE}", paths=tuple(globs), max_files=100))
            expected = rg_files(root, globs, "--files-with-matches", "--", f"rare_{NEEDLE}")
            assert {f.path for f in result.files} == expected, globs
        assert narrower.outcomes["narrowed"] >= 1
        narrower.close()


class TestTheOneDifference:
    async def test_an_include_never_brings_back_hidden_or_ignored_files(self, tmp_path: Path) -> None:
        """rg's ``-g '*.py'`` lists a hidden and a gitignored file that match it; fedsearch keeps to the files rg
        searches by default and only narrows them."""
        root = git_repo(
            tmp_path / "repo",
            dict.fromkeys(("app.py", ".hidden.py", "secret.py", "notes.txt"), f"{NEEDLE}\n")
            | {".gitignore": "secret.py\n"},
        )
        assert rg_files(root, ["*.py"]) == {"app.py", ".hidden.py", "secret.py"}
        default = rg_files(root, [])
        assert default == {"app.py", "notes.txt"}
        assert kept(default, ["*.py"]) == {"app.py"}
        assert await searched(root, ["*.py"]) == {"app.py"}
