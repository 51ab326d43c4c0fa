"""The content index is never believed when it cannot be trusted (issue 48).

Each kind of damage to a checkout's index folder (a segment file of the engine cut short, a
byte of it changed, or gone; meta.json cut, garbage, or changed and still JSON; the manifest
and the state cut or changed; an older engine put back), and a builder killed after each of
its writes: meanwhile every search answers exactly what rg answers on the checkout (the real
rg, real files, real tantivy), the index names a reason to scan instead of narrowing, and
the next builder pass repairs it, after which the index narrows again, still exactly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.index.content import build as build_module
from gateway.index.content import engine, fresh, layout, verify
from gateway.index.content.layout import MANIFEST, STATE, read_manifest, read_state, root_dir
from gateway.index.content.narrow import ContentIndex
from gateway.index.content.verify import RECORD, Verifier, check_file, read_meta, untrusted
from gateway.index.files import find_rg
from gateway.models import SearchQuery
from gateway.narrowing import Narrowed
from tests.content_support import age, answers, build
from tests.helpers import git_repo

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

REPO = Path(__file__).resolve().parents[1]
#: The text the second pass wrote into a.py: only an engine as new as the manifest names it.
NEW_TEXT = "def rebuilt_after_damage(manifest):\n    return manifest\n"
#: Queries every damaged index must answer as rg does (text, regex, case-sensitive).
QUERIES = [
    ("rebuilt_after_damage", False, True),
    ("class \\w+Builder", True, True),
    ("MANIFEST", False, False),
    ("needle", False, True),
]
#: The query whose answer is narrowed when the index is sound.
SELECTIVE = "rebuilt_after_damage"


@pytest.fixture(autouse=True)
def no_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by a test are clean once indexed."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)


def query(text: str, *, regex: bool = False, case: bool = True) -> SearchQuery:
    return SearchQuery(
        text=text, mode="regex" if regex else "exact", case_sensitive=case, deadline=time.monotonic() + 30
    )


async def same_as_rg(root: Path, *indexes: ContentIndex, queries: list[tuple[str, bool, bool]] = QUERIES) -> None:
    """Each index answers each query exactly as rg does over the whole checkout."""
    for text, regex, case in queries:
        q = query(text, regex=regex, case=case)
        expected = await answers(root, None, q)
        for index in indexes:
            assert await answers(root, index, q) == expected, text


class Checkout:
    """A checkout and its content index, built twice (the second pass changed a.py: the engine has a delete
    file), with a copy of the engine as the first pass left it."""

    def __init__(self, base: Path) -> None:
        sources = sorted((REPO / "gateway/index/content").glob("*.py"))
        files: dict[str, str | bytes] = {f"src/{p.name}": p.read_text(encoding="utf-8") for p in sources}
        files.update(
            {
                "a.py": "def first_version(app):\n    return app\n",
                "b.py": "class QueueBuilder:\n    needle = 1\n",
                "notes/c.txt": "the needle is here\n",
                "notes/bin.dat": b"needle\0binary",
            }
        )
        self.root = git_repo(base / "repo", files)
        self.idx = base / "idx"
        self.folder = Path(root_dir(str(self.idx), str(self.root)))
        self.engine = self.folder / "engine"
        age(self.root)
        build(self.idx, self.root)
        self.old_engine = base / "old-engine"
        shutil.copytree(self.engine, self.old_engine)
        (self.root / "a.py").write_text(NEW_TEXT)
        then = time.time() - 10
        os.utime(self.root / "a.py", (then, then))
        stats = build(self.idx, self.root)
        assert stats.read == 1
        assert self.segment_file(".del").exists()

    def index(self, follow: bool = False) -> ContentIndex:
        return ContentIndex(str(self.idx), [str(self.root)], follow=follow)

    def narrow(self, index: ContentIndex | None = None) -> Narrowed | str:
        return (index or self.index()).narrow(str(self.root), query(SELECTIVE), None)

    def segment_file(self, suffix: str) -> Path:
        """The largest file of the engine's meta.json ending with ``suffix``."""
        names = [n for n in read_meta(str(self.engine)).files if n.endswith(suffix)]
        return max((self.engine / n for n in names), key=lambda p: p.stat().st_size)


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path)


# --- damage ----------------------------------------------------------------------------------


def damaged(path: Path, data: bytes) -> None:
    """``path`` now holds ``data``: a new file put in its place. Never truncated where it lies: a reader of this
    process has the engine's files mapped, and a page of a mapped file cut off under it is a SIGBUS (tantivy's
    threads read them); the builder never rewrites a file in place either."""
    spare = path.with_name(path.name + ".damage")
    spare.write_bytes(data)
    os.replace(spare, path)


def cut(path: Path) -> None:
    data = path.read_bytes()
    damaged(path, data[: len(data) // 2])


def flip(path: Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x5A
    damaged(path, bytes(data))


def flip_body(path: Path) -> None:
    """A byte in the middle of what a segment file's crc covers (before its footer)."""
    data = path.read_bytes()
    length = struct.unpack("<I", data[-8:-4])[0]
    flip(path, (len(data) - 8 - length) // 2)


def edit_meta(c: Checkout, how: Callable[[dict[str, Any]], None], *, record: bool = True) -> None:
    """meta.json changed and still valid JSON (``record``: the builder's record of what it verified kept)."""
    meta_path = c.engine / "meta.json"
    meta = json.loads(meta_path.read_text())
    how(meta)
    meta_path.write_text(json.dumps(meta, indent=2))
    if not record:
        (c.folder / RECORD).unlink()


def fewer_docs(meta: dict[str, Any]) -> None:
    """One document fewer in the segment without deletes (tantivy counts one with deletes from its delete file,
    and would disagree with meta.json itself): only the manifest can tell."""
    segment = next(s for s in meta["segments"] if s["deletes"] is None)
    segment["max_doc"] -= 1


def other_setting(meta: dict[str, Any]) -> None:
    meta["index_settings"]["docstore_blocksize"] += 1


def older_engine(c: Checkout) -> None:
    shutil.rmtree(c.engine)
    shutil.copytree(c.old_engine, c.engine)


def state_files_plus_one(c: Checkout) -> None:
    """state.json still valid JSON, one digit of it changed."""
    path = c.folder / STATE
    path.write_bytes(re.sub(rb'"files":(\d+)', lambda m: b'"files":%d' % (int(m[1]) + 1), path.read_bytes()))


#: name -> (the damage, the reason a search scans, whether the next pass rebuilds the engine from nothing)
DAMAGE: dict[str, tuple[Callable[[Checkout], None], str, bool]] = {
    "term cut short": (lambda c: cut(c.segment_file(".term")), "unreadable", True),
    "idx byte changed": (lambda c: flip_body(c.segment_file(".idx")), "unreadable", True),
    "term byte changed": (lambda c: flip_body(c.segment_file(".term")), "unreadable", True),
    "del byte changed": (lambda c: flip_body(c.segment_file(".del")), "unreadable", True),
    "pos gone": (lambda c: c.segment_file(".pos").unlink(), "unreadable", True),
    "meta cut short": (lambda c: cut(c.engine / "meta.json"), "unreadable", True),
    "meta garbage": (lambda c: (c.engine / "meta.json").write_bytes(b"garbage"), "unreadable", True),
    "meta byte changed": (lambda c: flip(c.engine / "meta.json", 0), "unreadable", True),
    # not what the builder verified: its record holds meta.json's blake2b
    "meta max_doc changed": (lambda c: edit_meta(c, fewer_docs), "unreadable", True),
    "meta setting changed": (lambda c: edit_meta(c, other_setting), "unreadable", True),  # harmless, still
    # without the record, the manifest tells: the engine holds another number of files
    "meta max_doc changed, no record": (lambda c: edit_meta(c, fewer_docs, record=False), "stale", True),
    "older engine put back": (older_engine, "stale", True),
    "manifest cut short": (lambda c: cut(c.folder / MANIFEST), "building", True),
    "manifest byte changed": (lambda c: flip(c.folder / MANIFEST), "building", True),
    "state cut short": (lambda c: cut(c.folder / STATE), "building", False),
    "state still JSON": (state_files_plus_one, "building", False),
}


class TestDamage:
    @pytest.mark.parametrize("name", list(DAMAGE))
    async def test_scanned_around_then_repaired(self, checkout: Checkout, name: str) -> None:
        """While damaged, every search answers what rg answers and the index scans (never narrows), whether
        the reader had the engine open before or not; the next pass repairs it, and the index narrows again."""
        damage, reason, rebuilt = DAMAGE[name]
        serving = checkout.index()
        assert isinstance(checkout.narrow(serving), Narrowed)  # sound, and its engine open now
        damage(checkout)
        assert checkout.narrow(serving) == reason
        assert checkout.narrow() == reason  # a process that never read it (the one-shot CLI)
        await same_as_rg(checkout.root, serving, checkout.index())
        if reason == "unreadable":
            assert serving.describe(str(checkout.root))["state"] == "stale"
        assert bool(untrusted(str(checkout.folder))) is not name.startswith("state")  # the state is not the index

        stats = build(checkout.idx, checkout.root)
        assert (stats.read == stats.listed) is rebuilt  # rebuilt from nothing, or only the state written again
        assert untrusted(str(checkout.folder)) == ""
        assert isinstance(checkout.narrow(serving), Narrowed)
        assert isinstance(checkout.narrow(), Narrowed)
        await same_as_rg(checkout.root, serving, checkout.index())

    @pytest.mark.parametrize("name", list(DAMAGE))
    def test_a_server_looks_again_when_its_watcher_says(
        self, checkout: Checkout, name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A server's index looks at its index files (a ``stat`` each) only after its watcher reported a change
        there: once it found them whole it trusts them, and every damage above is reported, so the next search
        scans for the same reason as a process that looks every time."""
        damage, reason, _ = DAMAGE[name]
        serving = checkout.index(follow=True)
        try:
            deadline = time.monotonic() + 30
            while not isinstance(checkout.narrow(serving), Narrowed):  # its first check runs in a thread
                assert time.monotonic() < deadline
                time.sleep(0.02)
            view = serving.views[str(checkout.root)]
            assert view.quiet
            with monkeypatch.context() as patched:
                patched.setattr(Verifier, "unchanged", lambda self: pytest.fail("looked at a quiet engine"))
                assert isinstance(checkout.narrow(serving), Narrowed) and view.quiet
            damage(checkout)
            assert checkout.narrow(serving) == reason
            assert not view.quiet
        finally:
            serving.close()

    def test_a_closed_server_index_looks_again(self, checkout: Checkout) -> None:
        """Once its watcher is closed nobody tells of a change: a search after that looks at every file."""
        serving = checkout.index(follow=True)
        deadline = time.monotonic() + 30
        while not isinstance(checkout.narrow(serving), Narrowed):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        view = serving.views[str(checkout.root)]
        assert view.quiet
        serving.close()
        assert not view.quiet

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    async def test_drawn_queries_with_a_changed_term_dictionary(
        self, drawn: list[tuple[Path, ContentIndex]], data: st.DataObject
    ) -> None:
        """A literal or regex cut from a real line answers as rg does with a changed byte in the term
        dictionary, and once the next pass repaired it."""
        (damaged, scanning), (repaired, narrowing) = drawn
        assert scanning.narrow(str(damaged), query(SELECTIVE), None) == "unreadable"
        assert isinstance(narrowing.narrow(str(repaired), query(SELECTIVE), None), Narrowed)
        path = data.draw(st.sampled_from(sorted((damaged / "src").glob("*.py"))))
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) >= 4]
        line = data.draw(st.sampled_from(lines))
        start = data.draw(st.integers(0, len(line) - 3))
        piece = line[start : start + data.draw(st.integers(3, 20))]
        regex = data.draw(st.booleans())
        text = re2.escape(piece) + data.draw(st.sampled_from(["", r"\w*", " ?"])) if regex else piece
        q = query(text, regex=regex, case=data.draw(st.booleans()))
        for root, index in drawn:
            assert await answers(root, index, q) == await answers(root, None, q)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[Path, ContentIndex]]]:
    """A checkout whose .term file has a changed byte, and one the next pass repaired, with their indexes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fresh, "RACY_NS", 0)
        damaged = Checkout(tmp_path_factory.mktemp("damaged"))
        flip_body(damaged.segment_file(".term"))
        repaired = Checkout(tmp_path_factory.mktemp("repaired"))
        flip_body(repaired.segment_file(".term"))
        build(repaired.idx, repaired.root)
    indexes = [(damaged.root, damaged.index()), (repaired.root, repaired.index())]
    yield indexes
    for _, index in indexes:
        index.close()


# --- a builder killed after each of its writes ------------------------------------------------


class Killed(BaseException):
    """A builder killed just before one of its writes (as by SIGKILL: nothing of it runs, nor anything after)."""


#: The queries asked while a killed builder's index is as it left it.
KILL_QUERIES = [("killed_pass_text", False, True), ("needle", False, True), ("class \\w+Builder", True, True)]


def kill_before(patch: pytest.MonkeyPatch, step: int) -> list[str]:
    """Make the builder die before its write number ``step`` (0: its first): every file it replaces (through
    ``write_atomic``) and every engine commit. Returns the names of the writes done, as they are done."""
    done: list[str] = []

    def durable(name: Callable[..., str], real: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any) -> Any:
            if len(done) == step:
                raise Killed
            done.append(name(*args))
            return real(*args)

        return write

    atomic = durable(lambda path, data: os.path.basename(path), layout.write_atomic)
    for module in (build_module, layout, verify):
        patch.setattr(module, "write_atomic", atomic)
    patch.setattr(engine.Writer, "commit", durable(lambda writer: "commit", engine.Writer.commit))
    return done


def killed_pass(c: Checkout, step: int, patch: pytest.MonkeyPatch) -> list[str] | None:
    """One pass killed before its write ``step``: the writes it did (None: it finished)."""
    done = kill_before(patch, step)
    try:
        build(c.idx, c.root)
    except Killed:
        return done
    return None


class TestKilled:
    async def test_an_update_killed_after_any_write(self, checkout: Checkout, tmp_path: Path) -> None:
        """A pass that changes, adds and removes files, killed after each of its writes in turn: searches answer
        as rg does meanwhile (scanning while the engine is past its manifest), and the next pass resumes (it
        reads again only what the killed one touched) and narrows again."""
        c = checkout
        then = time.time() - 10
        (c.root / "a.py").write_text("def killed_pass_text():\n    pass\n")
        (c.root / "notes" / "new.txt").write_text("a needle in a new file\n")
        (c.root / "b.py").unlink()
        for path in (c.root / "a.py", c.root / "notes" / "new.txt", c.root / "notes"):
            os.utime(path, (then, then))
        before = tmp_path / "before"
        shutil.copytree(c.folder, before)
        step = 0
        while True:
            shutil.rmtree(c.folder)
            shutil.copytree(before, c.folder)
            with pytest.MonkeyPatch.context() as patch:
                done = killed_pass(c, step, patch)
            if done is not None and done[-1:] in (["commit"], ["verified.msgpack"]):
                assert c.narrow() == "stale"  # the engine is past its manifest
            await same_as_rg(c.root, c.index(), queries=KILL_QUERIES)
            stats = build(c.idx, c.root)
            assert stats.read <= 2 < stats.listed  # a.py and new.txt at most: resumed, never rebuilt
            assert isinstance(c.narrow(), Narrowed)
            await same_as_rg(c.root, c.index(), queries=KILL_QUERIES)
            if done is None:
                break
            step += 1
            whole = done
        # the last pass killed did all but its last write, ``usable``: every write above was a place to die
        assert whole == ["pending.msgpack", "commit", "verified.msgpack", "manifest.msgpack", "state.json"]

    async def test_a_first_build_killed_after_any_write(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A first build committing every batch, killed after each of its writes in turn: never narrowed
        meanwhile; the next pass resumes from the last manifest written (else rebuilds) and narrows exactly."""
        monkeypatch.setattr(build_module, "BATCH_FILES", 6)
        monkeypatch.setattr(build_module, "COMMIT_BYTES", 1)
        c = Checkout(tmp_path)
        step = 0
        while True:
            shutil.rmtree(c.idx)
            with pytest.MonkeyPatch.context() as patch:
                done = killed_pass(c, step, patch)
            if done is None:
                break
            if "state.json" in done:  # killed as it wrote ``usable``: complete, and searched as such
                await same_as_rg(c.root, c.index(), queries=KILL_QUERIES[1:])
            else:
                assert c.narrow() == "building"
            stats = build(c.idx, c.root)
            assert (stats.read < stats.listed) is ("manifest.msgpack" in done)  # resumed, or begun again
            assert isinstance(c.narrow(), Narrowed)
            await same_as_rg(c.root, c.index(), queries=KILL_QUERIES[1:])
            step += 1
        assert step > 8  # three commits, each with its pending list and manifest, and the end


# --- the pieces: the engine's files, the manifest and the state, the pruner ------------------------


class TestVerify:
    def test_says_why_a_file_is_damaged(self, checkout: Checkout) -> None:
        """A whole file passes; cut short, a byte of its body or its footer changed, or gone, it says why."""
        for suffix in verify.COMPONENTS:
            assert check_file(str(checkout.segment_file(suffix))) == ""
        term, idx, fast, pos = (checkout.segment_file(s) for s in (".term", ".idx", ".fast", ".pos"))
        cut(term)
        flip_body(idx)
        flip(fast, -12)  # in its footer's JSON
        pos.unlink()
        assert check_file(str(term)).startswith("cut short")
        assert check_file(str(idx)).startswith("changed")
        assert check_file(str(fast)) in ("damaged footer", "changed (its crc does not match)")
        assert check_file(str(pos)) == "missing"
        with pytest.raises(verify.EngineDamaged, match=r"\.(term|idx|fast|pos): (cut short|changed|damaged|missing)"):
            Verifier(str(checkout.folder)).verify()

    def test_each_file_is_read_once(self, checkout: Checkout) -> None:
        """A verifier reads each file once; a new one trusts the builder's record and reads none; a file written
        since (its ctime changed, even with its mtime put back) is read again."""
        files = read_meta(str(checkout.engine)).files
        record = checkout.folder / RECORD
        saved = record.read_bytes()
        record.unlink()
        alone = Verifier(str(checkout.folder))
        alone.verify()
        alone.verify()
        assert alone.reads == len(files) and alone.unchanged()
        record.write_bytes(saved)
        recorded = Verifier(str(checkout.folder))
        recorded.verify()
        assert recorded.reads == 0
        touched = checkout.segment_file(".idx")
        mtime = touched.stat().st_mtime_ns
        os.utime(touched, ns=(mtime, mtime))
        assert not recorded.unchanged()
        again = Verifier(str(checkout.folder))
        again.verify()
        assert again.reads == 1

    def test_a_damaged_file_is_read_once(self, checkout: Checkout) -> None:
        """A file found damaged is not read again at each search while it stays as it is."""
        flip_body(checkout.segment_file(".term"))
        verifier = Verifier(str(checkout.folder))
        for _ in range(3):
            with pytest.raises(verify.EngineDamaged, match=r"\.term: changed"):
                verifier.verify()
        assert verifier.reads == 1

    def test_the_record_is_kept_by_the_builder(self, checkout: Checkout) -> None:
        """After a pass, the record holds every file meta.json names (a one-shot CLI reads none of them)."""
        record = Verifier(str(checkout.folder))
        record.verify()
        assert record.reads == 0 and set(record.known) == set(read_meta(str(checkout.engine)).files)


class TestLayout:
    def test_any_byte_changed_reads_as_absent(self, checkout: Checkout) -> None:
        """The manifest and the state read back whole; with any one byte changed, or cut anywhere, as None."""
        folder = str(checkout.folder)
        manifest, state = read_manifest(folder), read_state(folder)
        assert manifest is not None and state is not None and state.complete
        for name, read in ((MANIFEST, read_manifest), (STATE, read_state)):
            path = checkout.folder / name
            data = path.read_bytes()
            step = max(1, len(data) // 64)
            for at in range(0, len(data), step):
                path.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])
                assert read(folder) is None, (name, at)
                path.write_bytes(data[:at])
                assert read(folder) is None, (name, at)
            path.write_bytes(data)
        assert read_manifest(folder) == manifest and read_state(folder) == state

    def test_state_stays_readable_json(self, checkout: Checkout) -> None:
        state = json.loads((checkout.folder / STATE).read_bytes())
        assert state["complete"] is True and len(state["check"]) == 2 * layout.CHECK_BYTES


class TestPrune:
    def test_a_damaged_root_file_is_not_believed(self, checkout: Checkout) -> None:
        """The pruner leaves out a folder whose ``root`` file does not hash to its name; the next pass writes it
        again."""
        from gateway.index.prune import _content_roots

        assert _content_roots(str(checkout.idx)) == {str(checkout.root): str(checkout.folder)}
        marker = checkout.folder / "root"
        flip(marker)
        assert _content_roots(str(checkout.idx)) == {}
        cut(marker)
        assert _content_roots(str(checkout.idx)) == {}
        build(checkout.idx, checkout.root)
        assert _content_roots(str(checkout.idx)) == {str(checkout.root): str(checkout.folder)}
