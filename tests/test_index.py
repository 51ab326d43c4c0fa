"""The declaration index: its SQLite store, the background builder, and its faults."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from gateway.index.background import BuilderProcess
from gateway.index.builder import Builder
from gateway.index.files import Source, index_file
from gateway.index.hits import Outline
from gateway.index.parse import Declaration
from gateway.index.store import FileRecord, Store, db_name

PY = "import os\n\n\nclass Widget:\n    def draw(self):\n        return 1\n\n\ndef make():\n    return Widget()\n"


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
    return root


def _record(path: str = "a.py", *decls: Declaration) -> FileRecord:
    return FileRecord(path, 10, 1, "python", tuple(decls))


class TestStore:
    def test_declarations_round_trip(self, tmp_path: Path) -> None:
        """What is put is what is looked up, in file order, with parents."""
        store = Store.open(str(tmp_path))
        decls = (Declaration("class", "A", "A", 1, 9, "An A."), Declaration("method", "f", "A.f", 2, 3, "", 0))
        store.put("ns", [_record("a.py", *decls)])
        (record,) = store.lookup("ns", ["a.py", "missing.py"]).values()
        assert record.outline == Outline.of(decls) and (record.size, record.mtime_ns) == (10, 1)
        assert record.outline is not None and record.outline.detail(1) == ("method", "f", "A.f", "")
        store.close()

    def test_defining_files_by_name_and_case(self, tmp_path: Path) -> None:
        """name -> defining files, case-sensitive or not as asked; an impl defines nothing."""
        store = Store.open(str(tmp_path))
        store.put("ns", [_record("a.py", Declaration("class", "Widget", "Widget", 1, 2))])
        store.put("ns", [_record("b.rs", Declaration("impl", "Widget", "Widget", 1, 2))])
        assert store.defining_paths("Widget", True) == {"ns": {"a.py": True}}
        assert store.defining_paths("widget", True) == {}
        assert store.defining_paths("widget", False) == {"ns": {"a.py": False}}
        store.close()

    def test_a_file_indexed_again_replaces_its_declarations(self, tmp_path: Path) -> None:
        """Re-indexing a file drops its old declarations."""
        store = Store.open(str(tmp_path))
        store.put("ns", [_record("a.py", Declaration("function", "old", "old", 1, 2))])
        store.put("ns", [_record("a.py", Declaration("function", "new", "new", 1, 2))])
        assert store.defining_paths("old", True) == {} and store.defining_paths("new", True) == {"ns": {"a.py": True}}
        store.close()

    def test_files_are_keyed_by_checkout_not_by_namespace_name(self, tmp_path: Path) -> None:
        """Two namespaces over one checkout read the same rows; another checkout's rows are not theirs."""
        from gateway.index.resolve import DeclarationIndex
        from gateway.query.request import parse_request

        root = _tree(tmp_path / "repo", {"w.py": PY})
        other = _tree(tmp_path / "other", {"w.py": PY})
        Builder(Store.open(str(tmp_path / "idx")), [Source("first", str(root))]).refresh()
        index = DeclarationIndex(
            str(tmp_path / "idx"), [Source("first", str(root)), Source("second", str(root)), Source("x", str(other))]
        )
        views = index.definitions(parse_request({"query": "Widget"}))
        assert views is not None and set(views) == {"first", "second"}
        assert views["second"]("w.py") == views["first"]("w.py") == 2
        index.close()

    def test_definitions_among_some_files_agree_with_the_whole_view(self, tmp_path: Path) -> None:
        """Asked about some files (the one-shot search), each says what the whole view says of it:
        defines exactly, in another case, not at all (parsed), or unknown (not indexed)."""
        from gateway.index.resolve import DeclarationIndex
        from gateway.query.request import parse_request

        lower = "def widget():\n    return 1\n"
        root = _tree(tmp_path / "repo", {"w.py": PY, "low.py": lower, "none.py": "x = 1\n", "b/w.py": PY})
        Builder(Store.open(str(tmp_path / "idx")), [Source("ns", str(root))]).refresh()
        (root / "new.py").write_text(PY)  # not indexed yet
        index = DeclarationIndex(str(tmp_path / "idx"), [Source("ns", str(root)), Source("gone", str(tmp_path))])
        paths = ["w.py", "low.py", "none.py", "new.py"]
        for query in ("Widget", "widget"):
            request = parse_request({"query": query})
            whole, some = index.definitions(request), index.definitions(request, {"ns": paths, "gone": ["a.py"]})
            assert whole is not None and some is not None and set(some) == {"ns"}
            assert [some["ns"](p) for p in paths] == [whole["ns"](p) for p in paths]
        answers = index.definitions(parse_request({"query": "widget"}), {"ns": paths[1:]})
        assert answers is not None and [answers["ns"](p) for p in paths] == [1, 2, 0, None]
        assert answers["ns"]("b/w.py") == 1  # a defining file is known whether asked about or not
        assert index.definitions(parse_request({"query": "widget"}), {"ns": ["low.py"]})["ns"]("none.py") is None
        index.close()

    def test_a_prefetch_answers_the_next_search_once(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """prefetch (the one-shot search, while rg runs) reads who defines the name; the next
        definitions among some files uses it, the same answer, and a later one reads again."""
        from gateway.index.resolve import DeclarationIndex
        from gateway.query.request import parse_request

        root = _tree(tmp_path / "repo", {"w.py": PY, "low.py": "def widget():\n    return 1\n"})
        Builder(Store.open(str(tmp_path / "idx")), [Source("ns", str(root))]).refresh()
        index = DeclarationIndex(str(tmp_path / "idx"), [Source("ns", str(root))])
        paths = {"ns": ["w.py", "low.py"]}
        request = parse_request({"query": "Widget"})
        fresh = index.definitions(request, paths)
        assert fresh is not None
        expected = [fresh["ns"](p) for p in paths["ns"]]
        reads: list[tuple[str, bool]] = []
        real = Store.defining_paths

        def counted(store: Store, name: str, sensitive: bool) -> dict[str, dict[str, bool]]:
            reads.append((name, sensitive))
            return real(store, name, sensitive)

        monkeypatch.setattr(Store, "defining_paths", counted)
        index.prefetch(request)
        ahead = index.definitions(request, paths)
        assert ahead is not None and [ahead["ns"](p) for p in paths["ns"]] == expected == [2, 0]
        assert reads == [("Widget", True)]  # the prefetch's read, used by the search
        index.definitions(request, paths)
        index.prefetch(parse_request({"query": "draw"}))  # another name's: not used for Widget
        again = index.definitions(request, paths)
        assert again is not None and [again["ns"](p) for p in paths["ns"]] == expected
        assert reads == [("Widget", True), ("Widget", True), ("draw", False), ("Widget", True)]  # smart case
        index.prefetch(parse_request({"query": "x", "mode": "semantic"}))  # nothing to read
        assert len(reads) == 4
        index.close()

    def test_files_asked_about_ahead_answer_as_if_asked_after(self, tmp_path: Path) -> None:
        """prefetch_parsed (the one-shot search, for files rg has written so far) then definitions among
        all of them: each file answers as without it; the prefetched knowledge serves one search."""
        from gateway.index.resolve import DeclarationIndex
        from gateway.query.request import parse_request

        lower = "def widget():\n    return 1\n"
        root = _tree(tmp_path / "repo", {"w.py": PY, "low.py": lower, "none.py": "x = 1\n"})
        Builder(Store.open(str(tmp_path / "idx")), [Source("ns", str(root))]).refresh()
        (root / "new.py").write_text(PY)  # not indexed
        index = DeclarationIndex(str(tmp_path / "idx"), [Source("ns", str(root))])
        paths = ["w.py", "low.py", "none.py", "new.py"]
        request = parse_request({"query": "widget"})
        plain = index.definitions(request, {"ns": paths})
        assert plain is not None
        expected = [plain["ns"](p) for p in paths]
        assert expected == [1, 2, 0, None]
        index.prefetch_parsed("ns", ["none.py", "new.py"])
        index.prefetch_parsed("gone", ["a.py"])  # not a namespace of this index: nothing
        ahead = index.definitions(request, {"ns": paths})
        assert ahead is not None and [ahead["ns"](p) for p in paths] == expected
        assert index._parsed_ahead == {}  # used by that search only
        index.prefetch_parsed("ns", paths)
        assert index.definitions(request, {"ns": ["w.py"]})["ns"]("none.py") is None  # asked only of w.py
        index.close()

    def test_rows_of_another_parser_are_dropped(self, tmp_path: Path) -> None:
        """Changed queries or grammars: every file is parsed again."""
        Store.open(str(tmp_path), version="1:old").put("ns", [_record()])
        assert Store.open(str(tmp_path), version="1:old").states("ns")
        assert Store.open(str(tmp_path), version="1:new").states("ns") == {}

    def test_each_version_keeps_its_own_database(self, tmp_path: Path) -> None:
        """Two versions sharing one folder: each reads and writes its own file, neither drops the other's rows."""
        old, new = Store.open(str(tmp_path), version="7:old"), Store.open(str(tmp_path), version="7:new")
        old.put("ns", [_record()])
        new.put("ns", [_record()])
        assert old.path != new.path and old.states("ns") and new.states("ns")
        assert Store.open(str(tmp_path), version="7:old").states("ns")  # opened again by the old version
        assert sorted(p.name for p in tmp_path.glob("*.sqlite3")) == [db_name("7:new"), db_name("7:old")]

    def test_two_connections_share_one_database(self, tmp_path: Path) -> None:
        """A reader sees what another connection committed (WAL), and knows that something changed."""
        reader, writer = Store.open(str(tmp_path)), Store.open(str(tmp_path))
        before = reader.data_version()
        writer.put("ns", [_record()])
        assert reader.data_version() != before and reader.parsed_paths("ns") == {"a.py"}
        reader.close()
        writer.close()

    def test_a_corrupt_database_is_rebuilt_with_one_warning(self, tmp_path: Path) -> None:
        """A file that is not a database is deleted and built again."""
        (tmp_path / db_name()).write_bytes(b"this is not a database" * 100)
        with capture_logs() as logs:
            store = Store.open(str(tmp_path))
        assert store.path is not None and store.states("ns") == {}
        assert [e["event"] for e in logs] == ["index_rebuilt"]

    @pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
    def test_an_unwritable_folder_gives_an_in_memory_index(self, tmp_path: Path) -> None:  # pragma: no cover
        """No folder to write: the index lives in memory, with one warning."""
        tmp_path.chmod(0o500)
        with capture_logs() as logs:
            store = Store.open(str(tmp_path / "sub"))
        assert store.path is None and [e["event"] for e in logs] == ["index_in_memory"]

    def test_a_folder_that_is_a_file_gives_an_in_memory_index(self, tmp_path: Path) -> None:
        """A `dir` that cannot be a folder: the index lives in memory, with one warning."""
        (tmp_path / "file").write_text("x")
        with capture_logs() as logs:
            store = Store.open(str(tmp_path / "file"))
        store.put("ns", [_record()])
        assert store.path is None and store.parsed_paths("ns") == {"a.py"}
        assert [e["event"] for e in logs] == ["index_in_memory"]

    def test_the_parsed_files_of_many_checkouts_at_once(self, tmp_path: Path) -> None:
        """parsed_of answers for every root asked, as parsed_paths does one by one, across query chunks."""
        from gateway.index import store as store_module

        store = Store.open(str(tmp_path))
        store.put("ns", [_record()])
        store.put("other", [_record()])
        roots = [f"empty{i}" for i in range(store_module._CHUNK + 3)] + ["ns", "missing"]
        got = store.parsed_of(roots)
        assert set(got) == set(roots) and got["ns"] == store.parsed_paths("ns") == {"a.py"}
        assert all(not paths for root, paths in got.items() if root != "ns")


class TestIndexFile:
    def test_a_file_is_read_and_parsed(self, tmp_path: Path) -> None:
        """A source file gives its (size, mtime) and declarations."""
        _tree(tmp_path, {"w.py": PY})
        record = index_file(str(tmp_path), "w.py")
        assert record is not None and record.declarations is not None
        assert [d.qualified_name for d in record.declarations] == ["Widget", "Widget.draw", "make"]
        assert record.size == len(PY)

    @pytest.mark.parametrize(
        "content",
        [b"def f():\n    pass\n\x00\x01binary", "def caf\xe9():\n    pass\n".encode("latin-1")],
        ids=["binary", "latin-1"],
    )
    def test_binary_and_non_utf8_files_are_not_parsed(self, tmp_path: Path, content: bytes) -> None:
        """Recorded as looked at, without declarations: they keep line hits."""
        _tree(tmp_path, {"x.py": content})
        record = index_file(str(tmp_path), "x.py")
        assert record is not None and record.declarations is None

    def test_a_file_over_the_size_limit_is_not_parsed(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A file larger than MAX_PARSE_BYTES keeps line hits."""
        import gateway.index.files as files

        monkeypatch.setattr(files, "MAX_PARSE_BYTES", 64)
        _tree(tmp_path, {"big.py": PY * 4})
        record = files.index_file(str(tmp_path), "big.py")
        assert record is not None and record.declarations is None

    def test_a_file_without_a_grammar_or_gone_is_nothing(self, tmp_path: Path) -> None:
        """No grammar, or no file: nothing to record."""
        _tree(tmp_path, {"notes.txt": "text"})
        assert index_file(str(tmp_path), "notes.txt") is None
        assert index_file(str(tmp_path), "gone.py") is None


class TestBuilder:
    def test_a_pass_indexes_the_files_rg_would_search(self, tmp_path: Path) -> None:
        """Ignored and hidden files are not indexed; files without a grammar neither."""
        root = _tree(
            tmp_path / "repo",
            {"a.py": PY, "b.go": "package b\nfunc B() {}\n", ".gitignore": "out/\n", "out/c.py": PY, "README.md": "x"},
        )
        (root / ".git").mkdir()
        store = Store.open(str(tmp_path / "idx"))
        stats = Builder(store, [Source("ns", str(root))]).refresh()
        assert set(store.states(str(root))) == {"a.py", "b.go"} and stats.parsed == 2
        assert store.defining_paths("B", True) == {str(root): {"b.go": True}}

    def test_a_second_pass_parses_only_what_changed(self, tmp_path: Path) -> None:
        """Touching one file re-indexes that file alone; a deleted file is forgotten."""
        root = _tree(tmp_path / "repo", {f"m{i}.py": PY for i in range(5)})
        store = Store.open(str(tmp_path / "idx"))
        builder = Builder(store, [Source("ns", str(root))])
        assert builder.refresh().parsed == 5
        assert builder.refresh().parsed == 0
        later = time.time_ns() + 1_000_000_000
        os.utime(root / "m2.py", ns=(later, later))
        (root / "m4.py").unlink()
        stats = builder.refresh()
        assert (stats.parsed, stats.forgotten) == (1, 1)
        assert set(store.states(str(root))) == {"m0.py", "m1.py", "m2.py", "m3.py"}

    def test_requested_files_are_indexed_at_once_when_stale(self, tmp_path: Path) -> None:
        """A file a search asked for is parsed if the index does not hold it as it is."""
        root = _tree(tmp_path / "repo", {"a.py": PY})
        store = Store.open(str(tmp_path / "idx"))
        builder = Builder(store, [Source("ns", str(root))])
        assert builder.requested([("ns", "a.py"), ("other", "x.py")]) == 1
        assert builder.requested([("ns", "a.py")]) == 0

    def test_two_builder_processes_share_a_folder_one_at_a_time(self, tmp_path: Path) -> None:
        """Two processes (two workers) on one index: one builds, the other waits; both end when asked."""
        root = _tree(tmp_path / "repo", {"a.py": PY, "b.py": PY})
        folder = str(tmp_path / "idx")
        first = BuilderProcess(folder, [Source("ns", str(root))], refresh_s=60)
        second = BuilderProcess(folder, [Source("ns", str(root))], refresh_s=60)
        first.start()
        second.start()
        try:
            deadline = time.monotonic() + 30
            store = Store.open(folder)
            while len(store.parsed_paths(str(root))) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert store.parsed_paths(str(root)) == {"a.py", "b.py"}
        finally:
            procs = [p.proc for p in (first, second)]
            first.stop()
            second.stop()
        assert all(p is not None and p.returncode is not None for p in procs)

    def test_the_spec_is_sent_without_holding_the_server(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A spec larger than a pipe holds (3,000 checkouts) is sent while the builder is still importing:
        start() returns before the builder reads a byte (already at BUILDER_NICE: its imports go after the
        server's), a request meanwhile is dropped, not sent before the spec, and the builder then reads the
        whole spec as its first line."""
        import json
        import subprocess
        import sys
        import threading

        import gateway.index.background as background

        go, out = tmp_path / "go", tmp_path / "spec.json"
        child = (
            "import os, sys, time\n"
            "while not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"
            "line = sys.stdin.buffer.readline()\n"
            "open(sys.argv[2] + '.tmp', 'wb').write(line); os.rename(sys.argv[2] + '.tmp', sys.argv[2])\n"
            "sys.stdin.buffer.read()\n"
        )
        real = subprocess.Popen

        def slow_builder(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
            return real([sys.executable, "-c", child, str(go), str(out)], **kwargs)  # type: ignore[call-overload,no-any-return]

        monkeypatch.setattr(background.subprocess, "Popen", slow_builder)
        sources = [Source(f"ns{i}", str(tmp_path / "src" / f"checkout-{i:05d}")) for i in range(3000)]
        builder = BuilderProcess(str(tmp_path / "idx"), sources, refresh_s=60)
        started = threading.Thread(target=builder.start, daemon=True)
        try:
            started.start()
            started.join(20.0)
            assert not started.is_alive()  # returned: the builder has not read a byte of its spec
            assert not out.exists()
            nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + background.BUILDER_NICE)
            assert builder.pid is not None and os.getpriority(os.PRIO_PROCESS, builder.pid) == nice  # from its start
            builder.prioritise("ns0", ["a.py"])  # the spec is not all in the pipe: dropped
            go.touch()
            deadline = time.monotonic() + 30
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            spec = json.loads(out.read_bytes())
            assert len(spec["sources"]) == 3000 and spec["sources"][-1]["root"] == sources[-1].root
            assert spec["nice"] == nice
        finally:
            go.touch()
            builder.stop()


class TestConcurrentWriters:
    def test_a_busy_database_fails_a_write_fast_not_a_read(self, tmp_path: Path) -> None:
        """While another connection holds the write lock, reads go on and a short-timeout write gives up."""
        holder = sqlite3.connect(str(tmp_path / db_name()), isolation_level=None)
        store = Store.open(str(tmp_path), busy_s=0.05)
        holder.execute("BEGIN IMMEDIATE")
        try:
            assert store.states("ns") == {}
            with pytest.raises(sqlite3.OperationalError):
                store.put("ns", [_record()])
        finally:
            holder.execute("ROLLBACK")
            holder.close()


class TestBuilderParts:
    def test_requests_are_json_lines_read_without_blocking(self) -> None:
        """Lines `[namespace, path]` as they come (garbage passed over); EOF closes."""
        from gateway.index.background import _Requests

        read, write = os.pipe()
        requests = _Requests(read)
        try:
            assert requests.poll() == []
            os.write(write, b'["ns", "a.py"]\nnot json\n["ns", "b')
            assert requests.wait(1.0) == [("ns", "a.py")]
            os.write(write, b'.py"]\n')
            assert requests.wait(1.0) == [("ns", "b.py")]
            os.close(write)
            write = -1
            assert requests.wait(1.0) == [] and requests.closed
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)

    def test_parsing_processes_index_what_one_process_does(self, tmp_path: Path) -> None:
        """With two parsing processes (forked, so in a process of its own here) the index is the same."""
        import subprocess
        import sys

        root = _tree(tmp_path / "repo", {f"pkg/m{i}.py": PY.replace("Widget", f"Widget{i}") for i in range(140)})
        script = (
            "import sys\n"
            "from gateway.index.builder import Builder\n"
            "from gateway.index.files import Source\n"
            "from gateway.index.store import Store\n"
            "store = Store.open(sys.argv[1])\n"
            "print(Builder(store, [Source('ns', sys.argv[2])], workers=int(sys.argv[3])).refresh().parsed)\n"
        )
        outs = []
        for workers in (1, 2):
            folder = tmp_path / f"idx{workers}"
            done = subprocess.run(
                [sys.executable, "-c", script, str(folder), str(root), str(workers)],
                capture_output=True,
                check=True,
                text=True,
            )
            store = Store.open(str(folder))
            outs.append(
                (
                    done.stdout.strip().splitlines()[-1],
                    store.defining_paths("Widget77", True) != {},
                    len(store.parsed_paths(str(root))),
                )
            )
            store.close()
        assert outs[0] == outs[1] == ("140", True, 140)
