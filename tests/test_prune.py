"""Pruning the index folder: by age, vanished folders, the bound by last use; roots another process uses kept."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.config import CacheConfig, IndexConfig, config_from_env
from gateway.index import roots
from gateway.index.background import BuilderProcess
from gateway.index.builder import Builder
from gateway.index.content.build import SIZE_GUESS, ContentBuilder
from gateway.index.content.layout import read_state
from gateway.index.content.paths import root_dir
from gateway.index.files import Source
from gateway.index.prune import DAY_S, Pruner, RootInfo, folder_bytes, plan, survey
from gateway.index.store import Store
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.content_support import build

KEEP = 14 * DAY_S


def _checkout(path: Path, files: int = 40, functions: int = 30) -> Path:
    """A git checkout of ``files`` Python modules, ``functions`` declarations each (one names ``needle``)."""
    for i in range(files):
        body = "".join(f"def f{i}_{k}(x):\n    return x + {k}\n\n\n" for k in range(functions))
        (path / "pkg").mkdir(parents=True, exist_ok=True)
        (path / "pkg" / f"m{i}.py").write_text(f"def needle_{i}():\n    return {i}\n\n\n" + body)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _index(folder: Path, *checkouts: Path, content: bool = True) -> None:
    """Index checkouts as a builder does (declarations, and content), their markers written."""
    store = Store.open(str(folder))
    Builder(store, [Source(c.name, str(c)) for c in checkouts]).refresh()
    store.close()
    for checkout in checkouts:
        if content:
            build(folder, checkout)
        roots.register(str(folder), {str(checkout): [checkout.name]})


def _age(folder: Path, checkout: Path, days: float) -> None:
    then = time.time() - days * DAY_S
    os.utime(roots.marker_path(str(folder), str(checkout)), (then, then))


def _rows(folder: Path, checkout: Path) -> int:
    store = Store.open(str(folder))
    try:
        return len(store.states(str(checkout)))
    finally:
        store.close()


def _pruner(folder: Path, mine: list[Path], *, days_later: float = 0.0, max_bytes: int = 1 << 40) -> Pruner:
    store = Store.open(str(folder), busy_s=10.0)
    return Pruner(
        str(folder),
        store,
        {str(c): [c.name] for c in mine},
        keep_days=14,
        max_bytes=max_bytes,
        clock=lambda: time.time() + days_later * DAY_S,
    )


class TestPrune:
    def test_a_root_unused_past_keep_days_is_pruned_and_the_file_shrinks(self, tmp_path: Path) -> None:
        """Twenty days on (a clock we set), a root no one used is gone (rows, content index, marker) and
        the database file is smaller; the root in use stays whole."""
        folder = tmp_path / "idx"
        used, old = _checkout(tmp_path / "used"), _checkout(tmp_path / "old", files=80)
        _index(folder, used, old)
        pruner = _pruner(folder, [used], days_later=20)
        before = pruner.store.size_bytes()
        kept_rows = _rows(folder, used)
        done = pruner.run()
        assert [d.root for d in done.dropped] == [str(old)] and "unused for 20" in done.dropped[0].reason
        assert pruner.store.size_bytes() < before * 0.7
        assert _rows(folder, old) == 0 and _rows(folder, used) == kept_rows > 0
        assert not os.path.exists(root_dir(str(folder), str(old))) and os.path.isdir(root_dir(str(folder), str(used)))
        assert str(old) not in roots.markers(str(folder)) and str(used) in roots.markers(str(folder))
        pruner.store.close()

    def test_a_root_used_within_keep_days_is_kept(self, tmp_path: Path) -> None:
        """Thirteen days unused is not fourteen: nothing goes."""
        folder = tmp_path / "idx"
        a, b = _checkout(tmp_path / "a", files=2), _checkout(tmp_path / "b", files=2)
        _index(folder, a, b, content=False)
        _age(folder, b, 13)
        pruner = _pruner(folder, [a])
        assert pruner.run().dropped == [] and _rows(folder, b) == 2
        pruner.store.close()

    def test_a_vanished_folder_is_pruned(self, tmp_path: Path) -> None:
        """A root whose folder no longer exists goes at once, used yesterday or not."""
        folder = tmp_path / "idx"
        kept, gone = _checkout(tmp_path / "kept", files=2), _checkout(tmp_path / "gone", files=2)
        _index(folder, kept, gone)
        shutil.rmtree(gone)
        pruner = _pruner(folder, [kept])
        (drop,) = pruner.run().dropped
        assert drop.root == str(gone) and "no longer exists" in drop.reason
        assert _rows(folder, gone) == 0 and not os.path.exists(root_dir(str(folder), str(gone)))
        pruner.store.close()

    def test_another_versions_files_go_once_nothing_wrote_them_for_keep_days(self, tmp_path: Path) -> None:
        """Another parser's database and another content format's folder, untouched for 30 days, are
        removed; another version's written yesterday, and this version's own, stay."""
        folder = tmp_path / "idx"
        _index(folder, _checkout(tmp_path / "a", files=2))
        old_db, old_content = folder / "declarations-6-0123.sqlite3", folder / "content-3-tantivy-0.22.0"
        recent_db = folder / "declarations-8-4567.sqlite3"
        for path in (old_db, recent_db, old_content / "abc" / "state.json"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * 1000)
        for path, days in ((old_db, 30), (old_content / "abc" / "state.json", 30), (recent_db, 1)):
            then = time.time() - days * DAY_S
            os.utime(path, (then, then))
        pruner = _pruner(folder, [])
        done = pruner.run()
        assert sorted(done.versions) == sorted([str(old_db), str(old_content)])
        assert recent_db.exists() and not old_db.exists() and not old_content.exists()
        assert pruner.store.path is not None and os.path.exists(pruner.store.path)
        assert len(list(folder.glob("content-*"))) == 1  # this version's
        pruner.store.close()

    def test_the_bound_evicts_the_least_recently_used_first(self, tmp_path: Path) -> None:
        """Over max_bytes, the root used longest ago goes first, then the next; the one used last stays."""
        folder = tmp_path / "idx"
        oldest, older, recent = (_checkout(tmp_path / n, files=20) for n in ("oldest", "older", "recent"))
        _index(folder, oldest, older, recent)
        for checkout, days in ((oldest, 5), (older, 3), (recent, 1)):
            _age(folder, checkout, days)
        pruner = _pruner(folder, [])
        size = {i.root: i.bytes for i in survey(str(folder), pruner.store)[0]}
        pruner.max_bytes = folder_bytes(str(folder)) - size[str(oldest)] + size[str(older)] // 2
        assert [d.root for d in pruner.run().dropped] == [str(oldest)]
        pruner.max_bytes = folder_bytes(str(folder)) - size[str(older)] // 2
        (drop,) = pruner.run().dropped
        assert drop.root == str(older) and "max_bytes" in drop.reason
        assert _rows(folder, recent) == 20
        pruner.store.close()

    def test_a_checkout_of_this_config_gets_room_from_the_least_recently_used(self, tmp_path: Path) -> None:
        """A pass whose new checkout would take the folder past max_bytes drops the unused root first, then
        indexes it (rather than leave it scanned)."""
        folder = tmp_path / "idx"
        old, new = _checkout(tmp_path / "old", files=30), _checkout(tmp_path / "new", files=30)
        _index(folder, old)
        _age(folder, old, 2)  # used within keep_days: only the bound can drop it
        store = Store.open(str(folder), busy_s=10.0)
        content = ContentBuilder(str(folder), max_bytes=0)
        builder = Builder(store, [Source("new", str(new))], content=content)
        growth = int(sum(p.stat().st_size for p in new.rglob("*.py")) * SIZE_GUESS)
        content.max_bytes = folder_bytes(str(folder)) + growth // 2  # fits now; not once new is indexed
        builder.pruner = Pruner(str(folder), store, {str(new): ["new"]}, keep_days=14, max_bytes=content.max_bytes)
        content.make_room = builder.pruner.make_room
        builder.refresh()
        state = read_state(root_dir(str(folder), str(new)))
        assert state is not None and state.complete and not state.reason
        assert _rows(folder, old) == 0 and not os.path.exists(root_dir(str(folder), str(old)))
        store.close()

    def test_a_root_another_builder_process_serves_is_kept(self, tmp_path: Path) -> None:
        """Another process's builder (another config) holds its roots: a prune from here, with every root
        past keep_days, keeps them, drops the unheld one, and drops them once that process has ended."""
        folder = tmp_path / "idx"
        theirs, nobodys = _checkout(tmp_path / "theirs", files=3), _checkout(tmp_path / "nobodys", files=3)
        _index(folder, theirs, nobodys, content=False)
        other = BuilderProcess(str(folder), [Source("theirs", str(theirs))], refresh_s=3600)
        other.start()
        try:
            deadline = time.monotonic() + 30
            while str(theirs) not in roots.in_use(str(folder)) and time.monotonic() < deadline:
                time.sleep(0.05)
            pruner = _pruner(folder, [], days_later=20)
            assert [d.root for d in pruner.run().dropped] == [str(nobodys)]
            assert _rows(folder, theirs) == 3
        finally:
            other.stop()
        assert [d.root for d in pruner.run().dropped] == [str(theirs)]
        assert not os.listdir(os.path.join(roots.roots_dir(str(folder)), "live"))  # its claim went with it
        pruner.store.close()

    def test_the_background_builder_prunes_at_its_first_pass(self, tmp_path: Path) -> None:
        """A server's builder process (its own config: one root) drops a root unused for 30 days, and keeps
        its own."""
        folder = tmp_path / "idx"
        mine, old = _checkout(tmp_path / "mine", files=3), _checkout(tmp_path / "old", files=3)
        _index(folder, mine, old)
        _age(folder, old, 30)
        builder = BuilderProcess(str(folder), [Source("mine", str(mine))], refresh_s=3600, content=True)
        builder.start()
        try:
            deadline = time.monotonic() + 60
            while _rows(folder, old) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            builder.stop()
        assert _rows(folder, old) == 0 and not os.path.exists(root_dir(str(folder), str(old)))
        assert _rows(folder, mine) == 3 and str(mine) in roots.markers(str(folder))

    def test_a_search_during_pruning_answers_as_before(self, tmp_path: Path) -> None:
        """Searches of a kept root, run while other roots are dropped and the database vacuumed, answer
        exactly what they answered before the prune (declaration hits included)."""
        folder = tmp_path / "idx"
        src = tmp_path / "src"
        kept = _checkout(src / "kept", files=10)
        dropped = [_checkout(tmp_path / f"old{i}", files=60) for i in range(3)]
        _index(folder, kept, *dropped)
        config = config_from_env(root=str(src), env={})
        index = IndexConfig(dir=str(folder), content=True)
        service = SearchService(dataclasses.replace(config, index=index, cache=CacheConfig(answer_ttl_s=0)))
        request = parse_request({"query": "needle_3", "namespaces": ["kept"]})
        loop = asyncio.new_event_loop()
        try:
            before = loop.run_until_complete(service.search(request))
            assert before["files"] and before["files"][0]["hits"][0]["kind"] == "function"
            answers: list[dict[str, Any]] = []
            pruner = _pruner(folder, [kept], days_later=20)

            def between() -> bool:  # asked before each root is dropped: a search now
                answers.append(loop.run_until_complete(service.search(request)))
                return False

            done = threading.Event()

            def searching() -> None:  # another service, as another process would search meanwhile
                other = asyncio.new_event_loop()
                beside = SearchService(dataclasses.replace(config, index=index, cache=CacheConfig(answer_ttl_s=0)))
                while not done.is_set():
                    answers.append(other.run_until_complete(beside.search(request)))
                other.run_until_complete(beside.aclose())
                other.close()

            thread = threading.Thread(target=searching)
            thread.start()
            try:
                assert len(pruner.run(should_stop=between).dropped) == 3
            finally:
                done.set()
                thread.join()
            answers.append(loop.run_until_complete(service.search(request)))
            assert len(answers) >= 4
            for answer in answers:
                assert answer["files"] == before["files"]
            pruner.store.close()
        finally:
            loop.run_until_complete(service.aclose())
            loop.close()


class TestMarkers:
    def test_touch_sets_last_use_and_never_makes_a_marker(self, tmp_path: Path) -> None:
        """A use moves a root's last use to now; a root without a marker gets none from a search."""
        folder = str(tmp_path)
        roots.register(folder, {"/r/a": ["a"]})
        _then = time.time() - 5 * DAY_S
        os.utime(roots.marker_path(folder, "/r/a"), (_then, _then))
        roots._touched.clear()
        roots.touch(folder, ["/r/a", "/r/none"])
        assert roots.markers(folder)["/r/a"].last_used > time.time() - 60
        assert "/r/none" not in roots.markers(folder)

    def test_a_one_shot_search_records_its_roots_last_use(self, tmp_path: Path) -> None:
        """`fedsearch search` (no server, no builder) moves the last use of the roots it searched."""
        src = tmp_path / "src"
        repo = _checkout(src / "repo", files=2)
        cache = tmp_path / "cache"
        folder = cache / "fedsearch"
        roots.register(str(folder), {str(repo): ["repo"]})
        _age(folder, repo, 10)
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        env.pop("FEDSEARCH_CONFIG", None)
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "search", "needle_1", "--json"],
            cwd=src,
            env=env,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0 and json.loads(done.stdout)["files"]
        assert roots.markers(str(folder))[str(repo)].last_used > time.time() - 60

    def test_register_keeps_every_name_a_config_gave_a_root(self, tmp_path: Path) -> None:
        """Two configs naming one checkout differently: both names are kept."""
        roots.register(str(tmp_path), {"/r/a": ["flask"]})
        roots.register(str(tmp_path), {"/r/a": ["web/flask"]})
        assert roots.markers(str(tmp_path))["/r/a"].names == ("flask", "web/flask")

    def test_a_live_claim_is_seen_until_released(self, tmp_path: Path) -> None:
        """A running process's claim is in use from another process's view; released, it is gone."""
        live = roots.Live(str(tmp_path), ["/r/a"])
        code = "import sys; from gateway.index import roots; print(sorted(roots.in_use(sys.argv[1])))"
        seen = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
        assert seen.stdout.strip() == "['/r/a']"
        live.close()
        assert roots.in_use(str(tmp_path)) == set()


class TestStatusAndPrune:
    def _run(self, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway.cli", "index", *args], capture_output=True, text=True, env=env, check=False
        )

    def test_status_lists_each_root_and_prune_drops_the_unused(self, tmp_path: Path) -> None:
        """--status --json names each root's namespaces, files, bytes, last use and state; --prune drops the
        one unused for keep_days and --status no longer lists it."""
        folder = tmp_path / "idx"
        src = tmp_path / "src"
        mine, old = _checkout(src / "mine", files=3), _checkout(tmp_path / "old", files=3)
        _index(folder, mine, old)
        _age(folder, old, 30)
        config = tmp_path / "fedsearch.toml"
        config.write_text(
            f'[index]\ndir = "{folder}"\nkeep_days = 14\n\n'
            f'[[namespaces]]\nname = "mine"\nbackend = "ripgrep"\nroot = "{mine}"\n'
        )
        env = {**os.environ, "FEDSEARCH_CONFIG": str(config)}
        shown = json.loads(self._run("--status", "--json", env=env).stdout)
        by_root = {r["root"]: r for r in shown["roots"]}
        assert set(by_root) == {str(mine), str(old)} and shown["bytes"] == folder_bytes(str(folder))
        assert by_root[str(old)]["namespaces"] == ["old"] and by_root[str(old)]["files"] == 3
        assert by_root[str(old)]["state"] == "ready" and by_root[str(old)]["bytes"] > 0
        assert by_root[str(old)]["last_used"] < time.time() - 29 * DAY_S
        pruned = self._run("--prune", env=env)
        assert pruned.returncode == 0 and f"pruned {old}: unused for 30" in pruned.stdout
        after = json.loads(self._run("--status", "--json", env=env).stdout)
        assert [r["root"] for r in after["roots"]] == [str(mine)]
        human = self._run("--status", env=env).stdout
        assert str(mine) in human and "[mine]" in human and "ready" in human

    def test_a_build_by_fedsearch_index_records_its_namespace_names(self, tmp_path: Path) -> None:
        """`fedsearch index` (no server) records the names its config gives each checkout."""
        repo = _checkout(tmp_path / "repo", files=2)
        folder = tmp_path / "idx"
        config = tmp_path / "fedsearch.toml"
        config.write_text(
            f'[index]\ndir = "{folder}"\n\n[[namespaces]]\nname = "renamed"\nbackend = "ripgrep"\nroot = "{repo}"\n'
        )
        env = {**os.environ, "FEDSEARCH_CONFIG": str(config)}
        assert self._run(env=env).returncode == 0
        (shown,) = json.loads(self._run("--status", "--json", env=env).stdout)["roots"]
        assert shown["root"] == str(repo) and shown["namespaces"] == ["renamed"] and shown["files"] == 2

    def test_check_config_warns_when_the_disk_has_less_room_than_the_bound(self, tmp_path: Path) -> None:
        """A bound bigger than the disk's free space is a warning naming [index] max_bytes."""
        repo = _checkout(tmp_path / "repo", files=1)
        config = tmp_path / "fedsearch.toml"
        config.write_text(
            f'[index]\ndir = "{tmp_path / "idx"}"\nmax_bytes = {1 << 60}\n\n'
            f'[[namespaces]]\nname = "repo"\nbackend = "ripgrep"\nroot = "{repo}"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "check-config", "--config", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and "less than [index] max_bytes lets its indexes grow" in done.stderr


@st.composite
def _infos(draw: st.DrawFn) -> list[RootInfo]:
    n = draw(st.integers(0, 8))
    return [
        RootInfo(
            root=f"/r/{i}",
            bytes=draw(st.integers(0, 1000)),
            last_used=draw(st.floats(0, 40 * DAY_S)),
            exists=draw(st.booleans()),
            in_use=draw(st.booleans()),
        )
        for i in range(n)
    ]


class TestPlan:
    @given(_infos(), st.integers(0, 5000), st.integers(0, 500))
    def test_a_plan_keeps_what_is_in_use_and_fits_the_bound_by_last_use(
        self, infos: list[RootInfo], max_bytes: int, other: int
    ) -> None:
        """Never a root in use; every vanished or expired one that is not; then the least recently used
        until the rest fits (or only roots in use are left)."""
        now = 40 * DAY_S
        drops = plan(infos, now=now, keep_s=KEEP, max_bytes=max_bytes, other_bytes=other)
        dropped = {d.root for d in drops}
        assert len(dropped) == len(drops)
        by_root = {i.root: i for i in infos}
        assert not any(by_root[r].in_use for r in dropped)
        for info in infos:
            if not info.in_use and (not info.exists or now - info.last_used > KEEP):
                assert info.root in dropped
        kept = [i for i in infos if i.root not in dropped]
        evictable = [i for i in kept if not i.in_use]
        assert other + sum(i.bytes for i in kept) <= max_bytes or not evictable
        evicted = [by_root[d.root] for d in drops if "max_bytes" in d.reason]
        for gone in evicted:
            assert all(gone.last_used <= k.last_used for k in evictable)


def test_sqlite_drops_rows_without_blocking_a_reader(tmp_path: Path) -> None:
    """A reader's open snapshot stays readable while a root is dropped and the database vacuumed (WAL)."""
    folder = tmp_path / "idx"
    a = _checkout(tmp_path / "a", files=5)
    _index(folder, a, content=False)
    reader = sqlite3.connect(next(folder.glob("declarations-*.sqlite3")), timeout=0.05)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM files").fetchone()[0] == 5
    store = Store.open(str(folder))
    store.drop_root(str(a))
    store.vacuum()
    assert reader.execute("SELECT count(*) FROM files").fetchone()[0] == 5  # its snapshot
    reader.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    reader.close()
    store.close()
