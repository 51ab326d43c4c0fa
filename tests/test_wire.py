"""Request validation (SPEC §2): every bad input names its field."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequest
from gateway.models import BackendResult, FileMatch, Hit, Outcome
from gateway.query.request import SearchRequest, parse_request
from gateway.rank import rank
from gateway.wire import SearchResponse, build_response


def _field(data: Any) -> str:
    with pytest.raises(InvalidRequest) as info:
        parse_request(data)
    return info.value.field


class TestRequestValidation:
    def test_defaults(self) -> None:
        """A bare query takes the contract's defaults."""
        r = parse_request({"query": "x"})
        assert (r.mode, r.files, r.offset, r.hit_budget, r.timeout_ms, r.threshold, r.context_lines) == (
            "exact",
            20,
            0,
            100,
            5000,
            0.5,
            0,
        )

    @pytest.mark.parametrize(
        ("data", "field"),
        [
            ({}, "query"),
            ({"query": ""}, "query"),
            ({"query": "   "}, "query"),
            ({"query": "x" * 1001}, "query"),
            ({"query": "x", "mode": "fuzzy"}, "mode"),
            ({"query": "x", "files": 0}, "files"),
            ({"query": "x", "files": 201}, "files"),
            ({"query": "x", "offset": -1}, "offset"),
            ({"query": "x", "offset": 100_001}, "offset"),
            ({"query": "x", "hit_budget": 0}, "hit_budget"),
            ({"query": "x", "hit_budget": 5001}, "hit_budget"),
            ({"query": "x", "timeout_ms": 99}, "timeout_ms"),
            ({"query": "x", "timeout_ms": 60_001}, "timeout_ms"),
            ({"query": "x", "threshold": 1.5}, "threshold"),
            ({"query": "x", "context_lines": 11}, "context_lines"),
            ({"query": "x", "languages": ["klingon"]}, "languages"),
            ({"query": "x", "paths": ["src/[abc"]}, "paths"),
            ({"query": "x", "paths": ["x"] * 33}, "paths"),
            ({"query": "x", "querry": "typo"}, "querry"),
            ({"query": "(unclosed", "mode": "regex"}, "query"),
            ({"query": "(a)\\1", "mode": "regex"}, "query"),
            ({"query": "(?=look)", "mode": "regex"}, "query"),
            ({"query": "a{", "mode": "regex"}, "query"),
            ({"query": "x{,5}", "mode": "regex"}, "query"),
            ({"query": "\\Qa.b\\E", "mode": "regex"}, "query"),
            ({"query": "\\C", "mode": "regex"}, "query"),
            ({"query": "a\\nb", "mode": "regex"}, "query"),
            ({"query": "[\\x0A]", "mode": "regex"}, "query"),
            (["not", "an", "object"], "body"),
        ],
    )
    def test_bad_input_names_the_field(self, data: Any, field: str) -> None:
        """Each kind of bad input is rejected with an error naming the offending field."""
        assert _field(data) == field

    def test_unknown_field_says_so(self) -> None:
        """An unknown field is rejected as unknown, so a typo never widens a search."""
        with pytest.raises(InvalidRequest, match="unknown field"):
            parse_request({"query": "x", "namespace": ["a"]})

    def test_a_regex_naming_a_line_break_is_refused(self) -> None:
        """Searches are line by line: a regex naming a line break is refused up front (rg would
        fail every local namespace with it), an escaped backslash before an ``n`` is not."""
        with pytest.raises(InvalidRequest, match="line break at 2"):
            parse_request({"query": "a\\nb", "mode": "regex"})
        assert parse_request({"query": "a\\\\nb", "mode": "regex"}).query == "a\\\\nb"

    def test_regex_rejected_by_re2_before_fan_out(self) -> None:
        """A regex RE2 cannot compile is refused with RE2's reason."""
        with pytest.raises(InvalidRequest, match="RE2"):
            parse_request({"query": "a{1,100000}", "mode": "regex"})

    def test_portable_regexes_pass(self) -> None:
        """Repetitions, escaped braces, classes and Unicode classes are accepted."""
        for pattern in ("a{2}", "a{2,}", "a{2,3}", "\\{x\\}", "[{}]", "\\p{Greek}+", "(?i)foo"):
            assert parse_request({"query": pattern, "mode": "regex"}).query == pattern

    def test_smart_case(self) -> None:
        """null case_sensitive means sensitive iff the query has an upper-case letter."""
        assert not parse_request({"query": "foo"}).effective_case()
        assert parse_request({"query": "Foo"}).effective_case()
        assert not parse_request({"query": "Foo", "case_sensitive": False}).effective_case()

    def test_languages_are_normalised(self) -> None:
        """Language aliases map to canonical names."""
        assert parse_request({"query": "x", "languages": ["py", "Go"]}).languages == ["python", "go"]

    def test_args_round_trip(self) -> None:
        """A request's args validate back into the same request."""
        r = parse_request({"query": "x", "paths": ["!vendor/**"], "files": 3})
        assert SearchRequest.model_validate(r.args()) == r


def _ids(path: str, spans: list[tuple[int, int]]) -> list[int]:
    """The hit ids of a file whose hits are declarations of these spans (a span of one line: a matched
    line outside any, which the file's own hit holds)."""
    request = parse_request({"query": "x"})
    hits = tuple(
        Hit(line=a, text="x")
        if a == b
        else Hit(line=a, end_line=b, text="x", kind="function", symbol=f"f{a}", lines=(Hit(line=a, text="x"),))
        for a, b in spans
    )
    result = BackendResult(files=(FileMatch(path=path, hits=hits),))
    outcome = Outcome(namespace="ns", backend="mock", status="ok", took_ms=1, result=result)
    answer = build_response(request, rank(request, [outcome]), 1)
    return [hit["id"] for hit in answer["files"][0]["hits"]]


class TestIds:
    def test_hit_id_is_stable_and_below_2_53(self) -> None:
        """The same hit has the same id on every call, below 2**53; different hits differ (the file's own
        hit spans line 1 to its last matched line)."""
        first = _ids("a.py", [(3, 3), (5, 9)])
        assert first == _ids("a.py", [(3, 3), (5, 9)])
        assert all(0 <= i < 2**53 for i in first)
        assert first[0] != first[1]
        assert _ids("b.py", [(3, 3), (5, 9)])[0] != first[0]
        assert _ids("a.py", [(4, 4), (5, 9)])[0] != first[0]

    def test_hit_id_does_not_depend_on_the_other_hits(self) -> None:
        """A hit's id is derived from its namespace, path and span only."""
        assert _ids("a.py", [(5, 9), (20, 30)])[0] == _ids("a.py", [(5, 9)])[0]
        assert _ids("a.py", [(3, 3), (5, 9)])[1] == _ids("a.py", [(5, 9)])[0]


class TestSchema:
    def test_response_schema_has_contract_fields(self) -> None:
        """The answer's JSON schema names every field of SPEC §3."""
        props = SearchResponse.model_json_schema()["properties"]
        assert set(props) == {
            "files",
            "file_count",
            "weak_filtered",
            "truncated",
            "limits",
            "next",
            "note",
            "namespaces",
            "took_ms",
        }
