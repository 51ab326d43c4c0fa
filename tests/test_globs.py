"""Path globs as rg -g reads them, compiled to RE2."""

from __future__ import annotations

import pytest

from gateway.query.globs import PathFilter, namespace_matcher


class TestPathFilter:
    @pytest.mark.parametrize(
        ("globs", "path", "expected"),
        [
            (["*.py"], "src/a.py", True),
            (["*.py"], "src/a.go", False),
            (["src/**"], "src/deep/a.py", True),
            (["src/**"], "lib/src/a.py", False),
            (["src"], "lib/src/a.py", True),
            (["src/api"], "src/api/x.go", True),
            (["**/test_*.py"], "a/b/test_x.py", True),
            (["**/test_*.py"], "test_x.py", True),
            (["*.{js,ts}"], "a/b.ts", True),
            (["!vendor/**"], "vendor/x.go", False),
            (["!vendor/**"], "src/x.go", True),
            (["src/**", "!src/gen/**"], "src/gen/x.go", False),
            (["src/**", "!src/gen/**"], "src/x.go", True),
            (["file?.txt"], "file1.txt", True),
            (["file?.txt"], "file10.txt", False),
            (["[ab].txt"], "b.txt", True),
            (["a.b"], "axb", False),
        ],
    )
    def test_glob_semantics(self, globs: list[str], path: str, expected: bool) -> None:
        """Globs select paths like rg -g: unanchored without '/', anchored with it."""
        assert PathFilter.build(globs)(path) is expected

    def test_languages_filter_by_extension(self) -> None:
        """A language filter keeps only its extensions, and combines with path globs by AND."""
        f = PathFilter.build(["src/**"], ["python"])
        assert f("src/a.py") and not f("src/a.go") and not f("lib/a.py")

    def test_built_once_per_pair_and_a_bad_glob_refused_every_time(self) -> None:
        """A filter is kept for the next request asking the same; a bad glob is never kept."""
        assert PathFilter.build(["src/**", "!*.md"], ["python"]) is PathFilter.build(("src/**", "!*.md"), ("python",))
        for _ in range(2):
            with pytest.raises(ValueError, match="empty glob"):
                PathFilter.build(["/"])


class TestNamespaceMatcher:
    def test_star_crosses_slashes(self) -> None:
        """Namespace patterns: '*' matches across '/', the rest literally."""
        assert namespace_matcher("team/*")("team/a/b")
        assert namespace_matcher("sat-*")("sat-1")
        assert not namespace_matcher("sat-*")("monorepo")
        assert not namespace_matcher("a.b")("axb")
