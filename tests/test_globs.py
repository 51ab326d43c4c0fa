"""Path globs as rg -g reads them, compiled to RE2 (tests/test_glob_rg.py holds them to the real rg)."""

from __future__ import annotations

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.query.globs import (
    PathFilter,
    anywhere,
    check_globs,
    drops_at_most,
    keeps_at_least,
    namespace_matcher,
    rg_excludes,
    validate_glob,
)


class TestPathFilter:
    @pytest.mark.parametrize(
        ("globs", "path", "expected"),
        [
            (["*.py"], "src/a.py", True),
            (["*.py"], "src/a.go", False),
            (["src/**"], "src/deep/a.py", True),
            (["src/**"], "lib/src/a.py", False),
            # An include naming a folder does not include what it holds (as rg: its files must match).
            (["src"], "lib/src/a.py", False),
            (["src"], "lib/src", True),
            (["src/api"], "src/api/x.go", False),
            (["src/api/**"], "src/api/x.go", True),
            (["src/*"], "src/x.py", True),
            (["src/*"], "src/flask/app.py", False),
            (["{a,src}/*"], "a/x.py", True),
            (["{a,src}/*"], "b/a/x.py", False),
            (["**/test_*.py"], "a/b/test_x.py", True),
            (["**/test_*.py"], "test_x.py", True),
            (["*.{js,ts}"], "a/b.ts", True),
            (["/src/*"], "src/x.py", True),
            (["/x.py"], "src/x.py", False),
            (["!vendor/**"], "vendor/x.go", False),
            (["!vendor/**"], "src/x.go", True),
            (["src/**", "!src/gen/**"], "src/gen/x.go", False),
            (["src/**", "!src/gen/**"], "src/x.go", True),
            (["file?.txt"], "file1.txt", True),
            (["file?.txt"], "file10.txt", False),
            (["?.py"], "é.py", False),  # '?' is one byte, as rg's
            (["??.py"], "é.py", True),
            (["[ab].txt"], "b.txt", True),
            (["a.b"], "axb", False),
            (["**"], "a/b/c", True),
            (["a}b"], "ab", True),  # a '}' that no '{' opened matches nothing, as globset's
            (["a.py "], "a.py", True),  # trailing blanks dropped, as rg
            (["\\!x"], "d/!x", True),
        ],
    )
    def test_glob_semantics(self, globs: list[str], path: str, expected: bool) -> None:
        """Globs select paths like rg -g: unanchored without '/', anchored with it, a file by its own match."""
        assert PathFilter.build(globs)(path) is expected

    @pytest.mark.parametrize(
        ("globs", "path", "expected"),
        [
            (["*.py", "!test_*"], "tests/test_a.py", False),
            (["!test_*", "*.py"], "tests/test_a.py", True),
            (["*.py", "!test_*", "test_main.py"], "test_main.py", True),
            (["!tests"], "tests/sub/a.py", False),
            (["!tests/*"], "tests/sub/a.py", False),  # tests/sub is excluded, and all it holds
            (["!tests/"], "tests/a.py", False),
            (["!tests/"], "lib/tests", True),  # a trailing '/' matches folders only
            (["!tests", "*.py"], "tests/a.py", False),  # `*.py` does not match the folder: it stays excluded
            (["!tests", "*.py"], "a/tests.py", True),
            (["*.py", "!tests"], "tests/a.py", False),
            (["!src", "*.py", "src/"], "src/a.py", True),  # the folder is included again by a later glob
            (["!src", "*.py", "src"], "src/a.py", True),
            (["!src/", "*.py", "src"], "lib/src", True),
            (["!src", "*.py", "src/"], "lib/src", False),
            (["!docs/*", "*.md"], "docs/a/b.md", False),
            (["*.md", "!docs/*"], "docs/b.md", False),
        ],
    )
    def test_order_and_folders(self, globs: list[str], path: str, expected: bool) -> None:
        """The last glob matching a path decides; a folder whose last match excludes it takes all it holds."""
        assert PathFilter.build(globs)(path) is expected

    def test_languages_filter_by_extension(self) -> None:
        """A language filter keeps only its extensions, and combines with path globs by AND."""
        f = PathFilter.build(["src/**"], ["python"])
        assert f("src/a.py") and not f("src/a.go") and not f("lib/a.py")
        g = PathFilter.build(["!tests"], ["python"])
        assert g("a.py") and not g("tests/a.py") and not g("a.go")

    def test_folder_only_includes_keep_nothing(self) -> None:
        """An include that can match folders only leaves every file out (no file matches an include)."""
        f = PathFilter.build(["src/"])
        assert not f.is_open and not f("src/a.py") and not f("a.py")
        assert PathFilter.build([]).is_open and PathFilter.build([])("x")

    def test_inside_some_repository(self) -> None:
        """`<repository>/<path>` passes when some split's path passes."""
        f = PathFilter.build(["src/*", "!src/gen*"])
        assert f.inside_some_repository("github.com/acme/w/src/a.py")
        assert not f.inside_some_repository("github.com/acme/w/src/gen.py")

    def test_built_once_per_pair_and_a_bad_glob_refused_every_time(self) -> None:
        """A filter is kept for the next request asking the same; a bad glob is never kept."""
        assert PathFilter.build(["src/**", "!*.md"], ["python"]) is PathFilter.build(("src/**", "!*.md"), ("python",))
        for _ in range(2):
            with pytest.raises(ValueError, match="empty glob"):
                PathFilter.build(["/"])


class TestValidation:
    @pytest.mark.parametrize(
        ("glob", "error"),
        [
            ("/", "empty glob"),
            ("!", "empty glob"),
            ("a[bc", "unclosed '\\[' in glob"),
            ("{a,b", "unclosed '{' in glob"),
            ("{a,{b}}", "invalid glob: nested"),
            ("x\\", "invalid glob: a '\\\\' at its end"),
            ("[z-a]", "invalid glob: the range z-a is backwards"),
            ("#x", "invalid glob: a leading '#'"),
            ("!  ", "invalid glob: nothing but blanks"),
            ("*" * 17, "glob too complex"),
        ],
    )
    def test_refused(self, glob: str, error: str) -> None:
        """What rg refuses (or reads as no glob at all) is refused, in words the schema test accepts."""
        with pytest.raises(ValueError, match=error):
            validate_glob(glob)

    def test_accepted_and_named(self) -> None:
        """A valid glob gives its pattern on characters; check_globs names the field of a bad one."""
        assert re2.search(validate_glob("*.py"), "a/b.py")
        assert re2.search(validate_glob("\\#x"), "#x")
        with pytest.raises(Exception, match=r"paths\[1\]"):
            check_globs(["*.py", "a[b"])


class TestWhatOthersApply:
    def test_rg_gets_the_excludes_no_later_include_overrides(self) -> None:
        assert rg_excludes(["!a", "*.py", "!b", "!c/"]) == ["b", "c/"]
        assert rg_excludes(["!a", "!b/*"]) == ["a", "b/*"]
        assert rg_excludes(["!a", "*.py"]) == []

    @pytest.mark.parametrize(
        ("glob", "expected"),
        [
            *(("tests", True), ("tests/", True), ("**/tests", True), ("**", True), ("*.md", True)),
            *(("/tests", False), ("a/b", False), ("**/a/b", False), ("a/**", False), ("a//", False)),
            *(("[!a]b", False), ("x[ab]", True)),
        ],
    )
    def test_anywhere(self, glob: str, expected: bool) -> None:
        """A name alone is matched alike wherever rg runs; anything anchored is not."""
        assert anywhere(glob) is expected


#: Names that globs below hit, non-ASCII ones among them (a '?' is a byte, a class member too).
_NAMES = ["a", "b", "src", "tests", "x.py", "é", "ü.py", "test_a.py", "ab", "a.md"]
_PATHS = st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4).map("/".join)
_GLOB_PARTS = ["a", "b", "src", "tests", "*", "?", "??", "**", "[ab]", "[!a]", "[é]", "{a,é}", ".py", "é", "x"]
_GLOBS = st.builds(
    lambda bang, lead, parts, trail: bang + lead + "/".join(parts) + trail,
    st.sampled_from(["", "!"]),
    st.sampled_from(["", "/"]),
    st.lists(st.lists(st.sampled_from(_GLOB_PARTS), min_size=1, max_size=2).map("".join), min_size=1, max_size=3),
    st.sampled_from(["", "/"]),
)


class TestRemoteFiltersKeepMore:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(_GLOBS, min_size=1, max_size=4), st.lists(_PATHS, min_size=1, max_size=8))
    def test_a_remote_filter_never_drops_a_kept_file(self, globs: list[str], paths: list[str]) -> None:
        """The include regex matches every file the filter keeps, the exclude regex none of them."""
        try:
            keep = PathFilter.build(globs)
        except ValueError:
            return
        include = keeps_at_least(g for g in globs if not g.startswith("!"))
        exclude = drops_at_most(globs)
        for path in filter(keep, paths):
            assert not include or re2.search(include, path), (globs, path, include)
            assert not exclude or not re2.search(exclude, path), (globs, path, exclude)


class TestNamespaceMatcher:
    def test_star_crosses_slashes(self) -> None:
        """Namespace patterns: '*' matches across '/', the rest literally."""
        assert namespace_matcher("team/*")("team/a/b")
        assert namespace_matcher("sat-*")("sat-1")
        assert not namespace_matcher("sat-*")("monorepo")
        assert not namespace_matcher("a.b")("axb")
