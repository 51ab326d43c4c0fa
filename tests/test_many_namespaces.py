"""Many namespaces: a checkout whose gram bitset proves it cannot match is not searched (issue 51).

The bitset (:mod:`gateway.index.content.summary`) is held to soundness by hypothesis against the
files' own bytes; the content index believes it only while every file of the checkout is as
indexed (a server's watcher tells), and the service answers a ruled-out namespace ``ok`` with no
file without searching it. Answers are compared with the real rg throughout.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import parse_config
from gateway.index.content import fresh, records
from gateway.index.content.grams import QUAD, file_grams
from gateway.index.content.layout import read_manifest, root_dir
from gateway.index.content.narrow import ContentIndex
from gateway.index.content.plan import plan
from gateway.index.content.summary import BYTES, Bitsets, Table
from gateway.index.files import find_rg
from gateway.models import SearchQuery
from gateway.query.request import parse_request
from gateway.service import SearchService
from tests.content_support import build
from tests.helpers import git_repo

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

NOWHERE = "zqxjkw_found_nowhere"


def query(text: str, **fields: Any) -> SearchQuery:
    return SearchQuery(text=text, deadline=time.monotonic() + 30, **fields)


@pytest.fixture
def no_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as clean once indexed (nothing writes them meanwhile)."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)


def bitsets(tmp_path: Path, texts: list[bytes]) -> tuple[bytes, bytes]:
    """A checkout's bitsets of grams and quads as the builder's worker makes them: each file read, its grams
    and quads put in a batch's bitsets."""
    made = Bitsets()
    tmp_path.mkdir(exist_ok=True)
    for n, text in enumerate(texts):
        (tmp_path / f"f{n}").write_bytes(text)
        assert records.read_record(str(tmp_path), f"f{n}", made) is not None
    return made.bits()


def plans(text: str, case_sensitive: bool, regex: bool = False) -> tuple[Any, Any]:
    """A search's plan over grams and over quads."""
    return (
        plan(text, regex=regex, case_sensitive=case_sensitive),
        plan(text, regex=regex, case_sensitive=case_sensitive, width=QUAD),
    )


class TestBitset:
    @settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(st.text(alphabet="abcKkſsS_ (){}\u212a\n\0", min_size=0, max_size=60), min_size=1, max_size=5),
        st.data(),
        st.booleans(),
    )
    def test_never_rules_out_a_checkout_that_holds_a_match(
        self, tmp_path_factory: pytest.TempPathFactory, texts: list[str], data: Any, case: bool
    ) -> None:
        """Whatever a file holds, a literal cut from it (or any literal some file matches, in either case)
        is allowed by the checkout's bitsets, of grams and of quads: they can only rule out what cannot match."""
        raw = [t.encode() for t in texts]
        chosen = data.draw(st.sampled_from(texts))
        start = data.draw(st.integers(0, max(0, len(chosen) - 1)))
        literal = chosen[start : start + data.draw(st.integers(1, 12))] or "a"
        need, quads = plans(literal, case)
        if need is None:
            return  # nothing to require: never ruled out, by construction
        table = Table(1)
        table.put(0, *bitsets(tmp_path_factory.mktemp("files"), raw))
        matched = any(
            (literal in t) if case else (literal.casefold() in t.casefold() or _simple_fold(literal) in _simple_fold(t))
            for t in texts
            if "\0" not in t  # a NUL in its first 64 KiB: rg prints nothing of the file
        )
        if matched:
            assert table.possible(need, quads)[0]

    def test_a_file_of_one_kelvin_sign_is_read(self) -> None:
        """Found by the property above: a 3-byte file holding KELVIN SIGN, read as ASCII, is one byte."""
        assert len(file_grams("\u212a".encode())) == 1

    def test_rules_out_what_no_file_holds(self, tmp_path: Path) -> None:
        """A checkout of a few small files is ruled out for a word none of them holds."""
        table = Table(2)
        table.put(0, bitsets(tmp_path / "0", [b"def register_blueprint(self, bp):\n    pass\n"])[0])
        table.put(1, bitsets(tmp_path / "1", [b"class QueuePool(Pool):\n    pass\n"])[0])
        need = plan("register_blueprint", regex=False, case_sensitive=True)
        assert need is not None
        assert table.possible(need).tolist() == [True, False]
        regex = plan(r"class \w+Pool\b", regex=True, case_sensitive=True)
        assert regex is not None
        assert table.possible(regex).tolist() == [False, True]

    def test_quads_rule_out_what_trigrams_let_through(self, tmp_path: Path) -> None:
        """A checkout holding every trigram of ``get_netrc_auth`` in other words passes the gram bitset, and
        its quads rule it out; a checkout whose quads are not known is ruled out by its grams alone."""
        scattered = b"get et_ t_n _ne net etr trc rc_ c_a _au aut uth\n"
        table = Table(3)
        table.put(0, *bitsets(tmp_path / "0", [scattered]))
        table.put(1, bitsets(tmp_path / "1", [scattered])[0])  # a manifest written before quads were kept
        table.put(2, *bitsets(tmp_path / "2", [b"def get_netrc_auth(url):\n"]))
        need, quads = plans("get_netrc_auth", case_sensitive=True)
        assert table.possible(need).tolist() == [True, True, True]
        assert table.possible(need, quads).tolist() == [False, True, True]
        regex = plans(r"get_\w+_auth", case_sensitive=False, regex=True)
        assert table.possible(*regex).tolist() == [False, True, True]

    def test_a_manifest_carries_its_bitset(self, tmp_path: Path, no_race: None) -> None:
        """The builder writes each checkout's bitset into its manifest (an empty file, a marker-only one and a
        file with a NUL beside the others: their words join into one list), and it grows with what is read."""
        repo = git_repo(
            tmp_path / "repo",
            {
                "0.typed": "",
                "1.bin": "x" * 70_000 + "\0",
                "2.txt": "\ufeff".encode("utf-16"),
                "a.py": "def register_blueprint():\n    pass\n",
                "z.txt": "",
            },
        )
        build(tmp_path / "idx", repo)
        manifest = read_manifest(root_dir(str(tmp_path / "idx"), str(repo)))
        assert manifest is not None and manifest.grams is not None and len(manifest.grams) == BYTES
        assert manifest.quads is not None and len(manifest.quads) == BYTES
        table = Table(1)
        table.put(0, manifest.grams, manifest.quads)
        blueprint, pool = (plans(t, case_sensitive=True) for t in ("register_blueprint", "QueuePool"))
        assert blueprint[0] is not None and pool[0] is not None
        assert table.possible(*blueprint)[0] and not table.possible(*pool)[0]
        assert not table.possible(blueprint[0], plans("blueprint_register", True)[1])[0]  # its trigrams, not its quads
        (repo / "b.py").write_text("class QueuePool:\n    pass\n")
        build(tmp_path / "idx", repo)
        manifest = read_manifest(root_dir(str(tmp_path / "idx"), str(repo)))
        assert manifest is not None and manifest.grams is not None
        table.put(0, manifest.grams, manifest.quads)
        assert table.possible(*blueprint)[0] and table.possible(*pool)[0]


def _simple_fold(text: str) -> str:
    """rg's -i as far as the test's alphabet goes: KELVIN SIGN is k, LONG S is s."""
    return text.replace("\u212a", "k").replace("\u017f", "s").lower()


def _checkouts(tmp_path: Path, n: int) -> list[Path]:
    """``n`` small checkouts; checkout i holds ``word_i`` and nothing else of note."""
    return [
        git_repo(
            tmp_path / f"repo{i:02d}",
            {"src/main.py": f"def word_{i:02d}(x):\n    return x + {i}\n", "README.md": f"checkout {i}\n"},
        )
        for i in range(n)
    ]


def _believed(index: ContentIndex, roots: list[str], seconds: float = 30.0) -> None:
    """Wait until the index believes every checkout's bitset (its first checks run in threads)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(index.ruled_out(roots, query(NOWHERE))):
            return
        for root in roots:
            index.narrow(root, query(NOWHERE), None)  # a search brings a ready checkout's bitset in
        time.sleep(0.02)
    raise AssertionError(f"bitsets not believed: {index.ruled_out(roots, query(NOWHERE))}")


class TestBuildingMany:
    def test_a_pass_builds_many_checkouts_at_once(self, tmp_path: Path, no_race: None) -> None:
        """A pass over many small checkouts (several at once, read by forked workers) leaves every one complete,
        its bitset written, and its narrowed answers rg's."""
        from gateway.index.builder import Builder, BuildStats
        from gateway.index.content.build import ContentBuilder
        from gateway.index.content.layout import read_state
        from gateway.index.files import Source
        from gateway.index.store import Store

        repos = _checkouts(tmp_path, 12)
        sources = [Source(r.name, str(r)) for r in repos]
        content = ContentBuilder(str(tmp_path / "idx"), workers=2)
        builder = Builder(Store.open(None), sources, workers=1, content=content)
        stats = BuildStats()
        with content.pool():
            listings = builder.refresh_contents(sources, stats)
        assert set(listings) == {r.name for r in repos} and stats.content_read == 24
        for repo in repos:
            folder = root_dir(str(tmp_path / "idx"), str(repo))
            state, manifest = read_state(folder), read_manifest(folder)
            assert state is not None and state.complete and manifest is not None and manifest.grams is not None
            assert set(manifest.files) == {"src/main.py", "README.md"}
        index = ContentIndex(str(tmp_path / "idx"), [str(r) for r in repos])
        for i, repo in enumerate(repos):
            answer = index.narrow(str(repo), query(f"word_{(i + 1) % 12:02d}"), None)
            assert not isinstance(answer, str) and not answer.files  # only the next checkout holds it

    def test_the_folder_is_walked_once_by_many_threads(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The pass's threads, all due to learn the index folder's size at once, walk it once between them (a
        walk each made a pass over thousands of small checkouts walk-bound); near ``max_bytes`` each asks
        the folder itself, and every figure counts what was added meanwhile."""
        import threading

        from gateway.index.content import build as content_build

        (tmp_path / "idx").mkdir()
        (tmp_path / "idx" / "f").write_bytes(b"x" * 1000)
        walks: list[int] = []
        entered = threading.Event()
        release = threading.Event()

        def slow_walk(directory: str) -> int:
            walks.append(1)
            entered.set()
            release.wait(10)
            return 1000

        monkeypatch.setattr(content_build, "folder_bytes", slow_walk)
        builder = content_build.ContentBuilder(str(tmp_path / "idx"), max_bytes=1 << 30)
        seen: list[int] = []
        first = threading.Thread(target=lambda: seen.append(builder._folder_bytes()))
        first.start()
        assert entered.wait(10)
        builder._grown = 50  # a checkout that fit while the walk ran
        others = [threading.Thread(target=lambda: seen.append(builder._folder_bytes())) for _ in range(8)]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join(10)
        release.set()
        first.join(10)
        assert len(walks) == 1 and sorted(seen) == [50] * 8 + [1050]
        assert builder._folder_bytes() == 1050  # not due again: the guess
        builder.max_bytes = 1200  # now within NEAR_BOUND of the bound: every ask walks
        assert builder._folder_bytes() == 1000 and len(walks) == 2  # the walk counts what was added before it
        assert builder._folder_bytes() == 1000 and len(walks) == 3


class TestRuledOut:
    @pytest.fixture
    def following(self, tmp_path: Path, no_race: None) -> Iterator[tuple[ContentIndex, list[Path]]]:
        repos = _checkouts(tmp_path, 6)
        for repo in repos:
            build(tmp_path / "idx", repo)
        index = ContentIndex(str(tmp_path / "idx"), [str(r) for r in repos], follow=True)
        _believed(index, [str(r) for r in repos])
        yield index, repos
        index.close()

    def test_only_the_checkout_that_can_match_is_left(self, following: tuple[ContentIndex, list[Path]]) -> None:
        index, repos = following
        roots = [str(r) for r in repos]
        assert index.ruled_out(roots, query("word_03")) == [i != 3 for i in range(6)]
        assert index.ruled_out(roots, query("WORD_03", case_sensitive=False)) == [i != 3 for i in range(6)]
        assert index.ruled_out(roots, query(r"word_0[25]\(", mode="regex")) == [i not in (2, 5) for i in range(6)]
        assert index.outcomes["ruled_out"] >= 5

    def test_quads_rule_out_trigrams_in_other_words(self, tmp_path: Path, no_race: None) -> None:
        """A checkout holding every trigram of ``get_netrc_auth``, none of it in one word, is ruled out through
        its quads; the checkout that holds the word is left, and rg agrees with both."""
        scattered = git_repo(tmp_path / "scattered", {"a.txt": "get et_ t_n _ne net etr trc rc_ c_a _au aut uth\n"})
        holding = git_repo(tmp_path / "holding", {"a.py": "def get_netrc_auth(url):\n    return None\n"})
        repos = [scattered, holding]
        for repo in repos:
            build(tmp_path / "idx", repo)
        index = ContentIndex(str(tmp_path / "idx"), [str(r) for r in repos], follow=True)
        try:
            _believed(index, [str(r) for r in repos])
            table = index._table
            assert table is not None and table.possible(index._plan(query("get_netrc_auth"))).tolist() == [True, True]
            roots = [str(r) for r in repos]
            assert index.ruled_out(roots, query("get_netrc_auth")) == [True, False]
            assert index.ruled_out(roots, query("GET_NETRC_AUTH", case_sensitive=False)) == [True, False]
        finally:
            index.close()
        rg = find_rg()
        assert rg is not None
        found = subprocess.run([rg, "-l", "get_netrc_auth", *roots], capture_output=True, text=True, check=False)
        assert found.stdout.split() == [str(holding / "a.py")]

    def test_engines_searched_least_recently_are_let_go_of(
        self, following: tuple[ContentIndex, list[Path]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """At most MAPPED_FILES engine files are open (tantivy maps each: 10,000 open engines passed the
        kernel's vm.max_map_count): past it, those searched least recently are closed, and opened again
        when next searched, with the same answer."""
        from gateway.index.content import narrow as narrow_module

        index, repos = following
        answers = {str(r): index.narrow(str(r), query(f"word_{i:02d}"), None) for i, r in enumerate(repos)}
        one = index.views[str(repos[0])].reader.mapped
        assert one > 0 and index._mapped == 6 * one  # nothing let go of under the bound
        monkeypatch.setattr(narrow_module, "MAPPED_FILES", 2 * one)
        for i, repo in enumerate(repos):
            assert index.narrow(str(repo), query(f"word_{i:02d}"), None) == answers[str(repo)]
            assert index._mapped <= 2 * one
        assert [index.views[str(r)].reader.mapped > 0 for r in repos] == [False] * 4 + [True] * 2
        assert list(index._open) == [str(repos[4]), str(repos[5])]
        assert index.narrow(str(repos[0]), query("word_00"), None) == answers[str(repos[0])]  # opened again
        assert list(index._open) == [str(repos[5]), str(repos[0])]
        assert all(answer != "unreadable" and not isinstance(answer, str) for answer in answers.values())

    def test_a_watcher_past_descriptor_1024_follows(self, tmp_path: Path, no_race: None) -> None:
        """A server holding more than 1,024 descriptors (a lock a checkout, its clients) is given a watcher
        numbered past them: it still follows (select.select refused such a number, and the watching
        thread died: nothing was ever narrowed or ruled out)."""
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 1200:
            pytest.skip(f"the hard limit on open files is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if soft != resource.RLIM_INFINITY else soft, hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        try:
            repos = _checkouts(tmp_path, 3)
            for repo in repos:
                build(tmp_path / "idx", repo)
            index = ContentIndex(str(tmp_path / "idx"), [str(r) for r in repos], follow=True)
            try:
                assert index._watcher is not None and index._watcher.fileno() > 1024
                _believed(index, [str(r) for r in repos])
                assert index.ruled_out([str(r) for r in repos], query("word_01")) == [True, False, True]
            finally:
                index.close()
        finally:
            for fd in held:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def test_nothing_is_ruled_out_without_grams_to_require(self, following: tuple[ContentIndex, list[Path]]) -> None:
        """A query with no gram to require (``.*``, two letters) rules nothing out."""
        index, repos = following
        roots = [str(r) for r in repos]
        assert index.ruled_out(roots, query("x", mode="regex")) == [False] * 6
        assert index.ruled_out(roots, query(".*", mode="regex")) == [False] * 6

    def test_a_write_is_seen_by_the_next_search(self, following: tuple[ContentIndex, list[Path]]) -> None:
        """A file changed just before a search: its checkout is no longer ruled out by the old bitset."""
        index, repos = following
        roots = [str(r) for r in repos]
        (repos[0] / "src" / "main.py").write_text("zqxjkw_written_now = 1\n")
        assert index.ruled_out(roots, query("zqxjkw_written_now")) == [False] + [True] * 5

    def test_a_new_file_in_a_new_folder_is_seen(self, following: tuple[ContentIndex, list[Path]]) -> None:
        index, repos = following
        roots = [str(r) for r in repos]
        (repos[4] / "fresh").mkdir()
        (repos[4] / "fresh" / "new.py").write_text("zqxjkw_new_folder = 1\n")
        assert index.ruled_out(roots, query("zqxjkw_new_folder"))[4] is False

    def test_a_one_shot_process_rules_nothing_out(self, tmp_path: Path, no_race: None) -> None:
        """Without a watcher nothing says the files are still as indexed: every checkout is asked."""
        repos = _checkouts(tmp_path, 2)
        for repo in repos:
            build(tmp_path / "idx", repo)
        index = ContentIndex(str(tmp_path / "idx"), [str(r) for r in repos])
        assert index.ruled_out([str(r) for r in repos], query(NOWHERE)) == [False, False]


def _rg_files(roots: dict[str, Path], text: str) -> set[tuple[str, str]]:
    rg = find_rg()
    assert rg is not None
    out = set()
    for name, root in roots.items():
        done = subprocess.run([rg, "--no-config", "-l", "-F", text], cwd=root, capture_output=True, text=True)
        out |= {(name, line.removeprefix("./")) for line in done.stdout.splitlines()}
    return out


class TestService:
    """The service answers a ruled-out namespace ``ok`` with no file, without searching it."""

    @pytest.fixture
    def service(self, tmp_path: Path, no_race: None) -> Iterator[tuple[SearchService, dict[str, Path]]]:
        repos = _checkouts(tmp_path, 8)
        roots = {f"team/repo{i:02d}": repo for i, repo in enumerate(repos)}
        for repo in repos:
            build(tmp_path / "idx", repo)
        config = parse_config(
            {
                "cache": {"answer_ttl_s": 0, "single_flight": False},
                "index": {"dir": str(tmp_path / "idx")},
                "namespaces": [{"name": n, "backend": "ripgrep", "root": str(r)} for n, r in roots.items()],
            }
        )
        svc = SearchService(config)
        svc.start_serving()
        assert svc.content is not None
        _believed(svc.content, [str(os.path.abspath(r)) for r in repos])
        yield svc, roots
        asyncio.run(svc.aclose())

    def _search(self, svc: SearchService, text: str, access: Any = None) -> dict[str, Any]:
        request = parse_request({"query": text, "files": 50})
        return asyncio.run(svc.search(request, access))

    def test_a_word_in_one_namespace(self, service: tuple[SearchService, dict[str, Path]]) -> None:
        svc, roots = service
        assert svc.content is not None
        before = svc.content.outcomes["ruled_out"]
        answer = self._search(svc, "word_05")
        assert {(f["namespace"], f["file_path"]) for f in answer["files"]} == _rg_files(roots, "word_05")
        assert [(s["name"], s["status"], s["files"]) for s in answer["namespaces"]] == [
            (n, "ok", 1 if n == "team/repo05" else 0) for n in roots
        ]
        assert svc.content.outcomes["ruled_out"] - before == 7

    def test_many_checkouts_asked_in_threads_at_once(
        self, service: tuple[SearchService, dict[str, Path]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Checkouts none of which is ruled out, asked of the content index in several threads at once: every
        one narrowed, counted once, and the answer rg's."""
        from adapters.ripgrep import batch

        svc, roots = service
        assert svc.content is not None
        monkeypatch.setattr(batch, "NARROW_SHARE", 2)
        monkeypatch.setattr(batch, "NARROW_THREADS", 3)
        before = svc.content.outcomes["narrowed"]
        answer = self._search(svc, "return x +")
        assert {(f["namespace"], f["file_path"]) for f in answer["files"]} == _rg_files(roots, "return x +")
        assert len(answer["files"]) == 8 and svc.content.outcomes["narrowed"] - before == 8

    def test_a_word_nowhere(self, service: tuple[SearchService, dict[str, Path]]) -> None:
        """Every namespace still says its status (SPEC §3 invariant 8), and the note says why it is empty."""
        svc, roots = service
        answer = self._search(svc, NOWHERE)
        assert answer["files"] == [] and not answer["truncated"]
        assert [(s["name"], s["status"]) for s in answer["namespaces"]] == [(n, "ok") for n in roots]
        assert NOWHERE in answer["note"]

    def test_a_cloaked_namespace_leaves_no_trace(self, service: tuple[SearchService, dict[str, Path]]) -> None:
        """Access applies before anything is ruled out: a caller who sees two namespaces hears of two."""
        svc, _ = service
        answer = self._search(svc, "word_05", access=lambda name: name in ("team/repo00", "team/repo01"))
        assert [s["name"] for s in answer["namespaces"]] == ["team/repo00", "team/repo01"]
        assert answer["files"] == [] and "repo05" not in str(answer)

    def test_a_stream_hears_the_ruled_out_first(self, service: tuple[SearchService, dict[str, Path]]) -> None:
        """Each namespace is heard of once as it settles; those ruled out have settled before any is searched."""
        svc, roots = service
        heard: list[tuple[str, int]] = []

        async def run() -> None:
            plan = svc.plan(parse_request({"query": "word_05"}))
            await svc.run(plan, lambda o: heard.append((o.namespace, len(o.result.files) if o.result else 0)))

        asyncio.run(run())
        assert sorted(name for name, _ in heard) == sorted(roots)
        assert heard[-1] == ("team/repo05", 1) and all(files == 0 for _, files in heard[:-1])

    def test_a_change_is_found_by_the_next_search(self, service: tuple[SearchService, dict[str, Path]]) -> None:
        svc, roots = service
        (roots["team/repo02"] / "src" / "main.py").write_text("def zqxjkw_changed():\n    pass\n")
        answer = self._search(svc, "zqxjkw_changed")
        assert {(f["namespace"], f["file_path"]) for f in answer["files"]} == {("team/repo02", "src/main.py")}


class TestCandidates:
    """One engine search answers a selective query; more hits than it lists are asked for again; more than
    half the checkout's files is ``common`` (the checkout is scanned)."""

    @pytest.mark.parametrize("holding", [3, 100, 200])
    def test_the_files_holding_the_grams(self, tmp_path: Path, no_race: None, holding: int) -> None:
        from gateway.index.content import engine

        repo = git_repo(
            tmp_path / "repo",
            {f"src/f{i:03d}.py": f"value_{i} = {'zqxjkw_candidate' if i < holding else 'other'}\n" for i in range(300)},
        )
        build(tmp_path / "idx", repo)
        index = ContentIndex(str(tmp_path / "idx"), [str(repo)], follow=True)
        try:
            _believed(index, [str(repo)])
            answer = index.narrow(str(repo), query("zqxjkw_candidate"), None)
        finally:
            index.close()
        assert engine.FEW < 100 < 150 < 200  # the three cases: within FEW, listed again, common
        if holding > 150:
            assert answer == "common"
        else:
            assert not isinstance(answer, str)
            assert sorted(answer.files) == [str(repo / "src" / f"f{i:03d}.py") for i in range(holding)]
