"""The declaration database survives kills and damage, and never turns into a wrong or missing answer (issue 48).

Real SQLite, real tree-sitter, real rg: an index is built over a small checkout, then the database is
damaged (truncated, a page overwritten, its header garbled, its -wal deleted under a writer, a builder
SIGKILLed mid-write), at rest or under a service that has it open. After each:

(a) an exact search lists exactly rg's files and matched lines (``rg --json`` on the checkout):
    declarations only group lines into hits;
(b) the damage is seen, by the builder's check as it opens the database (``Store.open(check=True)``)
    or by the search that met it, and logged once (``index_rebuilt``); a killed builder leaves no damage
    at all (the WAL), which the check confirms;
(c) after a builder pass the index is whole again: the same service's hits are declarations (it has no
    time to parse on the spot: they come from the index) and a semantic search answers in full.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import gateway.index.resolve as resolve
import gateway.index.semantic as semantic
import gateway.index.store as store_module
from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.index.builder import Builder
from gateway.index.files import Source, find_rg, index_file
from gateway.index.hits import Outline
from gateway.index.parse import Declaration
from gateway.index.store import GUARD, FileRecord, Store, Stored, db_name
from gateway.query.request import parse_request
from gateway.service import SearchService
from gateway.sizing import MAX_CHAR_BUDGET
from tests.corpus import make_corpus, matched_lines
from tests.helpers import subprocess_env

NEEDLE = "needle"
RETRY = '''"""Retrying calls: the needle of this checkout."""
import time

needle = 3


def retry_with_backoff(call, attempts=needle):
    """Call again after a failure, sleeping exponentially longer each time."""
    for n in range(attempts):
        try:
            return call()
        except OSError:
            time.sleep(2**n)  # needle
    raise RuntimeError("gave up")


class Pool:
    """Holds connections, a needle in a haystack."""

    def take(self):
        return needle

    def give(self, item):
        def inner():
            return needle + item

        return inner()
'''


def _module(i: int) -> str:
    """A module of a few declarations, each using the needle a different number of times."""
    out = [f'"""Module {i}."""\n', "import os\n\n"]
    for j in range(3):
        uses = "\n".join(f"    value = value + needle * {k}" for k in range(1 + (i + j) % 3))
        out.append(f'\ndef work_{i}_{j}(value):\n    """Work {j} of module {i}."""\n{uses}\n    return value\n\n')
    out.append(f"\nclass Holder{i}:\n    def method(self):\n        return needle\n")
    return "".join(out)


FILES = {
    "repo": {
        "src/retry.py": RETRY,
        **{f"src/mod{i}.py": _module(i) for i in range(6)},
        "lib/util.go": "package lib\n\n// Needle finds it.\nfunc Needle() int {\n\treturn 1 // needle\n}\n",
        "README.md": "The needle is in src/.\n",
        ".gitignore": "build/\n",
        "build/skip.py": "needle = 'ignored by rg and by the index'\n",
    }
}
#: Files the index parses (rg's listing, with a grammar).
INDEXED = 8
QUESTION = "sleep longer between attempts after a failure"
#: A file added once the database is damaged: a service holds nothing of it, so its declarations (and its answer
#: by meaning) can only come from the file the builder made again, and show that the service follows to it.
LATE = (
    "src/late.py",
    'def compress_archive_entries(entries, needle):\n    """Pack the entries of an archive tightly."""\n'
    "    return sorted(entries, key=needle)\n",
)
LATE_QUESTION = "pack archive entries tightly"
PAGE = 4096
#: The repository (a subprocess imports gateway from it).
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "src", FILES) / "repo"


@pytest.fixture(autouse=True)
def look_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers look at the database at every search here (in a server: at most every second), so that a test
    sees a replaced file followed at once rather than waiting."""
    monkeypatch.setattr(resolve, "FOLLOW_S", 0.0)
    monkeypatch.setattr(resolve, "PARSED_TTL_S", 0.0)
    monkeypatch.setattr(semantic, "SYNC_S", 0.0)


def _path(index: Path) -> Path:
    return index / db_name()


def _build(corpus: Path, index: Path) -> int:
    """One builder pass as the background builder makes it (its database opened with the check); files parsed."""
    store = Store.open(str(index), busy_s=10.0, check=True)
    try:
        return Builder(store, [Source("repo", str(corpus))]).refresh().parsed
    finally:
        store.close()


def _service(corpus: Path, index: Path) -> SearchService:
    """A service over the checkout, its index in ``index``, with no time to parse on the spot (declarations come
    from the index only), no cached answers, and no builder of its own."""
    config = config_from_env(root=str(corpus.parent), env={})
    service = SearchService(
        dataclasses.replace(
            config, index=IndexConfig(dir=str(index), parse_budget_ms=0), cache=CacheConfig(answer_ttl_s=0)
        )
    )
    assert service.index is not None
    # as a server's: the builds are the test's own (_build), no one-pass builder of a search's catches up
    service.index.building = lambda: True  # type: ignore[method-assign]
    return service


def _rg(corpus: Path) -> dict[str, list[int]]:
    """rg's own answer: each file's matched lines (literal, case-insensitive as the search's smart case is)."""
    rg = find_rg()
    assert rg is not None
    done = subprocess.run(
        [rg, "--no-config", "--json", "-F", "-i", "-e", NEEDLE], cwd=corpus, capture_output=True, check=True
    )
    out: dict[str, list[int]] = {}
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event["type"] == "match":
            out.setdefault(event["data"]["path"]["text"].removeprefix("./"), []).append(event["data"]["line_number"])
    return out


async def _exact(service: SearchService) -> dict[str, Any]:
    """Every file and every matched line on one page."""
    ask = {"query": NEEDLE, "namespaces": ["repo"], "files": 200, "hit_budget": 5000, "hit_lines": None}
    answer = await service.search(parse_request({**ask, "char_budget": MAX_CHAR_BUDGET}))
    assert "next" not in answer and not answer["truncated"] and answer["file_count"] == len(answer["files"])
    return answer


def _lines(answer: dict[str, Any]) -> dict[str, list[int]]:
    return {group["file_path"]: sorted(matched_lines(group)) for group in answer["files"]}


def _kinds(answer: dict[str, Any], path: str) -> set[str]:
    return {h["kind"] for g in answer["files"] if g["file_path"] == path for h in g["hits"]}


async def _semantic(service: SearchService, timeout_ms: int = 5000) -> dict[str, Any]:
    return await service.search(
        parse_request({"query": QUESTION, "mode": "semantic", "threshold": 0, "timeout_ms": timeout_ms})
    )


def _status(answer: dict[str, Any]) -> str:
    (status,) = [ns["status"] for ns in answer["namespaces"] if ns["name"] == "repo"]
    return str(status)


def _rebuilt(logs: list[MutableMapping[str, Any]]) -> int:
    return sum(1 for e in logs if e["event"] == "index_rebuilt")


def _add_late(corpus: Path) -> dict[str, list[int]]:
    """The late file written; rg's answer from now on."""
    path, text = LATE
    (corpus / path).write_text(text)
    return _rg(corpus)


def _whole(corpus: Path, index: Path, indexed: int = INDEXED + 1) -> None:
    """(c), read from the database itself: checked whole, every file indexed, the intent index built."""
    store = Store.open(str(index))
    try:
        assert store.check() == []
        assert len(store.parsed_paths(str(corpus))) == indexed
        assert store.progress(str(corpus)).built
    finally:
        store.close()


async def _answers_whole(service: SearchService, rg: dict[str, list[int]], late: bool = True) -> None:
    """(a) and (c) through a service: rg's files and lines, grouped into declarations (the late file's too: the
    service reads the file the builder made); full answers by meaning (the late file's too)."""
    answer = await _exact(service)
    assert _lines(answer) == rg
    assert {"function", "class", "method"} <= _kinds(answer, "src/retry.py")
    assert "function" in _kinds(answer, "src/mod3.py")
    meant = await _semantic(service)
    assert _status(meant) == "ok"
    assert meant["files"][0]["hits"][0]["qualified_name"] == "retry_with_backoff"
    if late:
        assert _kinds(answer, LATE[0]) == {"function"}
        meant = await service.search(parse_request({"query": LATE_QUESTION, "mode": "semantic", "threshold": 0}))
        assert _status(meant) == "ok"
        assert meant["files"][0]["hits"][0]["qualified_name"] == "compress_archive_entries"


# --- damage ------------------------------------------------------------------------------------


def _truncate(size: Callable[[int], int]) -> Callable[[Path], None]:
    def hurt(path: Path) -> None:
        os.truncate(path, size(path.stat().st_size))

    return hurt


def _overwrite_page(seed: int) -> Callable[[Path], None]:
    """A page in the middle overwritten with random bytes (the file vacuumed first: every page is in use)."""

    def hurt(path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("VACUUM")
        assert db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # in the file, not in the WAL
        db.close()
        pages = path.stat().st_size // PAGE
        rng = random.Random(seed)
        page = rng.randrange(pages // 4, pages - 1)
        with open(path, "r+b") as handle:
            handle.seek(page * PAGE)
            handle.write(rng.randbytes(PAGE))

    return hurt


def _garble_header(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.write(random.Random(7).randbytes(100))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated-to-half": _truncate(lambda size: size // 2),
    "truncated-to-8kb": _truncate(lambda size: 2 * PAGE),
    "truncated-to-zero": _truncate(lambda size: 0),
    "page-overwritten-1": _overwrite_page(1),
    "page-overwritten-2": _overwrite_page(2),
    "header-garbled": _garble_header,
}


class TestDamage:
    @pytest.mark.parametrize("damage", list(DAMAGE))
    async def test_damage_at_rest(self, corpus: Path, tmp_path: Path, damage: str) -> None:
        """Damaged while no process has it open: a search still answers rg's lines (its semantic answer may be
        less, never a failure); the builder's check (or the search) finds it, once; a pass makes it whole.
        An empty file alone is a new database to SQLite: nothing is left to mislead, the pass parses it all."""
        index = tmp_path / "idx"
        assert _build(corpus, index) == INDEXED
        DAMAGE[damage](_path(index))
        rg = _add_late(corpus)
        service = _service(corpus, index)
        try:
            with capture_logs() as logs:
                assert _lines(await _exact(service)) == rg  # (a)
                assert _status(await _semantic(service, timeout_ms=100)) in {"ok", "capped", "error", "timeout"}
                parsed = _build(corpus, index)  # the background builder's open: the check, then a pass
            if damage == "truncated-to-zero":
                assert _rebuilt(logs) == 0  # (b): known to hold nothing
            else:
                assert _rebuilt(logs) == 1  # (b)
            assert parsed == INDEXED + 1  # every file parsed again: nothing of the damaged file was kept
            _whole(corpus, index)  # (c)
            await _answers_whole(service, rg)
        finally:
            await service.aclose()

    @pytest.mark.parametrize("damage", list(DAMAGE))
    async def test_damage_under_a_service_that_has_it_open(self, corpus: Path, tmp_path: Path, damage: str) -> None:
        """Damaged under a service that has searched it (its connections open, its -wal and -shm there): its next
        searches answer rg's lines; the damage is seen once, by it or by the builder's check; the file is
        replaced, and the service follows to the new one: after a pass its hits are declarations again."""
        index = tmp_path / "idx"
        _build(corpus, index)
        service = _service(corpus, index)
        try:
            await _answers_whole(service, _rg(corpus), late=False)  # its connections open, the vectors in memory
            checkpoint = Store.open(str(index))
            assert checkpoint.truncate_wal()  # the damage reaches the pages themselves, none left in the WAL
            checkpoint.close()
            DAMAGE[damage](_path(index))
            rg = _add_late(corpus)
            with capture_logs() as logs:
                for _ in range(2):
                    assert _lines(await _exact(service)) == rg  # (a)
                    assert _status(await _semantic(service)) in {"ok", "capped", "error"}
                assert _build(corpus, index) == INDEXED + 1
            assert _rebuilt(logs) == 1  # (b): an empty file too, beside the -wal it was written with
            _whole(corpus, index)  # (c)
            await _answers_whole(service, rg)
        finally:
            await service.aclose()

    async def test_an_outline_that_does_not_hold_together_costs_only_declarations(
        self, corpus: Path, tmp_path: Path
    ) -> None:
        """A file's outline whose bytes are not what was written (SQLite keeps no checksums: a page's content can
        change under an intact structure): a search neither loops nor fails on it, and lists rg's lines; the
        database is built again, and the file's declarations come back."""
        index = tmp_path / "idx"
        rg = _rg(corpus)
        _build(corpus, index)
        record = index_file(str(corpus), "src/retry.py")
        assert record is not None and record.declarations
        outline = Outline.of(record.declarations)
        outline.parents[0] = 1  # a cycle up the parents: a walk up them would never end
        outline.parents[1] = 0
        db = sqlite3.connect(_path(index))
        db.execute("UPDATE files SET declarations = ? WHERE path = 'src/retry.py'", (outline.encode(),))
        db.commit()
        db.close()
        service = _service(corpus, index)
        try:
            with capture_logs() as logs:
                answer = await _exact(service)
            assert _lines(answer) == rg and _kinds(answer, "src/retry.py") == {"file"}  # (a)
            assert _rebuilt(logs) == 1  # (b)
            rg = _add_late(corpus)
            _build(corpus, index)
            _whole(corpus, index)
            await _answers_whole(service, rg)  # (c)
        finally:
            await service.aclose()

    def test_an_outline_that_does_not_decode_is_damage(self) -> None:
        """Bytes that are not an outline: none, flagged damaged (a search then has the database rebuilt)."""
        for blob in (b"\x95\xc4\x03abc", b"not msgpack", Outline.of(()).encode()[:-1]):
            stored = Stored("a.py", 1, 1, blob)
            assert stored.outline is None and stored.damaged
        whole = Stored("a.py", 1, 1, Outline.of(()).encode())
        assert whole.outline is not None and not whole.damaged


# --- killed writers ------------------------------------------------------------------------------

#: A builder in a process of its own that SIGKILLs itself as its ``kill_at``-th SQL statement begins.
KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from gateway.index.builder import Builder
    from gateway.index.files import Source
    from gateway.index.store import Store

    directory, root, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store.open(directory, busy_s=10.0)
    ran = 0

    def trace(statement):
        global ran
        ran += 1
        if ran == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    store._db.set_trace_callback(trace)
    Builder(store, [Source("repo", root)]).refresh()
    """
)


def _run_killed(index: Path, corpus: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILLED, str(index), str(corpus), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(),
        cwd=ROOT,
    )


def _statements(corpus: Path, index: Path) -> Iterator[str]:
    """The statements of one whole pass, as the killed builder counts them (in this process)."""
    store = Store.open(str(index), busy_s=10.0)
    ran: list[str] = []
    store._db.set_trace_callback(ran.append)
    Builder(store, [Source("repo", str(corpus))]).refresh()
    store.close()
    return iter(ran)


def _rows_whole(corpus: Path, store: Store) -> int:
    """Every file indexed is whole: its outline, its declaration rows and its vectors are all of one parse of the
    file as it is (a transaction half-written would show here); how many files."""
    root = str(corpus)
    db = store._db
    for path in store.states(root):
        stored = store.lookup(root, [path])[path]
        fresh = index_file(root, path)
        assert fresh is not None and fresh.declarations is not None
        assert stored.outline == Outline.of(fresh.declarations), path
        (file_id, decls) = db.execute(
            "SELECT f.id, count(d.id) FROM files f LEFT JOIN declarations d ON d.file_id = f.id "
            "WHERE f.root = ? AND f.path = ? GROUP BY f.id",
            (root, path),
        ).fetchone()
        assert decls == len(fresh.declarations), path
        vectors = db.execute("SELECT count FROM intents WHERE file_id = ?", (file_id,)).fetchone()
        assert vectors is None or vectors[0] == decls, path
    return len(store.states(root))


class TestKilled:
    async def test_a_builder_killed_mid_write_leaves_no_damage(self, corpus: Path, tmp_path: Path) -> None:
        """A builder SIGKILLed as one of its statements begins (as its first batch of files commits, and at
        seeded points inside seeded transactions of a whole pass: of files, fields, vectors, vocabulary, prose):
        what it committed is whole, what it had not is absent, the check finds nothing, a search answers rg's
        lines, and the next pass (resuming it) makes the index whole."""
        statements = list(_statements(corpus, tmp_path / "counted"))
        begins = [i for i, s in enumerate(statements, 1) if s.startswith("BEGIN")]
        spans = [(b, next(i for i in range(b, len(statements) + 1) if statements[i - 1] == "COMMIT")) for b in begins]
        assert len(spans) >= 4  # listed, files, fields, vectors, ... (statement numbers of each BEGIN and COMMIT)
        files = next(s for s in spans if any(t.startswith("INSERT INTO files") for t in statements[s[0] : s[1]]))
        rng = random.Random(48)
        points = {files[1]}  # as the first batch of files commits
        for begin, commit in rng.sample(spans, 3):  # inside a transaction (FTS5's own statements too)
            points.add(rng.randrange(begin + 1, min(commit, len(statements) - 10) + 1))  # never past a shorter run
        rg = _rg(corpus)
        for kill_at in sorted(points):
            index = tmp_path / f"idx-{kill_at}"
            done = _run_killed(index, corpus, kill_at)
            assert done.returncode == -signal.SIGKILL, (kill_at, done.stderr[-2000:])
            with capture_logs() as logs:
                store = Store.open(str(index), busy_s=10.0, check=True)
            assert _rebuilt(logs) == 0 and store.check() == []  # (b): the WAL made the kill safe
            indexed = _rows_whole(corpus, store)
            assert indexed <= INDEXED
            store.close()
            service = _service(corpus, index)
            try:
                assert _lines(await _exact(service)) == rg  # (a)
                _build(corpus, index)
                _whole(corpus, index, INDEXED)  # (c)
                await _answers_whole(service, rg, late=False)
            finally:
                await service.aclose()


#: A writer in a process of its own: it commits a batch of files (left in the WAL), begins another and writes
#: it without committing, says so, and waits; told to, it commits, then reads the root's files again (where a
#: store looks whether its file was replaced) and writes them once more, and prints what it holds.
WRITER = textwrap.dedent(
    """
    import sys
    from gateway.index.files import index_file
    from gateway.index.store import Store

    directory, root, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    store = Store.open(directory, busy_s=10.0)
    store._db.execute("PRAGMA wal_autocheckpoint=0")
    records = [index_file(root, p) for p in paths]
    store.put(root, records[:2])
    store._db.execute("BEGIN IMMEDIATE")
    for record in records[2:]:
        store._db.execute(
            "INSERT INTO files (root, path, size, mtime_ns, language, parsed) VALUES (?, ?, 1, 1, 'python', 0)",
            (root, record.path),
        )
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        store._db.execute("COMMIT")
    except Exception as exc:
        print("commit failed", exc, flush=True)
    before = store.identity
    store.states(root)
    store.put(root, records)
    print("followed", store.identity != before, sorted(store.states(root)), flush=True)
    """
)


def _writer(index: Path, corpus: Path, paths: list[str]) -> subprocess.Popen[str]:
    """The writer started, once it says it is ready (a transaction committed in the WAL, another open)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(index), str(corpus), *paths],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        cwd=ROOT,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    return writer


def _delete_wal(index: Path) -> None:
    wal = Path(f"{_path(index)}-wal")
    assert wal.stat().st_size > 0
    wal.unlink()


class TestWalDeleted:
    async def test_the_wal_deleted_under_a_writer(self, corpus: Path, tmp_path: Path) -> None:
        """A writer with committed transactions in the WAL and another open, its -wal deleted: the next connection
        reads the WAL index of the shared memory against a WAL that is not its own (a short read). A search
        still answers rg's lines, and sees the damage: the file is replaced, once. The writer commits into the
        old file, harmlessly, and follows to the new one where it next reads a root; a pass makes it whole."""
        index = tmp_path / "idx"
        rg = _add_late(corpus)
        paths = ["src/retry.py", "src/mod0.py", "src/mod1.py", "src/mod2.py"]
        paths_held = sorted(paths)
        writer = _writer(index, corpus, paths)
        try:
            assert writer.stdout is not None and writer.stdin is not None
            _delete_wal(index)
            service = _service(corpus, index)
            try:
                with capture_logs() as logs:
                    assert _lines(await _exact(service)) == rg  # (a)
                    assert _status(await _semantic(service, timeout_ms=100)) in {"ok", "capped", "error", "timeout"}
                assert _rebuilt(logs) == 1  # (b)
                writer.stdin.write("commit\n")
                writer.stdin.close()
                said = [line.strip() for line in writer.stdout]  # its log lines, then what it holds
                assert writer.wait(30) == 0, said
                assert f"followed True {paths_held}" in said, said  # it writes the new file now
                with capture_logs() as logs:
                    _build(corpus, index)
                assert _rebuilt(logs) == 0
                _whole(corpus, index)  # (c)
                await _answers_whole(service, rg)
            finally:
                await service.aclose()
        finally:
            if writer.poll() is None:
                writer.kill()
            writer.wait()
            for pipe in (writer.stdin, writer.stdout, writer.stderr):
                if pipe is not None:
                    pipe.close()


# --- the rules that make replacing a shared file safe ----------------------------------------------


def _record(path: str) -> FileRecord:
    return FileRecord(path, 10, 1, "python", (Declaration("function", "f", "f", 1, 2),))


class TestReplacing:
    def test_a_store_follows_a_replaced_file(self, tmp_path: Path) -> None:
        """Two stores on a file another process replaces (found damaged): each opens the new file where it next
        reads its version or a root's files; the version keeps rising across the reopen; closing their
        connections to the old file (as they follow, and at the end) deletes nothing of the new one: its -wal,
        holding what was written to it, stays."""
        first, second = Store.open(str(tmp_path)), Store.open(str(tmp_path))
        first.put("ns", [_record("old.py")])
        before = second.data_version()
        assert first.truncate_wal()
        _garble_header(_path(tmp_path))
        with capture_logs() as logs:
            third = Store.open(str(tmp_path), check=True)
        assert _rebuilt(logs) == 1 and third.states("ns") == {}
        third.put("ns", [_record("new.py")])  # left in the new file's WAL
        assert second.data_version() > before and set(second.states("ns")) == {"new.py"}
        assert set(first.states("ns")) == {"new.py"} and first.identity == second.identity == third.identity
        first.close()
        second.close()
        assert Path(f"{_path(tmp_path)}-wal").exists() and set(third.states("ns")) == {"new.py"}
        third.close()
        assert set(Store.open(str(tmp_path)).states("ns")) == {"new.py"}

    def test_a_builder_that_met_damage_builds_a_new_file_at_its_next_pass(self, corpus: Path, tmp_path: Path) -> None:
        """A builder whose pass failed on damage discards its file (``store.discard``); its next pass begins by
        following the path to a new file, and builds it whole."""
        index = tmp_path / "idx"
        store = Store.open(str(index), busy_s=10.0, check=True)
        builder = Builder(store, [Source("repo", str(corpus))])
        assert builder.refresh().parsed == INDEXED
        with capture_logs() as logs:
            assert store.discard("database disk image is malformed")
            assert builder.refresh().parsed == INDEXED
        assert _rebuilt(logs) == 1 and store.check() == []
        store.close()
        _whole(corpus, index, INDEXED)

    def test_only_the_file_found_damaged_is_deleted(self, tmp_path: Path) -> None:
        """Two processes find the same damage: the first deletes the file and makes a new one; the second, whose
        store is still on the old file, deletes nothing (the path names another file now): logged once."""
        first, second = Store.open(str(tmp_path)), Store.open(str(tmp_path))
        with capture_logs() as logs:
            assert first.discard("database disk image is malformed")
            fresh = Store.open(str(tmp_path))
            fresh.put("ns", [_record("kept.py")])
            assert not second.discard("database disk image is malformed")
        assert _rebuilt(logs) == 1 and set(fresh.states("ns")) == {"kept.py"}
        fresh.close()

    def test_a_new_database_numbers_rows_apart_from_the_one_it_replaces(self, tmp_path: Path) -> None:
        """A reader keeps vectors and paths in memory by file and intent row ids: a new file's ids are never
        the old one's, so nothing held is matched with another file's rows."""
        store = Store.open(str(tmp_path))
        store.put("ns", [_record("a.py"), _record("b.py")])
        old = set(store.parsed_files())
        assert store.discard("damaged")
        fresh = Store.open(str(tmp_path))
        fresh.put("ns", [_record("a.py"), _record("b.py")])
        new = set(fresh.parsed_files())
        assert len(new) == 2 and min(new) > max(old)
        seq = dict(fresh._db.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
        assert seq["intents"] > max(old)
        fresh.close()

    def test_the_check_keeps_a_whole_database(self, tmp_path: Path) -> None:
        """A whole database opened with the check: kept as it is, nothing logged."""
        store = Store.open(str(tmp_path))
        store.put("ns", [_record("a.py")])
        store.close()
        with capture_logs() as logs:
            checked = Store.open(str(tmp_path), check=True)
        assert logs == [] and set(checked.states("ns")) == {"a.py"} and checked.check() == []
        checked.close()

    @pytest.mark.parametrize(
        "error",
        [
            sqlite3.OperationalError("database is locked"),
            sqlite3.OperationalError("disk I/O error"),
            sqlite3.ProgrammingError("Cannot operate on a closed database."),
            sqlite3.IntegrityError("UNIQUE constraint failed: files.root, files.path"),
        ],
        ids=["locked", "io", "closed", "constraint"],
    )
    def test_an_error_that_is_not_damage_deletes_nothing(self, tmp_path: Path, error: sqlite3.Error) -> None:
        """Busy, locked, closed, a constraint: a search loses its declarations, the database stays."""
        index = resolve.DeclarationIndex(str(tmp_path), [Source("ns", str(tmp_path))])
        index.store().put("ns", [_record("a.py")])
        with capture_logs() as logs:
            index._fault(error, index._store)
            index._fault(error)
        assert logs == [] and set(index.store().states("ns")) == {"a.py"}
        index.close()

    def test_damage_another_connection_met_is_checked_before_deleting(self, tmp_path: Path) -> None:
        """A fault from a connection that is not the index's (the intent search's): the file the path names is
        checked; whole, it stays (the damage was in a file already replaced); met again from a connection opened
        on it since, it is deleted. Damaged, it is deleted at once."""
        index = resolve.DeclarationIndex(str(tmp_path), [Source("ns", str(tmp_path))])
        index.store().put("ns", [_record("a.py")])
        malformed = sqlite3.DatabaseError("database disk image is malformed")
        with capture_logs() as logs:
            index._fault(malformed)
        assert logs == [] and set(index.store().states("ns")) == {"a.py"}
        with capture_logs() as logs:
            index._fault(malformed)
        assert _rebuilt(logs) == 1 and index.store().states("ns") == {}
        index.store().put("ns", [_record("b.py")])
        assert index.store().truncate_wal()
        _overwrite_page(3)(_path(tmp_path))
        with capture_logs() as logs:
            index._fault(malformed)
        assert _rebuilt(logs) == 1 and index.store().states("ns") == {}
        index.close()

    def test_an_empty_file_beside_its_wal_is_replaced_not_joined(self, tmp_path: Path) -> None:
        """A file truncated to nothing under open connections (its -wal and -shm beside it): SQLite would take it
        for a new database, delete the -wal by name and join the -shm the others still use; it is replaced."""
        first = Store.open(str(tmp_path))
        first.put("ns", [_record("a.py")])
        os.truncate(_path(tmp_path), 0)
        with capture_logs() as logs:
            second = Store.open(str(tmp_path))
        assert _rebuilt(logs) == 1 and second.identity != first.identity and second.states("ns") == {}
        second.put("ns", [_record("b.py")])
        assert set(first.states("ns")) == {"b.py"}  # it follows to the new file
        first.close()
        second.close()

    def test_no_file_is_deleted_while_a_process_opens_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A process connecting (the guard held shared) delays any deletion; one that cannot wait deletes nothing.
        Versions never repeat across the stores of a process."""
        monkeypatch.setattr(store_module, "GUARD_WAIT_S", 0.05)
        store = Store.open(str(tmp_path))
        other = Store.open(str(tmp_path))
        assert other.data_version() != store.data_version()
        guard = os.open(tmp_path / GUARD, os.O_RDWR)
        fcntl.flock(guard, fcntl.LOCK_SH)  # as a process in its connect
        try:
            with capture_logs() as logs:
                assert not store.discard("database disk image is malformed")
            assert logs == [] and _path(tmp_path).exists()
        finally:
            os.close(guard)
        assert other.discard("database disk image is malformed") and not _path(tmp_path).exists()
