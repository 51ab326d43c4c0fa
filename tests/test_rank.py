"""Fusion, paging and next actions: the invariants of SPEC §3, as properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gateway.index.hits import Outline, as_declarations
from gateway.index.parse import Declaration
from gateway.models import BackendResult, FileMatch, Hit, Outcome, gather, gathered
from gateway.query.request import SearchRequest, parse_request
from gateway.rank import EXACT, Known, RankedFile, Resolve, fuse, rank
from gateway.sizing import MAX_CHAR_BUDGET, file_chars
from gateway.wire import build_response
from tests.corpus import matched_lines
from tests.strategies import outcomes, request_args


def _answer(request: SearchRequest, outs: list[Outcome]) -> dict[str, Any]:
    return build_response(request, rank(request, outs), took_ms=0)


def _keys(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(g["namespace"], g["file_path"]) for g in answer["files"]]


def _next_page(answer: dict[str, Any]) -> dict[str, Any] | None:
    for action in answer.get("next", []):
        if action["reason"].startswith("next page"):
            args: dict[str, Any] = action["args"]
            return args
    return None


class TestInvariants:
    @given(outcomes(), request_args())
    def test_shown_files_are_whole(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 1: every shown file carries all of its hits."""
        request = parse_request(args)
        answer = _answer(request, outs)
        sources = {(o.namespace, f.path): len(gather(f.hits, f.path)) for o in outs if o.result for f in o.result.files}
        for group in answer["files"]:
            assert group["hit_count"] == len(group["hits"])
            assert group["hit_count"] == sources[(group["namespace"], group["file_path"])]

    @given(outcomes(), request_args())
    def test_every_matched_line_belongs_to_the_files_own_hit(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """SPEC §3: with no declarations known, a shown file has ONE hit, kind file, holding each matched line
        once, in order, counted in line_count; no hit has a text or column of its own."""
        request = parse_request({**args, "hit_lines": None, "char_budget": MAX_CHAR_BUDGET})
        answer = _answer(request, outs)
        sources = {(o.namespace, f.path): [h.line for h in f.hits] for o in outs if o.result for f in o.result.files}
        for group in answer["files"]:
            (hit,) = group["hits"]
            lines = [line["line"] for line in hit["lines"]]
            assert hit["kind"] == "file" and hit["qualified_name"] == group["file_path"]
            assert lines == sorted(sources[(group["namespace"], group["file_path"])]) == matched_lines(group)
            assert hit["line_count"] == len(lines) and (hit["start_line"], hit["end_line"]) == (1, lines[-1])
            assert "text" not in hit and "column" not in hit

    @given(outcomes(), request_args())
    def test_next_iff_truncated(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 2: next is non-empty exactly when the answer is truncated."""
        answer = _answer(parse_request(args), outs)
        assert bool(answer.get("next")) == answer["truncated"]

    @given(outcomes(), request_args())
    def test_next_args_are_complete_requests(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 3: each next action names `search` and carries a complete, valid request."""
        answer = _answer(parse_request(args), outs)
        for action in answer.get("next", []):
            assert action["tool"] == "search"
            parsed = parse_request(action["args"])
            assert set(action["args"]) == set(SearchRequest.model_fields)
            assert parsed.query == args["query"]

    @given(outcomes(statuses=False), request_args())
    def test_paging_yields_every_file_once_in_one_order(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 4: following next-page from offset 0 reaches every file once, in global order."""
        request = parse_request(args)
        seen: list[tuple[str, str]] = []
        pages = 0
        while True:
            answer = _answer(request, outs)
            seen.extend(_keys(answer))
            follow = _next_page(answer)
            if follow is None:
                break
            request = parse_request(follow)
            pages += 1
            assert pages < 200
        everything = [(f.namespace, f.file.path) for f in fuse(parse_request(args), outs)[0]]
        assert seen == everything
        assert len(set(seen)) == len(seen)

    @given(outcomes(), request_args(), st.integers(min_value=1, max_value=60))
    def test_a_limited_fusion_is_the_first_files_of_the_whole(
        self, outs: list[Outcome], args: dict[str, Any], limit: int
    ) -> None:
        """fuse(limit=k) puts only k files in order (a heap selection): they are the whole order's first k."""
        request = parse_request(args)
        whole, part = fuse(request, outs), fuse(request, outs, limit=limit)
        assert part.ordered == whole.ordered[:limit]
        assert (part.total, part.weak, part.counts) == (len(whole.ordered), whole.weak, whole.counts)

    @given(outcomes(), request_args(), st.randoms())
    def test_order_does_not_depend_on_arrival(self, outs: list[Outcome], args: dict[str, Any], rnd: Any) -> None:
        """Invariant 5: the answer is the same whatever order the outcomes come in."""
        request = parse_request(args)
        shuffled = list(outs)
        rnd.shuffle(shuffled)
        first, second = _answer(request, outs), _answer(request, shuffled)
        assert first == second

    @given(outcomes(), request_args())
    def test_budget_rule(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 6: first file always joins; others only within the hit and character budgets; at
        most `files`; the page stops at the first file that would pass either."""
        request = parse_request(args)
        ranked = rank(request, outs)
        answer = build_response(request, ranked, 0)
        ordered = fuse(request, outs)[0]
        groups = answer["files"]
        assert len(groups) <= request.files
        if ordered:
            assert groups, "the first file always joins"
        lines = answer["limits"]["hit_lines"]
        total = sum(g["hit_count"] for g in groups)
        chars = sum(file_chars(item.file, item.namespace, lines) for item in ranked.page)
        room = ranked.room  # char_budget less the answer's other fields, never under half of it
        assert request.char_budget // 2 <= room <= request.char_budget
        if len(groups) > 1:
            assert total <= request.hit_budget and chars <= room
        if len(groups) < len(ordered) and len(groups) < request.files and groups:
            following = ordered[len(groups)]
            following = following._replace(file=gathered(following.file))
            assert (
                total + len(following.file.hits) > request.hit_budget
                or chars + file_chars(following.file, following.namespace, lines) > room
            )

    @given(outcomes(), request_args())
    def test_empty_answer_has_a_note(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 9: an empty answer always says why."""
        answer = _answer(parse_request(args), outs)
        if not answer["files"]:
            assert answer.get("note")

    @given(outcomes(), request_args())
    def test_every_namespace_has_a_status(self, outs: list[Outcome], args: dict[str, Any]) -> None:
        """Invariant 8: every namespace asked appears in namespaces with its status."""
        answer = _answer(parse_request(args), outs)
        assert [s["name"] for s in answer["namespaces"]] == sorted(o.namespace for o in outs)
        for status in answer["namespaces"]:
            original = next(o for o in outs if o.namespace == status["name"])
            assert status["status"] == original.status

    @settings(max_examples=200)
    @given(outcomes(statuses=False), request_args(), st.data())
    def test_higher_weight_never_lowers_a_file(
        self, outs: list[Outcome], args: dict[str, Any], data: st.DataObject
    ) -> None:
        """Raising one namespace's weight never moves any of its files down the order."""
        request = parse_request(args)
        index = data.draw(st.integers(0, len(outs) - 1))
        boosted = list(outs)
        boosted[index] = replace(outs[index], weight=outs[index].weight * 2)
        name = outs[index].namespace
        before = [(f.namespace, f.file.path) for f in fuse(request, outs)[0]]
        after = [(f.namespace, f.file.path) for f in fuse(request, boosted)[0]]
        for key in before:
            if key[0] == name:
                assert after.index(key) <= before.index(key)


@st.composite
def _declarations(draw: st.DrawFn, low: int = 1, high: int = 400, depth: int = 0) -> list[tuple[int, int, int]]:
    """Properly nested (start, end, depth) spans inside [low, high], outer before inner."""
    points = sorted(draw(st.lists(st.integers(low, high), unique=True, max_size=6 if depth == 0 else 4)))
    out: list[tuple[int, int, int]] = []
    for start, end in zip(points[::2], points[1::2], strict=False):
        out.append((start, end, depth))
        if depth < 2 and end - start > 2 and draw(st.booleans()):
            out.extend(draw(_declarations(start + 1, end, depth + 1)))
    return sorted(out, key=lambda d: (d[0], d[2]))


def _as_index(spans: list[tuple[int, int, int]]) -> list[Declaration]:
    """Declarations with parents from nested spans (outer before inner)."""
    out: list[Declaration] = []
    for start, end, _ in spans:
        parent = max((i for i, d in enumerate(out) if d.start_line <= start and end <= d.end_line), default=-1)
        out.append(Declaration("function", f"f{start}", f"f{start}", start, end, "", parent))
    return out


def _grouping(index: dict[tuple[str, str], list[Declaration]]) -> Resolve:
    """A resolve step that groups every window file's hits by its declarations (no I/O)."""

    def resolve(ordered: list[RankedFile], offset: int, files: int, budget: int) -> list[RankedFile]:
        out = list(ordered)
        for i in range(offset, min(len(out), offset + files)):
            item = out[i]
            decls = index.get((item.namespace, item.file.path))
            if decls:
                hits = as_declarations(item.file.hits, Outline.of(decls), item.file.path)
                out[i] = item._replace(file=FileMatch(path=item.file.path, hits=hits, namespace=item.file.namespace))
        return out

    return resolve


class TestInvariantsWithDeclarations:
    """The invariants hold when a page's hits are declarations, and every matched line is in exactly one."""

    @staticmethod
    def _resolve(outs: list[Outcome], data: st.DataObject) -> Resolve:
        index = {}
        for o in outs:
            for f in o.result.files if o.result else ():
                index[(o.namespace, f.path)] = _as_index(data.draw(_declarations()))
        return _grouping(index)

    @given(outcomes(), request_args(), st.data())
    def test_every_matched_line_is_in_exactly_one_hit_of_its_file(
        self, outs: list[Outcome], args: dict[str, Any], data: st.DataObject
    ) -> None:
        """A shown file's hits hold each of its matched lines once (every line listed); hit ids are unique."""
        request = parse_request({**args, "hit_lines": None, "char_budget": MAX_CHAR_BUDGET})
        answer = build_response(request, rank(request, outs, resolve=self._resolve(outs, data)), took_ms=0)
        sources = {(o.namespace, f.path): [h.line for h in f.hits] for o in outs if o.result for f in o.result.files}
        for group in answer["files"]:
            assert sorted(matched_lines(group)) == sorted(sources[(group["namespace"], group["file_path"])])
            ids = [h["id"] for h in group["hits"]]
            assert len(set(ids)) == len(ids) and group["hit_count"] == len(group["hits"])

    @given(outcomes(), request_args(), st.data())
    def test_a_declaration_lists_its_first_lines_and_counts_them_all(
        self, outs: list[Outcome], args: dict[str, Any], data: st.DataObject
    ) -> None:
        """Past ``limits.hit_lines`` (at most the request's) a hit lists only its first lines, and ``line_count``
        counts them all: together (the file's own hit's and the declarations'), every matched line of the file."""
        request = parse_request(args)
        answer = build_response(request, rank(request, outs, resolve=self._resolve(outs, data)), took_ms=0)
        listed = answer["limits"]["hit_lines"]
        asked = request.hit_lines
        assert asked is None or (listed is not None and listed <= asked)
        sources = {(o.namespace, f.path): [h.line for h in f.hits] for o in outs if o.result for f in o.result.files}
        for group in answer["files"]:
            counted = 0
            for hit in group["hits"]:
                assert "text" not in hit and "column" not in hit
                lines = [line["line"] for line in hit.get("lines", [])]
                expected = hit["line_count"] if listed is None else min(hit["line_count"], listed)
                assert lines == sorted(lines) and len(lines) == expected
                assert all(hit["start_line"] <= n <= hit["end_line"] for n in lines)
                counted += hit["line_count"]
            assert counted == len(sources[(group["namespace"], group["file_path"])])

    @given(outcomes(statuses=False), request_args(), st.data())
    def test_paging_yields_every_file_once_and_the_budget_counts_declarations(
        self, outs: list[Outcome], args: dict[str, Any], data: st.DataObject
    ) -> None:
        """Invariants 4 and 6 with declaration hits: every file once, in order; a page's hits within budget."""
        resolve = self._resolve(outs, data)
        request = parse_request(args)
        seen: list[tuple[str, str]] = []
        for _ in range(200):
            answer = build_response(request, rank(request, outs, resolve=resolve), took_ms=0)
            seen.extend(_keys(answer))
            if len(answer["files"]) > 1:
                assert sum(g["hit_count"] for g in answer["files"]) <= request.hit_budget
            follow = _next_page(answer)
            if follow is None:
                break
            request = parse_request(follow)
        assert seen == [(f.namespace, f.file.path) for f in fuse(parse_request(args), outs)[0]]


def _outcome(name: str, paths: list[str], status: str = "ok", **kw: Any) -> Outcome:
    files = tuple(FileMatch(path=p, hits=(Hit(line=1, text="x = foo"),)) for p in paths)
    return Outcome(
        namespace=name,
        backend="mock",
        status=status,  # type: ignore[arg-type]
        took_ms=1,
        result=BackendResult(files=files, status=status),
        **kw,  # type: ignore[arg-type]
    )


def _single(file: FileMatch) -> Outcome:
    return Outcome(namespace="a", backend="m", status="ok", took_ms=0, result=BackendResult(files=(file,)))


class TestSignals:
    def test_query_in_file_name_ranks_first(self) -> None:
        """A file whose name contains the query beats one at the same backend rank."""
        request = parse_request({"query": "widget"})
        ordered = fuse(request, [_outcome("a", ["src/x.py"]), _outcome("b", ["src/widget.py"])])[0]
        assert ordered[0].file.path == "src/widget.py"

    def test_vendored_and_minified_files_are_demoted(self) -> None:
        """Vendored and minified files sink below ordinary ones."""
        request = parse_request({"query": "foo"})
        ordered = fuse(request, [_outcome("a", ["vendor/a.py", "b.min.js", "src/c.py"])])[0]
        assert ordered[0].file.path == "src/c.py"

    def test_definitions_rank_above_uses(self) -> None:
        """A file whose hit looks like a definition ranks above a plain use."""
        request = parse_request({"query": "foo"})
        use = FileMatch(path="a.py", hits=(Hit(line=1, text="x = foo()"),))
        definition = FileMatch(path="b.py", hits=(Hit(line=3, text="def foo():"),))
        outs = [
            Outcome(namespace="n", backend="m", status="ok", took_ms=0, result=BackendResult(files=(use,))),
            Outcome(namespace="o", backend="m", status="ok", took_ms=0, result=BackendResult(files=(definition,))),
        ]
        assert fuse(request, outs)[0][0].file.path == "b.py"

    def test_a_definition_of_another_name_is_not_a_definition(self) -> None:
        """`class X(foo):` uses foo: only a line that defines the query's own name counts."""
        request = parse_request({"query": "foo"})
        base = FileMatch(path="a.py", hits=(Hit(line=1, text="class X(foo):"),))
        other = FileMatch(path="b.py", hits=(Hit(line=1, text="y = foo"),))
        outs = [Outcome(namespace="n", backend="m", status="ok", took_ms=0, result=BackendResult(files=(base, other)))]
        assert [f.score for f in fuse(request, outs)[0]] == [1 / 61, 1 / 62]

    def test_the_index_overrides_the_regex_test(self) -> None:
        """Where the declaration index knows a file, its word decides; elsewhere the regex test does."""
        request = parse_request({"query": "foo"})
        looks = FileMatch(path="a.py", hits=(Hit(line=1, text="def foo():"),))  # in a docstring, say
        plain = FileMatch(path="b.py", hits=(Hit(line=1, text="foo = make()"),))
        outs = [Outcome(namespace="n", backend="m", status="ok", took_ms=0, result=BackendResult(files=(looks, plain)))]
        known = {"n": Known({"b.py": EXACT}, frozenset({"a.py", "b.py"}))}
        assert [f.file.path for f in fuse(request, outs, definitions=known)[0]] == ["b.py", "a.py"]
        assert [f.file.path for f in fuse(request, outs, definitions={"n": Known({}, frozenset())})[0]] == [
            "a.py",
            "b.py",
        ]

    @pytest.mark.parametrize(
        ("query", "path"),
        [("MultiDict", "multidict.py"), ("environment", "Environment.java"), ("url_for", "urlfor.go")],
    )
    def test_the_file_name_matches_ignoring_case_and_separators(self, query: str, path: str) -> None:
        """A file named after the name asked about ranks first, however either is spelt."""
        ordered = fuse(parse_request({"query": query}), [_outcome("a", ["src/x.py", f"src/{path}"])])[0]
        assert ordered[0].file.path == f"src/{path}"

    def test_tests_examples_and_docs_sink_for_a_name(self) -> None:
        """For an identifier, tests, examples and docs rank below the code; for a phrase they do not."""
        paths = ["tests/test_a.py", "examples/b.py", "docs/c.md", "pkg/d_test.go", "src/e.py"]
        ordered = fuse(parse_request({"query": "foo"}), [_outcome("a", paths)])[0]
        assert ordered[0].file.path == "src/e.py"
        ordered = fuse(parse_request({"query": "foo bar"}), [_outcome("a", paths)])[0]
        assert ordered[0].file.path == "tests/test_a.py"

    def test_ties_break_by_namespace_then_path(self) -> None:
        """Equal scores order by namespace, then path."""
        request = parse_request({"query": "zzz"})
        ordered = fuse(request, [_outcome("b", ["x.txt"]), _outcome("a", ["y.txt"])])[0]
        assert [(f.namespace, f.file.path) for f in ordered] == [("a", "y.txt"), ("b", "x.txt")]


class TestDuplicates:
    @staticmethod
    def _file(path: str, lines: list[int], namespace: str = "") -> FileMatch:
        return FileMatch(path=path, hits=tuple(Hit(line=n, text="foo") for n in lines), namespace=namespace)

    def test_a_file_named_twice_keeps_its_first_place_and_every_hit(self) -> None:
        """A backend naming one file twice: one file, at its first place, its hits merged, counted once."""
        request = parse_request({"query": "zzz"})
        files = (self._file("a.py", [1, 5]), self._file("b.py", [2]), self._file("a.py", [5, 9]))
        outs = [Outcome(namespace="n", backend="m", status="ok", took_ms=0, result=BackendResult(files=files))]
        ordered, _, _, counts = fuse(request, outs)
        assert [(f.file.path, [h.line for h in f.file.hits]) for f in ordered] == [("a.py", [1, 5, 9]), ("b.py", [2])]
        assert ordered[0].score > ordered[1].score  # a.py kept place 1
        assert counts == {"n": (2, 4)}
        assert rank(request, outs).statuses[0]["hits"] == 4

    def test_a_sub_namespace_file_named_twice_is_counted_under_it(self) -> None:
        """Sub-namespaces (a peer's) count their own files, duplicates merged, next to the parent's."""
        request = parse_request({"query": "zzz"})
        files = (self._file("a.py", [1]), self._file("a.py", [1], "s"), self._file("a.py", [2], "s"))
        outs = [Outcome(namespace="p", backend="gateway", status="ok", took_ms=0, result=BackendResult(files=files))]
        ordered, _, _, counts = fuse(request, outs)
        assert sorted((f.namespace, len(f.file.hits)) for f in ordered) == [("p", 1), ("p/s", 2)]
        assert counts == {"p": (1, 1), "p/s": (1, 2)}


class TestWording:
    def test_the_next_page_range_is_the_next_page(self) -> None:
        """When the budget cut a page short, the next-page reason names the files the next page holds."""
        request = parse_request({"query": "foo", "files": 20, "hit_budget": 3})
        answer = _answer(request, [_outcome("a", [f"f{i:02d}.py" for i in range(30)])])
        assert len(answer["files"]) == 3
        (action,) = answer["next"]
        assert action["reason"] == "next page: files 4-6 of 30"
        following = _answer(parse_request(action["args"]), [_outcome("a", [f"f{i:02d}.py" for i in range(30)])])
        assert len(following["files"]) == 3 and following["limits"]["offset"] == 3

    def test_the_last_file_alone_is_one_file(self) -> None:
        """A next page holding one file says so in the singular."""
        request = parse_request({"query": "foo", "files": 2})
        answer = _answer(request, [_outcome("a", ["a.py", "b.py", "c.py"])])
        assert answer["next"][0]["reason"] == "next page: file 3 of 3"

    def test_one_namespace_is_singular(self) -> None:
        """'in 1 namespace', never '1 namespaces'."""
        answer = _answer(parse_request({"query": "zzz"}), [_outcome("a", [])])
        assert answer["note"] == "nothing matched 'zzz' in 1 namespace"

    def test_the_query_is_quoted_as_typed(self) -> None:
        """A query's backslashes are not doubled in the note."""
        answer = _answer(parse_request({"query": r"def \w+_x\("}), [_outcome("a", [])])
        assert answer["note"] == r"nothing matched 'def \w+_x\(' in 1 namespace"

    def test_a_timeout_says_timed_out_once(self) -> None:
        """A backend whose error is 'timed out' is not described as 'timed out (timed out)'."""
        request = parse_request({"query": "foo", "timeout_ms": 1000})
        answer = _answer(request, [_outcome("a", [], "timeout", error="timed out")])
        assert answer["next"][0]["reason"] == "a timed out: give it 4000 ms alone"


class TestNextActions:
    def test_capped_namespace_gets_search_alone(self) -> None:
        """A capped namespace makes the answer truncated with a next action searching it alone."""
        request = parse_request({"query": "foo"})
        answer = _answer(request, [_outcome("a", ["x.py"], "capped", error="cap"), _outcome("b", ["y.py"])])
        assert answer["truncated"]
        alone = [a for a in answer["next"] if a["args"]["namespaces"] == ["a"]]
        assert alone and "alone" in alone[0]["reason"]

    def test_capped_alone_namespace_is_narrowed(self) -> None:
        """A capped namespace searched alone gets narrowing actions on its biggest directory."""
        request = parse_request({"query": "foo", "namespaces": ["a"]})
        answer = _answer(request, [_outcome("a", ["src/x.py", "src/y.py", "z.py"], "capped")])
        paths = [a["args"]["paths"] for a in answer["next"]]
        assert ["src/**"] in paths and ["!src/**"] in paths

    def test_timeout_gets_more_time(self) -> None:
        """A timed-out namespace gets a next action with a longer deadline."""
        request = parse_request({"query": "foo", "timeout_ms": 1000})
        answer = _answer(request, [_outcome("a", [], "timeout")])
        assert answer["next"][0]["args"]["timeout_ms"] == 4000

    def test_unsupported_namespaces_get_one_combined_fallback(self) -> None:
        """Namespaces that cannot search by meaning get ONE exact-mode action naming them all."""
        request = parse_request({"query": "parse config", "mode": "semantic"})
        outs = [
            Outcome(
                namespace=n, backend="rg", status="unsupported", took_ms=0, error="rg cannot search in semantic mode"
            )
            for n in ("a", "b", "c")
        ]
        answer = _answer(request, outs)
        (action,) = answer["next"]
        assert action["args"]["mode"] == "exact" and action["args"]["namespaces"] == ["a", "b", "c"]
        assert action["reason"].startswith("3 namespaces (a, b, c) cannot search in semantic mode")

    def test_unsupported_is_not_a_failure(self) -> None:
        """An answer where no namespace can do the mode says so; it does not say every namespace failed."""
        request = parse_request({"query": "parse config", "mode": "semantic"})
        outs = [Outcome(namespace="a", backend="rg", status="unsupported", took_ms=0, error="no")]
        note = _answer(request, outs)["note"]
        assert not note.startswith("every namespace failed")
        assert note.startswith("no namespace asked can search in semantic mode (a)")

    def test_failures_beside_unsupported_are_every_namespace_failed(self) -> None:
        """When the namespaces that could do the mode all failed, the note says every namespace failed."""
        request = parse_request({"query": "x", "mode": "semantic"})
        outs = [
            Outcome(namespace="a", backend="rg", status="unsupported", took_ms=0, error="no"),
            _outcome("b", [], "error", error="boom"),
        ]
        assert _answer(request, outs)["note"].startswith("every namespace failed: b (error)")

    def test_offset_past_the_end_says_so(self) -> None:
        """An offset beyond the last file gives an empty page with a note saying why."""
        request = parse_request({"query": "foo", "offset": 50})
        answer = _answer(request, [_outcome("a", ["x.py"])])
        assert answer["files"] == [] and "past the last" in answer["note"]
        assert not answer["truncated"]

    def test_weak_hits_are_filtered_and_counted(self) -> None:
        """Semantic hits under the threshold are dropped, counted and explained."""
        request = parse_request({"query": "foo", "mode": "semantic", "threshold": 0.6})
        weak = (Hit(line=1, text="x", score=0.2), Hit(line=2, text="y", score=0.3))
        file = FileMatch(path="a.py", hits=weak)
        outs = [_single(file)]
        answer = _answer(request, outs)
        assert answer["weak_filtered"] == 2
        assert answer["files"] == [] and "weak" in answer["note"]

    def test_score_present_iff_semantic(self) -> None:
        """ResultItem.score appears in semantic mode only."""
        file = FileMatch(path="a.py", hits=(Hit(line=1, text="x", score=0.9),))
        outs = [_single(file)]
        semantic = _answer(parse_request({"query": "x", "mode": "semantic"}), outs)
        exact = _answer(parse_request({"query": "x"}), outs)
        assert semantic["files"][0]["hits"][0]["score"] == 0.9
        assert "score" not in exact["files"][0]["hits"][0]


class TestFilesOwnHit:
    @given(
        st.lists(st.integers(1, 60), max_size=25),
        st.booleans(),
        st.lists(st.tuples(st.integers(1, 60), st.integers(0, 20)), max_size=4),
    )
    def test_every_matched_line_belongs_to_exactly_one_hit(
        self, numbers: list[int], path_match: bool, spans: list[tuple[int, int]]
    ) -> None:
        """gather: whatever lines (repeated, unordered), path hits and declarations a file holds, each matched
        line is in exactly one hit, the file's own first; gathering again changes nothing."""
        lines = [Hit(line=n, text=f"t{n}", column=1) for n in numbers]
        path = [Hit(line=1, text="a/b.py", kind="file")] if path_match else []
        declared = [
            Hit(line=s, end_line=s + n, text="", kind="function", symbol=f"f{s}", lines=(Hit(line=s, text="d"),))
            for s, n in spans
        ]
        hits = gather([*path, *lines, *declared], "a/b.py")
        own = [hit for hit in hits if hit.kind == "file"]
        assert len(own) == (1 if lines or path_match else 0) and (not own or hits[0] is own[0])
        if own:
            assert [h.line for h in own[0].lines] == sorted(set(numbers))
            assert own[0].line == 1 and own[0].last_line == max([1, *numbers])
        assert [h for h in hits if h.kind != "file"] == declared
        assert gather(hits, "a/b.py") == hits
