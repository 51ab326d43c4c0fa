"""The one read path (gateway/files.py): remote lines numbered as local ones, the read cache, paths."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.ripgrep.localfs import LocalTree
from gateway.errors import InvalidRequest, NotFound
from gateway.files import MAX_READ_BYTES, ReadCache, RemoteView, clean_path, lines_of, remote_etag
from gateway.models import BackendResult, RemoteFile, SearchQuery
from gateway.testing import MockBackend

TEXT = st.lists(st.sampled_from(["a", "é", "\r", "\n", "\r\n", "x y", "\t", "\x00"]), max_size=40).map("".join)


class TestLines:
    @settings(max_examples=200, deadline=None)
    @given(text=TEXT, start=st.integers(1, 12), span=st.integers(0, 12), most=st.integers(1, 5))
    def test_remote_lines_are_local_lines(
        self, tmp_path_factory: pytest.TempPathFactory, text: str, start: int, span: int, most: int
    ) -> None:
        """Whatever the bytes, a remote file's lines, total and range are what a local read of the same
        file gives (so a file reads alike wherever it lives)."""
        root = tmp_path_factory.mktemp("lines")
        data = text.encode()
        (root / "f.txt").write_bytes(data)
        end = start + span
        assert lines_of(data, start, end, most) == LocalTree(root).read_lines("f.txt", start, end, most)
        assert lines_of(data, start, None, most) == LocalTree(root).read_lines("f.txt", start, None, most)


class TestReadCache:
    def test_bounded_in_bytes_least_recently_used_first(self) -> None:
        """The cache keeps at most its bytes, dropping what was used longest ago."""
        cache = ReadCache(max_bytes=40)
        cache.put("a", RemoteFile(b"x" * 10, '"a"'))
        cache.put("b", RemoteFile(b"y" * 10, '"b"'))
        cache.put("c", RemoteFile(b"z" * 10, '"c"'))
        assert cache.get("a") is not None  # used: now the newest
        cache.put("d", RemoteFile(b"w" * 10, '"d"'))
        cache.put("e", RemoteFile(b"v" * 10, '"e"'))
        kept = [p for p in "abcde" if cache.get(p) is not None]
        assert kept == ["a", "c", "d", "e"]  # b, used longest ago, went first

    def test_without_an_identity_nothing_is_kept(self) -> None:
        """A file with no identity could never be checked again: it is not kept (nor one too large)."""
        cache = ReadCache(max_bytes=40)
        cache.put("a", RemoteFile(b"x"))
        cache.put("b", RemoteFile(b"x" * 20, '"b"'))
        assert len(cache) == 0

    def test_a_hit_is_counted(self) -> None:
        cache = ReadCache()
        cache.put("a", RemoteFile(b"x", '"a"'))
        found = cache.get("a")
        assert found is not None and cache.served(found).data == b"x" and cache.hits == 1


class TestPaths:
    @pytest.mark.parametrize("path", ["../x", "a/../../b", "a//b", "a/./b", "a\x00b", "a\\b"])
    def test_a_path_leaving_its_root_is_not_found(self, path: str) -> None:
        """`..`, `.`, empty components, NUL and backslashes never reach a backend: NotFound (cloaked)."""
        with pytest.raises(NotFound):
            clean_path(path)

    def test_slashes_at_the_ends_are_dropped(self) -> None:
        assert clean_path("/a/b/") == "a/b" and clean_path("") == ""

    @pytest.mark.parametrize(
        ("identity", "etag"), [("", ""), ('"x"', '"x"'), ('W/"x"', 'W/"x"'), ("abc=@123", '"abc=@123"')]
    )
    def test_an_identity_is_an_etag(self, identity: str, etag: str) -> None:
        """A backend's identity is served as an ETag (quoted once)."""
        assert remote_etag(identity) == etag


async def nothing(query: SearchQuery) -> BackendResult:
    raise AssertionError("no search")


class TestRemoteView:
    async def test_each_file_is_read_once_per_view(self) -> None:
        """A view asks the backend for a file once, whatever it is asked of it (stat, bytes, lines)."""
        asked: list[str] = []

        class Remote(MockBackend):
            async def read_file(self, path: str, deadline: float) -> RemoteFile:
                asked.append(path)
                return RemoteFile(b"one\ntwo\n", '"v"')

        view = RemoteView(Remote(nothing), lambda: time.monotonic() + 5, prefix="child")
        assert await view.stat("f.txt") == {"type": "file", "size": 8, "mtime": None}
        assert await view.read_bytes("f.txt", 4, 3) == (b"two", 8, '"v"')
        assert await view.read_lines("f.txt", 2, None, 10) == (["two"], 2)
        assert asked == ["child/f.txt"]

    async def test_a_file_over_the_cap_is_refused(self) -> None:
        """However the backend sent it, a file over the read cap is refused naming `path`."""

        class Huge(MockBackend):
            async def read_file(self, path: str, deadline: float) -> RemoteFile:
                return RemoteFile(b"x" * (MAX_READ_BYTES + 1))

        view = RemoteView(Huge(nothing), lambda: time.monotonic() + 5)
        with pytest.raises(InvalidRequest, match="larger than") as caught:
            await view.read_lines("big.bin", 1, None, 10)
        assert caught.value.field == "path"
