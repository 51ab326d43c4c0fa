"""The inotify watcher: real events on temporary checkouts, read right after each filesystem call."""

from __future__ import annotations

import errno
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.index.content import watch
from gateway.index.content.watch import IN_CREATE, IN_MODIFY, IN_Q_OVERFLOW, Change, Event, Watcher, parse_events

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux-only")


@pytest.fixture
def watcher() -> Iterator[Watcher]:
    """A watcher, closed at the end."""
    with Watcher() as w:
        yield w


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A checkout with one file and one subdirectory."""
    checkout = tmp_path / "repo"
    (checkout / "sub").mkdir(parents=True)
    (checkout / "a.txt").write_text("one\n")
    (checkout / "sub" / "b.txt").write_text("two\n")
    return checkout


@pytest.fixture
def watched(watcher: Watcher, root: Path) -> Watcher:
    """The watcher following the checkout's root and subdirectory."""
    assert watcher.add(str(root), ["", "sub"])
    return watcher


def _seen(w: Watcher) -> list[tuple[str, str]]:
    """(path, kind) of what ``w`` reads now."""
    return [(c.path, c.kind) for c in w.read()]


def _event(wd: int, mask: int, name: bytes = b"", pad: int = 0) -> bytes:
    field = name + b"\0" * pad
    return struct.pack("=iIII", wd, mask, 0, len(field)) + field


class TestFiles:
    def test_append_is_a_file_change(self, watched: Watcher, root: Path) -> None:
        """Appending to a file reports that file once, however many events the write made."""
        with (root / "a.txt").open("a") as f:
            f.write("more\n")
        assert watched.read() == [Change(str(root), "a.txt", "file")]

    def test_modify_in_subdirectory(self, watched: Watcher, root: Path) -> None:
        """A file of a watched subdirectory is reported by its root-relative path."""
        (root / "sub" / "b.txt").write_text("changed\n")
        assert _seen(watched) == [("sub/b.txt", "file")]

    def test_touch_is_a_file_change(self, watched: Watcher, root: Path) -> None:
        """Changing a file's mtime alone reports it."""
        os.utime(root / "a.txt", (1, 1))
        assert _seen(watched) == [("a.txt", "file")]

    def test_create(self, watched: Watcher, root: Path) -> None:
        """A new file is reported."""
        (root / "new.txt").write_text("x")
        assert _seen(watched) == [("new.txt", "file")]

    def test_delete(self, watched: Watcher, root: Path) -> None:
        """A deleted file is reported."""
        (root / "a.txt").unlink()
        assert _seen(watched) == [("a.txt", "file")]

    def test_rename_reports_both_names(self, watched: Watcher, root: Path) -> None:
        """A rename within the root reports the old name and the new one, in that order."""
        (root / "a.txt").rename(root / "sub" / "c.txt")
        assert _seen(watched) == [("a.txt", "file"), ("sub/c.txt", "file")]

    def test_events_are_consumed(self, watched: Watcher, root: Path) -> None:
        """What one read() reported is not reported again."""
        (root / "a.txt").write_text("x")
        assert watched.read()
        assert watched.read() == []


class TestDirectories:
    def test_created_directory_is_a_tree_change_then_watched(self, watched: Watcher, root: Path) -> None:
        """A new directory is a tree change, and a file made in it afterwards a file change."""
        (root / "new").mkdir()
        assert _seen(watched) == [("new", "tree")]
        (root / "new" / "f.txt").write_text("x")
        assert _seen(watched) == [("new/f.txt", "file")]

    def test_nested_directories_made_at_once_are_watched(self, watched: Watcher, root: Path) -> None:
        """Subdirectories made before the new directory's watch began are watched too."""
        (root / "x" / "y").mkdir(parents=True)
        assert _seen(watched) == [("x", "tree")]
        (root / "x" / "y" / "f.txt").write_text("x")
        assert _seen(watched) == [("x/y/f.txt", "file")]

    def test_deleted_subdirectory_is_a_tree_change(self, watched: Watcher, root: Path) -> None:
        """Deleting a watched subdirectory is a tree change (its file's deletion is reported too)."""
        (root / "sub" / "b.txt").unlink()
        (root / "sub").rmdir()
        seen = _seen(watched)
        assert ("sub", "tree") in seen and ("sub/b.txt", "file") in seen

    def test_moved_subdirectory_is_followed_under_its_new_name(self, watched: Watcher, root: Path) -> None:
        """A renamed directory is a tree change for both names, and its files are then reported by the new name."""
        (root / "sub").rename(root / "moved")
        assert _seen(watched) == [("sub", "tree"), ("moved", "tree")]
        (root / "moved" / "b.txt").write_text("x")
        assert _seen(watched) == [("moved/b.txt", "file")]

    def test_deleted_root_is_a_tree_change(self, watcher: Watcher, tmp_path: Path) -> None:
        """Deleting the watched root itself is a tree change for the root."""
        empty = tmp_path / "empty"
        empty.mkdir()
        assert watcher.add(str(empty), [""])
        empty.rmdir()
        assert _seen(watcher) == [("", "tree")]


class TestHidden:
    def test_ignore_file_is_a_tree_change(self, watched: Watcher, root: Path) -> None:
        """Writing a .gitignore, at the root or below, is a tree change for that file."""
        (root / ".gitignore").write_text("*.log\n")
        (root / "sub" / ".rgignore").write_text("*.tmp\n")
        assert _seen(watched) == [(".gitignore", "tree"), ("sub/.rgignore", "tree")]

    def test_hidden_file_is_not_reported(self, watched: Watcher, root: Path) -> None:
        """A hidden file's changes are dropped: rg never searches it."""
        (root / ".env").write_text("x")
        (root / ".env").rename(root / ".env2")
        assert watched.read() == []

    def test_hidden_directory_is_neither_reported_nor_watched(self, watched: Watcher, root: Path) -> None:
        """A hidden directory made is not reported, and files made in it are not either."""
        (root / ".cache").mkdir()
        assert watched.read() == []
        (root / ".cache" / "f.txt").write_text("x")
        assert watched.read() == []


class TestRoots:
    def test_two_roots_are_told_apart(self, watcher: Watcher, tmp_path: Path) -> None:
        """Each change names the root it happened in."""
        one, two = tmp_path / "one", tmp_path / "two"
        one.mkdir()
        two.mkdir()
        assert watcher.add(str(one), [""]) and watcher.add(str(two), [""])
        (two / "f.txt").write_text("x")
        (one / "g.txt").write_text("x")
        assert watcher.read() == [Change(str(two), "f.txt", "file"), Change(str(one), "g.txt", "file")]
        assert watcher.roots() == {str(one), str(two)}

    def test_root_inside_another_is_reported_for_both(self, watched: Watcher, root: Path) -> None:
        """A directory that is in two roots reports a change once for each, by each root's path."""
        assert watched.add(str(root / "sub"), [""])
        (root / "sub" / "b.txt").write_text("x")
        assert watched.read() == [Change(str(root), "sub/b.txt", "file"), Change(str(root / "sub"), "b.txt", "file")]

    def test_add_every_says_whether_each_is_watched(self, watcher: Watcher, root: Path) -> None:
        """``add_every`` is True only when every directory asked is watched now: one missing is not; made
        again after it was deleted, it is watched again and reports its changes."""
        assert watcher.add_every(str(root), ["", "sub"])
        assert not watcher.add_every(str(root), ["", "gone"])
        (root / "sub" / "b.txt").unlink()
        (root / "sub").rmdir()
        assert ("sub", "tree") in _seen(watcher)
        assert not watcher.add_every(str(root), ["", "sub"])
        (root / "sub").mkdir()
        watcher.read()
        assert watcher.add_every(str(root), ["", "sub"])
        (root / "sub" / "new.txt").write_text("x")
        assert _seen(watcher) == [("sub/new.txt", "file")]

    def test_remove_stops_reporting(self, watched: Watcher, root: Path) -> None:
        """After remove(), neither changes already queued nor later ones are reported for that root."""
        (root / "a.txt").write_text("queued")
        watched.remove(str(root))
        (root / "a.txt").write_text("later")
        assert watched.read() == []
        assert watched.roots() == frozenset()

    def test_remove_keeps_the_other_root(self, watched: Watcher, root: Path) -> None:
        """Removing one of two roots sharing a directory keeps the other's watch."""
        assert watched.add(str(root / "sub"), [""])
        watched.remove(str(root))
        (root / "sub" / "b.txt").write_text("x")
        assert watched.read() == [Change(str(root / "sub"), "b.txt", "file")]


class TestAdd:
    def test_missing_directory_is_skipped(self, watcher: Watcher, root: Path) -> None:
        """A directory that no longer exists (or is a file) is skipped, and add() still succeeds."""
        assert watcher.add(str(root), ["gone", "a.txt", ""])
        (root / "new.txt").write_text("x")
        assert _seen(watcher) == [("new.txt", "file")]

    def test_adding_twice_reports_once(self, watched: Watcher, root: Path) -> None:
        """Adding a directory already watched for the same root changes nothing."""
        assert watched.add(str(root), ["", "sub"])
        (root / "a.txt").write_text("x")
        assert _seen(watched) == [("a.txt", "file")]

    def test_watch_limit_fails_add(self, watcher: Watcher, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """add() is False when a directory cannot be watched for another reason than being gone (ENOSPC)."""
        real = watch._call

        def no_watches(name: str, *args: int | bytes) -> int:
            if name == "inotify_add_watch":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(name, *args)

        monkeypatch.setattr(watch, "_call", no_watches)
        assert watcher.add(str(root), [""]) is False
        assert watcher.roots() == {str(root)}

    def test_unwatchable_new_directory_is_a_tree_change_for_the_root(
        self, watched: Watcher, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A directory made that cannot be watched makes the whole root a tree change."""
        real = watch._call

        def no_watches(name: str, *args: int | bytes) -> int:
            if name == "inotify_add_watch":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(name, *args)

        (root / "new").mkdir()
        monkeypatch.setattr(watch, "_call", no_watches)
        assert _seen(watched) == [("new", "tree"), ("", "tree")]

    def test_init_failure_is_an_oserror(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Watcher() raises OSError when the kernel refuses an inotify instance."""

        def refuse(name: str, *args: int | bytes) -> int:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

        monkeypatch.setattr(watch, "_call", refuse)
        with pytest.raises(OSError) as info:
            Watcher()
        assert info.value.errno == errno.EMFILE


class TestRead:
    def test_nothing_queued_reads_empty(self, watched: Watcher) -> None:
        """read() with no event queued returns [] at once."""
        assert watched.read() == []

    def test_overflow_is_a_tree_change_for_every_root(self, watcher: Watcher, tmp_path: Path) -> None:
        """A queue overflow event (wd -1) is one tree change with path "" for each root."""
        watcher.add(str(tmp_path / "a"), [])
        watcher.add(str(tmp_path / "b"), [])
        changes = watcher.changes(parse_events(_event(-1, IN_Q_OVERFLOW) + _event(-1, IN_Q_OVERFLOW)))
        assert changes == [Change(str(tmp_path / "a"), "", "tree"), Change(str(tmp_path / "b"), "", "tree")]

    def test_parse_events_strips_padding(self) -> None:
        """Events are split by their length field and names lose their NUL padding."""
        data = _event(1, IN_CREATE, b"f.txt", pad=11) + _event(2, IN_MODIFY) + _event(3, IN_MODIFY, b"x")[:-1]
        assert parse_events(data) == [Event(1, IN_CREATE, 0, "f.txt"), Event(2, IN_MODIFY, 0, "")]

    def test_parse_events_keeps_undecodable_names(self) -> None:
        """A name that is not UTF-8 is decoded as the filesystem does (surrogate escapes), not refused."""
        (event,) = parse_events(_event(1, IN_CREATE, b"\xff.txt", pad=2))
        assert os.fsencode(event.name) == b"\xff.txt"

    def test_unknown_watch_is_ignored(self, watched: Watcher) -> None:
        """An event for a watch descriptor the watcher does not hold is dropped."""
        assert watched.changes(parse_events(_event(10_000, IN_MODIFY, b"f.txt", pad=3))) == []

    def test_read_error_is_a_tree_change_for_every_root(self, watched: Watcher, root: Path) -> None:
        """A read error other than EAGAIN is a tree change for every root (here the fd is made a directory's)."""
        directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.dup2(directory, watched.fileno())  # read() now fails with EISDIR
        finally:
            os.close(directory)
        assert watched.read() == [Change(str(root), "", "tree")]

    def test_close_is_idempotent(self, root: Path) -> None:
        """close() twice is fine, and a closed watcher reads nothing."""
        w = Watcher()
        w.add(str(root), [""])
        w.close()
        w.close()
        assert w.fileno() == -1 and w.read() == []


class TestNotFollowingNew:
    def test_a_new_directory_is_reported_but_not_watched(self, tmp_path: Path) -> None:
        """With follow_new=False a directory made is a tree change, and what is then written in it is not reported."""
        with Watcher(follow_new=False) as watcher:
            assert watcher.add(str(tmp_path), [""])
            (tmp_path / "node_modules").mkdir()
            assert watcher.read() == [Change(str(tmp_path), "node_modules", "tree")]
            (tmp_path / "node_modules" / "x.js").write_text("x")
            assert watcher.read() == []
