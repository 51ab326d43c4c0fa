"""The one-shot search without the service (gateway.cli.oneshot): the same answer, the same errors.

Its request (:mod:`gateway.cli.quick`) is held to ``SearchRequest`` field for field and,
by property, never takes what pydantic refuses nor reads a value otherwise; its answer
is ``SearchService.search``'s byte for byte (timing aside) over real checkouts; its rg
run (:mod:`adapters.ripgrep.oneshot`) answers each namespace as the ripgrep backend does.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from adapters.ripgrep.backend import RipgrepBackend, RipgrepSettings, find_rg
from adapters.ripgrep.oneshot import start
from adapters.ripgrep.output import DEFAULT_MAX_FILES
from gateway.cli.early import Early
from gateway.cli.oneshot import OneShot
from gateway.cli.quick import BOUNDS, DEFAULTS, quick_request
from gateway.cli.scope import discovered_scope
from gateway.config import DefaultsConfig, IndexConfig, config_from_env
from gateway.errors import BackendError, InvalidRequest
from gateway.index.resolve import DeclarationIndex
from gateway.models import DEFAULT_MAX_HITS, BackendResult, SearchQuery
from gateway.query.request import SearchRequest, parse_request
from gateway.service import SearchService
from gateway.signals import defines
from tests.cli_support import Capture, run
from tests.corpus import make_corpus
from tests.helpers import git_repo, rg_children

pytestmark = pytest.mark.skipif(find_rg() is None, reason="no rg binary")


def strip(answer: dict[str, Any]) -> str:
    """An answer without its timing fields, as JSON (compared byte for byte)."""
    out = {k: v for k, v in answer.items() if k != "took_ms"}
    out["namespaces"] = [{k: v for k, v in s.items() if k != "took_ms"} for s in answer["namespaces"]]
    return json.dumps(out)


#: Queries for the property test: literal text, regexes (good and bad), the query syntax.
QUERIES = ["x", "", " ", "(", "a{", "\\w+_x\\(", "lang:go x", "repo:a* y", "-file:t/ z", "case:yes Q", "sym:f", "/re/"]
#: Any field's value for the property test: of the right type or not, in bounds or not.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70_000),
    st.floats(-1, 2),
    st.just(float("nan")),
    st.sampled_from(["exact", "regex", "semantic", "x", "", "py", "abc"]),
    st.lists(st.sampled_from(["a*", "src/**", "!t/**", "", "py", "rust", "x\x00", "a{b"]), max_size=4),
    st.text(max_size=8),
)

#: Values a field is likely to get: around its bounds, of its type.
LIKELY: dict[str, st.SearchStrategy[Any]] = {
    "mode": st.sampled_from(["exact", "regex"]),
    "namespaces": st.lists(st.sampled_from(["alpha", "team/*", "*", "a?"]), max_size=3),
    "paths": st.lists(st.sampled_from(["src/**", "!vendor/**", "*.py", "**/x/*.go"]), max_size=3),
    "languages": st.lists(st.sampled_from(["python", "py", "go", "rst", "Rust"]), max_size=3),
    "case_sensitive": st.one_of(st.none(), st.booleans()),
    "threshold": st.one_of(st.floats(0, 1), st.sampled_from([0, 1])),
    "cursor": st.none(),
    "dedup": st.booleans(),
    **{name: st.integers(low - 1, high + 1) for name, (low, high) in BOUNDS.items() if name != "threshold"},  # type: ignore[arg-type]
}


class TestTheRequest:
    def test_fields_and_defaults_are_search_requests(self) -> None:
        """QuickRequest has SearchRequest's fields, in its order, with its defaults."""
        fields = SearchRequest.model_fields
        assert list(DEFAULTS) == list(fields)
        for name, info in fields.items():
            default = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
            assert DEFAULTS[name] == (None if info.is_required() else default), name

    def test_bounds_are_search_requests(self) -> None:
        """Every number's bounds and every list's length are SearchRequest's."""
        for name, info in SearchRequest.model_fields.items():
            low = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
            high = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), None)
            if low is not None or high is not None:
                assert BOUNDS[name] == (low, high), name
        for name in ("namespaces", "paths", "languages"):
            longest = next(m.max_length for m in SearchRequest.model_fields[name].metadata if hasattr(m, "max_length"))
            with pytest.raises(InvalidRequest):
                parse_request({"query": "x", name: ["*"] * (longest + 1)})
            assert quick_request({"query": "x", name: ["x"] * (longest + 1)}) is None

    def test_the_defaults_the_service_applies_are_the_same(self) -> None:
        """What the one-shot search takes as given is what the service applies to discovered checkouts."""
        assert DefaultsConfig().timeout_ms == DEFAULTS["timeout_ms"]
        settings = RipgrepSettings.model_fields
        assert (settings["max_files"].default, settings["max_hits"].default) == (DEFAULT_MAX_FILES, DEFAULT_MAX_HITS)
        budget = DeclarationIndex.__init__.__kwdefaults__["parse_budget_ms"]  # type: ignore[index]
        assert IndexConfig().parse_budget_ms == budget

    @pytest.mark.parametrize(
        "data",
        [
            {"query": "register_widget"},
            {"query": "def \\w+", "mode": "regex", "files": 5, "offset": 20, "hit_budget": 50},
            {"query": "x", "namespaces": ["al*"], "paths": ["src/**", "!vendor/**"], "languages": ["py", "go"]},
            {"query": "x", "case_sensitive": True, "context_lines": 2, "timeout_ms": 1000, "threshold": 1},
            {"query": "repo:alpha lang:python -file:tests/ x"},
            {"query": "x", "cursor": None},
        ],
    )
    def test_a_valid_request_reads_as_pydantic_reads_it(self, data: dict[str, Any]) -> None:
        """What the CLI sends is taken, with the values, criteria and next-action args SearchRequest has."""
        quick = quick_request(data)
        assert quick is not None
        slow = parse_request(data)
        assert quick.args() == slow.args() and quick.args(offset=3) == slow.args(offset=3)
        assert quick.criteria == slow.criteria and quick.effective_case() == slow.effective_case()

    @pytest.mark.parametrize(
        "data",
        [
            {"query": ""},
            {"query": "   "},
            {"query": "x" * 1001},
            {"query": "x", "files": 0},
            {"query": "x", "files": True},
            {"query": "x", "files": "3"},
            {"query": "x", "threshold": float("nan")},
            {"query": "x", "context_lines": 11},
            {"query": "x", "typo": 1},
            {"query": "(", "mode": "regex"},
            {"query": "x{", "mode": "regex"},
            {"query": "x", "languages": ["klingon"]},
            {"query": "x", "paths": ["a{b"]},
            {"query": "x", "namespaces": [""]},
            {"query": "case:maybe x"},
            {"query": "x", "cursor": "abc"},
            {"query": "x", "namespaces": ("a",)},
        ],
    )
    def test_anything_else_goes_to_pydantic(self, data: dict[str, Any]) -> None:
        """Bad or unusual input is not taken: the service's pydantic decides and words the error."""
        assert quick_request(data) is None

    @settings(max_examples=400, deadline=None)
    @given(
        st.one_of(
            st.fixed_dictionaries(
                {"query": st.sampled_from(QUERIES)}, optional={n: LIKELY[n] for n in list(DEFAULTS)[1:]}
            ),
            st.fixed_dictionaries(
                {"query": st.one_of(st.sampled_from(QUERIES), st.text(max_size=6), st.integers())},
                optional={name: st.one_of(LIKELY.get(name, VALUES), VALUES) for name in [*list(DEFAULTS)[1:], "typo"]},
            ),
        )
    )
    def test_never_takes_what_pydantic_refuses(self, data: dict[str, Any]) -> None:
        """Whatever it takes, SearchRequest takes too, and reads alike."""
        quick = quick_request(data)
        event("taken" if quick is not None else "left to pydantic")
        if quick is None:
            return
        slow = parse_request(data)
        assert quick.args() == slow.args()
        assert quick.criteria == slow.criteria and quick.effective_case() == slow.effective_case()


#: Requests over the test corpus: paths, languages, the query syntax, paging, context.
REQUESTS: list[dict[str, Any]] = [
    {"query": "register_widget"},
    {"query": "register_widget", "files": 1},
    {"query": "register_widget", "files": 1, "offset": 1, "hit_budget": 1},
    {"query": "zzz_nothing_here"},
    {"query": "Register", "case_sensitive": False, "context_lines": 2},
    {"query": "def \\w+_widget", "mode": "regex"},
    {"query": "register_widget", "paths": ["!vendor/**"], "languages": ["go", "python"]},
    {"query": "register_widget", "namespaces": ["team/*"]},
    {"query": "repo:alpha register_widget"},
    {"query": "-repo:alpha lang:go register_widget"},
    {"query": "sym:register register_widget"},
    {"query": "sym:register_widget"},  # the declarations named so: found only once files are made final
    {"query": "file:src/** register_widget", "paths": ["**/*.py"]},
    {"query": "needle"},
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_corpus(tmp_path / "src")
    (root / "gamma" / "needles.txt").write_text("".join(f"needle {n}\n" for n in range(300)))
    return root


def quick(root: Path, data: dict[str, Any], early: Early | None = None) -> dict[str, Any]:
    """The one-shot answer, from a process of its own (a fresh OneShot), given the rg ``early`` started."""
    request = quick_request(data)
    assert request is not None
    one = OneShot(discovered_scope(str(root)).roots)
    try:
        return one.search(request, early)
    finally:
        one.close()


async def served(root: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The service's answer, as the CLI ran it before (one service, no process cache)."""
    service = SearchService(config_from_env(root=str(root)), process_cache=False)
    try:
        return await service.search(parse_request(data))
    finally:
        await service.aclose()


class TestTheAnswer:
    @pytest.mark.parametrize("data", REQUESTS)
    async def test_the_services_answer_byte_for_byte(self, root: Path, data: dict[str, Any]) -> None:
        """The one-shot search answers what SearchService.search answers (invariant 10), timing aside.

        The first search parses its page's files on the spot (as far as the parse budget
        goes) and keeps them in the index: the answers compared come after it.
        """
        quick(root, data)
        expected = strip(await served(root, data))
        assert strip(quick(root, data)) == expected

    async def test_a_namespace_pattern_matching_nothing_is_the_same_error(self, root: Path) -> None:
        for data in (
            {"query": "x", "namespaces": ["nope*"]},
            {"query": "repo:nope x"},
            {"query": "repo:alpha x", "namespaces": ["gamma"]},
        ):
            with pytest.raises(InvalidRequest) as slow:
                await served(root, data)
            with pytest.raises(InvalidRequest) as fast:
                quick(root, data)
            assert (type(fast.value), fast.value.field, fast.value.message) == (
                type(slow.value),
                slow.value.field,
                slow.value.message,
            )

    @pytest.mark.parametrize(
        "data",
        [
            {"query": "sleep longer between attempts after an error", "mode": "semantic"},
            {"query": "parse a header value", "mode": "semantic", "threshold": 0.0, "files": 1},
            {"query": "lang:python retry", "mode": "semantic", "namespaces": ["web"]},
            {"query": "zzqx blorp", "mode": "semantic"},
        ],
    )
    async def test_a_search_by_meaning_byte_for_byte(self, tmp_path: Path, data: dict[str, Any]) -> None:
        """Where every namespace's intent index is built, the one-shot search by meaning (issue 52) answers what
        the service answers; where one is not, it leaves the search to the service (which builds it)."""
        from gateway.discovery import default_index_dir
        from gateway.index.store import Store
        from tests.test_semantic import FILES, _built

        root = make_corpus(tmp_path / "src", FILES)
        request = quick_request(data)
        assert request is not None
        one = OneShot(discovered_scope(str(root)).roots)
        try:
            assert one.semantic(request) is None  # nothing built yet: the service's turn
        finally:
            one.close()
        store = Store.open(default_index_dir())
        try:
            _built(store, root)
        finally:
            store.close()
        expected = strip(await served(root, data))
        one = OneShot(discovered_scope(str(root)).roots)
        try:
            answer = one.semantic(request)
        finally:
            one.close()
        assert answer is not None
        assert strip(answer) == expected
        assert ("sleep" not in data["query"]) or answer["files"]

    def test_nothing_matched_opens_no_index(self, root: Path) -> None:
        """Without a file to rank, the declaration index (SQLite, tree-sitter) is never opened."""
        request = quick_request({"query": "zzz_nothing_here"})
        assert request is not None
        one = OneShot(discovered_scope(str(root)).roots)
        one.search(request)
        assert one._index is None
        one.search(quick_request({"query": "register_widget"}))  # type: ignore[arg-type]
        assert one._index is not None
        one.close()


def backend_answer(root: str, query: SearchQuery, **settings: Any) -> BackendResult | BackendError:
    import asyncio

    async def ask() -> BackendResult:
        backend = RipgrepBackend("ns", RipgrepSettings.model_construct(root=root, **settings))
        async with backend:
            return await backend.search(query)

    try:
        return asyncio.run(ask())
    except BackendError as exc:
        return exc


def same(fast: BackendResult | BackendError, slow: BackendResult | BackendError) -> None:
    """The same answer: status, reason and files (paths and hits), or the same error. Capped, which
    files made it depends on the order rg's threads finish them in: then their number and hits."""
    if isinstance(slow, BackendError):
        assert isinstance(fast, BackendError) and (fast.reason, fast.status) == (slow.reason, slow.status)
        return
    assert isinstance(fast, BackendResult)
    assert (fast.status, fast.reason) == (slow.status, slow.reason)
    if slow.status == "capped":
        assert (len(fast.files), sum(map(len, (f.hits for f in fast.files)))) == (
            len(slow.files),
            sum(map(len, (f.hits for f in slow.files))),
        )
        return
    assert [(f.path, defines(f, None), tuple(f.hits)) for f in fast.files] == [
        (f.path, defines(f, None), tuple(f.hits)) for f in slow.files
    ]


class TestTheScan:
    """adapters.ripgrep.oneshot against RipgrepBackend (the fan-out's shared rg): the same answers."""

    @pytest.fixture
    def repo(self, tmp_path: Path) -> Path:
        files = {f"src/m{n}.py": "".join(f"def needle_{n}_{k}(): pass\n" for k in range(5)) for n in range(30)}
        return git_repo(tmp_path / "repo", {**files, "notes.txt": "needle\nnothing\nneedle again\n"})

    def answer(self, root: Path, query: SearchQuery, **settings: Any) -> BackendResult | BackendError:
        scan = start(
            find_rg(),
            {"ns": str(root)},
            query,
            tuple(settings.get("exclude", ())),
            **{k: v for k, v in settings.items() if k != "exclude"},
        )
        return scan.results()["ns"]

    @pytest.mark.parametrize(
        ("query", "settings"),
        [
            ({"text": "needle"}, {}),
            ({"text": "needle", "context_lines": 1}, {}),
            ({"text": "needle_1", "paths": ("!src/m1*.py",)}, {}),  # an anchored exclude: rg runs from the root
            ({"text": "needle", "paths": ("src/**",), "languages": ("python",)}, {"exclude": ["m2*.py"]}),
            ({"text": "needle", "mode": "regex", "case_sensitive": False}, {"max_hits": 7}),
            ({"text": "needle"}, {"max_files": 3}),
            ({"text": "(", "mode": "exact"}, {}),
        ],
    )
    def test_as_the_backend_answers(self, repo: Path, query: dict[str, Any], settings: dict[str, Any]) -> None:
        asked = SearchQuery(**query, deadline=time.monotonic() + 10)
        same(self.answer(repo, asked, **settings), backend_answer(str(repo), asked, **settings))

    def test_rg_failing_is_the_backends_error(self, tmp_path: Path) -> None:
        """rg refusing to search (here: a root gone since) is each namespace's error, as the backend says it."""
        gone = str(tmp_path / "gone")
        asked = SearchQuery(text="needle", deadline=time.monotonic() + 10)
        fast = start(find_rg(), {"ns": gone}, asked).results()["ns"]
        assert isinstance(fast, BackendError) and "gone" in fast.reason
        same(fast, backend_answer(gone, asked))

    def test_before_rg_starts(self, repo: Path) -> None:
        """No rg binary, or no time left: every namespace says so, as the backend does, and no rg runs."""
        late = SearchQuery(text="needle", deadline=time.monotonic() - 1)
        same(start(find_rg(), {"ns": str(repo)}, late).results()["ns"], backend_answer(str(repo), late))
        missing = start(None, {"a": str(repo), "b": str(repo)}, SearchQuery(text="needle")).results()
        assert {type(v) for v in missing.values()} == {BackendError} and "not found" in missing["a"].reason

    def test_several_roots_each_get_their_own_files(self, tmp_path: Path) -> None:
        a = git_repo(tmp_path / "a", {"x.txt": "needle\n"})
        b = git_repo(tmp_path / "ab", {"y.txt": "needle\nneedle\n"})  # a prefix of the other's name
        answers = start(find_rg(), {"a": str(a), "ab": str(b)}, SearchQuery(text="needle")).results()
        got = {name: [(f.path, len(f.hits)) for f in r.files] for name, r in answers.items()}  # type: ignore[union-attr]
        assert got == {"a": [("x.txt", 1)], "ab": [("y.txt", 2)]}

    def test_the_deadline_keeps_what_was_found_and_stops_rg(self, tmp_path: Path) -> None:
        """At the deadline each namespace is ``timeout`` with the files read so far; rg is killed and reaped."""
        root = git_repo(tmp_path / "big", {})
        (root / "many.txt").write_bytes(b"needle in a haystack\n" * 2_000_000)
        (root / "a.txt").write_text("needle\n")
        scan = start(find_rg(), {"ns": str(root)}, SearchQuery(text="needle", deadline=time.monotonic() + 0.05))
        answer = scan.results()["ns"]
        assert isinstance(answer, BackendResult) and answer.status == "timeout"
        assert answer.reason.startswith("stopped at the deadline after")
        assert rg_children() == set()

    def test_what_to_do_after_rg_starts_once_it_writes(self, tmp_path: Path) -> None:
        """``results(meanwhile)`` calls it while rg still runs, from its first output on (which fills
        the pipe, so rg cannot have ended), and never when rg writes nothing."""
        root = git_repo(tmp_path / "big", {"a.txt": "needle\n"})
        (root / "many.txt").write_bytes(b"needle in a haystack\n" * 60_000)  # 1.3 MB: more than a pipeful
        calls: list[int] = []
        scan = start(find_rg(), {"ns": str(root)}, SearchQuery(text="needle", deadline=time.monotonic() + 30))
        answer = scan.results(lambda: calls.append(len(scan.answers)))["ns"]
        assert isinstance(answer, BackendResult) and answer.status == "ok"
        assert calls and set(calls) == {0}  # every call came before rg's end (no namespace answered yet)
        quiet: list[int] = []
        scan = start(find_rg(), {"ns": str(root)}, SearchQuery(text="zzz_nothing", deadline=time.monotonic() + 30))
        assert scan.results(lambda: quiet.append(1))["ns"].status == "ok" and quiet == []  # type: ignore[union-attr]
        assert rg_children() == set()

    def test_when_every_namespace_is_capped_rg_is_stopped(self, tmp_path: Path) -> None:
        root = git_repo(tmp_path / "big", {f"f{n}.txt": "needle\n" * 50 for n in range(200)})
        scan = start(find_rg(), {"ns": str(root)}, SearchQuery(text="needle"), max_files=2)
        answer = scan.results()["ns"]
        assert isinstance(answer, BackendResult) and (answer.status, len(answer.files)) == ("capped", 2)
        assert rg_children() == set()
        assert not os.path.exists(f"/proc/{os.getpid()}/fd/{scan._stderr}") or scan._stderr == -1


class TestTheCommand:
    """`fedsearch search` in this process: the one-shot search, and the service where it is needed."""

    def test_a_listing_is_rgs_and_ranks_nothing(
        self, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        """-l over discovered checkouts lists every file the ranked pages hold, straight from rg: no
        one-shot search (no ranking, paging or declaration lookup) runs."""
        from gateway.cli import oneshot

        monkeypatch.chdir(root)
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        code, page, _ = run(capsys, "search", "register_widget", "--json", "--page-files", "200")
        ranked = {f"{f['namespace']}/{f['file_path']}" for f in json.loads(page)["files"]}

        def no_search(*_: Any) -> Any:
            raise AssertionError("a listing ran the one-shot search")

        monkeypatch.setattr(oneshot.OneShot, "search", no_search)
        code, listed, err = run(capsys, "search", "register_widget", "-l")
        assert (code, err) == (0, "") and sorted(listed.splitlines()) == sorted(ranked)

    def test_bad_input_is_worded_by_pydantic_as_before(
        self, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        monkeypatch.chdir(root)
        code, out, err = run(capsys, "search", "x", "--page-files", "0")
        assert (code, out) == (2, "")
        assert err == "fedsearch: invalid files: Input should be greater than or equal to 1\n"


class TestPathSignals:
    """The path signals ranking computes for every file (cold in a one-shot process), made cheap:
    the same answers as the regexes and posixpath alone."""

    PIECES = st.sampled_from(
        [
            *("/", ".", "_", "-", "a", "Z", "x", "ı", "İ", "ſ", "K", "\n", "é"),
            *("vendor", "Vendored", "dist", "tests", "TEST", "spec", "docs", "readme.md", "min.js", "pb2", "lock"),
            *("generated", "gen", "go", "fixtures", "__mocks__", "e2e", "bench", "stories", "conftest.py", "ipynb"),
        ]
    )

    @settings(max_examples=2000, deadline=None)
    @given(st.lists(PIECES, max_size=12).map("".join))
    def test_the_same_as_the_regexes(self, path: str) -> None:
        import posixpath

        from gateway import signals

        assert signals.demoted.__wrapped__(path) == (signals._DEMOTED().search(path) is not None)
        assert signals.secondary.__wrapped__(path) == (signals._SECONDARY().search(path) is not None)
        stem = posixpath.splitext(posixpath.basename(path))[0]
        assert signals.file_stem.__wrapped__(path) == signals.normal_name(stem)

    def test_the_folded_characters_are_all_there_are(self) -> None:
        """Outside ASCII, only these four match an ASCII letter under IGNORECASE."""
        import _sre
        import re._casefix

        from gateway import signals

        found = {i: chr(_sre.unicode_tolower(i)) for i in range(128, 0x110000) if _sre.unicode_tolower(i) < 128}
        for ascii_letter, others in re._casefix._EXTRA_CASES.items():
            found.update({other: chr(ascii_letter) for other in others if ascii_letter < 128 <= other})
        assert found == signals._FOLD


class TestTheProcess:
    """`fedsearch search` as a process of its own: it ends itself once its output is flushed."""

    def command(self, *argv: str) -> list[str]:
        import sys

        return [sys.executable, "-c", "from gateway.cli.main import main; raise SystemExit(main())", *argv]

    def test_the_whole_answer_and_the_exit_code(
        self, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        import subprocess

        monkeypatch.chdir(root)
        monkeypatch.delenv("FEDSEARCH_CONFIG", raising=False)
        done = subprocess.run(self.command("search", "register_widget", "--json"), capture_output=True, check=False)
        assert done.returncode == 0 and done.stderr == b""
        _, expected, _ = run(capsys, "search", "register_widget", "--json")
        assert strip(json.loads(done.stdout)) == strip(json.loads(expected))
        nothing = subprocess.run(self.command("search", "zzz_nothing_here"), capture_output=True, check=False)
        assert nothing.returncode == 1 and nothing.stdout == b""  # the summary is no result: stderr, off a terminal
        assert nothing.stderr.startswith(b"0 files matched\nnothing matched")

    def test_a_reader_that_leaves_early(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """`fedsearch search x -l | head -1`: exit 0, nothing said about the broken pipe."""
        import subprocess

        for n in range(3000):
            (root / "gamma" / f"f{n}.txt").write_text("needle\n")
        monkeypatch.chdir(root)
        proc = subprocess.Popen(self.command("search", "needle", "-l"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        assert proc.wait(timeout=60) == 0 and err == b""


class TestTheEarlyStart:
    """gateway.cli.early: rg started from the flags before the request is built, used only if it is the
    very rg the request asks for."""

    def spawns(self, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
        """Every rg the one-shot scan starts itself (not counting one started early)."""
        import adapters.ripgrep.oneshot as scan_module

        started: list[list[str]] = []
        real = scan_module.spawn

        def counted(argv: list[str], cwd: str | None = None) -> Any:
            started.append(argv)
            return real(argv, cwd)

        monkeypatch.setattr(scan_module, "spawn", counted)
        return started

    @pytest.mark.parametrize(
        "data",
        [
            {"query": "register_widget"},
            {"query": "Register", "case_sensitive": False},
            {"query": "needle", "context_lines": 2, "files": 3},
            {"query": r"regis\w+", "mode": "regex"},
        ],
    )
    def test_a_plain_query_is_answered_by_the_rg_started_early(
        self, root: Path, data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from gateway.cli.early import speculate

        expected = strip(quick(root, data))
        started = self.spawns(monkeypatch)
        roots = discovered_scope(str(root)).roots
        early = speculate(roots, data)
        assert early is not None
        assert strip(quick(root, data, early)) == expected
        assert started == [] and early.child is None  # adopted: no other rg was started
        assert rg_children() == set()

    def test_a_wrong_guess_is_killed_and_the_right_rg_answers(
        self, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An early rg whose vector is not the request's (here: started for another query) is killed and
        reaped; the answer is the request's own."""
        from gateway.cli.early import speculate

        data = {"query": "register_widget"}
        expected = strip(quick(root, data))
        started = self.spawns(monkeypatch)
        roots = discovered_scope(str(root)).roots
        wrong = speculate(roots, {"query": "needle"})
        assert wrong is not None and wrong.child is not None
        pid = wrong.child.pid
        assert strip(quick(root, data, wrong)) == expected
        assert len(started) == 1 and started[0][-len(roots) - 3 :][:2] == ["-e", "register_widget"]
        with pytest.raises(ChildProcessError):  # reaped
            os.waitpid(pid, os.WNOHANG)
        assert rg_children() == set()

    def test_an_early_rg_nobody_takes_is_reaped(self, root: Path) -> None:
        """A request that goes to the service, or fails validation, leaves no rg behind."""
        from gateway.cli.early import speculate

        early = speculate(discovered_scope(str(root)).roots, {"query": "needle"})
        assert early is not None and rg_children() != set()
        early.close()
        early.close()  # twice: nothing more happens
        assert rg_children() == set()
        one = OneShot(discovered_scope(str(root)).roots)
        late = quick_request({"query": "needle", "timeout_ms": 100})
        bad = speculate(one.roots, {"query": "needle", "timeout_ms": 100})
        assert bad is not None and late is not None
        time.sleep(0.15)  # the search's deadline (from the early start) passes before its scan
        answer = one.search(late, bad)
        one.close()
        assert [s["status"] for s in answer["namespaces"]] == ["timeout"] * len(one.roots)
        assert rg_children() == set()

    @pytest.mark.parametrize(
        "data",
        [
            {"query": "lang:go needle"},
            {"query": '"needle"'},
            {"query": "/needle/"},
            {"query": "needle", "namespaces": ["alpha"]},
            {"query": "needle", "paths": ["**/*.py"]},
            {"query": "needle", "languages": ["python"]},
            {"query": "needle", "mode": "semantic"},
            {"query": "needle", "case_sensitive": "yes"},
            {"query": "needle", "context_lines": 11},
            {"query": "   "},
            {"query": 3},
        ],
    )
    def test_what_it_cannot_guess_is_not_started(self, root: Path, data: dict[str, Any]) -> None:
        from gateway.cli.early import speculate

        assert speculate(discovered_scope(str(root)).roots, data) is None
        assert rg_children() == set()

    def test_it_imports_only_the_standard_library(self) -> None:
        """What starts rg early imports nothing that would delay it (msgspec, re2, the models)."""
        import subprocess
        import sys

        code = "import sys, gateway.cli.early; print(' '.join(sorted(sys.modules)))"
        modules = set(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        )
        ours = {m for m in modules if m.split(".")[0] in ("gateway", "adapters")}
        assert ours == {
            "gateway",
            "gateway.cli",
            "gateway.cli.early",
            "adapters",
            "adapters.ripgrep",
            "adapters.ripgrep.spawn",
        }
        assert {"msgspec", "re2", "typing_extensions", "gateway.models"}.isdisjoint(modules)


def test_sym_finds_the_declaration_one_shot(root: Path) -> None:
    """`sym:NAME` in the one-shot search keeps the declarations named so (issue 37: it found nothing)."""
    answer = quick(root, {"query": "sym:register_widget"})
    named = {(g["file_path"], h["qualified_name"], h["kind"]) for g in answer["files"] for h in g["hits"]}
    assert named and all(name == "register_widget" and kind == "function" for _, name, kind in named)
