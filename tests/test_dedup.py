"""Duplicates (SPEC §3, issue 38): the same file in many namespaces is one file group.

Two local namespaces over copies of one real git checkout (``git clone``), searched with
the real rg: the copies of a file are one group listing the other copy, a file changed in
one copy is its own group, each namespace still counts its own files, a namespace the
caller may not see is never named, paging keeps every group once, and ``"dedup": false``
(or ``dedup:no``) shows every copy as before. The ranking's grouping is also checked as a
property over arbitrary answers.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings, find_rg
from adapters.ripgrep.identity import GitIdentities, parse_ls_files
from gateway.dedup.identity import blob_id, git_identity, zoekt_identity
from gateway.errors import InvalidRequest
from gateway.index.store import Store
from gateway.models import BackendResult, FileMatch, Hit, Outcome
from gateway.query.request import SearchRequest
from gateway.rank import page_of, settle
from gateway.service import SearchService
from tests.strategies import NAMESPACES, PATHS, TEXTS
from tests.test_semantic import RETRY, _built
from tests.test_semantic import _config as semantic_config

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")

FILES = {
    "src/app.py": "from widgets import register_widget\n\nregister_widget('app')\n",
    "src/widgets.py": "def register_widget(name):\n    return name\n",
    "src/changed.py": "register_widget('before')\n",
    "docs/guide.md": "Call register_widget to add one.\n",
}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def checkout(root: Path, files: dict[str, str]) -> Path:
    """A git checkout at ``root`` with ``files`` committed."""
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    return root


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """``main`` and ``copy``: a clone of it whose ``src/changed.py`` was edited (not committed)."""
    main = checkout(tmp_path / "main", FILES)
    copy = tmp_path / "copy"
    subprocess.run(["git", "clone", "-q", str(main), str(copy)], check=True)
    (copy / "src/changed.py").write_text("register_widget('after')\n")
    return main, copy


@pytest.fixture
async def service(copies: tuple[Path, Path]) -> AsyncIterator[SearchService]:
    main, copy = copies
    backends = [RipgrepBackend(p.name, RipgrepSettings(root=str(p))) for p in (main, copy)]
    svc = SearchService.with_backends(backends, weights={"main": 2.0})
    yield svc
    await svc.aclose()


def groups(answer: dict[str, Any]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each shown group as (namespace, path) -> its duplicates as (namespace, path)."""
    return {
        (g["namespace"], g["file_path"]): [(d["namespace"], d["file_path"]) for d in g.get("duplicates", [])]
        for g in answer["files"]
    }


class TestLocalCopies:
    async def test_copies_are_one_group_naming_the_other(self, service: SearchService) -> None:
        """An unchanged file of both checkouts is one group, the better-ranked copy's, listing the other."""
        answer = await service.search_json({"query": "register_widget"})
        shown = groups(answer)
        for path in ("src/app.py", "src/widgets.py", "docs/guide.md"):
            assert shown[("main", path)] == [("copy", path)]
            assert ("copy", path) not in shown

    async def test_a_changed_copy_is_its_own_group(self, service: SearchService) -> None:
        """A file edited in one checkout is two groups, neither listing the other."""
        shown = groups(await service.search_json({"query": "register_widget"}))
        assert shown[("main", "src/changed.py")] == []
        assert shown[("copy", "src/changed.py")] == []

    async def test_file_count_counts_groups_and_namespaces_their_own(self, service: SearchService) -> None:
        """file_count counts groups (3 merged + 2 apart); each namespace still counts its 4 files."""
        answer = await service.search_json({"query": "register_widget"})
        assert answer["file_count"] == 5
        assert {s["name"]: s["files"] for s in answer["namespaces"]} == {"main": 4, "copy": 4}

    async def test_dedup_false_shows_every_copy_with_its_identity(
        self, service: SearchService, copies: tuple[Path, Path]
    ) -> None:
        """With dedup false every copy is a group, none has duplicates, and each says its git blob id."""
        answer = await service.search_json({"query": "register_widget", "dedup": False})
        assert answer["file_count"] == 8
        assert all("duplicates" not in g for g in answer["files"])
        ids = {(g["namespace"], g["file_path"]): g["identity"] for g in answer["files"]}
        main, copy = copies
        assert (
            ids[("main", "src/app.py")]
            == ids[("copy", "src/app.py")]
            == git_identity(blob_id((main / "src/app.py").read_bytes()))
        )
        assert ids[("copy", "src/changed.py")] == "git:" + blob_id((copy / "src/changed.py").read_bytes())

    async def test_dedup_no_in_the_query_is_dedup_false(self, service: SearchService) -> None:
        """``dedup:no`` in the query shows every copy, as ``"dedup": false`` does."""
        answer = await service.search_json({"query": "register_widget dedup:no"})
        assert answer["file_count"] == 8
        assert all("duplicates" not in g for g in answer["files"])

    async def test_dedup_yes_against_the_field_names_the_field(self, service: SearchService) -> None:
        """``dedup:yes`` with ``"dedup": false`` is a 400 naming dedup; ``dedup:maybe`` one naming the query."""
        with pytest.raises(InvalidRequest) as conflict:
            await service.search_json({"query": "register_widget dedup:yes", "dedup": False})
        assert conflict.value.field == "dedup"
        with pytest.raises(InvalidRequest) as wrong:
            await service.search_json({"query": "register_widget dedup:maybe"})
        assert wrong.value.field == "query"

    async def test_a_namespace_the_caller_cannot_see_is_never_a_duplicate(self, service: SearchService) -> None:
        """Seeing ``main`` only, no group lists ``copy`` and nothing names it."""
        answer = await service.search_json({"query": "register_widget"}, access=lambda name: name == "main")
        assert all(not d for d in groups(answer).values())
        assert "copy" not in str(answer)

    async def test_the_same_edit_in_both_copies_is_one_group(
        self, service: SearchService, copies: tuple[Path, Path]
    ) -> None:
        """Both checkouts' changed file edited alike: hashed the way git does, they are one group again."""
        main, copy = copies
        (main / "src/changed.py").write_text((copy / "src/changed.py").read_text())
        shown = groups(await service.search_json({"query": "register_widget"}))
        assert shown[("main", "src/changed.py")] == [("copy", "src/changed.py")]

    async def test_paging_shows_every_group_once(self, service: SearchService) -> None:
        """Page by page, one file a page: every group once, and groups plus duplicates are every copy."""
        args: dict[str, Any] | None = {"query": "register_widget", "files": 1}
        seen: list[tuple[str, str]] = []
        copies_seen: list[tuple[str, str]] = []
        while args is not None:
            answer = await service.search_json(args)
            for key, dups in groups(answer).items():
                seen.append(key)
                copies_seen.extend(dups)
            following = [a for a in answer.get("next", []) if a["reason"].startswith("next page")]
            args = following[0]["args"] if following else None
        assert len(seen) == len(set(seen)) == 5
        every = await service.search_json({"query": "register_widget", "dedup": False, "files": 20})
        assert sorted(seen + copies_seen) == sorted(groups(every))


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """``main`` and ``copy`` (its clone) under ``src``, their intent index built in ``idx``."""
    root = tmp_path / "src"
    checkout(root / "main", {"src/retry.py": RETRY})
    subprocess.run(["git", "clone", "-q", str(root / "main"), str(root / "copy")], check=True)
    store = Store.open(str(tmp_path / "idx"))
    _built(store, root, "main", "copy")
    store.close()
    return root


class TestByMeaning:
    async def test_copies_are_one_group_by_meaning_too(self, indexed: Path, tmp_path: Path) -> None:
        """A semantic search answers from the intent index: its copies merge by the checkout's blob ids too."""
        root = indexed
        service = SearchService(semantic_config(root, tmp_path / "idx"))
        try:
            request = {"query": "retry with backoff", "mode": "semantic", "threshold": 0.0}
            on = await service.search_json(request)
            off = await service.search_json({**request, "dedup": False})
        finally:
            await service.aclose()
        assert groups(on) == {("copy", "src/retry.py"): [("main", "src/retry.py")]}
        assert sorted(groups(off)) == [("copy", "src/retry.py"), ("main", "src/retry.py")]


class TestGitIdentities:
    def test_ls_files_gives_blob_ids_of_regular_files(self, tmp_path: Path) -> None:
        """Each tracked file's identity is ``git hash-object``'s id; an untracked one has none."""
        root = checkout(tmp_path / "r", {"a.py": "x = 1\n", "b/c.txt": "hello\n"})
        (root / "untracked.py").write_text("y\n")
        ids = GitIdentities(str(root))
        want = subprocess.run(
            ["git", "-C", str(root), "hash-object", "a.py"], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert ids.claimed("a.py") == ids.exact("a.py") == f"git:{want}"
        assert ids.claimed("untracked.py") == ""
        assert len(ids) == 2

    def test_a_root_outside_git_has_no_identities(self, tmp_path: Path) -> None:
        """A folder that is no checkout: no identity, so nothing there is merged."""
        (tmp_path / "a.py").write_text("x\n")
        ids = GitIdentities(str(tmp_path))
        assert (ids.claimed("a.py"), len(ids)) == ("", 0)

    def test_warm_hashes_what_changed_since_git_looked(self, tmp_path: Path) -> None:
        """After a file changed, warm hashes it: its claim is then its new blob id."""
        root = checkout(tmp_path / "r", {"a.py": "x = 1\n"})
        (root / "a.py").write_text("x = 2\n")
        ids = GitIdentities(str(root))
        assert ids.warm() == 1
        assert ids.exact("a.py") == "git:" + blob_id(b"x = 2\n")

    def test_parse_skips_conflicts_links_and_submodules(self) -> None:
        """Only stage-0 regular files are entries."""
        debug = "  ctime: 1:0\n  mtime: 5:7\n  dev: 1\tino: 2\n  uid: 0\tgid: 0\n  size: 3\tflags: 0\n"
        blob = "a" * 40
        out = "".join(
            f"{mode} {blob} {stage}\t{path}\0{debug}"
            for mode, stage, path in [
                ("100644", 0, "ok.py"),
                ("100644", 2, "conflict.py"),
                ("120000", 0, "link"),
                ("160000", 0, "sub"),
            ]
        )
        assert parse_ls_files(out.encode()) == {"ok.py": (blob, 5_000_000_007, 3)}

    def test_backend_ids_are_namespaced_by_kind(self) -> None:
        """A blob id from anywhere is ``git:``; Zoekt's checksum is ``zoekt:``; garbage is none."""
        assert (
            git_identity("5B0C7E1D2A3F4E5D6C7B8A9F0E1D2C3B4A596877") == "git:5b0c7e1d2a3f4e5d6c7b8a9f0e1d2c3b4a596877"
        )
        assert git_identity(None) == git_identity("xyz") == git_identity(12) == ""
        assert zoekt_identity("jh8DpcfSm0Q=") == "zoekt:jh8DpcfSm0Q="
        assert zoekt_identity("") == ""


# --- the grouping as a property over arbitrary answers ------------------------------------

IDENTITIES = ["git:" + c * 40 for c in "abc"] + ["zoekt:x", ""]


@st.composite
def outcomes_with_identities(draw: st.DrawFn) -> list[Outcome]:
    names = draw(st.lists(st.sampled_from(NAMESPACES), unique=True, min_size=1, max_size=4))
    out = []
    for name in sorted(names):
        paths = draw(st.lists(st.sampled_from(PATHS), unique=True, max_size=6))
        files = tuple(
            FileMatch(
                path=path,
                hits=tuple(
                    Hit(line=n, text=draw(st.sampled_from(TEXTS)), column=1)
                    for n in sorted(draw(st.lists(st.integers(1, 50), unique=True, min_size=1, max_size=3)))
                ),
                identity=draw(st.sampled_from(IDENTITIES)),
            )
            for path in paths
        )
        status = draw(st.sampled_from(["ok", "ok", "capped"]))
        result = BackendResult(files=files, status=status)
        weight = draw(st.sampled_from([0.5, 1.0, 2.0]))
        out.append(Outcome(namespace=name, backend="mock", status=status, took_ms=0, result=result, weight=weight))
    return out


def _pages(request: SearchRequest, outcomes: list[Outcome]) -> list[list[dict[str, Any]]]:
    """Every page of the answer, paging from offset 0 until no next page is left."""
    whole = settle(request, outcomes, everything=True)
    pages: list[list[dict[str, Any]]] = []
    offset = 0
    while True:
        ranked = page_of(request.model_copy(update={"offset": offset}), whole)
        pages.append(
            [
                {"key": (i.namespace, i.file.path), "identity": i.file.identity, "dups": i.duplicates}
                for i in ranked.page
            ]
        )
        if not ranked.more:
            return pages
        offset += len(ranked.page)


class FakeIdentities:
    """A local checkout's identities as a test states them: what each file was, and what it is now."""

    def __init__(self, claimed: dict[str, str], exact: dict[str, str]) -> None:
        self._claimed, self._exact = claimed, exact

    def claims(self) -> dict[str, str]:
        return self._claimed

    def exact(self, path: str) -> str:
        return self._exact.get(path, "")


@st.composite
def local_and_remote(draw: st.DrawFn) -> tuple[list[Outcome], dict[tuple[str, str], str]]:
    """Outcomes of remote namespaces (exact identities) and local ones (claims, some gone stale: the
    file changed since), and every file's identity as it is now."""
    outcomes = draw(outcomes_with_identities())
    now: dict[tuple[str, str], str] = {}
    out = []
    for outcome in outcomes:
        assert outcome.result is not None
        files = outcome.result.files
        if draw(st.booleans()):  # local: the identities claimed, looked at again when shown
            claimed = {f.path: f.identity for f in files}
            exact = {path: draw(st.sampled_from([claim, claim, *IDENTITIES])) for path, claim in claimed.items()}
            local = tuple(FileMatch(path=f.path, hits=f.hits) for f in files)
            result = BackendResult(files=local, status=outcome.result.status, identities=FakeIdentities(claimed, exact))
            out.append(Outcome(**{**msgspec.structs.asdict(outcome), "result": result}))
            now.update({(outcome.namespace, path): identity for path, identity in exact.items()})
        else:
            out.append(outcome)
            now.update({(outcome.namespace, f.path): f.identity for f in files})
    return out, now


class TestGroupingProperty:
    @settings(max_examples=150, deadline=None)
    @given(outcomes_with_identities(), st.integers(1, 4))
    def test_groups_are_distinct_contents_and_cover_every_copy(self, outcomes: list[Outcome], files: int) -> None:
        """With dedup, no two groups on any page share an identity, and the groups with their duplicates
        are exactly the files of the answer with dedup off, each once."""
        on = _pages(SearchRequest(query="foo", files=files, hit_budget=5000), outcomes)
        shown = [g for page in on for g in page]
        named = [g["identity"] for g in shown if g["identity"]]
        assert len(named) == len(set(named))
        covered = [g["key"] for g in shown] + [d for g in shown for d in g["dups"]]
        off = _pages(SearchRequest(query="foo", files=files, hit_budget=5000, dedup=False), outcomes)
        every = [g["key"] for page in off for g in page]
        assert sorted(covered) == sorted(every)
        assert len(covered) == len(set(covered))
        assert all(not g["dups"] for page in off for g in page)

    @settings(max_examples=150, deadline=None)
    @given(local_and_remote(), st.integers(1, 4))
    def test_a_changed_local_copy_is_never_a_duplicate(
        self, answer: tuple[list[Outcome], dict[tuple[str, str], str]], files: int
    ) -> None:
        """With local claims gone stale (files changed since they were looked at), every group's copies
        have its identity as it is now, and groups with their copies are every file once, page after
        page. (A file changed to equal another's bytes may stay a group of its own until its checkout's
        identities are looked at again: a miss, never a wrong merge.)"""
        outcomes, now = answer
        on = _pages(SearchRequest(query="foo", files=files, hit_budget=5000), outcomes)
        shown = [g for page in on for g in page]
        for group in shown:
            assert all(now[d] == now[group["key"]] != "" for d in group["dups"])
        covered = [g["key"] for g in shown] + [d for g in shown for d in g["dups"]]
        assert sorted(covered) == sorted(now)


def test_git_is_run_without_subprocess_and_its_failures_are_none() -> None:
    """The identities' git runs by posix_spawn: what it printed, or None when it fails, cannot start or
    runs past its time (then it is killed, not waited for)."""
    from adapters.ripgrep.identity import _output

    env = {"PATH": "/usr/bin:/bin"}
    assert _output(["printf", "a\\0b"], env, 5.0) == b"a\0b"
    assert _output(["false"], env, 5.0) is None
    assert _output(["fedsearch-no-such-program"], env, 5.0) is None
    assert _output(["sleep", "30"], env, 0.2) is None  # sleep ends well (0): None says it was killed


def test_the_identity_warmer_waits_while_a_search_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Background warming makes way for searches: while one runs in the process, the warming thread starts
    no git (it waits up to WARM_YIELD_S a root); once none runs, it warms the root."""
    import threading

    from adapters.ripgrep import identity
    from gateway.serving import IDLE

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "a.py"], check=True)
    warmed = threading.Event()

    class Probe(GitIdentities):
        def warm(self) -> int:
            warmed.set()
            return super().warm()

    monkeypatch.setattr(identity, "WARM_YIELD_S", 60.0)  # longer than the test waits: only the search's end frees it
    IDLE.begin()
    try:
        identity.warm_later(Probe(str(repo)))
        assert not warmed.wait(1.0)  # a search runs: nothing warmed
    finally:
        IDLE.end()
    assert warmed.wait(30.0)  # none runs: warmed at once
    monkeypatch.setattr(identity, "WARM_YIELD_S", 0.2)
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run(["git", "init", "-q", str(again)], check=True)
    warmed.clear()
    IDLE.begin()
    try:
        identity.warm_later(Probe(str(again)))
        assert warmed.wait(30.0)  # under constant load it still gets on, after WARM_YIELD_S
    finally:
        IDLE.end()
