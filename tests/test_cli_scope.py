"""Issue 49: where the user stands. ``-g`` globs are read from the current folder as rg reads them, the folder
searched is an AND with them (never an OR), ``--server`` searches what the same search here searches, and an
empty answer's note names only what the user gave."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.cli.scope import Scope, escape_glob, globs_here
from gateway.errors import InvalidRequest
from gateway.index.files import find_rg
from gateway.query.globs import PathFilter
from tests import test_glob_rg as glob_rg
from tests.chaos_support import Server, config, wait_until
from tests.cli_support import run
from tests.helpers import fedsearch_command, git_repo, subprocess_env

Capture = pytest.CaptureFixture[str]

FLASKISH: dict[str, str | bytes] = {
    "src/flask/__init__.py": "from .app import Blueprint\n",
    "src/flask/app.py": "class Blueprint:\n    pass\n",
    "src/flask/sansio/blueprints.py": "class Blueprint:\n    name = 'Blueprint'\n",
    "src/x.py": "Blueprint = 1\n",
    "tests/test_blueprints.py": "def test_blueprint():\n    Blueprint()\n",
    "tests/sub/test_deep.py": "Blueprint\n",
    "docs/blueprints.md": "A Blueprint is ...\n",
    "docs/api.rst": "Blueprint\n",
    "examples/a/app.py": "Blueprint\n",
    "examples/b/app.py": "Blueprint\n",
    "README.md": "Blueprint\n",
}


@pytest.fixture
def checkouts(tmp_path: Path) -> Path:
    """A folder holding two checkouts shaped like flask and a neighbour."""
    top = tmp_path / "src"
    git_repo(top / "flask", FLASKISH)
    git_repo(
        top / "click",
        {"src/click/core.py": "Blueprint\n", "tests/test_core.py": "Blueprint\n", "docs/x.md": "Blueprint\n"},
    )
    return top


def _rg_files(where: Path, *args: str) -> list[str]:
    rg = find_rg()
    assert rg is not None
    done = subprocess.run([rg, "-l", "Blueprint", *args], cwd=where, capture_output=True, text=True, check=False)
    return sorted(done.stdout.split())


def _ours(capsys: Capture, monkeypatch: pytest.MonkeyPatch, checkouts: Path, where: Path, *args: str) -> list[str]:
    """The files of `fedsearch search Blueprint ARGS` run in ``where``: one page holding them all, paths relative
    to ``where`` (as rg prints them)."""
    monkeypatch.chdir(where)
    monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
    code, out, err = run(capsys, "search", "Blueprint", "--json", "--page-files", "200", "--hit-budget", "5000", *args)
    assert code in (0, 1), err
    answer = json.loads(out)
    assert answer["truncated"] is False
    roots = {name: os.path.realpath(checkouts / name) for name in ("flask", "click")}
    scope = Scope(roots, os.path.realpath(where))
    return sorted(scope.locate(g["namespace"], g["file_path"]) for g in answer["files"])


class TestGlobsHere:
    def scope(self, cwd: str) -> Scope:
        return Scope({"flask": "/w/src/flask", "click": "/w/src/click", "team/beta": "/w/src/team/beta"}, cwd)

    def test_in_a_subfolder_an_anchored_glob_gets_the_folder_before_it(self) -> None:
        paths, kept = globs_here(
            ["flask/*", "!/x.py", "*.py", "**/test_*.py"], self.scope("/w/src/flask/src"), ["flask"]
        )
        # a name matches below here only (rg judges no folder above where it runs: `!src` would drop all)
        assert paths == ["src/flask/*", "!src/x.py", "src/**/*.py", "src/**/test_*.py"] and kept == ["flask"]
        assert globs_here(["!src"], self.scope("/w/src/flask/src"), ["flask"]) == (["!src/**/src"], ["flask"])

    def test_a_folder_name_is_no_glob(self) -> None:
        scope = Scope({"ns": "/w/ns"}, "/w/ns/a[1]")
        assert globs_here(["b/*"], scope, ["ns"]) == (["a\\[1\\]/b/*"], ["ns"])
        assert escape_glob("a*b?{c}") == "a\\*b\\?\\{c\\}"

    def test_in_a_folder_of_checkouts_each_glob_loses_the_folders_down_to_the_root(self) -> None:
        scope = self.scope("/w/src")
        # rg: `!tests/*` here names src/tests/..., nothing in any checkout: every file stays
        assert globs_here(["!tests/*"], scope, ["flask", "click"]) == ([], ["flask", "click"])
        # an include naming inside one checkout: that one searched there, the others hold nothing it keeps
        assert globs_here(["flask/src/*"], scope, ["flask", "click"]) == (["src/*"], ["flask"])
        assert globs_here(["*/docs/**"], scope, ["flask", "click"]) == (["docs/**"], ["flask", "click"])
        # an exclude naming a checkout itself leaves nothing of it
        assert globs_here(["!click", "!click/*"], scope, ["flask", "click"]) == (["!click"], ["flask"])
        assert globs_here(["!click/*"], scope, ["flask", "click"]) == ([], ["flask"])
        # a checkout two folders down
        assert globs_here(["team/*/lib/*"], scope, ["team/beta", "flask"]) == (["lib/*"], ["team/beta"])
        assert globs_here(["team/beta/x.go"], scope, ["team/beta"]) == (["/x.go"], ["team/beta"])

    def test_globs_meaning_different_things_in_two_checkouts_are_refused_naming_glob(self) -> None:
        scope = self.scope("/w/src")
        with pytest.raises(InvalidRequest) as caught:
            globs_here(["!flask/tests/*"], scope, ["flask", "click"])
        assert caught.value.field == "glob" and "--ns" in str(caught.value)
        # `**` may end above the root or inside it: two globs say it, one for each
        assert globs_here(["**/flask/*.py"], scope, ["flask"]) == (["/*.py", "**/flask/*.py"], ["flask"])
        with pytest.raises(InvalidRequest):  # ... which mean something else in click
            globs_here(["**/flask/*.py"], scope, ["flask", "click"])

    def test_unanchored_globs_and_other_folders_are_as_typed(self) -> None:
        assert globs_here(["*.py", "!tests/", "**/test_*.py"], self.scope("/w/src"), ["flask"]) == (
            ["*.py", "!tests/", "**/test_*.py"],
            ["flask"],
        )
        assert globs_here(["src/*"], self.scope("/elsewhere"), ["flask"]) == (["src/*"], ["flask"])


GLOBS = ["!tests/*", "!docs/*", "*.py", "src/*", "**/test_*.py", "!**/*.md", "{a,b}/*", "examples/{a,b}/*"]


class TestSameFilesAsRg:
    @pytest.mark.parametrize("glob", GLOBS)
    @pytest.mark.parametrize("folder", ["flask", "flask/src", "flask/examples", "."])
    def test_the_page_lists_what_rg_lists(
        self, glob: str, folder: str, checkouts: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Standing in a checkout, a subfolder of it or the folder holding them, every page of the search lists
        the files rg lists with the same -g from the same folder (the folder an AND with it)."""
        where = checkouts / folder
        expected = _rg_files(where, "-g", glob)
        assert _ours(capsys, monkeypatch, checkouts, where, "-g", glob) == expected
        code, out, err = run(capsys, "search", "Blueprint", "-l", "-g", glob)  # the listing: rg's own lines
        assert code in (0, 1), err
        assert sorted(out.split()) == expected

    def test_the_folder_and_an_include_are_an_and(
        self, checkouts: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """In flask/src, `-g '*.py'` keeps the .py files of src/ only (it widened to tests/ when the folder was
        one more include)."""
        ours = _ours(capsys, monkeypatch, checkouts, checkouts / "flask" / "src", "-g", "*.py")
        assert ours == _rg_files(checkouts / "flask" / "src", "-g", "*.py") and not any("test" in p for p in ours)


class TestNotes:
    def test_an_empty_answer_names_the_folder_and_the_globs_as_typed(
        self, checkouts: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(checkouts / "flask" / "src")
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        code, out, err = run(capsys, "search", "zzzqqq")
        said = out + err
        assert code == 1 and "nothing matched 'zzzqqq' in flask/src" in said
        assert "filters" not in said and "file:" not in said
        code, out, err = run(capsys, "search", "zzzqqq", "-g", "!*.md")
        assert code == 1 and "nothing matched 'zzzqqq' in flask/src with -g '!*.md'" in out + err


@pytest.fixture
def served(checkouts: Path, tmp_path: Path) -> Iterator[Server]:
    """`fedsearch serve` over the folder of checkouts (its own config: the two namespaces)."""
    server = Server(
        config(tmp_path / "c.toml", tmp_path / "idx", {"flask": checkouts / "flask", "click": checkouts / "click"})
    )
    ready = lambda: {i.get("state") for i in server.index_states().values()} == {"ready"}  # noqa: E731
    wait_until("the server's indexes ready (as those built here)", ready)
    yield server
    server.close()


def _cli(where: Path, *args: str, cache: Path) -> tuple[int, str]:
    env = subprocess_env(XDG_CACHE_HOME=str(cache))
    done = subprocess.run(
        [*fedsearch_command(), *args], cwd=where, capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, done.stdout


def _without_times(answer: dict[str, Any]) -> dict[str, Any]:
    answer.pop("took_ms", None)
    for status in answer["namespaces"]:
        status.pop("took_ms", None)
    return answer


class TestServer:
    @pytest.mark.parametrize("folder", ["flask/src", "flask", "."])
    def test_server_searches_what_the_same_search_here_searches(
        self, folder: str, checkouts: Path, served: Server
    ) -> None:
        """In a subfolder, a checkout and the folder holding them, with -g: `--server` sends the same request as
        the search run here, and prints the same lines byte for byte."""
        where = checkouts / folder
        cache = checkouts.parent / "cache"
        assert _cli(checkouts, "index", cache=cache)[0] == 0  # declarations here, as the server has its own
        for flags in ([], ["-g", "*.py"], ["-g", "!tests/*"]):
            code, here = _cli(where, "search", "Blueprint", *flags, "--json", cache=cache)
            code_s, there = _cli(where, "search", "Blueprint", *flags, "--json", "--server", served.url, cache=cache)
            assert (code, _without_times(json.loads(here))) == (code_s, _without_times(json.loads(there))), flags
            assert _cli(where, "search", "Blueprint", *flags, cache=cache) == _cli(
                where, "search", "Blueprint", *flags, "--server", served.url, cache=cache
            )


EXAMPLES = int(os.environ.get("FEDSEARCH_GLOB_EXAMPLES", "60"))


class TestGlobsHereAgainstRg:
    """Generated trees of two checkouts (``top/a``, ``top/docs/src``) and globs, typed at the folder holding
    them and in a subfolder of one: the files ``globs_here``'s request keeps (its namespaces, its root-relative
    globs) are those ``rg --files -g ...`` lists there, unless it refuses naming ``glob``."""

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(one=glob_rg.trees(), two=glob_rg.trees(), globs=glob_rg.GLOB_LISTS, inside=st.booleans())
    def test_globs_typed_here_keep_rgs_files(
        self, one: frozenset[str], two: frozenset[str], globs: list[str], inside: bool
    ) -> None:
        try:
            PathFilter.build([g for g in globs if not g.startswith("#")])
        except ValueError:
            return  # a glob rg refuses (tests/test_glob_rg.py)
        with tempfile.TemporaryDirectory() as folder:
            top = Path(folder).resolve()
            # checkouts named as the globs' folders are: a glob may name one, or a folder it is in
            roots = {"one": top / "a", "two": top / "docs" / "src"}
            glob_rg.write(roots["one"], one)
            glob_rg.write(roots["two"], two)
            where = roots["one"] / "src" if inside and (roots["one"] / "src").is_dir() else top
            listed = glob_rg.rg_files(where, globs)
            scope = Scope({name: str(root) for name, root in roots.items()}, str(where))
            try:
                paths, kept = globs_here(globs, scope, list(roots))
            except InvalidRequest as exc:
                refused: InvalidRequest | None = exc
            else:
                refused = None
            if refused is not None:
                assert refused.field == "glob"  # a refusal names -g, never a wrong answer
                return
            ours: set[str] = set()
            keep = PathFilter.build(paths)
            for name in kept:
                for rel in one if name == "one" else two:
                    full = roots[name] / rel
                    if keep(rel) and (where == top or str(full).startswith(str(where) + "/")):
                        ours.add(os.path.relpath(full, where))
            assert listed is not None
            assert ours == listed, (globs, str(where), paths, kept)
