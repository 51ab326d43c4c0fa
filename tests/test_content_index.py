"""The content index: what it holds of each file, which files it names for a query, and that a search
narrowed by it finds exactly what a full rg scan finds (the real rg, real files, real tantivy)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.ripgrep.backend import find_rg
from gateway.index.content import fresh, records
from gateway.index.content.build import ContentBuilder, ContentStats
from gateway.index.content.grams import KELVIN
from gateway.index.content.layout import Kind, read_manifest, read_state, root_dir
from gateway.index.content.narrow import ContentIndex
from gateway.index.files import Source, list_all
from gateway.models import SearchQuery
from gateway.narrowing import Narrowed
from tests.content_support import age, answers, build, indexed
from tests.helpers import git_repo

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as clean once indexed (nothing writes them meanwhile)."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)


def query(text: str, **fields: Any) -> SearchQuery:
    return SearchQuery(text=text, deadline=time.monotonic() + 30, **fields)


def named(answer: Narrowed | str, root: Path) -> tuple[set[str], set[str]]:
    """The root-relative files and folders a narrowing names."""
    assert isinstance(answer, Narrowed), answer
    strip = len(str(root)) + 1
    return {f[strip:] for f in answer.files}, {d[strip:] if d != str(root) else "" for d in answer.folders}


class TestRecords:
    def test_text_file_has_its_grams(self) -> None:
        """A text file is TEXT and its words are its distinct grams."""
        kind, words = records.classify(b"needle needle")
        assert kind is Kind.TEXT and words is not None
        assert len(words.split()) == len({b"needle needle"[i : i + 3] for i in range(11)})

    def test_nul_early_is_binary(self) -> None:
        """A NUL within 64 KiB: rg prints nothing of the file, so it is not in the engine."""
        assert records.classify(b"needle\0") == (Kind.BINARY, None)

    def test_rg_hides_a_file_with_a_nul_in_its_first_buffer(self, tmp_path: Path) -> None:
        """The real rg prints nothing of a file whose NUL lies within its first 64 KiB, and prints the
        lines before one that lies further (what BINARY and PREFIX stand on)."""
        import subprocess

        def body(nul_at: int) -> bytes:
            head = b"needle first\n"
            return head + b"f" * (nul_at - len(head)) + b"\0\n"

        git_repo(tmp_path, {"at65535.txt": body(65_535), "at65536.txt": body(65_536)})
        rg = find_rg()
        assert rg is not None
        listed = subprocess.run([rg, "--no-config", "-l", "needle"], cwd=tmp_path, capture_output=True, text=True)
        assert listed.stdout.split() == ["at65536.txt"]
        assert records.classify(body(65_535))[0] is Kind.BINARY
        assert records.classify(body(65_536))[0] is Kind.PREFIX

    def test_nul_late_indexes_the_prefix_searched_by_folder(self) -> None:
        """A NUL after 64 KiB: the grams before it, searched through its folder."""
        kind, words = records.classify(b"x" * 70_000 + b"needle\0after")
        assert kind is Kind.PREFIX and words is not None and words.endswith("~dir")
        assert len(words.split()) < 10  # "xxx", "xxn", "xne", ... never "aft"

    def test_utf16_with_bom_is_read_by_folder(self) -> None:
        """rg transcodes UTF-16 with a byte order mark: such a file is read as a scan reads it, every time."""
        assert records.classify("needle".encode("utf-16")) == (Kind.FOLDER, "~all ~dir")

    def test_too_many_grams_is_searched_every_time(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A file with more distinct grams than the limit is LARGE: every search reads it."""
        monkeypatch.setattr(records, "MAX_GRAMS", 5)
        assert records.classify(b"abcdefghijkl") == (Kind.LARGE, "~all")

    def test_large_file_is_searched_every_time(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A file over MAX_BYTES with no NUL is LARGE; with a NUL past 64 KiB, read by folder."""
        monkeypatch.setattr(records, "MAX_BYTES", 100)
        assert records.classify(b"y" * 200) == (Kind.LARGE, "~all")
        assert records.classify(b"y" * 70_000 + b"\0")[0] is Kind.FOLDER

    def test_kelvin_sign_is_also_read_as_k(self) -> None:
        """A file with KELVIN SIGN holds the grams of the text with it written as k (rg -i equates them)."""
        _, words = records.classify(KELVIN + b"elvin")
        _, plain = records.classify(b"kelvin")
        assert words is not None and plain is not None
        assert set(plain.split()) <= set(words.split())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with text, binary, ignored, hidden and nested files."""
    return git_repo(
        tmp_path / "repo",
        {
            ".gitignore": "ignored.txt\nbuild/\n",
            "a.py": "def register_blueprint(app):\n    return app\n",
            "b.py": "class QueuePool:\n    pass\n",
            "sub/c.txt": "the needle is here\n",
            "sub/deep/d.txt": "another needle\n",
            "ignored.txt": "needle ignored\n",
            "build/out.txt": "needle built\n",
            ".hidden.txt": "needle hidden\n",
            "bin.dat": b"needle\0binary",
            "odd/late.txt": b"needle first\n" + b"filler line\n" * 6000 + b"\0needle late\n",
            "odd/utf16.txt": "needle utf16\n".encode("utf-16"),
        },
    )


class TestBuild:
    def test_manifest_lists_what_rg_lists(self, tmp_path: Path, repo: Path) -> None:
        """Every file rg searches is in the manifest; ignored and hidden ones are not."""
        build(tmp_path / "idx", repo)
        manifest = read_manifest(root_dir(str(tmp_path / "idx"), str(repo)))
        assert manifest is not None
        source = Source("repo", str(repo))
        assert set(manifest.files) == set(list_all(source, find_rg()))
        assert "ignored.txt" not in manifest.files and ".hidden.txt" not in manifest.files
        assert manifest.files["bin.dat"].kind == Kind.BINARY
        assert manifest.files["odd/late.txt"].kind == Kind.PREFIX
        assert manifest.files["odd/utf16.txt"].kind == Kind.FOLDER

    def test_state_is_complete_with_counts(self, tmp_path: Path, repo: Path) -> None:
        """After a whole pass the state says complete, with its files, bytes and build time."""
        stats = build(tmp_path / "idx", repo)
        state = read_state(root_dir(str(tmp_path / "idx"), str(repo)))
        assert state is not None and state.complete
        assert state.files == stats.read == stats.listed
        assert state.bytes > 0 and state.indexed_bytes == stats.bytes and state.built_s >= 0

    def test_second_pass_reads_only_what_changed(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A pass after one file changed reads that file alone; a removed file leaves the index."""
        build(tmp_path / "idx", repo)
        (repo / "a.py").write_text("def register_blueprint(app, more):\n")
        (repo / "b.py").unlink()
        stats = build(tmp_path / "idx", repo)
        assert (stats.read, stats.removed) == (1, 1)
        manifest = read_manifest(root_dir(str(tmp_path / "idx"), str(repo)))
        assert manifest is not None and "b.py" not in manifest.files

    def test_damaged_engine_is_rebuilt(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """An engine whose files are garbage is deleted and built again by the next pass, never a failure."""
        build(tmp_path / "idx", repo)
        engine = Path(root_dir(str(tmp_path / "idx"), str(repo))) / "engine"
        for f in engine.iterdir():
            if f.is_file():
                f.write_bytes(b"garbage")
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        assert index.narrow(str(repo), query("register_blueprint"), None) == "unreadable"
        assert index.describe(str(repo))["state"] == "stale"
        (repo / "a.py").write_text("def register_blueprint(x):\n")  # something to write: the writer opens
        build(tmp_path / "idx", repo)
        files, _ = named(index.narrow(str(repo), query("register_blueprint"), None), repo)
        assert files == {"a.py"}

    def test_missing_manifest_rebuilds_the_engine(self, tmp_path: Path, repo: Path) -> None:
        """An engine without its manifest is not trusted: it is built again from nothing."""
        build(tmp_path / "idx", repo)
        (Path(root_dir(str(tmp_path / "idx"), str(repo))) / "manifest.msgpack").unlink()
        stats = build(tmp_path / "idx", repo)
        assert stats.read == stats.listed

    def test_two_versions_keep_their_own_files(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another format's folder is never read, changed or removed by this one."""
        from gateway.index.content import paths

        build(tmp_path / "idx", repo)
        mine = root_dir(str(tmp_path / "idx"), str(repo))
        before = sorted(os.listdir(mine))
        monkeypatch.setattr(paths, "FORMAT", paths.FORMAT + 1)
        build(tmp_path / "idx", repo)
        other = root_dir(str(tmp_path / "idx"), str(repo))
        assert other != mine and sorted(os.listdir(mine)) == before
        assert len(os.listdir(tmp_path / "idx")) == 2

    def test_over_the_size_bound_is_not_indexed(self, tmp_path: Path, repo: Path) -> None:
        """A checkout whose index would pass max_bytes is scanned, and its state says why."""
        source = Source("repo", str(repo))
        builder = ContentBuilder(str(tmp_path / "idx"), max_bytes=10)
        assert not builder.refresh(source, list_all(source, find_rg()), time.time_ns(), ContentStats())
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        described = index.describe(str(repo))
        assert described["state"] == "off" and "max_bytes" in described["reason"]
        assert index.narrow(str(repo), query("needle"), None) == "off"

    def test_unwritable_folder_scans_and_says_so(self, tmp_path: Path, repo: Path) -> None:
        """An index folder that cannot be made leaves the checkout scanned, never a failed build."""
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        source = Source("repo", str(repo))
        builder = ContentBuilder(str(blocker / "idx"))
        assert not builder.refresh(source, list_all(source, find_rg()), time.time_ns(), ContentStats())
        assert ContentIndex(str(blocker / "idx"), [str(repo)]).narrow(str(repo), query("needle"), None) == "building"


class TestNarrow:
    def test_names_the_files_holding_the_grams(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A literal names the files holding its grams, and the folders of files read by folder."""
        index = indexed(tmp_path / "idx", repo)
        files, folders = named(index.narrow(str(repo), query("needle"), None), repo)
        assert files == {"sub/c.txt", "sub/deep/d.txt"}
        assert folders == {"odd"}  # late.txt (a NUL past 64 KiB) and utf16.txt: read as a scan reads them

    def test_nothing_holds_it(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A token found nowhere names no file (only the folders every search reads)."""
        index = indexed(tmp_path / "idx", repo)
        files, folders = named(index.narrow(str(repo), query("zqxjkw_nowhere"), None), repo)
        assert files == set() and folders == {"odd"}

    def test_case_insensitive_finds_every_case(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A case-insensitive query names files holding any case of it."""
        index = indexed(tmp_path / "idx", repo)
        files, _ = named(index.narrow(str(repo), query("queuepool", case_sensitive=False), None), repo)
        assert files == {"b.py"}

    def test_regex(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A regex names the files holding what every match must hold."""
        index = indexed(tmp_path / "idx", repo)
        files, _ = named(index.narrow(str(repo), query(r"def \w+_blueprint\(", mode="regex"), None), repo)
        assert files == {"a.py"}

    def test_path_filter_applies(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """Files the backend's path filter refuses are not named."""
        index = indexed(tmp_path / "idx", repo)
        files, _ = named(index.narrow(str(repo), query("needle"), lambda p: p.startswith("sub/deep/")), repo)
        assert files == {"sub/deep/d.txt"}

    @pytest.mark.parametrize(("text", "mode", "reason"), [("ab", "exact", "no_grams"), (".*", "regex", "no_grams")])
    def test_nothing_to_require_scans(self, tmp_path: Path, repo: Path, text: str, mode: str, reason: str) -> None:
        """A pattern with no gram to require scans the checkout."""
        index = indexed(tmp_path / "idx", repo)
        assert index.narrow(str(repo), query(text, mode=mode), None) == reason

    def test_common_query_scans(self, tmp_path: Path, no_race: None) -> None:
        """When most files can match, rg scans the checkout rather than read a long list."""
        root = git_repo(tmp_path / "many", {f"f{i}.txt": "common words\n" for i in range(10)})
        index = indexed(tmp_path / "idx", root)
        assert index.narrow(str(root), query("common"), None) == "common"

    def test_not_built_scans(self, tmp_path: Path, repo: Path) -> None:
        """Until a pass completes, the checkout is scanned and its state says building."""
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        assert index.narrow(str(repo), query("needle"), None) == "building"
        assert index.describe(str(repo))["state"] == "building"
        assert index.outcomes["building"] == 1

    def test_a_building_checkouts_holder_is_read_once_a_second(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``/v1/namespaces`` reads a building checkout's lock holder at most once every HOLDER_S: read at
        every call, 1,248 building checkouts' records cost ~120 ms of CPU an answer, taken from the build."""
        from gateway.index import locks

        reads: list[str] = []
        real = locks.holder
        monkeypatch.setattr(locks, "holder", lambda directory, root: reads.append(root) or real(directory, root))
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        lock = locks.RootLock(str(tmp_path / "idx"), str(repo))
        assert lock.take()
        try:
            assert index.describe(str(repo))["holder"]["pid"] == os.getpid()
            assert index.describe(str(repo))["holder"]["pid"] == os.getpid()
            assert reads == [str(repo)]
            lock.release()
            assert index.describe(str(repo))["holder"]["pid"] == os.getpid()  # as read less than HOLDER_S ago
            monkeypatch.setattr(locks, "HOLDER_S", 0.0)
            assert "holder" not in index.describe(str(repo))
            assert reads == [str(repo)] * 2
        finally:
            lock.release()

    def test_small_checkouts_scan_without_a_watcher(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without a file watcher, checkouts indexing less than CLI_MIN_BYTES together are scanned: looking at
        every file would cost more than rg spends on them."""
        from gateway.index.content import paths

        monkeypatch.setattr(paths, "CLI_MIN_BYTES", 64 * 1024 * 1024)
        index = indexed(tmp_path / "idx", repo)
        assert index.narrow(str(repo), query("register_blueprint"), None) == "small"

    def test_semantic_is_not_narrowed(self, tmp_path: Path, repo: Path) -> None:
        """Only exact and regex searches read the content index."""
        index = indexed(tmp_path / "idx", repo)
        assert index.narrow(str(repo), query("needle", mode="semantic"), None) == "off"


class TestFreshness:
    """What changed since the index was built is read as a scan reads it (a one-shot reader: every file checked)."""

    def test_a_changed_file_is_read_by_folder(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A file written after indexing: its folder is named, so its new content is found."""
        index = indexed(tmp_path / "idx", repo)
        (repo / "sub" / "deep" / "d.txt").write_text("now it holds zqxjkw_fresh\n")
        files, folders = named(index.narrow(str(repo), query("zqxjkw_fresh"), None), repo)
        assert "sub/deep" in folders and "sub/deep/d.txt" not in files

    def test_a_new_file_is_read_by_folder(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A file added after indexing: its folder changed, so it is read."""
        index = indexed(tmp_path / "idx", repo)
        (repo / "sub" / "new.txt").write_text("zqxjkw_fresh\n")
        _, folders = named(index.narrow(str(repo), query("zqxjkw_fresh"), None), repo)
        assert "sub" in folders

    def test_a_new_folder_scans_the_checkout(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """A folder the index never listed: the checkout is scanned until it is listed again."""
        index = indexed(tmp_path / "idx", repo)
        (repo / "newdir").mkdir()
        (repo / "newdir" / "x.txt").write_text("zqxjkw_fresh\n")
        assert index.narrow(str(repo), query("zqxjkw_fresh"), None) == "stale"
        build(tmp_path / "idx", repo)
        files, _ = named(index.narrow(str(repo), query("zqxjkw_fresh"), None), repo)
        assert files == {"newdir/x.txt"}

    def test_a_copy_keeping_an_old_mtime_is_seen(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """Same size, same mtime, new content (cp -p): its ctime changed, so it is read by folder."""
        index = indexed(tmp_path / "idx", repo)
        target = repo / "b.py"
        st = target.stat()
        target.write_bytes(b"class zqxjkwPool:\n    pass\n"[: st.st_size].ljust(st.st_size, b" "))
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        _, folders = named(index.narrow(str(repo), query("zqxjkwPool"), None), repo)
        assert "" in folders

    def test_racy_files_are_read_by_folder(self, tmp_path: Path, repo: Path) -> None:
        """A file indexed less than RACY_NS after it was written may have changed unseen: read by folder."""
        index = indexed(tmp_path / "idx", repo)
        _, folders = named(index.narrow(str(repo), query("register_blueprint"), None), repo)
        assert "" in folders  # a.py was written moments ago

    def test_clean_after_it_is_read_again(self, tmp_path: Path, repo: Path, no_race: None) -> None:
        """Once a pass read the changed file, it is named by the engine again, not by its folder."""
        index = indexed(tmp_path / "idx", repo)
        (repo / "sub" / "c.txt").write_text("zqxjkw_fresh\n")
        build(tmp_path / "idx", repo)
        files, folders = named(index.narrow(str(repo), query("zqxjkw_fresh"), None), repo)
        assert files == {"sub/c.txt"} and "sub" not in folders


class TestFollowing:
    """A server's reader follows changes with inotify: what changed before a search began is read."""

    @pytest.fixture
    def following(self, tmp_path: Path, repo: Path, no_race: None) -> Iterator[ContentIndex]:
        build(tmp_path / "idx", repo)
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)], follow=True)
        deadline = time.monotonic() + 10
        while index.narrow(str(repo), query("needle"), None) == "building" and time.monotonic() < deadline:
            time.sleep(0.01)  # the first check runs in a thread
        yield index
        index.close()

    def test_ready_once_checked(self, following: ContentIndex, repo: Path) -> None:
        """After its first check, a followed checkout is ready."""
        assert following.describe(str(repo))["state"] == "ready"

    def test_a_write_is_seen_by_the_next_search(self, following: ContentIndex, repo: Path) -> None:
        """A file written just before a search: its folder is read."""
        (repo / "a.py").write_text("zqxjkw_followed\n")
        _, folders = named(following.narrow(str(repo), query("zqxjkw_followed"), None), repo)
        assert "" in folders

    def test_a_new_folder_makes_it_stale_until_listed(
        self, following: ContentIndex, tmp_path: Path, repo: Path
    ) -> None:
        """A folder made after the index: scanned, state stale, until a pass lists it."""
        (repo / "fresh").mkdir()
        assert following.narrow(str(repo), query("needle"), None) == "stale"
        assert following.describe(str(repo))["state"] == "stale"
        time.sleep(0.002)
        build(tmp_path / "idx", repo)
        assert isinstance(following.narrow(str(repo), query("needle"), None), Narrowed)

    def test_an_ignore_file_change_makes_it_stale(self, following: ContentIndex, repo: Path) -> None:
        """An edited .gitignore changes which files rg reads: scanned until listed again."""
        with (repo / ".gitignore").open("a") as handle:
            handle.write("a.py\n")
        assert following.narrow(str(repo), query("register_blueprint"), None) == "stale"


class TestBuilderFollows:
    """The background builder watches what it indexed and reads again what changed."""

    @pytest.fixture
    def follower(
        self, tmp_path: Path, repo: Path, no_race: None, monkeypatch: pytest.MonkeyPatch
    ) -> Iterator[tuple[Any, list[Any]]]:
        from gateway.index.content import follow

        monkeypatch.setattr(follow, "QUIET_S", 0.0)
        build(tmp_path / "idx", repo)
        calls: list[Any] = []
        source = Source("repo", str(repo))
        content = ContentBuilder(str(tmp_path / "idx"))
        watcher = follow.Follower(
            content, [source], lambda s, p: calls.append(("files", p)), lambda s: calls.append(("tree", s.root))
        )
        watcher.watch()
        yield watcher, calls
        watcher.close()

    def test_a_changed_file_is_read_again(self, follower: tuple[Any, list[Any]], tmp_path: Path, repo: Path) -> None:
        """A file written after the build is in the index again once the builder took the change."""
        watcher, calls = follower
        (repo / "sub" / "c.txt").write_text("zqxjkw_followed\n")
        watcher.take()
        stats = watcher.apply()
        assert stats.read == 1 and calls == [("files", ["sub/c.txt"])]
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        files, folders = named(index.narrow(str(repo), query("zqxjkw_followed"), None), repo)
        assert files == {"sub/c.txt"} and "sub" not in folders

    def test_a_removed_file_leaves_the_index(self, follower: tuple[Any, list[Any]], tmp_path: Path, repo: Path) -> None:
        """A file deleted after the build leaves the manifest and the engine."""
        watcher, _ = follower
        (repo / "b.py").unlink()
        watcher.take()
        assert watcher.apply().removed == 1
        manifest = read_manifest(root_dir(str(tmp_path / "idx"), str(repo)))
        assert manifest is not None and "b.py" not in manifest.files

    def test_files_read_too_soon_are_read_again(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Files a whole pass read within RACY_NS of their last write are read again once it passed: then a
        search names them by the engine, not by their folders."""
        from gateway.index.content import follow

        monkeypatch.setattr(fresh, "RACY_NS", 300_000_000)  # 0.3 s: the repository was written just now
        source = Source("repo", str(repo))
        content = ContentBuilder(str(tmp_path / "idx"))
        content.refresh(source, list_all(source, find_rg()), time.time_ns(), ContentStats())
        assert str(repo) in content.racy
        watcher = follow.Follower(content, [source], lambda s, p: None, lambda s: None)
        watcher.watch()
        deadline = time.monotonic() + 10
        while (due := watcher.wait_s()) is not None and time.monotonic() < deadline:
            time.sleep(due)
            watcher.apply()
        watcher.close()
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)])
        files, folders = named(index.narrow(str(repo), query("register_blueprint"), None), repo)
        assert files == {"a.py"} and "" not in folders

    def test_a_new_folder_lists_the_checkout_again(self, follower: tuple[Any, list[Any]], repo: Path) -> None:
        """A folder made after the build is a tree change: the builder lists that checkout again."""
        watcher, calls = follower
        (repo / "fresh").mkdir()
        watcher.take()
        watcher.apply()
        assert ("tree", str(repo)) in calls


# --- the oracle: a narrowed search finds exactly what a full scan finds ---------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout of this repository's own code and docs, with the files that test rg's rules, indexed."""
    root = tmp_path_factory.mktemp("real") / "real"
    shutil.copytree(REPO / "gateway", root / "gateway", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "adapters", root / "adapters", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "README.md", root / "README.md")
    git_repo(
        root,
        {
            ".gitignore": "secret.py\n",
            "secret.py": "def register_blueprint(): pass\n",
            "notes/kelvin.txt": "temperature in " + "\u212a" + "ELVIN and \u017fELF\n",
            "notes/binary.bin": b"def search(\0 binary",
            "notes/late.txt": (b"def search(self):\n" * 4000) + b"\0 def search(self) after\n",
            "notes/utf16.txt": "def search(self): in utf-16\n".encode("utf-16"),
            "notes/caf\u00e9.txt": "CAFÉ et café, Straße\n",
        },
    )
    age(root)
    return root


@pytest.fixture(scope="module")
def real_index(real: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContentIndex]:
    folder = tmp_path_factory.mktemp("real-idx")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fresh, "RACY_NS", 0)
        index = indexed(folder, real)
        yield index
    index.close()


QUERIES = [
    ("register_blueprint", "exact", True, 0),
    ("def search(", "exact", True, 0),
    ("def search(", "exact", True, 2),
    ("SearchQuery", "exact", False, 0),
    ("kelvin", "exact", False, 0),
    ("self", "exact", False, 0),
    ("café", "exact", False, 0),
    ("CAFÉ", "exact", True, 0),
    (r"def \w+_argv\(", "regex", True, 1),
    (r"(Narrowed|Narrower)\b", "regex", True, 0),
    (r"(?i)contentindex", "regex", True, 0),
    (r"colou?r|zqxjkw", "regex", True, 0),
    ("zqxjkw_nowhere", "exact", True, 0),
]


class TestOracle:
    @pytest.mark.parametrize(("text", "mode", "case", "context"), QUERIES)
    async def test_same_files_and_lines_as_a_scan(
        self, real: Path, real_index: ContentIndex, no_race: None, text: str, mode: str, case: bool, context: int
    ) -> None:
        """With the index, every file and line (columns, context) is exactly what a full scan gives."""
        q = query(text, mode=mode, case_sensitive=case, context_lines=context)
        assert await answers(real, real_index, q) == await answers(real, None, q)

    async def test_the_index_narrowed_them(self, real: Path, real_index: ContentIndex, no_race: None) -> None:
        """The selective queries above were answered from the index, not by scanning."""
        before = real_index.outcomes["narrowed"]
        await answers(real, real_index, query("register_blueprint"))
        assert real_index.outcomes["narrowed"] == before + 1

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    async def test_drawn_from_real_contents(
        self, real: Path, real_index: ContentIndex, no_race: None, data: st.DataObject
    ) -> None:
        """A literal or regex cut from a real file's line finds the same files and lines narrowed or not."""
        files = sorted(p for p in (real / "gateway").rglob("*.py") if p.stat().st_size)
        path = data.draw(st.sampled_from(files))
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) >= 4]
        if not lines:
            return
        line = data.draw(st.sampled_from(lines))
        start = data.draw(st.integers(0, len(line) - 3))
        piece = line[start : start + data.draw(st.integers(3, 24))]
        case = data.draw(st.booleans())
        if data.draw(st.booleans()):
            piece = piece.swapcase() if not case else piece
            q = query(piece, case_sensitive=case)
        else:
            cut = data.draw(st.integers(0, len(piece)))
            glue = data.draw(st.sampled_from([".", r"\w*", "[a-z_]+", "(?:x|y)?", " ?", ""]))
            pattern = re2.escape(piece[:cut]) + glue + re2.escape(piece[cut:])
            q = query(pattern, mode="regex", case_sensitive=case)
        assert await answers(real, real_index, q) == await answers(real, None, q)
