"""LocalTree: reads by relative path that never leave the root."""

from __future__ import annotations

import builtins
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.ripgrep import localfs
from adapters.ripgrep.localfs import MAX_TEXT_BYTES, LocalTree
from gateway.errors import InvalidRequest, NotFound

SECRET = "TOP SECRET outside the root"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A git checkout ``root`` beside an ``outside`` directory, with links of every kind."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("one\ntwo\r\nthree\nfour\n")
    (root / "src").mkdir()
    (root / "src" / "b.py").write_bytes(b"caf\xe9\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    (root / "in_link").symlink_to("a.txt")
    (root / "in_dir").symlink_to("src")
    (root / "out_file").symlink_to("../outside/secret.txt")
    (root / "out_abs").symlink_to(outside / "secret.txt")
    (root / "out_dir").symlink_to(outside)
    (root / "src" / "up").symlink_to("../..")
    (root / "etc_link").symlink_to("/etc")
    (root / "dev_link").symlink_to("/dev/zero")
    (root / "dangling").symlink_to("/nonexistent/file")
    (root / "loop").symlink_to("loop")
    (root / "git_link").symlink_to(".git/config")
    (root / "git_dir").symlink_to(".git")
    os.mkfifo(root / "fifo")
    return root, outside


HOSTILE = [
    "..",
    "../",
    "../outside/secret.txt",
    "../../etc/passwd",
    "a/../../x",
    "src/../../outside/secret.txt",
    "./../outside/secret.txt",
    "src/./../..",
    "src/b.py/../../..",
    "/../outside/secret.txt",
    "/etc/passwd",
    "//etc/passwd",
    "\x00",
    "a.txt\x00",
    "a.txt\x00.png",
    ".git/config",
    ".git",
    ".git/",
    "/.git/HEAD",
    "./.git/HEAD",
    "src/../.git/config",
    "sub/.git",
    "out_file",
    "out_abs",
    "out_dir",
    "out_dir/secret.txt",
    "src/up",
    "src/up/outside/secret.txt",
    "in_dir/up/outside/secret.txt",
    "etc_link",
    "etc_link/passwd",
    "dev_link",
    "dangling",
    "loop",
    "git_link",
    "git_dir/config",
    "fifo",
    "missing.txt",
    "%2e%2e/outside/secret.txt",
    "..\\outside\\secret.txt",
    "....//....//etc/passwd",
]


def _methods(tree: LocalTree) -> dict[str, Callable[[str], Any]]:
    return {
        "resolve": tree.resolve,
        "read_text": tree.read_text,
        "read_lines": tree.read_lines,
        "read_bytes": tree.read_bytes,
        "stat": tree.stat,
        "list_dir": tree.list_dir,
    }


class TestTraversal:
    def test_corpus_is_large(self) -> None:
        """The hostile corpus has at least 30 paths."""
        assert len(HOSTILE) >= 30

    @pytest.mark.parametrize("path", HOSTILE)
    def test_hostile_path_is_not_found(
        self, layout: tuple[Path, Path], path: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every method answers NotFound and opens or lists nothing outside the root."""
        root, _ = layout
        real_root = os.path.realpath(root)
        touched: list[str] = []
        real_open, real_listdir = builtins.open, os.listdir

        def spy_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            touched.append(os.fspath(file))
            return real_open(file, *args, **kwargs)

        def spy_listdir(path: Any = ".") -> list[Any]:
            touched.append(os.fspath(path))
            return real_listdir(path)

        monkeypatch.setattr(localfs, "open", spy_open, raising=False)
        monkeypatch.setattr(os, "listdir", spy_listdir)
        tree = LocalTree(root)
        for name, method in _methods(tree).items():
            with pytest.raises(NotFound):
                method(path)
            assert all(os.path.realpath(t).startswith(real_root + os.sep) for t in touched), name

    def test_message_does_not_describe_the_outside(self, layout: tuple[Path, Path]) -> None:
        """The error names only the requested path, never where a link points."""
        root, outside = layout
        with pytest.raises(NotFound) as info:
            LocalTree(root).read_text("out_file")
        assert str(outside) not in str(info.value)
        assert SECRET not in str(info.value)

    def test_root_through_a_symlink(self, layout: tuple[Path, Path], tmp_path: Path) -> None:
        """A root given through a symlink still reads its files and refuses the outside."""
        root, _ = layout
        (tmp_path / "alias").symlink_to(root)
        tree = LocalTree(tmp_path / "alias")
        assert tree.read_text("a.txt").startswith("one")
        with pytest.raises(NotFound):
            tree.read_text("out_file")


class TestReads:
    def test_read_text(self, layout: tuple[Path, Path]) -> None:
        """A file reads whole as text."""
        assert LocalTree(layout[0]).read_text("a.txt") == "one\ntwo\r\nthree\nfour\n"

    def test_undecodable_bytes_are_replaced(self, layout: tuple[Path, Path]) -> None:
        """Bytes that are not UTF-8 become replacement characters."""
        assert LocalTree(layout[0]).read_text("src/b.py") == "caf\ufffd\n"

    @pytest.mark.parametrize("path", ["/a.txt", "./a.txt", "src/../a.txt", "src//../a.txt", "in_link"])
    def test_normalised_paths(self, layout: tuple[Path, Path], path: str) -> None:
        """Leading slashes, '.', inner '..' and symlinks inside the root are followed."""
        assert LocalTree(layout[0]).read_text(path).startswith("one")

    def test_symlinked_directory_inside(self, layout: tuple[Path, Path]) -> None:
        """A symlinked directory that stays inside the root can be read through."""
        assert LocalTree(layout[0]).read_bytes("in_dir/b.py") == b"caf\xe9\n"

    def test_read_lines_range(self, layout: tuple[Path, Path]) -> None:
        """A line range comes back without terminators, with the file's total line count."""
        assert LocalTree(layout[0]).read_lines("a.txt", 2, 3) == (["two", "three"], 4)

    def test_read_lines_max_lines(self, layout: tuple[Path, Path]) -> None:
        """max_lines caps how many lines come back."""
        assert LocalTree(layout[0]).read_lines("a.txt", 1, None, max_lines=2) == (["one", "two"], 4)

    def test_read_lines_past_the_end(self, layout: tuple[Path, Path]) -> None:
        """A start past the last line gives no lines and the total."""
        assert LocalTree(layout[0]).read_lines("a.txt", 10) == ([], 4)

    @pytest.mark.parametrize(("start", "end", "field"), [(0, None, "start_line"), (3, 2, "end_line")])
    def test_read_lines_bad_range(self, layout: tuple[Path, Path], start: int, end: int | None, field: str) -> None:
        """An invalid range names the offending field."""
        with pytest.raises(InvalidRequest) as info:
            LocalTree(layout[0]).read_lines("a.txt", start, end)
        assert info.value.field == field

    def test_read_bytes_range(self, layout: tuple[Path, Path]) -> None:
        """offset and length select a byte range."""
        assert LocalTree(layout[0]).read_bytes("a.txt", 4, 3) == b"two"

    def test_read_bytes_negative_offset(self, layout: tuple[Path, Path]) -> None:
        """A negative offset is an invalid request naming offset."""
        with pytest.raises(InvalidRequest) as info:
            LocalTree(layout[0]).read_bytes("a.txt", -1)
        assert info.value.field == "offset"

    def test_reading_a_directory(self, layout: tuple[Path, Path]) -> None:
        """Reading a directory is an invalid request naming path."""
        with pytest.raises(InvalidRequest) as info:
            LocalTree(layout[0]).read_text("src")
        assert info.value.field == "path"

    def test_huge_file_is_refused_as_text(self, layout: tuple[Path, Path]) -> None:
        """read_text refuses a file over MAX_TEXT_BYTES instead of loading it."""
        root = layout[0]
        with open(root / "big.bin", "wb") as fh:
            fh.truncate(MAX_TEXT_BYTES + 1)
        with pytest.raises(InvalidRequest):
            LocalTree(root).read_text("big.bin")


class TestStatAndList:
    def test_stat_file(self, layout: tuple[Path, Path]) -> None:
        """stat gives type, size and a float mtime."""
        info = LocalTree(layout[0]).stat("a.txt")
        assert (info["type"], info["size"]) == ("file", 20)
        assert isinstance(info["mtime"], float)

    @pytest.mark.parametrize("path", ["", "/", "src", "src/"])
    def test_stat_dir(self, layout: tuple[Path, Path], path: str) -> None:
        """The root and subdirectories stat as directories."""
        assert LocalTree(layout[0]).stat(path)["type"] == "dir"

    def test_list_root(self, layout: tuple[Path, Path]) -> None:
        """Entries come sorted; .git, escaping or broken links and special files are left out."""
        entries = LocalTree(layout[0]).list_dir("")
        assert [(e["name"], e["type"]) for e in entries] == [
            ("a.txt", "file"),
            ("in_dir", "dir"),
            ("in_link", "file"),
            ("src", "dir"),
            ("sub", "dir"),
        ]

    def test_list_subdir(self, layout: tuple[Path, Path]) -> None:
        """A subdirectory lists its files with sizes; a link leaving the root is omitted."""
        assert LocalTree(layout[0]).list_dir("src") == [{"name": "b.py", "type": "file", "size": 5}]

    def test_list_hides_submodule_git_file(self, layout: tuple[Path, Path]) -> None:
        """A submodule's .git file is not listed."""
        assert LocalTree(layout[0]).list_dir("sub") == []

    def test_list_a_file(self, layout: tuple[Path, Path]) -> None:
        """Listing a file is an invalid request naming path."""
        with pytest.raises(InvalidRequest) as info:
            LocalTree(layout[0]).list_dir("a.txt")
        assert info.value.field == "path"
